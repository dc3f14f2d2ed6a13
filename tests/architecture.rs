//! The library's imports run one way (docs/ARCHITECTURE.md): this test reads `src/`, lists the
//! edges between its modules (`use crate::...`, `use super::...` and `crate::x::` paths in
//! code), and fails on a cycle other than the one the domain has (a base may itself be an
//! `.sc` archive).
//!
//! A module is a file. A folder's `mod.rs` may use its own submodules (it declares them, and a
//! registry such as `codec/mod.rs` lists them), so edges from a module to its descendants are
//! not counted; edges from a submodule up to its folder's `mod.rs` are. Test code (`tests.rs`
//! files and `#[cfg(test)]` modules) may reach anywhere and is not read.
//!
//! `cargo test -p sc --test architecture -- --nocapture` prints the edges.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The one allowed cycle: a base may be an `.sc` archive, which the archive reader opens, so
/// reading an archive with references reaches `base` and `base` reaches `archive` again.
const ALLOWED: &[&str] = &["archive", "base", "pipeline::decode", "pipeline::refs"];

/// Cycles that remain to be removed: each group below may hold a cycle until it is untied, and
/// then its line goes. Do not add lines.
const KNOWN: &[&[&str]] = &[];

/// The module path of a file under `src/` (`codec/huffman/kernel.rs` -> `codec::huffman::kernel`,
/// `codec/mod.rs` -> `codec`, `lib.rs` -> ``).
fn module_of(rel: &Path) -> String {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let file = parts.pop().unwrap();
    let stem = file.trim_end_matches(".rs");
    if stem != "mod" && stem != "lib" {
        parts.push(stem.to_string());
    }
    parts.join("::")
}

fn walk(dir: &Path, root: &Path, out: &mut Vec<(String, String)>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            walk(&path, root, out);
        } else if path.extension().is_some_and(|e| e == "rs")
            && path.file_name().is_some_and(|n| n != "tests.rs")
        {
            let rel = path.strip_prefix(root).unwrap();
            let text = std::fs::read_to_string(&path).unwrap();
            out.push((module_of(rel), code_of(&text)));
        }
    }
}

/// The code of a file: comments, string literals and `#[cfg(test)]` modules removed.
fn code_of(text: &str) -> String {
    let mut code = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let t = line.trim_start();
        if t.starts_with("#[cfg(test)]") {
            let next = lines.peek().map_or("", |l| l.trim_start());
            let is_mod = next.starts_with("mod ") || next.starts_with("pub(super) mod ");
            if is_mod && next.ends_with('{') {
                // Skip the module: up to the line where its braces close.
                let mut depth = 0i32;
                for l in lines.by_ref() {
                    depth += l.matches('{').count() as i32 - l.matches('}').count() as i32;
                    if depth <= 0 && l.contains('}') {
                        break;
                    }
                }
            }
            continue;
        }
        let mut out = String::new();
        let mut in_str = false;
        let mut chars = line.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\\' if in_str => {
                    chars.next();
                }
                '"' => in_str = !in_str,
                '/' if !in_str && chars.peek() == Some(&'/') => break,
                _ if !in_str => out.push(c),
                _ => {}
            }
        }
        code.push_str(&out);
        code.push('\n');
    }
    code
}

/// The full paths a `use` tree names, from its text after `use` (`crate::a::{b, c::d}`).
fn expand(tree: &str) -> Vec<String> {
    let tree: String = tree
        .replace(" as ", "@")
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    let Some(open) = tree.find('{') else {
        return vec![tree.split('@').next().unwrap().to_string()];
    };
    let prefix = &tree[..open];
    let inner = &tree[open + 1..tree.len() - 1];
    // Split the braces' content at top-level commas.
    let (mut depth, mut start, mut items) = (0, 0, Vec::new());
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&inner[start..]);
    items
        .into_iter()
        .filter(|s| !s.is_empty())
        .flat_map(|item| expand(&format!("{prefix}{item}")))
        .map(|p| p.trim_end_matches("::self").to_string())
        .collect()
}

