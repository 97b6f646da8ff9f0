//! The session actor: the one owner of a session's tree, last host context,
//! pending call with its queue, and live turn. Every request for the session is
//! a message in its mailbox, so ordering, duplicates and supersession are
//! decided here, one at a time. Decisions are made before any await; store
//! writes block the mailbox (`ctx.wait`) and memory changes only after they
//! succeed (write-through).

mod accepting;
mod admin;
mod idempotency;
mod screenshot;
#[cfg(test)]
mod test_support;
mod turns;

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use futures_util::future::BoxFuture;
use futures_util::FutureExt;
use tokio::sync::oneshot;

use super::caller::Caller;
use super::deps::SessionDeps;
use super::error::SessionError;
use super::grace::Grace;
use super::messages::*;
use super::recovery::recover;
use super::registry::{IdleCheck, SessionRegistry};
use crate::contract::{ChatRequest, HostContext, OutputMode};
use crate::conversation::{
    now_millis, Message as StoredMessage, MessageTree, PendingAction, SessionRecord, StoredContext,
};
use crate::events::{Decision, EventSink, StatusEvent, TurnEvent, TurnStatus};
use crate::ids::{MessageId, SessionId};
use crate::store::{SessionSnapshot, StoreError, StoreResult, Version, Written};
use crate::turn::{CancelHandle, SteeringSender};

/// How long an actor whose load failed keeps answering its queued requests.
const FAILED_LOAD_LINGER: Duration = Duration::from_millis(100);
/// How long the actor of a session that does not exist outlives a read of it.
const ABSENT_LINGER: Duration = Duration::from_millis(100);
/// How long a session waiting for a host result keeps its (unstored) screenshot.
const SCREENSHOT_GRACE: Duration = Duration::from_secs(300);
/// Steering messages a live turn may have waiting; more is a 409 until the
/// turn takes them (at its next model request), so a client cannot queue
/// without end.
const MAX_QUEUED_STEERING: usize = 32;
/// Title length taken from the first user message.
const MAX_TITLE_CHARS: usize = 80;
/// How many times in a row one request may find the session changed by
/// another process and decide again before it is answered 503 (send again).
const MAX_RELOADS: u32 = 8;

/// Where a request's decision is answered, now or after a store write.
type ReplyTo<T> = oneshot::Sender<Result<T, SessionError>>;
type Reply = ReplyTo<TurnAccepted>;

/// What to do once the session was loaded again after a stale write: decide
/// the request again on the fresh state (or answer the reload's error).
type Redo =
    Box<dyn FnOnce(&mut SessionActor, &mut Context<SessionActor>, Result<(), SessionError>)>;

pub struct SessionActor {
    id: SessionId,
    deps: Arc<SessionDeps>,
    registry: Arc<SessionRegistry>,
    state: Loaded,
    record: SessionRecord,
    /// Whether the session row exists in the store (a session is created by
    /// its first message or join, not by a read).
    stored: bool,
    /// The stored version this actor's copy is of; every write names it, so
    /// a copy another process has since changed can never overwrite anything.
    version: Version,
    /// Reloads for the request at hand (bounded by `MAX_RELOADS`); reset by
    /// each outside request and each committed write.
    n_reloads: u32,
    /// Whether the copy is known current: just loaded or written, with no
    /// outside request handled since. A refusal decided on a copy that is not
    /// is checked against the store first (`refuse`).
    fresh: bool,
    tree: MessageTree,
    phase: Phase,
    /// Requests that arrived while a turn was live, answered in order once it ends.
    deferred: VecDeque<Deferred>,
    /// The newest screenshot (data URI); never stored, lost on restart.
    /// Shared with each turn's plan rather than copied (it may be megabytes).
    screenshot: Option<Arc<str>>,
    last_activity: Instant,
    /// When the idle sweeper should next ask this actor (`schedule_idle_check`).
    idle_check: Arc<IdleCheck>,
    /// A slot to stay a moment after the first exchange (`session::grace`).
    grace: Option<Grace>,
    next_turn_id: u64,
}

enum Loaded {
    Loading,
    Ready,
    Failed(StoreError),
}

