//! Arbitrary input through encode and decode must come back byte for byte, in both modes and at
//! several block sizes (`sc::fuzz::roundtrip`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sc::fuzz::roundtrip(data));
