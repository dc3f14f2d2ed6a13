//! Tensors of an archive written out as a file of their own: a safetensors file of some of a
//! safetensors archive's tensors, a GGUF file of some of a GGUF archive's.

use super::*;

impl<R: Read + Seek + Send> Archive<R> {
    /// Writes a safetensors file holding the tensors `names` (each once) of a safetensors
    /// archive to `out`; returns the bytes written ([`Archive::write_gguf`] for a GGUF one).
    ///
    /// The new header keeps each tensor's dtype and shape, recomputes its `data_offsets`, and
    /// keeps `__metadata__`. Tensors are laid out by element width, widest first, and in their
    /// original order within a width (what the reference writer does), so every tensor starts
    /// at a multiple of its element size; the JSON is padded with spaces to a multiple of 8
    /// bytes for the same reason.
    pub fn write_safetensors<W: Write + Send>(
        &mut self,
        names: &[&str],
        out: &mut W,
    ) -> Result<u64> {
        if self.header.kind == Kind::Gguf {
            return Err(Error::InvalidArgument(
                "a GGUF archive's tensors are written as GGUF (write_gguf)".into(),
            ));
        }
        let mut chosen: Vec<(usize, u64)> = Vec::new();
        let mut seen = vec![false; self.tensors.len()];
        for name in names {
            let (k, _) = self.find(name)?;
            if !std::mem::replace(&mut seen[k], true) {
                let width = self.tensors[k].dtype.map_or(1, |d| d.width());
                chosen.push((k, width));
            }
        }
        chosen.sort_by_key(|&(k, width)| (std::cmp::Reverse(width), k));
        let mut json = serde_json::Map::new();
        if let Some(meta) = self.metadata_value()? {
            json.insert("__metadata__".into(), meta);
        }
        let mut pos = 0u64;
        for &(k, _) in &chosen {
            let t = &self.tensors[k];
            let len = t.end - t.begin;
            json.insert(
                t.name.clone(),
                serde_json::json!({
                    "dtype": t.dtype_name,
                    "shape": t.shape,
                    "data_offsets": [pos, pos + len],
                }),
            );
            pos += len;
        }
        let mut text = serde_json::Value::Object(json).to_string().into_bytes();
        text.resize(text.len().next_multiple_of(8), b' ');
        out.write_all(&(text.len() as u64).to_le_bytes())?;
        out.write_all(&text)?;
        for (k, _) in chosen {
            let range = self.tensor_range(&self.tensors[k]);
            self.read_range_to(range, out)?;
        }
        Ok(8 + text.len() as u64 + pos)
    }

    /// Writes a GGUF file holding the tensors `names` (each once) of a GGUF archive to `out`;
    /// returns the bytes written.
    ///
    /// The new header keeps the original's version and metadata (`general.alignment` with
    /// it; not the `split.*` keys of a shard: the new file is whole) and each tensor's type
    /// and shape, and counts and places the tensors afresh: in their original order, each at
    /// the next multiple of the alignment, the gaps and the end padded with zeros (what ggml
    /// writes).
    pub fn write_gguf<W: Write + Send>(&mut self, names: &[&str], out: &mut W) -> Result<u64> {
        if self.header.kind != Kind::Gguf {
            return Err(Error::InvalidArgument(
                "the archive's original is not a GGUF file".into(),
            ));
        }
        let h = GgufHeader::parse(&self.header.prefix, u64::MAX)
            .map_err(|e| Error::Corrupt(format!("kept GGUF header: {e}")))?;
        // `tensors` lists the header's tensors ordered by (start, end), stably: the same sort
        // of the header's positions pairs each with its place there.
        let mut in_header: Vec<usize> = (0..h.tensors.len()).collect();
        in_header.sort_by_key(|&k| (h.tensors[k].range.start, h.tensors[k].range.end));
        let mut chosen: Vec<usize> = Vec::new();
        let mut seen = vec![false; h.tensors.len()];
        for name in names {
            let (k, _) = self.find(name)?;
            let k = in_header[k];
            if h.tensors[k].name != *name {
                return Err(Error::Corrupt(format!(
                    "kept GGUF header: tensor {name:?} is not where its listing says"
                )));
            }
            if !std::mem::replace(&mut seen[k], true) {
                chosen.push(k);
            }
        }
        chosen.sort_by_key(|&k| h.tensors[k].range.start);
        let (head, offsets) = h.header_for(&chosen);
        out.write_all(&head)?;
        let mut pos = 0u64;
        for (&k, offset) in chosen.iter().zip(offsets) {
            io::copy(&mut io::repeat(0).take(offset - pos), out)?;
            let range = h.tensors[k].range.clone();
            pos = offset + (range.end - range.start);
            self.read_range_to(range, out)?;
        }
        let end = pos.next_multiple_of(h.alignment);
        io::copy(&mut io::repeat(0).take(end - pos), out)?;
        Ok(head.len() as u64 + end)
    }
}
