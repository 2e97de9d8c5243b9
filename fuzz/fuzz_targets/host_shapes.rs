//! Fuzz target `host_shapes` (see the crate documentation).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    weft_fuzz::host_shapes(data);
});
