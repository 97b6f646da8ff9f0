//! The requests other than chat messages (core): join, owner transfer,
//! repair, cancel, delete, and the reads.

use std::sync::Arc;

use super::core::{InFlight, Io, Life, Loaded, Phase, Plan, ReplyTo, Request, State, Write};
use super::turns::{Outcome, TurnFailure};
use crate::conversation::{CallStatus, Message as StoredMessage, Role, StoredContext};
use crate::error_type::ErrorType;
use crate::ids::MessageId;
use crate::session::requests::SessionInfo;
use crate::session::{Caller, SessionError, SessionResult};
use crate::store::StoreResult;

impl State {
    /// Decides a request: now, or again on a reloaded copy.
    pub(super) fn handle(&mut self, caller: Caller, request: Request, plan: &mut Plan) {
        let allowed = match &request {
            Request::Join(..) => self.authorize_write(&caller),
            Request::Owner(..) if !caller.admin => Err(SessionError::forbidden(&self.id)),
            _ => self.authorize_read(&caller),
        };
        match (request, allowed) {
            // An admin cancelling nothing is told so, as before ownership;
            // deleting a session this copy does not have still asks the store
            // (another process may have written it).
            (Request::Cancel(reply), Err(SessionError::NotFound(_))) => {
                plan.answer(reply, Ok(false))
            }
            (Request::Delete(reply), Ok(()) | Err(SessionError::NotFound(_))) => {
                plan.cancel = self.is_running();
                plan.io(Io::Delete(reply, self.is_stored()));
            }
            (request, Err(error)) => request.refuse(error, plan),
            // Nothing to write: joined already, or the owner already is.
            (Request::Join(None, reply), Ok(())) if self.is_stored() => plan.answer(reply, Ok(())),
            (Request::Owner(owner_id, reply), Ok(())) if owner_id == self.record.owner_id => {
                plan.answer(reply, Ok(()))
            }
            (request @ (Request::Join(..) | Request::Owner(..)), Ok(())) => {
                self.store_request(caller, request, plan)
            }
            (Request::Repair(reply), Ok(())) => self.repair(caller, reply, plan),
            (Request::Cancel(reply), Ok(())) => {
                let cancelled = self.cancel_live(plan);
                plan.answer(reply, Ok(cancelled));
            }
            (Request::Info(reply), Ok(())) => plan.answer(reply, Ok(self.info())),
            (Request::Path(leaf, reply), Ok(())) => plan.answer(reply, self.path(leaf)),
            (Request::Tree(reply), Ok(())) => {
                plan.answer(reply, Ok(self.tree.all().cloned().collect()))
            }
        }
        if plan.io.is_none() && self.is_absent() {
            plan.life = Some(Life::StopIfAbsent);
        }
    }

    pub(super) fn request_written(&mut self, request: Request, write: Write, plan: &mut Plan) {
        match request {
            Request::Join(_, reply) | Request::Owner(_, reply) => {
                let record = write.record;
                (self.record.host_context, self.record.owner_id) =
                    (record.host_context, record.owner_id);
                plan.answer(reply, Ok(()));
            }
            Request::Repair(reply) => {
                for message in write.messages.unwrap_or_default() {
                    self.tree.upsert(message);
                }
                self.phase = Phase::Idle;
                plan.answer(reply, Ok(self.info()));
            }
            read => read.refuse(
                SessionError::Internal("nothing was to be written".into()),
                plan,
            ),
        }
    }

