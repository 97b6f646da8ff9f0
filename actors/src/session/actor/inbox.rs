//! The inbox's hook in the actor (`store::inbox`): a new message's write
//! takes the items waiting for the session (`reserve_inbox`, before the
//! write, never waiting), the store marks them taken in that same write,
//! and once it committed (`inbox_taken`) they open the turn as steering
//! notes (`deliver_drained`, right after `status: started`). They are put in
//! the reply before its first model request, not sent through the live
//! turn's steering queue: so they are stored with the reply however the
//! turn ends (a host call, a cancel, a failure), never dropped as late
//! steering.

use std::sync::Arc;

use super::SessionActor;
use crate::contract::{ChatRequest, OutputMode};
use crate::conversation::{Message as StoredMessage, NoteOrigin, Segment};
use crate::events::{EventSink, NoteEvent, TurnEvent};
use crate::store::InboxItem;

impl SessionActor {
    /// The inbox items a new message's write takes: none for a silent
    /// decision (`host_tools` takes no steering).
    pub(super) fn reserve_inbox(&self, request: &ChatRequest) -> Vec<Arc<InboxItem>> {
        if request.output_mode == OutputMode::HostTools {
            return Vec::new();
        }
        self.deps.inbox.reserve(&self.id, &request.id)
    }

    /// The write that carried `items` committed: they left the inbox, and
    /// the turn about to start opens with them.
    pub(super) fn inbox_taken(&mut self, request: &ChatRequest, items: Vec<Arc<InboxItem>>) {
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
        self.drained = items;
    }

    /// Puts the drained items into the reply as steering notes, announcing
    /// each on the turn's stream as the turn itself announces steering.
    pub(super) fn deliver_drained(&mut self, assistant: &mut StoredMessage, sink: &EventSink) {
        for item in std::mem::take(&mut self.drained) {
            let index = assistant.segments.len();
            let text = item.envelope();
            sink.send(TurnEvent::Note(NoteEvent {
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
    }
}
