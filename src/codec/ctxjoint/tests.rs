//! Round trips and refusals of the three layouts.

use super::model::*;
use super::*;
use crate::codec::{joint, signs};
use crate::entropy::rows::MAX_ROW;

/// Weights-like planes: rows with scales of their own, columns with scales of their own.
fn planes(n: usize, row: usize, seed: u32) -> (Vec<u8>, Vec<u8>) {
    let mut x = seed | 1;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        x
    };
    let row_scale: Vec<i32> = (0..n / row + 2).map(|_| (rnd() % 5) as i32).collect();
    let col_scale: Vec<i32> = (0..row).map(|_| (rnd() % 3) as i32).collect();
    let (mut e, mut m) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for i in 0..n {
        let drop = (rnd() % 8).min(rnd() % 8) as i32;
        e.push((120 + row_scale[i / row] + col_scale[i % row] - drop) as u8);
        m.push(rnd() as u8);
    }
    (e, m)
}

fn roundtrip(e: &[u8], m: &[u8], rows: Rows) -> usize {
    let mut p = Vec::new();
    assert!(encode(e, m, rows, &mut p));
    let mut r = Vec::new();
    raw6::encode(m, &mut r);
    let (mut de, mut dm) = (vec![0xAA; e.len()], vec![0x55; e.len()]);
    decode::<ROWS>(&p, &r, &mut de, &mut dm).unwrap();
    assert_eq!(de, e);
    assert_eq!(dm, m);
    p.len()
}

#[test]
fn qlog_is_monotone_and_inverts() {
    let mut last = -1;
    for x in 1..100_000u64 {
        let q = qlog(x);
        assert!(q >= last, "x={x}");
        last = q;
    }
    assert_eq!(qlog(0), 0);
    assert_eq!(qlog(1), 0);
    assert_eq!(qlog(2), 64);
    assert_eq!(qlog(3), 64 + 32);
    assert_eq!(qlog(3 << 56), 57 * 64 + 32);
    for q in [384, 400, 1000, 2000, 51 * 64 + 63] {
        assert_eq!(qlog(qexp(q)), q, "q={q}");
    }
}

#[test]
fn roundtrips_at_any_layout() {
    for (n, row) in [
        (2usize, 1usize),
        (3, 2),
        (7, 3),
        (100, 10),
        (8191, 384),
        (8193, 64),
    ] {
        let (e, m) = planes(n, row, n as u32);
        if Alphabet::of(&e, &m).is_none() {
            continue;
        }
        for rows in [
            Rows { len: 1, phase: 0 },
            Rows::at(row as u64, 0),
            Rows::at(row as u64, 5),
            Rows::at(row as u64, -3),
            Rows::at(n as u64 * 3, 7),
            Rows {
                len: MAX_ROW,
                phase: MAX_ROW - 1,
            },
        ] {
            roundtrip(&e, &m, rows);
        }
    }
}

/// Codes `e`/`m` in `parts` and decodes them both ways; returns the payload's length.
fn roundtrip_parts(e: &[u8], m: &[u8], parts: &[Part]) -> usize {
    roundtrip_coded(e, m, parts, false).0
}

/// Codes `e`/`m` in `parts`, as `ctxsigns`/`signs` when `signed` (through
/// [`into_signed`]), and decodes them both ways; returns the lengths of the two payloads.
pub(in crate::codec) fn roundtrip_coded(
    e: &[u8],
    m: &[u8],
    parts: &[Part],
    signed: bool,
) -> (usize, usize) {
    let mut p = Vec::new();
    let mut codec = encode_parts(e, m, parts, &mut p).expect("parts fit");
    assert_eq!(codec == Codec::CtxTensors, parts.len() > 1);
    let mut r = Vec::new();
    if signed {
        let len = signed_len(codec, p.len());
        assert!(into_signed(codec, parts, &mut p));
        assert_eq!(len, Some(p.len()));
        assert!(signs::encode(m, parts, &mut r));
        codec = Codec::CtxSigns;
    } else {
        raw6::encode(m, &mut r);
    }
    let (mut de, mut dm) = (vec![0xAA; e.len()], vec![0x55; e.len()]);
    let Decode::Pair {
        both: Some(pair),
        words: Some(words),
    } = codec.spec().decode
    else {
        unreachable!("ctxjoint decodes pairs or words")
    };
    pair(&p, &r, &mut de, &mut dm).unwrap();
    assert_eq!((de.as_slice(), dm.as_slice()), (e, m));
    // The words path writes the block's BF16 words (exp16: exponent bits 14..7).
    let mut out = vec![0u8; 2 * e.len()];
    words(&p, &r, &mut Vec::new(), &mut out).unwrap();
    let want: Vec<u8> = e
        .iter()
        .zip(m)
        .flat_map(|(&e, &m)| {
            let w = (m as u16 & 0x80) << 8 | (e as u16) << 7 | (m as u16 & 0x7F);
            w.to_le_bytes()
        })
        .collect();
    assert!(out == want);
    (p.len(), r.len())
}

