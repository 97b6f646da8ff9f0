//! A `Message` as the JSON a store row keeps (`messages.body`): the bytes
//! serde's derive gives, written without escaping the keys. serde_json
//! escapes every key of every struct it writes, and a message's keys were
//! most of the strings a PostgreSQL write escapes. The bytes must not move:
//! a session's messages are replayed to the model as stored, and the
//! provider's prompt cache keys on them. The derive stays the reference: a
//! unit test compares the two for every shape, and each struct is taken
//! apart field by field, so a new field does not compile until it is
//! written here. Rare shapes (tool groups, attachments, nested usages) go
//! through the derive whole.

use crate::conversation::{json_field, Message, Role, Segment};

/// `serde_json::to_string(message)`, in one buffer sized for it.
pub(super) fn message_json(message: &Message) -> serde_json::Result<String> {
    let Message {
        id,
        parent_id,
        role,
        content,
        host_block,
        attachments,
        segments,
        usage,
        model,
        error_type,
        memory_block,
        working_memory,
        idempotency,
        created_at,
    } = message;
    // The text, plus room for the keys and the small fields: one
    // allocation for most messages instead of growing from 128 bytes.
    let text: usize = content.len()
        + host_block.as_deref().map_or(0, str::len)
        + memory_block.as_deref().map_or(0, str::len)
        + segments
            .iter()
            .map(|segment| match segment {
                Segment::Text { text } => text.len(),
                Segment::Thinking { text, signature } => {
                    text.len() + signature.as_deref().map_or(0, str::len)
                }
                _ => 256,
            })
            .sum::<usize>();
    let mut out = Vec::with_capacity(text + 384);
    json_field(&mut out, b"{\"id\":", id)?;
    json_field(&mut out, b",\"parent_id\":", parent_id)?;
    out.extend_from_slice(match role {
        Role::User => b",\"role\":\"user\"",
        Role::Assistant => b",\"role\":\"assistant\"",
        Role::Summary => b",\"role\":\"summary\"",
    });
    // Each left out when empty, as the derive's `skip_serializing_if` does.
    if !content.is_empty() {
        json_field(&mut out, b",\"content\":", content)?;
    }
    if let Some(host_block) = host_block {
        json_field(&mut out, b",\"host_block\":", &**host_block)?;
    }
    if !attachments.is_empty() {
        json_field(&mut out, b",\"attachments\":", attachments)?;
    }
    if !segments.is_empty() {
        out.extend_from_slice(b",\"segments\":[");
        for (n, segment) in segments.iter().enumerate() {
            if n > 0 {
                out.push(b',');
            }
            write_segment(segment, &mut out)?;
        }
        out.push(b']');
    }
    if let Some(usage) = usage {
        out.extend_from_slice(b",\"usage\":");
        usage.write_json(&mut out)?;
    }
    if let Some(model) = model {
        json_field(&mut out, b",\"model\":", &**model)?;
    }
    if let Some(error_type) = error_type {
        json_field(&mut out, b",\"error_type\":", error_type)?;
    }
    if let Some(memory_block) = memory_block {
        json_field(&mut out, b",\"memory_block\":", memory_block)?;
    }
    if let Some(working_memory) = working_memory {
        json_field(&mut out, b",\"working_memory\":", working_memory)?;
    }
    if let Some(idempotency) = idempotency {
        json_field(&mut out, b",\"idempotency\":", idempotency)?;
    }
    json_field(&mut out, b",\"created_at\":", created_at)?;
    out.push(b'}');
    // serde_json writes only UTF-8, and the literals above are ASCII.
    String::from_utf8(out).map_err(serde::ser::Error::custom)
}

