//! The inbox's hook in the core (`store::inbox`; the flow is in
//! ARCHITECTURE.md). The items go into the reply before its first model
//! request, not through the live turn's steering queue, so they are stored
//! with the reply however the turn ends, never dropped as late steering.

use std::sync::Arc;

use super::core::{Out, Plan, State};
use crate::contract::{ChatRequest, OutputMode};
use crate::conversation::{NoteOrigin, Segment};
use crate::events::{NoteEvent, TurnEvent};
use crate::store::InboxItem;

impl State {
    /// The inbox items a new message's write takes: none for a silent
    /// decision (`host_tools` takes no steering). Asked again for the same
    /// message (its write was stale), the inbox gives the same items back.
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

    /// Puts the taken items into the reply of the turn just planned as
    /// steering notes, announcing each as the turn itself announces steering.
    pub(super) fn deliver_drained(&self, items: Vec<Arc<InboxItem>>, plan: &mut Plan) {
        let Some(start) = plan.start.as_mut() else {
            return;
        };
        for item in items {
            let (index, text) = (start.assistant.segments.len(), item.envelope());
            let note = TurnEvent::Note(NoteEvent {
                origin: NoteOrigin::Steering,
                message_id: Some(format!("inbox-{}", item.id)),
                content: Some(text.clone()),
                segment_id: format!("{}:{index}", start.assistant.id),
                segment_index: index,
                segment_kind: "steering",
            });
            plan.out.push(Out::Event(start.sink.clone(), note));
            let (origin, attachments) = (NoteOrigin::Steering, Vec::new());
            (start.assistant.segments).push(Segment::Note {
                origin,
                text,
                attachments,
            });
        }
    }
}
