//! The session actor: the one owner of a session's tree, last host context,
//! pending call with its queue, and live turn. Every request for the session is
//! a message in its mailbox, so ordering, duplicates and supersession are
//! decided here, one at a time. Decisions are made before any await; store
//! writes block the mailbox (`ctx.wait`) and memory changes only after they
//! succeed (write-through).

mod accepting;
mod admin;
mod core;
mod idempotency;
mod inbox;
#[cfg(test)]
mod model_test;
mod owner;
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
use super::recovery::recover;
use super::registry::{IdleCheck, SessionRegistry};
use super::requests::*;
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

pub struct SessionActor {
    id: SessionId,
    deps: Arc<SessionDeps>,
    registry: Arc<SessionRegistry>,
    /// What this actor's copy of the session is of.
    loaded: Loaded,
    record: SessionRecord,
    /// Reloads for the request at hand (bounded by `MAX_RELOADS`); reset by
    /// each outside request and each committed write.
    reloads: u32,
    /// Whether the copy is known current: just loaded or written, with no
    /// outside request handled since. A refusal decided on a copy that is not
    /// is checked against the store first (`refuse`).
    current: bool,
    tree: MessageTree,
    phase: Phase,
    /// Requests that arrived while a turn was live, answered in order once it ends.
    waiting: VecDeque<Waiting>,
    /// The newest screenshot (data URI); never stored, lost on restart.
    /// Shared with each turn's plan rather than copied (it may be megabytes).
    screenshot: Option<Arc<str>>,
    last_activity: Instant,
    /// When the idle sweeper should next ask this actor (`schedule_idle_check`).
    idle_check: Arc<IdleCheck>,
    /// A slot to stay a moment after the first exchange (`session::grace`).
    grace: Option<Grace>,
    next_turn_id: u64,
    /// Inbox items the last committed message took, for its turn to open
    /// with (`inbox.rs`).
    drained: Vec<Arc<crate::store::InboxItem>>,
}

/// What the actor's copy of the session is: one state, with what it owns.
enum Loaded {
    /// The first load has not finished; nothing is handled before it does.
    Loading,
    /// The first load failed: requests already queued get its error.
    Failed(StoreError),
    /// Not in the store (never written, or deleted): its first message or
    /// join creates it.
    Absent,
    /// In the store, at this version. Every write names it, so a copy
    /// another process has since changed can never overwrite anything.
    Stored(Version),
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
    /// Who started the turn: steering promoted to a turn of its own is theirs.
    caller: Caller,
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

/// A chat request in flight: the one shape in which a message, steering or
/// continuation waits, whether for a store write, a reload or the live turn.
struct Waiting {
    request: ChatRequest,
    sink: EventSink,
    /// Checked again whenever the request is decided again.
    caller: Caller,
    reply: Reply,
}

/// A join waiting for its write.
struct Joining {
    caller: Caller,
    host_context: Option<HostContext>,
    reply: ReplyTo<()>,
}

/// A repair waiting for its write.
struct Repairing {
    caller: Caller,
    reply: ReplyTo<SessionInfo>,
}

/// What waits on a store write: decided again on the reloaded copy when the
/// write finds the session changed by another process (`redo`), or told
/// when it fails (`fail`). Made only then: a write that commits hands its
/// waiter straight to its continuation, so the size of a chat request here
/// costs nothing on the way of a turn.
#[allow(clippy::large_enum_variant)]
enum InFlight {
    /// Nothing: the first load's recovery.
    Nothing,
    Chat(Waiting),
    Join(Joining),
    Repair(Repairing),
    Owner(owner::OwnerChange),
    Turn(FinishedTurn),
    /// A reload's recovery write, then what the reload was for.
    Recovered(Box<InFlight>),
}

impl From<Waiting> for InFlight {
    fn from(waiting: Waiting) -> InFlight {
        InFlight::Chat(waiting)
    }
}

impl From<Joining> for InFlight {
    fn from(joining: Joining) -> InFlight {
        InFlight::Join(joining)
    }
}

impl From<Repairing> for InFlight {
    fn from(repairing: Repairing) -> InFlight {
        InFlight::Repair(repairing)
    }
}

impl From<FinishedTurn> for InFlight {
    fn from(turn: FinishedTurn) -> InFlight {
        InFlight::Turn(turn)
    }
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
            loaded: Loaded::Loading,
            record,
            reloads: 0,
            current: false,
            tree: MessageTree::default(),
            phase: Phase::Idle,
            waiting: VecDeque::new(),
            screenshot: None,
            last_activity: Instant::now(),
            idle_check,
            grace: None,
            next_turn_id: 0,
            drained: Vec::new(),
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

// ---- loading, and the one write loop -------------------------------------

impl SessionActor {
    fn on_loaded(&mut self, loaded: StoreResult<Option<SessionSnapshot>>, ctx: &mut Context<Self>) {
        let snapshot = match loaded {
            Ok(Some(snapshot)) => snapshot,
            Ok(None) => {
                self.loaded = Loaded::Absent;
                return;
            }
            Err(error) => {
                log::warn!("session {}: load failed: {error}", self.id);
                self.loaded = Loaded::Failed(error);
                // Leave the registry now, so the next request starts a new
                // actor that tries the store again; linger just long enough to
                // answer (with the load error) what is already in the mailbox.
                self.registry.remove(&self.id, &ctx.address());
                ctx.run_later(FAILED_LOAD_LINGER, |_actor, ctx| ctx.stop());
                return;
            }
        };
        let recovery = self.apply_snapshot(Some(snapshot));
        self.recover_then(recovery, InFlight::Nothing, ctx);
    }

