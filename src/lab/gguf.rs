//! What `sc analyze` measures of a GGUF file: the order-0 entropy of each field of each ggml
//! type's blocks (F16 scales as 16-bit values, 4-bit quants as nibbles, ...), per tensor, and
//! the size those entropies bound a field-aware coder to.

use super::Tally;
use crate::container::kept::{self, PACKED_LEN_FIELD};
use crate::gguf::types::{joined_quant_bits, joining, Field, GgmlType, Packing};
use crate::read::read_exact_or;
use crate::{Error, Result};
use std::io::{Read, Seek, SeekFrom};

pub use crate::gguf::{types, GgufError, GgufHeader, GgufTensor, Value};

/// Reads and validates the header of the GGUF file `r`; a file that is not one is
/// [`Error::InvalidArgument`] saying why.
pub fn read_gguf_header<R: Read + Seek>(r: &mut R) -> Result<(GgufHeader, Vec<u8>)> {
    let file_len = r.seek(SeekFrom::End(0))?;
    let read = crate::gguf::read_header_at(file_len, |buf, at| {
        r.seek(SeekFrom::Start(at))?;
        r.read_exact(buf)
    })?;
    read.map_err(|e| Error::InvalidArgument(format!("not a GGUF file: {e}")))
}

/// One field's measurements, over the tensors of one ggml type.
#[derive(Clone, Debug)]
pub struct FieldAnalysis {
    /// The field's name (`d`, `qs`, ...; for plain types `value`, or its halves).
    pub name: String,
    /// How its bytes hold symbols.
    pub packing: Packing,
    /// Bits of one symbol as measured.
    pub symbol_bits: u32,
    /// Bytes of this field in all the type's tensors.
    pub bytes: u64,
    /// Symbols in them.
    pub symbols: u64,
    /// Order-0 entropy of each tensor's symbols of this field, summed over the tensors, in
    /// bits: what coding each tensor's field with a static model of its own tends to.
    pub tensor_bits: f64,
    /// Order-0 entropy of all the type's symbols of this field pooled, bits per symbol.
    pub pooled_bits_per_symbol: f64,
    /// Whether the bound counts this field: the low and high bits of split quants are counted
    /// as the whole quants they make, a field of their own.
    pub in_bound: bool,
}

/// The tensors of one ggml type.
#[derive(Clone, Debug)]
pub struct TypeAnalysis {
    /// ggml's name of the type.
    pub name: &'static str,
    /// Tensors of the type.
    pub tensors: usize,
    /// Their bytes.
    pub bytes: u64,
    /// Their fields.
    pub fields: Vec<FieldAnalysis>,
}

/// A GGUF file measured field by field.
#[derive(Clone, Debug)]
pub struct GgufAnalysis {
    /// The file's length.
    pub file_len: u64,
    /// GGUF version.
    pub version: u32,
    /// Bytes of the header (magic to the last tensor info).
    pub header_len: u64,
    /// The header deflated, as an archive would keep it.
    pub header_deflated: u64,
    /// Bytes outside header and tensors (alignment padding), counted as stored.
    pub padding: u64,
    /// One entry per ggml type, in order of first appearance.
    pub types: Vec<TypeAnalysis>,
}

impl GgufAnalysis {
    /// Bytes the per-tensor order-0 entropies of the fields bound the file to, with the header
    /// deflated and the padding stored.
    pub fn bound_bytes(&self) -> f64 {
        let fields: f64 = self
            .types
            .iter()
            .flat_map(|t| &t.fields)
            .filter(|f| f.in_bound)
            .map(|f| f.tensor_bits / 8.0)
            .sum();
        fields + (self.header_deflated + self.padding) as f64
    }
}

/// The fields a type's blocks are measured in: the described layout of a quantized type, plain
/// numbers in 16-bit parts (wider ones split, the parts' entropies added), and the bytes of a
/// block whose layout is not described.
fn fields_of(t: &GgmlType) -> Vec<Field> {
    let whole = |name, packing| Field {
        name,
        offset: 0,
        len: t.block_bytes as usize,
        packing,
    };
    if !t.fields.is_empty() {
        return t.fields.to_vec();
    }
    match (t.is_plain(), t.block_bytes) {
        (true, 1) => vec![whole("value", Packing::Bytes)],
        (true, 2) => vec![whole("value", Packing::I16)],
        (true, n) => (0..n as usize / 2)
            .map(|k| Field {
                name: PARTS[k],
                offset: 2 * k,
                len: 2,
                packing: Packing::I16,
            })
            .collect(),
        (false, _) => vec![whole("bytes", Packing::Bytes)],
    }
}

