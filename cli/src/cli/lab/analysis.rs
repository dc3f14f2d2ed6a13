//! Entropy analysis of a safetensors file (`sc analyze`): the measurements behind the
//! split-stream design, per dtype and per tensor.
//!
//! For every element the top word (its two most significant bytes, or its only byte) is counted
//! jointly, and each lower byte plane on its own. From the joint counts follow the order-0
//! entropies of the high and second byte planes, of the exponent field and of the sign and
//! mantissa bits beside it, and the conditional entropies H(second | high) and
//! H(sign, mantissa | exponent), both equal to H(word) minus a marginal. Each gives a lower bound
//! for a coder that models the planes that way.
//!
//! For floats with 16-bit top words, the joint symbol BEST codes (the exponent and the two
//! mantissa bits below it) is also counted per tensor in the contexts of a context model: the
//! mean exponent of the previous 64 elements, and that with the exponent one row up.

use sc::lab::{entropy_bits, read_file_header, Tally};
use sc::{Dtype, Result};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::io::{Read, Seek, SeekFrom};

/// Bytes read per step; bounds memory whatever the tensor size.
const CHUNK: usize = 4 << 20;

/// Where a dtype's fields lie.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Bytes per element.
    pub width: usize,
    /// Bits of the top word counted jointly: 16 (top two bytes), or 8 for one-byte types.
    pub word_bits: u32,
    /// Exponent field inside the top word, as (lowest bit, bit count); `None` for non-floats.
    pub exponent: Option<(u32, u32)>,
}

impl Layout {
    /// Layout of a dtype; an unknown dtype is read as plain bytes.
    pub fn of(dtype: Option<Dtype>) -> Layout {
        let width = dtype.map_or(1, |d| d.width() as usize);
        // Positions within the top word: for F32 and F64 it holds the sign, the exponent and
        // the top mantissa bits, as it does for the 16-bit types.
        let exponent = match dtype {
            Some(Dtype::BF16 | Dtype::F32) => Some((7, 8)),
            Some(Dtype::F16) => Some((10, 5)),
            Some(Dtype::F64) => Some((4, 11)),
            Some(Dtype::F8E4M3) => Some((3, 4)),
            Some(Dtype::F8E5M2) => Some((2, 5)),
            _ => None,
        };
        Layout {
            width,
            word_bits: if width >= 2 { 16 } else { 8 },
            exponent,
        }
    }

    /// Byte planes in the top word: 2, or 1 for one-byte types.
    fn word_planes(&self) -> usize {
        self.width.min(2)
    }

    /// Name of byte plane `k`, counted from the most significant byte.
    pub fn plane_name(&self, k: usize) -> String {
        match (self.width, k) {
            (1, _) => "byte".into(),
            (2, 0) => "high byte".into(),
            (2, _) => "low byte".into(),
            (w, 0) => format!("byte {} (high)", w - 1),
            (w, k) if k + 1 == w => "byte 0 (low)".into(),
            (w, k) => format!("byte {}", w - 1 - k),
        }
    }
}

/// Counts of one dtype's elements (of one tensor, or of all tensors of that dtype).
#[derive(Clone, Debug)]
pub struct Counts {
    /// How the elements are laid out.
    pub layout: Layout,
    /// Elements counted.
    pub elements: u64,
    /// Histogram of the top word (`1 << word_bits` symbols), visited only where counted: a
    /// tensor of a few elements costs those, not 65,536 bins.
    pub word: Tally,
    /// Histograms of the byte planes below the top word, most significant first.
    pub lower: Vec<[u64; 256]>,
}

impl Counts {
    /// Empty counts.
    pub fn new(layout: Layout) -> Counts {
        Counts {
            layout,
            elements: 0,
            word: Tally::new(1 << layout.word_bits),
            lower: vec![[0; 256]; layout.width - layout.word_planes()],
        }
    }

    /// Counts the little-endian elements of `data`; a trailing partial element is ignored.
    pub fn add(&mut self, data: &[u8]) {
        let w = self.layout.width;
        if w == 1 {
            for &b in data {
                self.word.add(b as usize, 1);
            }
        } else {
            for c in data.chunks_exact(w) {
                self.word
                    .add((c[w - 1] as usize) << 8 | c[w - 2] as usize, 1);
                for (k, h) in self.lower.iter_mut().enumerate() {
                    h[c[w - 3 - k] as usize] += 1;
                }
            }
        }
        self.elements += (data.len() / w) as u64;
    }

