//! The admin requests (core): join, repair, delete, cancel, and the reads.

use std::sync::Arc;

use super::core::State;
use super::core::{InFlight, Joining, Life, Loaded, Phase, Plan, Read, Repairing, ReplyTo};
use super::turns::TurnFailure;
use crate::conversation::{CallStatus, Message as StoredMessage, Role, StoredContext};
use crate::error_type::ErrorType;
use crate::ids::MessageId;
use crate::session::requests::SessionInfo;
use crate::session::{Caller, SessionError};
use crate::store::StoreResult;

impl State {
    pub(super) fn info(&self) -> SessionInfo {
        let record = &self.record;
        SessionInfo {
            session_id: self.id.to_string(),
            owner_id: record.owner_id.as_deref().map(String::from),
            title: record.title.as_deref().map(String::from),
            created_at: record.created_at,
            turn_number: record.turn_number,
            message_count: self.tree.len(),
            active_leaf: record.active_leaf.as_ref().map(|id| id.to_string()),
            turn_running: self.is_running(),
            pending_action: self.pending().map(|pending| (**pending).clone()),
            host_context: (record.host_context.as_deref()).map(|kept| kept.context().to_value()),
        }
    }

    pub(super) fn read(&mut self, caller: &Caller, read: Read, plan: &mut Plan) {
        let allowed = self.authorize_read(caller);
        match read {
            Read::Info(reply) => plan.answer(reply, allowed.map(|()| self.info())),
            Read::Path(leaf, reply) => plan.answer(reply, allowed.and_then(|()| self.path(leaf))),
            Read::Tree(reply) => {
                plan.answer(reply, allowed.map(|()| self.tree.all().cloned().collect()))
            }
        }
        self.stop_if_absent(plan);
    }

    /// The root-to-leaf path, to the active leaf by default.
    fn path(&self, leaf: Option<MessageId>) -> Result<Vec<StoredMessage>, SessionError> {
        let leaf = leaf.or_else(|| self.record.active_leaf.clone());
        if let Some(leaf) = leaf.as_ref().filter(|leaf| !self.tree.contains(leaf)) {
            return Err(SessionError::Conflict(format!(
                "leaf_id {:?} is not a message of this session",
                leaf.to_string()
            )));
        }
        Ok(self
            .tree
            .path_to(leaf.as_ref())
            .into_iter()
            .cloned()
            .collect())
    }

    /// Creates the session if needed and keeps the joining page's context.
    /// Stale: joined again on the reloaded copy, so the old pending call
    /// (or leaf) is never written back.
    pub(super) fn join(&mut self, joining: Box<Joining>, plan: &mut Plan) {
        if let Err(error) = self.authorize_write(&joining.caller) {
            return plan.answer(joining.reply, Err(error));
        }
        if joining.host_context.is_none() && self.is_stored() {
            return plan.answer(joining.reply, Ok(()));
        }
        let mut record = self.stored_record();
        if let Some(context) = &joining.host_context {
            record.host_context = Some(Arc::new(StoredContext::new(context.clone())));
        }
        plan.write(self.write(record, None), InFlight::Join(joining));
    }

    /// Resolves every unresolved call as `unknown` and drops the pending call.
    pub(super) fn repair(&mut self, repairing: Repairing, plan: &mut Plan) {
        if let Err(error) = self.authorize_read(&repairing.caller) {
            self.stop_if_absent(plan);
            return plan.answer(repairing.reply, Err(error));
        }
        if self.is_running() {
            let error = SessionError::Conflict(
                "a turn is running; cancel it before repairing the session".into(),
            );
            return plan.answer(repairing.reply, Err(error));
        }
        // Every message is written back, not only those it resolves: one an
        // older version stored too deep was read with its deep part replaced
        // (`store::readback`), and this stores that readable form.
        let changed = (self.tree.all())
            .map(|message| {
                let mut message = message.clone();
                message.interrupt_unresolved(CallStatus::Unknown);
                Arc::new(message)
            })
            .collect();
        let mut record = self.record.clone();
        record.pending_action = None;
        plan.write(
            self.write(record, Some(changed)),
            InFlight::Repair(repairing),
        );
    }

    pub(super) fn cancel(&mut self, caller: &Caller, reply: ReplyTo<bool>, plan: &mut Plan) {
        let answer = match self.authorize_read(caller) {
            Ok(()) => Ok(self.cancel_live(plan)),
            // An admin cancelling nothing is told so, as before ownership.
            Err(SessionError::NotFound(_)) => Ok(false),
            Err(error) => Err(error),
        };
        if !matches!(answer, Ok(true)) {
            self.stop_if_absent(plan);
        }
        plan.answer(reply, answer);
    }

    /// Cancels any live turn and deletes the stored session. An admin
    /// deleting a session this copy does not have still asks the store
    /// (another process may have written it).
    pub(super) fn delete(&mut self, caller: &Caller, reply: ReplyTo<bool>, plan: &mut Plan) {
        match self.authorize_read(caller) {
            Ok(()) | Err(SessionError::NotFound(_)) => {}
            Err(error) => {
                self.stop_if_absent(plan);
                return plan.answer(reply, Err(error));
            }
        }
        plan.cancel = self.is_running();
        plan.io(super::core::Io::Delete(reply, self.is_stored()));
    }

    pub(super) fn deleted(
        &mut self,
        deleted: StoreResult<bool>,
        reply: ReplyTo<bool>,
        existed: bool,
        plan: &mut Plan,
    ) {
        let outcome = (deleted.map_err(SessionError::from)).map(|found| found || existed);
        if outcome.is_ok() {
            self.loaded = Loaded::Absent;
            self.abandon_live_turn(plan);
            // Requests waiting for the live turn answer 404: their session is
            // gone. (One sent after the delete starts a new session.)
            for waiting in self.waiting.drain(..) {
                let gone = SessionError::NotFound(self.id.to_string());
                plan.answer(waiting.reply, Err(gone));
            }
            plan.life = Some(Life::Stop);
        }
        plan.answer(reply, outcome);
    }

    /// Ends the stream of a turn whose session was deleted under it (its
    /// end will find no actor): a cancelled final response, a terminal
    /// error, then `completed`. Nothing is saved.
    fn abandon_live_turn(&mut self, plan: &mut Plan) {
        let Phase::Running(live) = std::mem::replace(&mut self.phase, Phase::Idle) else {
            return;
        };
        let message = "The session was deleted; its turn was cancelled.";
        let reply = StoredMessage::empty(live.message_id.clone(), None, Role::Assistant, 0);
        let failure = TurnFailure::new(ErrorType::Cancelled, message, false);
        self.end_failed(live, &reply, failure, plan);
    }

    pub(super) fn stop_if_absent(&self, plan: &mut Plan) {
        if self.is_absent() {
            plan.life = Some(Life::StopIfAbsent);
        }
    }

    /// Not stored, and nothing live or waiting: an actor with no reason to stay.
    pub(super) fn is_absent(&self) -> bool {
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