/// Names of the 16-bit parts of a plain number wider than 16 bits.
const PARTS: [&str; 4] = ["bits 15..0", "bits 31..16", "bits 47..32", "bits 63..48"];

/// Adds the symbols of `field` in each of `blocks` to `hist` (of 2^bits entries; F32 fields
/// count as bytes).
fn count(blocks: &[u8], block_bytes: usize, field: &Field, hist: &mut Tally) {
    for block in blocks.chunks_exact(block_bytes) {
        let bytes = &block[field.offset..field.offset + field.len];
        match field.packing {
            Packing::F16 | Packing::I16 => {
                for p in bytes.chunks_exact(2) {
                    hist.add(u16::from_le_bytes([p[0], p[1]]) as usize, 1);
                }
            }
            Packing::Bytes | Packing::F32 => bytes.iter().for_each(|&b| hist.add(b as usize, 1)),
            packed => {
                let bits = packed.symbol_bits();
                let mask = (1u8 << bits) - 1;
                for &b in bytes {
                    for k in 0..8 / bits {
                        hist.add(((b >> (k * bits)) & mask) as usize, 1);
                    }
                }
            }
        }
    }
}

/// Bits of a symbol as measured: F32 fields count as bytes.
pub fn alphabet_bits(packing: Packing) -> u32 {
    match packing {
        Packing::F32 => 8,
        p => p.symbol_bits(),
    }
}

/// Bytes of a tensor read at a time (rounded down to whole ggml blocks).
const READ_CHUNK: usize = 1 << 20;

