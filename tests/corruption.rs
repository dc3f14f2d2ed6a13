//! Corruption and truncation of `.sc` archives at the library level.
//!
//! Every region of real archives (the committed sample in FAST and BEST mode, and small synthetic
//! inputs) is mutated with bit flips and byte overwrites, and truncated at many lengths. Each
//! mutated archive must make `sc::decode` return an error (of the variant the region determines)
//! and never panic; an archive that still decodes is only accepted if its output is exactly the
//! original. `sc::inspect` runs on every mutated archive too and must not panic.

mod common;

use md5::Digest;
use sc::codec::Codec;
use sc::container::{
    BlockRecord, FileHeader, Footer, PlaneEntry, HEADER_FIXED_LEN, INDEX_ENTRY_LEN, MAX_BLOCK_SIZE,
    OLDEST_VERSION, TRAILER_LEN, VERSION,
};
use sc::decode_slice;
use sc::transform::Transform;
use sc::{decode, encode, inspect, Base, DecodeOptions, EncodeOptions, Error, Mode, SignModels};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::Cursor;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;

const SAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/sample.safetensors");
const TAG_BLOCK: u8 = 0xB1;
const TAG_END: u8 = 0xE0;

// ---------------------------------------------------------------------------------------------
// Allocation tracking: the largest single allocation made by the current thread
// ---------------------------------------------------------------------------------------------

/// The system allocator, noting the largest request each thread makes. Decoding allocates a
/// block's payload (and the kept header) on the calling thread, before any parallel work, so
/// this catches a length taken from the archive and trusted for an allocation.
struct PeakAlloc;

thread_local! {
    static PEAK: Cell<usize> = const { Cell::new(0) };
}

fn note(size: usize) {
    let _ = PEAK.try_with(|p| p.set(p.get().max(size)));
}

unsafe impl GlobalAlloc for PeakAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        System.alloc(layout)
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        System.alloc_zeroed(layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        System.realloc(ptr, layout, new_size)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
}

#[global_allocator]
static ALLOCATOR: PeakAlloc = PeakAlloc;

/// Runs `f`, returning its result and the largest allocation this thread made meanwhile.
fn largest_allocation<T>(f: impl FnOnce() -> T) -> (T, usize) {
    PEAK.with(|p| p.set(0));
    let r = f();
    (r, PEAK.with(|p| p.get()))
}

const MIB: usize = 1 << 20;

// ---------------------------------------------------------------------------------------------
// Fixtures
// ---------------------------------------------------------------------------------------------

/// Where one block lives in an archive.
#[derive(Clone, Debug)]
struct BlockLoc {
    offset: usize,
    record_len: usize,
    stored_len: usize,
    transform: Transform,
    /// Codec, payload start (archive offset) and payload length of each plane.
    planes: Vec<(Codec, usize, usize)>,
}

/// An archive, its original, and the position of every structure in it, found with the library.
struct Fixture {
    name: String,
    original: Vec<u8>,
    archive: Vec<u8>,
    header_len: usize,
    prefix_len: usize,
    /// Bytes the kept header takes in the archive (its deflated form and length field, when
    /// `packed`).
    kept_stored: usize,
    packed: bool,
    block_size: u32,
    blocks: Vec<BlockLoc>,
    end_offset: usize,
    /// The base the archive was coded against, if any: every decode reads it.
    base: Option<Base>,
}

impl Fixture {
    fn new(name: &str, original: Vec<u8>, mode: Mode, block_size: u32) -> Fixture {
        let opts = EncodeOptions {
            block_size,
            ..EncodeOptions::new(mode)
        };
        Fixture::with_options(name, original, opts)
    }

    /// The fixture of `original` coded with `opts` (its input length set).
    fn with_options(name: &str, original: Vec<u8>, opts: EncodeOptions) -> Fixture {
        let mut archive = Vec::new();
        let opts = EncodeOptions {
            input_len: Some(original.len() as u64),
            ..opts
        };
        let report = encode(&original[..], &mut archive, &opts).expect("encode");
        assert_eq!(report.archive_len, archive.len() as u64);
        Fixture::from_archive(name, original, archive, opts.mode, opts.block_size)
    }

    /// The fixture of an archive made elsewhere (`archive` must decode to `original`).
    fn from_archive(
        name: &str,
        original: Vec<u8>,
        archive: Vec<u8>,
        mode: Mode,
        block_size: u32,
    ) -> Fixture {
        Fixture::against(name, original, archive, mode, block_size, None)
    }

    /// [`Fixture::from_archive`] of an archive coded against `base`.
    fn against(
        name: &str,
        original: Vec<u8>,
        archive: Vec<u8>,
        mode: Mode,
        block_size: u32,
        base: Option<Base>,
    ) -> Fixture {
        let info = inspect(&mut Cursor::new(&archive)).expect("inspect a good archive");
        assert_eq!(info.header().mode, mode);
        assert_eq!(info.header().block_size, block_size);
        let header_len = info.header().encoded_len() as usize;
        let end_offset = info.footer().end_offset as usize;
        let mut blocks = Vec::new();
        for (n, e) in info.footer().index.iter().enumerate() {
            let offset = e.offset as usize;
            let rec = BlockRecord::read(&mut &archive[offset..], block_size, n as u64)
                .expect("record")
                .expect("not the end tag");
            let record_len = rec.encoded_len();
            let mut at = offset + record_len;
            let planes = rec
                .planes
                .iter()
                .map(|p| {
                    let start = at;
                    at += p.coded_len as usize;
                    (p.codec, start, p.coded_len as usize)
                })
                .collect();
            assert_eq!(at - offset, e.stored_len as usize);
            blocks.push(BlockLoc {
                offset,
                record_len,
                stored_len: e.stored_len as usize,
                transform: rec.transform,
                planes,
            });
        }
        // The layout must tile the whole archive: header, blocks, end tag, index, trailer.
        assert_eq!(blocks.first().map_or(end_offset, |b| b.offset), header_len);
        for w in blocks.windows(2) {
            assert_eq!(w[0].offset + w[0].stored_len, w[1].offset);
        }
        if let Some(b) = blocks.last() {
            assert_eq!(b.offset + b.stored_len, end_offset);
        }
        assert_eq!(archive[end_offset], TAG_END);
        assert_eq!(
            end_offset as u64 + Footer::encoded_len(blocks.len() as u64),
            archive.len() as u64
        );
        let fx = Fixture {
            name: name.to_string(),
            header_len,
            prefix_len: info.header().prefix.len(),
            kept_stored: info.kept_header_stored as usize,
            packed: info.header().packed.is_some(),
            block_size,
            blocks,
            end_offset,
            original,
            archive,
            base,
        };
        // Sanity: the untouched archive decodes to the original in both reading modes.
        for len in [Some(fx.archive.len() as u64), None] {
            match run_decode_with(&fx.archive, len, fx.base.as_ref()) {
                Ok(Ok(out)) => assert!(out == fx.original, "{}: round trip differs", fx.name),
                other => panic!("{}: good archive failed: {other:?}", fx.name),
            }
        }
        fx
    }

    /// Whether `pos` lies in the payload of an entropy-coded plane (huffman, range, adaptive,
    /// context, joint, ctxjoint, ctxtensors, ctxsigns, signs, huffjoint, sparse, byctx), where flush
    /// and padding bits may not matter.
    fn in_entropy_payload(&self, pos: usize) -> bool {
        self.blocks.iter().any(|b| {
            b.planes.iter().any(|&(c, start, len)| {
                matches!(
                    c,
                    Codec::Huffman
                        | Codec::Range
                        | Codec::Adaptive
                        | Codec::Context
                        | Codec::Joint
                        | Codec::CtxJoint
                        | Codec::CtxTensors
                        | Codec::CtxSigns
                        | Codec::Signs
                        | Codec::HuffJoint
                        | Codec::Sparse
                        | Codec::ByCtx
                ) && pos >= start
                    && pos < start + len
            })
        })
    }

    fn index_start(&self) -> usize {
        self.end_offset + 1
    }

    fn trailer_start(&self) -> usize {
        self.archive.len() - TRAILER_LEN
    }