    /// Adds `other`'s counts (same layout).
    pub fn merge(&mut self, other: &Counts) {
        self.elements += other.elements;
        other.word.add_to(&mut self.word);
        for (ha, hb) in self.lower.iter_mut().zip(&other.lower) {
            for (a, b) in ha.iter_mut().zip(hb) {
                *a += b;
            }
        }
    }

    /// Histogram of byte plane `k`, counted from the most significant byte.
    pub fn plane(&self, k: usize) -> Vec<u64> {
        if k >= self.layout.word_planes() {
            return self.lower[k - self.layout.word_planes()].to_vec();
        }
        let shift = self.layout.word_bits - 8 * (k as u32 + 1);
        self.project(256, |v| (v >> shift) & 0xFF)
    }

    /// Histogram of the exponent field (floats only).
    pub fn exponent(&self) -> Option<Vec<u64>> {
        let (lo, bits) = self.layout.exponent?;
        Some(self.project(1 << bits, |v| (v >> lo) & ((1 << bits) - 1)))
    }

    /// Histogram of the top word's other bits, sign above mantissa (floats only).
    pub fn sign_mantissa(&self) -> Option<Vec<u64>> {
        let (lo, bits) = self.layout.exponent?;
        let size = 1 << (self.layout.word_bits - bits);
        Some(self.project(size, |v| (v >> (lo + bits)) << lo | (v & ((1 << lo) - 1))))
    }

    /// Histogram of a function of the top word.
    fn project(&self, size: usize, f: impl Fn(usize) -> usize) -> Vec<u64> {
        let mut h = vec![0u64; size];
        for (v, c) in self.word.counted() {
            h[f(v)] += c;
        }
        h
    }

    /// The entropies of these counts.
    pub fn entropies(&self) -> Entropies {
        let planes = (0..self.layout.width)
            .map(|k| entropy_bits(&self.plane(k)))
            .collect();
        Entropies {
            planes,
            exponent: self.exponent().map(|h| entropy_bits(&h)),
            sign_mantissa: self.sign_mantissa().map(|h| entropy_bits(&h)),
            word: self.word.entropy_bits(),
            word_planes: self.layout.word_planes(),
        }
    }
}

/// Order-0 and conditional entropies in bits per element of the field concerned.
#[derive(Clone, Debug, PartialEq)]
pub struct Entropies {
    /// Each byte plane, most significant first.
    pub planes: Vec<f64>,
    /// The exponent field (floats).
    pub exponent: Option<f64>,
    /// The top word's sign and mantissa bits (floats).
    pub sign_mantissa: Option<f64>,
    /// The top word as a whole.
    pub word: f64,
    /// Byte planes inside the top word.
    word_planes: usize,
}

/// A lower bound on the coded size of a dtype's data.
#[derive(Clone, Debug, PartialEq)]
pub struct Bound {
    /// Which model it bounds.
    pub name: &'static str,
    /// Bits per element.
    pub bits: f64,
}

impl Entropies {
    /// H(second byte | high byte) = H(word) - H(high byte), for types of two bytes or more.
    pub fn second_given_high(&self) -> Option<f64> {
        (self.word_planes == 2).then(|| (self.word - self.planes[0]).max(0.0))
    }

    /// H(sign, mantissa | exponent) = H(word) - H(exponent), for floats.
    pub fn sign_mantissa_given_exponent(&self) -> Option<f64> {
        self.exponent.map(|e| (self.word - e).max(0.0))
    }

    /// Sum of the byte planes below the top word.
    fn rest(&self) -> f64 {
        self.planes[self.word_planes..].iter().sum()
    }

    /// Bounds for coding each plane on its own, the exponent split, and the top word jointly
    /// (the high byte, then the second byte given the high byte), in bits per element.
    pub fn bounds(&self) -> Vec<Bound> {
        let mut b = vec![Bound {
            name: "byte planes, order-0",
            bits: self.planes.iter().sum(),
        }];
        if let (Some(e), Some(sm)) = (self.exponent, self.sign_mantissa) {
            b.push(Bound {
                name: "exponent + sign/mantissa, order-0",
                bits: e + sm + self.rest(),
            });
        }
        if self.word_planes == 2 {
            b.push(Bound {
                name: "high byte + second byte given high",
                bits: self.joint(),
            });
        }
        b
    }

