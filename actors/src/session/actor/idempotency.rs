//! A message resent with its `Idempotency-Key` (the IETF draft) is answered
//! with the first one's outcome, not a duplicate-id 409. The key lives on the
//! stored user message: scoped to the session, it survives a restart.

use super::core::{Chat, InFlight, Phase, Plan, State, Waiting};
use super::turns::{Outcome, TurnFailure};
use crate::contract::OutputMode;
use crate::conversation::{now_millis, IdempotencyMark, Message as StoredMessage, Role};
use crate::error_type::ErrorType;
use crate::events::Decision;
use crate::ids::MessageId;
use crate::session::SessionError;

/// Every turn names its reply so: pushed, not `format!`ted (a third of
/// the cost).
pub(super) fn reply_id(user: &MessageId) -> MessageId {
    const SUFFIX: &str = ":reply";
    let mut id = String::with_capacity(user.as_str().len() + SUFFIX.len());
    id.push_str(user.as_str());
    id.push_str(SUFFIX);
    MessageId::new(id)
}

/// What a message sent with a key finds of an earlier one with that key.
pub(super) enum Earlier {
    None,
    /// Another body under the key (422), or its turn still running (409).
    Refused(SessionError),
    /// Its turn ended: the stored reply's id, whose final response is sent again.
    Answered(MessageId),
    /// Stored, but no turn runs for it and no reply was stored: the process
    /// running its turn stopped (a crash). The turn runs again for it.
    Unanswered(MessageId),
}

impl State {
    /// The earlier message sent with `mark`'s key (waiting or stored).
    pub(super) fn earlier(&self, mark: &IdempotencyMark) -> Earlier {
        let keyed = |earlier: Option<&IdempotencyMark>| earlier.is_some_and(|e| e.key == mark.key);
        let waiting =
            (self.waiting.iter()).find(|waiting| keyed(waiting.request.idempotency.as_deref()));
        let stored = (self.tree.all().rev())
            .find(|message| message.role == Role::User && keyed(message.idempotency.as_deref()));
        let (id, earlier) = match (waiting, stored) {
            (Some(waiting), _) => (&waiting.request.id, waiting.request.idempotency.as_deref()),
            (None, Some(user)) => (&user.id, user.idempotency.as_deref()),
            (None, None) => return Earlier::None,
        };
        if earlier.map(|earlier| &earlier.body) != Some(&mark.body) {
            return Earlier::Refused(SessionError::validation(
                "Idempotency-Key",
                "this key was already used with another request body in this session; a resend must repeat the body byte for byte, or use a new key",
            ));
        }
        let reply = reply_id(id);
        let running = matches!(&self.phase, Phase::Running(live) if live.message_id == reply);
        if running || waiting.is_some() {
            let id = id.as_str();
            Earlier::Refused(SessionError::Conflict(format!(
                "message {id:?} sent with this Idempotency-Key is in progress; send it again once its turn has ended to get its final response"
            )))
        } else if self.tree.contains(&reply) {
            Earlier::Answered(reply)
        } else {
            Earlier::Unanswered(id.clone())
        }
    }

    /// The stored reply's final response, as its turn ended.
    pub(super) fn answer_again(&self, waiting: Chat, reply_id: &MessageId, plan: &mut Plan) {
        let Some(assistant) = self.tree.get(reply_id) else {
            let error = SessionError::Internal("a stored reply went missing".into());
            return plan.answer(waiting.reply, Err(error));
        };
        let pending =
            (self.pending()).filter(|pending| pending.assistant_message_id == assistant.id);
        let output_mode = waiting.request.output_mode;
        let decision = match (output_mode == OutputMode::HostTools, &pending) {
            (false, _) => None,
            (true, Some(_)) => Some(Decision::Pending),
            (true, None) => assistant
                .tool_records()
                .any(|tool| tool.name == crate::tools::HOLD_TOOL)
                .then_some(Decision::Hold),
        };
        let failure = stored_failure(assistant);
        let outcome = Outcome {
            failure,
            ..Outcome::decided(pending.cloned(), decision)
        };
        self.end_at_once(waiting, assistant, output_mode, None, outcome, plan);
    }

    /// Runs the turn of a stored message whose turn never ended, on a copy
    /// known current (another process may have stored its reply).
    pub(super) fn answer_unanswered(&mut self, waiting: Waiting, user: MessageId, plan: &mut Plan) {
        if !self.current {
            return self.reload(InFlight::Chat(waiting), plan);
        }
        if matches!(self.phase, Phase::AwaitingHost(_)) {
            let error = SessionError::Conflict(format!(
                "message {:?} sent with this Idempotency-Key has no reply, and the session now waits for a host result of a later message; send that result first",
                user.as_str()
            ));
            return plan.answer(waiting.reply, Err(error));
        }
        self.reset_screenshot(&waiting.request);
        let assistant =
            StoredMessage::empty(reply_id(&user), Some(user), Role::Assistant, now_millis());
        self.start_turn(*waiting, assistant, None, plan);
    }
}