    /// Takes a loaded session (or its absence) as this actor's copy, and
    /// returns what recovery changed and must be written back. A live turn of
    /// this actor stays live: its end is reconciled with the store then.
    fn apply_snapshot(&mut self, snapshot: Option<SessionSnapshot>) -> Option<Recovery> {
        self.current = true;
        let running = matches!(self.phase, Phase::Running(_));
        let Some(snapshot) = snapshot else {
            // Never stored, or deleted by another process since.
            self.loaded = Loaded::Absent;
            self.record = SessionRecord::new(self.id.clone(), now_millis());
            self.tree = MessageTree::default();
            if !running {
                self.phase = Phase::Idle;
            }
            return None;
        };
        self.loaded = Loaded::Stored(snapshot.version);
        let mut record = snapshot.record.clone();
        let recovered = recover(snapshot);
        record.pending_action = None;
        self.record = record;
        let mut stored_record = self.record.clone();
        stored_record.pending_action = recovered.pending.clone();
        if running {
            // Another process's call, pending in the store: kept in the
            // record until this actor's turn ends (`finish_turn`), so no
            // write meanwhile drops it.
            self.record.pending_action = recovered.pending;
        } else {
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
        (!changed.is_empty()).then_some(Recovery {
            record: stored_record,
            changed,
        })
    }

    /// Writes what recovery changed, then decides `in_flight` again.
    /// Recovery is a pure function of what is stored, so writing its result
    /// after applying it is safe: a crash here recomputes the same thing; a
    /// stale write (another process wrote first) reloads and recovers again.
    fn recover_then(
        &mut self,
        recovery: Option<Recovery>,
        in_flight: InFlight,
        ctx: &mut Context<Self>,
    ) {
        let Some(recovery) = recovery else {
            self.redo(in_flight, ctx);
            return;
        };
        let write =
            self.deps
                .store
                .save_messages(self.version(), &recovery.record, &recovery.changed);
        let in_flight = InFlight::Recovered(Box::new(in_flight));
        self.write(ctx, write, in_flight, |actor, ctx, in_flight| {
            actor.redo(in_flight, ctx)
        });
    }

    /// Runs a versioned store write with the mailbox held. The one place a
    /// write's outcome is taken: committed, `on_commit` goes on with what
    /// waited; stale (another process wrote first), the session is loaded
    /// again and what waited is decided again on the reloaded copy; failed,
    /// what waited is told.
    fn write<W: Into<InFlight> + 'static>(
        &mut self,
        ctx: &mut Context<Self>,
        write: BoxFuture<'static, StoreResult<Written>>,
        waiter: W,
        on_commit: impl FnOnce(&mut Self, &mut Context<Self>, W) + 'static,
    ) {
        self.persist(ctx, write, move |actor, ctx, written| match written {
            Ok(Written::Committed(version)) => {
                actor.committed(version);
                on_commit(actor, ctx, waiter);
            }
            Ok(Written::Stale) => actor.reload(waiter.into(), ctx),
            Err(error) => actor.write_failed(waiter.into(), error, ctx),
        });
    }

