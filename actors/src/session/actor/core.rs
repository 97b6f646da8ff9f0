//! The session protocol as a state machine, `decide(&mut State, Input) ->
//! Plan`: no I/O, no clock, no actix. The state changes in place (a tree may
//! be megabytes), as in quinn-proto and rustls. Handlers: the `impl State` files.

use std::collections::VecDeque;
use std::sync::Arc;

use tokio::sync::oneshot;

use crate::contract::{ChatRequest, HostContext, OutputMode};
use crate::conversation::StoredContext;
use crate::conversation::{Message as StoredMessage, MessageTree, PendingAction, SessionRecord};
use crate::events::{EventSink, StatusEvent, TurnEvent, TurnStatus};
use crate::ids::{MessageId, SessionId};
use crate::session::recovery::{recover, Recovered};
use crate::session::{Caller, SessionDeps, SessionError, SessionInfo, SessionResult, TurnAccepted};
use crate::store::{SessionSnapshot, StoreError, StoreResult, Version, Written};
use crate::turn::{CancelHandle, SteeringSender};

/// Steering a live turn may have waiting; more is a 409 (no queue without end).
pub(super) const MAX_QUEUED_STEERING: usize = 32;
/// Reloads in a row for one request before it is answered 503.
const MAX_RELOADS: u32 = 8;

pub(in crate::session) type ReplyTo<T> = oneshot::Sender<SessionResult<T>>;

/// The actor's copy of the session and what it is doing.
pub(super) struct State {
    pub(super) id: SessionId,
    pub(super) deps: Arc<SessionDeps>,
    pub(super) loaded: Loaded,
    pub(super) record: SessionRecord,
    pub(super) tree: MessageTree,
    pub(super) phase: Phase,
    /// Requests that arrived while a turn was live, answered in order once it ends.
    pub(super) waiting: VecDeque<Waiting>,
    pub(super) reloads: u32,
    /// Just loaded or written, no outside request since (`refuse`).
    pub(super) current: bool,
    /// Never stored.
    pub(super) screenshot: Option<Arc<str>>,
    pub(super) next_turn_id: u64,
    pub(super) spare_out: Vec<Out>,
}

/// What the copy is of. Every write names the stored version, so a copy
/// another process has since changed never overwrites anything.
pub(super) enum Loaded {
    Loading,
    /// The first load failed: requests already queued get its error.
    Failed(StoreError),
    /// Never written, or deleted: a message or join creates it.
    Absent,
    Stored(Version),
}

/// What the session is doing. The pending call lives only here (the stored
/// row is derived from it): a pending call and a live turn never coexist.
pub(super) enum Phase {
    Idle,
    Running(LiveTurn),
    AwaitingHost(Arc<PendingAction>),
}

impl Phase {
    pub(super) fn awaiting(pending: Option<Arc<PendingAction>>) -> Phase {
        pending.map_or(Phase::Idle, Phase::AwaitingHost)
    }
}

pub(super) struct LiveTurn {
    pub(super) id: u64,
    pub(super) cancel: CancelHandle,
    pub(super) cancelling: bool,
    pub(super) steering: SteeringSender,
    pub(super) sink: EventSink,
    /// Steering promoted to a turn of its own is theirs.
    pub(super) caller: Caller,
    pub(super) output_mode: OutputMode,
    /// For the final response of a turn whose session was deleted under it.
    pub(super) model: Arc<str>,
    pub(super) message_id: MessageId,
}

/// A chat request waiting for a write, a reload or the live turn. Boxed:
/// it is most of a kilobyte, and moves through every turn's inputs.
pub(super) type Waiting = Box<Chat>;

pub(super) struct Chat {
    pub(super) request: Box<ChatRequest>,
    pub(super) sink: EventSink,
    pub(super) caller: Caller,
    pub(super) reply: ReplyTo<TurnAccepted>,
}

/// A request other than a chat message, with its reply (`admin.rs`).
pub(in crate::session) enum Request {
    /// Boxed: a context is a third of a kilobyte, and joins are rare.
    Join(Option<Box<HostContext>>, ReplyTo<()>),
    Owner(Option<Arc<str>>, ReplyTo<()>),
    Repair(ReplyTo<SessionInfo>),
    Cancel(ReplyTo<bool>),
    Delete(ReplyTo<bool>),
    Info(ReplyTo<SessionInfo>),
    Path(Option<MessageId>, ReplyTo<Vec<StoredMessage>>),
    Tree(ReplyTo<Vec<StoredMessage>>),
}

