//! The session actor: the one owner of a session's tree, last host context,
//! pending call with its queue, and live turn. Every request for the session is
//! a message in its mailbox, so ordering, duplicates and supersession are
//! decided here, one at a time. Decisions are made before any await; store
//! writes block the mailbox (`ctx.wait`) and memory changes only after they
//! succeed (write-through).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use futures_util::future::BoxFuture;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use super::caller::Caller;
use super::error::SessionError;
use super::messages::*;
use super::recovery::recover;
use super::registry::SessionRegistry;
use super::runtime::SessionDeps;
use crate::contract::{
    AttachmentPurpose, AttachmentSource, ChatRequest, Continuation, HostContext, MessageType,
    OutputMode, ToolOutcome,
};
use crate::conversation::{
    now_millis, CallOutcome, CallStatus, Message as StoredMessage, MessageTree, NoteOrigin,
    PendingAction, Role, Segment, SessionRecord, ToolRecord,
};
use crate::events::{
    Decision, EventSink, FinalResponse, NoteEvent, PendingToolCall, StatusEvent, ToolResultEvent,
    TurnErrorEvent, TurnEvent, TurnStatus,
};
use crate::ids::{MessageId, SessionId, ToolCallId};
use crate::prompt::host_block::render_host_context;
use crate::store::{SessionSnapshot, StoreError, StoreResult, Version, Written};
use crate::turn::{
    CancelHandle, SteeringNote, TurnEnd, TurnInput, TurnLimits, TurnOutput, TurnPlan,
};

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

type Reply = oneshot::Sender<Result<TurnAccepted, SessionError>>;

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
    screenshot: Option<String>,
    last_activity: Instant,
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
    AwaitingHost(PendingAction),
}

struct LiveTurn {
    id: u64,
    cancel: CancelHandle,
    /// Set once cancellation was requested, so a second cancel is a no-op.
    cancelling: bool,
    steering: mpsc::Sender<SteeringNote>,
    sink: EventSink,
    output_mode: OutputMode,
    model: String,
    /// The assistant message the turn extends, for a final response sent
    /// without `finish_turn` (the session was deleted mid-turn).
    message_id: MessageId,
}

