//! Joining strings without collecting them first: `[&str]::join` needs a
//! slice, which is a vector allocated per call, and a reply's text (and the
//! echo model's input) is joined on every turn.

/// `texts` joined by `separator`, in one allocation.
pub fn join<'a>(texts: impl Iterator<Item = &'a str> + Clone, separator: &str) -> String {
    let (n_texts, n_bytes) = texts.clone().fold((0usize, 0usize), |(n, bytes), text| {
        (n + 1, bytes + text.len())
    });
    let mut joined = String::with_capacity(n_bytes + separator.len() * n_texts.saturating_sub(1));
    for (index, text) in texts.enumerate() {
        if index > 0 {
            joined.push_str(separator);
        }
        joined.push_str(text);
    }
    joined
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joins_as_the_slice_join_does() {
        for texts in [
            vec![],
            vec![""],
            vec!["a"],
            vec!["a", "", "bc"],
            vec!["x", "y"],
        ] {
            assert_eq!(join(texts.iter().copied(), ", "), texts.join(", "));
        }
    }
}
