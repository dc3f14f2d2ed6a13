use super::kernel::bulk;
use super::*;
use crate::stats::histogram;
use proptest::prelude::*;

fn kraft(lens: &[u8; 256]) -> u64 {
    lens.iter()
        .filter(|&&l| l > 0)
        .map(|&l| 1u64 << (MAX_BITS - l as u32))
        .sum()
}

#[test]
fn lengths_limited_and_prefix_free_on_extreme_skew() {
    let mut hist = [0u32; 256];
    for (s, h) in hist.iter_mut().enumerate() {
        // Fibonacci-like growth would give depth 255 without limiting.
        *h = 1u32 << (s % 31);
    }
    let lens = code_lengths(&hist, MAX_BITS);
    assert!(lens.iter().all(|&l| (1..=12).contains(&l)));
    assert!(kraft(&lens) <= 1 << MAX_BITS);
}

/// The cost of an optimal code with no length limit (Huffman's merges): what a limited
/// code costs too wherever the optimal one fits the limit.
fn huffman_cost(hist: &[u32; 256]) -> u64 {
    use std::cmp::Reverse;
    let mut heap: std::collections::BinaryHeap<_> = hist
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| Reverse(c as u64))
        .collect();
    let mut cost = 0;
    while heap.len() > 1 {
        let (Some(Reverse(a)), Some(Reverse(b))) = (heap.pop(), heap.pop()) else {
            unreachable!()
        };
        cost += a + b;
        heap.push(Reverse(a + b));
    }
    cost
}

/// Package-merge gives optimal lengths: Huffman's cost where no code needs more than the
/// limit (skewed and flat histograms of every alphabet size), and a complete code.
#[test]
fn lengths_are_optimal_within_the_limit() {
    let mut x = 12345u64;
    for used in 2..=256usize {
        for skew in [0u32, 3, 9] {
            let mut hist = [0u32; 256];
            for (s, h) in hist.iter_mut().enumerate().take(used) {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                *h = 1 + ((x >> 33) as u32 % 1000) + (1000 << skew) / (s as u32 + 1);
            }
            let lens = code_lengths(&hist, MAX_BITS);
            let cost = coded_bits(&hist, &lens);
            assert_eq!(kraft(&lens), 1 << MAX_BITS, "used={used} skew={skew}");
            if lens.iter().all(|&l| (l as u32) < MAX_BITS) {
                assert_eq!(cost, huffman_cost(&hist), "used={used} skew={skew}");
            } else {
                assert!(cost >= huffman_cost(&hist));
            }
        }
    }
}

#[test]
fn quarter_histograms_count_each_stream_quarter() {
    for n in (0..100usize).chain([1000, 4099]) {
        let data: Vec<u8> = (0..n).map(|i| (i * 7 % 5) as u8).collect();
        let quarters = quarter_histograms(&data);
        for (q, range) in quarters.iter().zip(stream_ranges(n)) {
            assert_eq!(*q, histogram(&data[range]), "n={n}");
        }
        assert_eq!(sum_histograms(&quarters), histogram(&data), "n={n}");
    }
}

/// Streams of one-bit codes, the fewest bytes per symbol, around the length where plain
/// stores give way to ORed ones: every stream ends where its histogram says.
#[test]
fn one_bit_codes_round_trip_at_every_length_near_the_tail() {
    for n in (4 * kernel::OR_TAIL - 40)..(4 * kernel::OR_TAIL + 300) {
        let data: Vec<u8> = (0..n).map(|i| u8::from(i % 7 == 3)).collect();
        let enc = encode_plain(&data);
        let mut out = vec![0u8; n];
        decode(&enc, &mut out).unwrap();
        assert_eq!(out, data, "n={n}");
    }
}

#[test]
fn roundtrip_small_sizes() {
    for n in 0..40usize {
        let data: Vec<u8> = (0..n).map(|i| (i * 7 % 5) as u8).collect();
        let enc = encode_plain(&data);
        let mut out = vec![0u8; n];
        if n > 0 {
            decode(&enc, &mut out).unwrap();
        }
        assert_eq!(out, data, "n={n}");
    }
}

/// Symbol and code length for every 12-bit window, (0, 12) where no code starts: what the
/// decoder did before its tables held several symbols.
fn single_table(lens: &[u8; 256]) -> Vec<(u8, u32)> {
    let codes = canonical_codes(lens);
    let mut table = vec![(0u8, MAX_BITS); TABLE_LEN];
    for s in (0..256).filter(|&s| lens[s] > 0) {
        for slot in table[codes[s] as usize..].iter_mut().step_by(1 << lens[s]) {
            *slot = (s as u8, lens[s] as u32);
        }
    }
    table
}

