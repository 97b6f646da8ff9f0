//! The admin handlers: get, join, repair, delete, cancel, and the idle stop
//! (hibernation) with its timings.

use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;

use super::{
    answer, reply_channel, status, Joining, Loaded, Phase, Repairing, SessionActor, ABSENT_LINGER,
    SCREENSHOT_GRACE,
};
use crate::contract::OutputMode;
use crate::conversation::{CallStatus, Message as StoredMessage, StoredContext};
use crate::error_type::ErrorType;
use crate::events::{FinalResponse, TurnErrorEvent, TurnEvent, TurnStatus};
use crate::session::grace::FIRST_EXCHANGE_GRACE;
use crate::session::requests::{
    CancelTurn, CheckIdle, DeleteSession, GetInfo, GetPath, GetTree, JoinSession, RepairSession,
    SessionInfo,
};
use crate::session::SessionError;

impl SessionActor {
    fn info(&self) -> SessionInfo {
        SessionInfo {
            session_id: self.id.to_string(),
            owner_id: self.record.owner_id.as_deref().map(String::from),
            title: self.record.title.as_deref().map(String::from),
            created_at: self.record.created_at,
            turn_number: self.record.turn_number,
            message_count: self.tree.len(),
            active_leaf: self.record.active_leaf.as_ref().map(|id| id.to_string()),
            turn_running: matches!(self.phase, Phase::Running(_)),
            pending_action: match &self.phase {
                Phase::AwaitingHost(pending) => Some((**pending).clone()),
                _ => None,
            },
            host_context: self
                .record
                .host_context
                .as_deref()
                .map(|stored| stored.context().to_value()),
        }
    }
}

impl Handler<JoinSession> for SessionActor {
    type Result = ResponseFuture<Result<(), SessionError>>;

    fn handle(&mut self, join: JoinSession, ctx: &mut Context<Self>) -> Self::Result {
        self.last_activity = Instant::now();
        self.reloads = 0;
        let (reply, answered) = reply_channel();
        let joining = Joining {
            caller: join.caller,
            host_context: join.host_context,
            reply,
        };
        self.join(joining, ctx);
        answered
    }
}

impl SessionActor {
    /// Creates the session if needed and keeps the joining page's context.
    pub(super) fn join(&mut self, joining: Joining, ctx: &mut Context<Self>) {
        if let Err(error) = self.authorize_write(&joining.caller) {
            return answer(joining.reply, Err(error));
        }
        if joining.host_context.is_none() && self.is_stored() {
            return answer(joining.reply, Ok(()));
        }
        let mut record = self.stored_record();
        if let Some(context) = &joining.host_context {
            record.host_context = Some(Arc::new(StoredContext::new(context.clone())));
        }
        let write = self.deps.store.save_session(self.version(), &record);
        // Stale: joined on an old copy; joined again on the reloaded one, so
        // the old pending call (or leaf) is never written back.
        self.write(ctx, write, joining, |actor, _ctx, joining| {
            if let Some(context) = joining.host_context {
                actor.record.host_context = Some(Arc::new(StoredContext::new(context)));
            }
            answer(joining.reply, Ok(()));
        });
    }
}

impl Handler<CheckIdle> for SessionActor {
    type Result = ();

    fn handle(&mut self, _: CheckIdle, ctx: &mut Context<Self>) {
        if !self.stop_if_idle(ctx, self.idle_after()) {
            self.schedule_idle_check(ctx);
        }
    }
}

/// With an idle timeout of zero (the in-memory default) a session longer than
/// this many messages stays resident for [`HOT_WINDOW`]: its reload decodes
/// every message, so a conversation in progress would pay for its whole
/// length on every turn.
pub(super) const HOT_MESSAGES: usize = 16;

/// How long a long, idle session's actor stays after its last request when
/// the idle timeout is zero.
pub(super) const HOT_WINDOW: Duration = Duration::from_secs(5);

/// How long a session in conversation stays after its last request when the
/// idle timeout is zero: one waiting for a host result, or one past its
/// first exchange. Its next request (the host's result, the client's next
/// message) usually comes within it and finds the actor resident, instead of
/// paying for a stop and a reload; an abandoned session still leaves memory
/// within a second (the sweeper looks every 200 ms).
pub(super) const SHORT_WINDOW: Duration = Duration::from_millis(500);

impl SessionActor {
    /// Stops (hibernates) the actor when nothing is live or waiting and it has
    /// been quiet for `after`; the store holds everything it would reload.
    /// Returns whether it stops.
    fn stop_if_idle(&self, ctx: &mut Context<Self>, after: Duration) -> bool {
        let stops = self.is_quiet(ctx) && self.last_activity.elapsed() >= self.window(after);
        if stops {
            ctx.stop();
        }
        stops
    }