impl Request {
    /// Reads and a delete do not count for the idle clock.
    pub(super) fn is_activity(&self) -> bool {
        matches!(
            self,
            Request::Join(..) | Request::Owner(..) | Request::Repair(_) | Request::Cancel(_)
        )
    }

    pub(super) fn refuse(self, error: SessionError, plan: &mut Plan) {
        match self {
            Request::Join(_, reply) | Request::Owner(_, reply) => plan.answer(reply, Err(error)),
            Request::Repair(reply) | Request::Info(reply) => plan.answer(reply, Err(error)),
            Request::Cancel(reply) | Request::Delete(reply) => plan.answer(reply, Err(error)),
            Request::Path(_, reply) | Request::Tree(reply) => plan.answer(reply, Err(error)),
        }
    }
}

pub(super) enum Input {
    Chat(Waiting),
    Request(Caller, Request),
    TurnEnded(super::turns::TurnEnded),
    RunWaiting,
    Written(StoreResult<Written>, Box<Writing>),
    Loaded(StoreResult<Option<SessionSnapshot>>, Box<InFlight>),
    Deleted(StoreResult<bool>, ReplyTo<bool>, bool),
}

/// What waits on a store operation: it goes on once committed (`commit`), is
/// decided again on a reloaded copy (`redo`), or is told of a failure (`fail`).
#[allow(clippy::large_enum_variant)]
pub(super) enum InFlight {
    /// The first load, or its recovery.
    Nothing,
    Chat(Waiting),
    Result(Waiting, super::accepting::AppliedResult),
    Request(Caller, Request),
    Turn(super::turns::FinishedTurn),
    /// A reload's recovery write, then what the reload was for.
    Recovered(Box<InFlight>),
}

/// A versioned write of the session row and (unless `None`) these messages.
pub(super) struct Write {
    pub(super) version: Version,
    pub(super) record: SessionRecord,
    pub(super) messages: Option<Messages>,
    /// Inbox items this write takes for the turn it opens (`inbox.rs`).
    pub(super) taken: Vec<Arc<crate::store::InboxItem>>,
}

/// One or two messages (a reply with its summary) need no allocation.
pub(super) type Messages = smallvec::SmallVec<[Arc<StoredMessage>; 2]>;

/// Boxed once, from the plan to the outcome.
pub(super) struct Writing {
    pub(super) write: Write,
    pub(super) in_flight: InFlight,
}

pub(super) enum Io {
    Write(Box<Writing>),
    Load(Box<InFlight>),
    /// The reply, and whether this copy was stored.
    Delete(ReplyTo<bool>, bool),
}

/// What the shell does after an input, in field order.
#[derive(Default)]
pub(super) struct Plan {
    pub(super) out: Vec<Out>,
    pub(super) trace: Option<super::turns::TraceEnd>,
    pub(super) cancel: bool,
    pub(super) start: Option<Box<super::turns::Start>>,
    pub(super) io: Option<Io>,
    /// Feed `RunWaiting` again (through the mailbox if a write holds it).
    pub(super) run_waiting: bool,
    pub(super) life: Option<Life>,
}

pub(super) enum Out {
    Answer(Answer),
    Event(EventSink, TurnEvent),
}

/// The actor's own lifetime (`SessionActor::live`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Life {
    /// A turn or result ended: hibernate if configured.
    Settled,
    StopIfAbsent,
    LoadFailed,
    Stop,
}

macro_rules! answers {
    ($($variant:ident($t:ty)),*) => {
        /// A reply and its answer (a session's info boxed: it is most of the size).
        pub(super) enum Answer {
            $($variant(ReplyTo<$t>, SessionResult<$t>),)*
            Info(ReplyTo<SessionInfo>, Box<SessionResult<SessionInfo>>),
        }
        impl Answer {
            /// An asker that is gone (its connection closed) is no error.
            pub(super) fn send(self) {
                let _ = match self {
                    $(Answer::$variant(reply, result) => reply.send(result).map_err(drop),)*
                    Answer::Info(reply, result) => reply.send(*result).map_err(drop),
                };
            }
        }
        $(impl From<(ReplyTo<$t>, SessionResult<$t>)> for Answer {
            fn from((reply, result): (ReplyTo<$t>, SessionResult<$t>)) -> Answer {
                Answer::$variant(reply, result)
            }
        })*
    };
}
answers!(
    Accepted(TurnAccepted),
    Done(()),
    Flag(bool),
    Messages(Vec<StoredMessage>)
);

impl From<(ReplyTo<SessionInfo>, SessionResult<SessionInfo>)> for Answer {
    fn from((reply, result): (ReplyTo<SessionInfo>, SessionResult<SessionInfo>)) -> Answer {
        Answer::Info(reply, Box::new(result))
    }
}

