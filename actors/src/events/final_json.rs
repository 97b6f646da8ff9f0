//! A `FinalResponse` as JSON, the bytes serde's derive gives, written without
//! escaping the keys. serde_json escapes every key of every struct it
//! writes, and for this answer, written once per turn, the keys' escaping
//! was most of its cost (3,264 of the reply's 4,400 instructions). The derive stays the
//! reference: a unit test compares the two, and each struct is taken apart
//! field by field, so a new field does not compile until it is written here.

use serde::Serialize;

use super::FinalResponse;
use crate::conversation::Usage;

impl FinalResponse {
    /// Appends this response's JSON to `out`: the bytes of
    /// `serde_json::to_writer(out, self)`.
    pub fn write_json(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        let FinalResponse {
            content,
            model,
            streamed,
            session_id,
            turn_number,
            message_id,
            usage,
            pending_tool_call,
            decision,
            error,
            error_type,
            error_message,
        } = self;
        field(out, b"{\"content\":", content)?;
        field(out, b",\"model\":", &**model)?;
        field(out, b",\"streamed\":", streamed)?;
        field(out, b",\"session_id\":", session_id)?;
        field(out, b",\"turn_number\":", turn_number)?;
        field(out, b",\"message_id\":", message_id)?;
        out.extend_from_slice(b",\"usage\":");
        write_usage(usage, out)?;
        field(out, b",\"pending_tool_call\":", pending_tool_call)?;
        field(out, b",\"decision\":", decision)?;
        // Left out when unset, as the derive's `skip_serializing_if` does.
        if let Some(error) = error {
            field(out, b",\"error\":", error)?;
        }
        if let Some(error_type) = error_type {
            field(out, b",\"error_type\":", error_type)?;
        }
        if let Some(error_message) = error_message {
            field(out, b",\"error_message\":", error_message)?;
        }
        out.push(b'}');
        Ok(())
    }
}

fn write_usage(usage: &Usage, out: &mut Vec<u8>) -> serde_json::Result<()> {
    let Usage {
        input_tokens,
        output_tokens,
        total_tokens,
        requests,
        tool_calls,
        cost_usd,
        auxiliary,
    } = usage;
    if !auxiliary.is_empty() {
        // Nested usages: rare (a turn that compacted or kept memory).
        return serde_json::to_writer(&mut *out, usage);
    }
    field(out, b"{\"input_tokens\":", input_tokens)?;
    field(out, b",\"output_tokens\":", output_tokens)?;
    field(out, b",\"total_tokens\":", total_tokens)?;
    field(out, b",\"requests\":", requests)?;
    field(out, b",\"tool_calls\":", tool_calls)?;
    field(out, b",\"cost_usd\":", cost_usd)?;
    out.push(b'}');
    Ok(())
}

/// `key` (its quotes, colon and any comma, as literal bytes), then `value`
/// as serde_json writes it inside a struct.
fn field<T: Serialize + ?Sized>(
    out: &mut Vec<u8>,
    key: &[u8],
    value: &T,
) -> serde_json::Result<()> {
    out.extend_from_slice(key);
    serde_json::to_writer(&mut *out, value)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::events::{Decision, PendingToolCall};
    use crate::ids::{MessageId, SessionId};

    fn completed() -> FinalResponse {
        FinalResponse {
            content: Some("Echo: \"quoted\"\n\u{1F600} <b>".into()),
            model: "builtin:echo".into(),
            streamed: false,
            session_id: SessionId::new("s\\1"),
            turn_number: 7,
            message_id: MessageId::new("m1:reply"),
            usage: Usage {
                input_tokens: 10,
                output_tokens: 5,
                total_tokens: 15,
                requests: 1,
                tool_calls: 0,
                cost_usd: None,
                auxiliary: Default::default(),
            },
            pending_tool_call: None,
            decision: None,
            error: None,
            error_type: None,
            error_message: None,
        }
    }

    fn written(response: &FinalResponse) -> String {
        let mut out = Vec::new();
        response.write_json(&mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn every_shape_is_written_as_the_derive_writes_it() {
        let mut pending = completed();
        pending.content = None;
        pending.streamed = true;
        pending.usage.cost_usd = Some(0.000_123_4);
        pending.usage.tool_calls = 2;
        pending.pending_tool_call = Some(PendingToolCall {
            tool_name: "select_issue".into(),
            call_id: "call_1".into(),
            arguments: json!({"number": 42, "tags": ["a", "é"]}),
            queued: vec!["call_2".into()],
        });
        pending.decision = Some(Decision::Pending);
        let mut failed = completed();
        failed.error = Some(true);
        failed.error_type = Some("provider_error".into());
        failed.error_message = Some("the provider said \"no\"".into());
        failed.usage.auxiliary.insert(
            "summarization".into(),
            Usage {
                requests: 1,
                cost_usd: Some(1.5),
                ..Usage::default()
            },
        );
        for response in [completed(), pending, failed] {
            assert_eq!(
                written(&response),
                serde_json::to_string(&response).unwrap()
            );
        }
    }
}