    /// Whether nothing is live or waiting.
    fn is_quiet(&self, ctx: &Context<Self>) -> bool {
        matches!(self.phase, Phase::Idle | Phase::AwaitingHost(_))
            && self.waiting.is_empty()
            && !ctx.waiting()
    }

    /// How long the actor stays after its last request, given `after`.
    fn window(&self, after: Duration) -> Duration {
        // A screenshot is never stored, so a session waiting for a host result
        // keeps its actor (and the screenshot its resumed turn may look at) a
        // while longer than the idle timeout.
        let holds_screenshot =
            self.screenshot.is_some() && matches!(self.phase, Phase::AwaitingHost(_));
        if holds_screenshot {
            after.max(SCREENSHOT_GRACE)
        } else {
            after
        }
    }

    /// Tells the idle sweeper when this actor is next worth asking: once its
    /// window has passed since its last request, or, while it is busy, a
    /// while from now (the end of a turn tells it again).
    pub(super) fn schedule_idle_check(&self, ctx: &Context<Self>) {
        let window = self.window(self.idle_after());
        let due = if self.is_quiet(ctx) {
            self.last_activity + window
        } else {
            Instant::now() + window.max(BUSY_RECHECK)
        };
        self.idle_check.set(due);
    }

    /// How long this session may stay idle before its actor stops: the
    /// configured timeout, or with zero, [`HOT_WINDOW`] for a long session,
    /// [`SHORT_WINDOW`] for one in conversation, and for a session of one
    /// exchange [`FIRST_EXCHANGE_GRACE`] while it holds one of the few grace
    /// slots, none otherwise. That last kind is most idle sessions (a burst
    /// of new sessions would otherwise all be resident at once, and the
    /// allocator keeps that peak), and it costs one reload if it continues.
    fn idle_after(&self) -> Duration {
        match self.deps.config.idle_timeout {
            timeout if !timeout.is_zero() => timeout,
            _ if self.tree.len() > HOT_MESSAGES => HOT_WINDOW,
            _ if !self.is_first_exchange() => SHORT_WINDOW,
            _ if self.grace.is_some() => FIRST_EXCHANGE_GRACE,
            _ => Duration::ZERO,
        }
    }

    /// A session of at most one exchange, not waiting for a host result.
    fn is_first_exchange(&self) -> bool {
        self.tree.len() <= FIRST_EXCHANGE && !matches!(self.phase, Phase::AwaitingHost(_))
    }

    /// With an idle timeout of zero, a session of one exchange hibernates
    /// as soon as its turn ends, unless it gets a grace slot; others at the
    /// sweeper's first look past their window.
    pub(super) fn hibernate_if_configured(&mut self, ctx: &mut Context<Self>) {
        let may_stay = self.deps.config.idle_timeout.is_zero() && self.is_first_exchange();
        if !may_stay {
            self.grace = None;
        } else if self.grace.is_none() {
            self.grace = self.registry.graces.try_take();
        }
        if !self.idle_after().is_zero() || !self.stop_if_idle(ctx, Duration::ZERO) {
            self.schedule_idle_check(ctx);
        }
    }
}

/// How soon a busy actor (a turn running, or a load) is asked again whether
/// it is idle, in case nothing else tells the sweeper when it is done.
const BUSY_RECHECK: Duration = Duration::from_secs(1);

/// The messages of a session's first exchange (the user's and the reply).
const FIRST_EXCHANGE: usize = 2;

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
                        "leaf_id {:?} is not a message of this session",
                        leaf.to_string()
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
            .map(|()| self.tree.all().cloned().collect());
        self.stop_if_absent(ctx);
        found
    }
}

impl Handler<RepairSession> for SessionActor {
    type Result = ResponseFuture<Result<SessionInfo, SessionError>>;

    fn handle(&mut self, repair: RepairSession, ctx: &mut Context<Self>) -> Self::Result {
        self.last_activity = Instant::now();
        self.reloads = 0;
        let (reply, answered) = reply_channel();
        let repairing = Repairing {
            caller: repair.caller,
            reply,
        };
        self.repair(repairing, ctx);
        answered
    }
}