    /// The top word coded jointly and the lower planes on their own, in bits per element.
    pub fn joint(&self) -> f64 {
        self.word + self.rest()
    }
}

/// One tensor's entropies.
#[derive(Clone, Debug)]
pub struct TensorAnalysis {
    /// Name in the header.
    pub name: String,
    /// Dtype as written in the header.
    pub dtype: String,
    /// Shape.
    pub shape: Vec<u64>,
    /// Bytes of data.
    pub bytes: u64,
    /// Elements counted.
    pub elements: u64,
    /// Its entropies.
    pub entropies: Entropies,
}

/// All tensors of one dtype.
#[derive(Clone, Debug)]
pub struct DtypeAnalysis {
    /// Dtype as written in the header.
    pub dtype: String,
    /// Tensors of this dtype.
    pub tensors: usize,
    /// Bytes of data.
    pub bytes: u64,
    /// Counts over all of them.
    pub counts: Counts,
    /// Sum over the tensors of elements x their own joint bound ([`Entropies::joint`]).
    pub per_tensor_bits: f64,
    /// Sums over the tensors of their context bounds ([`ContextBits`]), for floats with 16-bit
    /// top words.
    pub context_bits: Option<ContextBits>,
}

/// Bits of a tensor's elements (or the sum over tensors) when the joint symbol (exponent and
/// the two mantissa bits below it) is coded with one model per tensor, order-0 or in a context,
/// and the other bits of the top word stored raw and the lower planes coded order-0.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ContextBits {
    /// The symbol order-0.
    pub order0: f64,
    /// The symbol given the mean exponent of the previous 64 elements, in half-exponent steps.
    pub running: f64,
    /// The symbol given that and the exponent of the element one row up (the tensor's last
    /// dimension above 1 as the row, for tensors of two such dimensions or more).
    pub running_up: f64,
}

impl ContextBits {
    fn add(&mut self, o: &ContextBits) {
        self.order0 += o.order0;
        self.running += o.running;
        self.running_up += o.running_up;
    }
}

impl DtypeAnalysis {
    /// Entropies over all tensors of this dtype.
    pub fn entropies(&self) -> Entropies {
        self.counts.entropies()
    }

    /// The bounds of [`Entropies::bounds`], then the joint bound with one model per tensor.
    pub fn bounds(&self) -> Vec<Bound> {
        let mut b = self.entropies().bounds();
        let per = |bits: f64| bits / self.counts.elements.max(1) as f64;
        b.push(Bound {
            name: "joint, one model per tensor",
            bits: per(self.per_tensor_bits),
        });
        if let Some(c) = self.context_bits {
            b.extend([
                Bound {
                    name: "exponent + 2 mantissa bits, one model per tensor",
                    bits: per(c.order0),
                },
                Bound {
                    name: "same, given the mean exponent of the last 64",
                    bits: per(c.running),
                },
                Bound {
                    name: "same, given that and the exponent one row up",
                    bits: per(c.running_up),
                },
            ]);
        }
        b
    }

    /// Bits per element stored raw.
    pub fn raw_bits(&self) -> f64 {
        8.0 * self.counts.layout.width as f64
    }
}

/// The analysis of one safetensors file.
#[derive(Clone, Debug)]
pub struct Analysis {
    /// File length.
    pub file_len: u64,
    /// The 8-byte length and the JSON header.
    pub header_len: u64,
    /// Per dtype, most bytes first.
    pub dtypes: Vec<DtypeAnalysis>,
    /// Per tensor, most bytes first.
    pub tensors: Vec<TensorAnalysis>,
}

impl Analysis {
    /// Percentage of the file if `dtype`'s data took `bits` per element and everything else
    /// were stored as it is.
    pub fn file_percent(&self, dtype: &DtypeAnalysis, bits: f64) -> f64 {
        let coded = bits * dtype.counts.elements as f64 / 8.0;
        100.0 * (self.file_len as f64 - dtype.bytes as f64 + coded) / self.file_len.max(1) as f64
    }

