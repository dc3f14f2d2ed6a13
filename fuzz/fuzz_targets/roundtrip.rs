//! Arbitrary input through encode and decode must come back byte for byte, in both modes and
//! at several block sizes (the first byte picks them; the rest is the input).
#![no_main]

use libfuzzer_sys::fuzz_target;
use sc::{EncodeOptions, Mode};

fuzz_target!(|data: &[u8]| {
    let Some((&sel, input)) = data.split_first() else {
        return;
    };
    let mode = if sel & 1 == 0 { Mode::Fast } else { Mode::Best };
    let block_size = [4096, 4098, 12290, 65536][(sel >> 1) as usize % 4];
    let opts = EncodeOptions { block_size, ..EncodeOptions::new(mode) };
    let mut archive = Vec::new();
    sc::encode(
        input,
        Some(input.len() as u64),
        &mut archive,
        &opts,
        &mut |_| {},
    )
    .expect("encoding into memory cannot fail");
    let mut back = Vec::new();
    let dopts = sc::DecodeOptions {
        check_md5: true,
        archive_len: Some(archive.len() as u64),
    };
    sc::decode(&archive[..], &mut back, &dopts, &mut |_| {}).expect("own archive must decode");
    assert!(back == input, "round trip differs");
});
