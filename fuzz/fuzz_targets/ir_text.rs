//! Fuzz target `ir_text` (see the crate documentation).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        weft_fuzz::ir_text(text);
    }
});
