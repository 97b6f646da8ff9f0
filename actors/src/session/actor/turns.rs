//! Turns (core): start one, record how it ended, place and store its reply,
//! send its final response, and answer what waited for it (`run_waiting`).

use std::sync::Arc;

use tokio::sync::oneshot;

use super::accepting::accepted;
use super::core::{Chat, InFlight, LiveTurn, Phase, Plan, State, Waiting, MAX_QUEUED_STEERING};
use super::rules::{turn_outcome, Placement};
pub(super) use super::rules::{Outcome, TurnFailure};
use crate::contract::{ChatRequest, MessageType, OutputMode};
use crate::conversation::SessionRecord;
use crate::conversation::{CallStatus, Message as StoredMessage};
use crate::error_type::ErrorType;
use crate::events::{EventSink, FinalResponse, PendingToolCall};
use crate::events::{TurnEvent, TurnStatus};
use crate::model::{ModelId, SharedModelClient};
use crate::trace::TurnTrace;
use crate::turn::{steering_queue, CancelHandle, CancelToken, SteeringNote, SteeringReceiver};
use crate::turn::{TurnEnd, TurnOutput};

/// A turn the shell starts (`SessionActor::spawn_turn`).
pub(super) struct Start {
    pub(super) turn_id: u64,
    pub(super) request: Box<ChatRequest>,
    pub(super) assistant: StoredMessage,
    pub(super) sink: EventSink,
    pub(super) model_id: ModelId,
    pub(super) model: SharedModelClient,
    pub(super) cancel: CancelToken,
    pub(super) steering: SteeringReceiver,
}

pub(super) struct TurnEnded {
    pub(super) turn_id: u64,
    pub(super) output: TurnOutput,
    /// Made for this turn (history compaction).
    pub(super) summary: Option<Arc<StoredMessage>>,
}

pub(super) struct TraceEnd {
    pub(super) trace: Box<TurnTrace>,
    pub(super) outcome: &'static str,
    pub(super) error_type: Option<ErrorType>,
}

/// A turn that ended, on its way to the store.
pub(super) struct FinishedTurn {
    live: LiveTurn,
    assistant: Arc<StoredMessage>,
    outcome: Outcome,
    /// Not once another process's newer message superseded the turn.
    on_path: bool,
    summary: Option<Arc<StoredMessage>>,
}

impl State {
    /// Starts the model loop for `assistant` (new, or resumed after a host
    /// result); `opening` follows `status: started`, the first event.
    pub(super) fn start_turn(
        &mut self,
        waiting: Chat,
        mut assistant: StoredMessage,
        opening: impl IntoIterator<Item = TurnEvent>,
        plan: &mut Plan,
    ) {
        let (request, sink) = (waiting.request, waiting.sink);
        let (model_id, model) = match self.deps.plan_model(&request.config) {
            Ok(planned) => planned,
            Err(error) => return plan.answer(waiting.reply, Err(error)),
        };
        assistant.model = Some(model_id.shared_text());
        let (cancel, token) = CancelHandle::new();
        let (steering, steering_rx) = steering_queue(MAX_QUEUED_STEERING);
        self.next_turn_id += 1;
        self.phase = Phase::Running(LiveTurn {
            id: self.next_turn_id,
            cancel,
            cancelling: false,
            steering,
            sink: sink.clone(),
            caller: waiting.caller,
            output_mode: request.output_mode,
            model: model_id.shared_text(),
            message_id: assistant.id.clone(),
        });
        plan.answer(waiting.reply, Ok(accepted(&assistant.id)));
        plan.status(&sink, &self.id, TurnStatus::Started);
        for event in opening {
            plan.event(&sink, event);
        }
        // Allocated first, so the fields are written in place (see `spawn_turn`).
        plan.start = Some(Box::write(
            Box::new_uninit(),
            Start {
                turn_id: self.next_turn_id,
                request,
                assistant,
                sink,
                model_id,
                model,
                cancel: token,
                steering: steering_rx,
            },
        ));
    }