    /// The error a mutation of byte `pos` into `new` must produce.
    fn expect_at(&self, pos: usize, new: u8) -> Expect {
        if pos < 4 {
            return Expect::BadMagic;
        }
        if pos < 6 {
            // Another version this build reads fails the header checksum instead.
            let mut v = [self.archive[4], self.archive[5]];
            v[pos - 4] = new;
            return match u16::from_le_bytes(v) {
                OLDEST_VERSION..=VERSION => Expect::Corrupt,
                _ => Expect::Version,
            };
        }
        if pos < 16 {
            // Mode, kind, block size, flags: range checks or the header checksum.
            return Expect::Corrupt;
        }
        if pos < HEADER_FIXED_LEN || (self.packed && pos < HEADER_FIXED_LEN + 4) {
            // The prefix length or the deflated kept header's length: impossible, or the read
            // of the kept header or the checksum runs off the end, or the checksum fails.
            return Expect::CorruptOrTruncated;
        }
        if self.base.is_some()
            && pos >= HEADER_FIXED_LEN + self.kept_stored
            && pos < self.header_len
        {
            // The reference section: a length in it may run past the section's end.
            return Expect::CorruptOrTruncated;
        }
        if pos < self.header_len {
            return Expect::Corrupt;
        }
        if pos < self.end_offset {
            let k = self
                .blocks
                .iter()
                .position(|b| pos >= b.offset && pos < b.offset + b.stored_len)
                .expect("position inside a block");
            if pos == self.blocks[k].offset && new == TAG_END {
                // A record tag turned into the end tag: the index is looked for there.
                return Expect::CorruptOrTruncated;
            }
            return Expect::Block(k as u64);
        }
        if pos == self.end_offset {
            let n = self.blocks.len() as u64;
            return match new {
                TAG_BLOCK => Expect::BlockOrTruncated(n),
                _ => Expect::Block(n),
            };
        }
        Expect::Corrupt
    }
}

/// A pseudo-random generator, so the synthetic inputs are the same on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A BF16 value looking like a trained weight (small, roughly normal).
    fn weight_bf16(&mut self) -> [u8; 2] {
        let s: f32 = (0..4)
            .map(|_| (self.next() % 1000) as f32 / 1000.0)
            .sum::<f32>()
            - 2.0;
        let v = s * 0.05;
        let b = v.to_bits().to_le_bytes();
        [b[2], b[3]]
    }
}

/// Builds a small safetensors file from `(name, dtype, shape, bytes)`.
fn safetensors(tensors: &[(&str, &str, Vec<u64>, Vec<u8>)]) -> Vec<u8> {
    common::safetensors(tensors, 0, r#"{"format":"pt"}"#)
}

/// A small safetensors file with BF16 weights, zeros (const planes), I64 ids and F32 values.
fn synthetic_safetensors() -> Vec<u8> {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let w: Vec<u8> = (0..2600).flat_map(|_| rng.weight_bf16()).collect();
    // A whole block of zeros: both planes const.
    let zeros = vec![0u8; 2048 * 2];
    let ids: Vec<u8> = (0..48u64).flat_map(|i| i.to_le_bytes()).collect();
    let f32s: Vec<u8> = (0..100)
        .flat_map(|i| (1.0f32 + i as f32 / 64.0).to_le_bytes())
        .collect();
    safetensors(&[
        ("w", "BF16", vec![2600], w),
        ("z", "BF16", vec![2048], zeros),
        ("ids", "I64", vec![48], ids),
        ("f", "F32", vec![100], f32s),
    ])
}

/// Non-safetensors input: text-like bytes, taking the generic path.
fn synthetic_generic() -> Vec<u8> {
    let mut rng = Rng(42);
    let words = [
        &b"tensor "[..],
        b"weight ",
        b"bias ",
        b"layer.",
        b"0",
        b"1",
        b"\n",
    ];
    let mut out = b"not a safetensors file\n".to_vec();
    while out.len() < 5000 {
        out.extend_from_slice(words[(rng.next() % words.len() as u64) as usize]);
    }
    out
}

fn sample() -> Vec<u8> {
    std::fs::read(SAMPLE).expect("testdata/sample.safetensors")
}

fn sample_fast() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| Fixture::new("sample FAST 64K", sample(), Mode::Fast, 64 << 10))
}

fn sample_best() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| Fixture::new("sample BEST 64K", sample(), Mode::Best, 64 << 10))
}

// ---------------------------------------------------------------------------------------------
// Running one case
// ---------------------------------------------------------------------------------------------

/// The errors a mutation may produce.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Expect {
    BadMagic,
    Version,
    Corrupt,
    CorruptOrTruncated,
    /// `CorruptBlock` naming this block.
    Block(u64),
    /// `CorruptBlock` naming this block, or `Truncated`.
    BlockOrTruncated(u64),
    /// `Truncated` or `Corrupt`; `BadMagic` while fewer than 4 bytes are left.
    Truncation,
}

impl Expect {
    fn accepts(self, e: &Error, archive_len: usize) -> bool {
        match (self, e) {
            (Expect::BadMagic, Error::BadMagic) => true,
            (
                Expect::Version,
                Error::UnsupportedVersion {
                    found,
                    oldest,
                    supported,
                },
            ) => {
                *supported == VERSION
                    && *oldest == OLDEST_VERSION
                    && !(OLDEST_VERSION..=VERSION).contains(found)
            }
            (Expect::Corrupt, Error::Corrupt(_)) => true,
            (Expect::CorruptOrTruncated, Error::Corrupt(_) | Error::Truncated(_)) => true,
            (Expect::Block(k), Error::CorruptBlock { index, .. }) => *index == k,
            (Expect::BlockOrTruncated(k), Error::CorruptBlock { index, .. }) => *index == k,
            (Expect::BlockOrTruncated(_), Error::Truncated(_)) => true,
            (Expect::Truncation, Error::Truncated(_) | Error::Corrupt(_)) => true,
            (Expect::Truncation, Error::BadMagic) => archive_len < 4,
            _ => false,
        }
    }
}

type Decoded = std::result::Result<std::result::Result<Vec<u8>, Error>, String>;

fn panic_text(p: Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic".into())
}

/// Decodes with the MD5 check on; the outer `Err` is a panic.
fn run_decode(archive: &[u8], archive_len: Option<u64>) -> Decoded {
    run_decode_with(archive, archive_len, None)
}

/// [`run_decode`] with `base`.
fn run_decode_with(archive: &[u8], archive_len: Option<u64>, base: Option<&Base>) -> Decoded {
    catch_unwind(AssertUnwindSafe(|| {
        let mut out = Vec::new();
        let opts = DecodeOptions {
            check_md5: true,
            archive_len,
            base,
            ..Default::default()
        };
        decode(archive, &mut out, &opts).map(|_| out)
    }))
    .map_err(panic_text)
}

/// [`run_decode`] of an archive in memory, decoded where it lies.
fn run_decode_slice(archive: &[u8], base: Option<&Base>) -> Decoded {
    catch_unwind(AssertUnwindSafe(|| {
        let mut out = Vec::new();
        let opts = DecodeOptions {
            check_md5: true,
            archive_len: None,
            base,
            ..Default::default()
        };
        decode_slice(archive, &mut out, &opts).map(|_| out)
    }))
    .map_err(panic_text)
}

/// Results of a batch of cases; failures are collected so one run reports all of them.
#[derive(Default)]
struct Tally {
    cases: usize,
    /// Mutations that still decoded to exactly the original: bits of an entropy-coded payload
    /// the decoder never needs (huffman padding, the unused nibble of an odd-length code-length
    /// table, the range coder's flush slack). Nothing else may be ignored.
    harmless: Vec<String>,
    failures: Vec<String>,
    /// Also decode every mutated archive as a stream (length unknown).
    also_stream: bool,
    /// Largest allocation a decode may make on the calling thread: with the archive length
    /// known, and as a stream. Unchecked when `None`.
    alloc_limit: Option<(usize, usize)>,
}

impl Tally {
    /// Decodes `archive` and checks the outcome against `expect`; also runs `inspect` on it.
    fn check(
        &mut self,
        fx: &Fixture,
        case: &str,
        archive: &[u8],
        archive_len: Option<u64>,
        expect: Expect,
    ) {
        self.check_at(fx, case, archive, archive_len, expect, None)
    }