/// What the session is doing. The pending call lives only here (the stored
/// row is derived from it), so there is no way to hold a pending call and a
/// live turn at once.
enum Phase {
    Idle,
    Running(LiveTurn),
    AwaitingHost(Arc<PendingAction>),
}

struct LiveTurn {
    id: u64,
    cancel: CancelHandle,
    /// Set once cancellation was requested, so a second cancel is a no-op.
    cancelling: bool,
    steering: SteeringSender,
    sink: EventSink,
    output_mode: OutputMode,
    model: Arc<str>,
    /// The assistant message the turn extends, for a final response sent
    /// without `finish_turn` (the session was deleted mid-turn).
    message_id: MessageId,
}

/// A turn that ended, on its way to the store.
struct FinishedTurn {
    live: LiveTurn,
    /// Shared with the store once written.
    assistant: Arc<StoredMessage>,
    next: Option<Arc<PendingAction>>,
    decision: Option<Decision>,
    /// Why the turn did not complete, if it did not.
    failure: Option<turns::TurnFailure>,
    /// Whether the reply becomes the active leaf (false once another
    /// process's newer message superseded the turn).
    on_path: bool,
    /// A summary node made for this turn (history compaction), stored with
    /// it; shared with the store like the reply.
    summary: Option<Arc<StoredMessage>>,
}

struct Deferred {
    request: ChatRequest,
    sink: EventSink,
    reply: Reply,
}

impl SessionActor {
    pub fn new(
        id: SessionId,
        deps: Arc<SessionDeps>,
        registry: Arc<SessionRegistry>,
        idle_check: Arc<IdleCheck>,
    ) -> SessionActor {
        let record = SessionRecord::new(id.clone(), now_millis());
        SessionActor {
            id,
            deps,
            registry,
            state: Loaded::Loading,
            record,
            stored: false,
            version: 0,
            n_reloads: 0,
            fresh: false,
            tree: MessageTree::default(),
            phase: Phase::Idle,
            deferred: VecDeque::new(),
            screenshot: None,
            last_activity: Instant::now(),
            idle_check,
            grace: None,
            next_turn_id: 0,
        }
    }
}

impl Actor for SessionActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        let load = self.deps.store.load(&self.id);
        // Nothing else is handled until the session is loaded.
        ctx.wait(
            load.into_actor(self)
                .map(|loaded, actor, ctx| actor.on_loaded(loaded, ctx)),
        );
    }

    fn stopped(&mut self, ctx: &mut Context<Self>) {
        self.registry.remove(&self.id, &ctx.address());
        // The memory store kept this actor's messages as they are while it
        // was resident (`Store::settle`); now it may compact them.
        self.deps.store.settle(&self.id);
    }
}

// ---- loading ---------------------------------------------------------------

impl SessionActor {
    fn on_loaded(&mut self, loaded: StoreResult<Option<SessionSnapshot>>, ctx: &mut Context<Self>) {
        let snapshot = match loaded {
            Ok(Some(snapshot)) => snapshot,
            Ok(None) => {
                self.state = Loaded::Ready;
                return;
            }
            Err(error) => {
                log::warn!("session {}: load failed: {error}", self.id);
                self.state = Loaded::Failed(error);
                // Leave the registry now, so the next request starts a fresh
                // actor that tries the store again; linger just long enough to
                // answer (with the load error) what is already in the mailbox.
                self.registry.remove(&self.id, &ctx.address());
                ctx.run_later(FAILED_LOAD_LINGER, |_actor, ctx| ctx.stop());
                return;
            }
        };
        let recovery = self.apply_snapshot(Some(snapshot));
        self.write_recovery(recovery, ctx, Box::new(|_actor, _ctx, _written| {}));
    }

