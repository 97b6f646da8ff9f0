//! Rules of the core that only read: which pending call a result answers,
//! where a finished turn's reply goes, how a turn's end and a host's result
//! are recorded. The whole protocol is tested by `model_test.rs`.

use std::sync::Arc;

use serde_json::Value;

use super::core::State;
use crate::contract::{OutputMode, ToolOutcome};
use crate::conversation::{CallOutcome, CallStatus, Message as StoredMessage, PendingAction};
use crate::error_type::ErrorType;
use crate::events::{Decision, TurnErrorEvent};
use crate::ids::ToolCallId;
use crate::session::{SessionError, SessionResult};
use crate::turn::TurnEnd;

/// `Superseded`: off the path (a newer message or result was taken
/// meanwhile); `Gone`: the session or the turn's own message was deleted.
#[derive(Debug, PartialEq)]
pub(super) enum Placement {
    OnPath,
    Superseded,
    Gone,
}

impl State {
    /// The pending call a result for `call_id` answers, or the 409 saying why none.
    pub(super) fn result_target(&self, call_id: &ToolCallId) -> SessionResult<Arc<PendingAction>> {
        let call = call_id.as_str();
        let message = match self.pending() {
            _ if !self.is_stored() => {
                let id = self.id.as_str();
                format!("session {id:?} does not exist, so call {call:?} is not pending")
            }
            Some(pending) if &pending.tool_call_id == call_id => return Ok(pending.clone()),
            Some(pending) if pending.queued.contains(call_id) => {
                let first = pending.tool_call_id.as_str();
                format!("call {call:?} is queued behind call {first:?}; answer {first:?} first")
            }
            pending => match self.tree.all().rev().find_map(|m| m.find_tool(call_id)) {
                Some(record) if record.status == Some(CallStatus::Superseded) => format!(
                    "call {call:?} was superseded by a newer message; its result is not applied"
                ),
                Some(record) if record.has_result() => format!(
                    "the result of call {call:?} was already recorded (status: {}); a duplicate is never applied twice",
                    record.status_word()
                ),
                _ => match pending {
                    Some(pending) => {
                        let pending = pending.tool_call_id.as_str();
                        format!("call {call:?} is not pending; call {pending:?} is pending")
                    }
                    None => format!("call {call:?} is not pending; nothing is pending"),
                },
            },
        };
        Err(SessionError::Conflict(message))
    }

    /// On the path if the session still ends where the turn began.
    pub(super) fn placement(&self, assistant: &StoredMessage) -> Placement {
        let parent = assistant.parent_id.as_ref();
        if !self.is_stored() || !parent.is_some_and(|parent| self.tree.contains(parent)) {
            return Placement::Gone;
        }
        let leaf = self.record.active_leaf.as_ref();
        let began_here = leaf == Some(&assistant.id) || leaf == parent;
        if began_here && self.pending().is_none() && !self.is_running() {
            Placement::OnPath
        } else {
            Placement::Superseded
        }
    }
}

pub(super) fn pending_for(
    message: &StoredMessage,
    call_id: &ToolCallId,
    queued: Vec<ToolCallId>,
    output_mode: OutputMode,
) -> Option<Arc<PendingAction>> {
    let record = message.find_tool(call_id)?;
    Some(Arc::new(PendingAction {
        tool_call_id: call_id.clone(),
        tool_name: record.name.clone(),
        arguments: record.input.clone(),
        assistant_message_id: message.id.clone(),
        queued,
        output_mode,
    }))
}

/// Answers every record of the call id (should a provider repeat one,
/// none stays open); the call's tool name.
pub(super) fn record_result(
    assistant: &mut StoredMessage,
    pending: &PendingAction,
    output: &Value,
    outcome: ToolOutcome,
) -> String {
    let mut tool_name = pending.tool_name.clone();
    let records = assistant.tool_records_mut();
    for tool in records.filter(|tool| tool.id == pending.tool_call_id) {
        tool.output = Some(output.clone());
        tool_name = tool.name.clone();
        match outcome {
            ToolOutcome::Success => tool.outcome = Some(CallOutcome::Success),
            ToolOutcome::Failed => {
                tool.outcome = Some(CallOutcome::Failed);
                tool.status = Some(CallStatus::Failed);
            }
        }
    }
    tool_name
}

/// How a turn (or a result) ended, as its final response says.
#[derive(Default)]
pub(super) struct Outcome {
    pub(super) pending: Option<Arc<PendingAction>>,
    pub(super) decision: Option<Decision>,
    pub(super) failure: Option<TurnFailure>,
}

impl Outcome {
    pub(super) fn decided(pending: Option<Arc<PendingAction>>, decision: Option<Decision>) -> Self {
        Outcome {
            pending,
            decision,
            failure: None,
        }
    }

    pub(super) fn failed(failure: TurnFailure) -> Outcome {
        let failure = Some(failure);
        Outcome {
            failure,
            ..Outcome::default()
        }
    }
}

