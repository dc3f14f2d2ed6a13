//! Property tests of the entropy coders: round trips on data drawn from many distributions,
//! Huffman code-length invariants and quality, coded sizes against the order-0 entropy bound,
//! and decoders fed arbitrary bytes.

use proptest::prelude::*;
use sc::entropy::{entropy_bits, histogram, huffman, range};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// `cases` cases, no regression files (failures print their minimal input instead).
fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// SplitMix64: a small, fast, seedable generator, so the large inputs proptest describes by a
/// seed are cheap to produce and shrink well.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        ((self.next() >> 32) * n) >> 32
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut v = Vec::with_capacity(n + 8);
        while v.len() < n {
            v.extend_from_slice(&self.next().to_le_bytes());
        }
        v.truncate(n);
        v
    }
}

/// Samples `n` symbols from integer `weights` (any zero weight is never drawn).
fn sample(weights: &[u64; 256], n: usize, rng: &mut Rng) -> Vec<u8> {
    let mut cum = [0u64; 256];
    let mut total = 0u64;
    for (c, &w) in cum.iter_mut().zip(weights) {
        total += w;
        *c = total;
    }
    assert!(total > 0);
    (0..n)
        .map(|_| {
            let x = rng.next() % total;
            cum.partition_point(|&c| c <= x) as u8
        })
        .collect()
}

/// The distributions round trips are drawn from.
#[derive(Clone, Debug)]
enum Dist {
    /// Every byte equally likely.
    Uniform,
    /// `k` distinct random symbols with random weights.
    Few(usize),
    /// P(s) proportional to q^rank over a random permutation of symbols.
    Geometric(f64),
    /// One symbol about 99.9% of the time, `rare` other symbols exactly once each.
    Extreme { rare: usize },
    /// A single symbol.
    Constant,
    /// Discretised Laplacian around a random centre (like the exponent byte of weights).
    Laplace(f64),
}

fn dist_strategy() -> impl Strategy<Value = Dist> {
    prop_oneof![
        Just(Dist::Uniform),
        (2usize..=8).prop_map(Dist::Few),
        (0.05f64..0.95).prop_map(Dist::Geometric),
        (1usize..=255).prop_map(|rare| Dist::Extreme { rare }),
        Just(Dist::Constant),
        (0.3f64..40.0).prop_map(Dist::Laplace),
    ]
}

/// Lengths: the tiny ones that stress the four-stream split, mid sizes and large planes.
fn len_strategy() -> impl Strategy<Value = usize> {
    prop_oneof![
        3 => 1usize..=9,
        2 => 10usize..=4_100,
        2 => 4_100usize..=200_000,
    ]
}

fn permutation(rng: &mut Rng) -> [u8; 256] {
    let mut p = [0u8; 256];
    for (i, v) in p.iter_mut().enumerate() {
        *v = i as u8;
    }
    for i in (1..256).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        p.swap(i, j);
    }
    p
}

fn generate(dist: &Dist, n: usize, seed: u64) -> Vec<u8> {
    let mut rng = Rng(seed);
    let perm = permutation(&mut rng);
    match *dist {
        Dist::Uniform => rng.bytes(n),
        Dist::Constant => vec![perm[0]; n],
        Dist::Few(k) => {
            let mut w = [0u64; 256];
            for &s in &perm[..k] {
                w[s as usize] = 1 + rng.below(1000);
            }
            sample(&w, n, &mut rng)
        }
        Dist::Geometric(q) => {
            let mut w = [0u64; 256];
            let mut p = 1.0f64;
            for &s in perm.iter() {
                // Weights below one part in 2^40 round to zero: those symbols just never occur.
                w[s as usize] = (p * (1u64 << 40) as f64) as u64;
                p *= q;
            }
            sample(&w, n, &mut rng)
        }
        Dist::Laplace(scale) => {
            let centre = rng.below(256) as f64;
            let mut w = [0u64; 256];
            for (s, w) in w.iter_mut().enumerate() {
                let d = (s as f64 - centre).abs() / scale;
                *w = ((-d).exp() * (1u64 << 40) as f64) as u64;
            }
            sample(&w, n, &mut rng)
        }
        Dist::Extreme { rare } => {
            let dominant = perm[0];
            let mut data = vec![dominant; n];
            // About 0.1% noise from a handful of secondary symbols...
            for _ in 0..n / 1000 {
                let at = rng.below(n as u64) as usize;
                data[at] = perm[1 + rng.below(4) as usize];
            }
            // ...and `rare` symbols that occur exactly once (as long as the data has room).
            let rare = rare.min(n.saturating_sub(1)).min(250);
            let mut spots: Vec<usize> = (0..n).collect();
            for i in 0..rare {
                let j = i + rng.below((n - i) as u64) as usize;
                spots.swap(i, j);
                data[spots[i]] = perm[5 + i];
            }
            data
        }
    }
}

