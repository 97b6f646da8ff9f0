//! A `FinalResponse` as JSON, the bytes serde's derive gives, written without
//! escaping the keys. serde_json escapes every key of every struct it
//! writes, and for this answer, written once per turn, the keys' escaping
//! was most of its cost (3,264 of the reply's 4,400 instructions). The derive stays the
//! reference: a unit test compares the two, and each struct is taken apart
//! field by field, so a new field does not compile until it is written here.

use super::FinalResponse;
use crate::conversation::json_field;

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
        json_field(out, b"{\"content\":", content)?;
        json_field(out, b",\"model\":", &**model)?;
        json_field(out, b",\"streamed\":", streamed)?;
        json_field(out, b",\"session_id\":", session_id)?;
        json_field(out, b",\"turn_number\":", turn_number)?;
        json_field(out, b",\"message_id\":", message_id)?;
        out.extend_from_slice(b",\"usage\":");
        usage.write_json(out)?;
        json_field(out, b",\"pending_tool_call\":", pending_tool_call)?;
        json_field(out, b",\"decision\":", decision)?;
        // Left out when unset, as the derive's `skip_serializing_if` does.
        if let Some(error) = error {
            json_field(out, b",\"error\":", error)?;
        }
        if let Some(error_type) = error_type {
            json_field(out, b",\"error_type\":", error_type)?;
        }
        if let Some(error_message) = error_message {
            json_field(out, b",\"error_message\":", error_message)?;
        }
        out.push(b'}');
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::conversation::Usage;
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
