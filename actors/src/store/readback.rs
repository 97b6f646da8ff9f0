//! Reading back what an older version stored too deep.
//!
//! The door now refuses JSON nested past `contract::MAX_JSON_DEPTH`, so a
//! record this version writes always reads back. Versions before that limit
//! stored tool arguments and results nested as deep as a client liked, and
//! serde_json refuses more than 128 levels on decode: such a session could
//! not be loaded at all, so it could not be read, continued or repaired.
//!
//! A stored record that fails to decode for its depth is read again with
//! every container nested deeper than `MAX_STORED_DEPTH` replaced by a
//! marker string. The session loads, with the too-deep values visibly
//! removed; the next write of those records (an admin repair rewrites them
//! all) stores the readable form.

use serde::de::DeserializeOwned;

/// Containers nested deeper than this in a stored record are replaced when
/// the record cannot be read as it is. Well above what the door accepts
/// (64, plus the few levels a record wraps a value in) and below
/// serde_json's decode limit (128).
pub const MAX_STORED_DEPTH: usize = 100;

/// What replaces a removed container.
pub const REMOVED_MARKER: &str = "[removed: stored nested deeper than this runtime reads]";

/// Decodes `text`; when that fails because it is nested too deep, decodes it
/// with its too-deep containers replaced (`Ok((value, true))`). Other errors
/// are returned as they are, with serde_json's message.
pub fn decode_capped<T: DeserializeOwned>(text: &[u8]) -> Result<(T, bool), serde_json::Error> {
    match serde_json::from_slice(text) {
        Ok(value) => Ok((value, false)),
        Err(error) if is_depth_error(&error) => {
            let capped = cap_depth(text, MAX_STORED_DEPTH);
            serde_json::from_slice(&capped).map(|value| (value, true))
        }
        Err(error) => Err(error),
    }
}

/// The decoded value, with a warning when part of it had to be removed.
pub fn warn_if_capped<T>((value, capped): (T, bool)) -> T {
    if capped {
        log::warn!(
            "a stored record nested deeper than {MAX_STORED_DEPTH} levels was read with its deep part removed; \
             its next write (or POST /api/sessions/{{id}}/repair) stores the readable form"
        );
    }
    value
}

fn is_depth_error(error: &serde_json::Error) -> bool {
    error.to_string().contains("recursion limit exceeded")
}

/// `text` with every array/object that opens deeper than `max_depth`
/// replaced by `REMOVED_MARKER` as a JSON string. Iterative, so any depth
/// is safe; text that is not JSON comes back in a form the parser still
/// refuses.
pub fn cap_depth(text: &[u8], max_depth: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    let mut depth = 0usize;
    let mut i = 0;
    while i < text.len() {
        match text[i] {
            b'"' => {
                let end = string_end(text, i);
                out.extend_from_slice(&text[i..end]);
                i = end;
                continue;
            }
            b'{' | b'[' if depth == max_depth => {
                out.push(b'"');
                out.extend_from_slice(REMOVED_MARKER.as_bytes());
                out.push(b'"');
                i = container_end(text, i);
                continue;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
        out.push(text[i]);
        i += 1;
    }
    out
}

/// The index just past the string that opens at `start` (a `"`).
fn string_end(text: &[u8], start: usize) -> usize {
    let mut i = start + 1;
    while i < text.len() {
        match text[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    text.len()
}

/// The index just past the container that opens at `start`.
fn container_end(text: &[u8], start: usize) -> usize {
    let mut open = 0usize;
    let mut i = start;
    while i < text.len() {
        match text[i] {
            b'"' => {
                i = string_end(text, i);
                continue;
            }
            b'{' | b'[' => open += 1,
            b'}' | b']' => {
                open -= 1;
                if open == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    text.len()
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;

    fn nested(depth: usize) -> String {
        format!("{}1{}", "[".repeat(depth), "]".repeat(depth))
    }

    #[test]
    fn a_readable_record_is_decoded_as_it_is() {
        let (value, capped): (Value, bool) = decode_capped(br#"{"a":[1,{"b":"]["}]}"#).unwrap();
        assert_eq!(value, json!({"a": [1, {"b": "]["}]}));
        assert!(!capped);
    }

    #[test]
    fn a_record_too_deep_to_decode_is_read_with_its_deep_part_replaced() {
        let text = format!(r#"{{"id":"m1","content":{},"after":"x\"]"}}"#, nested(500));
        assert!(serde_json::from_str::<Value>(&text).is_err());
        let (value, capped): (Value, bool) = decode_capped(text.as_bytes()).unwrap();
        assert!(capped);
        assert_eq!(value["id"], "m1");
        assert_eq!(value["after"], "x\"]");
        let mut inner = &value["content"];
        let mut depth = 1;
        while let Some(first) = inner.get(0) {
            inner = first;
            depth += 1;
        }
        assert_eq!(inner, REMOVED_MARKER);
        assert_eq!(depth, MAX_STORED_DEPTH);
    }

    #[test]
    fn capping_leaves_shallow_text_byte_identical() {
        let text = br#"{"k":["[{\"",{"x":[[]]}],"n":-1.5e3}"#;
        assert_eq!(cap_depth(text, 5), text.to_vec());
        assert_eq!(
            cap_depth(text, 4),
            format!(r#"{{"k":["[{{\"",{{"x":["{REMOVED_MARKER}"]}}],"n":-1.5e3}}"#).into_bytes()
        );
    }

    #[test]
    fn other_errors_are_not_hidden() {
        assert!(decode_capped::<Value>(b"{\"a\":").is_err());
        let truncated = nested(300);
        assert!(decode_capped::<Value>(truncated.trim_end_matches(']').as_bytes()).is_err());
    }
}