fn distinct(hist: &[u32; 256]) -> usize {
    hist.iter().filter(|&&c| c > 0).count()
}

fn kraft(lens: &[u8; 256], limit: u32) -> u64 {
    lens.iter()
        .filter(|&&l| l > 0)
        .map(|&l| 1u64 << (limit - l as u32))
        .sum()
}

/// Total coded bits of `hist` under `lens`.
fn cost(hist: &[u32; 256], lens: &[u8; 256]) -> u64 {
    hist.iter()
        .zip(lens)
        .map(|(&c, &l)| c as u64 * l as u64)
        .sum()
}

/// Reference: optimal (unlimited) Huffman code lengths, by the textbook heap construction.
fn unlimited_lengths(hist: &[u32; 256]) -> [u32; 256] {
    let mut lens = [0u32; 256];
    let used: Vec<usize> = (0..256).filter(|&s| hist[s] > 0).collect();
    if used.len() == 1 {
        lens[used[0]] = 1;
    }
    if used.len() < 2 {
        return lens;
    }
    // Each heap item carries the leaves under it; merging deepens all of them by one.
    let mut heap: BinaryHeap<Reverse<(u64, usize)>> = BinaryHeap::new();
    let mut members: Vec<Vec<usize>> = Vec::new();
    for &s in &used {
        heap.push(Reverse((hist[s] as u64, members.len())));
        members.push(vec![s]);
    }
    while heap.len() > 1 {
        let Reverse((fa, a)) = heap.pop().unwrap();
        let Reverse((fb, b)) = heap.pop().unwrap();
        let mut merged = std::mem::take(&mut members[a]);
        merged.append(&mut std::mem::take(&mut members[b]));
        for &s in &merged {
            lens[s] += 1;
        }
        heap.push(Reverse((fa + fb, members.len())));
        members.push(merged);
    }
    lens
}

fn unlimited_cost(hist: &[u32; 256]) -> u64 {
    let lens = unlimited_lengths(hist);
    hist.iter()
        .zip(lens)
        .map(|(&c, l)| c as u64 * l as u64)
        .sum()
}

/// Reference: optimal code lengths limited to `limit` bits, by package-merge.
fn optimal_limited_lengths(hist: &[u32; 256], limit: u32) -> [u8; 256] {
    #[derive(Clone, Copy)]
    enum Item {
        Leaf(usize),
        /// Two items of the previous level's list.
        Package(usize, usize),
    }
    let mut lens = [0u8; 256];
    let mut used: Vec<usize> = (0..256).filter(|&s| hist[s] > 0).collect();
    if used.len() < 2 {
        if let Some(&s) = used.first() {
            lens[s] = 1;
        }
        return lens;
    }
    used.sort_by_key(|&s| hist[s]);
    let leaves: Vec<(u64, Item)> = used
        .iter()
        .map(|&s| (hist[s] as u64, Item::Leaf(s)))
        .collect();
    let mut levels: Vec<Vec<(u64, Item)>> = vec![leaves.clone()];
    for _ in 1..limit {
        let prev = levels.last().unwrap();
        let mut next: Vec<(u64, Item)> = (0..prev.len() / 2)
            .map(|i| {
                (
                    prev[2 * i].0 + prev[2 * i + 1].0,
                    Item::Package(2 * i, 2 * i + 1),
                )
            })
            .collect();
        next.extend(leaves.iter().copied());
        // Stable: on equal weight, packages stay ahead of leaves (either choice is optimal).
        next.sort_by_key(|p| p.0);
        levels.push(next);
    }
    // Every leaf inside the first 2n-2 items of the last list adds one to its symbol's length.
    let mut stack: Vec<(usize, usize)> = (0..2 * used.len() - 2)
        .map(|i| (levels.len() - 1, i))
        .collect();
    while let Some((level, i)) = stack.pop() {
        match levels[level][i].1 {
            Item::Leaf(s) => lens[s] += 1,
            Item::Package(a, b) => {
                stack.push((level - 1, a));
                stack.push((level - 1, b));
            }
        }
    }
    lens
}