    pub(super) fn finish_turn(&mut self, ended: TurnEnded, plan: &mut Plan) {
        let live = match std::mem::replace(&mut self.phase, Phase::Idle) {
            Phase::Running(live) if live.id == ended.turn_id => live,
            other => {
                self.phase = other;
                let turn_id = ended.turn_id;
                return log::error!("session {}: finished turn {turn_id} was not live", self.id);
            }
        };
        // A call another process left pending meanwhile is pending now.
        self.phase = Phase::awaiting(self.record.pending_action.take());
        let output = ended.output;
        let (mut assistant, end) = (output.assistant, output.end);
        self.late_steering(output.steering, &end, &live);
        let outcome = turn_outcome(&mut assistant, &end, live.output_mode);
        let error_type = outcome.failure.as_ref().map(|failure| failure.error_type);
        assistant.error_type = error_type.map(|error_type| error_type.as_str().to_string());
        plan.trace = output.trace.map(|trace| TraceEnd {
            trace,
            outcome: end.trace_outcome(),
            error_type,
        });
        let turn = FinishedTurn {
            live,
            assistant: Arc::new(assistant),
            outcome,
            on_path: true,
            summary: ended.summary,
        };
        self.place_turn(turn, plan);
    }

    /// Steering that arrived as the turn ended: the next turn after a
    /// completed turn, dropped (and logged) otherwise.
    fn late_steering(&mut self, mut late: SteeringReceiver, end: &TurnEnd, live: &LiveTurn) {
        let mut n = 0;
        while let Some(note) = late.try_recv() {
            // Ahead of anything else waiting.
            if *end == TurnEnd::Completed {
                self.waiting.insert(n, promoted(note, live, &self.id));
            }
            n += 1;
        }
        if n > 0 && *end != TurnEnd::Completed {
            log::info!("session {}: {n} steering message(s) arrived as the turn ended ({end:?}); not delivered", self.id);
        }
    }

    /// A reply a newer message or result superseded is stored off the path,
    /// its calls `superseded`, reported cancelled. Stored messages never move.
    pub(super) fn place_turn(&mut self, mut turn: FinishedTurn, plan: &mut Plan) {
        match self.placement(&turn.assistant) {
            Placement::OnPath => {}
            Placement::Gone => {
                let message =
                    "The session was deleted while the turn ran; its reply was not saved.";
                return self.turn_not_saved(turn, ErrorType::Cancelled, message, plan);
            }
            Placement::Superseded => {
                turn.on_path = false;
                // Not shared: a write that found the session stale keeps nothing.
                let assistant = Arc::make_mut(&mut turn.assistant);
                assistant.interrupt_unresolved(CallStatus::Superseded);
                assistant.error_type = Some(ErrorType::Cancelled.as_str().into());
                turn.outcome = Outcome::failed(TurnFailure::new(ErrorType::Cancelled, "A newer message or result for this session was taken by another process while this turn ran; the turn was superseded.", true));
            }
        }
        self.store_turn(turn, plan);
    }

    /// Stores the reply, its pending call and summary. Stale: placed again.
    fn store_turn(&mut self, turn: FinishedTurn, plan: &mut Plan) {
        let mut record = self.stored_record();
        if turn.on_path {
            record.active_leaf = Some(turn.assistant.id.clone());
            record.pending_action = turn.outcome.pending.clone();
        }
        let messages = match &turn.summary {
            None => smallvec::smallvec![turn.assistant.clone()],
            Some(summary) => smallvec::smallvec![summary.clone(), turn.assistant.clone()],
        };
        plan.write(self.write(record, Some(messages)), InFlight::Turn(turn));
    }

    pub(super) fn turn_stored(
        &mut self,
        turn: FinishedTurn,
        mut record: SessionRecord,
        plan: &mut Plan,
    ) {
        if let Some(summary) = turn.summary {
            self.tree.upsert(summary);
        }
        if turn.on_path {
            record.pending_action = None;
            self.record = record;
            self.phase = Phase::awaiting(turn.outcome.pending.clone());
        }
        self.end_live(turn.live, &turn.assistant, turn.outcome, plan);
        self.tree.upsert(turn.assistant);
        plan.run_waiting = true;
        plan.life = Some(super::core::Life::Settled);
    }

