//! `sc models` on a GGUF file: every coder variant over each plane of the ggml block
//! transforms, in the archive's own blocks, next to the order-0 entropies that bound them and
//! to what FAST and BEST store for that plane; the plain tensors as FAST and BEST code them.

use super::gguf::{analyze_gguf, read_gguf_header, GgufAnalysis};
use super::models::{adaptive_size, compare_tensors, stored, Tensors};
use crate::choice::SignModels;
use crate::codec::{byctx, huffman, range};
use crate::entropy::model::{AdaptiveModel, BYTE_PARAMS};
use crate::entropy::rc::Encoder;
use crate::error::Result;
use crate::gguf::types::{joined_quant_bits, Packing};
use crate::pipeline::block::{code_block, Scratch};
use crate::pipeline::encode::EncodeOptions;
use crate::pipeline::plan::{BlockSpec, Planner};
use crate::pipeline::refs::Spans;
use crate::read::read_exact_or;
use crate::safetensors::{Dtype, Header, TensorInfo};
use crate::stats::{entropy_bits, histogram};
use crate::transform::ggml::{Layout, Piece};
use crate::transform::Transform;
use crate::{Kind, Mode};
use rayon::prelude::*;
use std::io::{Read, Seek, SeekFrom};

mod report;

pub use report::{row, GgufModels, PlainReport, PlaneReport, QuantReport, ROWS};
use report::{CODERS, CODER_NAMES};

/// A name for plane `k` of `layout`, after the field it takes its bytes from.
fn plane_name(layout: &Layout, k: usize) -> String {
    let t = layout.ggml();
    let (at, len, step) = match layout.planes[k] {
        Piece::Joined(_) => {
            let bits = joined_quant_bits(t).unwrap_or(8);
            return format!("quants joined {bits}-bit");
        }
        Piece::Bytes { at, len, step } => (at as usize, len as usize, step),
    };
    let Some(f) = t
        .fields
        .iter()
        .find(|f| (f.offset..f.offset + f.len).contains(&at))
    else {
        return format!("bytes {at}..{}", at + len);
    };
    let rel = at - f.offset;
    let half = |odd: bool| if odd { "high" } else { "low" };
    match (f.packing, len, step) {
        (Packing::F16, 1, _) => format!("{} {} byte", f.name, half(rel == 1)),
        (Packing::F32, 1, _) => format!("{} byte {rel}", f.name),
        (_, _, 2) => format!("{} {} bytes", f.name, half(rel % 2 == 1)),
        _ if len == f.len => f.name.to_string(),
        _ => format!("{} bytes {rel}..{}", f.name, rel + len),
    }
}

/// The entry of `plain` for blocks planned as `transform`, made empty on first use.
fn plain_entry(plain: &mut Vec<PlainReport>, transform: Transform) -> &mut PlainReport {
    let i = match plain.iter().position(|p| p.transform == transform.name()) {
        Some(i) => i,
        None => {
            plain.push(PlainReport {
                name: String::new(),
                transform: transform.name(),
                tensors: 0,
                bytes: 0,
                blocks: 0,
                fast: 0,
                best: 0,
            });
            plain.len() - 1
        }
    };
    &mut plain[i]
}

/// The entry of `quant` for blocks of `layout`, made empty on first use (its field bound from
/// `analysis`).
fn quant_entry<'q>(
    quant: &'q mut Vec<QuantState>,
    layout: &'static Layout,
    analysis: &GgufAnalysis,
) -> &'q mut QuantState {
    let q = match quant.iter().position(|q| std::ptr::eq(q.layout, layout)) {
        Some(q) => q,
        None => {
            let t = layout.ggml();
            let field_bound = analysis
                .types
                .iter()
                .find(|a| a.name == t.name)
                .map_or(0.0, |a| {
                    a.fields
                        .iter()
                        .filter(|f| f.in_bound)
                        .map(|f| f.tensor_bits / 8.0)
                        .sum()
                });
            let planes = (0..layout.planes.len())
                .map(|k| PlaneReport {
                    name: plane_name(layout, k),
                    bytes: 0,
                    sizes: std::array::from_fn(|r| match r {
                        row::BYCTX if k == 0 => None,
                        row::POSITION | row::ORDER1 if layout.bytes(k) == 1 => None,
                        _ => Some(0.0),
                    }),
                    smallest_coders: Vec::new(),
                    fast_codecs: Vec::new(),
                    best_codecs: Vec::new(),
                })
                .collect();
            quant.push(QuantState {
                report: QuantReport {
                    name: t.name,
                    tensors: 0,
                    bytes: 0,
                    blocks: 0,
                    field_bound,
                    planes,
                },
                layout,
            });
            quant.len() - 1
        }
    };
    &mut quant[q]
}

