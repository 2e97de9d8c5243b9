//! Fuzz target `kernel_write` (see the crate documentation).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    weft_fuzz::kernel_write(data);
});
