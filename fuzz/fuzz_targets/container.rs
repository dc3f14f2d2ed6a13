//! Arbitrary bytes as an archive: decoding (file and stream modes), `inspect` and random access
//! (`Archive`: sizes, every tensor, the whole range, an extracted file) must end in Ok or an
//! error, never a panic, hang or huge allocation.
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
    if let Ok(mut a) = sc::Archive::open(std::io::Cursor::new(data)) {
        let _ = a.stored_bytes();
        let names: Vec<String> = a.tensors().iter().map(|t| t.name.clone()).collect();
        for n in &names {
            let _ = a.read_tensor_to(n, &mut std::io::sink());
        }
        let _ = a.read_range_to(0..a.original_len(), &mut std::io::sink());
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let _ = a.write_safetensors(&names, &mut std::io::sink());
    }
});