/// One symbol per lookup, one stream after the other: the behaviour `decode` must keep.
fn decode_one_at_a_time(payload: &[u8], out: &mut [u8]) -> Result<(), CodecError> {
    let (lens, count, streams) = parse(payload)?;
    let singles: Vec<_> = lens[..count].iter().map(single_table).collect();
    let (n, q) = (out.len(), quarter(out.len()));
    for (k, stream) in streams.iter().enumerate() {
        let table = &singles[k.min(singles.len() - 1)];
        let bit = |i: usize| {
            stream
                .get(i / 8)
                .map_or(0, |&b| (b as usize >> (i % 8)) & 1)
        };
        let mut pos = 0;
        for o in &mut out[(k * q).min(n)..((k + 1) * q).min(n)] {
            let window = (0..MAX_BITS as usize)
                .map(|b| bit(pos + b) << b)
                .sum::<usize>();
            let (s, len) = table[window];
            *o = s;
            pos += len as usize;
        }
        if pos > stream.len() * 8 {
            return Err(CodecError("huffman stream overrun"));
        }
    }
    Ok(())
}

fn check_table(lens: &[u8; 256]) {
    let single = single_table(lens);
    // Built over a table kept from another plane: every slot must be rewritten.
    let mut table = DecodeTable::empty();
    table.multi.fill(0xDEAD_BEEF);
    table.single.fill(0xBEEF);
    table.build_single(lens);
    for (w, &e) in table.single.iter().enumerate() {
        let (s, len) = single[w];
        assert_eq!(e, (s as u16) << 8 | len as u16, "slot {w:#x} of {lens:?}");
    }
    table.build(lens);
    for (w, &e) in table.multi.iter().enumerate() {
        let expect = {
            let (mut e, mut used, mut count) = (0, 0, 0);
            while count < MAX_SYMS {
                let (s, len) = single[w >> used];
                if used + len > LOOKUP_BITS {
                    break;
                }
                e |= (s as u32) << (8 * count);
                used += len;
                count += 1;
            }
            e | used << LEN_SHIFT | count << COUNT_SHIFT
        };
        assert!(e >> COUNT_SHIFT >= 1, "slot {w:#x} holds no symbol");
        assert_eq!(e, expect, "slot {w:#x} of {lens:?}");
    }
}

/// Histograms from skewed over a few symbols (codes of 1-3 bits, several per lookup) to
/// spread over many (12-bit codes).
fn hist_strategy() -> impl Strategy<Value = [u32; 256]> {
    (
        1usize..=256,
        0u32..=24,
        prop::collection::vec(any::<u32>(), 256),
    )
        .prop_map(|(used, spread, w)| {
            let mut hist = [0u32; 256];
            // An odd multiplier permutes the symbols: a varied set of `used` of them.
            for s in 0..256 {
                if (s * 167 + w[0] as usize) % 256 < used {
                    hist[s] = 1 << (w[s] % (spread + 1));
                }
            }
            hist
        })
}

/// `n` symbols drawn from `hist` (xorshift from `seed`).
fn sample(hist: &[u32; 256], n: usize, seed: u64) -> Vec<u8> {
    let total: u64 = hist.iter().map(|&h| h as u64).sum();
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let mut r = x % total;
            for (s, &h) in hist.iter().enumerate() {
                if r < h as u64 {
                    return s as u8;
                }
                r -= h as u64;
            }
            unreachable!("r < total")
        })
        .collect()
}

#[test]
fn tables_hold_what_single_lookups_decode() {
    let mut one = [0u8; 256];
    one[255] = 1;
    check_table(&one);
    check_table(&[8; 256]);
    let mut twelve = [12u8; 256];
    twelve[0] = 1;
    check_table(&twelve);
    let fib: [u32; 256] = std::array::from_fn(|s| if s < 40 { 1 << (s / 2) } else { 0 });
    check_table(&code_lengths(&fib, MAX_BITS));
    // A BF16 exponent plane: three 2-bit codes, a 3-bit one, a tail out to 12 bits.
    let mut exp = [0u32; 256];
    for (s, h) in (110..=127).zip([
        139, 273, 531, 965, 1981, 3970, 7921, 15781, 31460, 62179, 114585, 166427, 100539, 16027,
        1345, 29, 7, 1,
    ]) {
        exp[s] = h;
    }
    check_table(&code_lengths(&exp, MAX_BITS));
}

