//! Measurements behind sc's experiment commands (`sc models`, `sc analyze`, `sc shuffle`), for
//! the command line's research side: enabled by the `lab` feature, and not a stable API.

pub mod gguf;
pub mod models;
pub mod models_gguf;
pub mod shuffle;

use crate::error::Error;
use crate::safetensors::read_header_at;
use std::io::{Read, Seek, SeekFrom};

pub use crate::safetensors::Header;
pub use crate::stats::entropy_bits;

/// Reads and validates the header of the safetensors file `r` (from its start); returns it with
/// the file's length. Anything else is [`Error::NotSafetensors`] saying why, so a command can
/// name the problem in one line.
pub fn read_file_header<R: Read + Seek>(r: &mut R) -> crate::Result<(Header, u64)> {
    let file_len = r.seek(SeekFrom::End(0))?;
    let read_at = |buf: &mut [u8], at: u64| {
        r.seek(SeekFrom::Start(at))?;
        r.read_exact(buf)
    };
    let (header, _) = read_header_at(file_len, read_at)?.map_err(Error::NotSafetensors)?;
    Ok((header, file_len))
}

/// A histogram over an alphabet of up to 2^32 symbols whose whole-histogram passes (totals,
/// entropies, adding into another, clearing) visit only the symbols it counted, in symbol
/// order: per-tensor histograms of 16-bit fields cost what each tensor holds, not 65,536 bins
/// a tensor, so many tiny tensors measure in time linear in their bytes.
#[derive(Clone, Debug)]
pub struct Tally {
    counts: Vec<u64>,
    /// The symbols whose count is not 0, in symbol order when `sorted`.
    used: Vec<u32>,
    sorted: bool,
}

impl Tally {
    /// An empty histogram of `symbols` symbols.
    pub fn new(symbols: usize) -> Tally {
        Tally {
            counts: vec![0; symbols],
            used: Vec::new(),
            sorted: true,
        }
    }

    /// Counts `n` more of `symbol`.
    #[inline]
    pub fn add(&mut self, symbol: usize, n: u64) {
        let c = &mut self.counts[symbol];
        if *c == 0 && n > 0 {
            self.sorted &= self.used.last().is_none_or(|&l| (l as usize) < symbol);
            self.used.push(symbol as u32);
        }
        *c += n;
    }

    /// The symbols counted and their counts, in the order first counted.
    pub fn counted(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        visited(self.used.len());
        self.used
            .iter()
            .map(|&s| (s as usize, self.counts[s as usize]))
    }

    /// Symbols counted in all.
    pub fn total(&self) -> u64 {
        self.counted().map(|(_, c)| c).sum()
    }

    /// Order-0 entropy in bits per symbol, as [`entropy_bits`] gives it for the whole
    /// histogram (the same terms, summed in the same order: by symbol).
    pub fn entropy_bits(&self) -> f64 {
        let total = self.total() as f64;
        if total == 0.0 {
            return 0.0;
        }
        let term = |c: u64| {
            let p = c as f64 / total;
            -p * p.log2()
        };
        if self.sorted {
            return self.counted().map(|(_, c)| term(c)).sum();
        }
        let mut counted: Vec<(usize, u64)> = self.counted().collect();
        counted.sort_unstable();
        counted.into_iter().map(|(_, c)| term(c)).sum()
    }

    /// Adds these counts to `other` (of at least as many symbols).
    pub fn add_to(&self, other: &mut Tally) {
        for (s, c) in self.counted() {
            other.add(s, c);
        }
    }

    /// Forgets every count.
    pub fn clear(&mut self) {
        visited(self.used.len());
        for &s in &self.used {
            self.counts[s as usize] = 0;
        }
        self.used.clear();
        self.sorted = true;
    }
}

/// Counts `n` bins visited by a whole-histogram pass (for tests, which bound them).
fn visited(n: usize) {
    #[cfg(feature = "internals")]
    crate::hook::add(crate::hook::Work::BinsVisited, n as u64);
    #[cfg(not(feature = "internals"))]
    let _ = n;
}
