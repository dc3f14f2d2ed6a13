//! Arbitrary bytes as an archive: decoding, `inspect` and random access must end in Ok or an
//! error, never a panic, hang or huge allocation (`sc::fuzz::archive`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sc::fuzz::archive(data));
