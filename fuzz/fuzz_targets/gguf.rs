//! Arbitrary bytes as a GGUF file: the header reader and the field analysis must end in Ok or
//! an error, never a panic, hang or huge allocation (`sc::fuzz::gguf`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sc::fuzz::gguf(data));
