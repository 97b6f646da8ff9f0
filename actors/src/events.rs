//! What flows out of a turn, in order, to whoever asked for it: the transports
//! turn each `TurnEvent` into an SSE frame, a Socket.IO event (`assistant:` +
//! `name()`), or the body of an HTTP reply. The core never names a transport.

use serde::Serialize;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::conversation::{ToolCategory, Usage};

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnStatus {
    Started,
    Completed,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StatusEvent {
    pub status: TurnStatus,
    pub session_id: String,
}

/// A piece of streamed text or thinking, with its place in the message.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DeltaEvent {
    pub content: String,
    pub segment_id: String,
    pub segment_index: usize,
    pub delta_index: usize,
    pub segment_started: bool,
    pub segment_kind: &'static str,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ToolCallEvent {
    pub tool_name: String,
    pub arguments: Value,
    pub call_id: String,
    pub category: ToolCategory,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ToolResultEvent {
    pub tool_name: String,
    pub output: Value,
    pub call_id: String,
    pub duration_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub invalidates: Option<Vec<String>>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ToolErrorEvent {
    pub tool_name: String,
    pub call_id: String,
    pub error: String,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PendingToolCall {
    pub tool_name: String,
    pub call_id: String,
    pub arguments: Value,
    pub queued: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Hold,
    Pending,
    Completed,
}

/// The end of a turn: what `POST /api/chat` answers and `final_response` carries.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FinalResponse {
    /// Null in `host_tools` mode.
    pub content: Option<String>,
    pub model: String,
    pub streamed: bool,
    pub session_id: String,
    pub turn_number: u32,
    pub message_id: String,
    pub usage: Usage,
    pub pending_tool_call: Option<PendingToolCall>,
    pub decision: Option<Decision>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_type: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_message: Option<String>,
}

/// A turn that ended in error, sent after its `final_response`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TurnErrorEvent {
    /// Always `error` for turn errors (request errors use the transports' own).
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub message: String,
    pub error_type: String,
    pub terminal: bool,
    pub retry_allowed: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub enum TurnEvent {
    Status(StatusEvent),
    ThinkingDelta(DeltaEvent),
    TextDelta(DeltaEvent),
    ToolCall(ToolCallEvent),
    ToolResult(ToolResultEvent),
    ToolError(ToolErrorEvent),
    FinalResponse(Box<FinalResponse>),
    Error(TurnErrorEvent),
}

impl TurnEvent {
    /// The event's name after `assistant:` on the socket.
    pub fn name(&self) -> &'static str {
        match self {
            TurnEvent::Status(_) => "status",
            TurnEvent::ThinkingDelta(_) => "thinking_delta",
            TurnEvent::TextDelta(_) => "text_delta",
            TurnEvent::ToolCall(_) => "tool_call",
            TurnEvent::ToolResult(_) => "tool_result",
            TurnEvent::ToolError(_) => "tool_error",
            TurnEvent::FinalResponse(_) => "final_response",
            TurnEvent::Error(_) => "error",
        }
    }

    pub fn payload(&self) -> Value {
        let value = match self {
            TurnEvent::Status(event) => serde_json::to_value(event),
            TurnEvent::ThinkingDelta(event) | TurnEvent::TextDelta(event) => {
                serde_json::to_value(event)
            }
            TurnEvent::ToolCall(event) => serde_json::to_value(event),
            TurnEvent::ToolResult(event) => serde_json::to_value(event),
            TurnEvent::ToolError(event) => serde_json::to_value(event),
            TurnEvent::FinalResponse(event) => serde_json::to_value(event),
            TurnEvent::Error(event) => serde_json::to_value(event),
        };
        // These are plain structs of strings, numbers and JSON values: serialising cannot fail.
        value.unwrap_or(Value::Null)
    }

    pub fn is_completed_status(&self) -> bool {
        matches!(
            self,
            TurnEvent::Status(StatusEvent {
                status: TurnStatus::Completed,
                ..
            })
        )
    }
}

/// Where a turn's events go. Sending never blocks the turn: a receiver that
/// went away (an HTTP client that hung up) just stops receiving.
#[derive(Clone, Debug)]
pub struct EventSink {
    tx: mpsc::UnboundedSender<TurnEvent>,
    /// Whether the receiver shows deltas as they come (`final_response.streamed`).
    pub streamed: bool,
    /// The attachment bytes of the message this turn answers, leased from
    /// the budget until the last clone of the sink is gone.
    lease: Option<std::sync::Arc<crate::session::AttachmentLease>>,
}

impl EventSink {
    pub fn new(streamed: bool) -> (EventSink, mpsc::UnboundedReceiver<TurnEvent>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (
            EventSink {
                tx,
                streamed,
                lease: None,
            },
            rx,
        )
    }

    /// This sink, holding `lease` for as long as any clone of it lives.
    pub fn with_lease(mut self, lease: crate::session::AttachmentLease) -> EventSink {
        self.lease = Some(std::sync::Arc::new(lease));
        self
    }

    pub fn send(&self, event: TurnEvent) {
        let _receiver_gone = self.tx.send(event);
    }

    pub fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }
}
