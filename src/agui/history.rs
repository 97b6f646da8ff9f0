//! A thread's stored conversation as AG-UI messages, for `MESSAGES_SNAPSHOT`.
//! A run whose input holds nothing new (no user message and no tool result
//! after the last assistant message, e.g. a reloaded page's empty list) is
//! answered with the snapshot instead of a turn, so the client gets its
//! history back from the server's tree.
//!
//! The ids are those the live stream used: an assistant message's text before
//! any tool result takes the message id, text after tool results
//! `<message id>:<segment index>`, a tool result `<call id>:result`. A client
//! that kept the streamed messages therefore sees them replaced, not doubled.

use actors::conversation::{Message, Role, Segment};
use serde_json::{json, Value};

/// The AG-UI messages of a stored root-to-leaf path, in order.
pub fn snapshot_messages(path: &[Message]) -> Vec<Value> {
    let mut out = Vec::with_capacity(path.len());
    for message in path {
        match message.role {
            Role::User => {
                out.push(json!({"id": message.id, "role": "user", "content": message.content}))
            }
            Role::Assistant => assistant_messages(message, &mut out),
            // The runtime's summary of older turns, for the model only.
            Role::Summary => {}
        }
    }
    out
}

/// One stored assistant message: an AG-UI assistant message per run of text
/// and calls, each followed by the tool messages of its calls' results.
fn assistant_messages(message: &Message, out: &mut Vec<Value>) {
    let mut current: Option<Value> = None;
    let mut results: Vec<Value> = Vec::new();
    // The first AG-UI message of a stored one takes its id; later ones
    // (after tool results) are named as the live stream named them.
    let mut started = false;
    for (index, segment) in message.segments.iter().enumerate() {
        match segment {
            Segment::Text { text } => {
                if !results.is_empty() {
                    flush(&mut current, &mut results, out);
                }
                let open = current.get_or_insert_with(|| {
                    let id = next_id(&mut started, message, || index.to_string());
                    json!({"id": id, "role": "assistant", "content": ""})
                });
                let content = open["content"].as_str().unwrap_or("").to_string() + text;
                open["content"] = Value::String(content);
            }
            Segment::ToolGroup { tools } => {
                if !results.is_empty() {
                    flush(&mut current, &mut results, out);
                }
                let open = current.get_or_insert_with(|| {
                    let first_call = || {
                        tools
                            .first()
                            .map(|tool| tool.id.to_string())
                            .unwrap_or_default()
                    };
                    let id = next_id(&mut started, message, first_call);
                    json!({"id": id, "role": "assistant", "content": ""})
                });
                let calls = tools.iter().map(|tool| {
                    json!({"id": tool.id, "type": "function",
                           "function": {"name": tool.name, "arguments": tool.input.to_string()}})
                });
                // A group whose calls got no result (interrupted) leaves the
                // message open: the next group's calls join it.
                match open.get_mut("toolCalls").and_then(Value::as_array_mut) {
                    Some(earlier) => earlier.extend(calls),
                    None => open["toolCalls"] = Value::Array(calls.collect()),
                }
                results.extend(tools.iter().filter_map(|tool| {
                    let output = tool.output.as_ref()?;
                    let content = match output {
                        Value::String(text) => text.clone(),
                        other => other.to_string(),
                    };
                    Some(json!({"id": format!("{}:result", tool.id), "role": "tool",
                                "toolCallId": tool.id, "content": content}))
                }));
            }
            // Thinking is not replayed; notes are the runtime's own.
            Segment::Thinking { .. } | Segment::Note { .. } => {}
        }
    }
    flush(&mut current, &mut results, out);
}

/// The message id for the first AG-UI message, `<id>:<suffix>` after it.
fn next_id(started: &mut bool, message: &Message, suffix: impl FnOnce() -> String) -> String {
    if std::mem::replace(started, true) {
        format!("{}:{}", message.id, suffix())
    } else {
        message.id.to_string()
    }
}

fn flush(current: &mut Option<Value>, results: &mut Vec<Value>, out: &mut Vec<Value>) {
    out.extend(current.take());
    out.append(results);
}

#[cfg(test)]
mod tests {
    use super::*;
    use actors::conversation::{ToolCategory, ToolRecord};
    use actors::ids::{MessageId, ToolCallId};

    fn message(id: &str, role: Role, content: &str, segments: Vec<Segment>) -> Message {
        let mut message = Message::empty(MessageId::new(id), None, role, 0);
        message.content = content.to_string();
        message.segments = segments;
        message
    }

    #[test]
    fn text_calls_and_results_read_as_the_live_stream_named_them() {
        let tool = ToolRecord {
            id: ToolCallId::new("c1"),
            name: "pick".into(),
            input: json!({"n": 1}),
            category: ToolCategory::Host,
            output: Some(json!({"ok": true})),
            outcome: None,
            status: None,
        };
        let path = [
            message("u1", Role::User, "hi", vec![]),
            message(
                "u1:reply",
                Role::Assistant,
                "",
                vec![
                    Segment::Text {
                        text: "let me ".into(),
                    },
                    Segment::ToolGroup { tools: vec![tool] },
                    Segment::Text {
                        text: "done".into(),
                    },
                ],
            ),
        ];
        let messages = snapshot_messages(&path);
        let ids: Vec<&str> = messages.iter().map(|m| m["id"].as_str().unwrap()).collect();
        assert_eq!(ids, ["u1", "u1:reply", "c1:result", "u1:reply:2"]);
        assert_eq!(messages[1]["content"], "let me ");
        assert_eq!(
            messages[1]["toolCalls"][0]["function"]["arguments"],
            "{\"n\":1}"
        );
        assert_eq!(messages[2]["toolCallId"], "c1");
        assert_eq!(messages[2]["content"], "{\"ok\":true}");
        assert_eq!(messages[3]["content"], "done");
    }
}
