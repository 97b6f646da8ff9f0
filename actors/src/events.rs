//! What flows out of a turn, in order, to whoever asked for it: the transports
//! turn each `TurnEvent` into an SSE frame, a Socket.IO event (`assistant:` +
//! `name()`), or the body of an HTTP reply. The core never names a transport.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use serde::Serialize;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use crate::conversation::{NoteOrigin, ToolCategory, Usage};
use crate::ids::{MessageId, SessionId};

mod final_json;

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

/// A segment the runtime put into the assistant message between two model
/// requests, announced so the client sees every `segment_index` in order.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NoteEvent {
    /// Which note this is; it names the event, so it is not in the payload.
    #[serde(skip)]
    pub origin: NoteOrigin,
    /// The steering message's id (steering only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    /// The steering text as delivered (steering only; a host knows its own context).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    pub segment_id: String,
    pub segment_index: usize,
    /// `steering` or `host_context`.
    pub segment_kind: &'static str,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ToolCallEvent {
    /// The assistant message the call belongs to, so a client can draw a
    /// call that opens a turn (or a continuation) in that message's place.
    pub message_id: MessageId,
    pub tool_name: String,
    pub arguments: Value,
    pub call_id: String,
    pub category: ToolCategory,
    /// The index of the tool group this call belongs to in the message.
    pub segment_index: usize,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ToolResultEvent {
    /// The assistant message the call belongs to.
    pub message_id: MessageId,
    pub tool_name: String,
    pub output: Value,
    pub call_id: String,
    pub duration_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub invalidates: Option<Vec<String>>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ToolErrorEvent {
    /// The assistant message the rejected call is recorded in.
    pub message_id: MessageId,
    pub tool_name: String,
    pub call_id: String,
    pub error: String,
    /// The index of the tool group the rejected call is recorded in.
    pub segment_index: usize,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PendingToolCall {
    pub tool_name: String,
    pub call_id: String,
    pub arguments: Value,
    pub queued: Vec<String>,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Hold,
    Pending,
    Completed,
}

/// The end of a turn: what `POST /api/chat` answers and `final_response` carries.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FinalResponse {
    /// Null in `host_tools` mode.
    pub content: Option<String>,
    // The ids and the model are the session's own, shared rather than
    // copied into every turn's answer.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub model: Arc<str>,
    pub streamed: bool,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub session_id: SessionId,
    pub turn_number: u32,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub message_id: MessageId,
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
    /// Steering taken into the live turn, or a continuation's host context.
    Note(NoteEvent),
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
            TurnEvent::Note(NoteEvent {
                origin: NoteOrigin::Steering,
                ..
            }) => "steering_delivered",
            TurnEvent::Note(NoteEvent {
                origin: NoteOrigin::HostContext,
                ..
            }) => "context_delivered",
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
            TurnEvent::Note(event) => serde_json::to_value(event),
            TurnEvent::FinalResponse(event) => serde_json::to_value(event),
            TurnEvent::Error(event) => serde_json::to_value(event),
        };
        // These are plain structs of strings, numbers and JSON values: serialising cannot fail.
        value.unwrap_or(Value::Null)
    }

    /// The payload with the session it belongs to, for a client that follows
    /// several sessions on one connection (every `assistant:*` event has it).
    pub fn payload_for(&self, session_id: &str) -> Value {
        let mut payload = self.payload();
        if let Value::Object(fields) = &mut payload {
            fields
                .entry("session_id")
                .or_insert_with(|| Value::String(session_id.to_string()));
        }
        payload
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

/// Events one receiver may have waiting. A reader this far behind (an SSE
/// client that stopped reading) is cut off rather than buffered without end.
pub const EVENT_QUEUE_CAPACITY: usize = 4096;

/// Where a turn's events go. Sending never blocks the turn: a receiver that
/// went away (an HTTP client that hung up) just stops receiving, and one that
/// fell `EVENT_QUEUE_CAPACITY` events behind is cut off: it gets no further
/// event of this turn, and its stream ends (with `EventStream::overflowed`
/// set) when the turn does. The turn itself runs on and is saved; the client
/// reads the outcome from the session routes.
#[derive(Clone, Debug)]
pub struct EventSink {
    route: Route,
    /// Whether the receiver shows deltas as they come (`final_response.streamed`).
    /// One that does not gets only the first delta of each model response
    /// (unless the tap has a reader: `sends_every_delta`).
    pub streamed: bool,
    /// The attachment bytes of the message this turn answers, leased from
    /// the budget until the last clone of the sink is gone. Any value: the
    /// sink only keeps it (the session's `AttachmentLease` gives the bytes
    /// back when dropped), so events know nothing of sessions.
    lease: Option<std::sync::Arc<dyn std::any::Any + Send + Sync>>,
    /// Readers besides the sink's own (the session's room), given each
    /// event before the sink's own route takes it.
    tap: Option<Arc<dyn EventTap>>,
}

/// A second reader of a sink's events (a session's room: `session::Rooms`).
/// It is handed every event by reference, on the turn's thread, before the
/// sink's own receiver gets it, so it must never block: it queues or drops.
pub trait EventTap: Send + Sync + std::fmt::Debug {
    /// Whether anyone reads the tap now: events are built (and every delta
    /// sent) while one does, even for a sink that reads only its final response.
    fn listening(&self) -> bool;
    fn deliver(&self, event: &TurnEvent);
}

/// What a sink does with an event.
#[derive(Clone, Debug)]
enum Route {
    /// Every event, in order, to an `EventStream`.
    Stream {
        tx: mpsc::Sender<TurnEvent>,
        overflowed: Arc<AtomicBool>,
    },
    /// The final response only, to a `FinalReceiver`.
    Final(Arc<FinalSlot>),
}

/// The sending half of a final-only sink, shared by the sink's clones; the
/// receiver learns the turn ended without a final response when the last
/// clone is gone and the sender with it.
#[derive(Debug)]
struct FinalSlot {
    tx: Mutex<Option<oneshot::Sender<FinalOutcome>>>,
    /// When the turn's first text or thinking delta was sent.
    first_delta: OnceLock<Instant>,
}

/// A final-only sink's one message.
#[derive(Debug)]
pub struct FinalOutcome {
    pub response: Box<FinalResponse>,
    /// When the turn's first text or thinking delta was sent (time to first token).
    pub first_delta: Option<Instant>,
}

/// The receiving end of an `EventSink`.
#[derive(Debug)]
pub struct EventStream {
    rx: mpsc::Receiver<TurnEvent>,
    overflowed: Arc<AtomicBool>,
}

impl EventStream {
    pub async fn recv(&mut self) -> Option<TurnEvent> {
        self.rx.recv().await
    }

    /// Whether events were dropped because this reader fell too far behind.
    pub fn overflowed(&self) -> bool {
        self.overflowed.load(Ordering::Acquire)
    }
}

/// The receiving end of `EventSink::final_only`.
#[derive(Debug)]
pub struct FinalReceiver {
    rx: oneshot::Receiver<FinalOutcome>,
}

impl FinalReceiver {
    /// The turn's final response; `None` when the turn ended without one.
    pub async fn recv(self) -> Option<FinalOutcome> {
        self.rx.await.ok()
    }
}

impl EventSink {
    pub fn new(streamed: bool) -> (EventSink, EventStream) {
        EventSink::with_capacity(streamed, EVENT_QUEUE_CAPACITY)
    }

    pub fn with_capacity(streamed: bool, capacity: usize) -> (EventSink, EventStream) {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        let overflowed = Arc::new(AtomicBool::new(false));
        (
            EventSink {
                route: Route::Stream {
                    tx,
                    overflowed: overflowed.clone(),
                },
                streamed,
                lease: None,
                tap: None,
            },
            EventStream { rx, overflowed },
        )
    }

    /// A sink for a receiver that reads only the final response (a
    /// non-streaming HTTP turn): every other event is dropped where it is
    /// sent, so the turn's events cost no queue (a queue and its first block
    /// of slots per turn, and a wake-up of the receiver per event).
    pub fn final_only() -> (EventSink, FinalReceiver) {
        let (tx, rx) = oneshot::channel();
        let slot = FinalSlot {
            tx: Mutex::new(Some(tx)),
            first_delta: OnceLock::new(),
        };
        (
            EventSink {
                route: Route::Final(Arc::new(slot)),
                streamed: false,
                lease: None,
                tap: None,
            },
            FinalReceiver { rx },
        )
    }

    /// This sink, holding `lease` for as long as any clone of it lives.
    pub fn with_lease(mut self, lease: impl std::any::Any + Send + Sync) -> EventSink {
        self.lease = Some(std::sync::Arc::new(lease));
        self
    }

    /// This sink, also handing every event to `tap`.
    pub fn with_tap(mut self, tap: Arc<dyn EventTap>) -> EventSink {
        self.tap = Some(tap);
        self
    }

    pub fn send(&self, event: TurnEvent) {
        if let Some(tap) = &self.tap {
            tap.deliver(&event);
        }
        match &self.route {
            Route::Stream { tx, overflowed } => {
                if overflowed.load(Ordering::Acquire) {
                    return;
                }
                if let Err(mpsc::error::TrySendError::Full(_)) = tx.try_send(event) {
                    overflowed.store(true, Ordering::Release);
                    log::info!(
                        "a turn's reader fell {EVENT_QUEUE_CAPACITY} events behind; it gets no more events of this turn"
                    );
                }
            }
            Route::Final(slot) => match event {
                TurnEvent::TextDelta(_) | TurnEvent::ThinkingDelta(_) => {
                    slot.first_delta.get_or_init(Instant::now);
                }
                TurnEvent::FinalResponse(response) => {
                    let tx = slot
                        .tx
                        .lock()
                        .unwrap_or_else(|poisoned| poisoned.into_inner())
                        .take();
                    if let Some(tx) = tx {
                        let _ = tx.send(FinalOutcome {
                            response,
                            first_delta: slot.first_delta.get().copied(),
                        });
                    }
                }
                _ => {}
            },
        }
    }

    /// Whether events other than the final response sent here are read at
    /// all: a final-only sink drops them (keeping only the time of the first
    /// delta, which [`Self::note_delta`] records), so they need not be built.
    pub fn reads_events(&self) -> bool {
        matches!(self.route, Route::Stream { .. }) || self.tap_listening()
    }

    /// Whether every delta is sent, not only each model response's first:
    /// for a streaming receiver, and while the tap has a reader.
    pub fn sends_every_delta(&self) -> bool {
        self.streamed || self.tap_listening()
    }

    fn tap_listening(&self) -> bool {
        self.tap.as_ref().is_some_and(|tap| tap.listening())
    }

    /// What sending a delta does to a sink that does not read them.
    pub fn note_delta(&self) {
        if let Route::Final(slot) = &self.route {
            slot.first_delta.get_or_init(Instant::now);
        }
    }

    pub fn is_closed(&self) -> bool {
        match &self.route {
            Route::Stream { tx, .. } => tx.is_closed(),
            Route::Final(slot) => slot
                .tx
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .as_ref()
                .is_none_or(|tx| tx.is_closed()),
        }
    }
}

#[cfg(test)]
mod queue_tests {
    use super::*;

    fn status() -> TurnEvent {
        TurnEvent::Status(StatusEvent {
            status: TurnStatus::Started,
            session_id: "s".into(),
        })
    }

    #[test]
    fn a_reader_too_far_behind_is_cut_off_and_told() {
        let (sink, mut stream) = EventSink::with_capacity(true, 2);
        for _ in 0..5 {
            sink.send(status());
        }
        drop(sink);
        let mut n_received = 0;
        while futures_util::FutureExt::now_or_never(stream.recv())
            .flatten()
            .is_some()
        {
            n_received += 1;
        }
        assert_eq!(n_received, 2);
        assert!(stream.overflowed());
    }

    fn delta() -> TurnEvent {
        TurnEvent::TextDelta(DeltaEvent {
            content: "hi".into(),
            segment_id: "m:0".into(),
            segment_index: 0,
            delta_index: 0,
            segment_started: true,
            segment_kind: "text",
        })
    }

    #[test]
    fn a_final_only_sink_passes_the_final_response_and_the_first_delta_time() {
        let (sink, receiver) = EventSink::final_only();
        sink.send(status());
        sink.send(delta());
        let response = FinalResponse {
            content: Some("hi".into()),
            model: "builtin:echo".into(),
            streamed: false,
            session_id: SessionId::new("s"),
            turn_number: 1,
            message_id: MessageId::new("m"),
            usage: Usage::default(),
            pending_tool_call: None,
            decision: None,
            error: None,
            error_type: None,
            error_message: None,
        };
        sink.send(TurnEvent::FinalResponse(Box::new(response)));
        let outcome = futures_util::FutureExt::now_or_never(receiver.recv())
            .flatten()
            .expect("the final response");
        assert_eq!(outcome.response.content.as_deref(), Some("hi"));
        assert!(outcome.first_delta.is_some());
    }

    #[test]
    fn a_final_only_sink_dropped_without_a_final_response_ends_its_receiver() {
        let (sink, receiver) = EventSink::final_only();
        let clone = sink.clone();
        sink.send(status());
        drop(sink);
        assert!(!clone.is_closed());
        drop(clone);
        assert!(futures_util::FutureExt::now_or_never(receiver.recv())
            .expect("ready")
            .is_none());
    }
}