#[test]
fn parts_roundtrip_and_share_their_models() {
    // Three tensors of their own row lengths and scales, the last of odd length.
    let shapes = [(6000usize, 60usize, 1u32), (4000, 40, 2), (2001, 23, 3)];
    let (mut e, mut m, mut parts) = (Vec::new(), Vec::new(), Vec::new());
    for (n, row, seed) in shapes {
        let (pe, pm) = planes(n, row, seed);
        e.extend(pe);
        m.extend(pm);
        parts.push(Part {
            len: n,
            rows: Rows::at(row as u64, 0),
        });
    }
    let together = roundtrip_parts(&e, &m, &parts);
    // Each tensor as a block of its own pays for learning three times over.
    let mut at = 0;
    let apart: usize = parts
        .iter()
        .map(|p| {
            let r = at..at + p.len;
            at += p.len;
            roundtrip(&e[r.clone()], &m[r], p.rows)
        })
        .sum();
    assert!(together < apart, "{together} vs {apart}");
    // A part may start mid-row, and one part is ctxjoint's payload.
    parts[1].rows = Rows::at(40, -7);
    roundtrip_parts(&e, &m, &parts);
    let whole = [Part {
        len: e.len(),
        rows: Rows::at(60, 0),
    }];
    let mut one = Vec::new();
    assert!(encode(&e, &m, whole[0].rows, &mut one));
    assert_eq!(roundtrip_parts(&e, &m, &whole), one.len());
}

#[test]
fn bad_parts_are_refused_and_bad_part_tables_are_errors() {
    let (e, m) = planes(3000, 50, 9);
    let part = |len, row| Part {
        len,
        rows: Rows::at(row, 0),
    };
    let refused = [
        vec![],
        vec![part(1001, 50), part(1999, 50)],
        vec![part(1000, 50), part(1000, 50)],
        vec![part(1000, 50), part(2004, 50)],
        vec![part(0, 50), part(3000, 50)],
        // A middle part's rows may not be longer than its elements and 3 more.
        vec![part(1000, 50), part(4, 8), part(1996, 50)],
        vec![
            part(1000, 50),
            Part {
                len: 2000,
                rows: Rows { len: 50, phase: 50 },
            },
        ],
    ];
    for parts in refused {
        let mut out = Vec::new();
        assert_eq!(encode_parts(&e, &m, &parts, &mut out), None, "{parts:?}");
        assert!(out.is_empty());
    }
    let mut fits = Vec::new();
    let three = [part(1000, 50), part(4, 7), part(1996, 50)];
    assert_eq!(
        encode_parts(&e, &m, &three, &mut fits),
        Some(Codec::CtxTensors)
    );
    let mut p = Vec::new();
    let parts = [part(1000, 50), part(1200, 30), part(800, 7)];
    assert_eq!(
        encode_parts(&e, &m, &parts, &mut p),
        Some(Codec::CtxTensors)
    );
    let mut r = Vec::new();
    raw6::encode(&m, &mut r);
    let (mut de, mut dm) = (vec![0; 3000], vec![0; 3000]);
    decode::<PARTS>(&p, &r, &mut de, &mut dm).unwrap();
    // A ctxtensors payload is its ctxsigns payload; the part table checks are the same.
    let mut same = p.clone();
    assert!(into_signed(Codec::CtxTensors, &parts, &mut same));
    assert_eq!(same, p);
    let mut s = Vec::new();
    assert!(signs::encode(&m, &parts, &mut s));
    let layouts: [(crate::codec::spec::PairFn, &[u8]); 2] =
        [(decode::<PARTS>, &r), (decode::<SIGNED>, &s)];
    // The part table follows the alphabet and the context base.
    let at = Alphabet::read(&p).unwrap().1.as_ptr() as usize - p.as_ptr() as usize + 2;
    let field = |k: usize| at + 4 + 4 * k;
    for (decode, r) in layouts {
        decode(&p, r, &mut de, &mut dm).unwrap();
        for (offset, bad) in [
            (at, 0u32),
            (at, 1),
            (at, 4),
            (at, u32::MAX),
            (field(0), 999),
            (field(0), 0),
            (field(6), 801),
            (field(1), 0),
            (field(2), 50),
            (field(4), MAX_ROW + 1),
            (field(4), 1204),
        ] {
            let mut q = p.clone();
            q[offset..offset + 4].copy_from_slice(&bad.to_le_bytes());
            assert!(decode(&q, r, &mut de, &mut dm).is_err(), "{offset} {bad}");
        }
        for cut in [at - 1, at + 3, field(8), field(9) - 1] {
            assert!(decode(&p[..cut], r, &mut de, &mut dm).is_err(), "{cut}");
        }
        for k in 0..p.len() {
            let mut q = p.clone();
            q[k] ^= 0x5A;
            let _ = decode(&q, r, &mut de, &mut dm);
        }
    }
    // A ctxjoint payload is not a ctxtensors or ctxsigns one, nor the other way round.
    let mut one = Vec::new();
    assert!(encode(&e, &m, Rows::at(50, 0), &mut one));
    assert!(decode::<PARTS>(&one, &r, &mut de, &mut dm).is_err());
    assert!(decode::<SIGNED>(&one, &s, &mut de, &mut dm).is_err());
    assert!(decode::<ROWS>(&p, &r, &mut de, &mut dm).is_err());
    // One part is a ctxsigns table (not a ctxtensors one), which must cover the plane.
    let whole = [part(3000, 50)];
    assert!(into_signed(Codec::CtxJoint, &whole, &mut one));
    let mut s = Vec::new();
    assert!(signs::encode(&m, &whole, &mut s));
    decode::<SIGNED>(&one, &s, &mut de, &mut dm).unwrap();
    assert_eq!((de.as_slice(), dm.as_slice()), (&e[..], &m[..]));
    assert!(decode::<PARTS>(&one, &r, &mut de, &mut dm).is_err());
    for (offset, bad) in [(at, 0u32), (at, 2), (field(0), 2996), (field(2), 50)] {
        let mut q = one.clone();
        q[offset..offset + 4].copy_from_slice(&bad.to_le_bytes());
        assert!(
            decode::<SIGNED>(&q, &s, &mut de, &mut dm).is_err(),
            "{offset} {bad}"
        );
    }
    // Neither a joint payload nor plane 1 becomes a ctxsigns payload.
    for codec in [Codec::Joint, Codec::Raw6] {
        let mut q = p.clone();
        assert!(!into_signed(codec, &parts, &mut q));
        assert_eq!(q, p);
    }
}