    /// A write found the session changed by another writer: loads it again
    /// (mailbox held) and decides `in_flight` again on the reloaded copy
    /// before anything is answered.
    fn reload(&mut self, in_flight: InFlight, ctx: &mut Context<Self>) {
        self.reloads += 1;
        if self.reloads > MAX_RELOADS {
            self.reloads = 0;
            let error = SessionError::ActorUnavailable(
                "the session kept changing under other writers".into(),
            );
            self.fail(in_flight, error, ctx);
            return;
        }
        log::debug!("session {}: changed by another writer; reloading", self.id);
        let load = self.deps.store.load(&self.id);
        self.persist(ctx, load, move |actor, ctx, loaded| match loaded {
            Ok(snapshot) => {
                let recovery = actor.apply_snapshot(snapshot);
                actor.recover_then(recovery, in_flight, ctx);
            }
            Err(error) => actor.fail(in_flight, error.into(), ctx),
        });
    }

    /// Decides what waited again, on the reloaded copy.
    fn redo(&mut self, in_flight: InFlight, ctx: &mut Context<Self>) {
        match in_flight {
            InFlight::Nothing => {}
            InFlight::Chat(waiting) => self.accept(waiting, ctx),
            InFlight::Join(joining) => self.join(joining, ctx),
            InFlight::Repair(repairing) => self.repair(repairing, ctx),
            InFlight::Owner(change) => self.set_owner(change, ctx),
            InFlight::Turn(turn) => self.place_turn(turn, ctx),
            InFlight::Recovered(in_flight) => self.redo(*in_flight, ctx),
        }
    }

    /// Tells what waited that it could not be decided.
    fn fail(&mut self, in_flight: InFlight, error: SessionError, ctx: &mut Context<Self>) {
        match in_flight {
            InFlight::Nothing => {}
            InFlight::Chat(waiting) => answer(waiting.reply, Err(error)),
            InFlight::Join(joining) => answer(joining.reply, Err(error)),
            InFlight::Repair(repairing) => answer(repairing.reply, Err(error)),
            InFlight::Owner(change) => change.refuse(error),
            InFlight::Turn(turn) => {
                log::warn!(
                    "session {}: could not reload to store the turn's result: {error}",
                    self.id
                );
                let message = error.to_string();
                self.turn_not_saved(turn, error.error_type(), &message, ctx);
            }
            InFlight::Recovered(in_flight) => self.fail(*in_flight, error, ctx),
        }
    }

