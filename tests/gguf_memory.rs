//! What reading GGUF archives holds in memory, counted by a global allocator that records the
//! peak of the bytes allocated: the kept header's tensors and metadata stay within the
//! multiples of the header's size that docs/GUARANTEES.md states, however the header is
//! shaped (many tiny tensors, long arrays of one-byte values, many tiny keys).

use sc::gguf::{types::GgmlType, write, Value};
use sc::{Archive, EncodeOptions, Mode};
use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Cursor;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Mutex;

/// Counts the bytes allocated now and the most allocated at once.
struct Counting;

static NOW: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(by: usize) {
    let now = NOW.fetch_add(by, Relaxed) + by;
    PEAK.fetch_max(now, Relaxed);
}

// SAFETY: every call goes to the system allocator unchanged; the counters are only counted.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            grew(l.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(l) };
        if !p.is_null() {
            grew(l.size());
        }
        p
    }

    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) };
        NOW.fetch_sub(l.size(), Relaxed);
    }

    unsafe fn realloc(&self, p: *mut u8, l: Layout, size: usize) -> *mut u8 {
        let q = unsafe { System.realloc(p, l, size) };
        if !q.is_null() {
            // Both blocks are held while the bytes move.
            grew(size);
            NOW.fetch_sub(l.size(), Relaxed);
        }
        q
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// One test at a time: the counters are the process's, and count every thread.
static ONE: Mutex<()> = Mutex::new(());

/// What `f` returns, and the most bytes it held at once above what was held when it started.
fn peak<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let start = NOW.load(Relaxed);
    PEAK.store(start, Relaxed);
    let out = f();
    (out, PEAK.load(Relaxed).saturating_sub(start))
}

fn f32() -> &'static GgmlType {
    GgmlType::from_id(0).unwrap()
}

/// The archive of a GGUF file of `metadata` and `names` (one-value F32 tensors), and the length
/// of its kept header (magic to tensor data).
fn archive(metadata: &[(String, Value)], names: &[String]) -> (Vec<u8>, usize) {
    let data = 1.5f32.to_le_bytes();
    let tensors: Vec<(&str, &[u64], &GgmlType, &[u8])> = names
        .iter()
        .map(|n| (n.as_str(), &[1u64][..], f32(), &data[..]))
        .collect();
    let file = write::file(3, metadata, &tensors);
    let h = sc::gguf::GgufHeader::parse(&file, file.len() as u64).unwrap();
    let opts = EncodeOptions::new(Mode::Fast);
    (
        sc::encode_to_vec(&file, &opts).unwrap(),
        h.data_start as usize,
    )
}

/// Opening the archive (its tensor list), finding a tensor by name, its metadata as text, and
/// `inspect` with the metadata: the most each holds, as a multiple of the kept header.
fn costs(archive: &[u8], kept: usize) -> [(&'static str, f64); 3] {
    let ((), open) = peak(|| {
        let a = Archive::open(Cursor::new(archive)).unwrap();
        let name = a.tensors()[0].name.clone();
        assert!(a.tensor(&name).is_some());
    });
    let ((), meta) = peak(|| {
        let a = Archive::open(Cursor::new(archive)).unwrap();
        assert!(a.metadata().is_some());
    });
    let ((), inspect) = peak(|| {
        let info = sc::inspect(&mut Cursor::new(archive)).unwrap();
        assert!(info.metadata().is_some());
    });
    let x = |b: usize| b as f64 / kept as f64;
    [
        ("open and find", x(open)),
        ("open and metadata", x(meta)),
        ("inspect and metadata", x(inspect)),
    ]
}

/// Checks every cost of `what` against `bound` times the kept header.
fn within(what: &str, costs: [(&str, f64); 3], bound: f64) {
    for (op, x) in costs {
        eprintln!("{what}: {op}: {x:.2} times the kept header");
        assert!(
            x <= bound,
            "{what}: {op} holds {x:.2} times the kept header"
        );
    }
}

/// 200,000 tensors, with short names and with names of llama.cpp's shape: the tensor list
/// holds at most 8 times the kept header.
#[test]
fn many_tensors_cost_at_most_8_times_the_header() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let n = 200_000;
    let short: Vec<String> = (0..n).map(|i| format!("{i:x}")).collect();
    let real: Vec<String> = (0..n).map(|i| format!("blk.{i}.ffn_up.weight")).collect();
    for (what, names) in [("short names", short), ("llama names", real)] {
        let (archive, kept) = archive(&[], &names);
        within(what, costs(&archive, kept), 8.0);
        // Encoding holds the blocks in flight besides (a fixed cost, within the budget).
        let file = sc::decode_to_vec(&archive, &sc::DecodeOptions::default()).unwrap();
        let opts = EncodeOptions {
            threads: 1,
            ..EncodeOptions::new(Mode::Fast)
        };
        let (_, held) = peak(|| sc::encode(&file[..], std::io::sink(), &opts).unwrap());
        let fixed = 32 << 20;
        eprintln!("{what}: encode: {held} bytes, kept header {kept}");
        assert!(
            held <= 8 * kept + fixed,
            "{what}: encode holds {held} bytes"
        );
    }
}

/// Arrays of a million one-byte values (booleans, whose text is longest), of empty strings,
/// of empty arrays, and a hundred thousand tiny keys: the metadata as text, with the tensor
/// list, holds at most 10 times the kept header.
#[test]
fn metadata_bombs_cost_at_most_10_times_the_header() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let n = 1_000_000;
    let names = ["w".to_string()];
    let one = |v: Value| vec![("k".to_string(), v)];
    let cases = [
        ("booleans", one(Value::Numbers(7, n, vec![0; n as usize]))),
        ("bytes", one(Value::Numbers(0, n, vec![200; n as usize]))),
        (
            "strings",
            one(Value::Strings(vec![String::new(); n as usize / 8])),
        ),
        (
            "arrays",
            one(Value::Arrays(vec![Value::Arrays(vec![]); n as usize / 12])),
        ),
        (
            "keys",
            (0..n / 10)
                .map(|i| (format!("{i:x}"), Value::U8(1)))
                .collect(),
        ),
    ];
    for (what, metadata) in cases {
        let (archive, kept) = archive(&metadata, &names);
        within(what, costs(&archive, kept), 10.0);
    }
}
