//! Storage behind the session actors. `Store` is the one interface; the
//! in-memory store is the default and Postgres the durable one. The session
//! actor writes through it before changing its own memory, so memory is never
//! durably ahead of the store.

pub mod memory;
pub mod migrations;
pub mod postgres;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde::Serialize;

use crate::conversation::{Message, PendingAction, SessionRecord};
use crate::ids::{SessionId, ToolCallId};

/// A session as loaded: its record and every message of its tree.
#[derive(Clone, Debug, PartialEq)]
pub struct SessionSnapshot {
    pub record: SessionRecord,
    pub messages: Vec<Message>,
}

/// One row of `GET /api/sessions`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SessionSummary {
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub session_id: SessionId,
    pub owner_id: Option<String>,
    pub title: Option<String>,
    pub turn_number: u32,
    pub message_count: u64,
    pub created_at: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreError {
    /// The database cannot be reached now; the request may succeed later.
    Unavailable(String),
    /// Anything else the store could not do.
    Failed(String),
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Unavailable(cause) => write!(f, "database unavailable: {cause}"),
            StoreError::Failed(cause) => write!(f, "store failed: {cause}"),
        }
    }
}

impl std::error::Error for StoreError {}

pub type StoreResult<T> = Result<T, StoreError>;

/// Session storage. Every method is one atomic change.
pub trait Store: Send + Sync + 'static {
    /// The session and its messages, or `None` if it was never stored.
    fn load(&self, id: &SessionId) -> BoxFuture<'static, StoreResult<Option<SessionSnapshot>>>;

    /// Inserts or updates the session row (everything but messages).
    fn save_session(&self, record: &SessionRecord) -> BoxFuture<'static, StoreResult<()>>;

    /// Inserts or replaces these messages, together with the session row
    /// (leaf, turn number, pending action), in one transaction.
    fn save_messages(
        &self,
        record: &SessionRecord,
        messages: &[Message],
    ) -> BoxFuture<'static, StoreResult<()>>;

    /// Accepts the host's result for `call_id`: replaces the pending action by
    /// `next` only if `call_id` is the one pending now, saving `message` with it.
    /// `Ok(false)` means another process (or request) got there first.
    fn accept_result(
        &self,
        record: &SessionRecord,
        call_id: &ToolCallId,
        next: Option<&PendingAction>,
        message: &Message,
    ) -> BoxFuture<'static, StoreResult<bool>>;

    /// A page of sessions, newest first; only `owner`'s when it is given.
    fn list(
        &self,
        owner: Option<&str>,
        limit: u32,
        offset: u32,
    ) -> BoxFuture<'static, StoreResult<Vec<SessionSummary>>>;

    /// Deletes the session and its messages; `Ok(false)` if there was none.
    fn delete(&self, id: &SessionId) -> BoxFuture<'static, StoreResult<bool>>;

    /// Deletes every session (with its messages) not written for `ttl`, and
    /// returns how many went (`ASSISTANT__SESSION_TTL_HOURS`).
    fn purge_expired(&self, ttl: Duration) -> BoxFuture<'static, StoreResult<u64>>;

    /// Cheap liveness check for `/health`.
    fn ping(&self) -> BoxFuture<'static, StoreResult<()>>;

    /// How many sessions are stored (`/metrics`). A store that cannot say
    /// cheaply keeps this default, and the gauge is left out.
    fn count(&self) -> BoxFuture<'static, StoreResult<u64>> {
        Box::pin(std::future::ready(Err(StoreError::Failed(
            "this store does not count sessions".into(),
        ))))
    }

    /// Name for logs and `/health` (`memory`, `postgres`).
    fn kind(&self) -> &'static str;
}

pub type SharedStore = Arc<dyn Store>;