    /// A write failed in the store itself.
    fn write_failed(&mut self, in_flight: InFlight, error: StoreError, ctx: &mut Context<Self>) {
        match in_flight {
            InFlight::Recovered(in_flight) => {
                log::warn!(
                    "session {}: could not store recovered calls: {error}",
                    self.id
                );
                self.redo(*in_flight, ctx);
            }
            InFlight::Nothing => {
                log::warn!(
                    "session {}: could not store recovered calls: {error}",
                    self.id
                )
            }
            InFlight::Turn(turn) => {
                log::warn!(
                    "session {}: could not store the turn's result: {error}",
                    self.id
                );
                // `DatabaseError` (HTTP 503) when unreachable, `internal` otherwise.
                let message = "Database not reachable; the turn's result was not saved";
                self.turn_not_saved(turn, error.error_type(), message, ctx);
            }
            in_flight => self.fail(in_flight, error.into(), ctx),
        }
    }

    /// Answers `error`, a 409 decided on this actor's copy, once the copy is
    /// known to be current: another process may have made the call pending
    /// or stored the parent since this copy was loaded, so a refusal on a
    /// copy not known current reloads and decides the request again.
    /// Requests answered right after a write or load (waiting ones, a
    /// redecision) are refused at once, as are refusals that do not depend
    /// on the session (validation).
    fn refuse(&mut self, waiting: Waiting, error: SessionError, ctx: &mut Context<Self>) {
        if self.current || !matches!(error, SessionError::Conflict(_)) {
            answer(waiting.reply, Err(error));
            return;
        }
        self.reload(waiting.into(), ctx);
    }

    /// A write of this actor committed: its copy is now at `version`.
    fn committed(&mut self, version: Version) {
        self.loaded = Loaded::Stored(version);
        self.current = true;
        self.reloads = 0;
    }
}

/// Calls recovery resolved on load, with the row to write them with.
struct Recovery {
    record: SessionRecord,
    changed: Vec<Arc<StoredMessage>>,
}

/// Sends a request's answer: the one place replies go out. An asker that
/// is gone (its connection closed) is no error; the answer is dropped.
fn answer<T>(reply: ReplyTo<T>, result: Result<T, SessionError>) {
    let _ = reply.send(result);
}

// ---- small helpers ---------------------------------------------------------

impl SessionActor {
    /// The session row as the store should hold it: the pending call comes
    /// from the phase (or, while a turn runs, is one another process made,
    /// found on a reload).
    fn stored_record(&self) -> SessionRecord {
        let mut record = self.record.clone();
        if let Phase::AwaitingHost(pending) = &self.phase {
            record.pending_action = Some(pending.clone());
        }
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
        match &self.loaded {
            Loaded::Absent | Loaded::Stored(_) => Ok(()),
            Loaded::Loading => Err(SessionError::ActorUnavailable(
                "session still loading".into(),
            )),
            Loaded::Failed(error) => Err(error.clone().into()),
        }
    }

    /// What the pure decisions (`core.rs`) read of this copy.
    fn view(&self) -> core::View<'_> {
        core::View {
            id: &self.id,
            stored: self.is_stored(),
            tree: &self.tree,
            leaf: self.record.active_leaf.as_ref(),
            pending: match &self.phase {
                Phase::AwaitingHost(pending) => Some(pending),
                _ => None,
            },
            running: matches!(self.phase, Phase::Running(_)),
        }
    }

    fn is_stored(&self) -> bool {
        matches!(self.loaded, Loaded::Stored(_))
    }

    /// The version every write names (0: not stored yet).
    fn version(&self) -> Version {
        match self.loaded {
            Loaded::Stored(version) => version,
            _ => 0,
        }
    }

    /// Whether `caller` may read or change this session. One that is not
    /// stored is `NotFound` to an admin and `Forbidden` to anyone else, so a
    /// refusal never tells whether someone else's session exists.
    fn authorize_read(&self, caller: &Caller) -> Result<(), SessionError> {
        self.ready()?;
        if !self.is_stored() {
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
        if !self.is_stored() {
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
    let (reply, receiver) = oneshot::channel();
    let answered = Box::pin(async move {
        receiver
            .await
            .unwrap_or_else(|_| Err(SessionError::ActorUnavailable("session stopped".into())))
    });
    (reply, answered)
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
