//! Arbitrary input through encode and decode must come back byte for byte, in both modes and at
//! several block sizes (`sc::fuzz::roundtrip`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(why) = sc::fuzz::roundtrip(data) {
        panic!("{why}");
    }
});
