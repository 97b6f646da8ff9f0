//! A message for a session actor and the replies; every other request is an
//! `actor::Ask`. Sent by the `Runtime` only; transports never hold an actor address.

use actix::Message;
use serde::Serialize;
use serde_json::Value;

use super::caller::Caller;
use super::error::SessionError;
use crate::contract::ChatRequest;
use crate::conversation::PendingAction;
use crate::events::EventSink;
use crate::ids::MessageId;

/// A message body, in a shared slot the handler empties: if the actor stops
/// before handling it, the sender finds it there for a fresh actor.
#[derive(Message)]
#[rtype(result = "Result<TurnAccepted, SessionError>")]
pub struct SendMessage {
    pub slot: MessageSlot,
    pub caller: Caller,
}

/// The request is boxed where it is parsed (760 bytes): from there to the
/// turn it moves as a pointer.
pub type MessageSlot = std::sync::Arc<std::sync::Mutex<Option<(Box<ChatRequest>, EventSink)>>>;

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AcceptedAs {
    /// A turn started (or a continuation was recorded); events follow on the sink.
    Turn,
    /// Steering delivered into the live turn; its events go to that turn's sink.
    Steering,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TurnAccepted {
    pub accepted_as: AcceptedAs,
    pub message_id: Option<MessageId>,
}

/// Sent by the registry's sweeper: stop if idle past the configured timeout.
#[derive(Message)]
#[rtype(result = "()")]
pub struct CheckIdle;

/// What `GET /api/sessions/{id}` shows.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SessionInfo {
    pub session_id: String,
    pub owner_id: Option<String>,
    pub title: Option<String>,
    pub created_at: u64,
    pub turn_number: u32,
    pub message_count: usize,
    pub active_leaf: Option<String>,
    pub turn_running: bool,
    pub pending_action: Option<PendingAction>,
    pub host_context: Option<Value>,
}