    /// As [`Tally::check`]; `pos` is the mutated byte, which decides whether an unchanged
    /// output is acceptable.
    fn check_at(
        &mut self,
        fx: &Fixture,
        case: &str,
        archive: &[u8],
        archive_len: Option<u64>,
        expect: Expect,
        pos: Option<usize>,
    ) {
        self.cases += 1;
        let label = format!(
            "{} / {case} / {}",
            fx.name,
            if archive_len.is_some() {
                "known length"
            } else {
                "stream"
            }
        );
        let (decoded, peak) =
            largest_allocation(|| run_decode_with(archive, archive_len, fx.base.as_ref()));
        if archive_len.is_some() && self.cases.is_multiple_of(4) {
            // Decoding the archive in place (as from a memory map) must end the same way; one
            // case in four keeps the test's time in check (the readers share all but the
            // payload source).
            let sliced = run_decode_slice(archive, fx.base.as_ref());
            let same = match (&decoded, &sliced) {
                (Ok(Ok(a)), Ok(Ok(b))) => a == b,
                (Ok(Err(a)), Ok(Err(b))) => a.to_string() == b.to_string(),
                _ => false,
            };
            if !same {
                self.failures.push(format!(
                    "{label}: decode_slice disagrees: {:?} vs {:?}",
                    decoded.as_ref().map(|r| r.as_ref().map(Vec::len)),
                    sliced.as_ref().map(|r| r.as_ref().map(Vec::len))
                ));
            }
        }
        if let Some((known, stream)) = self.alloc_limit {
            let limit = if archive_len.is_some() { known } else { stream };
            if peak > limit {
                self.failures.push(format!(
                    "{label}: decode allocated {peak} bytes at once (limit {limit})"
                ));
            }
        }
        match decoded {
            Err(p) => self.failures.push(format!("{label}: decode PANICKED: {p}")),
            Ok(Ok(out)) if out == fx.original => {
                if pos.is_some_and(|p| fx.in_entropy_payload(p)) {
                    self.harmless.push(label.clone());
                } else {
                    self.failures.push(format!(
                        "{label}: mutation IGNORED (decoded the original; expected {expect:?})"
                    ));
                }
            }
            Ok(Ok(out)) => self.failures.push(format!(
                "{label}: decode accepted WRONG output ({} bytes, original {})",
                out.len(),
                fx.original.len()
            )),
            Ok(Err(e)) if expect.accepts(&e, archive.len()) => {}
            Ok(Err(e)) => self
                .failures
                .push(format!("{label}: expected {expect:?}, got {e:?}")),
        }
        let inspected = catch_unwind(AssertUnwindSafe(|| {
            let _ = inspect(&mut Cursor::new(archive));
        }));
        if let Err(p) = inspected {
            self.failures
                .push(format!("{label}: inspect PANICKED: {}", panic_text(p)));
        }
    }

    /// Applies `mutation` at `pos` and checks the outcome expected for that position.
    fn mutate(&mut self, fx: &Fixture, region: &str, pos: usize, m: Mutation) {
        let mut bad = fx.archive.clone();
        let new = m.apply(bad[pos]);
        if new == bad[pos] {
            return;
        }
        bad[pos] = new;
        let case = format!(
            "{region} @{pos} {m:?} ({:#04x}->{new:#04x})",
            fx.archive[pos]
        );
        let expect = fx.expect_at(pos, new);
        self.check_at(fx, &case, &bad, Some(bad.len() as u64), expect, Some(pos));
        if self.also_stream {
            self.check_at(fx, &case, &bad, None, expect, Some(pos));
        }
    }

    /// The standard set of mutations at each of `positions`.
    fn mutate_all(&mut self, fx: &Fixture, region: &str, positions: &[usize]) {
        for &pos in positions {
            for m in Mutation::standard(pos) {
                self.mutate(fx, region, pos, m);
            }
        }
    }

    /// Fails with every collected failure; also if a suspicious share of mutations was ignored.
    fn finish(self, what: &str) {
        eprintln!(
            "{what}: {} cases, {} ignored harmlessly, {} failures",
            self.cases,
            self.harmless.len(),
            self.failures.len()
        );
        for h in &self.harmless {
            eprintln!("  ignored: {h}");
        }
        assert!(
            self.failures.is_empty(),
            "{what}: {} of {} cases failed:\n{}",
            self.failures.len(),
            self.cases,
            self.failures.join("\n")
        );
        assert!(
            self.harmless.len() * 20 <= self.cases,
            "{what}: {} of {} mutations were ignored by the decoder",
            self.harmless.len(),
            self.cases
        );
    }
}

#[derive(Clone, Copy, Debug)]
enum Mutation {
    Flip(u8),
    Set(u8),
    Xor(u8),
}

impl Mutation {
    fn apply(self, b: u8) -> u8 {
        match self {
            Mutation::Flip(bit) => b ^ (1 << bit),
            Mutation::Set(v) => v,
            Mutation::Xor(x) => b ^ x,
        }
    }

    /// One single-bit flip and one overwrite, varying with the position.
    fn light(pos: usize) -> [Mutation; 2] {
        [
            Mutation::Flip((pos % 8) as u8),
            match pos % 3 {
                0 => Mutation::Set(0x00),
                1 => Mutation::Set(0xFF),
                _ => Mutation::Xor(0x5A),
            },
        ]
    }

    /// Two single-bit flips (one varying with the position) and two overwrites.
    fn standard(pos: usize) -> [Mutation; 4] {
        [
            Mutation::Flip(0),
            Mutation::Flip((pos % 7 + 1) as u8),
            Mutation::Set(if pos.is_multiple_of(2) { 0x00 } else { 0xFF }),
            Mutation::Xor(0x5A),
        ]
    }
}

