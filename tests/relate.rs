//! Bases found by measurement (`sc::relate`): the true base among decoys, unrelated candidates
//! refused, copies, cycles, chains within their depth, and candidates that change.

mod common;

use common::Rng;
use sc::{Base, Chosen, DecodeOptions, EncodeOptions, Error, RelateOptions, RelatePlan};
use std::path::{Path, PathBuf};

/// Tensors of each synthetic model: four of 128 x 256.
const SHAPE: [u64; 2] = [128, 256];
const TENSORS: usize = 4;

/// `n` weights of roughly normal distribution.
fn weights(rng: &mut Rng, n: usize) -> Vec<f32> {
    (0..n)
        .map(|_| ((0..4).map(|_| (rng.next() % 1000) as f32).sum::<f32>() / 1000.0 - 2.0) * 0.05)
        .collect()
}

/// `w` moved by a small step per weight, as a fine-tune or a training step moves it.
fn step(rng: &mut Rng, w: &[f32], size: f32) -> Vec<f32> {
    w.iter()
        .map(|&x| x + size * ((rng.next() % 2001) as f32 / 1000.0 - 1.0))
        .collect()
}

fn bf16(v: &[f32]) -> Vec<u8> {
    v.iter()
        .flat_map(|x| ((x.to_bits() >> 16) as u16).to_le_bytes())
        .collect()
}

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A model: `TENSORS` tensors named with `prefix`, of `dtype` made by `bytes` from `w`.
fn model(w: &[Vec<f32>], prefix: &str, dtype: &str, bytes: fn(&[f32]) -> Vec<u8>) -> Vec<u8> {
    let names: Vec<String> = (0..TENSORS)
        .map(|k| format!("{prefix}{k}.weight"))
        .collect();
    let tensors: Vec<(&str, &str, Vec<u64>, Vec<u8>)> = names
        .iter()
        .zip(w)
        .map(|(n, w)| (n.as_str(), dtype, SHAPE.to_vec(), bytes(w)))
        .collect();
    common::safetensors(&tensors, 0, "{}")
}

fn base_weights(seed: u64) -> Vec<Vec<f32>> {
    let mut rng = Rng(seed);
    let n = (SHAPE[0] * SHAPE[1]) as usize;
    (0..TENSORS).map(|_| weights(&mut rng, n)).collect()
}

fn stepped(w: &[Vec<f32>], seed: u64, size: f32) -> Vec<Vec<f32>> {
    let mut rng = Rng(seed);
    w.iter().map(|t| step(&mut rng, t, size)).collect()
}

/// A fresh folder for one test.
fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sc-relate-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

fn relate(inputs: &[PathBuf], candidates: &[PathBuf], max_depth: usize) -> RelatePlan {
    let opts = RelateOptions {
        max_depth,
        ..RelateOptions::default()
    };
    sc::relate(inputs, candidates, &opts).unwrap()
}

/// Encodes input `i` as `plan` says; returns its archive.
fn encode(plan: &RelatePlan, i: usize, inputs: &[PathBuf], candidates: &[PathBuf]) -> Vec<u8> {
    let base = plan
        .base_path(i, inputs, candidates)
        .map(|p| Base::open(p).unwrap());
    let opts = EncodeOptions {
        base: base.as_ref(),
        ..EncodeOptions::default()
    };
    sc::encode_to_vec(&std::fs::read(&inputs[i]).unwrap(), &opts).unwrap()
}

/// Decodes `archive` against the file `base`, if any.
fn decode(archive: &[u8], base: Option<&Path>) -> sc::Result<Vec<u8>> {
    let base = base.map(|p| Base::open(p).unwrap());
    let opts = DecodeOptions {
        base: base.as_ref(),
        ..DecodeOptions::default()
    };
    sc::decode_to_vec(archive, &opts)
}

/// The decoys: same names and shapes but unrelated values, another dtype (the same weights
/// in F32), other names (the same weights).
fn decoys(d: &Path, w: &[Vec<f32>]) -> Vec<PathBuf> {
    vec![
        write(
            d,
            "unrelated.safetensors",
            &model(&base_weights(99), "l", "BF16", bf16),
        ),
        write(d, "f32.safetensors", &model(w, "l", "F32", f32s)),
        write(d, "renamed.safetensors", &model(w, "layer", "BF16", bf16)),
    ]
}