/// A segment: text and thinking by hand (most segments), the rest by the
/// derive (an internally tagged enum: `kind` first).
fn write_segment(segment: &Segment, out: &mut Vec<u8>) -> serde_json::Result<()> {
    match segment {
        Segment::Text { text } => {
            json_field(out, b"{\"kind\":\"text\",\"text\":", text)?;
        }
        Segment::Thinking { text, signature } => {
            json_field(out, b"{\"kind\":\"thinking\",\"text\":", text)?;
            if let Some(signature) = signature {
                json_field(out, b",\"signature\":", signature)?;
            }
        }
        other => return serde_json::to_writer(&mut *out, other),
    }
    out.push(b'}');
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::conversation::{CallOutcome, ToolCategory, ToolRecord, Usage};
    use crate::ids::{MessageId, ToolCallId};

    fn user() -> Message {
        let mut message = Message::empty(
            MessageId::new("m\\1"),
            Some(MessageId::new("m0:reply")),
            Role::User,
            1_700_000_000_123,
        );
        message.content = "Echo: \"quoted\"\n\u{1F600} <b>\u{7}".into();
        message
    }

    fn assistant() -> Message {
        let mut message = Message::empty(
            MessageId::new("m1:reply"),
            Some(MessageId::new("m\\1")),
            Role::Assistant,
            1_700_000_000_456,
        );
        message.segments = vec![
            Segment::Thinking {
                text: "hmm \"so\"".into(),
                signature: Some("sig/+=".into()),
            },
            Segment::Thinking {
                text: String::new(),
                signature: None,
            },
            Segment::Text {
                text: "Echo: hello\tthere".into(),
            },
        ];
        message.usage = Some(Box::new(Usage {
            input_tokens: 10,
            output_tokens: 5,
            total_tokens: 15,
            requests: 1,
            tool_calls: 0,
            cost_usd: Some(0.000_123_4),
            auxiliary: Default::default(),
        }));
        message.model = Some(Arc::from("builtin:echo"));
        message
    }

    /// Every field and segment kind set, including the shapes written by the derive.
    fn everything() -> Message {
        let mut message = assistant();
        message.content = "also content".into();
        message.host_block = Some(Arc::from("<host_context>\n{\"a\":1}\n</host_context>"));
        message.attachments = serde_json::from_value(json!([
            {"kind": "document", "purpose": "reference", "url": "https://example.com/a?b=c",
             "name": "a", "media_type": "text/plain"}
        ]))
        .unwrap();
        let mut tool = ToolRecord {
            id: ToolCallId::new("call_1"),
            name: "select_issue".into(),
            input: json!({"number": 42, "tags": ["a", "é"]}),
            category: ToolCategory::Host,
            output: None,
            outcome: None,
            status: None,
        };
        tool.output = Some(json!({"ok": true}));
        tool.outcome = Some(CallOutcome::Success);
        message
            .segments
            .push(Segment::ToolGroup { tools: vec![tool] });
        message.segments.push(Segment::Note {
            origin: crate::conversation::NoteOrigin::Steering,
            text: "steer".into(),
            attachments: Vec::new(),
        });
        message.usage.as_mut().unwrap().auxiliary.insert(
            "summarization".into(),
            Usage {
                requests: 1,
                cost_usd: None,
                ..Usage::default()
            },
        );
        message.error_type = Some("provider_error".into());
        message.memory_block = Some("<working_memory>\n- x\n</working_memory>".into());
        message.working_memory = Some(vec!["x".into(), "\"y\"".into()]);
        message.idempotency = Some(Box::new(crate::conversation::IdempotencyMark {
            key: "k".into(),
            body: "b".into(),
        }));
        message
    }

    #[test]
    fn every_shape_is_written_as_the_derive_writes_it() {
        let mut summary = user();
        summary.role = Role::Summary;
        summary.parent_id = None;
        let mut no_cost = assistant();
        no_cost.usage.as_mut().unwrap().cost_usd = None;
        let empty = Message::empty(MessageId::new("e"), None, Role::Assistant, 0);
        for message in [user(), assistant(), summary, no_cost, empty, everything()] {
            assert_eq!(
                message_json(&message).unwrap(),
                serde_json::to_string(&message).unwrap()
            );
        }
    }

    /// The stored bytes of a turn's two messages, pinned: a change here
    /// changes what replays to the model.
    #[test]
    fn a_turns_messages_keep_their_stored_bytes() {
        assert_eq!(
            message_json(&user()).unwrap(),
            r#"{"id":"m\\1","parent_id":"m0:reply","role":"user","content":"Echo: \"quoted\"\n😀 <b>\u0007","created_at":1700000000123}"#
        );
        assert_eq!(
            message_json(&assistant()).unwrap(),
            concat!(
                r#"{"id":"m1:reply","parent_id":"m\\1","role":"assistant","segments":["#,
                r#"{"kind":"thinking","text":"hmm \"so\"","signature":"sig/+="},"#,
                r#"{"kind":"thinking","text":""},"#,
                r#"{"kind":"text","text":"Echo: hello\tthere"}],"#,
                r#""usage":{"input_tokens":10,"output_tokens":5,"total_tokens":15,"requests":1,"#,
                r#""tool_calls":0,"cost_usd":0.0001234},"model":"builtin:echo","#,
                r#""created_at":1700000000456}"#
            )
        );
    }
}