impl SessionActor {
    /// Resolves every unresolved call as `unknown` and drops the pending call.
    pub(super) fn repair(&mut self, repairing: Repairing, ctx: &mut Context<Self>) {
        if let Err(error) = self.authorize_read(&repairing.caller) {
            self.stop_if_absent(ctx);
            return answer(repairing.reply, Err(error));
        }
        if matches!(self.phase, Phase::Running(_)) {
            let error = SessionError::Conflict(
                "a turn is running; cancel it before repairing the session".into(),
            );
            return answer(repairing.reply, Err(error));
        }
        // Every message is written back, not only those it resolves: a
        // record an older version stored too deep was read with its deep
        // part replaced (`store::readback`), and this stores that readable form.
        let changed: Vec<Arc<StoredMessage>> = self
            .tree
            .all()
            .map(|message| {
                let mut message = message.clone();
                message.interrupt_unresolved(CallStatus::Unknown);
                Arc::new(message)
            })
            .collect();
        let mut record = self.record.clone();
        record.pending_action = None;
        let write = self
            .deps
            .store
            .save_messages(self.version(), &record, &changed);
        self.write(ctx, write, repairing, move |actor, _ctx, repairing| {
            for message in changed {
                actor.tree.upsert(message);
            }
            actor.phase = Phase::Idle;
            answer(repairing.reply, Ok(actor.info()));
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
        let existed = self.is_stored();
        let delete = self.deps.store.delete(&self.id);
        let (reply, answered) = reply_channel();
        self.persist(ctx, delete, move |actor, ctx, deleted| {
            let outcome = deleted
                .map_err(SessionError::from)
                .map(|found| found || existed);
            if outcome.is_ok() {
                actor.loaded = Loaded::Absent;
                actor.abandon_live_turn();
                actor.refuse_waiting();
                ctx.stop();
            }
            answer(reply, outcome);
        });
        answered
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
            error_type: ErrorType::Cancelled.as_str().into(),
            terminal: true,
            retry_allowed: false,
        };
        let final_response = FinalResponse {
            content: (live.output_mode == OutputMode::Text).then(String::new),
            model: live.model,
            streamed: live.sink.streamed,
            session_id: self.id.clone(),
            turn_number: self.record.turn_number,
            message_id: live.message_id.clone(),
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
    fn refuse_waiting(&mut self) {
        for waiting in self.waiting.drain(..) {
            answer(
                waiting.reply,
                Err(SessionError::NotFound(self.id.to_string())),
            );
        }
    }

    /// A read of a session that does not exist should not leave an actor
    /// behind, but the actor lingers a moment before it stops: stopping at
    /// once would drop a first message already queued behind the read, and a
    /// burst of reads would keep starting and stopping actors under it.
    pub(super) fn stop_if_absent(&self, ctx: &mut Context<Self>) {
        if self.is_absent() {
            ctx.run_later(ABSENT_LINGER, |actor, ctx| {
                if actor.is_absent() && !ctx.waiting() {
                    ctx.stop();
                }
            });
        }
    }

    fn is_absent(&self) -> bool {
        !self.is_stored() && matches!(self.phase, Phase::Idle) && self.waiting.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::test_support::*;
    use crate::events::TurnEvent;
    use crate::ids::SessionId;

    #[test]
    fn repair_resolves_unresolved_calls_as_unknown() {
        run(async {
            let model =
                ScriptedModel::new(vec![Reply::Events(vec![call("c1", "select_issue", "{}")])]);
            let runtime = runtime(model, 10);
            let id = SessionId::new("s1");
            let body = json!({"id": "m1", "session_id": "s1", "content": "go",
                              "host_context": context_with_action()});
            let (_, mut events) = send(&runtime, body).await;
            until_completed(&mut events).await;
            let info = runtime.repair(&caller(), &id).await.expect("repaired");
            assert!(info.pending_action.is_none());
            let tree = runtime.tree(&caller(), &id).await.expect("the tree");
            let words: Vec<&str> = tree
                .iter()
                .flat_map(|message| message.tool_records())
                .map(|tool| tool.status_word())
                .collect();
            assert_eq!(words, ["unknown"]);
        });
    }

    #[test]
    fn delete_during_a_turn_cancels_it() {
        run(async {
            // No script: the model never answers, so the turn stays live.
            let model = ScriptedModel::new(Vec::new());
            let runtime = runtime(model.clone(), 10);
            let id = SessionId::new("s1");
            let (accepted, mut events) = send(
                &runtime,
                json!({"id": "m1", "session_id": "s1", "content": "hi"}),
            )
            .await;
            accepted.expect("accepted");
            wait_for_requests(&model, 1).await;
            assert_eq!(runtime.delete(&caller(), &id).await, Ok(true));
            let turn = until_completed(&mut events).await;
            assert_eq!(
                final_response(&turn).error_type.as_deref(),
                Some("cancelled")
            );
            assert!(turn.iter().any(
                |event| matches!(event, TurnEvent::Error(error) if error.error_type == "cancelled")
            ));
        });
    }
}