#[test]
fn wrong_candidates_leave_the_input_alone_and_the_true_base_wins_among_them() {
    let d = dir("decoys");
    let w = base_weights(1);
    let tune = write(
        d.as_path(),
        "tune.safetensors",
        &model(&stepped(&w, 2, 0.002), "l", "BF16", bf16),
    );
    let mut candidates = decoys(&d, &w);
    let inputs = vec![tune];
    let plan = relate(&inputs, &candidates, 8);
    assert_eq!(plan.inputs[0].base, None, "{plan:?}");
    assert_eq!(plan.inputs[0].saving, 0);

    candidates.insert(
        1,
        write(&d, "base.safetensors", &model(&w, "l", "BF16", bf16)),
    );
    let plan = relate(&inputs, &candidates, 8);
    assert_eq!(plan.inputs[0].base, Some(Chosen::Candidate(1)), "{plan:?}");
    let alone = sc::encode_to_vec(
        &std::fs::read(&inputs[0]).unwrap(),
        &EncodeOptions::default(),
    )
    .unwrap();
    let against = encode(&plan, 0, &inputs, &candidates);
    assert!(
        against.len() < alone.len() * 9 / 10,
        "{} vs {}",
        against.len(),
        alone.len()
    );
    let back = decode(&against, Some(&candidates[1])).unwrap();
    assert_eq!(back, std::fs::read(&inputs[0]).unwrap());
}

#[test]
fn a_copy_takes_its_original_and_costs_next_to_nothing_without_a_cycle() {
    let d = dir("copy");
    let bytes = model(&base_weights(3), "l", "BF16", bf16);
    let inputs = vec![
        write(&d, "a.safetensors", &bytes),
        write(&d, "b.safetensors", &bytes),
    ];
    let plan = relate(&inputs, &[], 8);
    // Each is the other's best: one takes the other, which stays alone (no cycle).
    let bases: Vec<_> = plan.inputs.iter().map(|r| r.base).collect();
    assert!(
        bases == [None, Some(Chosen::Input(0))] || bases == [Some(Chosen::Input(1)), None],
        "{bases:?}"
    );
    let copy = bases.iter().position(Option::is_some).unwrap();
    let original = 1 - copy;
    assert_eq!(plan.order, vec![original, copy]);
    let archive = encode(&plan, copy, &inputs, &[]);
    assert!(
        archive.len() * 100 < bytes.len(),
        "{} of {}",
        archive.len(),
        bytes.len()
    );
    assert_eq!(decode(&archive, Some(&inputs[original])).unwrap(), bytes);
}

#[test]
fn three_inputs_that_each_prefer_another_make_no_cycle() {
    let d = dir("cycle");
    let w = base_weights(4);
    let inputs: Vec<PathBuf> = (0..3)
        .map(|k| {
            write(
                &d,
                &format!("m{k}.safetensors"),
                &model(&stepped(&w, 10 + k, 0.001), "l", "BF16", bf16),
            )
        })
        .collect();
    let plan = relate(&inputs, &[], 8);
    assert!(plan.inputs.iter().any(|r| r.base.is_none()), "{plan:?}");
    for i in 0..3 {
        assert!(plan.depth(i) < 3, "{plan:?}");
    }
    // The order puts each base before its dependents.
    for (pos, &i) in plan.order.iter().enumerate() {
        if let Some(Chosen::Input(b)) = plan.inputs[i].base {
            assert!(plan.order[..pos].contains(&b), "{plan:?}");
        }
    }
}

/// A run of checkpoints, each a step from the previous one.
fn checkpoints(d: &Path, n: usize) -> Vec<PathBuf> {
    let mut w = base_weights(5);
    (0..n)
        .map(|k| {
            w = stepped(&w, 100 + k as u64, 0.002);
            write(
                d,
                &format!("step{k}.safetensors"),
                &model(&w, "l", "BF16", bf16),
            )
        })
        .collect()
}

#[test]
fn a_chain_of_checkpoints_stays_within_the_depth_limit() {
    let d = dir("chain");
    let inputs = checkpoints(&d, 6);
    let deep = relate(&inputs, &[], 8);
    let deepest = (0..inputs.len()).map(|i| deep.depth(i)).max().unwrap();
    assert!(deepest >= 2, "{deep:?}");
    for limit in [0, 1, 2] {
        let plan = relate(&inputs, &[], limit);
        for i in 0..inputs.len() {
            assert!(plan.depth(i) <= limit, "limit {limit}: {plan:?}");
        }
        // Inputs refused a deeper chain still take a base where one fits.
        let based = plan.inputs.iter().filter(|r| r.base.is_some()).count();
        match limit {
            0 => assert_eq!(based, 0),
            _ => assert!(based >= inputs.len() / 2, "limit {limit}: {plan:?}"),
        }
    }
    // Every archive decodes in the plan's order, each against its base's original.
    for &i in &deep.order {
        let archive = encode(&deep, i, &inputs, &[]);
        let back = decode(&archive, deep.base_path(i, &inputs, &[])).unwrap();
        assert_eq!(back, std::fs::read(&inputs[i]).unwrap());
    }
}

