//! The one nesting-depth limit for every JSON the runtime accepts: bodies,
//! socket payloads, AG-UI input, tool results and the model's tool-call
//! arguments. Everything accepted is stored, and the store must read it back
//! (serde_json refuses more than 128 levels on decode, and stored records
//! wrap a value in a few levels of their own), so the door refuses deeper
//! input with the path of the first too-deep value.
//!
//! Both checks are iterative: they never recurse, so any input is safe to
//! check, however deep.

use serde_json::Value;

use super::error::ValidationError;

/// Most arrays/objects nested inside each other in one accepted JSON value
/// (`{}` is 1, `{"a": []}` is 2).
pub const MAX_JSON_DEPTH: usize = 64;

fn too_deep(path: String) -> ValidationError {
    let path = if path.is_empty() {
        super::body::BODY_PATH.to_string()
    } else {
        path
    };
    ValidationError::new(
        path,
        format!("nested more than {MAX_JSON_DEPTH} arrays/objects deep; that is the limit"),
    )
}

fn join(base: &str, steps: &[String]) -> String {
    let mut path = base.to_string();
    for step in steps {
        if step.starts_with('[') || path.is_empty() {
            path.push_str(step);
        } else {
            path.push('.');
            path.push_str(step);
        }
    }
    path
}

/// Checks a parsed value; `base` is its own path (`""` for a body).
pub fn check_value(value: &Value, base: &str) -> Result<(), ValidationError> {
    // The common case costs one pass without allocating paths.
    if depth_of(value) <= MAX_JSON_DEPTH {
        return Ok(());
    }
    // (value, depth of the containers around it, its path steps)
    let mut stack: Vec<(&Value, usize, Vec<String>)> = vec![(value, 0, Vec::new())];
    while let Some((value, depth, steps)) = stack.pop() {
        let children: Vec<(String, &Value)> = match value {
            Value::Array(items) => items
                .iter()
                .enumerate()
                .map(|(i, item)| (format!("[{i}]"), item))
                .collect(),
            Value::Object(object) => object
                .iter()
                .map(|(key, item)| (key.clone(), item))
                .collect(),
            _ => continue,
        };
        if depth + 1 > MAX_JSON_DEPTH {
            return Err(too_deep(join(base, &steps)));
        }
        for (step, child) in children {
            if child.is_array() || child.is_object() {
                let mut child_steps = steps.clone();
                child_steps.push(step);
                stack.push((child, depth + 1, child_steps));
            }
        }
    }
    Ok(())
}

/// Checks JSON text before it is parsed (parsing itself recurses, and
/// serde_json gives up at 128 levels without saying where). Malformed text
/// passes: the parser reports it.
pub fn check_text(text: &[u8], base: &str) -> Result<(), ValidationError> {
    check_text_within(text, base, MAX_JSON_DEPTH)
}