/// Order-0 entropy bound of `data` in bytes.
fn entropy_bytes(hist: &[u32; 256]) -> f64 {
    let n: u64 = hist.iter().map(|&c| c as u64).sum();
    entropy_bits(hist) * n as f64 / 8.0
}

fn huffman_roundtrip(data: &[u8]) {
    let hist = histogram(data);
    // Encoding appends: a prefix already in the buffer must be left alone.
    let mut out = vec![0xA5u8; 3];
    huffman::encode(data, &hist, &mut out);
    assert_eq!(out[..3], [0xA5; 3]);
    let mut back = vec![0u8; data.len()];
    huffman::decode(&out[3..], &mut back).expect("huffman decode");
    assert!(
        back == data,
        "huffman round trip differs (n={})",
        data.len()
    );
    // The helper used by benches must produce the same payload.
    assert_eq!(huffman::encode_plain(data), out[3..]);
}

fn range_roundtrip(data: &[u8]) {
    let hist = histogram(data);
    let mut out = vec![0x5Au8; 5];
    let coded = range::encode(data, &hist, &mut out);
    if distinct(&hist) < 2 {
        assert!(!coded, "range coder accepted a plane with <2 symbols");
        assert_eq!(out, [0x5A; 5], "range coder appended to a refused plane");
        return;
    }
    assert!(coded, "range coder refused a plane with >=2 symbols");
    assert_eq!(out[..5], [0x5A; 5]);
    let mut back = vec![0u8; data.len()];
    range::decode(&out[5..], &mut back).expect("range decode");
    assert!(back == data, "range round trip differs (n={})", data.len());
}

// ---------------------------------------------------------------------------------------------
// Round trips
// ---------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn huffman_roundtrips(dist in dist_strategy(), n in len_strategy(), seed in any::<u64>()) {
        huffman_roundtrip(&generate(&dist, n, seed));
    }

    #[test]
    fn range_roundtrips(dist in dist_strategy(), n in len_strategy(), seed in any::<u64>()) {
        range_roundtrip(&generate(&dist, n, seed));
    }

    /// Arbitrary small byte strings, where every stream-count edge case shows up.
    #[test]
    fn both_coders_roundtrip_arbitrary_short(data in prop::collection::vec(any::<u8>(), 1..64)) {
        huffman_roundtrip(&data);
        range_roundtrip(&data);
    }
}

#[test]
fn tiny_lengths_every_distribution() {
    let dists = [
        Dist::Uniform,
        Dist::Few(2),
        Dist::Few(8),
        Dist::Geometric(0.5),
        Dist::Extreme { rare: 3 },
        Dist::Constant,
        Dist::Laplace(2.0),
    ];
    for dist in &dists {
        for n in 1..=40usize {
            for seed in 0..4u64 {
                let data = generate(dist, n, seed);
                huffman_roundtrip(&data);
                range_roundtrip(&data);
            }
        }
    }
    // Two-symbol planes of every length 2..=5 in every arrangement.
    for n in 2..=5usize {
        for mask in 1u32..(1 << n) - 1 {
            let data: Vec<u8> = (0..n)
                .map(|i| if mask >> i & 1 == 1 { 9 } else { 200 })
                .collect();
            huffman_roundtrip(&data);
            range_roundtrip(&data);
        }
    }
}

#[test]
fn range_refuses_fewer_than_two_symbols() {
    for data in [
        vec![],
        vec![7u8],
        vec![7u8; 2],
        vec![0u8; 100_000],
        vec![255u8; 3],
    ] {
        let mut out = Vec::new();
        assert!(!range::encode(&data, &histogram(&data), &mut out));
        assert!(out.is_empty());
    }
    assert!(range::Model::from_histogram(&[0; 256]).is_none());
    let mut one = [0u32; 256];
    one[42] = u32::MAX;
    assert!(range::Model::from_histogram(&one).is_none());
}

