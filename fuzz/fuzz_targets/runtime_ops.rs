//! Fuzz target `runtime_ops` (see the crate documentation).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    weft_fuzz::runtime_ops(data);
});
