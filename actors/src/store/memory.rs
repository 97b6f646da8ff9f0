//! The in-memory store: the default, lasting for the process. It keeps each
//! session as its record plus messages behind one mutex per shard, so sessions
//! on different shards never contend.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::Mutex;

use futures_util::future::{self, BoxFuture, FutureExt};

use super::{SessionSnapshot, SessionSummary, Store, StoreResult};
use crate::conversation::{Message, PendingAction, SessionRecord};
use crate::ids::{SessionId, ToolCallId};

/// Enough shards that two busy workers rarely meet on one lock.
const N_SHARDS: usize = 64;

pub struct MemoryStore {
    shards: Vec<Mutex<HashMap<SessionId, StoredSession>>>,
    hasher: std::collections::hash_map::RandomState,
}

struct StoredSession {
    record: SessionRecord,
    messages: Vec<Message>,
}

impl Default for MemoryStore {
    fn default() -> Self {
        MemoryStore::new()
    }
}

impl MemoryStore {
    pub fn new() -> MemoryStore {
        MemoryStore {
            shards: (0..N_SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            hasher: Default::default(),
        }
    }

    fn shard(
        &self,
        id: &SessionId,
    ) -> std::sync::MutexGuard<'_, HashMap<SessionId, StoredSession>> {
        let index = (self.hasher.hash_one(id) as usize) % N_SHARDS;
        // A poisoned shard only means another thread panicked mid-update of
        // plain data; the map itself is still consistent enough to serve.
        self.shards[index]
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn upsert(&self, record: &SessionRecord, messages: &[Message]) {
        let mut shard = self.shard(&record.id);
        let stored = shard
            .entry(record.id.clone())
            .or_insert_with(|| StoredSession {
                record: record.clone(),
                messages: Vec::new(),
            });
        stored.record = record.clone();
        for message in messages {
            match stored
                .messages
                .iter_mut()
                .find(|existing| existing.id == message.id)
            {
                Some(existing) => *existing = message.clone(),
                None => stored.messages.push(message.clone()),
            }
        }
    }
}

impl Store for MemoryStore {
    fn load(&self, id: &SessionId) -> BoxFuture<'static, StoreResult<Option<SessionSnapshot>>> {
        let snapshot = self.shard(id).get(id).map(|stored| SessionSnapshot {
            record: stored.record.clone(),
            messages: stored.messages.clone(),
        });
        future::ready(Ok(snapshot)).boxed()
    }

    fn save_session(&self, record: &SessionRecord) -> BoxFuture<'static, StoreResult<()>> {
        self.upsert(record, &[]);
        future::ready(Ok(())).boxed()
    }

    fn save_messages(
        &self,
        record: &SessionRecord,
        messages: &[Message],
    ) -> BoxFuture<'static, StoreResult<()>> {
        self.upsert(record, messages);
        future::ready(Ok(())).boxed()
    }

    fn accept_result(
        &self,
        record: &SessionRecord,
        call_id: &ToolCallId,
        next: Option<&PendingAction>,
        message: &Message,
    ) -> BoxFuture<'static, StoreResult<bool>> {
        let accepted = {
            let shard = self.shard(&record.id);
            let pending_now = shard
                .get(&record.id)
                .and_then(|stored| stored.record.pending_action.as_ref())
                .map(|pending| &pending.tool_call_id);
            pending_now == Some(call_id)
        };
        if accepted {
            let mut updated = record.clone();
            updated.pending_action = next.cloned();
            self.upsert(&updated, std::slice::from_ref(message));
        }
        future::ready(Ok(accepted)).boxed()
    }

    fn list(
        &self,
        limit: u32,
        offset: u32,
    ) -> BoxFuture<'static, StoreResult<Vec<SessionSummary>>> {
        let mut summaries: Vec<SessionSummary> = Vec::new();
        for shard in &self.shards {
            let shard = shard
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            summaries.extend(shard.values().map(|stored| SessionSummary {
                session_id: stored.record.id.clone(),
                owner_id: stored.record.owner_id.clone(),
                title: stored.record.title.clone(),
                turn_number: stored.record.turn_number,
                message_count: stored.messages.len() as u64,
                created_at: stored.record.created_at,
            }));
        }
        // Newest first, ties by id, so pages are stable.
        summaries.sort_by(|a, b| {
            b.created_at
                .cmp(&a.created_at)
                .then_with(|| a.session_id.cmp(&b.session_id))
        });
        let page = summaries
            .into_iter()
            .skip(offset as usize)
            .take(limit as usize)
            .collect();
        future::ready(Ok(page)).boxed()
    }

    fn delete(&self, id: &SessionId) -> BoxFuture<'static, StoreResult<bool>> {
        let existed = self.shard(id).remove(id).is_some();
        future::ready(Ok(existed)).boxed()
    }

    fn ping(&self) -> BoxFuture<'static, StoreResult<()>> {
        future::ready(Ok(())).boxed()
    }

    fn kind(&self) -> &'static str {
        "memory"
    }
}