#[test]
fn huffman_single_symbol_and_full_alphabet() {
    for n in [1usize, 2, 3, 4, 5, 1000, 65_537] {
        huffman_roundtrip(&vec![200u8; n]);
    }
    // Every byte value exactly once, and every byte value in a long cycle.
    let all: Vec<u8> = (0..=255u8).collect();
    huffman_roundtrip(&all);
    range_roundtrip(&all);
    let cycle: Vec<u8> = (0..100_003usize).map(|i| i as u8).collect();
    huffman_roundtrip(&cycle);
    range_roundtrip(&cycle);
}

#[test]
fn range_handles_extreme_histograms() {
    // One symbol near u32::MAX count next to singletons: scaling must not overflow or starve.
    let mut hist = [0u32; 256];
    hist[0] = u32::MAX - 300;
    for h in hist.iter_mut().skip(1) {
        *h = 1;
    }
    let m = range::Model::from_histogram(&hist).expect("model");
    let mut table = Vec::new();
    m.write(&mut table);
    let (back, used) = range::Model::read(&table).expect("table reads back");
    assert_eq!(used, table.len());
    let mut again = Vec::new();
    back.write(&mut again);
    assert_eq!(table, again);
    // Real data with that shape: 255 singletons in a sea of zeros.
    let mut data = vec![0u8; 300_000];
    for s in 1..=255usize {
        data[s * 1000 + 7] = s as u8;
    }
    range_roundtrip(&data);
    huffman_roundtrip(&data);
}

// ---------------------------------------------------------------------------------------------
// Huffman code lengths
// ---------------------------------------------------------------------------------------------

/// Histograms of every shape that matters for length limiting.
fn hist_strategy() -> impl Strategy<Value = [u32; 256]> {
    let random = prop::collection::vec(prop_oneof![2 => Just(0u32), 3 => any::<u32>()], 256);
    let small = prop::collection::vec(0u32..4, 256);
    // Exponential skew: counts 1 << k, which unlimited Huffman turns into very deep trees.
    let exponential = prop::collection::vec(prop::option::weighted(0.8, 0u32..32), 256)
        .prop_map(|ks| ks.into_iter().map(|k| k.map_or(0, |k| 1u32 << k)).collect());
    // All 256 symbols used.
    let full = prop::collection::vec(1u32..=1_000_000, 256);
    let full_exp = prop::collection::vec(0u32..32, 256)
        .prop_map(|ks| ks.into_iter().map(|k| 1u32 << k).collect());
    // Few symbols.
    let few =
        (prop::collection::vec((any::<u8>(), 1u32..=u32::MAX / 8), 1..=8)).prop_map(|pairs| {
            let mut v = vec![0u32; 256];
            for (s, c) in pairs {
                v[s as usize] = c;
            }
            v
        });
    prop_oneof![random, small, exponential, full, full_exp, few].prop_map(|v: Vec<u32>| {
        let mut h = [0u32; 256];
        h.copy_from_slice(&v);
        h
    })
}

fn fibonacci_hist(k: usize) -> [u32; 256] {
    let mut h = [0u32; 256];
    let (mut a, mut b) = (1u64, 1u64);
    for c in h.iter_mut().take(k) {
        *c = a.min(u32::MAX as u64) as u32;
        (a, b) = (b, a.saturating_add(b));
    }
    h
}

fn check_lengths(hist: &[u32; 256], limit: u32) -> [u8; 256] {
    let lens = huffman::code_lengths(hist, limit);
    let used = distinct(hist);
    for s in 0..256 {
        assert_eq!(
            lens[s] > 0,
            hist[s] > 0,
            "symbol {s}: count {} got length {}",
            hist[s],
            lens[s]
        );
        assert!(
            lens[s] as u32 <= limit,
            "length {} over limit {limit}",
            lens[s]
        );
    }
    if used >= 1 {
        let k = kraft(&lens, limit);
        assert!(k <= 1 << limit, "Kraft sum {k} over {}", 1u64 << limit);
    }
    if used >= 2 {
        // Optimal codes are complete; a limited code built this way should be too.
        assert_eq!(kraft(&lens, limit), 1 << limit, "incomplete code: {lens:?}");
    }
    lens
}

