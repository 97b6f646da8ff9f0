//! What a session looks like after loading (runtime.md section 4): the pending
//! action survives only if its assistant message exists and its call has no
//! result; every other call without a result gets a synthetic `unknown`.

use std::sync::Arc;

use crate::conversation::{CallStatus, Message, PendingAction, Segment, ToolRecord};
use crate::store::SessionSnapshot;

pub struct Recovered {
    pub pending: Option<Arc<PendingAction>>,
    pub messages: Vec<Arc<Message>>,
    /// Messages whose calls were resolved as `unknown`; to be written back.
    pub changed: Vec<usize>,
}

pub fn recover(snapshot: SessionSnapshot) -> Recovered {
    let SessionSnapshot {
        record,
        mut messages,
        ..
    } = snapshot;
    let pending = record.pending_action.filter(|pending| {
        messages
            .iter()
            .find(|message| message.id == pending.assistant_message_id)
            .and_then(|message| find_call(message, pending.tool_call_id.as_str()))
            .is_some_and(|has_result| !has_result)
    });
    let mut awaited: Vec<&str> = Vec::new();
    if let Some(pending) = &pending {
        awaited.push(pending.tool_call_id.as_str());
        awaited.extend(pending.queued.iter().map(|id| id.as_str()));
    }
    let mut changed = Vec::new();
    for (index, message) in messages.iter_mut().enumerate() {
        // Copied only when one of its calls changes: the loaded message may
        // be shared with the store.
        let interrupted =
            |tool: &ToolRecord| !tool.has_result() && !awaited.contains(&tool.id.as_str());
        if !message.segments.iter().any(|segment| {
            matches!(segment, Segment::ToolGroup { tools } if tools.iter().any(interrupted))
        }) {
            continue;
        }
        let message = Arc::make_mut(message);
        let mut touched = false;
        for segment in &mut message.segments {
            let Segment::ToolGroup { tools } = segment else {
                continue;
            };
            for tool in tools.iter_mut() {
                if interrupted(tool) {
                    tool.interrupt(CallStatus::Unknown);
                    touched = true;
                }
            }
        }
        if touched {
            changed.push(index);
        }
    }
    Recovered {
        pending,
        messages,
        changed,
    }
}

/// `Some(has_result)` if the message holds that call.
fn find_call(message: &Message, call_id: &str) -> Option<bool> {
    message.segments.iter().find_map(|segment| match segment {
        Segment::ToolGroup { tools } => tools
            .iter()
            .find(|tool| tool.id.as_str() == call_id)
            .map(|tool| tool.has_result()),
        _ => None,
    })
}
