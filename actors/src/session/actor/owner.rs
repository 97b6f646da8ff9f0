//! Owner transfer (`PATCH /api/sessions/{id}/owner`): an admin hands a stored
//! session to another principal, or to none (then only admins may touch it).
//! A live turn goes on; the new owner is checked from the next request on.

use std::sync::Arc;

use super::core::{InFlight, Plan, ReplyTo, State};
use crate::session::{Caller, SessionError};

/// An owner change, waiting for its write.
pub(super) struct OwnerChange {
    pub(super) caller: Caller,
    pub(super) owner_id: Option<Arc<str>>,
    pub(super) reply: ReplyTo<()>,
}

impl State {
    /// Writes the new owner: admins only, on a stored session (404 otherwise).
    pub(super) fn set_owner(&mut self, change: OwnerChange, plan: &mut Plan) {
        let allowed = match change.caller.admin {
            true => self.authorize_read(&change.caller),
            false => Err(SessionError::forbidden(&self.id)),
        };
        if let Err(error) = allowed {
            self.stop_if_absent(plan);
            return plan.answer(change.reply, Err(error));
        }
        if self.record.owner_id == change.owner_id {
            return plan.answer(change.reply, Ok(()));
        }
        let mut record = self.stored_record();
        record.owner_id = change.owner_id.clone();
        plan.write(self.write(record, None), InFlight::Owner(change));
    }

    /// The write committed: the copy takes the new owner.
    pub(super) fn owner_set(&mut self, change: OwnerChange, plan: &mut Plan) {
        self.record.owner_id = change.owner_id;
        plan.answer(change.reply, Ok(()));
    }
}

#[cfg(test)]
mod tests {
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
    /// is decided again (`InFlight::Owner`), and it still lands.
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