    /// Percentage of the file with every dtype at its per-tensor joint bound and the header
    /// and any bytes between tensors stored as they are.
    pub fn best_percent(&self) -> f64 {
        let saved: f64 = self
            .dtypes
            .iter()
            .map(|d| d.bytes as f64 - d.per_tensor_bits / 8.0)
            .sum();
        100.0 * (self.file_len as f64 - saved) / self.file_len.max(1) as f64
    }
}

/// A hasher for integer keys: one multiplication (the keys are small and well spread).
#[derive(Default)]
struct IntHasher(u64);

impl Hasher for IntHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }

    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0 ^ x)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .rotate_left(29);
    }
}

/// Counts of (context, symbol) pairs.
type PairCounts = HashMap<u64, u64, BuildHasherDefault<IntHasher>>;

/// Elements over which the running mean exponent is taken.
const RUNNING: usize = 64;
/// Longest row whose exponents are kept for the row-above context.
const MAX_ROW: u64 = 1 << 20;

/// The joint symbols of one float tensor, counted in the contexts of [`ContextBits`].
struct SymbolContexts {
    /// Lowest bit of the exponent in the top word, and its width.
    lo: u32,
    bits: u32,
    /// Exponents of the last [`RUNNING`] elements (a ring) and their sum.
    recent: [u32; RUNNING],
    sum: u32,
    /// Exponents of the last row (a ring), if the tensor has rows.
    above: Vec<u32>,
    seen: usize,
    order0: Vec<u64>,
    running: PairCounts,
    running_up: PairCounts,
}

impl SymbolContexts {
    /// Counts for a tensor of `shape` in `layout`, if it is a float with a 16-bit top word.
    fn new(layout: Layout, shape: &[u64]) -> Option<SymbolContexts> {
        let (lo, bits) = layout
            .exponent
            .filter(|&(lo, _)| lo >= 2 && layout.word_bits == 16)?;
        let dims: Vec<u64> = shape.iter().copied().filter(|&d| d > 1).collect();
        let row = match dims.as_slice() {
            [_, .., last] if *last <= MAX_ROW => *last as usize,
            _ => 0,
        };
        Some(SymbolContexts {
            lo,
            bits,
            recent: [0; RUNNING],
            sum: 0,
            above: vec![0; row],
            seen: 0,
            order0: vec![0; 1 << (bits + 2)],
            running: PairCounts::default(),
            running_up: PairCounts::default(),
        })
    }

    /// Counts the top word `v` of the next element.
    fn add(&mut self, v: usize) {
        let e = (v >> self.lo) as u32 & ((1 << self.bits) - 1);
        let sym = (v >> (self.lo - 2)) as u64 & ((1 << (self.bits + 2)) - 1);
        let n = self.seen.min(RUNNING) as u32;
        // Half-exponent steps; the first element has a context of its own.
        let running = match n {
            0 => u32::MAX as u64,
            _ => (2 * self.sum / n) as u64,
        };
        let row = self.above.len();
        let up = match row {
            r if r > 0 && self.seen >= r => self.above[self.seen % r] as u64,
            _ => u32::MAX as u64,
        };
        self.order0[sym as usize] += 1;
        *self.running.entry(running << 16 | sym).or_default() += 1;
        *self
            .running_up
            .entry((running << 32 | up) << 16 | sym)
            .or_default() += 1;
        let slot = self.seen % RUNNING;
        self.sum = self.sum - self.recent[slot] + e;
        self.recent[slot] = e;
        if row > 0 {
            self.above[self.seen % row] = e;
        }
        self.seen += 1;
    }

    /// The symbol's bits order-0 and in each context, and `rest` bits per element more.
    fn bits(&self, rest: f64) -> ContextBits {
        let n = self.seen as f64;
        let raw = rest + (16 - self.bits - 2) as f64;
        ContextBits {
            order0: entropy_bits(&self.order0) * n + raw * n,
            running: conditional_bits(&self.running) + raw * n,
            running_up: conditional_bits(&self.running_up) + raw * n,
        }
    }
}