/// Bytes of `data` coded with an adaptive order-0 model of its own for each context
/// `contexts` gives its bytes (fewer than `n` contexts), as a codec would store it: a 32-byte
/// bitmap of the bytes each context holds, then one range-coded stream (a context of one byte
/// codes nothing). A measurement, not a codec of the format.
fn context_coded(data: &[u8], contexts: impl Iterator<Item = usize> + Clone, n: usize) -> usize {
    let mut used = vec![[false; 256]; n];
    for (&x, c) in data.iter().zip(contexts.clone()) {
        used[c][x as usize] = true;
    }
    let mut models: Vec<Option<Box<AdaptiveModel>>> = used
        .iter()
        .map(|u| {
            let symbols: Vec<u8> = (0..=255u8).filter(|&s| u[s as usize]).collect();
            (symbols.len() > 1).then(|| AdaptiveModel::new(symbols, BYTE_PARAMS))
        })
        .collect();
    let bitmaps = used.iter().filter(|u| u.contains(&true)).count() * 32;
    let mut enc = Encoder::with_capacity(data.len() / 2 + 16);
    for (&x, c) in data.iter().zip(contexts) {
        if let Some(m) = &mut models[c] {
            m.encode(&mut enc, x);
        }
    }
    let mut out = Vec::new();
    enc.finish(&mut out);
    stored(data, bitmaps + out.len())
}

/// Bytes of plane `k` of `planes` (of `r` bytes a ggml block) under coder row `row` of
/// [`ROWS`], or `None` where the row does not apply.
fn coded(row: usize, k: usize, planes: &[Vec<u8>], r: usize) -> Option<usize> {
    let p = &planes[k][..];
    let none = r * 256;
    Some(match row {
        row::HUFFMAN => {
            let mut out = Vec::new();
            huffman::encode(p, &mut out);
            stored(p, out.len())
        }
        row::RANGE => {
            let mut out = Vec::new();
            let ok = range::encode(p, &histogram(p), &mut out);
            stored(p, if ok { out.len() } else { p.len() })
        }
        row::ADAPTIVE => adaptive_size(p),
        row::BYCTX if k > 0 => {
            let mut out = Vec::new();
            let ok = byctx::encode(p, &planes[0], &mut out);
            stored(p, if ok { out.len() } else { p.len() })
        }
        // The previous ggml block's byte at the same place: the first block's bytes have a
        // context of their own, one for each place.
        row::PREVIOUS_BLOCK => {
            let cs = (0..p.len()).map(|i| i.checked_sub(r).map_or(i + none, |j| p[j] as usize));
            context_coded(p, cs, none + r)
        }
        row::POSITION if r > 1 => context_coded(p, (0..p.len()).map(|i| i % r), r),
        row::ORDER1 if r > 1 => {
            let cs = (0..p.len()).map(|i| i.checked_sub(1).map_or(256, |j| p[j] as usize));
            context_coded(p, cs, 257)
        }
        _ => return None,
    })
}

/// A quantized type's measurements as they accumulate.
struct QuantState {
    report: QuantReport,
    layout: &'static Layout,
}

/// The histograms of the planes of the tensor being read, which may span blocks.
struct OpenTensor {
    index: usize,
    hists: Vec<[u64; 256]>,
}

/// The tensors of `tensors` (sorted, not overlapping) that overlap `range`, with the part of
/// each inside it (offsets as the tensors have them), from index `from` on.
fn overlapping<'t>(
    tensors: &'t [TensorInfo],
    from: usize,
    range: std::ops::Range<u64>,
) -> impl Iterator<Item = (usize, std::ops::Range<u64>)> + 't {
    (from..tensors.len())
        .map(move |i| (i, &tensors[i]))
        .skip_while(move |(_, t)| t.end <= range.start)
        .take_while(move |(_, t)| t.begin < range.end)
        .filter(|(_, t)| t.end > t.begin)
        .map(move |(i, t)| (i, t.begin.max(range.start)..t.end.min(range.end)))
}

