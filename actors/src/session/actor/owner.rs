//! Owner transfer (`PATCH /api/sessions/{id}/owner`): an admin hands a stored
//! session to another principal, or to none (then only admins may touch it).
//! One request (`SetOwner`), one versioned session write through the write
//! loop; stale, it is decided again on the reloaded copy (`InFlight::Owner`).
//! A live turn goes on; the new owner is checked from the next request on.

use std::sync::Arc;
use std::time::Instant;

use actix::prelude::*;

use super::{answer, reply_channel, InFlight, ReplyTo, SessionActor};
use crate::session::requests::SetOwner;
use crate::session::{Caller, SessionError};

/// An owner change waiting for its write.
pub(super) struct OwnerChange {
    caller: Caller,
    owner_id: Option<Arc<str>>,
    reply: ReplyTo<()>,
}

impl From<OwnerChange> for InFlight {
    fn from(change: OwnerChange) -> InFlight {
        InFlight::Owner(change)
    }
}

impl OwnerChange {
    pub(super) fn refuse(self, error: SessionError) {
        answer(self.reply, Err(error));
    }
}

impl Handler<SetOwner> for SessionActor {
    type Result = ResponseFuture<Result<(), SessionError>>;

    fn handle(&mut self, set: SetOwner, ctx: &mut Context<Self>) -> Self::Result {
        self.last_activity = Instant::now();
        self.reloads = 0;
        let (reply, answered) = reply_channel();
        let change = OwnerChange {
            caller: set.caller,
            owner_id: set.owner_id,
            reply,
        };
        self.set_owner(change, ctx);
        answered
    }
}

impl SessionActor {
    /// Writes the new owner: admins only, on a stored session (404 otherwise).
    pub(super) fn set_owner(&mut self, change: OwnerChange, ctx: &mut Context<Self>) {
        let allowed = if change.caller.admin {
            self.authorize_read(&change.caller)
        } else {
            Err(SessionError::forbidden(&self.id))
        };
        if let Err(error) = allowed {
            self.stop_if_absent(ctx);
            return change.refuse(error);
        }
        if self.record.owner_id == change.owner_id {
            return answer(change.reply, Ok(()));
        }
        let mut record = self.stored_record();
        record.owner_id = change.owner_id.clone();
        let write = self.deps.store.save_session(self.version(), &record);
        self.write(ctx, write, change, |actor, _ctx, change| {
            actor.record.owner_id = change.owner_id;
            answer(change.reply, Ok(()));
        });
    }
}
