//! Arbitrary bytes into each entropy decoder (`sc::fuzz::entropy`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sc::fuzz::entropy(data));
