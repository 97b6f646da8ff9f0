//! Storage behind the session actors. `Store` is the one interface; the
//! in-memory store is the default and Postgres the durable one. The session
//! actor writes through it before changing its own memory, so memory is never
//! durably ahead of the store.
//!
//! Every write is versioned: it names the version its writer loaded and
//! changes nothing when the stored session is newer (`Written::Stale`). That
//! is what makes one database safe under many processes: a process holding an
//! old copy of a session can never overwrite what another one wrote.

mod group_commit;
pub mod inbox;
mod inbox_pg;
pub mod memory;
mod message_json;
pub mod migrations;
pub mod postgres;
pub mod readback;
pub mod traces;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde::Serialize;

use crate::conversation::{Message, SessionRecord};
use crate::error_type::ErrorType;
use crate::ids::SessionId;

pub use inbox::{Inbox, InboxBounds, InboxItem};
pub use traces::{StoredTrace, TraceBounds};

/// A stamp that changes on every write of a session and never repeats
/// within a store (not even for a session deleted and created again under
/// its id); 0 stands for "not stored". A write names the version its writer
/// loaded and commits only if the session still has it.
pub type Version = u64;

/// A session as loaded: its record, every message of its tree, and the
/// version a write based on it must name.
#[derive(Clone, Debug, PartialEq)]
pub struct SessionSnapshot {
    pub record: SessionRecord,
    pub messages: Vec<Arc<Message>>,
    pub version: Version,
}

/// What a versioned write did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub enum Written {
    /// Committed; the session now has this version.
    Committed(Version),
    /// The stored session is not at the expected version (another writer got
    /// there first, or it was deleted): nothing changed. The writer reloads
    /// and decides again.
    Stale,
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
    Unavailable(StoreCause),
    /// Anything else the store could not do.
    Failed(StoreCause),
}

impl StoreError {
    /// The word the transports send for this failure: `DatabaseError` (503,
    /// try later) when the database is unreachable, `internal` otherwise.
    pub fn error_type(&self) -> ErrorType {
        match self {
            StoreError::Unavailable(_) => ErrorType::DatabaseError,
            StoreError::Failed(_) => ErrorType::Internal,
        }
    }

    /// The cause and its fix, when the operator can fix it: a database that
    /// does not exist (SQLSTATE 3D000: `createdb` it), or credentials the
    /// server refused (class 28). `None` for the rest (a network fault).
    pub fn remedy(&self) -> Option<String> {
        let StoreError::Unavailable(cause) = self else {
            return None;
        };
        let message = cause.message.as_str();
        if message.ends_with("(3D000)") {
            // The server's sentence: `database "name" does not exist`.
            let name = message.split('"').nth(1).unwrap_or("<name>");
            return Some(format!(
                "database \"{name}\" does not exist; create it with `createdb {name}` \
                 (the runtime applies its migrations on the next request)"
            ));
        }
        if message.contains("(28") {
            return Some(format!(
                "the database refused the credentials of DATABASE_URL ({message})"
            ));
        }
        None
    }

    fn cause(&self) -> &StoreCause {
        match self {
            StoreError::Unavailable(cause) | StoreError::Failed(cause) => cause,
        }
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Unavailable(cause) => write!(f, "database unavailable: {cause}"),
            StoreError::Failed(cause) => write!(f, "store failed: {cause}"),
        }
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.cause().source()
    }
}

/// Why a store operation failed: a sentence for the log, and the driver's
/// error when there was one, kept (not flattened into the sentence) so a
/// caller can walk `source()` down to the I/O or server error. Shared, so a
/// group commit can hand the one failure to every waiting writer.
#[derive(Clone, Debug)]
pub struct StoreCause {
    message: String,
    source: Option<Arc<dyn std::error::Error + Send + Sync>>,
}

impl StoreCause {
    pub fn new(message: impl Into<String>) -> StoreCause {
        StoreCause {
            message: message.into(),
            source: None,
        }
    }

    /// `message` describes `source`, which stays reachable through `source()`.
    pub fn caused_by(
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> StoreCause {
        StoreCause {
            message: message.into(),
            source: Some(Arc::new(source)),
        }
    }

    pub fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|source| source as &(dyn std::error::Error + 'static))
    }
}

impl fmt::Display for StoreCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// Two causes are the same failure when they say the same; the source is
/// detail for the log (driver errors have no equality of their own).
impl PartialEq for StoreCause {
    fn eq(&self, other: &StoreCause) -> bool {
        self.message == other.message
    }
}

impl Eq for StoreCause {}

impl From<String> for StoreCause {
    fn from(message: String) -> StoreCause {
        StoreCause::new(message)
    }
}

impl From<&str> for StoreCause {
    fn from(message: &str) -> StoreCause {
        StoreCause::new(message)
    }
}

pub type StoreResult<T> = Result<T, StoreError>;

/// What [`Store::write`] gives: the outcome itself, or a future of it.
pub enum WriteOutcome {
    Now(StoreResult<Written>),
    Later(BoxFuture<'static, StoreResult<Written>>),
}

/// Session storage. Every method is one atomic change.
pub trait Store: Send + Sync + 'static {
    /// The session and its messages, or `None` if it was never stored.
    fn load(&self, id: &SessionId) -> BoxFuture<'static, StoreResult<Option<SessionSnapshot>>>;

