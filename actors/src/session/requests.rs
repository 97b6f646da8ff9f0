//! The requests a session actor accepts, one struct each, with their replies.
//! Sent by the `Runtime` handle only; transports never hold an actor address.

use actix::Message;
use serde::Serialize;
use serde_json::Value;

use super::caller::Caller;
use super::error::SessionError;
use crate::contract::{ChatRequest, HostContext};
use crate::conversation::{Message as StoredMessage, PendingAction};
use crate::events::EventSink;
use crate::ids::MessageId;

/// A message body (ordinary, steering or continuation). Its turn's events go
/// to `sink`; the reply says how it was taken.
///
/// The body travels in a shared slot the handler empties: if the actor stops
/// before handling it (an idle stop racing the send), the sender finds it
/// still there and hands it to a fresh actor, without copying the body.
#[derive(Message)]
#[rtype(result = "Result<TurnAccepted, SessionError>")]
pub struct SendMessage {
    pub slot: MessageSlot,
    pub caller: Caller,
}

pub type MessageSlot = std::sync::Arc<std::sync::Mutex<Option<(ChatRequest, EventSink)>>>;

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

/// Stores (and warms) a host context for later messages.
#[derive(Message)]
#[rtype(result = "Result<(), SessionError>")]
pub struct JoinSession(pub Caller, pub Option<HostContext>);

/// Sent by the registry's sweeper: stop if idle past the configured timeout.
#[derive(Message)]
#[rtype(result = "()")]
pub struct CheckIdle;

/// Asks the live turn to stop; `true` if there was one.
#[derive(Message)]
#[rtype(result = "Result<bool, SessionError>")]
pub struct CancelTurn(pub Caller);

#[derive(Message)]
#[rtype(result = "Result<SessionInfo, SessionError>")]
pub struct GetInfo(pub Caller);

/// The root-to-leaf path (the active leaf by default).
#[derive(Message)]
#[rtype(result = "Result<Vec<StoredMessage>, SessionError>")]
pub struct GetPath(pub Caller, pub Option<MessageId>);

#[derive(Message)]
#[rtype(result = "Result<Vec<StoredMessage>, SessionError>")]
pub struct GetTree(pub Caller);

/// Resolves the pending action and every call without a result as `unknown`.
#[derive(Message)]
#[rtype(result = "Result<SessionInfo, SessionError>")]
pub struct RepairSession(pub Caller);

/// Hands the stored session to `owner_id` (or to none: admins only). Admins only.
#[derive(Message)]
#[rtype(result = "Result<(), SessionError>")]
pub struct SetOwner {
    pub owner_id: Option<std::sync::Arc<str>>,
    pub caller: Caller,
}

/// Cancels any live turn, deletes the stored session and stops the actor.
#[derive(Message)]
#[rtype(result = "Result<bool, SessionError>")]
pub struct DeleteSession(pub Caller);

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
