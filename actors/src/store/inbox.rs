//! The inbox: notes from other systems (`POST /api/inbox`, an inject that
//! found no session) waiting for the next turn that starts. The session
//! actor takes the waiting items for its session as it stores a turn's user
//! message (`reserve`), the store marks them taken in that same write
//! (`Store::save_messages_taking`), and only once it committed do they leave
//! the inbox (`taken`): a failed or stale write leaves them waiting, a
//! committed one never delivers them again.
//!
//! `Inbox` holds the waiting items of this process in memory (all of them
//! without a database); with PostgreSQL every item is also a row of
//! `inbox` (sql/0005_inbox.sql), loaded back at startup, and listings read
//! the table. Bounded in items and in bytes, like everything else.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::Value;

use super::{SharedStore, StoreError};
use crate::ids::{MessageId, SessionId};

/// How urgent a note is (the original's three words).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Info,
    ActionNeeded,
    Urgent,
}

impl Severity {
    pub fn parse(text: &str) -> Option<Severity> {
        match text {
            "info" => Some(Severity::Info),
            "action_needed" => Some(Severity::ActionNeeded),
            "urgent" => Some(Severity::Urgent),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::ActionNeeded => "action_needed",
            Severity::Urgent => "urgent",
        }
    }
}

/// One note, as `GET /api/inbox` shows it.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct InboxItem {
    pub id: String,
    pub from_agent: String,
    #[serde(skip)]
    pub via: String,
    pub message: String,
    pub severity: Severity,
    /// `{"via", "injected"?, "session_id"?}` and whatever the poster sent.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub context: Option<Value>,
    /// The session it waits for; `None`: the next turn of any session.
    #[serde(skip)]
    pub session_id: Option<SessionId>,
    pub surfaced: bool,
    /// Unix milliseconds.
    pub created_at: u64,
}

impl InboxItem {
    /// The text a turn receives: the envelope that says where it came from.
    pub fn envelope(&self) -> String {
        envelope(&self.via, &self.from_agent, &self.message)
    }

    fn n_bytes(&self) -> usize {
        self.id.len()
            + self.from_agent.len()
            + self.via.len()
            + self.message.len()
            + self
                .context
                .as_ref()
                .map_or(0, |context| context.to_string().len())
    }

    fn fits(&self, session: &SessionId) -> bool {
        self.session_id
            .as_ref()
            .is_none_or(|wanted| wanted == session)
    }
}

/// `[via:<via> from:<from>] <message>`, or `[via:<via>] <message>` when the
/// sender is the channel itself (the original's envelope, byte for byte).
pub fn envelope(via: &str, from: &str, message: &str) -> String {
    if from.is_empty() || from == via {
        format!("[via:{via}] {message}")
    } else {
        format!("[via:{via} from:{from}] {message}")
    }
}

/// How much the inbox holds at most.
#[derive(Clone, Copy, Debug)]
pub struct InboxBounds {
    /// Waiting items (taken ones are not counted).
    pub max_items: usize,
    /// Bytes of the waiting items' texts and contexts.
    pub max_bytes: usize,
}

impl Default for InboxBounds {
    fn default() -> InboxBounds {
        InboxBounds {
            max_items: 1000,
            max_bytes: 8 << 20,
        }
    }
}

/// Why an item was not added.
#[derive(Debug)]
pub enum InboxRefusal {
    /// The inbox is at one of its bounds (413).
    Full(String),
    Store(StoreError),
}

/// Items reserved by a turn whose write has not come back: they are the
/// same turn's again if it is decided again (a stale write), and go back
/// to waiting if nobody takes them within this long (a failed write).
const RESERVATION_TIMEOUT: Duration = Duration::from_secs(60);

/// Taken or surfaced items kept for listings without a database.
const MAX_KEPT: usize = 200;

type ReservationKey = (SessionId, MessageId);

#[derive(Default)]
struct State {
    waiting: VecDeque<Arc<InboxItem>>,
    reserved: HashMap<ReservationKey, (Instant, Vec<Arc<InboxItem>>)>,
    /// Surfaced or taken, newest last (memory listings only).
    done: VecDeque<Arc<InboxItem>>,
    n_bytes: usize,
}

impl State {
    /// Reservations past their time go back to waiting, in front.
    fn expire(&mut self, now: Instant) {
        let expired: Vec<ReservationKey> = self
            .reserved
            .iter()
            .filter(|(_, (at, _))| now.duration_since(*at) > RESERVATION_TIMEOUT)
            .map(|(key, _)| key.clone())
            .collect();
        for key in expired {
            if let Some((_, items)) = self.reserved.remove(&key) {
                for item in items.into_iter().rev() {
                    self.waiting.push_front(item);
                }
            }
        }
    }

    fn n_items(&self) -> usize {
        self.waiting.len()
            + self
                .reserved
                .values()
                .map(|(_, items)| items.len())
                .sum::<usize>()
    }

