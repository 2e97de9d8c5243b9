//! Fuzz target `matrix_market` (see the crate documentation).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    weft_fuzz::matrix_market(data);
});