/// The bits of the symbols (the low 16 bits of each key) given their contexts (the rest),
/// coded with the counts as probabilities: the sum of `-c log2(c / context total)`.
fn conditional_bits(pairs: &PairCounts) -> f64 {
    let mut totals = PairCounts::default();
    for (&k, &c) in pairs {
        *totals.entry(k >> 16).or_default() += c;
    }
    pairs
        .iter()
        .map(|(&k, &c)| -(c as f64) * (c as f64 / totals[&(k >> 16)] as f64).log2())
        .sum()
}

/// Analyses the safetensors file `r`, reading each tensor once in bounded chunks.
///
/// A file that is not safetensors is [`sc::Error::NotSafetensors`] saying why.
pub fn analyze<R: Read + Seek>(r: &mut R) -> Result<Analysis> {
    analyze_in_chunks(r, CHUNK)
}

fn analyze_in_chunks<R: Read + Seek>(r: &mut R, chunk: usize) -> Result<Analysis> {
    let (header, file_len) = read_file_header(r)?;
    let base = header.prefix_len();
    let mut dtypes: Vec<DtypeAnalysis> = Vec::new();
    let mut tensors = Vec::with_capacity(header.tensors.len());
    let mut buf = Vec::new();
    for t in &header.tensors {
        let layout = Layout::of(t.dtype);
        let mut counts = Counts::new(layout);
        let mut contexts = SymbolContexts::new(layout, &t.shape);
        let step = (chunk / layout.width).max(1) * layout.width;
        r.seek(SeekFrom::Start(base + t.begin))?;
        let mut left = t.end - t.begin;
        while left > 0 {
            let n = left.min(step as u64) as usize;
            buf.resize(n, 0);
            r.read_exact(&mut buf)?;
            counts.add(&buf);
            if let Some(c) = &mut contexts {
                for e in buf.chunks_exact(layout.width) {
                    let w = layout.width;
                    c.add((e[w - 1] as usize) << 8 | e[w - 2] as usize);
                }
            }
            left -= n as u64;
        }
        let entropies = counts.entropies();
        let at = match dtypes.iter().position(|d| d.dtype == t.dtype_name) {
            Some(at) => at,
            None => {
                dtypes.push(DtypeAnalysis {
                    dtype: t.dtype_name.clone(),
                    tensors: 0,
                    bytes: 0,
                    counts: Counts::new(layout),
                    per_tensor_bits: 0.0,
                    context_bits: None,
                });
                dtypes.len() - 1
            }
        };
        let d = &mut dtypes[at];
        d.tensors += 1;
        d.bytes += t.end - t.begin;
        d.counts.merge(&counts);
        d.per_tensor_bits += entropies.joint() * counts.elements as f64;
        if let Some(c) = &contexts {
            d.context_bits
                .get_or_insert_with(ContextBits::default)
                .add(&c.bits(entropies.rest()));
        }
        tensors.push(TensorAnalysis {
            name: t.name.clone(),
            dtype: t.dtype_name.clone(),
            shape: t.shape.clone(),
            bytes: t.end - t.begin,
            elements: counts.elements,
            entropies,
        });
    }
    dtypes.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.dtype.cmp(&b.dtype)));
    tensors.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.name.cmp(&b.name)));
    Ok(Analysis {
        file_len,
        header_len: base,
        dtypes,
        tensors,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::io::Cursor;

    /// A safetensors file from (name, dtype, raw little-endian bytes, element count).
    fn file(tensors: &[(&str, &str, Vec<u8>, usize)]) -> Vec<u8> {
        let mut json = Vec::new();
        let mut data = Vec::new();
        for (name, dtype, raw, n) in tensors {
            json.push(format!(
                r#""{name}":{{"dtype":"{dtype}","shape":[{n}],"data_offsets":[{},{}]}}"#,
                data.len(),
                data.len() + raw.len()
            ));
            data.extend_from_slice(raw);
        }
        let json = format!("{{{}}}", json.join(","));
        let mut f = (json.len() as u64).to_le_bytes().to_vec();
        f.extend_from_slice(json.as_bytes());
        f.extend_from_slice(&data);
        f
    }

    /// Many tiny BF16 tensors: each tensor's histogram of top words is visited only where it
    /// counted (a dense one visits 65,536 bins five times a tensor, 6.6 * 10^7 here).
    #[test]
    fn tiny_tensors_visit_bins_in_proportion_to_their_values() {
        let n = 200;
        let tensors: Vec<(String, Vec<u8>)> = (0..n)
            .map(|i| (format!("t{i}"), le16(&[0x3F80 + i as u16, 0xBF00, 1, 2])))
            .collect();
        let refs: Vec<(&str, &str, Vec<u8>, usize)> = tensors
            .iter()
            .map(|(name, raw)| (name.as_str(), "BF16", raw.clone(), 4))
            .collect();
        let before = sc::hook::done(sc::hook::Work::BinsVisited);
        analyze(&mut Cursor::new(file(&refs))).unwrap();
        let visited = sc::hook::done(sc::hook::Work::BinsVisited) - before;
        let values = 4 * n as u64;
        assert!(visited <= 16 * values, "{visited} bins for {values} values");
    }

    fn le16(v: &[u16]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    fn le32(v: &[u32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    fn close(got: f64, want: f64, what: &str) {
        assert!((got - want).abs() < 0.01, "{what}: {got} != {want}");
    }

    #[test]
    fn entropies_match_hand_computed_values() {
        // BF16: 1.0, 1.0, -1.0, 2.0.  F32: 1.0, 1.0, -1.0, 1.5.  U8: 1, 2, 3, 4.
        let f = file(&[
            ("a", "BF16", le16(&[0x3F80, 0x3F80, 0xBF80, 0x4000]), 4),
            (
                "b",
                "F32",
                le32(&[0x3F80_0000, 0x3F80_0000, 0xBF80_0000, 0x3FC0_0000]),
                4,
            ),
            ("c", "U8", vec![1, 2, 3, 4], 4),
        ]);
        let a = analyze(&mut Cursor::new(&f)).unwrap();
        let h34 = 0.811_278; // H(3/4, 1/4)
        let by = |n: &str| a.dtypes.iter().find(|d| d.dtype == n).unwrap();

        let bf = by("BF16").entropies();
        // High bytes 3F,3F,BF,40: 1.5. Low 80,80,80,00: H(3/4). Exponents 7F,7F,7F,80: H(3/4).
        // Sign/mantissa 00,00,80,00: H(3/4). The high byte determines the low byte: 0.
        close(bf.planes[0], 1.5, "BF16 high");
        close(bf.planes[1], h34, "BF16 low");
        close(bf.exponent.unwrap(), h34, "BF16 exponent");
        close(bf.sign_mantissa.unwrap(), h34, "BF16 sign/mantissa");
        close(bf.second_given_high().unwrap(), 0.0, "BF16 low | high");
        close(bf.word, 1.5, "BF16 word");
        close(
            bf.sign_mantissa_given_exponent().unwrap(),
            1.5 - h34,
            "sm | e",
        );

        let f32 = by("F32").entropies();
        // Byte 3: 3F,3F,BF,3F; byte 2: 80,80,80,C0; bytes 1, 0 all zero. Exponent always 7F;
        // sign/mantissa 00,00,80,40: 1.5. Byte 2 given byte 3: 3/4 * H(2/3, 1/3) = 0.6887.
        for (k, want) in [h34, h34, 0.0, 0.0].into_iter().enumerate() {
            close(f32.planes[k], want, "F32 plane");
        }
        close(f32.exponent.unwrap(), 0.0, "F32 exponent");
        close(f32.sign_mantissa.unwrap(), 1.5, "F32 sign/mantissa");
        close(
            f32.second_given_high().unwrap(),
            0.688_722,
            "F32 byte 2 | byte 3",
        );

        let u8s = by("U8").entropies();
        close(u8s.planes[0], 2.0, "U8");
        assert_eq!(u8s.exponent, None);
        assert_eq!(u8s.second_given_high(), None);

        // Bounds: BF16 joint 1.5 bits of 16; the file % counts everything else as stored.
        let d = by("BF16");
        let joint = d
            .bounds()
            .iter()
            .find(|b| b.name.starts_with("high"))
            .unwrap()
            .bits;
        close(joint, 1.5, "BF16 joint bound");
        let want = 100.0 * (f.len() as f64 - 8.0 + 4.0 * 1.5 / 8.0) / f.len() as f64;
        close(a.file_percent(d, joint), want, "file %");
        assert_eq!(a.tensors[0].name, "b", "largest tensor first");
        assert_eq!(a.header_len + 8 + 16 + 4, f.len() as u64);
    }

    /// Entropy computed the plain way, from a map of values to counts.
    fn naive(values: impl Iterator<Item = u64>) -> f64 {
        let mut m: HashMap<u64, f64> = HashMap::new();
        let mut n = 0.0;
        for v in values {
            *m.entry(v).or_default() += 1.0;
            n += 1.0;
        }
        m.values().map(|c| -(c / n) * (c / n).log2()).sum()
    }

    #[test]
    fn entropies_agree_with_a_naive_computation_across_chunks() {
        // Skewed values so every field has a non-trivial distribution.
        let mut s = 0x1234_5678_u64;
        let vals: Vec<u16> = (0..20_000)
            .map(|_| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let x = (s >> 33) as u16;
                (x & 0x807F) | (0x3C00 + (x >> 7).trailing_zeros() as u16 * 0x80)
            })
            .collect();
        let f = file(&[("h", "F16", le16(&vals), vals.len())]);
        // An odd chunk size checks that elements are never split between reads.
        let a = analyze_in_chunks(&mut Cursor::new(&f), 999).unwrap();
        let e = a.dtypes[0].entropies();
        let v = || vals.iter().map(|&x| x as u64);
        close(e.planes[0], naive(v().map(|x| x >> 8)), "high");
        close(e.planes[1], naive(v().map(|x| x & 0xFF)), "low");
        close(
            e.exponent.unwrap(),
            naive(v().map(|x| (x >> 10) & 31)),
            "exp",
        );
        let sm = naive(v().map(|x| (x >> 15) << 10 | (x & 0x3FF)));
        close(e.sign_mantissa.unwrap(), sm, "sign/mantissa");
        let low_given_high = naive(v()) - naive(v().map(|x| x >> 8));
        close(e.second_given_high().unwrap(), low_given_high, "low | high");
        assert_eq!(a.dtypes[0].counts.elements, vals.len() as u64);
    }

    #[test]
    fn context_bounds_of_repeated_rows() {
        // Four rows of 1.0, 2.0: the symbols take one bit each order-0, and the exponent one
        // row up determines them; every BF16 element has 6 more bits stored raw.
        let v: Vec<u16> = [0x3F80, 0x4000].repeat(4);
        let mut json = br#"{"t":{"dtype":"BF16","shape":[4,2],"data_offsets":[0,16]}}"#.to_vec();
        let mut f = (json.len() as u64).to_le_bytes().to_vec();
        f.append(&mut json);
        f.extend_from_slice(&le16(&v));
        let a = analyze(&mut Cursor::new(&f)).unwrap();
        let c = a.dtypes[0].context_bits.unwrap();
        close(c.order0, 8.0 + 6.0 * 8.0, "order-0");
        close(c.running_up, 6.0 * 8.0, "given the row above");
        assert!(c.running_up <= c.running && c.running <= c.order0);
        // Integer tensors have no exponent to model.
        let f = file(&[("i", "I32", le32(&[1, 2, 3]), 3)]);
        assert_eq!(
            analyze(&mut Cursor::new(&f)).unwrap().dtypes[0].context_bits,
            None
        );
    }

    #[test]
    fn conditional_bits_agree_with_a_naive_computation() {
        let mut s = 99u64;
        let mut pairs = PairCounts::default();
        let mut keys = Vec::new();
        for _ in 0..5000 {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1);
            let (ctx, sym) = ((s >> 60) % 5, (s >> 40) % 7 + (s >> 60) % 5);
            *pairs.entry(ctx << 16 | sym).or_default() += 1;
            keys.push((ctx, sym));
        }
        let joint = naive(keys.iter().map(|&(c, s)| c << 16 | s));
        let ctx = naive(keys.iter().map(|&(c, _)| c));
        close(
            conditional_bits(&pairs) / 5000.0,
            joint - ctx,
            "H(sym | ctx)",
        );
    }

    #[test]
    fn rejects_files_that_are_not_safetensors() {
        for bad in [
            &b"not a model at all"[..],
            b"",
            &[2, 0, 0, 0, 0, 0, 0, 0, b'[', b']'],
        ] {
            let e = analyze(&mut Cursor::new(bad)).unwrap_err().to_string();
            assert!(e.contains("not a safetensors file"), "{e}");
        }
    }
}
