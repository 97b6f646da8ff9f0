//! What a session looks like after loading (runtime.md section 4): the pending
//! action survives only if its assistant message exists and its call has no
//! result; every other call without a result gets a synthetic `unknown`.

use std::sync::Arc;

use crate::conversation::{CallStatus, Message, SessionRecord, ToolRecord};
use crate::store::SessionSnapshot;

pub struct Recovered {
    /// The stored row, its pending action dropped unless it survives.
    pub record: SessionRecord,
    pub messages: Vec<Arc<Message>>,
    /// Messages whose calls were resolved as `unknown`; to be written back.
    pub changed: Vec<usize>,
}

pub fn recover(snapshot: SessionSnapshot) -> Recovered {
    let (mut record, mut messages) = (snapshot.record, snapshot.messages);
    record.pending_action = record.pending_action.filter(|pending| {
        (messages.iter())
            .find(|message| message.id == pending.assistant_message_id)
            .and_then(|message| message.find_tool(&pending.tool_call_id))
            .is_some_and(|call| !call.has_result())
    });
    let pending = record.pending_action.as_deref();
    let awaited = |tool: &ToolRecord| {
        pending.is_some_and(|pending| {
            pending.tool_call_id == tool.id || pending.queued.contains(&tool.id)
        })
    };
    let interrupted = |tool: &ToolRecord| !tool.has_result() && !awaited(tool);
    let mut changed = Vec::new();
    for (index, message) in messages.iter_mut().enumerate() {
        // Copied only when one of its calls changes: the loaded message may
        // be shared with the store.
        if message.tool_records().any(interrupted) {
            let tools = Arc::make_mut(message).tool_records_mut();
            tools
                .filter(|tool| interrupted(tool))
                .for_each(|tool| tool.interrupt(CallStatus::Unknown));
            changed.push(index);
        }
    }
    Recovered {
        record,
        messages,
        changed,
    }
}