/// Windows are equally likely under the probabilities a complete code's lengths stand
/// for, so the symbols a lookup yields on average are the mean count of the table's entries.
#[test]
fn symbols_per_lookup_is_the_mean_entry_count() {
    let mut x = 99u64;
    for used in [2usize, 3, 5, 17, 64, 200, 256] {
        for skew in [0u32, 4, 12] {
            let mut hist = [0u32; 256];
            for (s, h) in hist.iter_mut().enumerate().take(used) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *h = 1 + (x % 100) as u32 + (1000 << skew) / (s as u32 + 1);
            }
            let lens = code_lengths(&hist, MAX_BITS);
            assert_eq!(kraft(&lens), 1 << MAX_BITS, "complete");
            let mut table = DecodeTable::empty();
            table.build(&lens);
            let counts: u64 = table.multi.iter().map(|&e| (e >> COUNT_SHIFT) as u64).sum();
            let mean = counts as f64 / LOOKUP_LEN as f64;
            let got = symbols_per_lookup(&lens);
            assert!((got - mean).abs() < 1e-9, "{used} {skew}: {got} vs {mean}");
        }
    }
}

/// The loop a plane gets: one symbol per lookup for the long codes of int8 weights, several
/// for an exponent plane's short ones and for a code of one symbol.
#[test]
fn long_codes_pick_the_single_symbol_loop() {
    // Int8 weights of a Gaussian spread of 40 (Q8_0's range): codes of 6 bits and more.
    let int8: [u32; 256] = std::array::from_fn(|s| {
        let v = (s as u8 as i8) as f64 / 40.0;
        1 + (1e6 * (-v * v / 2.0).exp()) as u32
    });
    let lens = code_lengths(&int8, MAX_BITS);
    assert!(symbols_per_lookup(&lens) < SINGLE_BELOW);
    let exponents: [u32; 256] = std::array::from_fn(|s| match s {
        120..=127 => 1 << (s - 118),
        _ => 0,
    });
    assert!(symbols_per_lookup(&code_lengths(&exponents, MAX_BITS)) > 2.0);
    let mut one = [0u8; 256];
    one[7] = 1;
    assert_eq!(symbols_per_lookup(&one), MAX_SYMS as f64);
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 300,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn tables_hold_what_single_lookups_decode_prop(
        hist in hist_strategy(),
        drop in prop::collection::vec(any::<u8>(), 0..4),
    ) {
        let mut lens = code_lengths(&hist, MAX_BITS);
        // Dropped codes leave an incomplete code, as corrupt data may declare.
        for &s in &drop {
            if lens.iter().filter(|&&l| l > 0).count() > 1 {
                lens[s as usize] = 0;
            }
        }
        check_table(&lens);
    }

    /// Valid, corrupted and truncated payloads, decoded at the right length or a wrong one,
    /// through both compiled variants of the interleaved loop.
    #[test]
    fn decode_matches_one_symbol_at_a_time(
        hist in hist_strategy(),
        n in prop_oneof![1usize..200, 1usize..5000, 60_000usize..70_000],
        seed in any::<u64>(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 0..3),
        cut in prop::option::of(any::<prop::sample::Index>()),
        out_delta in -2i64..=2,
    ) {
        let data = sample(&hist, n, seed);
        let mut p = encode_plain(&data);
        let mut out = vec![0u8; n];
        decode(&p, &mut out).unwrap();
        prop_assert!(out == data);
        for (at, b) in &flips {
            let i = at.index(p.len());
            p[i] ^= b;
        }
        if let Some(c) = cut {
            p.truncate(c.index(p.len() + 1));
        }
        let m = (n as i64 + out_delta).max(0) as usize;
        let mut expect = vec![0u8; m];
        let want = decode_one_at_a_time(&p, &mut expect);
        let loops = [
            DETECT,
            Loops::Only(Loop::Multi(bulk_detect)),
            Loops::Only(Loop::Multi(bulk)),
            Loops::Only(Loop::Single(bulk_detect)),
            Loops::Only(Loop::Single(bulk)),
        ];
        for loops in loops {
            let mut got = vec![0u8; m];
            prop_assert_eq!(decode_with(&p, &mut got, 256, loops), want);
            // After an error the output is unspecified (decoders stop at different points).
            if want.is_ok() {
                prop_assert!(got == expect);
            }
        }
    }
}