proptest! {
    #![proptest_config(config(400))]

    #[test]
    fn code_lengths_valid(hist in hist_strategy()) {
        let lens = check_lengths(&hist, huffman::MAX_BITS);
        if distinct(&hist) >= 2 {
            // unlimited optimum <= limited optimum <= sc's limited lengths, and sc stays close
            // to the limited optimum.
            let ours = cost(&hist, &lens);
            let best = cost(&hist, &optimal_limited_lengths(&hist, huffman::MAX_BITS));
            let free = unlimited_cost(&hist);
            prop_assert!(free <= best && best <= ours, "{free} {best} {ours}");
            prop_assert!(
                ours as f64 <= best as f64 * 1.03,
                "sc lengths cost {:.2}% over the optimal 12-bit code",
                100.0 * (ours as f64 / best as f64 - 1.0)
            );
        }
    }

    #[test]
    fn code_lengths_valid_other_limits(hist in hist_strategy(), limit in 8u32..=15) {
        check_lengths(&hist, limit);
    }
}

#[test]
fn code_lengths_edge_histograms() {
    let mut h = [0u32; 256];
    assert_eq!(huffman::code_lengths(&h, 12), [0; 256]);
    h[77] = 5;
    let lens = huffman::code_lengths(&h, 12);
    assert_eq!(lens[77], 1);
    assert_eq!(lens.iter().filter(|&&l| l > 0).count(), 1);
    for k in [2usize, 3, 13, 20, 47, 100, 255, 256] {
        check_lengths(&fibonacci_hist(k), huffman::MAX_BITS);
    }
    // Counts at the top of the u32 range: sums must not overflow.
    check_lengths(&[u32::MAX; 256], huffman::MAX_BITS);
    let mut h = [1u32; 256];
    h[0] = u32::MAX;
    h[1] = u32::MAX;
    check_lengths(&h, huffman::MAX_BITS);
    // Every count equal: all lengths 8.
    assert_eq!(huffman::code_lengths(&[3u32; 256], 12), [8u8; 256]);
}

/// How much the length limit may cost over unlimited Huffman, on extreme skew.
#[test]
fn length_limit_costs_little_on_extreme_skew() {
    let mut cases: Vec<(String, [u32; 256])> = Vec::new();
    for k in [13usize, 20, 30, 47, 64, 128, 256] {
        cases.push((format!("fibonacci {k}"), fibonacci_hist(k)));
    }
    for used in [16usize, 64, 256] {
        let mut h = [0u32; 256];
        for (s, c) in h.iter_mut().enumerate().take(used) {
            *c = 1 << (s % 31);
        }
        cases.push((format!("1<<(s%31), {used} used"), h));
    }
    // One dominant symbol (~99.9%), singletons and a few secondary symbols.
    for singles in [1usize, 50, 255] {
        let mut h = [0u32; 256];
        h[0] = 1_000_000;
        for c in h.iter_mut().skip(1).take(4) {
            *c = 250;
        }
        for c in h.iter_mut().skip(5).take(singles.min(251)) {
            *c = 1;
        }
        cases.push((format!("dominant + {singles} singletons"), h));
    }
    let mut rng = Rng(7);
    for i in 0..64 {
        let mut h = [0u32; 256];
        for c in h.iter_mut() {
            if rng.below(4) != 0 {
                *c = 1 << rng.below(31);
            }
        }
        cases.push((format!("random 1<<k #{i}"), h));
    }
    let (mut worst_free, mut worst_best) = (0.0f64, 0.0f64);
    for (name, h) in &cases {
        let lens = check_lengths(h, huffman::MAX_BITS);
        let ours = cost(h, &lens) as f64;
        let free = unlimited_cost(h) as f64;
        let best = cost(h, &optimal_limited_lengths(h, huffman::MAX_BITS)) as f64;
        worst_free = worst_free.max(ours / free - 1.0);
        worst_best = worst_best.max(ours / best - 1.0);
        assert!(
            ours <= free * 1.04,
            "{name}: limited lengths cost {:.2}% over unlimited Huffman",
            100.0 * (ours / free - 1.0)
        );
        assert!(
            ours <= best * 1.025,
            "{name}: limited lengths cost {:.2}% over the optimal 12-bit code",
            100.0 * (ours / best - 1.0)
        );
    }
    eprintln!(
        "extreme skew: length limit costs at most {:.3}% over unlimited Huffman, {:.3}% over \
         the optimal 12-bit code",
        100.0 * worst_free,
        100.0 * worst_best
    );
}