    /// Writes the session row (everything but messages), if the stored
    /// session is at version `expected` (0: not stored yet).
    fn save_session(
        &self,
        expected: Version,
        record: &SessionRecord,
    ) -> BoxFuture<'static, StoreResult<Written>> {
        self.save_messages(expected, record, &[])
    }

    /// Writes the session row (leaf, turn number, pending action, ...) and
    /// inserts or replaces these messages, in one transaction, if the stored
    /// session is at version `expected` (0: not stored yet). Otherwise nothing
    /// changes and the answer is `Written::Stale`. Only the messages given are
    /// written; the others stay as stored. The messages are shared, not
    /// lent: a store may keep them as they are (the memory store does, until
    /// `settle`), since nothing changes a message once written: a new
    /// version is a new message.
    fn save_messages(
        &self,
        expected: Version,
        record: &SessionRecord,
        messages: &[Arc<Message>],
    ) -> BoxFuture<'static, StoreResult<Written>>;

    /// `save_messages`, and in the same write (committed with it or not at
    /// all) marks the inbox items `taken` as taken by this session: the
    /// drain of the inbox into the turn this write starts. A store that
    /// keeps no inbox (the memory store: the `Inbox` itself is the only
    /// copy) just saves.
    fn save_messages_taking(
        &self,
        expected: Version,
        record: &SessionRecord,
        messages: &[Arc<Message>],
        _taken: &[String],
    ) -> BoxFuture<'static, StoreResult<Written>> {
        self.save_messages(expected, record, messages)
    }

    /// The actor's write: `save_session` (no `messages`) or
    /// `save_messages_taking`. A store that never waits (the memory store)
    /// answers at once, so a turn's two writes box no future.
    fn write(
        &self,
        expected: Version,
        record: &SessionRecord,
        messages: Option<&[Arc<Message>]>,
        taken: &[String],
    ) -> WriteOutcome {
        WriteOutcome::Later(match messages {
            None => self.save_session(expected, record),
            Some(messages) => self.save_messages_taking(expected, record, messages, taken),
        })
    }

    /// Stores a new inbox item. A store without an inbox table ignores it.
    fn inbox_add(&self, _item: &InboxItem) -> BoxFuture<'static, StoreResult<()>> {
        Box::pin(std::future::ready(Ok(())))
    }

    /// The stored inbox items, oldest first (only waiting ones with
    /// `Some(false)`, only surfaced ones with `Some(true)`); `None` from a
    /// store without an inbox table.
    fn inbox_list(
        &self,
        _surfaced: Option<bool>,
        _limit: u32,
        _offset: u32,
    ) -> BoxFuture<'static, StoreResult<Option<Vec<InboxItem>>>> {
        Box::pin(std::future::ready(Ok(None)))
    }

    /// Marks a stored item surfaced: `Some(item)` as it is now, `None` from
    /// a store without an inbox table or without that item.
    fn inbox_mark_surfaced(&self, _id: &str) -> BoxFuture<'static, StoreResult<Option<InboxItem>>> {
        Box::pin(std::future::ready(Ok(None)))
    }

    /// Every waiting stored item, oldest first (loaded at startup).
    fn inbox_waiting(&self) -> BoxFuture<'static, StoreResult<Vec<InboxItem>>> {
        Box::pin(std::future::ready(Ok(Vec::new())))
    }

    /// The most recently written session, for an inject that names none.
    fn most_recent(&self) -> BoxFuture<'static, StoreResult<Option<SessionId>>> {
        let page = self.list(None, 1, 0);
        Box::pin(async move { Ok(page.await?.into_iter().next().map(|s| s.session_id)) })
    }

    /// The session's actor has left memory: what the store kept in the
    /// actor's own shapes for its next turns can now be made compact. Only
    /// a memory store has anything to do.
    fn settle(&self, _id: &SessionId) {}

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

    /// Stores one turn's trace, then drops the session's oldest traces past
    /// `bounds`. Deleting the session deletes its traces. A store that keeps
    /// none ignores it.
    fn save_trace(
        &self,
        _trace: StoredTrace,
        _bounds: TraceBounds,
    ) -> BoxFuture<'static, StoreResult<()>> {
        Box::pin(std::future::ready(Ok(())))
    }

    /// A page of the session's traces, oldest first.
    fn traces(
        &self,
        _id: &SessionId,
        _limit: u32,
        _offset: u32,
    ) -> BoxFuture<'static, StoreResult<Vec<Arc<StoredTrace>>>> {
        Box::pin(std::future::ready(Ok(Vec::new())))
    }

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