    /// Takes a loaded session (or its absence) as this actor's copy, and
    /// returns what recovery changed and must be written back. A live turn of
    /// this actor stays live: its end is reconciled with the store then.
    fn apply_snapshot(&mut self, snapshot: Option<SessionSnapshot>) -> Option<Recovery> {
        self.state = Loaded::Ready;
        self.fresh = true;
        let running = matches!(self.phase, Phase::Running(_));
        let Some(snapshot) = snapshot else {
            // Never stored, or deleted by another process since.
            self.record = SessionRecord::new(self.id.clone(), now_millis());
            self.tree = MessageTree::default();
            self.stored = false;
            self.version = 0;
            if !running {
                self.phase = Phase::Idle;
            }
            return None;
        };
        self.version = snapshot.version;
        let mut record = snapshot.record.clone();
        let recovered = recover(snapshot);
        record.pending_action = None;
        self.record = record;
        let mut stored_record = self.record.clone();
        stored_record.pending_action = recovered.pending.clone();
        if !running {
            self.phase = match recovered.pending {
                Some(pending) => Phase::AwaitingHost(pending),
                None => Phase::Idle,
            };
        }
        let changed: Vec<Arc<StoredMessage>> = recovered
            .changed
            .iter()
            .map(|&index| recovered.messages[index].clone())
            .collect();
        self.tree = MessageTree::from_messages(recovered.messages);
        self.stored = true;
        (!changed.is_empty()).then_some(Recovery {
            record: stored_record,
            changed,
        })
    }

    /// Writes what recovery changed, then calls `then`. Recovery is a pure
    /// function of what is stored, so writing its result after applying it is
    /// safe: a crash here recomputes the same thing; a stale write (another
    /// process wrote first) reloads and recovers again.
    fn write_recovery(&mut self, recovery: Option<Recovery>, ctx: &mut Context<Self>, then: Redo) {
        let Some(recovery) = recovery else {
            then(self, ctx, Ok(()));
            return;
        };
        let write =
            self.deps
                .store
                .save_messages(self.version, &recovery.record, &recovery.changed);
        self.persist(ctx, write, move |actor, ctx, written| match written {
            Ok(Written::Committed(version)) => {
                actor.committed(version);
                then(actor, ctx, Ok(()));
            }
            Ok(Written::Stale) => actor.reload_then(ctx, then),
            Err(error) => {
                log::warn!(
                    "session {}: could not store recovered calls: {error}",
                    actor.id
                );
                then(actor, ctx, Ok(()));
            }
        });
    }

    /// A write found the session changed by another writer: loads it again
    /// (mailbox held) and hands over to `redo`, which decides the request
    /// again on the fresh state before anything is answered.
    fn reload_then(&mut self, ctx: &mut Context<Self>, redo: Redo) {
        self.n_reloads += 1;
        if self.n_reloads > MAX_RELOADS {
            self.n_reloads = 0;
            redo(
                self,
                ctx,
                Err(SessionError::ActorUnavailable(
                    "the session kept changing under other writers".into(),
                )),
            );
            return;
        }
        log::debug!("session {}: changed by another writer; reloading", self.id);
        let load = self.deps.store.load(&self.id);
        self.persist(ctx, load, move |actor, ctx, loaded| match loaded {
            Ok(snapshot) => {
                let recovery = actor.apply_snapshot(snapshot);
                actor.write_recovery(recovery, ctx, redo);
            }
            Err(error) => redo(actor, ctx, Err(error.into())),
        });
    }

    /// Answers `error`, a 409 decided on this actor's copy, once the copy is
    /// known to be current: another process may have made the call pending
    /// or stored the parent since this copy was loaded, so a refusal on a
    /// copy not known fresh reloads and decides the request again. Requests
    /// answered right after a write or load (deferred ones, a redecision)
    /// are refused at once, as are refusals that do not depend on the
    /// session (validation).
    fn refuse(
        &mut self,
        request: ChatRequest,
        sink: EventSink,
        reply: Reply,
        error: SessionError,
        ctx: &mut Context<Self>,
    ) {
        if self.fresh || !matches!(error, SessionError::Conflict(_)) {
            let _ = reply.send(Err(error));
            return;
        }
        self.reload_then(ctx, redo_request(request, sink, reply));
    }

    /// A write of this actor committed: its copy is now at `version`.
    fn committed(&mut self, version: Version) {
        self.version = version;
        self.fresh = true;
        self.stored = true;
        self.n_reloads = 0;
    }
}

/// Calls recovery resolved on load, with the row to write them with.
struct Recovery {
    record: SessionRecord,
    changed: Vec<Arc<StoredMessage>>,
}

// ---- small helpers ---------------------------------------------------------