/// `check_text` for a value wrapped in `wrappers` containers of a transport's
/// own (a Socket.IO event's argument array): they do not count.
pub fn check_text_within(text: &[u8], base: &str, max_depth: usize) -> Result<(), ValidationError> {
    // Text cannot nest deeper than it has brackets: counting them (a loop
    // the compiler vectorises) clears almost every body without the walk.
    if text
        .iter()
        .filter(|&&byte| byte == b'{' || byte == b'[')
        .count()
        <= max_depth
    {
        return Ok(());
    }
    // One frame per open container: the step that leads into it, and for an
    // object the last key read (where it is in `text`: a key becomes a
    // string only for the error), for an array the index of the current item.
    enum Frame {
        Object(Option<std::ops::Range<usize>>),
        Array(usize),
    }
    let mut frames: Vec<Frame> = Vec::new();
    let mut i = 0;
    let steps = |frames: &[Frame]| -> Vec<String> {
        frames
            .iter()
            .filter_map(|frame| match frame {
                Frame::Object(Some(key)) => {
                    Some(String::from_utf8_lossy(&text[key.clone()]).into_owned())
                }
                Frame::Object(None) => None,
                Frame::Array(index) => Some(format!("[{index}]")),
            })
            .collect()
    };
    while i < text.len() {
        match text[i] {
            b'"' => {
                let start = i + 1;
                i += 1;
                while i < text.len() && text[i] != b'"' {
                    i += if text[i] == b'\\' { 2 } else { 1 };
                }
                let end = i.min(text.len());
                // A string directly followed by ':' is a key.
                let mut j = i + 1;
                while j < text.len() && text[j].is_ascii_whitespace() {
                    j += 1;
                }
                if j < text.len() && text[j] == b':' {
                    if let Some(Frame::Object(key)) = frames.last_mut() {
                        *key = Some(start..end);
                    }
                }
            }
            open @ (b'{' | b'[') => {
                if frames.len() + 1 > max_depth {
                    return Err(too_deep(join(base, &steps(&frames))));
                }
                frames.push(if open == b'{' {
                    Frame::Object(None)
                } else {
                    Frame::Array(0)
                });
            }
            b'}' | b']' => {
                frames.pop();
            }
            b',' => {
                if let Some(Frame::Array(index)) = frames.last_mut() {
                    *index += 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    Ok(())
}

/// The nesting depth of `value` (iterative).
pub fn depth_of(value: &Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(value, 0usize)];
    let nested = |child: &&Value| child.is_array() || child.is_object();
    while let Some((value, depth)) = stack.pop() {
        match value {
            Value::Array(items) => {
                deepest = deepest.max(depth + 1);
                stack.extend(items.iter().filter(nested).map(|child| (child, depth + 1)));
            }
            Value::Object(object) => {
                deepest = deepest.max(depth + 1);
                stack.extend(
                    object
                        .values()
                        .filter(nested)
                        .map(|child| (child, depth + 1)),
                );
            }
            _ => {}
        }
    }
    deepest
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// `[[…[leaf]…]]` with `depth` arrays, built without recursion.
    pub(crate) fn nested_text(depth: usize, leaf: &str) -> String {
        format!("{}{leaf}{}", "[".repeat(depth), "]".repeat(depth))
    }

    #[test]
    fn the_limit_itself_is_accepted_and_one_more_is_refused_with_its_path() {
        let text = nested_text(MAX_JSON_DEPTH, "1");
        assert!(check_text(text.as_bytes(), "").is_ok());
        let value: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(depth_of(&value), MAX_JSON_DEPTH);
        assert!(check_value(&value, "").is_ok());

        let text = format!(
            "{{\"tool_result\": {{\"a\": {}}}}}",
            nested_text(MAX_JSON_DEPTH - 1, "1")
        );
        let error = check_text(text.as_bytes(), "").unwrap_err();
        let expected = format!("tool_result.a{}", "[0]".repeat(MAX_JSON_DEPTH - 2));
        assert_eq!(error.path, expected);
        let value: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(check_value(&value, "").unwrap_err().path, expected);
    }

    #[test]
    fn a_million_levels_are_refused_without_recursion() {
        let text = nested_text(1_000_000, "");
        assert!(check_text(text.as_bytes(), "").is_err());
    }

    #[test]
    fn brackets_inside_strings_do_not_count() {
        let text = json!({"s": "[[[[[[".repeat(100), "k\"[": 1}).to_string();
        assert!(check_text(text.as_bytes(), "").is_ok());
    }
}

#[cfg(test)]
mod properties {
    use proptest::prelude::*;

    use super::*;

    /// Random bracket soup with strings, commas and colons: the text check
    /// never panics, and on valid JSON it agrees with the value check.
    fn json_ish() -> impl Strategy<Value = String> {
        prop::collection::vec(
            prop_oneof![
                Just("[".to_string()),
                Just("]".to_string()),
                Just("{".to_string()),
                Just("}".to_string()),
                Just(",".to_string()),
                Just(":".to_string()),
                Just("\"k\"".to_string()),
                Just("\"\\\"[\"".to_string()),
                Just("1".to_string()),
            ],
            0..400,
        )
        .prop_map(|parts| parts.concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn text_and_value_checks_agree(text in json_ish()) {
            let by_text = check_text(text.as_bytes(), "").is_ok();
            if let Ok(value) = serde_json::from_str::<Value>(&text) {
                prop_assert_eq!(by_text, check_value(&value, "").is_ok());
                prop_assert_eq!(by_text, depth_of(&value) <= MAX_JSON_DEPTH);
            }
        }

        #[test]
        fn nesting_of_any_depth_is_measured(depth in 0usize..2_000) {
            let text = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
            prop_assert_eq!(check_text(text.as_bytes(), "").is_ok(), depth <= MAX_JSON_DEPTH);
        }
    }
}