impl Plan {
    pub(super) fn answer<T>(&mut self, reply: ReplyTo<T>, result: SessionResult<T>)
    where
        Answer: From<(ReplyTo<T>, SessionResult<T>)>,
    {
        self.out.push(Out::Answer((reply, result).into()));
    }

    pub(super) fn event(&mut self, sink: &EventSink, event: TurnEvent) {
        self.out.push(Out::Event(sink.clone(), event));
    }

    /// Not built for an HTTP reply, which drops them.
    pub(super) fn status(&mut self, sink: &EventSink, id: &SessionId, status: TurnStatus) {
        if sink.reads_events() {
            let session_id = id.to_string();
            self.event(sink, TurnEvent::Status(StatusEvent { status, session_id }));
        }
    }

    pub(super) fn write(&mut self, write: Write, in_flight: InFlight) {
        // Allocated first, so the two are moved in once (see `spawn_turn`).
        let writing = Box::write(Box::new_uninit(), Writing { write, in_flight });
        self.io(Io::Write(writing));
    }

    /// At most one store operation a plan: nothing is decided beside it.
    pub(super) fn io(&mut self, io: Io) {
        debug_assert!(self.io.is_none(), "two store operations in one plan");
        self.io = Some(io);
    }
}

pub(super) fn decide(state: &mut State, input: Input) -> Plan {
    let out = std::mem::take(&mut state.spare_out);
    let mut plan = Plan {
        out,
        ..Plan::default()
    };
    if let Input::Chat(_) | Input::Request(..) = &input {
        state.reloads = 0;
    }
    match input {
        Input::Chat(waiting) => {
            // Time has passed: another process may have written meanwhile.
            state.current = false;
            state.accept(waiting, &mut plan);
        }
        Input::Request(caller, request) => state.handle(caller, request, &mut plan),
        Input::TurnEnded(ended) => state.finish_turn(ended, &mut plan),
        Input::RunWaiting => state.run_waiting(&mut plan),
        Input::Written(written, writing) => state.written(written, *writing, &mut plan),
        Input::Loaded(loaded, in_flight) => state.loaded(loaded, in_flight, &mut plan),
        Input::Deleted(deleted, reply, existed) => {
            state.deleted(deleted, reply, existed, &mut plan)
        }
    }
    plan
}

// ---- the one write loop: commit, or reload and decide again ---------------

impl State {
    pub(super) fn new(id: SessionId, deps: Arc<SessionDeps>) -> State {
        State {
            record: SessionRecord::new(id.clone(), crate::conversation::now_millis()),
            id,
            deps,
            loaded: Loaded::Loading,
            tree: MessageTree::default(),
            phase: Phase::Idle,
            waiting: VecDeque::new(),
            reloads: 0,
            current: false,
            screenshot: None,
            next_turn_id: 0,
            spare_out: Vec::new(),
        }
    }

    fn written(&mut self, written: StoreResult<Written>, writing: Writing, plan: &mut Plan) {
        let Writing { write, in_flight } = writing;
        match written {
            Ok(Written::Committed(version)) => {
                self.loaded = Loaded::Stored(version);
                self.current = true;
                self.reloads = 0;
                self.commit(write, in_flight, plan);
            }
            Ok(Written::Stale) => self.reload(in_flight, plan),
            Err(error) => {
                log::warn!("session {}: a write failed: {error}", self.id);
                match in_flight {
                    InFlight::Recovered(in_flight) => self.redo(*in_flight, plan),
                    InFlight::Turn(turn) => {
                        // `DatabaseError` (HTTP 503) when unreachable, `internal` otherwise.
                        let message = "Database not reachable; the turn's result was not saved";
                        self.turn_not_saved(turn, error.error_type(), message, plan);
                    }
                    in_flight => self.fail(in_flight, error.into(), plan),
                }
            }
        }
    }

    /// What waited on a committed write goes on: memory changes only now.
    fn commit(&mut self, write: Write, in_flight: InFlight, plan: &mut Plan) {
        match in_flight {
            InFlight::Nothing => {}
            InFlight::Recovered(in_flight) => self.redo(*in_flight, plan),
            InFlight::Chat(waiting) => self.message_stored(*waiting, write, plan),
            InFlight::Result(waiting, applied) => {
                self.result_applied(*waiting, applied, write, plan)
            }
            InFlight::Request(_, request) => self.request_written(request, write, plan),
            InFlight::Turn(turn) => self.turn_stored(turn, write.record, plan),
        }
    }

