//! The tensor names closest to one asked for that an archive lacks: one rule for every
//! message that suggests names (the command line's and the Python package's).

/// The names in `names` closest to `wanted`, best first, at most three: a name that contains
/// `wanted` or is contained in it, then names within an edit distance (in characters) of half
/// `wanted`'s length (at least 2); ties in name order.
pub fn closest_names<'a>(wanted: &str, names: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let limit = wanted.chars().count().max(4) / 2;
    let mut scored: Vec<(usize, &str)> = names
        .into_iter()
        .map(|n| {
            let d = if n.contains(wanted) || wanted.contains(n) {
                0
            } else {
                edit_distance(wanted, n)
            };
            (d, n)
        })
        .filter(|&(d, _)| d <= limit)
        .collect();
    scored.sort();
    scored.dedup();
    scored.into_iter().take(3).map(|(_, n)| n).collect()
}

/// Levenshtein distance between `a` and `b`, in characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diag = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let next = (diag + usize::from(ca != cb))
                .min(row[j] + 1)
                .min(row[j + 1] + 1);
            diag = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closest_first_and_at_most_three() {
        let names = [
            "layers.0.mlp.weight",
            "layers.1.mlp.weight",
            "layers.10.mlp.weight",
            "layers.2.attn.weight",
            "lm_head.weight",
        ];
        // One substitution away from two names; the third is one insertion away.
        assert_eq!(
            closest_names("layers.3.mlp.weight", names),
            [
                "layers.0.mlp.weight",
                "layers.1.mlp.weight",
                "layers.10.mlp.weight"
            ]
        );
        // A part of a name is as close as can be.
        assert_eq!(closest_names("lm_head", names), ["lm_head.weight"]);
        // Nothing near: no suggestion.
        assert!(closest_names("embed_tokens", names).is_empty());
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "ab"), 2);
    }
}