    fn info(&self) -> SessionInfo {
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

    /// To the active leaf by default.
    fn path(&self, leaf: Option<MessageId>) -> SessionResult<Vec<StoredMessage>> {
        let leaf = leaf.as_ref().or(self.record.active_leaf.as_ref());
        if let Some(leaf) = leaf.filter(|leaf| !self.tree.contains(leaf)) {
            let leaf = leaf.as_str();
            let message = format!("leaf_id {leaf:?} is not a message of this session");
            return Err(SessionError::Conflict(message));
        }
        Ok(self.tree.path_to(leaf).into_iter().cloned().collect())
    }

    /// A join or an owner change (checked from the next request on; a live
    /// turn goes on). Stale: decided again, so no old pending call or leaf
    /// is written back.
    fn store_request(&mut self, caller: Caller, request: Request, plan: &mut Plan) {
        let mut record = self.stored_record();
        match &request {
            Request::Join(Some(context), _) => {
                record.host_context = Some(Arc::new(StoredContext::new((**context).clone())))
            }
            Request::Owner(owner_id, _) => record.owner_id = owner_id.clone(),
            _ => {}
        }
        plan.write(self.write(record, None), InFlight::Request(caller, request));
    }

    /// Resolves every unresolved call as `unknown` and drops the pending call.
    fn repair(&mut self, caller: Caller, reply: ReplyTo<SessionInfo>, plan: &mut Plan) {
        if self.is_running() {
            let error = SessionError::Conflict(
                "a turn is running; cancel it before repairing the session".into(),
            );
            return plan.answer(reply, Err(error));
        }
        // Every message: one stored too deep was read with its deep part
        // replaced (`store::readback`), and this stores that readable form.
        let changed = (self.tree.all())
            .map(|message| {
                let mut message = message.clone();
                message.interrupt_unresolved(CallStatus::Unknown);
                Arc::new(message)
            })
            .collect();
        let mut record = self.record.clone();
        record.pending_action = None;
        let in_flight = InFlight::Request(caller, Request::Repair(reply));
        plan.write(self.write(record, Some(changed)), in_flight);
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
            // Gone: 404 (one sent after the delete starts a new session).
            for waiting in self.waiting.drain(..) {
                let gone = SessionError::NotFound(self.id.to_string());
                plan.answer(waiting.reply, Err(gone));
            }
            plan.life = Some(Life::Stop);
        }
        plan.answer(reply, outcome);
    }

    /// Ends the stream of a turn whose session was deleted under it (its end
    /// will find no actor). Nothing is saved.
    fn abandon_live_turn(&mut self, plan: &mut Plan) {
        let Phase::Running(live) = std::mem::replace(&mut self.phase, Phase::Idle) else {
            return;
        };
        let message = "The session was deleted; its turn was cancelled.";
        let mut reply = StoredMessage::empty(live.message_id.clone(), None, Role::Assistant, 0);
        reply.model = Some(live.model.clone());
        let failure = TurnFailure::new(ErrorType::Cancelled, message, false);
        self.end_live(live, &reply, Outcome::failed(failure), plan);
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

#[cfg(test)]
mod owner_tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::super::test_support::{
        caller, run, runtime_on, send, text, until_completed, Reply, ScriptedModel,
    };
    use crate::ids::SessionId;
    use crate::session::{Caller, SessionError};
    use crate::store::memory::MemoryStore;

    /// Two runtimes on one store are two processes on one database: the
    /// second one's copy is stale when it writes, so its write reloads and
    /// is decided again (`InFlight::Request`), and it still lands.
    #[test]
    fn a_stale_copy_reloads_and_hands_the_session_over_all_the_same() {
        run(async {
            let store = Arc::new(MemoryStore::new());
            let model = ScriptedModel::new(vec![Reply::Events(vec![text("hi")])]);
            let first = runtime_on(store.clone(), model.clone(), 4);
            let second = runtime_on(store.clone(), model.clone(), 4);
            let id = SessionId::new("owned");
            let body = json!({"id": "m1", "session_id": "owned", "content": "hi"});
            let (accepted, mut events) = send(&first, body).await;
            accepted.expect("a turn");
            until_completed(&mut events).await;
            let admin = Caller::new("root", true);
            second
                .session(&admin, &id)
                .await
                .expect("the second one loads it");
            first
                .set_owner(&admin, &id, Some("bob".into()))
                .await
                .expect("the first one writes");
            second
                .set_owner(&admin, &id, None)
                .await
                .expect("the second one, after a reload");
            let fresh = runtime_on(store, model, 4);
            let stored = fresh.session(&admin, &id).await.expect("stored");
            assert_eq!(stored.owner_id, None);
            let refused = fresh.session(&caller(), &id).await;
            assert!(
                matches!(refused, Err(SessionError::Forbidden(_))),
                "{refused:?}"
            );
            let not_admin = first.set_owner(&caller(), &id, None).await;
            assert!(
                matches!(not_admin, Err(SessionError::Forbidden(_))),
                "{not_admin:?}"
            );
            let absent = first
                .set_owner(&admin, &SessionId::new("nobody"), None)
                .await;
            assert!(
                matches!(absent, Err(SessionError::NotFound(_))),
                "{absent:?}"
            );
        });
    }
}
