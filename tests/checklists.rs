//! The checklists of docs/ARCHITECTURE.md ("Adding a codec", "Adding a ggml type"), checked
//! against the code where a test can: every codec is reached by the entropy fuzz target and by
//! `tests/coders.rs`, and the tables keyed by a ggml type's name agree.

use sc::codec::{Codec, Decode};
use sc::gguf::types::TYPES;
use sc::transform::{ggml, Transform};
use std::path::Path;

/// A file of the workspace, as text.
fn read(rel: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)).unwrap()
}

/// Each codec and the module under `src/codec/` that holds it, from the arms of
/// `Codec::spec` in the registry (`Codec::Huffman => &huffman::SPEC,`).
fn codec_modules() -> Vec<(Codec, String)> {
    let registry = read("src/codec/mod.rs");
    let modules: Vec<(String, String)> = registry
        .lines()
        .filter_map(|l| {
            let (variant, spec) = l.trim().strip_prefix("Codec::")?.split_once(" => &")?;
            let module = spec.split("::").next()?;
            Some((variant.to_string(), module.to_string()))
        })
        .collect();
    Codec::ALL
        .iter()
        .map(|&c| {
            let name = format!("{c:?}");
            let module = modules.iter().find(|(v, _)| *v == name);
            let module = module.unwrap_or_else(|| panic!("no arm for {name} in Codec::spec"));
            (c, module.1.clone())
        })
        .collect()
}

/// The text of the function `name` in `code`: from its signature to the first line that
/// closes a top-level item.
fn function<'a>(code: &'a str, name: &str) -> &'a str {
    let at = code
        .find(&format!("pub fn {name}("))
        .unwrap_or_else(|| panic!("no `pub fn {name}`"));
    let end = code[at..].find("\n}\n").map_or(code.len(), |e| at + e);
    &code[at..end]
}

/// Codecs whose decoder the entropy fuzz target does not call, and why: nothing in them is
/// modelled, and the container target reaches them in every archive it mutates.
const NOT_FUZZED: &[(&str, &str)] = &[
    ("stored", "its decoder copies the payload"),
    (
        "constant",
        "its decoder fills the plane with the payload's one byte",
    ),
];

/// Whether `code` names a path into `module` (`huffman::decode`, not `ctxhuffman::x`).
fn names_module(code: &str, module: &str) -> bool {
    let path = format!("{module}::");
    code.match_indices(&path).any(|(at, _)| {
        let before = code[..at].chars().next_back();
        !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// The codecs (`name (module)`) whose module `code` does not name, leaving out those in
/// [`NOT_FUZZED`] and those `skip` says.
fn codecs_missing_from(code: &str, skip: impl Fn(Codec) -> bool) -> Vec<String> {
    codec_modules()
        .into_iter()
        .filter(|(codec, module)| {
            let exempt = NOT_FUZZED.iter().any(|(m, _)| m == module);
            !exempt && !skip(*codec) && !names_module(code, module)
        })
        .map(|(codec, module)| format!("{} ({module})", codec.name()))
        .collect()
}

#[test]
fn every_codec_has_an_arm_in_the_entropy_fuzz_target() {
    let fuzz = read("src/fuzz.rs");
    // A partner is decoded by the codec of its plane 0, in that codec's arm.
    let partner = |c: Codec| matches!(c.spec().decode, Decode::Partner);
    let missing = codecs_missing_from(function(&fuzz, "entropy"), partner);
    assert!(
        missing.is_empty(),
        "codecs without an arm in sc::fuzz::entropy (src/fuzz.rs): {missing:?}"
    );
}

#[test]
fn every_codec_is_in_tests_coders() {
    let missing = codecs_missing_from(&read("tests/coders.rs"), |_| false);
    assert!(
        missing.is_empty(),
        "codecs tests/coders.rs does not test: {missing:?}"
    );
}

/// `gguf::types::TYPES` and `transform::ggml::LAYOUTS` are keyed by ggml's type names; the
/// transforms are numbered by their place in `LAYOUTS`: all three agree.
#[test]
fn the_ggml_type_tables_agree() {
    for (k, layout) in ggml::LAYOUTS.iter().enumerate() {
        let ty = layout.ggml();
        let id = ggml::FIRST_ID + k as u8;
        let t = Transform::from_id(id).unwrap_or_else(|| panic!("no transform {id}"));
        assert_eq!(t.name(), ty.name.to_ascii_lowercase(), "transform {id}");
        assert_eq!(Transform::for_ggml(ty.name), t, "{}", ty.name);
        let own = t.ggml().expect("a ggml transform has a layout");
        assert_eq!(own.ggml().name, ty.name, "transform {}'s layout", t.name());
        assert_eq!(
            own.planes.len(),
            t.planes(),
            "transform {}'s planes",
            t.name()
        );
        let found = TYPES.iter().filter(|x| x.name == ty.name).count();
        assert_eq!(found, 1, "{} in gguf::types::TYPES", ty.name);
    }
    // A transform named like a ggml type is that type's layout.
    for t in Transform::ALL {
        let named = TYPES.iter().find(|x| x.name.eq_ignore_ascii_case(t.name()));
        if let Some(ty) = named {
            assert_eq!(
                t.ggml().map(|l| l.ggml().name),
                Some(ty.name),
                "{}",
                t.name()
            );
        }
    }
    // Every quantized type whose block fields are described has a layout.
    for ty in TYPES
        .iter()
        .filter(|t| t.block_values > 1 && !t.fields.is_empty())
    {
        assert_ne!(
            Transform::for_ggml(ty.name),
            Transform::Bytes,
            "{}",
            ty.name
        );
    }
}

#[test]
fn the_checks_find_what_is_missing() {
    // A fuzz body without the huffman arm misses it; the registry's arms are all read.
    let body = "pub fn entropy(data: &[u8]) {\n    range::decode(a, ctxjoint::X)\n}\n";
    let body = function(body, "entropy");
    assert!(names_module(body, "range") && names_module(body, "ctxjoint"));
    assert!(!names_module(body, "joint") && !names_module(body, "huffman"));
    let missing = codecs_missing_from(body, |_| false);
    assert!(
        missing.contains(&"huffman (huffman)".to_string()),
        "{missing:?}"
    );
    assert!(
        !missing.iter().any(|m| m.starts_with("range ")),
        "{missing:?}"
    );
    let modules = codec_modules();
    assert_eq!(modules.len(), Codec::ALL.len());
    assert!(modules
        .iter()
        .any(|(c, m)| *c == Codec::CtxSigns && m == "ctxjoint"));
}

/// README.md stays a page a new user reads through: at most 220 lines.
#[test]
fn readme_is_at_most_220_lines() {
    let lines = read("README.md").lines().count();
    assert!(
        lines <= 220,
        "README.md is {lines} lines: keep it to 220 (details go in docs/)"
    );
}
