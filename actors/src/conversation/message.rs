//! Stored message shapes. These are what the store persists and what the
//! session routes show, so every field is part of the wire form.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::contract::{Attachment, OutputMode};
use crate::ids::{MessageId, SessionId, ToolCallId};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    User,
    Assistant,
    /// A stored summary of the path up to its parent (history compaction).
    /// It hangs beside the path, never on it: the originals stay for display,
    /// and the model reads the summary in their place (`history::view`).
    Summary,
}

/// One node of the session's message tree.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub id: MessageId,
    pub parent_id: Option<MessageId>,
    pub role: Role,
    /// The user's text (empty for assistant messages, whose text is in `segments`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub content: String,
    /// The rendered `<host_context>` block that opens this user message, kept
    /// byte for byte so later turns replay exactly what the model first saw.
    /// Shared with the session's kept context, which renders it once for
    /// every message that shows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_block: Option<Arc<str>>,
    /// Reference attachments only; screenshots are never stored.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<Attachment>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub segments: Vec<Segment>,
    /// Boxed: only assistant messages have one, and inline it would take
    /// every message past mimalloc's 256-byte class into the 384-byte one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Box<Usage>>,
    /// The `ModelId`'s own text, shared rather than copied for each reply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<Arc<str>>,
    /// Set on assistant messages whose turn ended in error (`error_type`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_type: Option<String>,
    /// On a user message: the rendered `<working_memory>` block it opened
    /// with, kept byte for byte like `host_block` so replays stay stable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_block: Option<String>,
    /// On an assistant message: the session's working memory after its turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub working_memory: Option<Vec<String>>,
    /// On a user message sent with an `Idempotency-Key`: the key's and the
    /// body's digests, so a resend is answered with this message's outcome.
    /// Boxed: most messages have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency: Option<Box<IdempotencyMark>>,
    /// Unix milliseconds.
    pub created_at: u64,
}

// A message lives in an `Arc` (16 bytes of counts) in the tree and the
// memory store for as long as its session is resident: at most 240 bytes
// keeps that in mimalloc's 256-byte class; at 312 it took 384, and the
// run's fresh memory and page faults followed (a load of 100 sessions × 10
// rounds × 40 turns faulted 22,300 pages at 312 bytes, 19,000 at 232).
const _: () = assert!(std::mem::size_of::<Message>() <= 240);

/// A piece of an assistant message, in the order it happened.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Segment {
    Thinking {
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
    },
    Text {
        text: String,
    },
    /// The tool calls that closed one model response, with their results.
    ToolGroup {
        tools: Vec<ToolRecord>,
    },
    /// Text the runtime delivered to the model between two requests of one
    /// turn: the current host context after a tool result, or steering.
    Note {
        origin: NoteOrigin,
        text: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        attachments: Vec<Attachment>,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NoteOrigin {
    HostContext,
    Steering,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolCategory {
    Backend,
    Host,
    /// A backend tool served by an MCP server (`<server>_<tool>`).
    Mcp,
}

/// One tool call and, once known, its result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolRecord {
    pub id: ToolCallId,
    pub name: String,
    pub input: Value,
    pub category: ToolCategory,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<CallOutcome>,
    /// Absent for a completed call; otherwise why it has no real result.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "read_status"
    )]
    pub status: Option<CallStatus>,
}

/// The status word of a call the host answered successfully (runtime.md,
/// "Action outcomes"); stored as no status at all.
pub const COMPLETED: &str = "completed";

/// A stored status: `completed`, or `success` as older rows spelled it, is a
/// completed call and reads as no status; anything else is a `CallStatus`.
fn read_status<'de, D>(deserializer: D) -> Result<Option<CallStatus>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    let word: Option<String> = Option::deserialize(deserializer)?;
    match word.as_deref() {
        None | Some(COMPLETED) | Some("success") => Ok(None),
        Some(other) => serde_json::from_value(Value::String(other.to_string()))
            .map(Some)
            .map_err(serde::de::Error::custom),
    }
}

impl Message {
    /// A message with nothing in it yet: an assistant reply about to be
    /// streamed into, or the base the other fields are set on.
    pub fn empty(
        id: MessageId,
        parent_id: Option<MessageId>,
        role: Role,
        created_at: u64,
    ) -> Message {
        Message {
            id,
            parent_id,
            role,
            content: String::new(),
            host_block: None,
            attachments: Vec::new(),
            segments: Vec::new(),
            usage: None,
            model: None,
            error_type: None,
            memory_block: None,
            working_memory: None,
            idempotency: None,
            created_at,
        }
    }

    /// The tool call `id` of this message, if it made one.
    pub fn find_tool(&self, id: &ToolCallId) -> Option<&ToolRecord> {
        self.tool_records().find(|tool| &tool.id == id)
    }