/// Every path the code names from `crate`, `super` or `self`: its `use` trees expanded, and the
/// paths written in its other code.
fn paths_of(code: &str) -> Vec<String> {
    let mut paths = Vec::new();
    let mut rest = String::new();
    let mut text = code;
    while let Some(at) = find_use(text) {
        rest.push_str(&text[..at]);
        let end = at + text[at..].find(';').unwrap();
        let tree = text[at..end].trim_start_matches("use").trim();
        paths.extend(expand(tree));
        text = &text[end + 1..];
    }
    rest.push_str(text);
    let bytes = rest.as_bytes();
    for head in ["crate::", "super::"] {
        let mut from = 0;
        while let Some(i) = rest[from..].find(head) {
            let at = from + i;
            from = at + head.len();
            let boundary =
                at == 0 || !(bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_');
            if !boundary || (at >= 2 && &rest[at - 2..at] == "::") {
                continue;
            }
            let end = rest[at..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
                .map_or(rest.len(), |e| at + e);
            paths.push(rest[at..end].trim_end_matches(':').to_string());
        }
    }
    paths
}

/// Where the next `use` statement starts in `text`.
fn find_use(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut from = 0;
    while let Some(i) = text[from..].find("use ") {
        let at = from + i;
        from = at + 4;
        let before = if at == 0 { b' ' } else { bytes[at - 1] };
        if before.is_ascii_whitespace() || before == b')' {
            return Some(at);
        }
    }
    None
}

/// The module a path from `module` reaches: `crate::`, `super::` and `self::` resolved, then
/// its longest prefix that is a module. `None` for paths outside the crate.
fn target(module: &str, path: &str, modules: &BTreeSet<String>) -> Option<String> {
    let mut segs: Vec<&str> = path.split("::").collect();
    let mut base: Vec<&str> = match segs.first() {
        Some(&"crate") => {
            segs.remove(0);
            Vec::new()
        }
        Some(&"super") | Some(&"self") => {
            // A file's `self` is its module, `super` its parent.
            let mut b: Vec<&str> = module.split("::").filter(|s| !s.is_empty()).collect();
            while let Some(&s) = segs.first() {
                match s {
                    "super" => {
                        b.pop();
                    }
                    "self" => {}
                    _ => break,
                }
                segs.remove(0);
            }
            b
        }
        _ => return None,
    };
    let mut best = base.join("::");
    for s in segs {
        base.push(s);
        let m = base.join("::");
        if modules.contains(&m) {
            best = m;
        } else {
            break;
        }
    }
    Some(best)
}

/// The edges between the library's modules, from each module to those it uses.
fn edges() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    walk(&src, &src, &mut files);
    let modules: BTreeSet<String> = files.iter().map(|(m, _)| m.clone()).collect();
    // The crate root's re-exports (`pub use pipeline::decode::{decode, ...}`): the module of
    // each name they make public.
    let mut reexports: BTreeMap<String, String> = BTreeMap::new();
    for (module, code) in &files {
        if module.is_empty() {
            for path in paths_of(code) {
                if let Some(to) = target("", &format!("crate::{path}"), &modules) {
                    let name = path.rsplit("::").next().unwrap().to_string();
                    reexports.insert(name, to);
                }
            }
        }
    }
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, code) in &files {
        let out = graph.entry(module.clone()).or_default();
        for path in paths_of(code) {
            let Some(mut to) = target(module, &path, &modules) else {
                continue;
            };
            if let (true, Some(name)) = (to.is_empty(), path.strip_prefix("crate::")) {
                let name = name.split("::").next().unwrap();
                to = reexports.get(name).cloned().unwrap_or_default();
            }
            // A module's own descendants (and itself) are not edges; nor is the crate root,
            // whose items are the public API's re-exports and the test helpers.
            let inside =
                to == *module || to.starts_with(&format!("{module}::")) || module.is_empty();
            if !inside && !to.is_empty() {
                out.insert(to);
            }
        }
    }
    graph
}

/// The strongly connected components of more than one module.
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<BTreeSet<String>> {
    let reach = |from: &String| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.clone()];
        while let Some(m) = stack.pop() {
            for n in graph.get(&m).into_iter().flatten() {
                if seen.insert(n.clone()) {
                    stack.push(n.clone());
                }
            }
        }
        seen
    };
    let reached: BTreeMap<&String, BTreeSet<String>> =
        graph.keys().map(|m| (m, reach(m))).collect();
    let mut groups: Vec<BTreeSet<String>> = Vec::new();
    for (m, r) in &reached {
        if !r.contains(*m) || groups.iter().any(|g| g.contains(*m)) {
            continue;
        }
        let group: BTreeSet<String> = r
            .iter()
            .filter(|n| reached.get(n).is_some_and(|back| back.contains(*m)))
            .cloned()
            .collect();
        groups.push(group);
    }
    groups
}

#[test]
fn imports_run_one_way_but_for_the_base_recursion() {
    let graph = edges();
    for (m, to) in &graph {
        let to: Vec<&str> = to.iter().map(String::as_str).collect();
        println!(
            "{} -> {}",
            if m.is_empty() { "lib" } else { m },
            to.join(", ")
        );
    }
    assert!(graph.len() > 40, "src/ not read: {} modules", graph.len());
    let allowed: Vec<BTreeSet<String>> = std::iter::once(ALLOWED)
        .chain(KNOWN.iter().copied())
        .map(|g| g.iter().map(|s| s.to_string()).collect())
        .collect();
    for cycle in cycles(&graph) {
        assert!(
            allowed.iter().any(|a| cycle.is_subset(a)),
            "import cycle among {cycle:?}: move the tie to the lower module (docs/ARCHITECTURE.md)"
        );
    }
}

#[test]
fn the_checker_reads_uses_and_finds_cycles() {
    let code = code_of(
        "use crate::a::{b::{C, d}, e as f};\nuse super::g;\nfn x() { crate::h::i(); } // crate::j\n\
         #[cfg(test)]\nmod tests {\n    use crate::k;\n}\n",
    );
    let paths = paths_of(&code);
    assert_eq!(
        paths,
        [
            "crate::a::b::C",
            "crate::a::b::d",
            "crate::a::e",
            "super::g",
            "crate::h::i"
        ]
    );
    let modules: BTreeSet<String> = ["a", "a::b", "p", "p::q"].map(String::from).into();
    assert_eq!(target("p::q", "super::x", &modules).as_deref(), Some("p"));
    assert_eq!(
        target("p::q", "crate::a::b::C", &modules).as_deref(),
        Some("a::b")
    );
    let g = |e: &[(&str, &str)]| {
        let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (a, b) in e {
            g.entry(a.to_string()).or_default().insert(b.to_string());
            g.entry(b.to_string()).or_default();
        }
        g
    };
    assert!(cycles(&g(&[("a", "b"), ("b", "c")])).is_empty());
    let found = cycles(&g(&[("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")]));
    assert_eq!(found, [["a", "b", "c"].map(String::from).into()]);
}
