//! How deep an event's arguments nest, read from their text before parsing:
//! serde_json recurses and gives up at 128 levels without saying where, and an
//! application may want a lower limit with the path of the offending value.
//! The walk is iterative, so any input is safe to check, however deep.

/// The path (`[1].a.b`, counted in the packet's own array) of the first
/// array or object nested more than `max_depth` deep in `text`, or `None`.
/// Malformed text passes: the parser reports it.
pub(crate) fn too_deep(text: &[u8], max_depth: usize) -> Option<String> {
    // Text cannot nest deeper than it has brackets: counting them (a loop
    // the compiler vectorises) clears almost every packet without the walk.
    if text
        .iter()
        .filter(|&&byte| byte == b'{' || byte == b'[')
        .count()
        <= max_depth
    {
        return None;
    }
    // One frame per open container: for an object the last key read (where
    // it is in `text`: a key becomes a string only for the path), for an
    // array the index of the current item.
    enum Frame {
        Object(Option<std::ops::Range<usize>>),
        Array(usize),
    }
    let mut frames: Vec<Frame> = Vec::new();
    let path = |frames: &[Frame]| -> String {
        let mut path = String::new();
        for frame in frames {
            match frame {
                Frame::Object(Some(key)) => {
                    if !path.is_empty() {
                        path.push('.');
                    }
                    path.push_str(&String::from_utf8_lossy(&text[key.clone()]));
                }
                Frame::Object(None) => {}
                Frame::Array(index) => path.push_str(&format!("[{index}]")),
            }
        }
        path
    };
    let mut i = 0;
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
                    return Some(path(&frames));
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
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shallow_text_passes() {
        assert_eq!(too_deep(br#"["e",{"a":[1,2]}]"#, 3), None);
        assert_eq!(too_deep(b"[[[", 3), None);
    }

    #[test]
    fn names_the_first_too_deep_value() {
        assert_eq!(
            too_deep(br#"["e",{"a":{"b":[0]}}]"#, 3).as_deref(),
            Some("[1].a.b")
        );
        assert_eq!(too_deep(br#"["e",1,[[0]]]"#, 2).as_deref(), Some("[2][0]"));
        assert_eq!(
            too_deep(br#"["e",{"k\"y":{"x":1}}]"#, 2).as_deref(),
            Some(r#"[1].k\"y"#)
        );
    }

    #[test]
    fn any_depth_is_checked_without_recursion() {
        let text = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert_eq!(
            too_deep(text.as_bytes(), 64).map(|path| !path.is_empty()),
            Some(true)
        );
    }
}
