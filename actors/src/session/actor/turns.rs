//! Running and finishing turns: start a turn on the model, record how it
//! ended (`finish_turn`, `store_turn`), send its final response, and promote
//! steering that missed it.

use std::slice;
use std::sync::Arc;
use std::time::Instant;

use actix::prelude::*;
use tokio::sync::oneshot;

pub(super) use super::core::TurnFailure;
use super::core::{turn_outcome, Placement};
use super::{
    answer, status, FinishedTurn, LiveTurn, Phase, Reply, SessionActor, Waiting,
    MAX_QUEUED_STEERING,
};
use crate::contract::{ChatRequest, MessageType, OutputMode};
use crate::conversation::{
    CallStatus, Message as StoredMessage, NoteOrigin, PendingAction, Segment, SessionRecord,
};
use crate::error_type::ErrorType;
use crate::events::{
    Decision, EventSink, FinalResponse, NoteEvent, PendingToolCall, TurnEvent, TurnStatus,
};
use crate::session::requests::{AcceptedAs, TurnAccepted};
use crate::turn::{
    steering_queue, CancelHandle, SteeringNote, TurnEnd, TurnInput, TurnLimits, TurnOutput,
    TurnPlan,
};

fn pending_event(pending: &PendingAction) -> PendingToolCall {
    PendingToolCall {
        tool_name: pending.tool_name.clone(),
        call_id: pending.tool_call_id.to_string(),
        arguments: pending.arguments.clone(),
        queued: pending.queued.iter().map(|id| id.to_string()).collect(),
    }
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

/// Sent by the actor to itself: go on answering waiting requests.
struct RunWaiting;

impl actix::Message for RunWaiting {
    type Result = ();
}

impl Handler<RunWaiting> for SessionActor {
    type Result = ();

    fn handle(&mut self, _: RunWaiting, ctx: &mut Context<Self>) {
        self.run_waiting(ctx);
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

// ---- running turns ---------------------------------------------------------

/// What a turn's final response reports: the reply, and how the turn ended.
pub(super) struct TurnEnding<'a> {
    pub(super) assistant: &'a StoredMessage,
    pub(super) model: Arc<str>,
    /// The call now pending, if the turn (or a result) left one.
    pub(super) pending: Option<&'a PendingAction>,
    /// A silent decision's verdict.
    pub(super) decision: Option<Decision>,
    /// `host_tools` sends no content.
    pub(super) output_mode: OutputMode,
    pub(super) failure: Option<&'a TurnFailure>,
}

impl SessionActor {
    /// Starts the model loop for `assistant` (new, or resumed after host results).
    /// `opening` (a continuation's `tool_result`) is sent right after
    /// `status: started`, which must stay the turn's first event.
    pub(super) fn start_turn(
        &mut self,
        waiting: Waiting,
        mut assistant: StoredMessage,
        opening: Option<TurnEvent>,
        ctx: &mut Context<Self>,
    ) {
        let Waiting {
            request,
            sink,
            caller,
            reply,
        } = waiting;
        let (model_id, model) = match self.deps.plan_model(&request.config) {
            Ok(planned) => planned,
            Err(error) => return answer(reply, Err(error)),
        };
        let leaf = assistant.parent_id.clone();
        let (path, history) = crate::history::path_and_transcript(&self.tree, leaf.as_ref());
        let jobs = crate::history::plan_jobs(
            &self.deps.config.history,
            crate::history::TurnContext {
                tree: &self.tree,
                path: &path,
                history: &history,
                system: &self.deps.config.system_prompt,
                turn_model: &model_id,
                silent: request.output_mode == OutputMode::HostTools,
                new_reply: assistant.segments.is_empty(),
            },
            self.deps.models.as_ref(),
        );
        assistant.model = Some(model_id.shared_text());
        let plan = self.turn_plan(&request, model_id, model);
        let (cancel, token) = CancelHandle::new();
        let (steering_tx, steering_rx) = steering_queue(MAX_QUEUED_STEERING);
        let turn_id = self.next_turn_id();
        self.phase = Phase::Running(LiveTurn {
            id: turn_id,
            cancel,
            cancelling: false,
            steering: steering_tx,
            sink: sink.clone(),
            caller,
            output_mode: request.output_mode,
            model: plan.model_id.shared_text(),
            message_id: assistant.id.clone(),
        });
        self.opened(reply, &sink, &assistant, opening);
        self.deliver_drained(&mut assistant, &sink);
        let input = TurnInput {
            trace: (self.deps.config.traces).begin(&request, &plan.model_id, request.output_mode),
            plan,
            history,
            assistant,
            sink,
            cancel: token,
            steering: steering_rx,
        };
        self.spawn_turn(turn_id, jobs, input, ctx);
    }

    /// The id of the turn about to start.
    fn next_turn_id(&mut self) -> u64 {
        self.next_turn_id += 1;
        self.next_turn_id
    }

    /// A turn is live: its request is answered, and its stream opens.
    fn opened(
        &self,
        reply: Reply,
        sink: &EventSink,
        assistant: &StoredMessage,
        opening: Option<TurnEvent>,
    ) {
        let accepted = TurnAccepted {
            accepted_as: AcceptedAs::Turn,
            message_id: Some(assistant.id.clone()),
        };
        answer(reply, Ok(accepted));
        status(sink, &self.id, TurnStatus::Started);
        if let Some(event) = opening {
            sink.send(event);
            announce_context_note(sink, assistant);
        }
    }

    /// What the turn runs with: its model, tools, settings and limits.
    fn turn_plan(
        &self,
        request: &ChatRequest,
        model_id: crate::model::ModelId,
        model: crate::model::SharedModelClient,
    ) -> TurnPlan {
        let config = &self.deps.config;
        let output_mode = request.output_mode;
        let context = self.current_context(request);
        let tools = self
            .deps
            .tools
            .tool_set(context, self.screenshot.is_some(), output_mode);
        let max_requests = request
            .config
            .max_turns
            .map_or(config.max_turns, |asked| asked.min(config.max_turns));
        let thinking_budget =
            crate::turn::thinking_budget(request.config.thinking_budget, config.thinking_budget);
        TurnPlan {
            model_id,
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
        }
    }

    /// Runs the turn beside the actor; its end comes back to `finish_turn`.
    fn spawn_turn(
        &mut self,
        turn_id: u64,
        jobs: crate::history::HistoryJobs,
        input: TurnInput,
        ctx: &mut Context<Self>,
    ) {
        // The turn is finished where it ends, in the actor's context: actix
        // polls no spawned future while a store write holds the context
        // (`ctx.wait`), so no decision is made beside an in-flight write (a
        // delete, say) on stale state. Should a write be held all the same,
        // the turn reports through the mailbox, which waits for it. This
        // saves a mailbox trip per turn.
        //
        // Boxed where it is made: the turn's future is kilobytes, and the
        // adapters below would each move it once more on its way into the
        // context's own box.
        let turn = Box::pin(crate::history::run_turn_with_history(jobs, input));
        ctx.spawn(
            turn.into_actor(self)
                .map(move |(output, history), actor, ctx| {
                    if ctx.waiting() {
                        ctx.address().do_send(TurnFinished {
                            turn_id,
                            output,
                            history,
                        });
                    } else {
                        actor.finish_turn(turn_id, output, history, ctx);
                    }
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
        // A call another process left pending while the turn ran (found on
        // a reload) is the session's pending call now.
        if let Some(pending) = self.record.pending_action.take() {
            self.phase = Phase::AwaitingHost(pending);
        }
        let TurnOutput {
            mut assistant,
            end,
            steering: late_steering,
            trace,
        } = output;
        self.late_steering(late_steering, &end, &live);
        let (next, decision, failure) = turn_outcome(&mut assistant, &end, live.output_mode);
        assistant.error_type = failure
            .as_ref()
            .map(|failure| failure.error_type.as_str().to_string());
        if let Some(trace) = trace {
            crate::trace::finish(
                &self.deps.config.traces,
                &self.deps.store,
                &self.id,
                *trace,
                end.trace_outcome(),
                failure.as_ref().map(|failure| failure.error_type),
            );
        }
        let turn = FinishedTurn {
            live,
            assistant: Arc::new(assistant),
            next,
            decision,
            failure,
            on_path: true,
            summary: history.summary.map(Arc::new),
        };
        self.place_turn(turn, ctx);
    }

    /// Steering that arrived as the turn ended: a turn of its own after a
    /// completed turn, dropped (and logged) otherwise.
    fn late_steering(
        &mut self,
        mut late: crate::turn::SteeringReceiver,
        end: &TurnEnd,
        live: &LiveTurn,
    ) {
        let mut undelivered = Vec::new();
        while let Some(note) = late.try_recv() {
            undelivered.push(note);
        }
        if undelivered.is_empty() {
            return;
        }
        if *end == TurnEnd::Completed {
            self.promote_steering(undelivered, live);
        } else {
            log::info!(
                "session {}: {} steering message(s) arrived as the turn ended ({:?}); not delivered",
                self.id,
                undelivered.len(),
                end
            );
        }
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
        // Both are shared with the store, and later with the tree, not copied.
        let store = &self.deps.store;
        let version = self.version();
        let write = match &turn.summary {
            None => store.save_messages(version, &record, slice::from_ref(&turn.assistant)),
            Some(summary) => {
                store.save_messages(version, &record, &[summary.clone(), turn.assistant.clone()])
            }
        };
        // Stale: the session changed while the turn ran (`place_turn` again).
        self.write(ctx, write, turn, move |actor, ctx, turn| {
            actor.turn_stored(turn, record, ctx)
        });
    }

    /// The turn's reply is stored: its final response, then what waited.
    fn turn_stored(
        &mut self,
        turn: FinishedTurn,
        mut record: SessionRecord,
        ctx: &mut Context<Self>,
    ) {
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
            self.tree.upsert(summary);
        }
        let assistant_id = assistant.id.clone();
        self.tree.upsert(assistant);
        if on_path {
            record.pending_action = None;
            self.record = record;
            self.phase = match &next {
                Some(pending) => Phase::AwaitingHost(pending.clone()),
                None => Phase::Idle,
            };
        }
        let sink = live.sink;
        // The reply went into the tree just above.
        if let Some(assistant) = self.tree.get(&assistant_id) {
            let ending = TurnEnding {
                assistant,
                model: live.model,
                pending: next.as_deref(),
                decision,
                output_mode: live.output_mode,
                failure: failure.as_ref(),
            };
            self.send_final(&sink, ending);
        }
        if let Some(failure) = failure {
            sink.send(TurnEvent::Error(failure.into_event()));
        }
        status(&sink, &self.id, TurnStatus::Completed);
        self.last_activity = Instant::now();
        self.run_waiting(ctx);
        self.hibernate_if_configured(ctx);
    }

    /// Decides where a finished turn's reply goes, on the copy as it is now
    /// (reloaded, if the turn's write found the session changed by another
    /// process, or if anything else reloaded it while the turn ran). If the
    /// session still ends where the turn began (another process only joined
    /// with a new context, say), the turn is stored as usual. Otherwise a
    /// newer message or result came in meanwhile: in serial order it
    /// superseded this turn, so the reply is stored off the active path, its
    /// unresolved calls `superseded`, and the caller is told the turn was
    /// cancelled. An acknowledged message of the other process is never
    /// moved off the path.
    pub(super) fn place_turn(&mut self, mut turn: FinishedTurn, ctx: &mut Context<Self>) {
        match self.view().placement(&turn.assistant) {
            Placement::OnPath => {}
            Placement::Gone => {
                let message =
                    "The session was deleted while the turn ran; its reply was not saved.";
                self.turn_not_saved(turn, ErrorType::Cancelled, message, ctx);
                return;
            }
            Placement::Superseded => {
                turn.on_path = false;
                // Not shared: no write kept it (one that found the session stale keeps nothing).
                let assistant = Arc::make_mut(&mut turn.assistant);
                assistant.interrupt_unresolved(CallStatus::Superseded);
                assistant.error_type = Some(ErrorType::Cancelled.as_str().into());
                turn.next = None;
                turn.decision = None;
                turn.failure = Some(TurnFailure::new(ErrorType::Cancelled, "A newer message or result for this session was taken by another process while this turn ran; the turn was superseded.", true));
            }
        }
        self.store_turn(turn, ctx);
    }

    /// Ends a turn whose reply could not be stored: its final response and a
    /// terminal error, then whatever waited for it.
    pub(super) fn turn_not_saved(
        &mut self,
        turn: FinishedTurn,
        error_type: ErrorType,
        message: &str,
        ctx: &mut Context<Self>,
    ) {
        let FinishedTurn {
            live, assistant, ..
        } = turn;
        let sink = live.sink;
        let failure = TurnFailure::new(error_type, message, true);
        self.send_final(
            &sink,
            TurnEnding {
                assistant: &assistant,
                model: live.model,
                pending: None,
                decision: None,
                output_mode: live.output_mode,
                failure: Some(&failure),
            },
        );
        sink.send(TurnEvent::Error(failure.into_event()));
        status(&sink, &self.id, TurnStatus::Completed);
        self.run_waiting(ctx);
    }

    /// Sends the turn's `final_response` event.
    pub(super) fn send_final(&self, sink: &EventSink, ending: TurnEnding<'_>) {
        let TurnEnding {
            assistant,
            model,
            pending,
            decision,
            output_mode,
            failure,
        } = ending;
        let silent = output_mode == OutputMode::HostTools;
        let final_response = FinalResponse {
            content: if silent { None } else { Some(assistant.text()) },
            model,
            streamed: sink.streamed,
            session_id: self.id.clone(),
            turn_number: self.record.turn_number,
            message_id: assistant.id.clone(),
            usage: assistant.usage.as_deref().cloned().unwrap_or_default(),
            pending_tool_call: pending.map(pending_event),
            decision,
            error: failure.map(|_| true),
            error_type: failure.map(|failure| failure.error_type.as_str().to_string()),
            error_message: failure.map(|failure| failure.message.clone()),
        };
        sink.send(TurnEvent::FinalResponse(Box::new(final_response)));
    }

    /// Steering that missed the turn it was meant for becomes the next turn,
    /// ahead of anything else waiting, with its events on the same stream.
    fn promote_steering(&mut self, notes: Vec<SteeringNote>, live: &LiveTurn) {
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
                idempotency: None,
            };
            // Nobody waits for this reply: the steering was already acknowledged.
            let (reply, _unanswered) = oneshot::channel();
            self.waiting.push_front(Waiting {
                request,
                sink: live.sink.clone(),
                caller: live.caller.clone(),
                reply,
            });
        }
    }

    /// Answers requests that waited for the live turn, in arrival order, until
    /// one of them starts a new turn (the rest keep waiting for that one).
    pub(super) fn run_waiting(&mut self, ctx: &mut Context<Self>) {
        while !matches!(self.phase, Phase::Running(_)) {
            let Some(waiting) = self.waiting.pop_front() else {
                return;
            };
            self.accept(waiting, ctx);
            if ctx.waiting() {
                // A store write holds the mailbox. Go on with a mailbox message,
                // which waits for that write and its continuation (a `ctx.wait`
                // here would run first: waits run newest first, so the next
                // waiting message would be accepted beside the write and
                // both would start a turn, one of them lost).
                ctx.address().do_send(RunWaiting);
                return;
            }
        }
        // A newer ordinary message still waiting supersedes the turn just
        // started. (Steering waits here only when it found the turn ending:
        // it is a message of its own then.)
        let newer_message = self
            .waiting
            .iter()
            .any(|waiting| waiting.request.continuation.is_none());
        if let (true, Phase::Running(live)) = (newer_message, &mut self.phase) {
            live.cancel.cancel();
            live.cancelling = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use crate::ids::SessionId;

    #[test]
    fn steering_past_the_last_request_is_promoted_to_a_turn_of_its_own() {
        run(async {
            // One model request per turn: the steering cannot join this one.
            let mut steered = steer_a_live_turn(1, "and then?").await;
            steered.accepted.expect("steering");
            let first = until_completed(&mut steered.events).await;
            assert_eq!(final_response(&first).content.as_deref(), Some("first"));
            // The promoted turn's events come on the same stream.
            let second = until_completed(&mut steered.events).await;
            assert_eq!(final_response(&second).content.as_deref(), Some("second"));
            let path = steered
                .runtime
                .messages(&caller(), &SessionId::new("s1"), None)
                .await
                .expect("the path");
            let ids: Vec<String> = path.iter().map(|message| message.id.to_string()).collect();
            assert_eq!(ids, ["m1", "m1:reply", "st1", "st1:reply"]);
        });
    }

    #[test]
    fn a_turn_failure_becomes_a_terminal_error_event() {
        let failure = super::TurnFailure::new(
            crate::error_type::ErrorType::UsageLimit,
            "max_turns reached",
            false,
        );
        let event = failure.into_event();
        assert_eq!(
            (
                event.error_type.as_str(),
                event.terminal,
                event.retry_allowed
            ),
            ("usage_limit", true, false)
        );
    }
}