    /// Every tool call of the message, in order.
    pub fn tool_records(&self) -> impl Iterator<Item = &ToolRecord> {
        self.segments.iter().flat_map(|segment| match segment {
            Segment::ToolGroup { tools } => tools.iter(),
            _ => [].iter(),
        })
    }

    pub fn tool_records_mut(&mut self) -> impl Iterator<Item = &mut ToolRecord> {
        self.segments.iter_mut().flat_map(|segment| match segment {
            Segment::ToolGroup { tools } => tools.iter_mut(),
            _ => [].iter_mut(),
        })
    }

    /// Gives every call still without a result the made-up result of
    /// `status` (cancelled, superseded, unknown): the transcript a provider
    /// reads must answer every call.
    pub fn interrupt_unresolved(&mut self, status: CallStatus) {
        for tool in self.tool_records_mut() {
            if !tool.has_result() {
                tool.interrupt(status);
            }
        }
    }

    /// The reply's text: its text segments, a blank line between the answers
    /// of separate model requests (before and after a tool result or steering).
    pub fn text(&self) -> String {
        crate::text::join(
            self.segments.iter().filter_map(|segment| match segment {
                Segment::Text { text } => Some(text.as_str()),
                _ => None,
            }),
            "\n\n",
        )
    }
}

impl ToolRecord {
    pub fn has_result(&self) -> bool {
        self.outcome.is_some()
    }

    /// The status vocabulary of runtime.md for a call with a result:
    /// `completed` when the host's result was recorded, else why not.
    pub fn status_word(&self) -> &'static str {
        match (self.status, self.outcome) {
            (Some(status), _) => status.as_str(),
            (None, Some(CallOutcome::Failed)) => CallStatus::Failed.as_str(),
            _ => COMPLETED,
        }
    }

    /// Records a result the runtime made up because the real one never came.
    pub fn interrupt(&mut self, status: CallStatus) {
        self.outcome = Some(CallOutcome::Interrupted);
        self.status = Some(status);
        self.output = Some(serde_json::json!({
            "status": status.as_str(),
            "note": "No result was reported for this action; it may or may not have taken effect."
        }));
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallOutcome {
    Success,
    Failed,
    Interrupted,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallStatus {
    Failed,
    Cancelled,
    Superseded,
    Unknown,
}

impl CallStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            CallStatus::Failed => "failed",
            CallStatus::Cancelled => "cancelled",
            CallStatus::Superseded => "superseded",
            CallStatus::Unknown => "unknown",
        }
    }
}

/// Usage of one assistant message, summed over its model requests.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub total_tokens: u64,
    pub requests: u32,
    pub tool_calls: u32,
    /// Null when no price is known for the model.
    pub cost_usd: Option<f64>,
    /// Model calls made for the turn but not by it (`summarization`,
    /// `working_memory`), by name; not included in the counts above.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    // The type refers to itself: without `no_recursion` utoipa's schema
    // collection recurses until the stack overflows.
    #[cfg_attr(feature = "openapi", schema(no_recursion))]
    pub auxiliary: std::collections::BTreeMap<String, Usage>,
}

impl Usage {
    pub fn add_tokens(&mut self, input_tokens: u64, output_tokens: u64) {
        self.input_tokens += input_tokens;
        self.output_tokens += output_tokens;
        self.total_tokens = self.input_tokens + self.output_tokens;
    }

    /// The bytes its derive writes, with the keys written as literals
    /// (serde_json escapes every key): every turn's final response
    /// (`events/final_json.rs`) and stored reply (`store/message_json.rs`)
    /// carry one.
    pub(crate) fn write_json(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        let Usage {
            input_tokens,
            output_tokens,
            total_tokens,
            requests,
            tool_calls,
            cost_usd,
            auxiliary,
        } = self;
        if !auxiliary.is_empty() {
            // Nested usages: rare (a turn that compacted or kept memory).
            return serde_json::to_writer(&mut *out, self);
        }
        json_field(out, b"{\"input_tokens\":", input_tokens)?;
        json_field(out, b",\"output_tokens\":", output_tokens)?;
        json_field(out, b",\"total_tokens\":", total_tokens)?;
        json_field(out, b",\"requests\":", requests)?;
        json_field(out, b",\"tool_calls\":", tool_calls)?;
        json_field(out, b",\"cost_usd\":", cost_usd)?;
        out.push(b'}');
        Ok(())
    }
}

/// `key` (its quotes, colon and any comma, as literal bytes), then `value`
/// as serde_json writes it inside a struct: a field of the JSON writers
/// that write keys as literals (`Usage::write_json`).
pub(crate) fn json_field<T: Serialize + ?Sized>(
    out: &mut Vec<u8>,
    key: &[u8],
    value: &T,
) -> serde_json::Result<()> {
    out.extend_from_slice(key);
    serde_json::to_writer(&mut *out, value)
}