    fn loaded(
        &mut self,
        loaded: StoreResult<Option<SessionSnapshot>>,
        in_flight: Box<InFlight>,
        plan: &mut Plan,
    ) {
        let first = matches!(self.loaded, Loaded::Loading);
        match loaded {
            Ok(None) if first => self.loaded = Loaded::Absent,
            Ok(snapshot) => match self.apply_snapshot(snapshot) {
                // Recovery is a pure function of what is stored, so it is written
                // after it is applied: a crash or a stale write recomputes it.
                Some(recovery) => plan.write(recovery, InFlight::Recovered(in_flight)),
                None => self.redo(*in_flight, plan),
            },
            Err(error) if first => {
                log::warn!("session {}: load failed: {error}", self.id);
                self.loaded = Loaded::Failed(error);
                plan.life = Some(Life::LoadFailed);
            }
            Err(error) => self.fail(*in_flight, error.into(), plan),
        }
    }

    /// Returns the write of what recovery changed. A live turn stays live
    /// (`place_turn` reconciles).
    fn apply_snapshot(&mut self, snapshot: Option<SessionSnapshot>) -> Option<Write> {
        self.current = true;
        let running = matches!(self.phase, Phase::Running(_));
        let Some(snapshot) = snapshot else {
            self.loaded = Loaded::Absent;
            self.record = SessionRecord::new(self.id.clone(), crate::conversation::now_millis());
            self.tree = MessageTree::default();
            if !running {
                self.phase = Phase::Idle;
            }
            return None;
        };
        self.loaded = Loaded::Stored(snapshot.version);
        let Recovered {
            mut record,
            messages,
            changed,
        } = recover(snapshot);
        let changed: Messages = changed.iter().map(|&i| messages[i].clone()).collect();
        let write = (!changed.is_empty()).then(|| self.write(record.clone(), Some(changed)));
        // While a turn runs, another process's pending call stays in the
        // record until it ends (`finish_turn`), so no write meanwhile drops it.
        if !running {
            self.phase = Phase::awaiting(record.pending_action.take());
        }
        self.record = record;
        self.tree = MessageTree::from_messages(messages);
        write
    }

    /// Loads the session changed by another writer and decides `in_flight` again.
    pub(super) fn reload(&mut self, in_flight: InFlight, plan: &mut Plan) {
        self.reloads += 1;
        if self.reloads > MAX_RELOADS {
            self.reloads = 0;
            let error = SessionError::ActorUnavailable(
                "the session kept changing under other writers".into(),
            );
            return self.fail(in_flight, error, plan);
        }
        log::debug!("session {}: changed by another writer; reloading", self.id);
        plan.io(Io::Load(Box::new(in_flight)));
    }

    fn redo(&mut self, in_flight: InFlight, plan: &mut Plan) {
        match in_flight {
            InFlight::Nothing => {}
            InFlight::Chat(waiting) | InFlight::Result(waiting, _) => self.accept(waiting, plan),
            InFlight::Request(caller, request) => self.handle(caller, request, plan),
            InFlight::Turn(turn) => self.place_turn(turn, plan),
            InFlight::Recovered(in_flight) => self.redo(*in_flight, plan),
        }
    }

    fn fail(&mut self, in_flight: InFlight, error: SessionError, plan: &mut Plan) {
        match in_flight {
            InFlight::Nothing => {}
            InFlight::Chat(waiting) | InFlight::Result(waiting, _) => {
                plan.answer(waiting.reply, Err(error))
            }
            InFlight::Request(_, request) => request.refuse(error, plan),
            InFlight::Turn(turn) => {
                log::warn!("session {}: no reload to store a turn: {error}", self.id);
                let message = error.to_string();
                self.turn_not_saved(turn, error.error_type(), &message, plan);
            }
            InFlight::Recovered(in_flight) => self.fail(*in_flight, error, plan),
        }
    }

    /// Answers `error`; a 409 only once the copy is known current (another
    /// process may have made the call pending or stored the parent since).
    pub(super) fn refuse(&mut self, waiting: Waiting, error: SessionError, plan: &mut Plan) {
        if self.current || !matches!(error, SessionError::Conflict(_)) {
            return plan.answer(waiting.reply, Err(error));
        }
        self.reload(InFlight::Chat(waiting), plan);
    }
}

impl State {
    /// The row as the store should hold it: the pending call from the phase
    /// (or, while a turn runs, one another process made, found on a reload).
    pub(super) fn stored_record(&self) -> SessionRecord {
        let mut record = self.record.clone();
        if let Phase::AwaitingHost(pending) = &self.phase {
            record.pending_action = Some(pending.clone());
        }
        record
    }