#[test]
fn a_candidate_changed_after_planning_is_caught_never_decoded_wrong() {
    let d = dir("changed");
    let w = base_weights(6);
    let inputs = vec![write(
        &d,
        "tune.safetensors",
        &model(&stepped(&w, 7, 0.002), "l", "BF16", bf16),
    )];
    let base_bytes = model(&w, "l", "BF16", bf16);
    let candidates = vec![write(&d, "base.safetensors", &base_bytes)];
    let plan = relate(&inputs, &candidates, 8);
    assert_eq!(plan.inputs[0].base, Some(Chosen::Candidate(0)));
    // Changed between planning and coding: coded against what it holds then.
    let other = model(&stepped(&w, 8, 0.002), "l", "BF16", bf16);
    std::fs::write(&candidates[0], &other).unwrap();
    let archive = encode(&plan, 0, &inputs, &candidates);
    assert_eq!(
        decode(&archive, Some(&candidates[0])).unwrap(),
        std::fs::read(&inputs[0]).unwrap()
    );
    // Changed after coding: the decode is refused.
    std::fs::write(&candidates[0], &base_bytes).unwrap();
    assert!(matches!(
        decode(&archive, Some(&candidates[0])),
        Err(Error::BaseMismatch { .. })
    ));
}

#[test]
fn a_plain_file_among_the_inputs_is_coded_alone_and_serves_as_no_base() {
    let d = dir("plain");
    let bytes = model(&base_weights(9), "l", "BF16", bf16);
    let inputs = vec![
        write(&d, "notes.txt", b"not a model"),
        write(&d, "m.safetensors", &bytes),
    ];
    let plan = relate(&inputs, &[], 8);
    assert!(plan.inputs.iter().all(|r| r.base.is_none()), "{plan:?}");
    assert_eq!(plan.inputs[0].len, 11);
    let zero = RelateOptions {
        sample_bytes: 0,
        ..RelateOptions::default()
    };
    assert!(matches!(
        sc::relate(&inputs, &[], &zero),
        Err(Error::InvalidArgument(_))
    ));
}

/// The search's cost next to the encode's, on real files: `SC_RELATE_TUNE` coded against the
/// best of `SC_RELATE_CANDIDATES` (paths separated by `:`, ten of them for the target).
/// A measurement, not a check: `cargo test -p sc --test relate -- --ignored --nocapture`.
#[test]
#[ignore]
fn measure_the_search_against_the_encode() {
    let (Ok(tune), Ok(cands)) = (
        std::env::var("SC_RELATE_TUNE"),
        std::env::var("SC_RELATE_CANDIDATES"),
    ) else {
        eprintln!("set SC_RELATE_TUNE and SC_RELATE_CANDIDATES");
        return;
    };
    let inputs = vec![PathBuf::from(tune)];
    let candidates: Vec<PathBuf> = cands.split(':').map(PathBuf::from).collect();
    for mode in [sc::Mode::Fast, sc::Mode::Best] {
        let opts = RelateOptions {
            mode,
            ..RelateOptions::default()
        };
        let t = std::time::Instant::now();
        let plan = sc::relate(&inputs, &candidates, &opts).unwrap();
        let search = t.elapsed().as_secs_f64();
        let base = plan
            .base_path(0, &inputs, &candidates)
            .map(|p| Base::open(p).unwrap());
        let opts = EncodeOptions {
            base: base.as_ref(),
            ..EncodeOptions::new(mode)
        };
        let t = std::time::Instant::now();
        let f = std::fs::File::open(&inputs[0]).unwrap();
        let r = sc::encode_file(&f, std::io::sink(), &opts).unwrap();
        let encode = t.elapsed().as_secs_f64();
        eprintln!(
            "{mode:?}: base {:?}, {} -> {} bytes ({:.2}%); search {search:.2} s, encode {encode:.2} s: {:.1}%",
            plan.base_path(0, &inputs, &candidates),
            r.original_len,
            r.archive_len,
            100.0 * r.archive_len as f64 / r.original_len as f64,
            100.0 * search / encode
        );
    }
}

