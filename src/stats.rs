//! Byte histograms and order-0 entropies: what the codec choice measures and what the coders
//! with transmitted tables start from.

/// Byte frequencies of `data`.
///
/// Four sub-histograms break the store-to-load dependency when neighbouring bytes repeat, which
/// is the common case in the exponent plane of weights.
pub fn histogram(data: &[u8]) -> [u32; 256] {
    let mut h = [[0u32; 256]; 4];
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        h[0][c[0] as usize] += 1;
        h[1][c[1] as usize] += 1;
        h[2][c[2] as usize] += 1;
        h[3][c[3] as usize] += 1;
    }
    for &b in chunks.remainder() {
        h[0][b as usize] += 1;
    }
    let mut out = [0u32; 256];
    for (i, o) in out.iter_mut().enumerate() {
        *o = h[0][i] + h[1][i] + h[2][i] + h[3][i];
    }
    out
}

/// Order-0 entropy of a histogram (of any alphabet size) in bits per symbol.
pub fn entropy_bits<T: Copy + Into<u64>>(hist: &[T]) -> f64 {
    let total: f64 = hist.iter().map(|&c| c.into() as f64).sum();
    if total == 0.0 {
        return 0.0;
    }
    hist.iter()
        .map(|&c| c.into() as f64)
        .filter(|&c| c > 0.0)
        .map(|c| {
            let p = c / total;
            -p * p.log2()
        })
        .sum()
}

/// The one symbol of a histogram with a single used symbol, if that is the case.
pub fn single_symbol(hist: &[u32; 256]) -> Option<u8> {
    let mut used = hist.iter().enumerate().filter(|(_, &c)| c > 0);
    match (used.next(), used.next()) {
        (Some((s, _)), None) => Some(s as u8),
        _ => None,
    }
}
