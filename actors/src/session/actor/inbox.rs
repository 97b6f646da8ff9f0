//! The inbox's hook in the core (`store::inbox`): a new message's write
//! takes the items waiting for the session (`reserve_inbox`, as the write is
//! decided, never waiting), the store marks them taken in that same write,
//! and once it committed (`inbox_taken`) they open the turn as steering
//! notes (`deliver_drained`, right after `status: started`). They are put in
//! the reply before its first model request, not sent through the live
//! turn's steering queue: so they are stored with the reply however the
//! turn ends (a host call, a cancel, a failure), never dropped as late
//! steering. The inbox is memory shared with the routes, not the store: a
//! reservation is a hand-off, like steering pushed into a live turn.

use std::sync::Arc;

use super::core::{Plan, State};
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
        if items.is_empty() {
            return;
        }
        let Some(start) = plan.start.as_mut() else {
            return;
        };
        let (assistant, sink) = (&mut start.assistant, start.sink.clone());
        let mut events = Vec::with_capacity(items.len());
        for item in items {
            let index = assistant.segments.len();
            let text = item.envelope();
            events.push(TurnEvent::Note(NoteEvent {
                origin: NoteOrigin::Steering,
                message_id: Some(format!("inbox-{}", item.id)),
                content: Some(text.clone()),
                segment_id: format!("{}:{index}", assistant.id),
                segment_index: index,
                segment_kind: "steering",
            }));
            assistant.segments.push(Segment::Note {
                origin: NoteOrigin::Steering,
                text,
                attachments: Vec::new(),
            });
        }
        for event in events {
            plan.event(&sink, event);
        }
    }
}