/// Calls `f` with each block the archive of `mode` codes after the header of the file `r`
/// (tensors `header`, their data at `base`) and its bytes. Reads one block at a time.
fn for_each_block<R: Read + Seek>(
    r: &mut R,
    header: &Header,
    base: u64,
    block_size: u32,
    mode: Mode,
    mut f: impl FnMut(&BlockSpec, &[u8]) -> Result<()>,
) -> Result<()> {
    let end = r.seek(SeekFrom::End(0))?;
    let plan = Planner::with_refs(
        Some(header),
        base,
        block_size,
        &Spans::default(),
        mode,
        Kind::Gguf,
    );
    let mut raw = Vec::new();
    for spec in plan.take_while(|b| b.offset < end) {
        raw.resize(spec.len.min(end - spec.offset) as usize, 0);
        r.seek(SeekFrom::Start(spec.offset))?;
        read_exact_or(r, &mut raw, "GGUF tensor data")?;
        f(&spec, &raw)?;
    }
    Ok(())
}

/// Counts of the codecs or coders a plane is coded with: adds one for `name`.
fn tally(counts: &mut Vec<(&'static str, u64)>, name: &'static str) {
    match counts.iter_mut().find(|(n, _)| *n == name) {
        Some((_, c)) => *c += 1,
        None => counts.push((name, 1)),
    }
}

/// Measures every coder variant over each plane of the ggml block transforms of the GGUF file
/// `r`, in the blocks an archive of blocks of `block_size` bytes codes (as the encoder plans
/// them, each block split with its transform), with what FAST and BEST store for each plane;
/// the other blocks as FAST and BEST code them, and the F16 and BF16 tensors as `sc models`
/// measures a safetensors file's. One archive block is in memory at a time (the plane
/// histograms of a tensor spanning blocks meanwhile). Tensors that repeat others are coded as
/// themselves, as in an archive made without deduplication.
pub fn compare_gguf_models<R: Read + Seek>(r: &mut R, block_size: u32) -> Result<GgufModels> {
    EncodeOptions::check_block_size(block_size)?;
    let analysis = analyze_gguf(r)?;
    let (h, _) = read_gguf_header(r)?;
    let header = Header {
        json_len: 0,
        tensors: h.tensor_infos(),
    };
    let base = h.data_start;
    let tensors = &header.tensors;
    let mut quant: Vec<QuantState> = Vec::new();
    let mut plain: Vec<PlainReport> = Vec::new();
    let mut open: Option<OpenTensor> = None;
    let (mut first, mut blocks) = (0usize, 0u64);
    let mut scratch = Scratch::default();
    let mut planes: Vec<Vec<u8>> = Vec::new();
    for_each_block(r, &header, base, block_size, Mode::Fast, |spec, raw| {
        blocks += 1;
        let record = code_block(
            raw,
            None,
            spec.transform,
            &spec.rows,
            Mode::Fast,
            SignModels::Off,
            &mut scratch,
        );
        let range = spec.offset - base..spec.offset - base + raw.len() as u64;
        let inside: Vec<_> = overlapping(tensors, first, range.clone()).collect();
        first = inside.first().map_or(first, |&(i, _)| i);
        let Some(layout) = spec.transform.ggml() else {
            let name = plain_name(tensors, &inside, &range);
            let p = plain_entry(&mut plain, spec.transform);
            for part in name.split(", ") {
                if !p.name.split(", ").any(|n| n == part) {
                    p.name = [&p.name[..], part]
                        .iter()
                        .filter(|s| !s.is_empty())
                        .copied()
                        .collect::<Vec<_>>()
                        .join(", ");
                }
            }
            p.tensors += inside
                .iter()
                .filter(|(i, _)| range.contains(&tensors[*i].begin))
                .count();
            p.bytes += raw.len() as u64;
            p.blocks += 1;
            p.fast += record.payload_len();
            return Ok(());
        };
        let QuantState { report, layout } = quant_entry(&mut quant, layout, &analysis);
        let width = layout.ggml().block_bytes as u64;
        planes.resize(layout.planes.len(), Vec::new());
        spec.transform.split(raw, &mut planes);
        report.blocks += 1;
        report.bytes += raw.len() as u64;
        report.tensors += inside
            .iter()
            .filter(|(i, _)| range.contains(&tensors[*i].begin))
            .count();
        // Each tensor's share of the planes, for the per-tensor bound.
        for (i, part) in &inside {
            let t = &tensors[*i];
            let o = match open.take() {
                Some(o) if o.index == *i => o,
                _ => OpenTensor {
                    index: *i,
                    hists: vec![[0; 256]; planes.len()],
                },
            };
            let mut o = o;
            let units = (part.start - range.start) / width..(part.end - range.start) / width;
            for (k, (plane, hist)) in planes.iter().zip(&mut o.hists).enumerate() {
                let n = layout.bytes(k) as u64;
                for &b in &plane[(units.start * n) as usize..(units.end * n) as usize] {
                    hist[b as usize] += 1;
                }
            }
            if t.end <= range.end {
                for (p, hist) in report.planes.iter_mut().zip(&o.hists) {
                    let n: u64 = hist.iter().sum();
                    add(
                        &mut p.sizes[row::TENSOR_BOUND],
                        entropy_bits(hist) * n as f64 / 8.0,
                    );
                }
            } else {
                open = Some(o);
            }
        }
        let tasks: Vec<(usize, usize)> = (0..planes.len())
            .flat_map(|k| CODERS.map(move |r| (k, r)))
            .collect();
        let sizes: Vec<Option<usize>> = tasks
            .par_iter()
            .map(|&(k, r)| coded(r, k, &planes, layout.bytes(k)))
            .collect();
        for (k, p) in report.planes.iter_mut().enumerate() {
            let plane = &planes[k];
            p.bytes += plane.len() as u64;
            add(
                &mut p.sizes[row::BLOCK_BOUND],
                entropy_bits(&histogram(plane)) * plane.len() as f64 / 8.0,
            );
            let mine = tasks.iter().zip(&sizes).filter(|((j, _), _)| *j == k);
            let mut smallest = (usize::MAX, 0);
            for ((_, r), &size) in mine {
                if let Some(size) = size {
                    add(&mut p.sizes[*r], size as f64);
                    smallest = smallest.min((size, *r));
                }
            }
            add(&mut p.sizes[row::SMALLEST], smallest.0 as f64);
            tally(
                &mut p.smallest_coders,
                CODER_NAMES[smallest.1 - row::HUFFMAN],
            );
            add(&mut p.sizes[row::FAST], record.planes[k].coded_len as f64);
            tally(&mut p.fast_codecs, record.planes[k].codec.name());
        }
        Ok(())
    })?;
    // BEST: its own plan (the ggml blocks are FAST's; 16-bit float tensors may share blocks).
    for_each_block(r, &header, base, block_size, Mode::Best, |spec, raw| {
        let record = code_block(
            raw,
            None,
            spec.transform,
            &spec.rows,
            Mode::Best,
            SignModels::default(),
            &mut scratch,
        );
        match spec.transform.ggml() {
            Some(layout) => {
                let q = quant_entry(&mut quant, layout, &analysis);
                for (p, e) in q.report.planes.iter_mut().zip(&record.planes) {
                    add(&mut p.sizes[row::BEST], e.coded_len as f64);
                    tally(&mut p.best_codecs, e.codec.name());
                }
            }
            None => {
                let p = plain_entry(&mut plain, spec.transform);
                p.best += record.payload_len();
            }
        }
        Ok(())
    })?;
    let has_half = header
        .tensors
        .iter()
        .any(|t| matches!(t.dtype, Some(Dtype::BF16 | Dtype::F16)));
    let half = match has_half {
        true => Some(compare_tensors(
            r,
            &Tensors {
                header: &header,
                base,
                kind: Kind::Gguf,
            },
            block_size,
        )?),
        false => None,
    };
    Ok(GgufModels {
        analysis,
        block_size,
        blocks,
        quant: quant.into_iter().map(|q| q.report).collect(),
        plain,
        half,
    })
}

/// Adds `v` to a row that applies.
fn add(size: &mut Option<f64>, v: f64) {
    if let Some(s) = size {
        *s += v;
    }
}

/// The ggml types of the tensors `inside` a block of `range` (and "bytes between tensors"
/// where it holds bytes outside them), joined with ", ".
fn plain_name(
    tensors: &[TensorInfo],
    inside: &[(usize, std::ops::Range<u64>)],
    range: &std::ops::Range<u64>,
) -> String {
    let mut names: Vec<&str> = Vec::new();
    for (i, _) in inside {
        let n = tensors[*i].dtype_name.as_str();
        if !names.contains(&n) {
            names.push(n);
        }
    }
    let covered: u64 = inside.iter().map(|(_, p)| p.end - p.start).sum();
    if covered < range.end - range.start {
        names.push("bytes between tensors");
    }
    names.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::container::{BlockRecord, FileHeader};
    use crate::gguf::tests::Builder;
    use crate::transform::Transform;
    use std::io::Cursor;

    /// Q8_0 blocks of scales `d` and quants `qs`.
    fn q8_0(blocks: impl IntoIterator<Item = (u16, [u8; 32])>) -> Vec<u8> {
        let mut out = Vec::new();
        for (d, qs) in blocks {
            out.extend_from_slice(&d.to_le_bytes());
            out.extend_from_slice(&qs);
        }
        out
    }

    fn measure(file: &[u8], block_size: u32) -> GgufModels {
        compare_gguf_models(&mut Cursor::new(file), block_size).unwrap()
    }

    fn quant<'a>(rep: &'a GgufModels, name: &str) -> &'a QuantReport {
        rep.quant.iter().find(|q| q.name == name).unwrap()
    }

    fn size(p: &PlaneReport, r: usize) -> f64 {
        p.sizes[r].unwrap()
    }

    #[test]
    fn entropies_match_a_hand_computed_q8_0_tensor() {
        // 240 ggml blocks: 120 of scale 0x3C00 and quants all 1, then 120 of scale 0x3C01
        // and quants half 2, half 3. Blocks of 4 KiB hold 120 ggml blocks each: two archive
        // blocks, the first constant in every plane.
        let a = (0x3C00u16, [1u8; 32]);
        let b = (0x3C01u16, std::array::from_fn(|i| 2 + (i % 2) as u8));
        let data = q8_0(std::iter::repeat_n(a, 120).chain(std::iter::repeat_n(b, 120)));
        let file = Builder::new().tensor("w", &[32, 240], 8, data).build();
        let rep = measure(&file, 4096);
        let q = quant(&rep, "Q8_0");
        assert_eq!((q.tensors, q.blocks, q.bytes), (1, 2, 240 * 34));
        let names: Vec<&str> = q.planes.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["d high byte", "d low byte", "qs"]);
        // Per tensor: the high byte is 3C throughout (0 bits), the low byte 00 or 01 (1 bit
        // each, 240 bits), the quants 1, 2, 3 with shares 1/2, 1/4, 1/4 (1.5 bits each).
        let tensor: Vec<f64> = q
            .planes
            .iter()
            .map(|p| size(p, row::TENSOR_BOUND))
            .collect();
        assert_eq!(tensor, [0.0, 30.0, 240.0 * 32.0 * 1.5 / 8.0]);
        // Per block: only the second block's quants vary, 2 or 3 (1 bit each).
        let block: Vec<f64> = q.planes.iter().map(|p| size(p, row::BLOCK_BOUND)).collect();
        assert_eq!(block, [0.0, 0.0, 120.0 * 32.0 / 8.0]);
        // sc analyze's bound: the scales as 16-bit values, 1 bit each, and the quants.
        assert_eq!(q.field_bound, 30.0 + 1440.0);
        assert_eq!(rep.data_bound(), 1470.0 + rep.analysis.padding as f64);
        assert!(rep.half.is_none());
    }

    /// Payload bytes of each plane of each transform in an archive of `file`, from its block
    /// records.
    fn archive_planes(file: &[u8], mode: Mode, block_size: u32) -> Vec<(&'static str, Vec<u64>)> {
        let mut opts = EncodeOptions::new(mode);
        opts.block_size = block_size;
        let archive = crate::encode_to_vec(file, &opts).unwrap();
        let mut r = Cursor::new(&archive[..]);
        FileHeader::read(&mut r, Some(archive.len() as u64)).unwrap();
        let mut sums: Vec<(&'static str, Vec<u64>)> = Vec::new();
        let mut index = 0;
        while let Some(rec) = BlockRecord::read(&mut r, block_size, index).unwrap() {
            index += 1;
            let name = rec.transform.name();
            if !sums.iter().any(|(n, _)| *n == name) {
                sums.push((name, vec![0; rec.planes.len()]));
            }
            let (_, s) = sums.iter_mut().find(|(n, _)| *n == name).unwrap();
            for (s, p) in s.iter_mut().zip(&rec.planes) {
                *s += p.coded_len as u64;
            }
            r.set_position(r.position() + rec.payload_len());
        }
        sums
    }

    #[test]
    fn sc_rows_are_what_the_archive_stores() {
        let mut rnd = crate::test_rng(0x6A09_E667);
        let mut noise = |n: usize, spread: u32| -> Vec<u8> {
            (0..n)
                .map(|_| (rnd() % spread + rnd() % spread) as u8)
                .collect()
        };
        // Scales of a few magnitudes, quants bunched near zero; Q4_1, Q6_K and F32 beside,
        // small tensors sharing blocks, one large one cut across blocks.
        let scales = noise(3000, 4);
        let q8: Vec<u8> = (0..3000)
            .flat_map(|i| {
                let d = 0x2400u16 + ((scales[i] as u16) << 8) + scales[(i * 7) % 3000] as u16;
                let mut block = d.to_le_bytes().to_vec();
                block.extend((0..32).map(|j| scales[(i + j) % 3000].wrapping_sub(3)));
                block
            })
            .collect();
        let file = Builder::new()
            .tensor("a", &[32, 3000], 8, q8)
            .tensor("b", &[32, 40], 3, noise(40 * 20, 40))
            .tensor("c", &[256, 8], 14, noise(8 * 210, 60))
            .tensor("d", &[64], 0, noise(256, 3))
            .tensor("e", &[32, 4], 8, noise(4 * 34, 30))
            .build();
        for block_size in [4096, 1 << 20] {
            let rep = measure(&file, block_size);
            for mode in [Mode::Fast, Mode::Best] {
                let want = archive_planes(&file, mode, block_size);
                let r = match mode {
                    Mode::Fast => row::FAST,
                    Mode::Best => row::BEST,
                };
                let mut got: Vec<(&'static str, Vec<u64>)> = Vec::new();
                for q in &rep.quant {
                    let t = Transform::for_ggml(q.name).name();
                    got.push((t, q.planes.iter().map(|p| size(p, r) as u64).collect()));
                }
                for p in &rep.plain {
                    let bytes = match mode {
                        Mode::Fast => p.fast,
                        Mode::Best => p.best,
                    };
                    got.push((p.transform, vec![bytes]));
                }
                let mut want: Vec<(&str, Vec<u64>)> = want
                    .into_iter()
                    .map(
                        |(t, planes)| match Transform::for_ggml(&t.to_uppercase()).ggml() {
                            Some(_) => (t, planes),
                            None => (t, vec![planes.iter().sum()]),
                        },
                    )
                    .collect();
                want.sort();
                got.sort();
                assert_eq!(got, want, "{mode:?} in blocks of {block_size}");
            }
            let q = quant(&rep, "Q8_0");
            assert_eq!((q.tensors, q.bytes), (2, 3004 * 34));
            assert_eq!(quant(&rep, "Q6_K").planes[2].name, "quants joined 6-bit");
        }
    }

    /// A Q8_0 tensor of 4000 ggml blocks whose scales' high bytes take 8 values and whose low
    /// bytes are `low(high)`.
    fn scaled(mut low: impl FnMut(u8) -> u8) -> Vec<u8> {
        let mut rnd = crate::test_rng(0xBB67_AE85);
        let data = q8_0((0..4000).map(|_| {
            let high = 0x20 + (rnd() % 8) as u8;
            let d = u16::from_le_bytes([low(high), high]);
            (d, std::array::from_fn(|_| (rnd() % 9) as u8))
        }));
        Builder::new().tensor("w", &[32, 4000], 8, data).build()
    }

    #[test]
    fn byctx_pays_where_the_low_byte_follows_the_high_byte() {
        let mut rnd = crate::test_rng(0x3C6E_F372);
        let dependent = scaled(|high| high.wrapping_mul(37) ^ (rnd() % 4) as u8);
        let rep = measure(&dependent, 1 << 20);
        let low = &quant(&rep, "Q8_0").planes[1];
        // 2 bits a byte given the high byte, 5 without.
        assert!(
            size(low, row::BYCTX) < 0.8 * size(low, row::ADAPTIVE),
            "{low:?}"
        );
        let independent = scaled(|_| (rnd() % 4 + rnd() % 8) as u8);
        let rep = measure(&independent, 1 << 20);
        let low = &quant(&rep, "Q8_0").planes[1];
        assert!(size(low, row::BYCTX) >= size(low, row::ADAPTIVE), "{low:?}");
    }

    #[test]
    fn other_files_fail() {
        let file = Builder::new().tensor("w", &[32, 1], 8, vec![0; 34]).build();
        for cut in [10, file.len() - 1] {
            assert!(compare_gguf_models(&mut Cursor::new(&file[..cut]), 4096).is_err());
        }
        assert!(compare_gguf_models(&mut Cursor::new(&file), 1000).is_err());
    }
}