/// Moderately skewed histograms of real size, whose unlimited trees are 15-21 deep.
fn moderate_strategy() -> impl Strategy<Value = Dist> {
    prop_oneof![
        (1.0f64..40.0).prop_map(Dist::Laplace),
        (0.5f64..0.98).prop_map(Dist::Geometric),
    ]
}

proptest! {
    #![proptest_config(config(24))]

    #[test]
    fn length_limit_cost_on_moderate_skew(dist in moderate_strategy(), seed in any::<u64>()) {
        let data = generate(&dist, 1_000_000, seed);
        let hist = histogram(&data);
        let lens = check_lengths(&hist, huffman::MAX_BITS);
        let ours = cost(&hist, &lens) as f64;
        let free = unlimited_cost(&hist) as f64;
        let best = cost(&hist, &optimal_limited_lengths(&hist, huffman::MAX_BITS)) as f64;
        prop_assert!(
            ours <= free * 1.015 && ours <= best * 1.01,
            "{dist:?}: +{:.3}% over unlimited, +{:.3}% over optimal 12-bit",
            100.0 * (ours / free - 1.0),
            100.0 * (ours / best - 1.0)
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Coded sizes against the order-0 entropy bound
// ---------------------------------------------------------------------------------------------

/// Wide distributions over many symbols, where Huffman's whole-bit lengths lose little.
fn wide_strategy() -> impl Strategy<Value = Dist> {
    prop_oneof![
        Just(Dist::Uniform),
        (40.0f64..100.0).prop_map(Dist::Laplace),
        (0.98f64..0.999).prop_map(Dist::Geometric),
    ]
}

proptest! {
    #![proptest_config(config(12))]

    #[test]
    fn huffman_size_near_entropy(dist in wide_strategy(), seed in any::<u64>()) {
        let n = 1_000_000;
        let data = generate(&dist, n, seed);
        let hist = histogram(&data);
        let mut out = Vec::new();
        huffman::encode(&data, &hist, &mut out);
        let bound = entropy_bytes(&hist);
        // Table count, one table (<= 130 bytes), stream sizes (12), four partial last bytes.
        prop_assert!(
            out.len() as f64 <= bound * 1.01 + 160.0,
            "{dist:?}: {} bytes, entropy bound {bound:.0}", out.len()
        );
        // The encoder takes one shared table or one per stream, whichever is smaller: never
        // more than the shared code costs, never less than each quarter's own optimal code.
        let lens = huffman::code_lengths(&hist, huffman::MAX_BITS);
        let bits = cost(&hist, &lens);
        prop_assert!(out.len() as u64 <= bits / 8 + 1 + 130 + 12 + 4);
        let q = n.div_ceil(4);
        let own_bits: u64 = data
            .chunks(q)
            .map(|c| {
                let h = histogram(c);
                cost(&h, &huffman::code_lengths(&h, huffman::MAX_BITS))
            })
            .sum();
        prop_assert!(out.len() as u64 >= own_bits / 8);
    }

    #[test]
    fn range_size_near_entropy(
        dist in prop_oneof![wide_strategy(), moderate_strategy(), (2usize..=8).prop_map(Dist::Few)],
        seed in any::<u64>(),
    ) {
        let n = 1_000_000;
        let data = generate(&dist, n, seed);
        let hist = histogram(&data);
        let mut out = Vec::new();
        prop_assert!(range::encode(&data, &hist, &mut out));
        let m = range::Model::from_histogram(&hist).unwrap();
        let mut table = Vec::new();
        m.write(&mut table);
        let bound = entropy_bytes(&hist);
        prop_assert!(
            out.len() as f64 <= bound * 1.005 + table.len() as f64 + 8.0,
            "{dist:?}: {} bytes ({} table), entropy bound {bound:.0}", out.len(), table.len()
        );
    }
}

/// Range coding beats Huffman where Huffman's whole-bit lengths hurt most: heavy skew.
#[test]
fn range_beats_huffman_on_skew() {
    for (i, q) in [0.02f64, 0.1, 0.3].into_iter().enumerate() {
        let data = generate(&Dist::Geometric(q), 500_000, 100 + i as u64);
        let hist = histogram(&data);
        let (mut h, mut r) = (Vec::new(), Vec::new());
        huffman::encode(&data, &hist, &mut h);
        assert!(range::encode(&data, &hist, &mut r));
        assert!(
            r.len() < h.len(),
            "q={q}: range {} vs huffman {}",
            r.len(),
            h.len()
        );
        // Huffman pays at least one bit per symbol; the range coder gets near the entropy.
        assert!(h.len() >= data.len() / 8);
        assert!((r.len() as f64) < entropy_bytes(&hist) * 1.02 + 600.0);
    }
}

// ---------------------------------------------------------------------------------------------
// Decoders on arbitrary input: Ok or Err, never a panic
// ---------------------------------------------------------------------------------------------

fn out_len_strategy() -> impl Strategy<Value = usize> {
    prop_oneof![0usize..=16, 0usize..=100_000]
}

/// A valid payload of either coder, for mutation.
fn valid_payload(dist: &Dist, n: usize, seed: u64, huff: bool) -> Vec<u8> {
    let mut data = generate(dist, n, seed);
    if data.len() >= 2 && distinct(&histogram(&data)) < 2 {
        data[0] = data[0].wrapping_add(1);
    }
    let hist = histogram(&data);
    let mut out = Vec::new();
    if huff {
        huffman::encode(&data, &hist, &mut out);
    } else if !range::encode(&data, &hist, &mut out) {
        out = vec![0, 1];
    }
    out
}

proptest! {
    #![proptest_config(config(1000))]

    #[test]
    fn decoders_survive_random_bytes(
        payload in prop::collection::vec(any::<u8>(), 0..3000),
        n in out_len_strategy(),
    ) {
        let mut out = vec![0u8; n];
        let _ = huffman::decode(&payload, &mut out);
        let _ = range::decode(&payload, &mut out);
    }

    /// Random bytes behind a plausible table get much further into the decode loops.
    #[test]
    fn decoders_survive_random_streams(
        n_sym in 2usize..=256,
        tail in prop::collection::vec(any::<u8>(), 0..4000),
        n in out_len_strategy(),
        seed in any::<u64>(),
    ) {
        let mut rng = Rng(seed);
        // A complete Huffman table over `n_sym` symbols and random stream sizes.
        let mut hist = [0u32; 256];
        for c in hist.iter_mut().take(n_sym) {
            *c = 1 + rng.below(1000) as u32;
        }
        let lens = huffman::code_lengths(&hist, huffman::MAX_BITS);
        let last = (0..256).rev().find(|&s| lens[s] > 0).unwrap();
        let mut p = vec![last as u8];
        for pair in lens[..=last].chunks(2) {
            p.push(pair[0] | (pair.get(1).copied().unwrap_or(0) << 4));
        }
        for _ in 0..3 {
            let size = rng.below(tail.len() as u64 / 2 + 2) as u32;
            p.extend_from_slice(&size.to_le_bytes());
        }
        p.extend_from_slice(&tail);
        let mut out = vec![0u8; n];
        let _ = huffman::decode(&p, &mut out);
        // A valid range model followed by random code bytes.
        let mut p = Vec::new();
        range::Model::from_histogram(&hist).unwrap().write(&mut p);
        p.extend_from_slice(&tail);
        let _ = range::decode(&p, &mut out);
    }

    /// Valid payloads with bytes flipped, truncated, extended, or decoded at the wrong length.
    #[test]
    fn decoders_survive_mutated_payloads(
        dist in dist_strategy(),
        n in 2usize..20_000,
        seed in any::<u64>(),
        huff in any::<bool>(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 0..4),
        cut in prop::option::of(any::<prop::sample::Index>()),
        extra in prop::collection::vec(any::<u8>(), 0..3),
        out_delta in -3i64..=3,
    ) {
        let mut p = valid_payload(&dist, n, seed, huff);
        for (at, x) in &flips {
            let i = at.index(p.len());
            p[i] ^= x;
        }
        if let Some(c) = cut {
            p.truncate(c.index(p.len() + 1));
        }
        p.extend_from_slice(&extra);
        let mut out = vec![0u8; (n as i64 + out_delta).max(0) as usize];
        let res = if huff { huffman::decode(&p, &mut out) } else { range::decode(&p, &mut out) };
        if flips.is_empty() && cut.is_none() && extra.is_empty() && out_delta == 0 {
            prop_assert!(res.is_ok());
        }
    }
}