/// How a turn's end is recorded. Unresolved calls of a turn that stopped
/// short are marked `cancelled` in `assistant`.
pub(super) fn turn_outcome(
    assistant: &mut StoredMessage,
    end: &TurnEnd,
    output_mode: OutputMode,
) -> Outcome {
    let failure = match end {
        TurnEnd::Completed => return Outcome::default(),
        TurnEnd::HostCalls(calls) => {
            let Some((first, queued)) = calls.split_first() else {
                return Outcome::default();
            };
            let pending = pending_for(assistant, first, queued.to_vec(), output_mode);
            let decision = (output_mode == OutputMode::HostTools).then_some(Decision::Pending);
            return Outcome::decided(pending, decision);
        }
        TurnEnd::Hold => return Outcome::decided(None, Some(Decision::Hold)),
        TurnEnd::InvalidDecision(reason) => {
            let failure = TurnFailure::new(ErrorType::InvalidDecision, reason.clone(), false);
            return Outcome::failed(failure);
        }
        TurnEnd::Cancelled => {
            TurnFailure::new(ErrorType::Cancelled, "The turn was cancelled.", true)
        }
        TurnEnd::UsageLimit(reason) => {
            TurnFailure::new(ErrorType::UsageLimit, reason.clone(), false)
        }
        TurnEnd::Panicked(_) => TurnFailure::new(
            ErrorType::Internal,
            "The turn failed inside the runtime; the session is unharmed. Send the message again.",
            true,
        ),
        TurnEnd::Failed(error) => TurnFailure::new(
            error.kind.error_type(),
            error.message.clone(),
            error.kind.retry_allowed(),
        ),
    };
    assistant.interrupt_unresolved(CallStatus::Cancelled);
    Outcome::failed(failure)
}

/// Why a turn did not complete: its final response's and `error` event's.
pub(super) struct TurnFailure {
    pub(super) error_type: ErrorType,
    pub(super) message: String,
    /// Whether sending the message again may succeed.
    pub(super) retry_allowed: bool,
}

impl TurnFailure {
    pub(super) fn new(
        error_type: ErrorType,
        message: impl Into<String>,
        retry_allowed: bool,
    ) -> TurnFailure {
        TurnFailure {
            error_type,
            message: message.into(),
            retry_allowed,
        }
    }

    pub(super) fn into_event(self) -> TurnErrorEvent {
        TurnErrorEvent {
            kind: "error",
            message: self.message,
            error_type: self.error_type.as_str().to_string(),
            terminal: true,
            retry_allowed: self.retry_allowed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::core::{Loaded, Phase};
    use super::super::test_support::{deps_on, ScriptedModel};
    use super::*;
    use crate::conversation::{MessageTree, Role, Segment, ToolCategory, ToolRecord};
    use crate::ids::{MessageId, SessionId};
    use crate::store::memory::MemoryStore;

    /// A host call, answered with `output` or not answered yet.
    fn call(id: &str, output: Option<Value>) -> ToolRecord {
        ToolRecord {
            id: ToolCallId::new(id),
            name: "select_issue".into(),
            input: Value::Null,
            category: ToolCategory::Host,
            outcome: output.as_ref().map(|_| CallOutcome::Success),
            output,
            status: None,
        }
    }

    fn reply(calls: Vec<ToolRecord>) -> StoredMessage {
        let mut message = StoredMessage::empty(
            MessageId::new("m1:reply"),
            Some(MessageId::new("m1")),
            Role::Assistant,
            0,
        );
        message.segments.push(Segment::ToolGroup { tools: calls });
        message
    }

    fn tree(calls: Vec<ToolRecord>) -> MessageTree {
        let user = StoredMessage::empty(MessageId::new("m1"), None, Role::User, 0);
        MessageTree::from_messages(vec![user, reply(calls)])
    }

    fn conflict(result: Result<Arc<PendingAction>, SessionError>) -> String {
        match result {
            Err(SessionError::Conflict(why)) => why,
            other => panic!("expected a 409, got {other:?}"),
        }
    }

    /// A stored session of `tree`, its leaf `leaf`, awaiting `pending`.
    fn state(tree: MessageTree, leaf: &str, pending: Option<Arc<PendingAction>>) -> State {
        let model = ScriptedModel::new(Vec::new());
        let deps = deps_on(Arc::new(MemoryStore::new()), model, 1);
        let mut state = State::new(SessionId::new("s"), Arc::new(deps));
        state.loaded = Loaded::Stored(1);
        state.tree = tree;
        state.record.active_leaf = Some(MessageId::new(leaf));
        if let Some(pending) = pending {
            state.phase = Phase::AwaitingHost(pending);
        }
        state
    }

    #[test]
    fn a_result_names_why_it_is_not_taken() {
        let tree = tree(vec![
            call("c1", Some(Value::Null)),
            call("c2", None),
            call("c3", None),
        ]);
        let message = reply(vec![call("c2", None), call("c3", None)]);
        let pending = pending_for(
            &message,
            &ToolCallId::new("c2"),
            vec![ToolCallId::new("c3")],
            OutputMode::Text,
        );
        let mut state = state(tree, "m1:reply", pending);
        assert!(state.result_target(&ToolCallId::new("c2")).is_ok());
        let said =
            |state: &State, call: &str| conflict(state.result_target(&ToolCallId::new(call)));
        let c1 = said(&state, "c1");
        assert!(c1.contains("already recorded (status: completed)"), "{c1}");
        let c3 = said(&state, "c3");
        assert!(c3.contains("queued behind call \"c2\""), "{c3}");
        let c9 = said(&state, "c9");
        assert!(
            c9.contains("is not pending; call \"c2\" is pending"),
            "{c9}"
        );
        state.loaded = Loaded::Absent;
        assert!(said(&state, "c2").contains("does not exist"));
    }

    #[test]
    fn a_turn_is_placed_on_the_path_only_where_it_began() {
        let user = MessageId::new("m1");
        let assistant = StoredMessage::empty(
            MessageId::new("m1:reply2"),
            Some(user.clone()),
            Role::Assistant,
            0,
        );
        let mut state = state(tree(Vec::new()), "m1", None);
        assert_eq!(state.placement(&assistant), Placement::OnPath);
        state.record.active_leaf = Some(MessageId::new("m2"));
        assert_eq!(state.placement(&assistant), Placement::Superseded);
        state.loaded = Loaded::Absent;
        assert_eq!(state.placement(&assistant), Placement::Gone);
    }
}
