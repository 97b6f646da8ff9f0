//! Screenshot stripping: host results may carry `data:image/...` URIs; they
//! are removed before a result is stored or shown to the model, and the last one
//! is kept (in memory only) for `look_at_screen`. Pure functions.

use serde_json::Value;

/// What stands in a host result for a screenshot removed from it.
const SCREENSHOT_PLACEHOLDER: &str = "[screenshot removed; call look_at_screen to see it]";

/// Removes `data:image/...` URIs anywhere in a host result (a whole string or
/// inside one), returning the cleaned value and the last screenshot found
/// (offered to `look_at_screen`).
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
pub(super) fn strip_data_uris(text: &str, found: &mut Option<String>) -> String {
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
