//! The inbox's hook in the core (`store::inbox`, ARCHITECTURE.md). The items
//! go into the reply before its first model request, not through the steering
//! queue, so they are stored with it however the turn ends.

use std::sync::Arc;

use super::core::{Out, Plan, State};
use crate::contract::{ChatRequest, OutputMode};
use crate::conversation::NoteOrigin;
use crate::store::InboxItem;
use crate::turn::push_note;

impl State {
    /// None for a silent decision (it takes no steering). Asked again for
    /// a message (its write was stale), the inbox gives the same items.
    pub(super) fn reserve_inbox(&self, request: &ChatRequest) -> Vec<Arc<InboxItem>> {
        if request.output_mode == OutputMode::HostTools {
            return Vec::new();
        }
        self.deps.inbox.reserve(&self.id, &request.id)
    }

    /// The write that carried `items` committed: they left the inbox.
    pub(super) fn inbox_taken(&self, request: &ChatRequest, items: &[Arc<InboxItem>]) {
        if items.is_empty() {
            return;
        }
        self.deps.inbox.taken(&self.id, &request.id);
        log::info!(
            "session {}: {} inbox item(s) taken into the turn of {}",
            self.id,
            items.len(),
            request.id
        );
    }

    /// Into the reply of the turn just planned, as announced steering notes.
    pub(super) fn deliver_drained(&self, items: Vec<Arc<InboxItem>>, plan: &mut Plan) {
        let Some(start) = plan.start.as_mut() else {
            return;
        };
        for item in items {
            let (id, text) = (Some(format!("inbox-{}", item.id)), item.envelope());
            let note = push_note(&mut start.assistant, NoteOrigin::Steering, id, text, vec![]);
            plan.out.push(Out::Event(start.sink.clone(), note));
        }
    }
}