impl SessionActor {
    /// The session row as the store should hold it: the pending call comes from the phase.
    fn stored_record(&self) -> SessionRecord {
        let mut record = self.record.clone();
        record.pending_action = match &self.phase {
            Phase::AwaitingHost(pending) => Some(pending.clone()),
            _ => None,
        };
        record
    }

    /// Runs a store write with the mailbox held, then `then` with its result.
    /// A write that is done when first polled (the memory store's, for a
    /// session of ordinary size) goes on at once: holding the mailbox for
    /// it would box and schedule a future that has nothing left to wait for
    /// (two of them per turn). Callers put nothing after `persist` that
    /// `then` must run before.
    fn persist<T: 'static>(
        &mut self,
        ctx: &mut Context<Self>,
        mut write: BoxFuture<'static, StoreResult<T>>,
        then: impl FnOnce(&mut Self, &mut Context<Self>, StoreResult<T>) + 'static,
    ) {
        if let Some(written) = (&mut write).now_or_never() {
            then(self, ctx, written);
            return;
        }
        ctx.wait(
            write
                .into_actor(self)
                .map(move |written, actor, ctx| then(actor, ctx, written)),
        );
    }

    fn ready(&self) -> Result<(), SessionError> {
        match &self.state {
            Loaded::Ready => Ok(()),
            Loaded::Loading => Err(SessionError::ActorUnavailable(
                "session still loading".into(),
            )),
            Loaded::Failed(error) => Err(error.clone().into()),
        }
    }

    /// Whether `caller` may read or change this session. One that is not
    /// stored is `NotFound` to an admin and `Forbidden` to anyone else, so a
    /// refusal never tells whether someone else's session exists.
    fn authorize_read(&self, caller: &Caller) -> Result<(), SessionError> {
        self.ready()?;
        if !self.stored {
            return Err(if caller.admin {
                SessionError::NotFound(self.id.to_string())
            } else {
                SessionError::forbidden(&self.id)
            });
        }
        self.check_owner(caller)
    }

    /// Whether `caller` may write to this session (a message or a join). A
    /// session that is not stored yet is created by this write, so it becomes
    /// the caller's: the owner is fixed by the first write and never changes.
    fn authorize_write(&mut self, caller: &Caller) -> Result<(), SessionError> {
        self.ready()?;
        if !self.stored {
            self.record.owner_id = Some(caller.principal.clone());
            return Ok(());
        }
        self.check_owner(caller)
    }

    fn check_owner(&self, caller: &Caller) -> Result<(), SessionError> {
        if caller.may_touch(self.record.owner_id.as_deref()) {
            Ok(())
        } else {
            Err(SessionError::forbidden(&self.id))
        }
    }

    /// The context of this request's turn: its own (whole), or the session's
    /// last. Borrowed: a context may carry megabytes of attachments.
    fn current_context<'a>(&'a self, request: &'a ChatRequest) -> Option<&'a HostContext> {
        request.host_context.as_ref().or(self
            .record
            .host_context
            .as_deref()
            .map(StoredContext::context))
    }
}

/// The reply end a request's decision answers (now, or after a store write)
/// and the future its handler returns. A reply dropped unanswered means the
/// actor stopped first: nothing was decided, so the caller may send again.
fn reply_channel<T: Send + 'static>() -> (ReplyTo<T>, ResponseFuture<Result<T, SessionError>>) {
    let (reply, answer) = oneshot::channel();
    let answered = Box::pin(async move {
        answer
            .await
            .unwrap_or_else(|_| Err(SessionError::ActorUnavailable("session stopped".into())))
    });
    (reply, answered)
}

/// Decides a chat request again once the session was reloaded.
fn redo_request(request: ChatRequest, sink: EventSink, reply: Reply) -> Redo {
    Box::new(move |actor, ctx, reloaded| match reloaded {
        Ok(()) => actor.accept(request, sink, reply, ctx),
        Err(error) => {
            let _ = reply.send(Err(error));
        }
    })
}

fn status(sink: &EventSink, session_id: &SessionId, status: TurnStatus) {
    // Two a turn: not built for an HTTP reply, which drops them.
    if !sink.reads_events() {
        return;
    }
    sink.send(TurnEvent::Status(StatusEvent {
        status,
        session_id: session_id.to_string(),
    }));
}
