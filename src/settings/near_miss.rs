//! Settings that look like a misspelt or borrowed name of a known one:
//! `SERVER_PORT`, `SEVRER__PORT`, or `OPENAI_API_BASE` (what other tools
//! call `OPENAI_BASE_URL`). Such a variable is otherwise ignored without a
//! word, and with `OPENAI_API_KEY` set the key then goes to the public
//! endpoint. Pure: the caller warns, or with `LLM__REQUIRE_USABLE=true`
//! refuses to start.

use std::collections::BTreeMap;

/// Names other tools use for one of ours.
const ALIASES: &[(&str, &str)] = &[
    ("OPENAI_API_BASE", "OPENAI_BASE_URL"),
    ("OPENAI_BASE", "OPENAI_BASE_URL"),
    ("OPENAI_API_BASE_URL", "OPENAI_BASE_URL"),
    ("ANTHROPIC_API_URL", "ANTHROPIC_BASE_URL"),
    ("ANTHROPIC_API_BASE", "ANTHROPIC_BASE_URL"),
];

/// Families of names declared by pattern (`LLM__PROVIDERS__<NAME>__KIND`):
/// never a near miss of anything.
const KNOWN_PREFIXES: &[&str] = &["LLM__PROVIDERS__"];

/// A variable that is probably `meant`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NearMiss {
    pub key: String,
    pub meant: &'static str,
}

impl NearMiss {
    pub fn sentence(&self) -> String {
        format!(
            "{} is not a setting; did you mean {}? (it is ignored)",
            self.key, self.meant
        )
    }
}

/// The variables of `values` that are not settings but look like one of
/// `known`, in key order.
pub fn near_misses(values: &BTreeMap<String, String>, known: &[&'static str]) -> Vec<NearMiss> {
    values
        .keys()
        .filter(|key| !known.contains(&key.as_str()))
        .filter(|key| !KNOWN_PREFIXES.iter().any(|prefix| key.starts_with(prefix)))
        .filter_map(|key| {
            meant(key, known).map(|meant| NearMiss {
                key: key.clone(),
                meant,
            })
        })
        .collect()
}

/// The known name `key` is closest to, when it is close enough: an alias,
/// or within a small edit distance (one edit for short names, two from 8
/// characters on; a swap of two neighbours is one edit).
pub fn meant(key: &str, known: &[&'static str]) -> Option<&'static str> {
    if let Some((_, meant)) = ALIASES.iter().find(|(alias, _)| *alias == key) {
        return Some(meant);
    }
    let allowed = if key.len() >= 8 { 2 } else { 1 };
    known
        .iter()
        .map(|candidate| (edit_distance(key, candidate), *candidate))
        .filter(|(distance, _)| *distance <= allowed)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, candidate)| candidate)
}

/// Optimal string alignment distance: insertions, deletions, substitutions
/// and swaps of adjacent characters each cost one. Names are ASCII.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let width = b.len() + 1;
    let mut rows = vec![0usize; (a.len() + 1) * width];
    let at = |i: usize, j: usize| i * width + j;
    for i in 0..=a.len() {
        rows[at(i, 0)] = i;
    }
    for j in 0..=b.len() {
        rows[at(0, j)] = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (rows[at(i - 1, j)] + 1)
                .min(rows[at(i, j - 1)] + 1)
                .min(rows[at(i - 1, j - 1)] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(rows[at(i - 2, j - 2)] + 1);
            }
            rows[at(i, j)] = best;
        }
    }
    rows[at(a.len(), b.len())]
}

#[cfg(test)]
mod tests {
    use super::*;

    const KNOWN: &[&str] = &[
        "SERVER__PORT",
        "SERVER__HOST",
        "OPENAI_BASE_URL",
        "LLM__PRIMARY_MODEL",
    ];

    #[test]
    fn misspellings_and_aliases_name_the_setting_meant() {
        for (key, expected) in [
            ("SERVER_PORT", Some("SERVER__PORT")),
            ("SEVRER__PORT", Some("SERVER__PORT")),
            ("SERVER__PROT", Some("SERVER__PORT")),
            ("OPENAI_API_BASE", Some("OPENAI_BASE_URL")),
            ("OPENAI_BASE", Some("OPENAI_BASE_URL")),
            ("ANTHROPIC_API_URL", Some("ANTHROPIC_BASE_URL")),
            ("LLM_PRIMARY_MODEL", Some("LLM__PRIMARY_MODEL")),
            ("PATH", None),
            ("HOSTNAME", None),
            ("SERVER", None),
        ] {
            assert_eq!(meant(key, KNOWN), expected, "{key}");
        }
    }

    #[test]
    fn known_names_and_the_provider_family_are_not_near_misses() {
        let values: BTreeMap<String, String> = [
            "SERVER__PORT",
            "LLM__PROVIDERS__LOCAL__BASE_URL",
            "SERVER_PORT",
        ]
        .iter()
        .map(|key| (key.to_string(), "1".to_string()))
        .collect();
        assert_eq!(
            near_misses(&values, KNOWN),
            [NearMiss {
                key: "SERVER_PORT".into(),
                meant: "SERVER__PORT"
            }]
        );
    }
}