#[test]
fn rows_beat_the_joint_codec_on_scaled_rows() {
    let (e, m) = planes(200_000, 500, 7);
    let ctx = roundtrip(&e, &m, Rows::at(500, 0));
    let mut plain = Vec::new();
    assert!(joint::encode_joint(&e, &m, &mut plain));
    assert!(
        (ctx as f64) < plain.len() as f64 * 0.97,
        "ctxjoint {ctx} vs joint {}",
        plain.len()
    );
}

#[test]
fn bad_layouts_and_payloads_are_errors() {
    let (e, m) = planes(5000, 50, 3);
    assert!(!encode(&e, &m, Rows { len: 0, phase: 0 }, &mut Vec::new()));
    assert!(!encode(&e, &m, Rows { len: 4, phase: 4 }, &mut Vec::new()));
    assert!(!encode(
        &e,
        &m,
        Rows {
            len: MAX_ROW + 1,
            phase: 0
        },
        &mut Vec::new()
    ));
    let mut p = Vec::new();
    assert!(encode(&e, &m, Rows::at(50, 0), &mut p));
    let mut r = Vec::new();
    raw6::encode(&m, &mut r);
    let (mut de, mut dm) = (vec![0; 5000], vec![0; 5000]);
    let at = Alphabet::read(&p).unwrap().1.as_ptr() as usize - p.as_ptr() as usize;
    for (field, bad) in [(0, 0u32), (0, MAX_ROW + 1), (4, 50)] {
        let mut q = p.clone();
        q[at + field..at + field + 4].copy_from_slice(&bad.to_le_bytes());
        assert!(decode::<ROWS>(&q, &r, &mut de, &mut dm).is_err());
    }
    for cut in [0, 1, 33, at + 3, at + 9, at + 12, p.len() / 2, p.len() - 1] {
        assert!(decode::<ROWS>(&p[..cut], &r, &mut de, &mut dm).is_err());
    }
    assert!(decode::<ROWS>(&p, &r[1..], &mut de, &mut dm).is_err());
    assert!(decode::<ROWS>(&p, &r, &mut de[1..], &mut dm).is_err());
    for k in 0..p.len() {
        let mut q = p.clone();
        q[k] ^= 0x5A;
        let _ = decode::<ROWS>(&q, &r, &mut de, &mut dm);
    }
}