/// The host action the session is waiting for, stored on the session row.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PendingAction {
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub tool_call_id: ToolCallId,
    pub tool_name: String,
    pub arguments: Value,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub assistant_message_id: MessageId,
    /// Further host calls of the same response, handed over in this order.
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<String>))]
    pub queued: Vec<ToolCallId>,
    pub output_mode: OutputMode,
}

/// Everything about a session except its messages.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SessionRecord {
    pub id: SessionId,
    pub owner_id: Option<std::sync::Arc<str>>,
    pub title: Option<std::sync::Arc<str>>,
    pub created_at: u64,
    pub turn_number: u32,
    pub active_leaf: Option<MessageId>,
    /// The last validated host context, canonical snake_case. Shared, since
    /// every turn reads it and the record is copied for each store write.
    pub host_context: Option<std::sync::Arc<super::StoredContext>>,
    /// Shared with the actor's phase: the row is copied for every write,
    /// and the call's arguments need not be.
    pub pending_action: Option<std::sync::Arc<PendingAction>>,
}

impl SessionRecord {
    pub fn new(id: SessionId, created_at: u64) -> SessionRecord {
        SessionRecord {
            id,
            owner_id: None,
            title: None,
            created_at,
            turn_number: 0,
            active_leaf: None,
            host_context: None,
            pending_action: None,
        }
    }
}

pub use crate::clock::now_millis;
pub use crate::contract::IdempotencyMark;

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn record(extra: Value) -> ToolRecord {
        let mut record =
            json!({"id": "c1", "name": "select_issue", "input": {}, "category": "host"});
        if let (Some(record), Value::Object(extra)) = (record.as_object_mut(), extra) {
            record.extend(extra);
        }
        serde_json::from_value(record).unwrap()
    }

    #[test]
    fn a_call_the_host_answered_reports_completed() {
        assert_eq!(
            record(json!({"outcome": "success"})).status_word(),
            "completed"
        );
        assert_eq!(record(json!({"outcome": "failed"})).status_word(), "failed");
        let cancelled = record(json!({"outcome": "interrupted", "status": "cancelled"}));
        assert_eq!(cancelled.status_word(), "cancelled");
    }

    #[test]
    fn older_rows_spelling_success_or_completed_read_as_completed() {
        for word in ["success", "completed"] {
            let stored = record(json!({"outcome": "success", "status": word}));
            assert_eq!(stored.status, None);
            assert_eq!(stored.status_word(), "completed");
        }
        assert!(serde_json::from_value::<ToolRecord>(
            json!({"id": "c1", "name": "n", "input": {}, "category": "host", "status": "bogus"})
        )
        .is_err());
    }

    fn assistant(segments: Vec<Segment>) -> Message {
        serde_json::from_value::<Message>(json!({
            "id": "m1:reply", "parent_id": "m1", "role": "assistant", "created_at": 0
        }))
        .map(|mut message| {
            message.segments = segments;
            message
        })
        .unwrap()
    }

    fn call(id: &str, extra: Value) -> ToolRecord {
        let mut tool = record(extra);
        tool.id = ToolCallId::new(id);
        tool
    }

    #[test]
    fn find_tool_looks_in_every_tool_group() {
        let message = assistant(vec![
            Segment::ToolGroup {
                tools: vec![call("a", json!({}))],
            },
            Segment::Text { text: "x".into() },
            Segment::ToolGroup {
                tools: vec![call("b", json!({}))],
            },
        ]);
        let found = message.find_tool(&ToolCallId::new("b"));
        assert_eq!(found.map(|tool| tool.id.as_str()), Some("b"));
        assert!(message.find_tool(&ToolCallId::new("c")).is_none());
    }

    #[test]
    fn interrupt_unresolved_leaves_answered_calls_alone() {
        let mut message = assistant(vec![Segment::ToolGroup {
            tools: vec![
                call("a", json!({"outcome": "success"})),
                call("b", json!({})),
            ],
        }]);
        message.interrupt_unresolved(CallStatus::Unknown);
        let words: Vec<&str> = message
            .tool_records()
            .map(ToolRecord::status_word)
            .collect();
        assert_eq!(words, ["completed", "unknown"]);
    }

    #[test]
    fn text_joins_the_answers_of_separate_requests_with_a_blank_line() {
        let message = assistant(vec![
            Segment::Text { text: "one".into() },
            Segment::ToolGroup { tools: vec![] },
            Segment::Text { text: "two".into() },
        ]);
        assert_eq!(message.text(), "one\n\ntwo");
    }
}