/// Distinct, sorted positions inside `lo..hi` from a list of candidates.
fn within(lo: usize, hi: usize, candidates: impl IntoIterator<Item = usize>) -> Vec<usize> {
    let mut v: Vec<usize> = candidates
        .into_iter()
        .filter(|&p| p >= lo && p < hi)
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// First, middle and last bytes of `start..start+len`, and a couple more.
fn spread(start: usize, len: usize) -> Vec<usize> {
    if len == 0 {
        return Vec::new();
    }
    within(
        start,
        start + len,
        [
            start,
            start + 1,
            start + len / 3,
            start + len / 2,
            start + len - 2,
            start + len - 1,
        ],
    )
}

/// A few blocks worth mutating: first, last, middle, and the first of each transform/codec mix.
///
/// `last` adds the final (short) block, whose every case decodes the whole archive first.
fn chosen_blocks(fx: &Fixture, extra: usize, last: bool) -> Vec<usize> {
    let n = fx.blocks.len();
    let mut picks = vec![0, 1, n / 2];
    if last {
        picks.push(n - 1);
    }
    picks.extend((1..=extra).map(|i| i * n / (extra + 1)));
    let mut seen = Vec::new();
    for (k, b) in fx.blocks.iter().enumerate() {
        let sig: (Transform, Vec<Codec>) = (b.transform, b.planes.iter().map(|p| p.0).collect());
        if !seen.contains(&sig) {
            seen.push(sig);
            picks.push(k);
        }
    }
    picks.retain(|&k| k < n);
    picks.sort_unstable();
    picks.dedup();
    picks
}

// ---------------------------------------------------------------------------------------------
// Mutations by region
// ---------------------------------------------------------------------------------------------

fn header_cases(t: &mut Tally, fx: &Fixture) {
    t.mutate_all(fx, "magic", &[0, 1, 2, 3]);
    t.mutate_all(fx, "version", &[4, 5]);
    t.mutate_all(fx, "mode", &[6]);
    t.mutate_all(fx, "kind", &[7]);
    t.mutate_all(fx, "block size", &[8, 9, 10, 11]);
    t.mutate_all(fx, "flags", &[12, 15]);
    t.mutate_all(fx, "prefix length", &[16, 17, 18, 20, 23]);
    let (p, s) = (fx.prefix_len, fx.kept_stored);
    if fx.packed {
        t.mutate_all(fx, "deflated kept-header length", &[24, 25, 27]);
        t.mutate_all(fx, "deflated kept header", &spread(28, s - 4));
    } else if p > 0 {
        let json_len_field = within(24, 24 + p, [24, 25, 31]);
        t.mutate_all(fx, "kept json length", &json_len_field);
        t.mutate_all(fx, "kept json", &spread(32, p - 8));
    }
    t.mutate_all(fx, "header checksum", &spread(24 + s, 8));
    // The mode byte switched to the other valid mode: only the checksum can tell.
    let mut bad = fx.archive.clone();
    bad[6] ^= 1;
    t.check(
        fx,
        "mode fast<->best",
        &bad,
        Some(bad.len() as u64),
        Expect::Corrupt,
    );
}

fn block_cases(t: &mut Tally, fx: &Fixture, extra: usize, last: bool) {
    for k in chosen_blocks(fx, extra, last) {
        let b = fx.blocks[k].clone();
        let r = b.offset;
        // Every field of the record: tag, transform, plane count, reserved, raw length, block
        // checksum, plane entries (codec, reserved, coded length), record checksum.
        let mut fields = vec![r, r + 1, r + 2, r + 3, r + 4, r + 7, r + 8, r + 15];
        for p in 0..b.planes.len() {
            let e = r + 16 + 8 * p;
            fields.extend([e, e + 1, e + 3, e + 4, e + 7]);
        }
        fields.extend(spread(r + b.record_len - 4, 4));
        // The record checksum is checked before any field is used, so two mutations per byte
        // suffice here; the payloads, where the entropy decoders run, get four.
        for pos in fields {
            for m in Mutation::light(pos) {
                t.mutate(fx, &format!("block {k} record"), pos, m);
            }
        }
        for (p, &(codec, start, len)) in b.planes.iter().enumerate() {
            let region = format!("block {k} plane {p} {} payload", codec.name());
            t.mutate_all(fx, &region, &spread(start, len));
        }
    }
}

/// End tag, index and trailer. Every case here decodes all blocks before failing, so `full`
/// false (for the slow BEST sample; the synthetic tests cover every footer byte in both modes)
/// keeps one position per field.
fn footer_cases(t: &mut Tally, fx: &Fixture, full: bool) {
    t.mutate_all(fx, "end tag", &[fx.end_offset]);
    let mut bad = fx.archive.clone();
    bad[fx.end_offset] = TAG_BLOCK;
    let n = fx.blocks.len() as u64;
    t.check(
        fx,
        "end tag -> block tag",
        &bad,
        Some(bad.len() as u64),
        Expect::BlockOrTruncated(n),
    );
    let idx = fx.index_start();
    let n = fx.blocks.len();
    let mut positions = Vec::new();
    let (entries, fields, trailer_fields): (Vec<usize>, &[usize], &[usize]) = match full {
        // offset, raw offset, raw length, stored length; every trailer field's ends.
        true => (
            vec![0, n / 2, n - 1],
            &[0, 7, 8, 16, 19, 20],
            &[0, 7, 8, 15, 16, 23, 24, 31, 39, 40, 47, 48, 49, 50, 51],
        ),
        false => (vec![n / 2], &[0, 16], &[0, 8, 16, 24, 40, 48, 51]),
    };
    for k in entries {
        let e = idx + k * INDEX_ENTRY_LEN;
        positions.extend(fields.iter().map(|f| e + f));
    }
    t.mutate_all(fx, "index", &within(idx, fx.trailer_start(), positions));
    let tr = fx.trailer_start();
    let trailer: Vec<usize> = trailer_fields.iter().map(|o| tr + o).collect();
    t.mutate_all(fx, "trailer", &trailer);
    // Whole 8-byte trailer fields overwritten with 0xFF (u64::MAX) and with 0.
    for (field, at) in [
        ("end offset", 0),
        ("block count", 8),
        ("original length", 16),
        ("trailer checksum", 40),
    ] {
        for v in [0x00u8, 0xFF] {
            let mut bad = fx.archive.clone();
            bad[tr + at..tr + at + 8].fill(v);
            if bad == fx.archive {
                continue;
            }
            let case = format!("trailer {field} = all {v:#04x}");
            // The trailer's checksum fails first, whatever the value.
            t.check(fx, &case, &bad, Some(bad.len() as u64), Expect::Corrupt);
        }
    }
    // Data after the trailer.
    let mut bad = fx.archive.clone();
    bad.push(0);
    t.check(
        fx,
        "one byte appended",
        &bad,
        Some(bad.len() as u64),
        Expect::Corrupt,
    );
    t.check(fx, "one byte appended", &bad, None, Expect::Corrupt);
}

fn truncation_cases(t: &mut Tally, fx: &Fixture) {
    let len = fx.archive.len();
    let mut lengths = vec![0, 1, 3, 4, 23, 24, 25];
    lengths.extend([
        24 + fx.prefix_len / 2,
        fx.header_len - 8,
        fx.header_len - 1,
        fx.header_len,
    ]);
    let n = fx.blocks.len();
    for k in [0, 1, n / 2, n.saturating_sub(1)] {
        let Some(b) = fx.blocks.get(k) else { continue };
        lengths.extend([
            b.offset + 1,
            b.offset + 16,
            b.offset + b.record_len - 1,
            b.offset + b.record_len,
            b.offset + b.record_len + 1,
            b.offset + b.stored_len / 2,
            b.offset + b.stored_len - 1,
        ]);
    }
    lengths.extend([
        fx.end_offset,
        fx.end_offset + 1,
        fx.end_offset + 1 + INDEX_ENTRY_LEN * n / 2,
        fx.trailer_start() - 1,
        fx.trailer_start(),
        fx.trailer_start() + 40,
        len - 4,
        len - 1,
    ]);
    let lengths = within(0, len, lengths);
    for cut in lengths {
        let bad = &fx.archive[..cut];
        let case = format!("truncated to {cut} of {len}");
        t.check(fx, &case, bad, Some(cut as u64), Expect::Truncation);
        t.check(fx, &case, bad, None, Expect::Truncation);
    }
}

/// `full`: the last block and every footer field too (FAST); BEST, four times slower to
/// decode, skips what FAST and the exhaustive synthetic tests already cover.
fn all_regions(fx: &Fixture, extra_blocks: usize, full: bool) -> Tally {
    let mut t = Tally::default();
    header_cases(&mut t, fx);
    block_cases(&mut t, fx, extra_blocks, full);
    footer_cases(&mut t, fx, full);
    t
}

// ---------------------------------------------------------------------------------------------
// Tests on the sample
// ---------------------------------------------------------------------------------------------

/// Mutates every region of a many-block sample archive (see [`all_regions`] for the arguments).
fn sample_every_region(fx: &Fixture, extra_blocks: usize, full: bool, what: &str) {
    assert!(
        fx.blocks.len() > 40,
        "want many blocks: {}",
        fx.blocks.len()
    );
    all_regions(fx, extra_blocks, full).finish(what);
}

#[test]
fn sample_fast_every_region() {
    sample_every_region(sample_fast(), 2, true, "sample FAST mutations");
}

#[test]
fn sample_best_every_region() {
    sample_every_region(sample_best(), 1, false, "sample BEST mutations");
}

#[test]
fn sample_truncations() {
    let mut t = Tally::default();
    truncation_cases(&mut t, sample_fast());
    truncation_cases(&mut t, sample_best());
    t.finish("sample truncations");
}

#[test]
fn sample_archives_use_every_codec() {
    // The mutation tests above are only as good as the variety of blocks they hit.
    for fx in [sample_fast(), sample_best()] {
        let mut codecs: Vec<&str> = fx
            .blocks
            .iter()
            .flat_map(|b| b.planes.iter().map(|p| p.0.name()))
            .collect();
        codecs.sort_unstable();
        codecs.dedup();
        let want: &[&str] = if fx.name.contains("FAST") {
            &["huffman", "huffjoint", "raw6", "stored"]
        } else {
            &["ctxjoint", "raw6"]
        };
        for w in want {
            assert!(
                codecs.contains(w),
                "{}: no {w} plane in {codecs:?}",
                fx.name
            );
        }
        for t in [Transform::Exp16, Transform::Exp32, Transform::Delta64] {
            assert!(
                fx.blocks.iter().any(|b| b.transform == t),
                "{}: no {t:?}",
                fx.name
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Small synthetic archives: every single byte is mutated
// ---------------------------------------------------------------------------------------------

/// Flips one bit in every byte of the archive and overwrites every fifth byte, decoding each
/// mutated archive with its length known and as a stream, and bounding its allocations.
fn exhaustive(fx: &Fixture) -> Tally {
    // With the length known nothing may be allocated beyond the (tiny) archive's means; a
    // stream may take a corrupted kept-header length up to the format's limit at its word.
    let mut t = Tally {
        also_stream: true,
        alloc_limit: Some((MIB, (100 << 20) + 8)),
        ..Tally::default()
    };
    for pos in 0..fx.archive.len() {
        let mut ms = vec![Mutation::Flip((pos % 8) as u8)];
        if pos % 5 == 0 {
            ms.push(Mutation::Xor(0xFF));
        }
        for m in ms {
            t.mutate(fx, "every byte", pos, m);
        }
    }
    t
}

#[test]
fn synthetic_safetensors_every_byte() {
    for mode in [Mode::Fast, Mode::Best] {
        let fx = Fixture::new(
            &format!("synthetic safetensors {}", mode.name()),
            synthetic_safetensors(),
            mode,
            4096,
        );
        assert!(fx.blocks.len() >= 3);
        assert!(fx
            .blocks
            .iter()
            .any(|b| b.planes.iter().any(|p| p.0 == Codec::Const)));
        let mut t = exhaustive(&fx);
        truncation_cases(&mut t, &fx);
        t.finish(&fx.name.clone());
    }
}

/// Three BF16 matrices that BEST codes in one block as a ctxtensors/raw6 pair (more elements
/// than BEST also tries the joint codec on).
#[test]
fn synthetic_tensors_best_every_byte() {
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let mut matrix = |n: usize| -> Vec<u8> { (0..n).flat_map(|_| rng.weight_bf16()).collect() };
    let file = safetensors(&[
        ("a", "BF16", vec![100, 60], matrix(6000)),
        ("b", "BF16", vec![60, 100], matrix(6000)),
        ("c", "BF16", vec![50, 100], matrix(5000)),
    ]);
    let fx = Fixture::new("synthetic tensors BEST", file, Mode::Best, 64 << 10);
    assert_eq!(fx.blocks.len(), 1);
    let codecs: Vec<Codec> = fx.blocks[0].planes.iter().map(|p| p.0).collect();
    assert_eq!(codecs, [Codec::CtxTensors, Codec::Raw6]);
    let mut t = exhaustive(&fx);
    truncation_cases(&mut t, &fx);
    t.finish(&fx.name.clone());
}

/// Three BF16 matrices whose columns lean to one sign, each column its own way, as trained
/// weights' columns often do: more elements than BEST tries the joint codec on (which has no
/// sign models), as in [`synthetic_tensors_best_every_byte`].
fn leaning_tensors() -> Vec<u8> {
    let mut rng = Rng(0x6A09_E667_F3BC_C908);
    let mut matrix = |rows: u64, columns: u64| -> (Vec<u64>, Vec<u8>) {
        // Each column's chance of a negative weight, in 1/256.
        let lean: Vec<u64> = (0..columns)
            .map(|_| [20, 60, 196, 236][rng.next() as usize % 4])
            .collect();
        let mut data = Vec::new();
        for i in 0..rows * columns {
            let [lo, hi] = rng.weight_bf16();
            let negative = rng.next() % 256 < lean[(i % columns) as usize];
            data.extend([lo, hi & 0x7F | (negative as u8) << 7]);
        }
        (vec![rows, columns], data)
    };
    let (a, b, c) = (matrix(100, 60), matrix(60, 100), matrix(50, 100));
    safetensors(&[
        ("a", "BF16", a.0, a.1),
        ("b", "BF16", b.0, b.1),
        ("c", "BF16", c.0, c.1),
    ])
}

/// The format version in an archive's file header.
fn version_of(archive: &[u8]) -> u16 {
    u16::from_le_bytes([archive[4], archive[5]])
}

/// The leaning matrices coded with sign models: a format version 5 archive with a
/// ctxsigns/signs block, which every reader decodes byte for byte, and in which every byte
/// matters.
#[test]
fn synthetic_signed_tensors_best_every_byte() {
    let opts = EncodeOptions {
        block_size: 64 << 10,
        sign_models: SignModels::Everywhere,
        ..EncodeOptions::new(Mode::Best)
    };
    let fx = Fixture::with_options("synthetic signed tensors BEST", leaning_tensors(), opts);
    assert_eq!(version_of(&fx.archive), sc::container::SIGNS_VERSION);
    assert_eq!(fx.blocks.len(), 1);
    let codecs: Vec<Codec> = fx.blocks[0].planes.iter().map(|p| p.0).collect();
    assert_eq!(codecs, [Codec::CtxSigns, Codec::Signs]);
    // Every reader: in place, into a vector, and each tensor and the whole file by random
    // access (the fixture decoded it from a reader, with and without its length).
    assert!(run_decode_slice(&fx.archive, None).unwrap().unwrap() == fx.original);
    let back = sc::decode_to_vec(&fx.archive, &DecodeOptions::default()).unwrap();
    assert!(back == fx.original);
    let mut a = sc::Archive::open(Cursor::new(&fx.archive)).unwrap();
    let data_start = fx.original.len() - a.tensors().iter().map(|t| t.len()).sum::<u64>() as usize;
    for t in a.tensors().to_vec() {
        let range = data_start + t.begin as usize..data_start + t.end as usize;
        assert!(
            a.read_tensor(&t.name).unwrap() == fx.original[range],
            "{}",
            t.name
        );
    }
    let mut whole = vec![0; fx.original.len()];
    a.read_range_into(0..whole.len() as u64, &mut whole)
        .unwrap();
    assert!(whole == fx.original);
    let mut t = exhaustive(&fx);
    truncation_cases(&mut t, &fx);
    t.finish(&fx.name.clone());
}

/// Sign models are BEST's and asked for, and for tensors: without them BEST writes format
/// version 4 and no ctxsigns block; FAST, and BEST on a file that is not safetensors, write the
/// same archive with or without them.
#[test]
fn sign_models_only_where_asked_for() {
    let file = leaning_tensors();
    let coded = |mode, sign_models| {
        let opts = EncodeOptions {
            block_size: 64 << 10,
            sign_models,
            ..EncodeOptions::new(mode)
        };
        sc::encode_to_vec(&file, &opts).unwrap()
    };
    let plain = Fixture::from_archive(
        "BEST",
        file.clone(),
        coded(Mode::Best, SignModels::Off),
        Mode::Best,
        64 << 10,
    );
    assert_eq!(version_of(&plain.archive), 4);
    let codecs: Vec<Codec> = plain.blocks[0].planes.iter().map(|p| p.0).collect();
    assert_eq!(codecs, [Codec::CtxTensors, Codec::Raw6]);
    let fast = coded(Mode::Fast, SignModels::Off);
    assert!(fast == coded(Mode::Fast, SignModels::Everywhere));
    assert!(fast == coded(Mode::Fast, SignModels::Paying));
    assert!(version_of(&fast) < sc::container::SIGNS_VERSION);
    // A file that is not safetensors has no tensor columns to model: its archive is the same
    // with sign models, of the lowest version that holds it.
    let generic = synthetic_generic();
    let best = |sign_models| {
        let opts = EncodeOptions {
            block_size: 4096,
            sign_models,
            ..EncodeOptions::new(Mode::Best)
        };
        sc::encode_to_vec(&generic, &opts).unwrap()
    };
    let plain = best(SignModels::Off);
    assert!(version_of(&plain) < 4);
    assert!(best(SignModels::Everywhere) == plain);
    assert!(best(SignModels::Paying) == plain);
}

#[test]
fn synthetic_generic_every_byte() {
    for mode in [Mode::Fast, Mode::Best] {
        let fx = Fixture::new(
            &format!("synthetic generic {}", mode.name()),
            synthetic_generic(),
            mode,
            4096,
        );
        assert_eq!(fx.prefix_len, 0);
        assert_eq!(fx.blocks.len(), 2);
        let mut t = exhaustive(&fx);
        truncation_cases(&mut t, &fx);
        header_cases(&mut t, &fx);
        t.finish(&fx.name.clone());
    }
}

/// `testdata/`, which holds the originals of the golden archives and their bases.
const TESTDATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata");

/// The lines of the tab-separated manifest of `testdata/<folder>/`, comment lines left out;
/// asserts that every `.sc` file of the folder has its line and every line its file.
fn manifest(folder: &str, columns: usize) -> Vec<Vec<String>> {
    let dir = format!("{TESTDATA}/{folder}");
    let text = std::fs::read_to_string(format!("{dir}/MANIFEST.tsv")).expect("manifest");
    let rows: Vec<Vec<String>> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.split('\t').map(String::from).collect())
        .collect();
    for row in &rows {
        assert_eq!(row.len(), columns, "{folder}/MANIFEST.tsv: {row:?}");
    }
    let mut listed: Vec<&str> = rows.iter().map(|r| r[0].as_str()).collect();
    listed.sort_unstable();
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .expect("golden folder")
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|f| f.ends_with(".sc"))
        .collect();
    files.sort_unstable();
    assert_eq!(
        listed, files,
        "{folder}: archives and manifest lines differ"
    );
    rows
}

fn read_testdata(path: &str) -> Vec<u8> {
    std::fs::read(format!("{TESTDATA}/{path}")).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// `-` in a manifest: none.
fn given(field: &str) -> Option<&str> {
    (field != "-").then_some(field)
}

/// Checks one golden archive against its manifest line `row`, decodes it every way an
/// archive is read, then mutates every byte of it.
fn check_golden(row: &[String]) {
    let [archive, original, base, version, mode, block_size, pair, codecs, md5, _commit] = row
    else {
        unreachable!("checked by manifest()")
    };
    let name = format!("golden {archive}");
    let original = read_testdata(original);
    let md5_of = md5::Md5::digest(&original);
    let md5_hex: String = md5_of.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(&md5_hex, md5, "{name}: its original changed");
    let bytes = read_testdata(&format!("golden/{archive}"));
    let version: u16 = version.parse().unwrap();
    assert_eq!(u16::from_le_bytes([bytes[4], bytes[5]]), version, "{name}");
    let mode = match mode.as_str() {
        "fast" => Mode::Fast,
        _ => Mode::Best,
    };
    let block_size: u32 = block_size.parse().unwrap();
    let info = inspect(&mut Cursor::new(&bytes)).expect("inspect a golden archive");
    assert_eq!(info.format_version, version, "{name}");
    assert_eq!(info.base_name.as_deref(), given(base), "{name}");
    let used: Vec<&str> = info.codecs.keys().copied().collect();
    assert_eq!(used.join(","), *codecs, "{name}: codecs");
    let base = given(base).map(|b| Base::open(format!("{TESTDATA}/{b}")).expect("golden base"));
    if base.is_some() {
        assert!(
            matches!(
                sc::decode_to_vec(&bytes, &DecodeOptions::default()),
                Err(Error::BaseNeeded { .. })
            ),
            "{name}: decoded without its base"
        );
    }
    common::decodes_everywhere(&bytes, &original, base.as_ref());
    let fx = Fixture::against(&name, original, bytes, mode, block_size, base);
    if let Some(pair) = given(pair) {
        let codec = |n: &str| Codec::ALL.into_iter().find(|c| c.name() == n).expect(n);
        let pair: Vec<Codec> = pair.split('/').map(codec).collect();
        assert!(
            fx.blocks.iter().any(|b| b.transform.exponent_aligned()
                && b.planes.len() >= 2
                && [b.planes[0].0, b.planes[1].0] == pair[..]),
            "{name}: no float block coded {pair:?}"
        );
    }
    let mut t = exhaustive(&fx);
    truncation_cases(&mut t, &fx);
    header_cases(&mut t, &fx);
    t.finish(&name);
}

/// Every archive of `testdata/golden/`, written by an earlier encoder (`MANIFEST.tsv` says
/// which and what each pins), decodes to its original every way and survives every byte
/// mutated: decoders keep reading what every format version wrote.
#[test]
fn golden_archives_every_way_and_every_byte() {
    let rows = manifest("golden", 10);
    std::thread::scope(|s| {
        for row in &rows {
            s.spawn(|| check_golden(row));
        }
    });
}

/// Every crafted archive of `testdata/golden-errors/` fails to decode with the error its
/// manifest line names, and `inspect` does not panic on it.
#[test]
fn golden_errors_fail_with_their_message() {
    for row in manifest("golden-errors", 3) {
        let [archive, base, message] = &row[..] else {
            unreachable!("checked by manifest()")
        };
        let bytes = read_testdata(&format!("golden-errors/{archive}"));
        let base = given(base).map(|b| Base::open(format!("{TESTDATA}/{b}")).expect("base"));
        let opts = DecodeOptions {
            base: base.as_ref(),
            check_md5: true,
            ..Default::default()
        };
        match sc::decode_to_vec(&bytes, &opts) {
            Err(e) => assert!(e.to_string().contains(message.as_str()), "{archive}: {e}"),
            Ok(_) => panic!("{archive}: decoded"),
        }
        let _ = inspect(&mut Cursor::new(&bytes));
    }
}

#[test]
fn tiny_inputs_every_byte() {
    let mut one_tensor = safetensors(&[("t", "BF16", vec![1], vec![0x80, 0x3F])]);
    let header_only = safetensors(&[]);
    assert_eq!(header_only.len(), 8 + 32);
    let mut cases: Vec<(&str, Vec<u8>)> = vec![
        ("empty", Vec::new()),
        ("one byte", vec![0x42]),
        ("seven bytes", b"1234567".to_vec()),
        ("safetensors without tensors", header_only),
        ("safetensors with one element", one_tensor.clone()),
    ];
    // Bytes after the last tensor take a bytes block of their own.
    one_tensor.extend_from_slice(b"trailing");
    cases.push(("safetensors with trailing bytes", one_tensor));
    for (name, input) in cases {
        for mode in [Mode::Fast, Mode::Best] {
            let fx = Fixture::new(
                &format!("{name} {}", mode.name()),
                input.clone(),
                mode,
                4096,
            );
            assert_eq!(fx.prefix_len > 0, name.starts_with("safetensors"), "{name}");
            let mut t = exhaustive(&fx);
            truncation_cases(&mut t, &fx);
            header_cases(&mut t, &fx);
            t.finish(&fx.name.clone());
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Crafted archives: lengths that would cause giant allocations if trusted
// ---------------------------------------------------------------------------------------------

/// A file header with arbitrary fields and a correct checksum over `prefix`.
fn crafted_header(kind: u8, block_size: u32, prefix_len: u64, prefix: &[u8]) -> Vec<u8> {
    let mut b = vec![0x89, b'S', b'C', b'W', 1, 0, 0, kind];
    b.extend_from_slice(&block_size.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&prefix_len.to_le_bytes());
    b.extend_from_slice(prefix);
    let sum = sc::container::checksum::xxh3(&b);
    b.extend_from_slice(&sum.to_le_bytes());
    b
}

/// A version 3 file header (safetensors, 4 KiB blocks) whose kept header of `prefix_len`
/// bytes is stored as `packed`, with a correct checksum.
fn crafted_packed_header(prefix_len: u64, packed: &[u8]) -> Vec<u8> {
    let mut b = vec![0x89, b'S', b'C', b'W', 3, 0, 0, 1];
    b.extend_from_slice(&4096u32.to_le_bytes());
    b.extend_from_slice(&4u32.to_le_bytes());
    b.extend_from_slice(&prefix_len.to_le_bytes());
    b.extend_from_slice(&(packed.len() as u32).to_le_bytes());
    b.extend_from_slice(packed);
    let sum = sc::container::checksum::xxh3(&b);
    b.extend_from_slice(&sum.to_le_bytes());
    b
}

/// A deflated kept header with a correct checksum but a stream that does not inflate to the
/// prefix: a one-line error naming it, never a panic, and memory that follows what the stream
/// really makes rather than the length it claims.
#[test]
fn crafted_deflated_kept_headers_fail_cleanly() {
    let fx = small_fixture();
    assert!(fx.packed);
    let body = &fx.archive[fx.header_len..];
    let kept = sc::container::kept::pack(&fx.original[..fx.prefix_len], sc::Mode::Best).unwrap();
    let p = fx.prefix_len as u64;
    let named = |e: &Error| e.to_string().contains("kept safetensors header corrupt");
    let mut cases: Vec<(String, u64, Vec<u8>)> = vec![
        ("claims a byte more".into(), p + 1, kept.clone()),
        ("claims a byte less".into(), p - 1, kept.clone()),
        ("cut short".into(), p, kept[..kept.len() - 1].to_vec()),
        ("a byte after its end".into(), p, [&kept[..], &[0]].concat()),
        ("not deflate".into(), p, vec![0xFF; kept.len()]),
    ];
    // A stream that makes 1 MiB of zeros, under a claim of the format's limit.
    let mut zeros = ((1u64 << 20) - 8).to_le_bytes().to_vec();
    zeros.resize(1 << 20, 0);
    let bomb = sc::container::kept::pack(&zeros, sc::Mode::Best).unwrap();
    cases.push(("1 MiB under a 100 MiB claim".into(), (100 << 20) + 8, bomb));
    for (case, claim, packed) in cases {
        let mut bad = crafted_packed_header(claim, &packed);
        bad.extend_from_slice(body);
        for len in [Some(bad.len() as u64), None] {
            let (got, peak) = largest_allocation(|| run_decode(&bad, len));
            match got {
                Ok(Err(e)) if named(&e) => {}
                other => panic!("{case}: expected a kept-header error, got {other:?}"),
            }
            assert!(peak <= 4 * MIB, "{case}: allocated {peak} bytes");
        }
        let got = catch_unwind(AssertUnwindSafe(|| inspect(&mut Cursor::new(&bad))));
        assert!(matches!(got, Ok(Err(ref e)) if named(e)), "{case}: {got:?}");
        // The kept header is inflated while the first blocks decode, and written first: when
        // it fails, nothing is written at all.
        let mut out = Vec::new();
        assert!(decode(&bad[..], &mut out, &DecodeOptions::default()).is_err());
        assert!(out.is_empty(), "{case}: wrote {} bytes", out.len());
    }
    // A deflated length that is zero or longer than the prefix is impossible.
    for c in [0u32, p as u32 + 1] {
        let mut bad = crafted_packed_header(p, &kept);
        bad[24..28].copy_from_slice(&c.to_le_bytes());
        assert!(
            matches!(run_decode(&bad, None), Ok(Err(Error::Corrupt(_)))),
            "{c}"
        );
    }
    // Version 2 does not know flag bit 2.
    let mut bad = crafted_packed_header(p, &kept);
    bad[4] = 2;
    let end = bad.len() - 8;
    let sum = sc::container::checksum::xxh3(&bad[..end]);
    bad[end..].copy_from_slice(&sum.to_le_bytes());
    assert!(matches!(run_decode(&bad, None), Ok(Err(Error::Corrupt(_)))));
}

/// Every byte of a deflated kept header mutated with the checksum made right, so that the
/// inflater sees it: an error, or (padding bits, or a literal of the JSON changed) a decode
/// that the rest of the archive then checks; never a panic.
#[test]
fn deflated_kept_header_mutations_reach_the_inflater() {
    let fx = small_fixture();
    let end = HEADER_FIXED_LEN + fx.kept_stored;
    let mut kept_errors = 0;
    for pos in HEADER_FIXED_LEN + 4..end {
        for m in Mutation::standard(pos) {
            let mut bad = fx.archive.clone();
            bad[pos] = m.apply(bad[pos]);
            let sum = sc::container::checksum::xxh3(&bad[..end]);
            bad[end..end + 8].copy_from_slice(&sum.to_le_bytes());
            match run_decode(&bad, Some(bad.len() as u64)) {
                Err(p) => panic!("byte {pos}: panicked: {p}"),
                Ok(Err(e)) => kept_errors += e.to_string().contains("kept") as usize,
                Ok(Ok(out)) => assert_eq!(out.len(), fx.original.len()),
            }
        }
    }
    assert!(kept_errors > 0);
}

fn small_fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        Fixture::new(
            "synthetic safetensors fast",
            synthetic_safetensors(),
            Mode::Fast,
            4096,
        )
    })
}

/// Replaces block `k`'s record with `rec` (same plane count, so nothing else moves).
fn with_record(fx: &Fixture, k: usize, rec: &BlockRecord) -> Vec<u8> {
    let b = &fx.blocks[k];
    let mut bytes = Vec::new();
    rec.write(&mut bytes);
    assert_eq!(bytes.len(), b.record_len);
    let mut out = fx.archive.clone();
    out[b.offset..b.offset + b.record_len].copy_from_slice(&bytes);
    out
}

fn record_of(fx: &Fixture, k: usize) -> BlockRecord {
    let b = &fx.blocks[k];
    BlockRecord::read(&mut &fx.archive[b.offset..], fx.block_size, k as u64)
        .unwrap()
        .unwrap()
}

#[test]
fn crafted_huge_prefix_length_fails_fast() {
    let fx = small_fixture();
    // Known length: nothing near the claim. Stream: at most the format's limit on the header.
    let mut t = Tally {
        alloc_limit: Some((MIB, (100 << 20) + 8)),
        ..Tally::default()
    };
    let body = &fx.archive[fx.header_len..];
    for claim in [
        u64::MAX,
        u64::MAX - 7,
        1 << 62,
        1 << 40,
        (100 << 20) + 9,
        fx.archive.len() as u64 + 1,
    ] {
        // Safetensors kind with a claimed prefix much longer than anything there.
        let mut bad = crafted_header(1, 4096, claim, &fx.archive[24..32]);
        bad.extend_from_slice(body);
        let case = format!("prefix length claims {claim}");
        if claim > (100 << 20) + 8 {
            t.check(fx, &case, &bad, Some(bad.len() as u64), Expect::Corrupt);
        } else {
            // Within the format's limit but longer than the archive: the archive is cut short.
            t.check(fx, &case, &bad, Some(bad.len() as u64), Expect::Truncation);
        }
        if claim > (100 << 20) + 8 {
            // Over the format's limit: rejected before reading, even without a known length.
            t.check(fx, &case, &bad, None, Expect::Corrupt);
        } else {
            t.check(fx, &case, &bad, None, Expect::Truncation);
        }
    }
    // At the format's limit (100 MiB + 8) a stream can only be rejected once it runs out.
    let mut bad = crafted_header(1, 4096, (100 << 20) + 8, &fx.archive[24..32]);
    bad.extend_from_slice(body);
    t.check(
        fx,
        "prefix at the limit",
        &bad,
        Some(bad.len() as u64),
        Expect::Truncation,
    );
    t.check(fx, "prefix at the limit", &bad, None, Expect::Truncation);
    // A generic archive must have no prefix at all.
    for claim in [8u64, 1 << 40] {
        let mut bad = crafted_header(0, 4096, claim, &[]);
        bad.extend_from_slice(body);
        let case = format!("generic with prefix {claim}");
        t.check(fx, &case, &bad, Some(bad.len() as u64), Expect::Corrupt);
        t.check(fx, &case, &bad, None, Expect::Corrupt);
    }
    // A safetensors prefix shorter than its own length field.
    for claim in [0u64, 7] {
        let mut bad = crafted_header(1, 4096, claim, &fx.archive[24..24 + claim as usize]);
        bad.extend_from_slice(body);
        let case = format!("safetensors prefix of {claim} bytes");
        t.check(fx, &case, &bad, Some(bad.len() as u64), Expect::Corrupt);
    }
    // A valid checksum over a prefix whose JSON length disagrees with the prefix length.
    let mut prefix = fx.archive[24..fx.header_len - 8].to_vec();
    prefix[0] ^= 2;
    let mut bad = crafted_header(1, 4096, prefix.len() as u64, &prefix);
    bad.extend_from_slice(body);
    t.check(
        fx,
        "prefix json length disagrees",
        &bad,
        Some(bad.len() as u64),
        Expect::Corrupt,
    );
    t.finish("crafted prefix lengths");
}

#[test]
fn crafted_block_lengths_fail_fast() {
    let fx = small_fixture();
    // Every record here is rejected before its payload is read, in both reading modes.
    let mut t = Tally {
        alloc_limit: Some((MIB, MIB)),
        ..Tally::default()
    };
    let k = fx
        .blocks
        .iter()
        .position(|b| b.transform.planes() == 2)
        .expect("a 16-bit float block");
    let orig = record_of(fx, k);
    let mut cases: Vec<(String, BlockRecord)> = Vec::new();
    for raw_len in [u32::MAX, u32::MAX - 1, 1 << 31, fx.block_size + 2, 0, 3] {
        let mut r = orig.clone();
        r.raw_len = raw_len;
        cases.push((format!("raw_len {raw_len}"), r));
    }
    for (p, codec, len) in [
        (0, Codec::Huffman, u32::MAX),
        (0, Codec::Huffman, 1 << 30),
        (0, Codec::Huffman, 0),
        (0, Codec::Range, u32::MAX),
        (1, Codec::Stored, u32::MAX),
        (1, Codec::Stored, orig.raw_len),
        (1, Codec::Const, 2),
        (1, Codec::Const, u32::MAX),
    ] {
        let mut r = orig.clone();
        r.planes[p] = PlaneEntry {
            codec,
            coded_len: len,
        };
        cases.push((format!("plane {p} {} coded_len {len}", codec.name()), r));
    }
    for (case, rec) in &cases {
        let bad = with_record(fx, k, rec);
        t.check(
            fx,
            case,
            &bad,
            Some(bad.len() as u64),
            Expect::Block(k as u64),
        );
        t.check(fx, case, &bad, None, Expect::Block(k as u64));
    }
    // A checksummed record that is valid but lies about the block's lengths (plane lengths
    // consistent with a different raw length): the decode must fail on the data, naming it.
    let mut r = orig.clone();
    r.raw_len -= 2;
    let bad = with_record(fx, k, &r);
    t.check(
        fx,
        "raw_len off by one element",
        &bad,
        Some(bad.len() as u64),
        Expect::Block(k as u64),
    );
    t.finish("crafted block records");
}

#[test]
fn crafted_maximal_block_is_not_allocated_from_a_short_archive() {
    // Largest legal block size and a record claiming a full 64 MiB block of two stored planes,
    // followed by a few bytes only. With the length known this must fail before allocating.
    let mut a = crafted_header(0, MAX_BLOCK_SIZE, 0, &[]);
    let rec = BlockRecord {
        transform: Transform::Split16,
        raw_len: MAX_BLOCK_SIZE,
        checksum: 0,
        planes: vec![
            PlaneEntry {
                codec: Codec::Stored,
                coded_len: MAX_BLOCK_SIZE / 2,
            },
            PlaneEntry {
                codec: Codec::Stored,
                coded_len: MAX_BLOCK_SIZE / 2,
            },
        ],
    };
    rec.write(&mut a);
    a.extend_from_slice(&[7u8; 100]);
    let fx = Fixture {
        name: "crafted 64 MiB block".into(),
        original: Vec::new(),
        archive: a.clone(),
        header_len: 32,
        prefix_len: 0,
        kept_stored: 0,
        packed: false,
        block_size: MAX_BLOCK_SIZE,
        blocks: Vec::new(),
        end_offset: a.len(),
        base: None,
    };
    // Known length: the payload is never allocated. A stream cannot know; it may allocate the
    // one block (the documented bound) before running out.
    let mut t = Tally {
        alloc_limit: Some((MIB, MAX_BLOCK_SIZE as usize)),
        also_stream: true,
        ..Tally::default()
    };
    t.check(
        &fx,
        "64 MiB block, 100 bytes",
        &a,
        Some(a.len() as u64),
        Expect::Truncation,
    );
    t.check(&fx, "64 MiB block, 100 bytes", &a, None, Expect::Truncation);
    // The same with payload bytes corrupted.
    for pos in [a.len() - 100, a.len() - 1] {
        let mut bad = a.clone();
        bad[pos] ^= 0xFF;
        let case = format!("64 MiB block, payload byte {pos} flipped");
        t.check(&fx, &case, &bad, Some(bad.len() as u64), Expect::Truncation);
        t.check(&fx, &case, &bad, None, Expect::Truncation);
    }
    t.finish("crafted maximal block");
}

#[test]
fn crafted_footer_with_valid_checksum_is_checked_against_the_blocks() {
    let fx = small_fixture();
    let mut t = Tally::default();
    let n = fx.blocks.len();
    let idx = fx.index_start();
    let tr = fx.trailer_start();
    // Rewrites index/trailer bytes and recomputes the trailer checksum, so only the semantic
    // checks (index equals the blocks, lengths agree) can catch the lie.
    let reseal = |f: &dyn Fn(&mut Vec<u8>)| {
        let mut bad = fx.archive.clone();
        f(&mut bad);
        let sum = sc::container::checksum::xxh3(&bad[idx..tr + 40]);
        bad[tr + 40..tr + 48].copy_from_slice(&sum.to_le_bytes());
        bad
    };
    let put64 =
        |b: &mut Vec<u8>, at: usize, v: u64| b[at..at + 8].copy_from_slice(&v.to_le_bytes());
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("index offset +1", reseal(&|b| b[idx] ^= 1)),
        ("index raw offset +1", reseal(&|b| b[idx + 8] ^= 1)),
        ("index raw length", reseal(&|b| b[idx + 16] ^= 2)),
        ("index stored length", reseal(&|b| b[idx + 20] ^= 1)),
        (
            "last index entry",
            reseal(&|b| b[idx + (n - 1) * 24 + 3] ^= 0x10),
        ),
        ("original length +1", reseal(&|b| b[tr + 16] ^= 1)),
        (
            "original length max",
            reseal(&|b| put64(b, tr + 16, u64::MAX)),
        ),
        ("end offset +1", reseal(&|b| b[tr] ^= 1)),
        ("block count +1", reseal(&|b| b[tr + 8] ^= 1)),
        ("block count max", reseal(&|b| put64(b, tr + 8, u64::MAX))),
        ("end offset max", reseal(&|b| put64(b, tr, u64::MAX - 1))),
        (
            "index offset past the blocks",
            reseal(&|b| put64(b, idx, fx.end_offset as u64)),
        ),
        ("index offset max", reseal(&|b| put64(b, idx, u64::MAX))),
    ];
    for (case, bad) in &cases {
        t.check(fx, case, bad, Some(bad.len() as u64), Expect::Corrupt);
        t.check(fx, case, bad, None, Expect::Corrupt);
    }
    t.finish("crafted footers");
}

#[test]
fn trailer_md5_is_checked_when_recorded_and_must_be_zero_otherwise() {
    // BEST records the MD5 by default, FAST does not; either way the trailer checksum is
    // resealed, so only the MD5 logic can object.
    for (fx, recorded) in [(sample_best(), true), (small_fixture(), false)] {
        let (idx, tr) = (fx.index_start(), fx.trailer_start());
        let mut bad = fx.archive.clone();
        bad[tr + 24] ^= 1;
        let sum = sc::container::checksum::xxh3(&bad[idx..tr + 40]);
        bad[tr + 40..tr + 48].copy_from_slice(&sum.to_le_bytes());
        for len in [Some(bad.len() as u64), None] {
            match (recorded, run_decode(&bad, len)) {
                (true, Ok(Err(Error::Md5Mismatch { .. }))) => {}
                (false, Ok(Err(Error::Corrupt(m)))) if m.contains("MD5") => {}
                (_, other) => panic!("{}: flipped trailer MD5 gave {other:?}", fx.name),
            }
        }
    }
}

/// `inspect` on a trailer whose end offset is `u64::MAX` (with the end magic intact).
#[test]
fn inspect_trailer_end_offset_max() {
    let fx = small_fixture();
    let tr = fx.trailer_start();
    let mut bad = fx.archive.clone();
    bad[tr..tr + 8].fill(0xFF);
    let got = catch_unwind(AssertUnwindSafe(|| {
        inspect(&mut Cursor::new(&bad)).map(|_| ())
    }));
    match got {
        Ok(Err(Error::Corrupt(_))) => {}
        Ok(other) => panic!("expected Corrupt, got {other:?}"),
        Err(p) => panic!("inspect panicked: {}", panic_text(p)),
    }
}

/// The `FileHeader` API agrees with the fixed layout this file assumes.
#[test]
fn header_layout_matches_the_format() {
    let fx = small_fixture();
    let h = FileHeader::read(&mut &fx.archive[..], Some(fx.archive.len() as u64)).unwrap();
    let packed = h.packed.as_ref().expect("a safetensors header deflates");
    assert_eq!(
        h.encoded_len() as usize,
        HEADER_FIXED_LEN + 4 + packed.len() + 8
    );
    assert_eq!(
        u32::from_le_bytes(fx.archive[24..28].try_into().unwrap()) as usize,
        packed.len()
    );
    assert_eq!(u16::from_le_bytes([fx.archive[4], fx.archive[5]]), 3);
    assert_eq!(
        u32::from_le_bytes(fx.archive[12..16].try_into().unwrap()) & 4,
        4
    );
    assert_eq!(&fx.archive[..4], &[0x89, b'S', b'C', b'W']);
    assert_eq!(&fx.archive[fx.archive.len() - 4..], b"SCWE");
    assert_eq!(
        u64::from_le_bytes(fx.archive[16..24].try_into().unwrap()) as usize,
        fx.prefix_len
    );
}