fn stored_failure(assistant: &StoredMessage) -> Option<TurnFailure> {
    let error_type = assistant.error_type.as_deref().and_then(ErrorType::parse)?;
    let message = format!(
        "The turn ended with {}; this is its stored outcome.",
        error_type.as_str()
    );
    Some(TurnFailure::new(error_type, message, true))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::{json, Value};
    use tokio::sync::Notify;

    use super::super::test_support::*;
    use crate::contract::ChatRequest;
    use crate::conversation::IdempotencyMark;
    use crate::events::{EventSink, EventStream, FinalResponse, TurnEvent};
    use crate::ids::SessionId;
    use crate::session::{Caller, Runtime, SessionError, TurnAccepted};

    fn mark(key: &str, body: &str) -> IdempotencyMark {
        IdempotencyMark {
            key: key.into(),
            body: body.into(),
        }
    }

    async fn send_keyed(
        runtime: &Runtime,
        caller: &Caller,
        body: Value,
        mark: Option<IdempotencyMark>,
    ) -> (Result<TurnAccepted, SessionError>, EventStream) {
        let mut request = ChatRequest::parse(&body).expect("a valid body");
        request.idempotency = mark.map(Box::new);
        let (sink, events) = EventSink::new(true);
        (runtime.send_message(caller, request, sink).await, events)
    }

    async fn answered(runtime: &Runtime, body: Value, mark: IdempotencyMark) -> FinalResponse {
        let (accepted, mut events) = send_keyed(runtime, &caller(), body, Some(mark)).await;
        accepted.expect("accepted");
        final_response(&until_completed(&mut events).await).clone()
    }

    fn body() -> Value {
        json!({"id": "m1", "session_id": "s1", "content": "hi"})
    }

    #[test]
    fn a_resend_after_the_turn_gets_its_final_response_without_a_second_turn() {
        run(async {
            let model = ScriptedModel::new(vec![Reply::Events(vec![text("hello")])]);
            let runtime = runtime(model.clone(), 10);
            let first = answered(&runtime, body(), mark("k", "b")).await;
            let again = answered(&runtime, body(), mark("k", "b")).await;
            assert_eq!(again, first);
            assert_eq!(again.content.as_deref(), Some("hello"));
            assert_eq!(model.n_requests(), 1);
            let path = runtime
                .messages(&caller(), &SessionId::new("s1"), None)
                .await
                .expect("the path");
            assert_eq!(path.len(), 2, "{path:?}");
        });
    }

    #[test]
    fn the_same_key_with_another_body_is_refused_naming_the_header() {
        run(async {
            let model = ScriptedModel::new(vec![Reply::Events(vec![text("hello")])]);
            let runtime = runtime(model, 10);
            answered(&runtime, body(), mark("k", "b")).await;
            let other = json!({"id": "m2", "session_id": "s1", "content": "other"});
            let (accepted, _) = send_keyed(&runtime, &caller(), other, Some(mark("k", "c"))).await;
            match accepted {
                Err(SessionError::Validation(error)) => {
                    assert_eq!(error.path, "Idempotency-Key");
                    assert!(error.message.contains("another request body"), "{error:?}");
                }
                other => panic!("expected a validation error, got {other:?}"),
            }
        });
    }

    #[test]
    fn a_resend_while_the_turn_runs_is_in_progress() {
        run(async {
            let gate = Arc::new(Notify::new());
            let model = ScriptedModel::new(vec![Reply::After(gate.clone(), vec![text("late")])]);
            let runtime = runtime(model.clone(), 10);
            let (accepted, mut events) =
                send_keyed(&runtime, &caller(), body(), Some(mark("k", "b"))).await;
            accepted.expect("accepted");
            wait_for_requests(&model, 1).await;
            let (again, _) = send_keyed(&runtime, &caller(), body(), Some(mark("k", "b"))).await;
            match again {
                Err(SessionError::Conflict(why)) => assert!(why.contains("in progress"), "{why}"),
                other => panic!("expected a conflict, got {other:?}"),
            }
            gate.notify_one();
            let turn = until_completed(&mut events).await;
            assert_eq!(final_response(&turn).content.as_deref(), Some("late"));
            assert!(turn
                .iter()
                .all(|event| !matches!(event, TurnEvent::Error(_))));
        });
    }

    /// The process running the first turn stops answering (its model never
    /// ends, as a killed process never does): a second process over the same
    /// store finds the message stored with no reply and no turn of its own,
    /// and runs the turn, once; its resend after that is the stored answer.
    #[test]
    fn a_resend_to_another_process_runs_the_turn_the_first_never_finished() {
        run(async {
            let store = Arc::new(crate::store::memory::MemoryStore::new());
            let stuck = ScriptedModel::new(vec![]);
            let first = runtime_on(store.clone(), stuck.clone(), 10);
            let (accepted, _never) =
                send_keyed(&first, &caller(), body(), Some(mark("k", "b"))).await;
            accepted.expect("accepted");
            wait_for_requests(&stuck, 1).await;

            let model = ScriptedModel::new(vec![Reply::Events(vec![text("hello")])]);
            let second = runtime_on(store, model.clone(), 10);
            let answer = answered(&second, body(), mark("k", "b")).await;
            assert_eq!(answer.content.as_deref(), Some("hello"));
            assert_eq!(answer.message_id.as_str(), "m1:reply");
            assert_eq!(answered(&second, body(), mark("k", "b")).await, answer);
            assert_eq!(model.n_requests(), 1);
            let tree = second
                .tree(&caller(), &SessionId::new("s1"))
                .await
                .expect("the tree");
            let ids: Vec<&str> = tree.iter().map(|message| message.id.as_str()).collect();
            assert_eq!(ids, ["m1", "m1:reply"]);
        });
    }

    /// Without a key, or under another principal's key (another digest),
    /// a resent id is the duplicate it always was.
    #[test]
    fn without_the_key_a_resent_id_is_a_duplicate() {
        run(async {
            let model = ScriptedModel::new(vec![Reply::Events(vec![text("hello")])]);
            let runtime = runtime(model, 10);
            answered(&runtime, body(), mark("k", "b")).await;
            for resent in [None, Some(mark("another principal's k", "b"))] {
                let (accepted, _) = send_keyed(&runtime, &caller(), body(), resent).await;
                match accepted {
                    Err(SessionError::Conflict(why)) => {
                        assert!(why.contains("already exists"), "{why}")
                    }
                    other => panic!("expected a duplicate, got {other:?}"),
                }
            }
        });
    }
}
