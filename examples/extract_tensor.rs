//! Reads one tensor out of an `.sc` archive through the public API, decoding only the blocks
//! that hold it.
//!
//! ```sh
//! cargo run --release --example extract_tensor -- model.safetensors.sc            # list
//! cargo run --release --example extract_tensor -- model.safetensors.sc NAME OUT    # extract
//! ```
//!
//! With a name, the tensor's raw little-endian bytes are written to OUT and the blocks and
//! bytes decoded for them are reported.

use std::fs::File;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("extract_tensor: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &[String]) -> Result<(), Box<dyn std::error::Error>> {
    let (path, wanted) = match args {
        [path] => (path, None),
        [path, name, out] => (path, Some((name, out))),
        _ => return Err("usage: extract_tensor ARCHIVE [TENSOR OUTPUT]".into()),
    };
    let mut archive = sc::Archive::open(File::open(path)?)?;
    let Some((name, out)) = wanted else {
        for t in archive.tensors() {
            println!(
                "{}\t{}\t{:?}\t{} bytes",
                t.name,
                t.dtype_name,
                t.shape,
                t.len()
            );
        }
        return Ok(());
    };
    let len = archive
        .tensor(name)
        .ok_or_else(|| sc::Error::NoSuchTensor(name.clone()))?
        .len();
    // Decoded straight into the buffer, several blocks at a time.
    let mut data = vec![0u8; usize::try_from(len)?];
    archive.read_tensor_into(name, &mut data)?;
    std::fs::write(out, &data)?;
    let s = archive.stats();
    println!(
        "{name}: {len} bytes to {out}; {} of {} blocks decoded, {} archive bytes read",
        s.blocks_decoded,
        archive.blocks(),
        s.archive_bytes_read
    );
    Ok(())
}