/// A turn that ended, on its way to the store.
struct FinishedTurn {
    live: LiveTurn,
    assistant: StoredMessage,
    next: Option<PendingAction>,
    decision: Option<Decision>,
    /// (error type, message, retry allowed) of a turn that did not complete.
    failure: Option<(String, String, bool)>,
    /// Whether the reply becomes the active leaf (false once another
    /// process's newer message superseded the turn).
    on_path: bool,
    /// A summary node made for this turn (history compaction), stored with it.
    summary: Option<StoredMessage>,
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
        let changed: Vec<StoredMessage> = recovered
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
                Err(SessionError::Restarting(
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
    changed: Vec<StoredMessage>,
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
    fn persist<T: 'static>(
        &mut self,
        ctx: &mut Context<Self>,
        write: BoxFuture<'static, StoreResult<T>>,
        then: impl FnOnce(&mut Self, &mut Context<Self>, StoreResult<T>) + 'static,
    ) {
        ctx.wait(
            write
                .into_actor(self)
                .map(move |written, actor, ctx| then(actor, ctx, written)),
        );
    }

    fn ready(&self) -> Result<(), SessionError> {
        match &self.state {
            Loaded::Ready => Ok(()),
            Loaded::Loading => Err(SessionError::Restarting("session still loading".into())),
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
            self.record.owner_id = Some(caller.principal.to_string());
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

    fn find_call(&self, call_id: &ToolCallId) -> Option<&ToolRecord> {
        self.tree.all().iter().rev().find_map(|message| {
            message.segments.iter().find_map(|segment| match segment {
                Segment::ToolGroup { tools } => tools.iter().find(|tool| &tool.id == call_id),
                _ => None,
            })
        })
    }

    fn info(&self) -> SessionInfo {
        SessionInfo {
            session_id: self.id.to_string(),
            owner_id: self.record.owner_id.clone(),
            title: self.record.title.clone(),
            created_at: self.record.created_at,
            turn_number: self.record.turn_number,
            message_count: self.tree.len(),
            active_leaf: self.record.active_leaf.as_ref().map(|id| id.to_string()),
            turn_running: matches!(self.phase, Phase::Running(_)),
            pending_action: match &self.phase {
                Phase::AwaitingHost(pending) => Some(pending.clone()),
                _ => None,
            },
            host_context: self
                .record
                .host_context
                .as_deref()
                .map(HostContext::to_value),
        }
    }

    /// The context of this request's turn: its own (whole), or the session's last.
    fn current_context(&self, request: &ChatRequest) -> Option<Arc<HostContext>> {
        match &request.host_context {
            Some(context) => Some(Arc::new(context.clone())),
            None => self.record.host_context.clone(),
        }
    }

    /// A new message's turn has a screenshot only if the message brings one:
    /// an older turn's screenshot is not offered again.
    fn reset_screenshot(&mut self, request: &ChatRequest) {
        self.screenshot = None;
        self.take_screenshot(request);
    }

    /// Keeps the newest screenshot of a request for `look_at_screen`.
    fn take_screenshot(&mut self, request: &ChatRequest) {
        let newest = request.attachments.iter().rev().find_map(|attachment| {
            match (&attachment.purpose, &attachment.source) {
                (AttachmentPurpose::Screenshot, AttachmentSource::DataUri(uri)) => {
                    Some(uri.clone())
                }
                _ => None,
            }
        });
        if newest.is_some() {
            self.screenshot = newest;
        }
    }
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

/// The request's context as the session keeps it for later messages: without
/// its attachments, which belong to this message (references are stored with
/// it; screenshots are never stored).
fn shared_context(request: &ChatRequest) -> Option<Arc<HostContext>> {
    request.host_context.as_ref().map(|context| {
        Arc::new(HostContext {
            attachments: Vec::new(),
            ..context.clone()
        })
    })
}

fn reference_attachments(request: &ChatRequest) -> Vec<crate::contract::Attachment> {
    request
        .attachments
        .iter()
        .filter(|attachment| attachment.purpose == AttachmentPurpose::Reference)
        .cloned()
        .collect()
}

/// The reply's text: its text segments, a blank line between the answers of
/// separate model requests (before and after a tool result or steering).
fn message_text(message: &StoredMessage) -> String {
    let texts: Vec<&str> = message
        .segments
        .iter()
        .filter_map(|segment| match segment {
            Segment::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    texts.join("\n\n")
}

fn tool_records_mut(message: &mut StoredMessage) -> impl Iterator<Item = &mut ToolRecord> {
    message
        .segments
        .iter_mut()
        .flat_map(|segment| match segment {
            Segment::ToolGroup { tools } => tools.iter_mut(),
            _ => [].iter_mut(),
        })
}

fn interrupt_unresolved(message: &mut StoredMessage, status: CallStatus) {
    for tool in tool_records_mut(message) {
        if !tool.has_result() {
            tool.interrupt(status);
        }
    }
}

/// What stands in a host result for a screenshot removed from it.
const SCREENSHOT_PLACEHOLDER: &str = "[screenshot removed; call look_at_screen to see it]";

/// Removes `data:image/...` URIs anywhere in a host result (a whole string or
/// inside one), returning the cleaned value and the last screenshot found
/// (offered to `look_at_screen`).
fn strip_screenshots(value: &Value, found: &mut Option<String>) -> Value {
    match value {
        Value::String(text) if text.contains("data:image/") => {
            Value::String(strip_data_uris(text, found))
        }
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|item| strip_screenshots(item, found))
                .collect(),
        ),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(key, item)| (key.clone(), strip_screenshots(item, found)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Replaces each image data URI inside `text`; a URI ends at whitespace, a
/// quote, a bracket or the end of the text (base64 has none of them).
fn strip_data_uris(text: &str, found: &mut Option<String>) -> String {
    let mut kept = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("data:image/") {
        kept.push_str(&rest[..start]);
        let from_uri = &rest[start..];
        let end = from_uri
            .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '(' | ')' | '<' | '>'))
            .unwrap_or(from_uri.len());
        *found = Some(from_uri[..end].to_string());
        kept.push_str(SCREENSHOT_PLACEHOLDER);
        rest = &from_uri[end..];
    }
    kept.push_str(rest);
    kept
}

fn pending_for(
    message: &StoredMessage,
    call_id: &ToolCallId,
    queued: Vec<ToolCallId>,
    output_mode: OutputMode,
) -> Option<PendingAction> {
    let record = message.segments.iter().find_map(|segment| match segment {
        Segment::ToolGroup { tools } => tools.iter().find(|tool| &tool.id == call_id),
        _ => None,
    })?;
    Some(PendingAction {
        tool_call_id: call_id.clone(),
        tool_name: record.name.clone(),
        arguments: record.input.clone(),
        assistant_message_id: message.id.clone(),
        queued,
        output_mode,
    })
}

fn pending_event(pending: &PendingAction) -> PendingToolCall {
    PendingToolCall {
        tool_name: pending.tool_name.clone(),
        call_id: pending.tool_call_id.to_string(),
        arguments: pending.arguments.clone(),
        queued: pending.queued.iter().map(|id| id.to_string()).collect(),
    }
}

fn status(sink: &EventSink, session_id: &SessionId, status: TurnStatus) {
    sink.send(TurnEvent::Status(StatusEvent {
        status,
        session_id: session_id.to_string(),
    }));
}

/// Announces the host-context note a continuation put after the tool results
/// (its segment takes an index the client would otherwise never see).
fn announce_context_note(sink: &EventSink, assistant: &StoredMessage) {
    let index = assistant.segments.len().saturating_sub(1);
    if let Some(Segment::Note {
        origin: NoteOrigin::HostContext,
        ..
    }) = assistant.segments.last()
    {
        sink.send(TurnEvent::Note(NoteEvent {
            origin: NoteOrigin::HostContext,
            message_id: None,
            content: None,
            segment_id: format!("{}:{index}", assistant.id),
            segment_index: index,
            segment_kind: "host_context",
        }));
    }
}

// ---- handlers --------------------------------------------------------------

impl Handler<SendMessage> for SessionActor {
    type Result = ResponseFuture<Result<TurnAccepted, SessionError>>;

    fn handle(&mut self, message: SendMessage, ctx: &mut Context<Self>) -> Self::Result {
        self.last_activity = Instant::now();
        // Time has passed since this copy was loaded or written: another
        // process may have written the session meanwhile.
        self.fresh = false;
        self.n_reloads = 0;
        let taken = message
            .slot
            .lock()
            .map(|mut slot| slot.take())
            .unwrap_or(None);
        let Some((request, sink)) = taken else {
            return Box::pin(async {
                Err(SessionError::Internal(
                    "a message was delivered twice".into(),
                ))
            });
        };
        let (reply, answer) = oneshot::channel();
        if let Err(error) = self.authorize_write(&message.caller) {
            return Box::pin(async move { Err(error) });
        }
        self.accept(request, sink, reply, ctx);
        Box::pin(async move {
            answer
                .await
                .unwrap_or_else(|_| Err(SessionError::Restarting("session stopped".into())))
        })
    }
}

impl Handler<JoinSession> for SessionActor {
    type Result = ResponseFuture<Result<(), SessionError>>;

    fn handle(&mut self, join: JoinSession, ctx: &mut Context<Self>) -> Self::Result {
        self.last_activity = Instant::now();
        self.n_reloads = 0;
        let (reply, answer) = oneshot::channel();
        self.join(join.caller, join.host_context, reply, ctx);
        Box::pin(async move {
            answer
                .await
                .unwrap_or_else(|_| Err(SessionError::Restarting("session stopped".into())))
        })
    }
}

/// Sent by the actor to itself: go on answering deferred requests.
struct RunDeferred;

impl actix::Message for RunDeferred {
    type Result = ();
}

impl Handler<RunDeferred> for SessionActor {
    type Result = ();

    fn handle(&mut self, _: RunDeferred, ctx: &mut Context<Self>) {
        self.run_deferred(ctx);
    }
}

impl SessionActor {
    /// Creates the session if needed and keeps the joining page's context.
    fn join(
        &mut self,
        caller: Caller,
        host_context: Option<HostContext>,
        reply: oneshot::Sender<Result<(), SessionError>>,
        ctx: &mut Context<Self>,
    ) {
        if let Err(error) = self.authorize_write(&caller) {
            let _ = reply.send(Err(error));
            return;
        }
        if host_context.is_none() && self.stored {
            let _ = reply.send(Ok(()));
            return;
        }
        let mut record = self.stored_record();
        if let Some(context) = &host_context {
            record.host_context = Some(Arc::new(context.clone()));
        }
        let write = self.deps.store.save_session(self.version, &record);
        self.persist(ctx, write, move |actor, ctx, written| match written {
            Ok(Written::Committed(version)) => {
                actor.committed(version);
                if host_context.is_some() {
                    actor.record.host_context = host_context.map(Arc::new);
                }
                let _ = reply.send(Ok(()));
            }
            // Joined on an old copy: join again on the fresh one, so the old
            // pending call (or leaf) is never written back.
            Ok(Written::Stale) => actor.reload_then(
                ctx,
                Box::new(move |actor, ctx, reloaded| match reloaded {
                    Ok(()) => actor.join(caller, host_context, reply, ctx),
                    Err(error) => {
                        let _ = reply.send(Err(error));
                    }
                }),
            ),
            Err(error) => {
                let _ = reply.send(Err(error.into()));
            }
        });
    }
}

/// Sent by the actor's own turn task when the turn ends.
struct TurnFinished {
    turn_id: u64,
    output: TurnOutput,
    history: crate::history::HistoryOutcome,
}

impl actix::Message for TurnFinished {
    type Result = ();
}

impl Handler<TurnFinished> for SessionActor {
    type Result = ();

    fn handle(&mut self, finished: TurnFinished, ctx: &mut Context<Self>) {
        self.finish_turn(finished.turn_id, finished.output, finished.history, ctx);
    }
}

impl Handler<CheckIdle> for SessionActor {
    type Result = ();

    fn handle(&mut self, _: CheckIdle, ctx: &mut Context<Self>) {
        self.stop_if_idle(ctx, self.idle_after());
    }
}

/// With an idle timeout of zero (the in-memory default) a session longer than
/// this many messages still stays resident for [`HOT_WINDOW`]: its reload
/// decodes every message, so a conversation in progress would pay for its
/// whole length on every turn. Short sessions (most idle ones) hibernate at
/// once and keep their small serialised form only.
const HOT_MESSAGES: usize = 16;

/// How long a long, idle session's actor stays after its last request when
/// the idle timeout is zero.
const HOT_WINDOW: Duration = Duration::from_secs(5);

/// How long a short session waiting for a host result stays after its turn
/// when the idle timeout is zero, so the continuation finds it resident.
const AWAITING_HOST_WINDOW: Duration = Duration::from_millis(500);

impl SessionActor {
    /// Stops (hibernates) the actor when nothing is live or waiting and it has
    /// been quiet for `after`; the store holds everything it would reload.
    fn stop_if_idle(&self, ctx: &mut Context<Self>, after: Duration) {
        let idle = matches!(self.phase, Phase::Idle | Phase::AwaitingHost(_))
            && self.deferred.is_empty()
            && !ctx.waiting();
        // A screenshot is never stored, so a session waiting for a host result
        // keeps its actor (and the screenshot its resumed turn may look at) a
        // while longer than the idle timeout.
        let holds_screenshot =
            self.screenshot.is_some() && matches!(self.phase, Phase::AwaitingHost(_));
        let after = if holds_screenshot {
            after.max(SCREENSHOT_GRACE)
        } else {
            after
        };
        if idle && self.last_activity.elapsed() >= after {
            ctx.stop();
        }
    }

    /// How long this session may stay idle before its actor stops: the
    /// configured timeout, or with zero, [`HOT_WINDOW`] for a long session.
    fn idle_after(&self) -> Duration {
        match self.deps.config.idle_timeout {
            timeout if !timeout.is_zero() => timeout,
            _ if self.tree.len() > HOT_MESSAGES => HOT_WINDOW,
            // The host's result is usually the very next request.
            _ if matches!(self.phase, Phase::AwaitingHost(_)) => AWAITING_HOST_WINDOW,
            _ => Duration::ZERO,
        }
    }

    /// With an idle timeout of zero, a short session hibernates as soon as its
    /// turn ends (a long one at the sweeper's first look past `HOT_WINDOW`).
    fn hibernate_if_configured(&self, ctx: &mut Context<Self>) {
        if self.idle_after().is_zero() {
            self.stop_if_idle(ctx, Duration::ZERO);
        }
    }
}

impl Handler<CancelTurn> for SessionActor {
    type Result = Result<bool, SessionError>;

    fn handle(&mut self, cancel: CancelTurn, ctx: &mut Context<Self>) -> Self::Result {
        self.last_activity = Instant::now();
        match self.authorize_read(&cancel.caller) {
            Ok(()) => {}
            // An admin cancelling nothing is told so, as before ownership.
            Err(SessionError::NotFound(_)) => {
                self.stop_if_absent(ctx);
                return Ok(false);
            }
            Err(error) => {
                self.stop_if_absent(ctx);
                return Err(error);
            }
        }
        match &mut self.phase {
            Phase::Running(live) => {
                live.cancel.cancel();
                live.cancelling = true;
                Ok(true)
            }
            _ => Ok(false),
        }
    }
}

impl Handler<GetInfo> for SessionActor {
    type Result = Result<SessionInfo, SessionError>;

    fn handle(&mut self, get: GetInfo, ctx: &mut Context<Self>) -> Self::Result {
        let found = self.authorize_read(&get.caller).map(|()| self.info());
        self.stop_if_absent(ctx);
        found
    }
}

impl Handler<GetPath> for SessionActor {
    type Result = Result<Vec<StoredMessage>, SessionError>;

    fn handle(&mut self, request: GetPath, ctx: &mut Context<Self>) -> Self::Result {
        let found = self.authorize_read(&request.caller).and_then(|()| {
            let leaf = request.leaf_id.or_else(|| self.record.active_leaf.clone());
            if let Some(leaf) = &leaf {
                if !self.tree.contains(leaf) {
                    return Err(SessionError::Conflict(format!(
                        "leaf_id {leaf:?} is not a message of this session"
                    )));
                }
            }
            Ok(self
                .tree
                .path_to(leaf.as_ref())
                .into_iter()
                .cloned()
                .collect())
        });
        self.stop_if_absent(ctx);
        found
    }
}

impl Handler<GetTree> for SessionActor {
    type Result = Result<Vec<StoredMessage>, SessionError>;

    fn handle(&mut self, get: GetTree, ctx: &mut Context<Self>) -> Self::Result {
        let found = self
            .authorize_read(&get.caller)
            .map(|()| self.tree.all().to_vec());
        self.stop_if_absent(ctx);
        found
    }
}

impl Handler<RepairSession> for SessionActor {
    type Result = ResponseFuture<Result<SessionInfo, SessionError>>;

    fn handle(&mut self, repair: RepairSession, ctx: &mut Context<Self>) -> Self::Result {
        self.last_activity = Instant::now();
        self.n_reloads = 0;
        let (reply, answer) = oneshot::channel();
        self.repair(repair.caller, reply, ctx);
        Box::pin(async move {
            answer
                .await
                .unwrap_or_else(|_| Err(SessionError::Restarting("session stopped".into())))
        })
    }
}

impl SessionActor {
    /// Resolves every unresolved call as `unknown` and drops the pending call.
    fn repair(
        &mut self,
        caller: Caller,
        reply: oneshot::Sender<Result<SessionInfo, SessionError>>,
        ctx: &mut Context<Self>,
    ) {
        if let Err(error) = self.authorize_read(&caller) {
            self.stop_if_absent(ctx);
            let _ = reply.send(Err(error));
            return;
        }
        if matches!(self.phase, Phase::Running(_)) {
            let _ = reply.send(Err(SessionError::Conflict(
                "a turn is running; cancel it before repairing the session".into(),
            )));
            return;
        }
        let mut changed: Vec<StoredMessage> = Vec::new();
        for message in self.tree.all() {
            let mut message = message.clone();
            let before = message.clone();
            interrupt_unresolved(&mut message, CallStatus::Unknown);
            if message != before {
                changed.push(message);
            }
        }
        let mut record = self.record.clone();
        record.pending_action = None;
        let write = self
            .deps
            .store
            .save_messages(self.version, &record, &changed);
        self.persist(ctx, write, move |actor, ctx, written| match written {
            Ok(Written::Committed(version)) => {
                actor.committed(version);
                for message in changed {
                    actor.tree.upsert(message);
                }
                actor.phase = Phase::Idle;
                let _ = reply.send(Ok(actor.info()));
            }
            Ok(Written::Stale) => actor.reload_then(
                ctx,
                Box::new(move |actor, ctx, reloaded| match reloaded {
                    Ok(()) => actor.repair(caller, reply, ctx),
                    Err(error) => {
                        let _ = reply.send(Err(error));
                    }
                }),
            ),
            Err(error) => {
                let _ = reply.send(Err(error.into()));
            }
        });
    }
}

impl Handler<DeleteSession> for SessionActor {
    type Result = ResponseFuture<Result<bool, SessionError>>;

    fn handle(&mut self, delete: DeleteSession, ctx: &mut Context<Self>) -> Self::Result {
        match self.authorize_read(&delete.caller) {
            // An admin deleting a session this actor did not load still asks
            // the store (another process may have written it), as before.
            Ok(()) | Err(SessionError::NotFound(_)) => {}
            Err(error) => {
                self.stop_if_absent(ctx);
                return Box::pin(async move { Err(error) });
            }
        }
        if let Phase::Running(live) = &self.phase {
            live.cancel.cancel();
        }
        let existed = self.stored;
        let delete = self.deps.store.delete(&self.id);
        let (reply, answer) = oneshot::channel();
        self.persist(ctx, delete, move |actor, ctx, deleted| {
            let outcome = deleted
                .map_err(SessionError::from)
                .map(|found| found || existed);
            if outcome.is_ok() {
                actor.stored = false;
                actor.abandon_live_turn();
                actor.refuse_deferred();
                ctx.stop();
            }
            let _ = reply.send(outcome);
        });
        Box::pin(async move {
            answer
                .await
                .unwrap_or_else(|_| Err(SessionError::Restarting("session stopped".into())))
        })
    }
}

impl SessionActor {
    /// Ends the live turn's stream when the actor stops before `finish_turn`
    /// can (the session was deleted under it): a cancelled final response, a
    /// terminal error, then `completed`, so no caller waits on a turn that is
    /// gone. Nothing is saved: the session no longer exists.
    fn abandon_live_turn(&mut self) {
        let Phase::Running(live) = std::mem::replace(&mut self.phase, Phase::Idle) else {
            return;
        };
        let turn_error = TurnErrorEvent {
            kind: "error",
            message: "The session was deleted; its turn was cancelled.".into(),
            error_type: "cancelled".into(),
            terminal: true,
            retry_allowed: false,
        };
        let final_response = FinalResponse {
            content: (live.output_mode == OutputMode::Text).then(String::new),
            model: live.model,
            streamed: live.sink.streamed,
            session_id: self.id.to_string(),
            turn_number: self.record.turn_number,
            message_id: live.message_id.to_string(),
            usage: crate::conversation::Usage::default(),
            pending_tool_call: None,
            decision: None,
            error: Some(true),
            error_type: Some(turn_error.error_type.clone()),
            error_message: Some(turn_error.message.clone()),
        };
        live.sink
            .send(TurnEvent::FinalResponse(Box::new(final_response)));
        live.sink.send(TurnEvent::Error(turn_error));
        status(&live.sink, &self.id, TurnStatus::Completed);
    }

    /// Messages still waiting for the live turn when the session is deleted
    /// answer 404: the session they were sent to is gone. (A message sent
    /// after the delete starts a new session, as any first message does.)
    fn refuse_deferred(&mut self) {
        for deferred in self.deferred.drain(..) {
            let _ = deferred
                .reply
                .send(Err(SessionError::NotFound(self.id.to_string())));
        }
    }

    /// A read of a session that does not exist should not leave an actor
    /// behind, but the actor lingers a moment before it stops: stopping at
    /// once would drop a first message already queued behind the read, and a
    /// burst of reads would keep starting and stopping actors under it.
    fn stop_if_absent(&self, ctx: &mut Context<Self>) {
        if self.is_absent() {
            ctx.run_later(ABSENT_LINGER, |actor, ctx| {
                if actor.is_absent() && !ctx.waiting() {
                    ctx.stop();
                }
            });
        }
    }

    fn is_absent(&self) -> bool {
        !self.stored && matches!(self.phase, Phase::Idle) && self.deferred.is_empty()
    }
}

// ---- accepting messages ----------------------------------------------------

impl SessionActor {
    fn accept(
        &mut self,
        request: ChatRequest,
        sink: EventSink,
        reply: Reply,
        ctx: &mut Context<Self>,
    ) {
        if let Err(error) = self.ready() {
            let _ = reply.send(Err(error));
            return;
        }
        match (&request.continuation, request.message_type) {
            (Some(_), _) => self.accept_continuation(request, sink, reply, ctx),
            (None, MessageType::Steering) => self.accept_steering(request, sink, reply, ctx),
            (None, MessageType::Standard) => self.accept_message(request, sink, reply, ctx),
        }
    }

    fn check_new_message(&self, request: &ChatRequest) -> Result<(), SessionError> {
        if self.tree.contains(&request.id) {
            return Err(SessionError::Conflict(format!(
                "message id {:?} already exists in session {:?}",
                request.id.as_str(),
                self.id.as_str()
            )));
        }
        if let Some(parent) = &request.parent_id {
            if self
                .tree
                .get(parent)
                .is_some_and(|message| message.role == Role::Summary)
            {
                return Err(SessionError::Conflict(format!(
                    "parent_id {:?} is a summary node; continue from a message of the conversation",
                    parent.as_str()
                )));
            }
            if !self.tree.contains(parent) {
                return Err(SessionError::Conflict(format!(
                    "parent_id {:?} is not a message of session {:?}",
                    parent.as_str(),
                    self.id.as_str()
                )));
            }
        }
        if request.output_mode == OutputMode::HostTools {
            let context = self.current_context(request);
            let declares_hold = context.as_ref().is_some_and(|context| {
                context
                    .actions
                    .iter()
                    .any(|action| action.name == crate::tools::HOLD_TOOL)
            });
            if declares_hold {
                return Err(SessionError::validation(
                    "host_context.actions",
                    "\"hold\" is reserved with output_mode host_tools; give the action another name",
                ));
            }
        }
        self.deps.plan_model(&request.config)?;
        Ok(())
    }

    /// An ordinary message: cancels a live turn (and waits for it), supersedes
    /// a pending call, stores the user message and starts a turn.
    fn accept_message(
        &mut self,
        request: ChatRequest,
        sink: EventSink,
        reply: Reply,
        ctx: &mut Context<Self>,
    ) {
        if let Err(error) = self.check_new_message(&request) {
            self.refuse(request, sink, reply, error, ctx);
            return;
        }
        if let Phase::Running(live) = &mut self.phase {
            live.cancel.cancel();
            live.cancelling = true;
            self.deferred.push_back(Deferred {
                request,
                sink,
                reply,
            });
            return;
        }
        let mut changed = Vec::with_capacity(2);
        if let Phase::AwaitingHost(pending) = &self.phase {
            if let Some(assistant) = self.tree.get(&pending.assistant_message_id) {
                let mut assistant = assistant.clone();
                interrupt_unresolved(&mut assistant, CallStatus::Superseded);
                changed.push(assistant);
            }
        }
        self.reset_screenshot(&request);
        let context = self.current_context(&request);
        let parent_id = request
            .parent_id
            .clone()
            .or_else(|| self.record.active_leaf.clone());
        let memory_block = (request.output_mode == OutputMode::Text)
            .then(|| {
                crate::history::memory_block_for(
                    &self.deps.config.history,
                    &self.tree,
                    parent_id.as_ref(),
                )
            })
            .flatten();
        let user = StoredMessage {
            id: request.id.clone(),
            parent_id,
            role: Role::User,
            content: request.content.clone(),
            host_block: context.as_deref().map(render_host_context),
            attachments: reference_attachments(&request),
            segments: Vec::new(),
            usage: None,
            model: None,
            error_type: None,
            memory_block,
            working_memory: None,
            created_at: now_millis(),
        };
        let mut record = self.record.clone();
        record.active_leaf = Some(user.id.clone());
        record.turn_number += 1;
        if request.host_context.is_some() {
            record.host_context = shared_context(&request);
        }
        if record.title.is_none() && !request.content.is_empty() {
            record.title = Some(request.content.chars().take(MAX_TITLE_CHARS).collect());
        }
        record.pending_action = None;
        changed.push(user);
        let write = self
            .deps
            .store
            .save_messages(self.version, &record, &changed);
        self.persist(ctx, write, move |actor, ctx, written| {
            match written {
                Ok(Written::Committed(version)) => actor.committed(version),
                // Another process moved the session on since this copy was
                // loaded: decide the message again on the fresh state (its
                // parent, supersession and turn number come from there).
                Ok(Written::Stale) => {
                    actor.reload_then(ctx, redo_request(request, sink, reply));
                    return;
                }
                Err(error) => {
                    let _ = reply.send(Err(error.into()));
                    return;
                }
            }
            let user_id = request.id.clone();
            for message in changed {
                actor.tree.upsert(message);
            }
            actor.record = record;
            actor.phase = Phase::Idle;
            let assistant = StoredMessage {
                id: MessageId::new(format!("{}:reply", user_id)),
                parent_id: Some(user_id),
                role: Role::Assistant,
                content: String::new(),
                host_block: None,
                attachments: Vec::new(),
                segments: Vec::new(),
                usage: None,
                model: None,
                error_type: None,
                memory_block: None,
                working_memory: None,
                created_at: now_millis(),
            };
            actor.start_turn(&request, assistant, None, sink, reply, ctx);
        });
    }

    /// Steering joins the live turn, or becomes an ordinary turn when none is live.
    fn accept_steering(
        &mut self,
        mut request: ChatRequest,
        sink: EventSink,
        reply: Reply,
        ctx: &mut Context<Self>,
    ) {
        if request.output_mode == OutputMode::HostTools {
            let _ = reply.send(Err(SessionError::validation(
                "message_type",
                "steering is not supported with output_mode host_tools",
            )));
            return;
        }
        if let Phase::Running(live) = &self.phase {
            if live.output_mode == OutputMode::HostTools {
                let _ = reply.send(Err(SessionError::Conflict(
                    "the live turn is a silent decision; steering is not supported".into(),
                )));
                return;
            }
            if !live.cancelling {
                let note = SteeringNote {
                    id: request.id.clone(),
                    text: request.content.clone(),
                    attachments: reference_attachments(&request),
                };
                match live.steering.try_send(note) {
                    Ok(()) => {
                        self.take_screenshot(&request);
                        let _ = reply.send(Ok(TurnAccepted {
                            accepted_as: AcceptedAs::Steering,
                            message_id: None,
                        }));
                        return;
                    }
                    Err(mpsc::error::TrySendError::Full(_)) => {
                        let _ = reply.send(Err(SessionError::Conflict(format!(
                            "the live turn already has {MAX_QUEUED_STEERING} steering messages waiting; send more once it has taken them"
                        ))));
                        return;
                    }
                    // The turn is ending: the message becomes a turn of its own.
                    Err(mpsc::error::TrySendError::Closed(_)) => {}
                }
            }
        }
        if self.tree.is_empty() {
            let _ = reply.send(Err(SessionError::Conflict(format!(
                "steering needs a conversation; session {:?} has none yet",
                self.id.as_str()
            ))));
            return;
        }
        request.message_type = MessageType::Standard;
        self.accept_message(request, sink, reply, ctx);
    }

    fn accept_continuation(
        &mut self,
        request: ChatRequest,
        sink: EventSink,
        reply: Reply,
        ctx: &mut Context<Self>,
    ) {
        let Some(continuation) = request.continuation.clone() else {
            return;
        };
        let call_id = continuation.tool_call_id.clone();
        if !self.stored {
            let error = SessionError::Conflict(format!(
                "session {:?} does not exist, so call {:?} is not pending",
                self.id.as_str(),
                call_id.as_str()
            ));
            self.refuse(request, sink, reply, error, ctx);
            return;
        }
        if matches!(self.phase, Phase::Running(_)) {
            // A continuation never cancels: it waits for the live turn to end.
            self.deferred.push_back(Deferred {
                request,
                sink,
                reply,
            });
            return;
        }
        let pending = match &self.phase {
            Phase::AwaitingHost(pending) if pending.tool_call_id == call_id => pending.clone(),
            Phase::AwaitingHost(pending) if pending.queued.contains(&call_id) => {
                let error = SessionError::Conflict(format!(
                    "call {:?} is queued behind call {:?}; answer {:?} first",
                    call_id.as_str(),
                    pending.tool_call_id.as_str(),
                    pending.tool_call_id.as_str()
                ));
                self.refuse(request, sink, reply, error, ctx);
                return;
            }
            _ => {
                let error = self.not_pending(&call_id);
                self.refuse(request, sink, reply, error, ctx);
                return;
            }
        };
        self.apply_result(request, continuation, pending, sink, reply, ctx);
    }

    /// Why a continuation for `call_id` cannot be taken now.
    fn not_pending(&self, call_id: &ToolCallId) -> SessionError {
        let pending_now = match &self.phase {
            Phase::AwaitingHost(pending) => {
                format!("; call {:?} is pending", pending.tool_call_id.as_str())
            }
            _ => "; nothing is pending".to_string(),
        };
        let message = match self.find_call(call_id) {
            Some(record) if record.status == Some(CallStatus::Superseded) => {
                format!(
                    "call {:?} was superseded by a newer message; its result is not applied",
                    call_id.as_str()
                )
            }
            Some(record) if record.has_result() => {
                let status = record.status_word();
                format!(
                    "the result of call {:?} was already recorded (status: {status}); a duplicate is never applied twice",
                    call_id.as_str()
                )
            }
            _ => format!("call {:?} is not pending{pending_now}", call_id.as_str()),
        };
        SessionError::Conflict(message)
    }

    fn apply_result(
        &mut self,
        mut request: ChatRequest,
        continuation: Continuation,
        pending: PendingAction,
        sink: EventSink,
        reply: Reply,
        ctx: &mut Context<Self>,
    ) {
        let Some(assistant) = self.tree.get(&pending.assistant_message_id) else {
            let _ = reply.send(Err(SessionError::Internal(format!(
                "pending call {:?} points at a missing message",
                pending.tool_call_id.as_str()
            ))));
            return;
        };
        let mut assistant = assistant.clone();
        let mut screenshot = None;
        let output = strip_screenshots(&continuation.result, &mut screenshot);
        let mut tool_name = pending.tool_name.clone();
        for tool in tool_records_mut(&mut assistant) {
            if tool.id == pending.tool_call_id {
                tool.output = Some(output.clone());
                tool_name = tool.name.clone();
                match continuation.outcome {
                    ToolOutcome::Success => tool.outcome = Some(CallOutcome::Success),
                    ToolOutcome::Failed => {
                        tool.outcome = Some(CallOutcome::Failed);
                        tool.status = Some(CallStatus::Failed);
                    }
                }
            }
        }
        let mut queued = pending.queued.clone();
        let next = if queued.is_empty() {
            None
        } else {
            let next_id = queued.remove(0);
            pending_for(&assistant, &next_id, queued, pending.output_mode)
        };
        let resumes_model = next.is_none() && pending.output_mode == OutputMode::Text;
        // The call's own output mode governs the resumed run, whatever the
        // continuation says (host-contract.md: the pending action stores it).
        let asked_mode = request.output_mode;
        request.output_mode = pending.output_mode;
        let context = self.current_context(&request);
        if resumes_model {
            if let Some(context) = &context {
                assistant.segments.push(Segment::Note {
                    origin: NoteOrigin::HostContext,
                    text: render_host_context(context),
                    attachments: reference_attachments(&request),
                });
            }
        }
        let mut record = self.stored_record();
        if request.host_context.is_some() {
            record.host_context = shared_context(&request);
        }
        record.pending_action = next.clone();
        // Conditional on this copy's version, which is the version that made
        // `pending` the pending call: of two processes accepting one result,
        // exactly one commits; the other reloads and answers 409.
        let write =
            self.deps
                .store
                .save_messages(self.version, &record, std::slice::from_ref(&assistant));
        self.persist(ctx, write, move |actor, ctx, accepted| {
            match accepted {
                Err(error) => {
                    let _ = reply.send(Err(error.into()));
                    return;
                }
                Ok(Written::Stale) => {
                    request.output_mode = asked_mode;
                    actor.reload_then(ctx, redo_request(request, sink, reply));
                    return;
                }
                Ok(Written::Committed(version)) => actor.committed(version),
            }
            if screenshot.is_some() {
                actor.screenshot = screenshot;
            }
            actor.take_screenshot(&request);
            record.pending_action = None;
            actor.record = record;
            actor.tree.upsert(assistant.clone());
            let result_event = TurnEvent::ToolResult(ToolResultEvent {
                tool_name,
                output,
                call_id: pending.tool_call_id.to_string(),
                duration_ms: 0,
                invalidates: actor
                    .deps
                    .tools
                    .invalidations
                    .get(&pending.tool_name)
                    .cloned(),
            });
            if resumes_model {
                actor.phase = Phase::Idle;
                actor.start_turn(&request, assistant, Some(result_event), sink, reply, ctx);
                return;
            }
            let _ = reply.send(Ok(TurnAccepted {
                accepted_as: AcceptedAs::Turn,
                message_id: Some(assistant.id.clone()),
            }));
            status(&sink, &actor.id, TurnStatus::Started);
            // A receipt of a silent decision publishes no tool preview either.
            if pending.output_mode == OutputMode::Text {
                sink.send(result_event);
            }
            let decision = match (&next, pending.output_mode) {
                (_, OutputMode::HostTools) => Some(Decision::Completed),
                _ => None,
            };
            actor.phase = match &next {
                Some(next) => Phase::AwaitingHost(next.clone()),
                None => Phase::Idle,
            };
            let model = assistant.model.clone().unwrap_or_default();
            actor.send_final(
                &sink,
                &assistant,
                model,
                next.as_ref(),
                decision,
                pending.output_mode,
                None,
            );
            status(&sink, &actor.id, TurnStatus::Completed);
            actor.run_deferred(ctx);
            actor.hibernate_if_configured(ctx);
        });
    }
}

// ---- running turns ---------------------------------------------------------

impl SessionActor {
    /// Starts the model loop for `assistant` (new, or resumed after host results).
    /// `opening` (a continuation's `tool_result`) is sent right after
    /// `status: started`, which must stay the turn's first event.
    fn start_turn(
        &mut self,
        request: &ChatRequest,
        mut assistant: StoredMessage,
        opening: Option<TurnEvent>,
        sink: EventSink,
        reply: Reply,
        ctx: &mut Context<Self>,
    ) {
        let (model_id, model) = match self.deps.plan_model(&request.config) {
            Ok(planned) => planned,
            Err(error) => {
                let _ = reply.send(Err(error));
                return;
            }
        };
        let output_mode = request.output_mode;
        let context = self.current_context(request);
        let tools =
            self.deps
                .tools
                .tool_set(context.as_deref(), self.screenshot.is_some(), output_mode);
        let leaf = assistant.parent_id.clone();
        let path = self.tree.path_to(leaf.as_ref());
        let history = crate::history::transcript(&self.tree, leaf.as_ref());
        let config = &self.deps.config;
        let jobs = crate::history::plan_jobs(
            &config.history,
            crate::history::TurnContext {
                tree: &self.tree,
                path: &path,
                history: &history,
                system: &config.system_prompt,
                turn_model: &model_id,
                silent: output_mode == OutputMode::HostTools,
                fresh: assistant.segments.is_empty(),
            },
            self.deps.models.as_ref(),
        );
        let max_requests = request
            .config
            .max_turns
            .map_or(config.max_turns, |asked| asked.min(config.max_turns));
        let thinking_budget =
            crate::turn::thinking_budget(request.config.thinking_budget, config.thinking_budget);
        assistant.model = Some(model_id.to_string());
        let plan = TurnPlan {
            model_id: model_id.clone(),
            model,
            system: config.system_prompt.clone(),
            tools,
            settings: crate::model::ModelSettings {
                temperature: request.config.temperature,
                thinking_budget,
                max_output_tokens: None,
            },
            limits: TurnLimits {
                max_requests,
                budget: config.budget,
            },
            output_mode,
            invalidations: self.deps.invalidations.clone(),
            screenshot: self.screenshot.clone(),
            tool_context: self.deps.tools.tool_context(self.id.as_str()),
        };
        let (cancel, token) = CancelHandle::new();
        let (steering_tx, steering_rx) = mpsc::channel(MAX_QUEUED_STEERING);
        self.next_turn_id += 1;
        let turn_id = self.next_turn_id;
        let message_id = assistant.id.clone();
        self.phase = Phase::Running(LiveTurn {
            id: turn_id,
            cancel,
            cancelling: false,
            steering: steering_tx,
            sink: sink.clone(),
            output_mode,
            model: model_id.to_string(),
            message_id: message_id.clone(),
        });
        let _ = reply.send(Ok(TurnAccepted {
            accepted_as: AcceptedAs::Turn,
            message_id: Some(message_id),
        }));
        status(&sink, &self.id, TurnStatus::Started);
        if let Some(event) = opening {
            sink.send(event);
            announce_context_note(&sink, &assistant);
        }
        let input = TurnInput {
            plan,
            history,
            assistant,
            sink,
            cancel: token,
            steering: steering_rx,
        };
        // The turn reports back through the mailbox, not by a continuation of
        // the spawned future: mailbox messages wait while a store write holds
        // the actor (`ctx.wait`), spawned futures do not, and a decision made
        // beside an in-flight write (a delete, say) would act on stale state.
        let addr = ctx.address();
        ctx.spawn(
            crate::history::run_turn_with_history(jobs, input)
                .into_actor(self)
                .map(move |(output, history), _actor, _ctx| {
                    addr.do_send(TurnFinished {
                        turn_id,
                        output,
                        history,
                    })
                }),
        );
    }

    /// Records how a turn ended, then answers whatever waited for it.
    fn finish_turn(
        &mut self,
        turn_id: u64,
        output: TurnOutput,
        history: crate::history::HistoryOutcome,
        ctx: &mut Context<Self>,
    ) {
        let live = match std::mem::replace(&mut self.phase, Phase::Idle) {
            Phase::Running(live) if live.id == turn_id => live,
            other => {
                self.phase = other;
                log::error!(
                    "session {}: a finished turn {turn_id} was not the live one",
                    self.id
                );
                return;
            }
        };
        let TurnOutput {
            mut assistant,
            end,
            steering: mut late_steering,
        } = output;
        let mut undelivered = Vec::new();
        while let Ok(note) = late_steering.try_recv() {
            undelivered.push(note);
        }
        if !undelivered.is_empty() {
            if end == TurnEnd::Completed {
                self.promote_steering(undelivered, &live.sink);
            } else {
                log::info!(
                    "session {}: {} steering message(s) arrived as the turn ended ({:?}); not delivered",
                    self.id,
                    undelivered.len(),
                    end
                );
            }
        }
        let mut next = None;
        let mut decision = None;
        let mut failure: Option<(String, String, bool)> = None;
        match &end {
            TurnEnd::Completed => {}
            TurnEnd::HostCalls(calls) => {
                let mut queued: Vec<ToolCallId> = calls.clone();
                let first = queued.remove(0);
                next = pending_for(&assistant, &first, queued, live.output_mode);
                decision = (live.output_mode == OutputMode::HostTools).then_some(Decision::Pending);
            }
            TurnEnd::Hold => decision = Some(Decision::Hold),
            TurnEnd::InvalidDecision(reason) => {
                failure = Some(("invalid_decision".into(), reason.clone(), false))
            }
            TurnEnd::Cancelled => {
                interrupt_unresolved(&mut assistant, CallStatus::Cancelled);
                failure = Some(("cancelled".into(), "The turn was cancelled.".into(), true));
            }
            TurnEnd::UsageLimit(reason) => {
                interrupt_unresolved(&mut assistant, CallStatus::Cancelled);
                failure = Some(("usage_limit".into(), reason.clone(), false));
            }
            TurnEnd::Panicked(_) => {
                interrupt_unresolved(&mut assistant, CallStatus::Cancelled);
                failure = Some((
                    "internal".into(),
                    "The turn failed inside the runtime; the session is unharmed. Send the message again.".into(),
                    true,
                ));
            }
            TurnEnd::Failed(error) => {
                interrupt_unresolved(&mut assistant, CallStatus::Cancelled);
                failure = Some((
                    error.kind.as_str().to_string(),
                    error.message.clone(),
                    error.kind.retry_allowed(),
                ));
            }
        }
        if live.output_mode == OutputMode::HostTools {
            crate::turn::strip_prose(&mut assistant);
        }
        assistant.error_type = failure
            .as_ref()
            .map(|(error_type, _, _)| error_type.clone());
        self.store_turn(
            FinishedTurn {
                live,
                assistant,
                next,
                decision,
                failure,
                on_path: true,
                summary: history.summary,
            },
            ctx,
        );
    }

    /// Stores a finished turn's reply with the pending call it made, then
    /// sends its final response and answers whatever waited for it.
    fn store_turn(&mut self, turn: FinishedTurn, ctx: &mut Context<Self>) {
        let mut record = self.stored_record();
        if turn.on_path {
            record.active_leaf = Some(turn.assistant.id.clone());
            record.pending_action = turn.next.clone();
        }
        // A new summary node is stored with the turn's result, parents first.
        let mut written_messages: Vec<StoredMessage> = turn.summary.iter().cloned().collect();
        written_messages.push(turn.assistant.clone());
        let write = self
            .deps
            .store
            .save_messages(self.version, &record, &written_messages);
        self.persist(ctx, write, move |actor, ctx, written| {
            match written {
                Ok(Written::Committed(version)) => actor.committed(version),
                Ok(Written::Stale) => {
                    actor.reload_then(
                        ctx,
                        Box::new(move |actor, ctx, reloaded| {
                            actor.restore_turn(turn, reloaded, ctx)
                        }),
                    );
                    return;
                }
                Err(error) => {
                    log::warn!(
                        "session {}: could not store the turn's result: {error}",
                        actor.id
                    );
                    // `DatabaseError` is the kind of `SessionError::Unavailable`: HTTP answers 503.
                    let error_type = match error {
                        StoreError::Unavailable(_) => "DatabaseError",
                        StoreError::Failed(_) => "internal",
                    };
                    actor.turn_not_saved(
                        turn,
                        error_type,
                        "Database not reachable; the turn's result was not saved",
                        ctx,
                    );
                    return;
                }
            }
            let FinishedTurn {
                live,
                assistant,
                next,
                decision,
                failure,
                on_path,
                summary,
            } = turn;
            if let Some(summary) = summary {
                actor.tree.upsert(summary);
            }
            let sink = live.sink;
            actor.tree.upsert(assistant.clone());
            if on_path {
                record.pending_action = None;
                actor.record = record;
                actor.phase = match &next {
                    Some(pending) => Phase::AwaitingHost(pending.clone()),
                    None => Phase::Idle,
                };
            }
            let turn_error = failure.map(|(error_type, message, retry_allowed)| TurnErrorEvent {
                kind: "error",
                message,
                error_type,
                terminal: true,
                retry_allowed,
            });
            actor.send_final(
                &sink,
                &assistant,
                live.model,
                next.as_ref(),
                decision,
                live.output_mode,
                turn_error.as_ref(),
            );
            if let Some(turn_error) = turn_error {
                sink.send(TurnEvent::Error(turn_error));
            }
            status(&sink, &actor.id, TurnStatus::Completed);
            actor.last_activity = Instant::now();
            actor.run_deferred(ctx);
            actor.hibernate_if_configured(ctx);
        });
    }

    /// The turn's write found the session changed by another process while
    /// the turn ran. If the session still ends where the turn began (another
    /// process only joined with a new context, say), the turn is stored as
    /// usual on the fresh copy. Otherwise a newer message or result came in
    /// meanwhile: in serial order it superseded this turn, so the reply is
    /// stored off the active path, its unresolved calls `superseded`, and the
    /// caller is told the turn was cancelled. An acknowledged message of the
    /// other process is never moved off the path.
    fn restore_turn(
        &mut self,
        mut turn: FinishedTurn,
        reloaded: Result<(), SessionError>,
        ctx: &mut Context<Self>,
    ) {
        if let Err(error) = reloaded {
            log::warn!(
                "session {}: could not reload to store the turn's result: {error}",
                self.id
            );
            let message = error.to_string();
            self.turn_not_saved(turn, error.kind(), &message, ctx);
            return;
        }
        let parent_stored = turn
            .assistant
            .parent_id
            .as_ref()
            .is_some_and(|parent| self.tree.contains(parent));
        if !self.stored || !parent_stored {
            self.turn_not_saved(
                turn,
                "cancelled",
                "The session was deleted while the turn ran; its reply was not saved.",
                ctx,
            );
            return;
        }
        let leaf = self.record.active_leaf.as_ref();
        let ends_where_turn_began =
            leaf == Some(&turn.assistant.id) || leaf == turn.assistant.parent_id.as_ref();
        if !(ends_where_turn_began && matches!(self.phase, Phase::Idle)) {
            turn.on_path = false;
            interrupt_unresolved(&mut turn.assistant, CallStatus::Superseded);
            turn.next = None;
            turn.decision = None;
            turn.assistant.error_type = Some("cancelled".into());
            turn.failure = Some((
                "cancelled".into(),
                "A newer message or result for this session was taken by another process while this turn ran; the turn was superseded.".into(),
                true,
            ));
        }
        self.store_turn(turn, ctx);
    }

    /// Ends a turn whose reply could not be stored: its final response and a
    /// terminal error, then whatever waited for it.
    fn turn_not_saved(
        &mut self,
        turn: FinishedTurn,
        error_type: &str,
        message: &str,
        ctx: &mut Context<Self>,
    ) {
        let FinishedTurn {
            live, assistant, ..
        } = turn;
        let sink = live.sink;
        let turn_error = TurnErrorEvent {
            kind: "error",
            message: message.into(),
            error_type: error_type.into(),
            terminal: true,
            retry_allowed: true,
        };
        self.send_final(
            &sink,
            &assistant,
            live.model,
            None,
            None,
            live.output_mode,
            Some(&turn_error),
        );
        sink.send(TurnEvent::Error(turn_error));
        status(&sink, &self.id, TurnStatus::Completed);
        self.run_deferred(ctx);
    }

    #[allow(clippy::too_many_arguments)]
    fn send_final(
        &self,
        sink: &EventSink,
        assistant: &StoredMessage,
        model: String,
        pending: Option<&PendingAction>,
        decision: Option<Decision>,
        output_mode: OutputMode,
        error: Option<&TurnErrorEvent>,
    ) {
        let silent = output_mode == OutputMode::HostTools;
        let final_response = FinalResponse {
            content: if silent {
                None
            } else {
                Some(message_text(assistant))
            },
            model,
            streamed: sink.streamed,
            session_id: self.id.to_string(),
            turn_number: self.record.turn_number,
            message_id: assistant.id.to_string(),
            usage: assistant.usage.clone().unwrap_or_default(),
            pending_tool_call: pending.map(pending_event),
            decision,
            error: error.map(|_| true),
            error_type: error.map(|error| error.error_type.clone()),
            error_message: error.map(|error| error.message.clone()),
        };
        sink.send(TurnEvent::FinalResponse(Box::new(final_response)));
    }

    /// Steering that missed the turn it was meant for becomes the next turn,
    /// ahead of anything else waiting, with its events on the same stream.
    fn promote_steering(&mut self, notes: Vec<SteeringNote>, sink: &EventSink) {
        for note in notes.into_iter().rev() {
            let request = ChatRequest {
                id: note.id,
                session_id: self.id.clone(),
                content: note.text,
                parent_id: None,
                message_type: MessageType::Standard,
                output_mode: OutputMode::Text,
                attachments: note.attachments,
                host_context: None,
                config: Default::default(),
                continuation: None,
            };
            // Nobody waits for this reply: the steering was already acknowledged.
            let (reply, _unanswered) = oneshot::channel();
            self.deferred.push_front(Deferred {
                request,
                sink: sink.clone(),
                reply,
            });
        }
    }

    /// Answers requests that waited for the live turn, in arrival order, until
    /// one of them starts a new turn (the rest keep waiting for that one).
    fn run_deferred(&mut self, ctx: &mut Context<Self>) {
        while !matches!(self.phase, Phase::Running(_)) {
            let Some(deferred) = self.deferred.pop_front() else {
                return;
            };
            self.accept(deferred.request, deferred.sink, deferred.reply, ctx);
            if ctx.waiting() {
                // A store write holds the mailbox. Go on with a mailbox message,
                // which waits for that write and its continuation (a `ctx.wait`
                // here would run first: waits run newest first, so the next
                // deferred message would be accepted beside the write and
                // both would start a turn, one of them lost).
                ctx.address().do_send(RunDeferred);
                return;
            }
        }
        // A newer ordinary message still waiting supersedes the turn just started.
        let newer_message = self.deferred.iter().any(|deferred| {
            deferred.request.continuation.is_none()
                && deferred.request.message_type == MessageType::Standard
        });
        if let (true, Phase::Running(live)) = (newer_message, &mut self.phase) {
            live.cancel.cancel();
            live.cancelling = true;
        }
    }
}
