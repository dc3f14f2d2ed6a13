//! Arbitrary bytes as an archive: decoding (file and stream modes) and `inspect` must end in
//! Ok or an error, never a panic, hang or huge allocation.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for archive_len in [Some(data.len() as u64), None] {
        let opts = sc::DecodeOptions {
            check_md5: true,
            archive_len,
        };
        let _ = sc::decode(data, std::io::sink(), &opts, &mut |_| {});
    }
    let _ = sc::inspect(&mut std::io::Cursor::new(data));
});