/// The jobs of a run over the folder `src` into `out`, named by `found`.
fn folder_jobs(
    src: &Path,
    out: &Path,
    found: &dyn Fn(&Path) -> Option<PathBuf>,
) -> Vec<sc::folder::Job> {
    let naming = sc::folder::Naming {
        found,
        given: &|p| sc::folder::Given::Fail(format!("{} is not a folder", p.display())),
        refuse: &|_| Ok(()),
    };
    sc::folder::plan(&[src.to_path_buf()], Some(out), &naming, &mut |_| {}).unwrap()
}

/// Codes one job of a folder run against its own base: the bytes read and written.
type CodeJob = dyn Fn(&sc::folder::Job, Option<&Base>) -> sc::Result<(u64, u64)> + Sync;

/// Runs `jobs`, coding each with `code` against its own base, and logs each job's start and
/// end by its output's file name.
fn run_logged(jobs: &[sc::folder::Job], code: &CodeJob) -> Vec<String> {
    let log = std::sync::Mutex::new(Vec::new());
    let name = |j: &sc::folder::Job| j.dest.file_name().unwrap().to_string_lossy().into_owned();
    let steps = sc::folder::Steps {
        needed: &|_| 0,
        code: &|job, _, _| {
            log.lock().unwrap().push(format!("start {}", name(job)));
            let base = job.base.as_deref().map(Base::open).transpose();
            let done = base.and_then(|b| code(job, b.as_ref()));
            log.lock().unwrap().push(format!("end {}", name(job)));
            done.map_err(|e| e.to_string())
        },
        copy: &|job| Ok(std::fs::copy(&job.src, &job.dest).unwrap()),
        stopped: &|| false,
        progress: &|_| {},
    };
    for outcome in sc::folder::run(jobs, 1 << 30, &steps) {
        outcome.unwrap();
    }
    log.into_inner().unwrap()
}

#[test]
fn a_folder_run_codes_each_file_against_its_relative_and_restores_bases_first() {
    let d = dir("folder");
    let src = d.join("model");
    std::fs::create_dir_all(&src).unwrap();
    let w = base_weights(21);
    let base = write(&src, "a.safetensors", &model(&w, "m", "BF16", bf16));
    let tune = write(
        &src,
        "b.safetensors",
        &model(&stepped(&w, 22, 0.002), "m", "BF16", bf16),
    );
    let other = write(
        &src,
        "c.safetensors",
        &model(&base_weights(23), "m", "BF16", bf16),
    );
    let packed = d.join("packed");
    let mut jobs = folder_jobs(&src, &packed, &sc::folder::encoded_name);
    let found = sc::folder::relate_jobs(&mut jobs, &[], &RelateOptions::default()).unwrap();
    let base_of = |name: &str| {
        let j = jobs.iter().find(|j| j.src.ends_with(name)).unwrap();
        j.base
            .as_deref()
            .and_then(Path::file_name)
            .map(|n| n.to_owned())
    };
    // The pair is coded one against the other (the first as base); the unrelated file alone.
    assert_eq!(base_of("a.safetensors"), None);
    assert_eq!(base_of("b.safetensors"), Some("a.safetensors".into()));
    assert_eq!(base_of("c.safetensors"), None);
    assert!(found.iter().flatten().any(|r| r.saving > 0));
    run_logged(&jobs, &|job, base| {
        let opts = EncodeOptions {
            base,
            ..EncodeOptions::default()
        };
        let archive = sc::encode_to_vec(&std::fs::read(&job.src)?, &opts)?;
        std::fs::write(&job.dest, &archive)?;
        Ok((job.len, archive.len() as u64))
    });

    // Decoded with no base given: the tune's archive waits for its base's output.
    let back = d.join("back");
    let mut jobs = folder_jobs(&packed, &back, &sc::folder::original_name);
    sc::folder::restore_bases(&mut jobs).unwrap();
    let tune_job = jobs
        .iter()
        .find(|j| j.dest.ends_with("b.safetensors"))
        .unwrap();
    assert_eq!(
        tune_job.base.as_deref(),
        Some(back.join("a.safetensors").as_path())
    );
    let log = run_logged(&jobs, &|job, base| {
        let opts = DecodeOptions {
            base,
            ..DecodeOptions::default()
        };
        let bytes = sc::decode_to_vec(&std::fs::read(&job.src)?, &opts)?;
        std::fs::write(&job.dest, &bytes)?;
        Ok((job.len, bytes.len() as u64))
    });
    let at = |what: &str| log.iter().position(|l| l == what).unwrap();
    assert!(
        at("end a.safetensors") < at("start b.safetensors"),
        "{log:?}"
    );
    for p in [&base, &tune, &other] {
        let out = back.join(p.file_name().unwrap());
        assert_eq!(std::fs::read(out).unwrap(), std::fs::read(p).unwrap());
    }
}
