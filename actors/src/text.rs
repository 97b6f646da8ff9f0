//! Joining strings without collecting them first: `[&str]::join` needs a
//! slice, which is a vector allocated per call, and a reply's text (and the
//! echo model's input) is joined on every turn.

/// `texts` joined by `separator`, in one allocation.
pub fn join<'a>(texts: impl Iterator<Item = &'a str> + Clone, separator: &str) -> String {
    let mut joined = String::new();
    join_onto(&mut joined, texts, separator);
    joined
}

/// [`join`] appended to `out`, which grows at most once.
pub fn join_onto<'a>(
    out: &mut String,
    texts: impl Iterator<Item = &'a str> + Clone,
    separator: &str,
) {
    let (n_texts, n_bytes) = texts.clone().fold((0usize, 0usize), |(n, bytes), text| {
        (n + 1, bytes + text.len())
    });
    out.reserve(n_bytes + separator.len() * n_texts.saturating_sub(1));
    for (index, text) in texts.enumerate() {
        if index > 0 {
            out.push_str(separator);
        }
        out.push_str(text);
    }
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
        let mut out = String::from("Echo: ");
        join_onto(&mut out, ["a", "b"].into_iter(), "\n");
        assert_eq!(out, "Echo: a\nb");
    }
}