    pub(super) fn pending(&self) -> Option<&Arc<PendingAction>> {
        match &self.phase {
            Phase::AwaitingHost(pending) => Some(pending),
            _ => None,
        }
    }

    pub(super) fn is_stored(&self) -> bool {
        matches!(self.loaded, Loaded::Stored(_))
    }

    pub(super) fn is_running(&self) -> bool {
        matches!(self.phase, Phase::Running(_))
    }

    pub(super) fn write(&self, record: SessionRecord, messages: Option<Messages>) -> Write {
        Write {
            version: self.version(),
            record,
            messages,
            taken: Vec::new(),
        }
    }

    /// 0: not stored yet.
    pub(super) fn version(&self) -> Version {
        match self.loaded {
            Loaded::Stored(version) => version,
            _ => 0,
        }
    }

    /// Whether a turn is live (asked to stop).
    pub(super) fn cancel_live(&mut self, plan: &mut Plan) -> bool {
        let Phase::Running(live) = &mut self.phase else {
            return false;
        };
        live.cancelling = true;
        plan.cancel = true;
        true
    }

    /// One not stored is `NotFound` to an admin, `Forbidden` to anyone else:
    /// a refusal never tells whether someone else's session exists.
    pub(super) fn authorize_read(&self, caller: &Caller) -> SessionResult<()> {
        match &self.loaded {
            Loaded::Loading => Err(SessionError::ActorUnavailable(
                "session still loading".into(),
            )),
            Loaded::Failed(error) => Err(error.clone().into()),
            Loaded::Absent if caller.admin => Err(SessionError::NotFound(self.id.to_string())),
            Loaded::Stored(_) if caller.may_touch(self.record.owner_id.as_deref()) => Ok(()),
            _ => Err(SessionError::forbidden(&self.id)),
        }
    }

    /// A session not stored yet becomes the caller's by this write.
    pub(super) fn authorize_write(&mut self, caller: &Caller) -> SessionResult<()> {
        if !matches!(self.loaded, Loaded::Absent) {
            return self.authorize_read(caller);
        }
        self.record.owner_id = Some(caller.principal.clone());
        Ok(())
    }

    /// This request's context, or the session's last.
    pub(super) fn current_context<'a>(
        &'a self,
        request: &'a ChatRequest,
    ) -> Option<&'a HostContext> {
        let kept = (self.record.host_context.as_deref()).map(StoredContext::context);
        request.host_context.as_ref().or(kept)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::test_support::{deps_on, ScriptedModel};
    use super::*;
    use crate::store::memory::MemoryStore;

    fn unwrap_io(plan: Plan) -> Io {
        plan.io.expect("a store operation")
    }

    /// The write loop without a runtime: a message whose write finds the
    /// session changed is reloaded and decided again, and answered only
    /// when its second write commits (which starts its turn).
    #[test]
    fn a_stale_write_reloads_and_decides_again() {
        let deps = deps_on(
            Arc::new(MemoryStore::new()),
            ScriptedModel::new(Vec::new()),
            1,
        );
        let mut state = State::new(SessionId::new("s"), Arc::new(deps));
        assert!(decide(
            &mut state,
            Input::Loaded(Ok(None), Box::new(InFlight::Nothing))
        )
        .io
        .is_none());
        let body = json!({"id": "m1", "session_id": "s", "content": "hi"});
        let request = ChatRequest::parse(&body).expect("a valid body");
        let (sink, _events) = EventSink::new(true);
        let (reply, mut answered) = oneshot::channel();
        let caller = Caller::new("tester", false);
        let chat = Input::Chat(Box::new(Chat {
            request: Box::new(request),
            sink,
            caller,
            reply,
        }));
        let Io::Write(writing) = unwrap_io(decide(&mut state, chat)) else {
            panic!("the message is written first");
        };
        let stale = Input::Written(Ok(Written::Stale), writing);
        let Io::Load(waiter) = unwrap_io(decide(&mut state, stale)) else {
            panic!("a stale write reloads");
        };
        let Io::Write(writing) = unwrap_io(decide(&mut state, Input::Loaded(Ok(None), waiter)))
        else {
            panic!("decided again on the reloaded copy");
        };
        assert!(
            answered.try_recv().is_err(),
            "nothing answered before a commit"
        );
        let plan = decide(
            &mut state,
            Input::Written(Ok(Written::Committed(1)), writing),
        );
        assert!(plan.start.is_some() && state.is_running() && state.version() == 1);
        assert!(matches!(
            plan.out.first(),
            Some(Out::Answer(Answer::Accepted(_, Ok(_))))
        ));
    }
}
