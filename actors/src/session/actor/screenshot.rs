//! Screenshot stripping: host results may carry `data:image/...` URIs; they
//! are removed before a result is stored or shown to the model, and the last one
//! is kept (in memory only) for `look_at_screen`. Pure functions.

use serde_json::Value;

/// What stands in a host result for a screenshot removed from it.
const SCREENSHOT_PLACEHOLDER: &str = "[screenshot removed; call look_at_screen to see it]";

/// Removes `data:image/...` URIs anywhere in a host result; `found`: the last.
pub(super) fn strip_screenshots(value: &Value, found: &mut Option<String>) -> Value {
    match value {
        Value::String(text) if text.contains("data:image/") => {
            Value::String(strip_data_uris(text, found))
        }
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|item| strip_screenshots(item, found))
                .collect(),
        ),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(key, item)| (key.clone(), strip_screenshots(item, found)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Replaces each image data URI inside `text`; a URI ends at whitespace, a
/// quote, a bracket or the end of the text (base64 has none of them).
fn strip_data_uris(text: &str, found: &mut Option<String>) -> String {
    let mut kept = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("data:image/") {
        kept.push_str(&rest[..start]);
        let from_uri = &rest[start..];
        let end = from_uri
            .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '(' | ')' | '<' | '>'))
            .unwrap_or(from_uri.len());
        *found = Some(from_uri[..end].to_string());
        kept.push_str(SCREENSHOT_PLACEHOLDER);
        rest = &from_uri[end..];
    }
    kept.push_str(rest);
    kept
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_whole_string_data_uri_is_replaced_and_kept() {
        let mut found = None;
        let cleaned = strip_screenshots(
            &json!({"shot": "data:image/png;base64,AAAA", "n": 1}),
            &mut found,
        );
        assert_eq!(cleaned, json!({"shot": SCREENSHOT_PLACEHOLDER, "n": 1}));
        assert_eq!(found.as_deref(), Some("data:image/png;base64,AAAA"));
    }

    #[test]
    fn a_uri_inside_text_ends_at_a_quote_space_or_bracket_and_the_last_is_kept() {
        let mut found = None;
        let cleaned = strip_data_uris(
            "see data:image/png;base64,AB and (data:image/jpeg;base64,CD) end",
            &mut found,
        );
        assert_eq!(
            cleaned,
            format!("see {SCREENSHOT_PLACEHOLDER} and ({SCREENSHOT_PLACEHOLDER}) end")
        );
        assert_eq!(found.as_deref(), Some("data:image/jpeg;base64,CD"));
    }

    #[test]
    fn values_without_images_are_unchanged_at_any_depth() {
        let value = json!([{"a": ["text", 2, null]}, "data:text/plain,hi"]);
        let mut found = None;
        assert_eq!(strip_screenshots(&value, &mut found), value);
        assert_eq!(found, None);
    }
}