/// Measures every tensor of the GGUF file `r`, a megabyte of a tensor in memory at a time.
pub fn analyze_gguf<R: Read + Seek>(r: &mut R) -> Result<GgufAnalysis> {
    let (h, header) = read_gguf_header(r)?;
    let file_len = r.seek(SeekFrom::End(0))?;
    // Per type: its analysis, its pooled histograms, and the histograms of the tensor being
    // measured (cleared after each: a tensor costs the symbols it holds, not the alphabets).
    let mut types: Vec<(TypeAnalysis, Vec<Tally>, Vec<Tally>)> = Vec::new();
    let (mut joined, mut data) = (Vec::new(), Vec::new());
    let mut tensor_bytes = 0u64;
    for t in &h.tensors {
        let gt = t.ggml_type;
        let fields = fields_of(gt);
        let k = match types.iter().position(|(a, ..)| a.name == gt.name) {
            Some(k) => k,
            None => {
                let mut pooled: Vec<Tally> = fields
                    .iter()
                    .map(|f| Tally::new(1 << alphabet_bits(f.packing)))
                    .collect();
                let join = joined_quant_bits(gt);
                let mut entries: Vec<FieldAnalysis> = fields
                    .iter()
                    .map(|f| FieldAnalysis {
                        name: f.name.to_string(),
                        packing: f.packing,
                        symbol_bits: alphabet_bits(f.packing),
                        bytes: 0,
                        symbols: 0,
                        tensor_bits: 0.0,
                        pooled_bits_per_symbol: 0.0,
                        in_bound: join.is_none() || !f.name.starts_with('q'),
                    })
                    .collect();
                if let Some(bits) = join {
                    entries.push(FieldAnalysis {
                        name: format!("quants, {bits}-bit, joined"),
                        packing: Packing::Bytes,
                        symbol_bits: bits,
                        bytes: 0,
                        symbols: 0,
                        tensor_bits: 0.0,
                        pooled_bits_per_symbol: 0.0,
                        in_bound: true,
                    });
                    pooled.push(Tally::new(256));
                }
                let a = TypeAnalysis {
                    name: gt.name,
                    tensors: 0,
                    bytes: 0,
                    fields: entries,
                };
                let hists = pooled.clone();
                types.push((a, pooled, hists));
                types.len() - 1
            }
        };
        let len = t.range.end - t.range.start;
        tensor_bytes += len;
        let (a, pooled, hists) = &mut types[k];
        a.tensors += 1;
        a.bytes += len;
        let width = gt.block_bytes as usize;
        let blocks = len / width as u64;
        let mut lens: Vec<u64> = fields.iter().map(|f| f.len as u64).collect();
        let joins = joining(gt);
        if joins.is_some() {
            let quant_bytes = fields.iter().filter(|f| f.name.starts_with('q'));
            lens.push(quant_bytes.map(|f| f.len as u64).sum());
            joined.resize(gt.block_values as usize, 0);
        }
        // A chunk of whole blocks at a time: memory stays bounded whatever the tensor's size.
        let chunk = (READ_CHUNK / width).max(1) * width;
        r.seek(SeekFrom::Start(t.range.start))?;
        let mut left = len;
        while left > 0 {
            data.resize(left.min(chunk as u64) as usize, 0);
            read_exact_or(r, &mut data, "GGUF tensor data")?;
            left -= data.len() as u64;
            let (field_hists, joined_hist) = hists.split_at_mut(fields.len());
            for (f, hist) in fields.iter().zip(field_hists) {
                count(&data, width, f, hist);
            }
            if let (Some(j), [hist]) = (joins, joined_hist) {
                for block in data.chunks_exact(width) {
                    (j.join)(block, &mut joined);
                    joined.iter().for_each(|&q| hist.add(q as usize, 1));
                }
            }
        }
        for (((hist, len), fa), pool) in hists.iter_mut().zip(lens).zip(&mut a.fields).zip(pooled) {
            let n = hist.total();
            fa.bytes += blocks * len;
            fa.symbols += n;
            fa.tensor_bits += hist.entropy_bits() * n as f64;
            hist.add_to(pool);
            hist.clear();
        }
    }
    let types = types
        .into_iter()
        .map(|(mut a, pooled, _)| {
            for (fa, pool) in a.fields.iter_mut().zip(&pooled) {
                fa.pooled_bits_per_symbol = pool.entropy_bits();
            }
            a
        })
        .collect();
    // As BEST's archive keeps it: deflated by the same packer, with its length field.
    let header_deflated = kept::pack(&header, crate::Mode::Best)
        .map_or(header.len(), |p| p.len() + PACKED_LEN_FIELD) as u64;
    Ok(GgufAnalysis {
        file_len,
        version: h.version,
        header_len: h.header_len,
        header_deflated,
        padding: file_len - h.header_len - tensor_bytes,
        types,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::write;
    use std::io::Cursor;

    /// Many tiny F16 and Q8_0 tensors: each tensor's histograms (65,536 bins for an F16 value)
    /// are visited only where it counted, so the work is linear in the values (a dense
    /// histogram a tensor would visit 3 * 65,536 bins each, 2.6 * 10^8 here).
    #[test]
    fn tiny_tensors_visit_bins_in_proportion_to_their_values() {
        let n = 1000;
        let mut rnd = crate::test_rng(3);
        let f16 = types::GgmlType::from_id(1).unwrap();
        let q8 = types::GgmlType::from_id(8).unwrap();
        let names: Vec<String> = (0..2 * n).map(|i| format!("t{i}")).collect();
        let data: Vec<Vec<u8>> = (0..2 * n)
            .map(|_| (0..68).map(|_| rnd() as u8).collect())
            .collect();
        let tensors: Vec<(&str, &[u64], &GgmlType, &[u8])> = (0..2 * n)
            .map(|i| match i % 2 {
                0 => (names[i].as_str(), &[34u64][..], f16, &data[i][..]),
                _ => (names[i].as_str(), &[64u64][..], q8, &data[i][..]),
            })
            .collect();
        let file = write::file(3, &[], &tensors);
        let before = crate::hook::done(crate::hook::Work::BinsVisited);
        let an = analyze_gguf(&mut Cursor::new(file)).unwrap();
        let visited = crate::hook::done(crate::hook::Work::BinsVisited) - before;
        assert_eq!(an.types.len(), 2);
        let symbols: u64 = an
            .types
            .iter()
            .flat_map(|t| &t.fields)
            .map(|f| f.symbols)
            .sum();
        assert!(
            visited <= 8 * symbols,
            "{visited} bins for {symbols} symbols"
        );
    }
}