    /// Ends a turn whose reply could not be stored, then what waited.
    pub(super) fn turn_not_saved(
        &mut self,
        turn: FinishedTurn,
        error_type: ErrorType,
        message: &str,
        plan: &mut Plan,
    ) {
        let outcome = Outcome::failed(TurnFailure::new(error_type, message, true));
        self.end_live(turn.live, &turn.assistant, outcome, plan);
        plan.run_waiting = true;
    }

    pub(super) fn end_live(
        &self,
        live: LiveTurn,
        assistant: &StoredMessage,
        outcome: Outcome,
        plan: &mut Plan,
    ) {
        self.end_turn(&live.sink, live.output_mode, assistant, outcome, plan);
    }

    /// A result's receipt, or a resent message's stored outcome.
    pub(super) fn end_at_once(
        &self,
        waiting: Chat,
        assistant: &StoredMessage,
        output_mode: OutputMode,
        opening: Option<TurnEvent>,
        outcome: Outcome,
        plan: &mut Plan,
    ) {
        let sink = &waiting.sink;
        plan.answer(waiting.reply, Ok(accepted(&assistant.id)));
        plan.status(sink, &self.id, TurnStatus::Started);
        if let Some(event) = opening {
            plan.event(sink, event);
        }
        self.end_turn(sink, output_mode, assistant, outcome, plan);
    }

    /// `final_response` (the reply's model), a terminal `error` if it failed,
    /// `status: completed`.
    pub(super) fn end_turn(
        &self,
        sink: &EventSink,
        output_mode: OutputMode,
        assistant: &StoredMessage,
        outcome: Outcome,
        plan: &mut Plan,
    ) {
        let failure = outcome.failure;
        let final_response = Box::write(
            Box::new_uninit(),
            FinalResponse {
                content: (output_mode == OutputMode::Text).then(|| assistant.text()),
                model: assistant.model.clone().unwrap_or_default(),
                streamed: sink.streamed,
                session_id: self.id.clone(),
                turn_number: self.record.turn_number,
                message_id: assistant.id.clone(),
                usage: assistant.usage.as_deref().cloned().unwrap_or_default(),
                pending_tool_call: outcome.pending.as_deref().map(|pending| PendingToolCall {
                    tool_name: pending.tool_name.clone(),
                    call_id: pending.tool_call_id.to_string(),
                    arguments: pending.arguments.clone(),
                    queued: pending.queued.iter().map(|id| id.to_string()).collect(),
                }),
                decision: outcome.decision,
                error: failure.as_ref().map(|_| true),
                error_type: (failure.as_ref())
                    .map(|failure| failure.error_type.as_str().to_string()),
                error_message: failure.as_ref().map(|failure| failure.message.clone()),
            },
        );
        plan.event(sink, TurnEvent::FinalResponse(final_response));
        if let Some(failure) = failure {
            plan.event(sink, TurnEvent::Error(failure.into_event()));
        }
        plan.status(sink, &self.id, TurnStatus::Completed);
    }

    /// Answers the next request that waited, unless a turn is live (then an
    /// ordinary message waiting cancels it).
    pub(super) fn run_waiting(&mut self, plan: &mut Plan) {
        if !self.is_running() {
            if let Some(waiting) = self.waiting.pop_front() {
                self.accept(waiting, plan);
                plan.run_waiting = true;
            }
            return;
        }
        if (self.waiting.iter()).any(|waiting| waiting.request.continuation.is_none()) {
            self.cancel_live(plan);
        }
    }
}

/// Steering that missed its turn, already acknowledged: nobody waits for the reply.
fn promoted(note: SteeringNote, live: &LiveTurn, id: &crate::ids::SessionId) -> Waiting {
    let request = Box::new(ChatRequest {
        id: note.id,
        session_id: id.clone(),
        content: note.text,
        parent_id: None,
        message_type: MessageType::Standard,
        output_mode: OutputMode::Text,
        attachments: note.attachments,
        host_context: None,
        config: Default::default(),
        continuation: None,
        idempotency: None,
    });
    let (reply, _unanswered) = oneshot::channel();
    Box::new(Chat {
        request,
        sink: live.sink.clone(),
        caller: live.caller.clone(),
        reply,
    })
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