    fn keep_done(&mut self, item: Arc<InboxItem>) {
        let mut item = Arc::unwrap_or_clone(item);
        item.surfaced = true;
        self.done.push_back(Arc::new(item));
        while self.done.len() > MAX_KEPT {
            self.done.pop_front();
        }
    }
}

pub struct Inbox {
    store: SharedStore,
    bounds: InboxBounds,
    state: Mutex<State>,
    /// Waiting items and reservations, set under the lock: a new message
    /// reads it alone while the inbox is empty, as it nearly always is.
    n_pending: AtomicUsize,
}

impl Inbox {
    pub fn new(store: SharedStore, bounds: InboxBounds) -> Inbox {
        Inbox {
            store,
            bounds,
            state: Mutex::new(State::default()),
            n_pending: AtomicUsize::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Records what is pending after `state` changed (under its lock).
    fn counted(&self, state: &State) {
        let n_pending = state.waiting.len() + state.reserved.len();
        self.n_pending.store(n_pending, Ordering::Release);
    }

    /// Loads the items a database holds waiting (at startup).
    pub async fn load(&self) -> Result<usize, StoreError> {
        let items = self.store.inbox_waiting().await?;
        let mut state = self.lock();
        let n = items.len();
        for item in items {
            state.n_bytes += item.n_bytes();
            state.waiting.push_back(Arc::new(item));
        }
        self.counted(&state);
        Ok(n)
    }

    /// Adds a waiting item (stored first, when there is a database).
    pub async fn add(&self, item: InboxItem) -> Result<String, InboxRefusal> {
        let n_bytes = item.n_bytes();
        {
            let state = self.lock();
            if state.n_items() >= self.bounds.max_items {
                return Err(InboxRefusal::Full(format!(
                    "the inbox holds {} waiting items, its bound; mark some surfaced or wait for a turn to take them",
                    self.bounds.max_items
                )));
            }
            if state.n_bytes + n_bytes > self.bounds.max_bytes {
                return Err(InboxRefusal::Full(format!(
                    "the inbox holds at most {} bytes of waiting items",
                    self.bounds.max_bytes
                )));
            }
        }
        self.store
            .inbox_add(&item)
            .await
            .map_err(InboxRefusal::Store)?;
        let id = item.id.clone();
        let mut state = self.lock();
        state.n_bytes += n_bytes;
        state.waiting.push_back(Arc::new(item));
        self.counted(&state);
        Ok(id)
    }

    /// The items waiting for `session` (or for any session), reserved for
    /// the turn of `message`: the session actor's hook as it stores a new
    /// message. Never waits. The same message asking again (its write was
    /// stale and it is decided again) gets its reservation back, with any
    /// item that arrived since.
    pub fn reserve(&self, session: &SessionId, message: &MessageId) -> Vec<Arc<InboxItem>> {
        // An item added while this reads is the next message's, as if it
        // had come after this one took the lock.
        if self.n_pending.load(Ordering::Acquire) == 0 {
            return Vec::new();
        }
        let mut state = self.lock();
        let now = Instant::now();
        state.expire(now);
        if state.waiting.is_empty() && state.reserved.is_empty() {
            return Vec::new();
        }
        let key = (session.clone(), message.clone());
        let mut items = state
            .reserved
            .remove(&key)
            .map(|(_, items)| items)
            .unwrap_or_default();
        let mut kept = VecDeque::with_capacity(state.waiting.len());
        for item in std::mem::take(&mut state.waiting) {
            if item.fits(session) {
                items.push(item);
            } else {
                kept.push_back(item);
            }
        }
        state.waiting = kept;
        if !items.is_empty() {
            state.reserved.insert(key, (now, items.clone()));
        }
        self.counted(&state);
        items
    }

    /// The write that carried the reservation of `message` committed: its
    /// items are delivered and leave the inbox.
    pub fn taken(&self, session: &SessionId, message: &MessageId) {
        let mut state = self.lock();
        let key = (session.clone(), message.clone());
        if let Some((_, items)) = state.reserved.remove(&key) {
            for item in items {
                state.n_bytes = state.n_bytes.saturating_sub(item.n_bytes());
                state.keep_done(item);
            }
        }
        self.counted(&state);
    }

    /// Waiting items (`surfaced: Some(false)`), surfaced ones
    /// (`Some(true)`) or all, oldest first. The database's when there is one.
    pub async fn list(
        &self,
        surfaced: Option<bool>,
        limit: u32,
        offset: u32,
    ) -> Result<Vec<InboxItem>, StoreError> {
        if let Some(items) = self.store.inbox_list(surfaced, limit, offset).await? {
            return Ok(items);
        }
        let state = self.lock();
        let waiting = state
            .waiting
            .iter()
            .chain(state.reserved.values().flat_map(|(_, items)| items.iter()));
        let mut all: Vec<&Arc<InboxItem>> = match surfaced {
            Some(false) => waiting.collect(),
            Some(true) => state.done.iter().collect(),
            None => state.done.iter().chain(waiting).collect(),
        };
        all.sort_by_key(|item| item.created_at);
        Ok(all
            .into_iter()
            .skip(offset as usize)
            .take(limit as usize)
            .map(|item| (**item).clone())
            .collect())
    }

    /// Marks one item surfaced (it leaves the waiting items); `None` if
    /// there is no such item.
    pub async fn mark_surfaced(&self, id: &str) -> Result<Option<InboxItem>, StoreError> {
        let stored = self.store.inbox_mark_surfaced(id).await?;
        let mut state = self.lock();
        let position = state.waiting.iter().position(|item| item.id == id);
        let in_memory = position.and_then(|position| state.waiting.remove(position));
        self.counted(&state);
        let from_memory = in_memory.map(|item| {
            state.n_bytes = state.n_bytes.saturating_sub(item.n_bytes());
            state.keep_done(item.clone());
            let mut item = Arc::unwrap_or_clone(item);
            item.surfaced = true;
            item
        });
        let already = || {
            state
                .done
                .iter()
                .find(|item| item.id == id)
                .map(|item| (**item).clone())
        };
        Ok(match stored {
            Some(found) => Some(found),
            None => from_memory.or_else(already),
        })
    }

    /// How many items wait in this process.
    pub fn n_waiting(&self) -> usize {
        self.lock().n_items()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::memory::MemoryStore;

    fn item(id: &str, session: Option<&str>) -> InboxItem {
        InboxItem {
            id: id.into(),
            from_agent: "ci".into(),
            via: "inbox".into(),
            message: "the deployment failed".into(),
            severity: Severity::Urgent,
            context: None,
            session_id: session.map(SessionId::new),
            surfaced: false,
            created_at: 1,
        }
    }

    fn inbox(bounds: InboxBounds) -> Inbox {
        Inbox::new(Arc::new(MemoryStore::default()), bounds)
    }

    #[test]
    fn the_envelope_names_the_sender_unless_it_is_the_channel() {
        assert_eq!(envelope("slack", "bob", "hi"), "[via:slack from:bob] hi");
        assert_eq!(
            envelope("heartbeat", "heartbeat", "hi"),
            "[via:heartbeat] hi"
        );
    }

    #[tokio::test]
    async fn a_reservation_is_taken_once_and_given_back_to_its_own_message() {
        let inbox = inbox(InboxBounds::default());
        inbox.add(item("a", None)).await.expect("added");
        inbox.add(item("b", Some("other"))).await.expect("added");
        let s1 = SessionId::new("s1");
        let m1 = MessageId::new("m1");
        let ids = |items: Vec<Arc<InboxItem>>| -> Vec<String> {
            items.iter().map(|item| item.id.clone()).collect()
        };
        assert_eq!(ids(inbox.reserve(&s1, &m1)), ["a"]);
        // Another message of the session finds nothing: "a" is reserved.
        assert!(inbox.reserve(&s1, &MessageId::new("m2")).is_empty());
        // The same message decided again gets it back.
        assert_eq!(ids(inbox.reserve(&s1, &m1)), ["a"]);
        inbox.taken(&s1, &m1);
        assert!(inbox.reserve(&s1, &MessageId::new("m3")).is_empty());
        assert_eq!(inbox.n_waiting(), 1, "b waits for its own session");
        let listed = inbox.list(Some(true), 10, 0).await.expect("listed");
        assert_eq!(listed.len(), 1);
        assert!(listed[0].surfaced);
    }

    #[tokio::test]
    async fn the_inbox_is_bounded_in_items_and_bytes() {
        let inbox = inbox(InboxBounds {
            max_items: 1,
            max_bytes: 1 << 20,
        });
        inbox.add(item("a", None)).await.expect("added");
        assert!(matches!(
            inbox.add(item("b", None)).await,
            Err(InboxRefusal::Full(_))
        ));
        let small = super::Inbox::new(
            Arc::new(MemoryStore::default()),
            InboxBounds {
                max_items: 10,
                max_bytes: 10,
            },
        );
        assert!(matches!(
            small.add(item("a", None)).await,
            Err(InboxRefusal::Full(_))
        ));
    }

    #[tokio::test]
    async fn marking_surfaced_takes_an_item_out_of_the_waiting_ones() {
        let inbox = inbox(InboxBounds::default());
        inbox.add(item("a", None)).await.expect("added");
        let marked = inbox.mark_surfaced("a").await.expect("marked");
        assert!(marked.is_some_and(|item| item.surfaced));
        assert!(inbox.mark_surfaced("nope").await.expect("read").is_none());
        assert!(inbox
            .reserve(&SessionId::new("s"), &MessageId::new("m"))
            .is_empty());
    }
}
