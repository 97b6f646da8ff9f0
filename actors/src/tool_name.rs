//! The one rule for a tool's name, wherever a name comes from: a host
//! action in `host_context`, a host's typed tool in the embedding API, or
//! an MCP server's tool (prefixed by the server's name). It is what OpenAI
//! and Anthropic accept as a function name: `^[A-Za-z0-9_-]{1,64}$`.

/// The longest name, in characters (all ASCII, so also bytes).
pub const MAX_CHARS: usize = 64;

/// The rule in words, for error messages.
pub const RULE: &str = "1 to 64 of A-Z, a-z, 0-9, _ and -";

/// Whether `name` follows the rule: 1 to [`MAX_CHARS`] of ASCII letters,
/// digits, `_` and `-`.
pub fn is_valid(name: &str) -> bool {
    (1..=MAX_CHARS).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_one_to_64_letters_digits_underscores_and_dashes() {
        assert!(is_valid("select_issue-2"));
        assert!(is_valid(&"a".repeat(MAX_CHARS)));
        assert!(!is_valid(&"a".repeat(MAX_CHARS + 1)));
        assert!(!is_valid(""));
        assert!(!is_valid("has space"));
        assert!(!is_valid("dot.name"));
        assert!(!is_valid("é"));
    }
}
