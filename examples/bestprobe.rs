use sc::entropy::adaptive;
use sc::split::Transform;
use std::time::Instant;
fn main() {
    let f = std::fs::read("/work/shared/data/all-MiniLM-L6-v2.BF16.safetensors").unwrap();
    let raw = &f[8 + 11504 + 400384..8 + 11504 + 400384 + (16 << 20)];
    let mut planes = vec![Vec::new(), Vec::new()];
    Transform::Exp16.split(raw, &mut planes);
    let (e, m) = (&planes[0], &planes[1]);
    let n = e.len();
    let mut pe = Vec::new();
    adaptive::encode(e, &mut pe);
    let mut pm = Vec::new();
    adaptive::encode_context(m, e, &mut pm);
    println!(
        "n={n} exp {:.4} bits/value, man {:.4} bits/value",
        pe.len() as f64 * 8.0 / n as f64,
        pm.len() as f64 * 8.0 / n as f64
    );
    let mut oe = vec![0u8; n];
    let mut om = vec![0u8; n];
    for _ in 0..3 {
        let t = Instant::now();
        adaptive::decode(&pe, &mut oe).unwrap();
        let a = t.elapsed();
        let t = Instant::now();
        adaptive::decode_context(&pm, e, &mut om).unwrap();
        let b = t.elapsed();
        let t = Instant::now();
        adaptive::decode_pair(&pe, &pm, &mut oe, &mut om).unwrap();
        let c = t.elapsed();
        let t = Instant::now();
        let mut x = Vec::new();
        adaptive::encode(e, &mut x);
        let d = t.elapsed();
        let t = Instant::now();
        let mut y = Vec::new();
        adaptive::encode_context(m, e, &mut y);
        let g = t.elapsed();
        let ns = |d: std::time::Duration| d.as_nanos() as f64 / n as f64;
        println!(
            "decode exp {:.1} ns, man {:.1} ns, pair {:.1} ns | encode exp {:.1} ns, man {:.1} ns",
            ns(a),
            ns(b),
            ns(c),
            ns(d),
            ns(g)
        );
    }
    assert_eq!(oe, *e);
    assert_eq!(om, *m);
}
