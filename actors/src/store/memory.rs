//! The in-memory store: the default, lasting for the process. A message is
//! kept as the actor's own shared copy while the session's actor is in
//! memory (a write costs a reference count, not an encoding), and serialised
//! (compact JSON) when the actor hibernates (`Store::settle`): then a
//! session's messages are packed into one buffer, each its id and its JSON,
//! so that an idle session costs a few hundred bytes in a handful of
//! allocations rather than its full object graph; the session row keeps its
//! few small fields as they are and its host context as JSON
//! (`StoredRecord`). Shards with a mutex each keep unrelated sessions from
//! contending.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use futures_util::future::{self, BoxFuture, FutureExt};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::value::RawValue;

use super::readback;
use super::{
    SessionSnapshot, SessionSummary, Store, StoreCause, StoreError, StoreResult, StoredTrace,
    TraceBounds, Version, WriteOutcome, Written,
};
use crate::conversation::{Message, PendingAction, SessionRecord, StoredContext};
use crate::ids::{fnv1a, MessageId, SessionId};
use crate::offload;

/// Enough shards that two busy workers rarely meet on one lock.
const N_SHARDS: usize = 64;

/// Decides whether a session may be evicted.
type Evictable = Box<dyn Fn(&SessionId) -> bool + Send + Sync>;

pub struct MemoryStore {
    shards: Vec<Mutex<Shard>>,
    /// What write times count from: eight bytes a session where an
    /// `Instant` takes sixteen.
    epoch: Instant,
    /// Sessions one shard holds at most (`None`: unbounded). The bound is per
    /// shard so that making room looks at one shard only, under its lock.
    shard_limit: Option<usize>,
    /// Whether a session may be evicted: not while its actor is in memory
    /// (it would go on writing only its changes into a session that lost
    /// the rest). Set once the runtime exists.
    evictable: OnceLock<Evictable>,
    n_evicted: AtomicU64,
    /// The last version handed out, for every session: versions never repeat.
    last_version: AtomicU64,
    /// Per-turn traces, by session; empty unless traces are stored.
    traces: super::traces::TraceLog,
}

/// A shard's map. A session is boxed so that the table holds a key and a
/// pointer per slot: tables run a third to a half empty and leave their
/// smaller predecessors behind as they grow, and a slot of the whole session
/// (its row inline) cost more than the session's own box.
type Shard = HashMap<SessionId, Box<StoredSession>>;

/// One session. The version writes are conditional on is kept beside it.
struct StoredSession {
    record: StoredRecord,
    version: Version,
    messages: Messages,
    /// The last write (`MemoryStore::tick`), for the TTL purge and eviction.
    updated_at: u64,
}

/// A session's messages: one by one while its actor writes them, packed
/// once it has settled. Packed, an idle session holds one allocation for all
/// its messages instead of a vector and two boxes per message, each
/// rounded up to the allocator's size class; a write to a packed session
/// unpacks it first (it comes from an actor that has just loaded it).
#[derive(Clone)]
enum Messages {
    Each(Vec<StoredMessage>),
    Packed(Packed),
}

impl Default for Messages {
    fn default() -> Self {
        Messages::Each(Vec::new())
    }
}

impl Messages {
    fn len(&self) -> usize {
        match self {
            Messages::Each(messages) => messages.len(),
            Messages::Packed(packed) => packed.iter().count(),
        }
    }

    /// The bytes a load must decode.
    fn n_encoded_bytes(&self) -> usize {
        match self {
            Messages::Each(messages) => messages.iter().map(StoredMessage::n_encoded_bytes).sum(),
            Messages::Packed(packed) => packed.0.len(),
        }
    }

    fn load(&self) -> StoreResult<Vec<Arc<Message>>> {
        match self {
            Messages::Each(messages) => messages.iter().map(StoredMessage::load).collect(),
            Messages::Packed(packed) => packed
                .iter()
                .map(|(_, bytes)| decode(bytes).map(Arc::new))
                .collect(),
        }
    }

    /// The messages one by one, for a write to change.
    fn each(&mut self) -> &mut Vec<StoredMessage> {
        if let Messages::Packed(packed) = self {
            *self = Messages::Each(packed.unpack());
        }
        match self {
            Messages::Each(messages) => messages,
            Messages::Packed(_) => unreachable!("unpacked above"),
        }
    }

    /// Packs the messages when every one is encoded.
    fn pack_if_settled(&mut self) {
        let Messages::Each(messages) = self else {
            return;
        };
        if let Some(packed) = Packed::new(messages) {
            *self = Messages::Packed(packed);
        }
    }
}

/// Settled messages in one buffer: for each, its id's length, the id, its
/// JSON's length, the JSON. A length is a LEB128 varint (seven bits a byte,
/// the high bit set on all but the last): one byte for an id, two for most
/// messages, where a fixed `u32` took four each.
#[derive(Clone)]
struct Packed(Box<[u8]>);

impl Packed {
    /// `None` when a message is still shared with an actor.
    fn new(messages: &[StoredMessage]) -> Option<Packed> {
        let mut n_bytes = 0;
        for message in messages {
            let Body::Encoded { id, bytes } = &message.body else {
                return None;
            };
            n_bytes += varint_len(id.len()) + id.len() + varint_len(bytes.len()) + bytes.len();
        }
        let mut packed = Vec::with_capacity(n_bytes);
        for message in messages {
            if let Body::Encoded { id, bytes } = &message.body {
                put_part(&mut packed, id.as_bytes());
                put_part(&mut packed, bytes);
            }
        }
        Some(Packed(packed.into_boxed_slice()))
    }

    /// Each message's id and JSON.
    fn iter(&self) -> impl Iterator<Item = (&str, &[u8])> {
        let mut rest: &[u8] = &self.0;
        std::iter::from_fn(move || {
            let id = take_part(&mut rest)?;
            let bytes = take_part(&mut rest)?;
            // Written from a `str` by `Packed::new`.
            let id = std::str::from_utf8(id).unwrap_or_default();
            Some((id, bytes))
        })
    }

    fn unpack(&self) -> Vec<StoredMessage> {
        self.iter()
            .map(|(id, bytes)| StoredMessage {
                id_hash: fnv1a(id),
                body: Body::Encoded {
                    id: id.into(),
                    bytes: bytes.into(),
                },
            })
            .collect()
    }
}

/// The bytes `put_part` takes for the length `n`.
fn varint_len(n: usize) -> usize {
    let n_bits = (usize::BITS - n.leading_zeros()).max(1) as usize;
    n_bits.div_ceil(7)
}

fn put_part(packed: &mut Vec<u8>, part: &[u8]) {
    let mut n = part.len();
    while n >= 0x80 {
        packed.push((n & 0x7f) as u8 | 0x80);
        n >>= 7;
    }
    packed.push(n as u8);
    packed.extend_from_slice(part);
}

fn take_part<'a>(rest: &mut &'a [u8]) -> Option<&'a [u8]> {
    let mut n_bytes = 0usize;
    let mut shift = 0;
    loop {
        let (&byte, after) = rest.split_first()?;
        *rest = after;
        n_bytes |= usize::from(byte & 0x7f).checked_shl(shift)?;
        if byte & 0x80 == 0 {
            break;
        }
        shift += 7;
    }
    let part = rest.get(..n_bytes)?;
    *rest = &rest[n_bytes..];
    Some(part)
}

/// One stored message, and a hash of its id: a write looks for each of its
/// messages among the session's (most are new, so the search runs to the
/// end), and comparing hashes held in line does not touch every message's id.
#[derive(Clone)]
struct StoredMessage {
    id_hash: u64,
    body: Body,
}

/// Shared with the actor that wrote it while that actor is in memory (its
/// next load, a reload after a stale write, takes the same copy back), its
/// JSON once settled. A shared message is never changed: the actor replaces
/// messages, it does not edit them in place.
#[derive(Clone)]
enum Body {
    Shared(Arc<Message>),
    Encoded { id: Box<str>, bytes: Box<[u8]> },
}

impl StoredMessage {
    fn shared(message: &Arc<Message>) -> StoredMessage {
        StoredMessage {
            id_hash: message.id.shard_hash(),
            body: Body::Shared(message.clone()),
        }
    }

    fn id(&self) -> &str {
        match &self.body {
            Body::Shared(message) => message.id.as_str(),
            Body::Encoded { id, .. } => id,
        }
    }

    fn is(&self, id_hash: u64, id: &str) -> bool {
        self.id_hash == id_hash && self.id() == id
    }

    /// The bytes a load must decode.
    fn n_encoded_bytes(&self) -> usize {
        match &self.body {
            Body::Shared(_) => 0,
            Body::Encoded { bytes, .. } => bytes.len(),
        }
    }

    fn load(&self) -> StoreResult<Arc<Message>> {
        match &self.body {
            Body::Shared(message) => Ok(message.clone()),
            Body::Encoded { bytes, .. } => decode(bytes).map(Arc::new),
        }
    }
}

/// A session row (`SessionRecord` less its id, the shard's key). A turn
/// writes the row twice, and encoding it each time was a sixth of a short
/// turn's store work, where copying its small fields costs a tenth of that.
/// The host context,
/// up to 64 KiB and the row's one large part, is kept as its JSON like the
/// messages, so an idle session holds no parsed copy of it. The pending
/// action is shared with the actor that wrote it; nothing changes one.
#[derive(Clone, Default)]
struct StoredRecord {
    /// Shared with the actor's row, as it is written twice a turn.
    owner_id: Option<Arc<str>>,
    title: Option<Arc<str>>,
    created_at: u64,
    turn_number: u32,
    active_leaf: Option<MessageId>,
    host_context: Option<Box<RawValue>>,
    pending_action: Option<Arc<PendingAction>>,
}

impl StoredRecord {
    fn new(record: &SessionRecord) -> StoreResult<StoredRecord> {
        let host_context = match record.host_context.as_deref().map(StoredContext::json) {
            Some(Ok(json)) => Some(json.to_owned()),
            Some(Err(error)) => {
                return Err(StoreError::Failed(StoreCause::caused_by(
                    format!("cannot serialise the host context: {error}"),
                    error,
                )))
            }
            None => None,
        };
        Ok(StoredRecord {
            owner_id: record.owner_id.clone(),
            title: record.title.clone(),
            created_at: record.created_at,
            turn_number: record.turn_number,
            active_leaf: record.active_leaf.clone(),
            host_context,
            pending_action: record.pending_action.clone(),
        })
    }

    /// The row as written, its host context decoded anew.
    fn decode(&self, id: &SessionId) -> StoreResult<SessionRecord> {
        let host_context = match &self.host_context {
            Some(json) => Some(Arc::new(decode::<StoredContext>(json.get().as_bytes())?)),
            None => None,
        };
        Ok(SessionRecord {
            id: id.clone(),
            owner_id: self.owner_id.clone(),
            title: self.title.clone(),
            created_at: self.created_at,
            turn_number: self.turn_number,
            active_leaf: self.active_leaf.clone(),
            host_context,
            pending_action: self.pending_action.clone(),
        })
    }

    /// The bytes a load must decode.
    fn n_encoded_bytes(&self) -> usize {
        self.host_context
            .as_ref()
            .map_or(0, |json| json.get().len())
    }
}

impl Default for MemoryStore {
    fn default() -> Self {
        MemoryStore::new()
    }
}

/// Serialised into this thread's scratch buffer, then copied out at its
/// exact size: one allocation per buffer stored, where `to_vec` grows a
/// vector by doubling (a realloc and copy each time) and shrinks it once
/// more to box it.
fn encode<T: Serialize>(value: &T) -> StoreResult<Box<[u8]>> {
    thread_local! {
        static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    /// A buffer grown past this by one large value is dropped afterwards
    /// rather than kept for the thread's lifetime.
    const KEEP_BYTES: usize = 64 * 1024;
    SCRATCH.with(|scratch| {
        let mut scratch = scratch
            .try_borrow_mut()
            .map_err(|_| StoreError::Failed(StoreCause::new("the encoding buffer is in use")))?;
        scratch.clear();
        let written = serde_json::to_writer(&mut *scratch, value);
        let encoded = written.map(|()| Box::<[u8]>::from(&scratch[..]));
        if scratch.capacity() > KEEP_BYTES {
            *scratch = Vec::new();
        }
        encoded.map_err(|error| {
            StoreError::Failed(StoreCause::caused_by(
                format!("cannot serialise: {error}"),
                error,
            ))
        })
    })
}

fn decode<T: DeserializeOwned>(bytes: &[u8]) -> StoreResult<T> {
    readback::decode_capped(bytes)
        .map(readback::warn_if_capped)
        .map_err(|error| {
            StoreError::Failed(StoreCause::caused_by(
                format!("stored data unreadable: {error}"),
                error,
            ))
        })
}

/// A session's stored bytes, copied out of its shard.
struct RawSession {
    id: SessionId,
    record: StoredRecord,
    messages: Messages,
    version: Version,
}

/// What a load found under the lock. Only ever returned, never stored, so
/// the decoded variant stays unboxed: boxing it would add an allocation to
/// every load.
#[allow(clippy::large_enum_variant)]
enum Snapshot {
    Decoded(StoreResult<Option<SessionSnapshot>>),
    Large(RawSession),
}

impl RawSession {
    fn decode(&self) -> StoreResult<SessionSnapshot> {
        decode_snapshot(&self.id, &self.record, &self.messages, self.version)
    }
}

fn decode_snapshot(
    id: &SessionId,
    record: &StoredRecord,
    messages: &Messages,
    version: Version,
) -> StoreResult<SessionSnapshot> {
    Ok(SessionSnapshot {
        record: record.decode(id)?,
        messages: messages.load()?,
        version,
    })
}

impl MemoryStore {
    pub fn new() -> MemoryStore {
        MemoryStore {
            shards: (0..N_SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            epoch: Instant::now(),
            shard_limit: None,
            evictable: OnceLock::new(),
            n_evicted: AtomicU64::new(0),
            last_version: AtomicU64::new(0),
            traces: Default::default(),
        }
    }

    /// A store holding at most about `max_sessions` sessions (rounded up to
    /// a multiple of the shard count). A new session over the bound evicts
    /// the least recently written session of its shard whose actor is not
    /// in memory; if every one is live, the shard grows past the bound
    /// rather than lose a live session. A client learns of an eviction when
    /// it next reads the session: it is gone (404, or 403 to a non-admin).
    pub fn bounded(max_sessions: usize) -> MemoryStore {
        MemoryStore {
            shard_limit: Some(max_sessions.div_ceil(N_SHARDS).max(1)),
            ..MemoryStore::new()
        }
    }

    /// Tells the store which sessions it may evict (those without a live actor).
    pub fn set_evictable(&self, evictable: impl Fn(&SessionId) -> bool + Send + Sync + 'static) {
        let _ = self.evictable.set(Box::new(evictable));
    }

    /// Sessions evicted so far (for `/health`).
    pub fn n_evicted(&self) -> u64 {
        self.n_evicted.load(Ordering::Relaxed)
    }

    /// Nanoseconds since the store was made (585 years before it wraps).
    fn tick(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// Makes room in a full shard before `id` is inserted into it.
    fn make_room(&self, shard: &mut Shard, id: &SessionId) {
        let Some(limit) = self.shard_limit else {
            return;
        };
        if shard.len() < limit || shard.contains_key(id) {
            return;
        }
        let evictable = |candidate: &SessionId| {
            self.evictable
                .get()
                .is_none_or(|evictable| evictable(candidate))
        };
        let oldest = shard
            .iter()
            .filter(|(candidate, _)| evictable(candidate))
            .min_by_key(|(_, stored)| stored.updated_at)
            .map(|(candidate, _)| candidate.clone());
        if let Some(oldest) = oldest {
            shard.remove(&oldest);
            self.traces.forget(&oldest);
            let n_evicted = self.n_evicted.fetch_add(1, Ordering::Relaxed) + 1;
            log::info!(
                "memory store full (ASSISTANT__MAX_MEMORY_SESSIONS): evicted session {oldest} ({n_evicted} so far)"
            );
        }
    }

    fn shard(&self, id: &SessionId) -> MutexGuard<'_, Shard> {
        // The map under the lock hashes the id with its keyed hasher.
        let index = (id.shard_hash() as usize) % N_SHARDS;
        // Only plain map operations run under the lock; a poisoned shard
        // still holds a consistent map.
        self.shards[index]
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Serialises outside the lock, then checks the version and swaps the
    /// buffers in under it: two writers cannot interleave.
    fn upsert(
        &self,
        expected: Version,
        record: &SessionRecord,
        messages: &[Arc<Message>],
    ) -> StoreResult<Written> {
        let change = Change::new(record, messages)?;
        let mut shard = self.shard(&record.id);
        self.make_room(&mut shard, &record.id);
        // One lookup for the check and the write: a vacant entry inserts
        // nothing unless written.
        let entry = shard.entry(record.id.clone());
        let version_now = match &entry {
            Entry::Occupied(stored) => stored.get().version,
            Entry::Vacant(_) => 0,
        };
        if version_now != expected {
            return Ok(Written::Stale);
        }
        let version = self.last_version.fetch_add(1, Ordering::Relaxed) + 1;
        change.apply(entry, self.tick(), version);
        Ok(Written::Committed(version))
    }

    /// Serialises the messages of `id` still shared with an actor: outside
    /// the lock, then swapped in where the shard still holds that same
    /// message (one a later write replaced is left to that writer's settle).
    fn settle_session(&self, id: &SessionId) {
        let shared: Vec<Arc<Message>> = match self.shard(id).get(id).map(|stored| &stored.messages)
        {
            Some(Messages::Each(messages)) => messages
                .iter()
                .filter_map(|message| match &message.body {
                    Body::Shared(message) => Some(message.clone()),
                    Body::Encoded { .. } => None,
                })
                .collect(),
            Some(_) | None => return,
        };
        // Keyed by address: `shared` keeps every message alive until the
        // swap, so no address is reused meanwhile.
        let mut encoded: HashMap<*const Message, Box<[u8]>> = HashMap::with_capacity(shared.len());
        for message in &shared {
            match encode(&**message) {
                Ok(bytes) => {
                    encoded.insert(Arc::as_ptr(message), bytes);
                }
                // Kept shared: still correct, only larger.
                Err(error) => log::warn!(
                    "session {id}: message {} kept unencoded: {error}",
                    message.id
                ),
            }
        }
        let mut shard = self.shard(id);
        let Some(stored) = shard.get_mut(id) else {
            return;
        };
        let Messages::Each(messages) = &mut stored.messages else {
            return;
        };
        for message in messages.iter_mut() {
            let Body::Shared(shared) = &message.body else {
                continue;
            };
            if let Some(bytes) = encoded.remove(&Arc::as_ptr(shared)) {
                message.body = Body::Encoded {
                    id: shared.id.as_str().into(),
                    bytes,
                };
            }
        }
        stored.messages.pack_if_settled();
    }

    /// The session, decoded under its shard's lock when it is small; a
    /// large one's bytes copied out, to be decoded elsewhere.
    fn snapshot(&self, id: &SessionId) -> Snapshot {
        let shard = self.shard(id);
        let Some(stored) = shard.get(id) else {
            return Snapshot::Decoded(Ok(None));
        };
        let n_bytes = stored.messages.n_encoded_bytes();
        if n_bytes + stored.record.n_encoded_bytes() > offload::INLINE_BYTES {
            return Snapshot::Large(RawSession {
                id: id.clone(),
                record: stored.record.clone(),
                messages: stored.messages.clone(),
                version: stored.version,
            });
        }
        Snapshot::Decoded(
            decode_snapshot(id, &stored.record, &stored.messages, stored.version).map(Some),
        )
    }

    fn summaries(
        &self,
        owner: Option<&str>,
        limit: u32,
        offset: u32,
    ) -> StoreResult<Vec<SessionSummary>> {
        let mut index: Vec<(u64, SessionId)> = Vec::new();
        for shard in &self.shards {
            let shard = shard
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            index.extend(
                shard
                    .iter()
                    .filter(|(_, stored)| {
                        owner.is_none() || stored.record.owner_id.as_deref() == owner
                    })
                    .map(|(id, stored)| (stored.record.created_at, id.clone())),
            );
        }
        // Newest first, ties by id, so pages are stable.
        index.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        let mut page = Vec::new();
        for (_, id) in index.into_iter().skip(offset as usize).take(limit as usize) {
            let shard = self.shard(&id);
            let Some(stored) = shard.get(&id) else {
                continue;
            };
            let record = &stored.record;
            page.push(SessionSummary {
                session_id: id.clone(),
                owner_id: record.owner_id.as_deref().map(String::from),
                title: record.title.as_deref().map(String::from),
                turn_number: record.turn_number,
                message_count: stored.messages.len() as u64,
                created_at: record.created_at,
            });
        }
        Ok(page)
    }
}

/// A session change, ready to swap in.
struct Change<'a> {
    record: StoredRecord,
    messages: &'a [Arc<Message>],
}

impl<'a> Change<'a> {
    fn new(record: &SessionRecord, messages: &'a [Arc<Message>]) -> StoreResult<Change<'a>> {
        Ok(Change {
            record: StoredRecord::new(record)?,
            messages,
        })
    }

    /// Applies the change, giving the session `version`.
    fn apply(self, entry: Entry<'_, SessionId, Box<StoredSession>>, now: u64, version: Version) {
        let stored = entry.or_insert_with(|| {
            Box::new(StoredSession {
                record: StoredRecord::default(),
                version: 0,
                messages: Messages::default(),
                updated_at: now,
            })
        });
        stored.record = self.record;
        stored.updated_at = now;
        stored.version = version;
        // A write of the row alone leaves a packed session packed.
        if self.messages.is_empty() {
            return;
        }
        let messages = stored.messages.each();
        for message in self.messages {
            let message = StoredMessage::shared(message);
            let id = message.id();
            // A rewritten message is usually one of the newest.
            match messages
                .iter_mut()
                .rev()
                .find(|existing| existing.is(message.id_hash, id))
            {
                Some(existing) => *existing = message,
                None => messages.push(message),
            }
        }
    }
}

impl Store for MemoryStore {
    fn load(&self, id: &SessionId) -> BoxFuture<'static, StoreResult<Option<SessionSnapshot>>> {
        match self.snapshot(id) {
            Snapshot::Decoded(decoded) => future::ready(decoded).boxed(),
            // Megabytes take milliseconds to decode (`offload`).
            Snapshot::Large(raw) => async move {
                offload::on_blocking_pool(move || raw.decode().map(Some))
                    .await
                    .unwrap_or_else(|why| {
                        Err(StoreError::Failed(StoreCause::new(format!(
                            "decoding the session failed: {why}"
                        ))))
                    })
            }
            .boxed(),
        }
    }

    fn save_messages(
        &self,
        expected: Version,
        record: &SessionRecord,
        messages: &[Arc<Message>],
    ) -> BoxFuture<'static, StoreResult<Written>> {
        future::ready(self.upsert(expected, record, messages)).boxed()
    }

    fn write(
        &self,
        expected: Version,
        record: &SessionRecord,
        messages: Option<&[Arc<Message>]>,
        _taken: &[String],
    ) -> WriteOutcome {
        WriteOutcome::Now(self.upsert(expected, record, messages.unwrap_or_default()))
    }

    fn settle(&self, id: &SessionId) {
        self.settle_session(id);
    }

    fn list(
        &self,
        owner: Option<&str>,
        limit: u32,
        offset: u32,
    ) -> BoxFuture<'static, StoreResult<Vec<SessionSummary>>> {
        future::ready(self.summaries(owner, limit, offset)).boxed()
    }

    fn most_recent(&self) -> BoxFuture<'static, StoreResult<Option<SessionId>>> {
        let mut newest: Option<(u64, SessionId)> = None;
        for shard in &self.shards {
            let shard = shard
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            for (id, stored) in shard.iter() {
                if newest
                    .as_ref()
                    .is_none_or(|(at, _)| stored.updated_at > *at)
                {
                    newest = Some((stored.updated_at, id.clone()));
                }
            }
        }
        future::ready(Ok(newest.map(|(_, id)| id))).boxed()
    }

    fn delete(&self, id: &SessionId) -> BoxFuture<'static, StoreResult<bool>> {
        let existed = self.shard(id).remove(id).is_some();
        self.traces.forget(id);
        future::ready(Ok(existed)).boxed()
    }

    fn purge_expired(&self, ttl: Duration) -> BoxFuture<'static, StoreResult<u64>> {
        let mut n_deleted = 0;
        let now = self.tick();
        let ttl = u64::try_from(ttl.as_nanos()).unwrap_or(u64::MAX);
        for shard in &self.shards {
            let mut shard = shard
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            let n_before = shard.len();
            shard.retain(|id, stored| {
                let keep = now.saturating_sub(stored.updated_at) < ttl;
                if !keep {
                    // Under the shard's lock; the trace log's lock is only
                    // ever taken inside a shard's, never around one.
                    self.traces.forget(id);
                }
                keep
            });
            n_deleted += (n_before - shard.len()) as u64;
        }
        future::ready(Ok(n_deleted)).boxed()
    }

    fn save_trace(
        &self,
        trace: StoredTrace,
        bounds: TraceBounds,
    ) -> BoxFuture<'static, StoreResult<()>> {
        // A trace of a session deleted meanwhile is not kept: nothing would remove it.
        if self
            .shard(&trace.session_id)
            .contains_key(&trace.session_id)
        {
            self.traces.push(trace, bounds);
        }
        future::ready(Ok(())).boxed()
    }

    fn traces(
        &self,
        id: &SessionId,
        limit: u32,
        offset: u32,
    ) -> BoxFuture<'static, StoreResult<Vec<Arc<StoredTrace>>>> {
        future::ready(Ok(self.traces.page(id, limit, offset))).boxed()
    }

    fn ping(&self) -> BoxFuture<'static, StoreResult<()>> {
        future::ready(Ok(())).boxed()
    }

    fn count(&self) -> BoxFuture<'static, StoreResult<u64>> {
        let n_sessions: usize = self
            .shards
            .iter()
            .map(|shard| {
                shard
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .len()
            })
            .sum();
        future::ready(Ok(n_sessions as u64)).boxed()
    }

    fn kind(&self) -> &'static str {
        "memory"
    }
}

#[cfg(test)]
mod purge_tests {
    use super::*;

    #[test]
    fn purge_deletes_only_sessions_older_than_the_ttl() {
        let store = MemoryStore::new();
        let saved = store
            .save_session(0, &SessionRecord::new(SessionId::new("a"), 0))
            .now_or_never();
        assert_eq!(saved, Some(Ok(Written::Committed(1))));
        let n_kept = store
            .purge_expired(Duration::from_secs(3600))
            .now_or_never();
        assert_eq!(n_kept, Some(Ok(0)));
        let n_deleted = store.purge_expired(Duration::ZERO).now_or_never();
        assert_eq!(n_deleted, Some(Ok(1)));
        assert_eq!(
            store.load(&SessionId::new("a")).now_or_never(),
            Some(Ok(None))
        );
    }
}

#[cfg(test)]
mod bound_tests {
    use super::*;

    fn save(store: &MemoryStore, id: &str) {
        let saved = store
            .save_session(0, &SessionRecord::new(SessionId::new(id), 0))
            .now_or_never();
        assert!(
            matches!(saved, Some(Ok(Written::Committed(_)))),
            "{saved:?}"
        );
    }

    fn exists(store: &MemoryStore, id: &str) -> bool {
        matches!(
            store.load(&SessionId::new(id)).now_or_never(),
            Some(Ok(Some(_)))
        )
    }

    #[test]
    fn a_full_store_evicts_the_least_recently_written_idle_session() {
        // One session per shard: every new session in a shard evicts its older one.
        let store = MemoryStore::bounded(1);
        store.set_evictable(|id| id.as_str() != "live");
        save(&store, "live");
        for n in 0..500 {
            save(&store, &format!("s{n}"));
        }
        assert!(exists(&store, "live"), "a live session is never evicted");
        assert!(exists(&store, "s499"), "the newest stays");
        let n_total: usize = store
            .shards
            .iter()
            .map(|shard| shard.lock().map(|shard| shard.len()).unwrap_or(0))
            .sum();
        assert!(n_total <= N_SHARDS + 1, "{n_total} sessions held");
        assert!(store.n_evicted() >= 500 - N_SHARDS as u64);
    }
}

#[cfg(test)]
mod version_tests {
    use super::*;

    fn write(store: &MemoryStore, expected: Version, title: &str) -> Written {
        let mut record = SessionRecord::new(SessionId::new("s"), 0);
        record.title = Some(title.into());
        store
            .save_session(expected, &record)
            .now_or_never()
            .expect("the memory store answers at once")
            .expect("no store error")
    }

    #[test]
    fn a_write_naming_an_old_version_changes_nothing() {
        let store = MemoryStore::new();
        assert_eq!(write(&store, 0, "first"), Written::Committed(1));
        // A second creator, and a writer holding version 0, both lose.
        assert_eq!(write(&store, 0, "second creator"), Written::Stale);
        assert_eq!(write(&store, 1, "next"), Written::Committed(2));
        assert_eq!(write(&store, 1, "stale copy"), Written::Stale);
        // Deleted and created again: the old copy's version does not come back.
        assert_eq!(
            store.delete(&SessionId::new("s")).now_or_never(),
            Some(Ok(true))
        );
        assert_eq!(write(&store, 0, "again"), Written::Committed(3));
        assert_eq!(write(&store, 2, "copy of the deleted one"), Written::Stale);
        assert_eq!(write(&store, 3, "next"), Written::Committed(4));
        let loaded = store
            .load(&SessionId::new("s"))
            .now_or_never()
            .and_then(Result::ok)
            .flatten()
            .expect("stored");
        assert_eq!(loaded.version, 4);
        assert_eq!(loaded.record.title.as_deref(), Some("next"));
    }
}

#[cfg(test)]
mod readback_tests {
    use serde_json::{json, Value};

    use crate::conversation::Segment;

    use super::*;

    /// A message an older version could have stored: a tool result nested
    /// deeper than serde_json decodes. It loads with that part replaced, and
    /// writing the loaded message back stores a form that reads as it is.
    #[test]
    fn a_message_stored_too_deep_loads_with_its_deep_part_replaced() {
        let store = MemoryStore::new();
        let id = SessionId::new("deep");
        let message: Message = serde_json::from_value(json!({
            "id": "m1", "role": "assistant", "created_at": 0,
            "segments": [{"kind": "tool_group", "tools": [{
                "id": "c1", "name": "act", "input": {}, "category": "host", "output": "PLANTED"
            }]}]
        }))
        .expect("a message");
        let record = SessionRecord::new(id.clone(), 0);
        let saved = store
            .save_messages(0, &record, &[Arc::new(message)])
            .now_or_never();
        assert_eq!(saved, Some(Ok(Written::Committed(1))));
        store.settle(&id);
        {
            let mut shard = store.shard(&id);
            let stored = shard.get_mut(&id).expect("stored");
            let Messages::Packed(packed) = &stored.messages else {
                panic!("settled");
            };
            let mut messages = packed.unpack();
            let Body::Encoded { bytes, .. } = &mut messages[0].body else {
                panic!("encoded");
            };
            let text = String::from_utf8(bytes.to_vec()).expect("utf-8");
            let deep = format!("{}1{}", "[".repeat(300), "]".repeat(300));
            *bytes = text.replace("\"PLANTED\"", &deep).into_bytes().into();
            stored.messages = Messages::Packed(Packed::new(&messages).expect("encoded"));
        }

        let load = |store: &MemoryStore| {
            store
                .load(&id)
                .now_or_never()
                .expect("the memory store answers at once")
                .expect("readable")
                .expect("stored")
        };
        let loaded = load(&store);
        let Segment::ToolGroup { tools } = &loaded.messages[0].segments[0] else {
            panic!("a tool group");
        };
        let mut inner: &Value = tools[0].output.as_ref().expect("an output");
        while let Some(first) = inner.get(0) {
            inner = first;
        }
        assert_eq!(inner, readback::REMOVED_MARKER);

        let rewritten = store
            .save_messages(loaded.version, &loaded.record, &loaded.messages)
            .now_or_never();
        assert_eq!(rewritten, Some(Ok(Written::Committed(2))));
        store.settle(&id);
        let shard = store.shard(&id);
        let Messages::Packed(packed) = &shard.get(&id).expect("stored").messages else {
            panic!("settled");
        };
        let (_, bytes) = packed.iter().next().expect("a message");
        assert!(serde_json::from_slice::<Value>(bytes).is_ok());
    }
}

#[cfg(test)]
mod packed_tests {
    use super::*;

    /// Lengths on each side of a varint byte boundary come back whole, and
    /// `varint_len` is what `put_part` wrote.
    #[test]
    fn parts_of_every_length_class_read_back_whole() {
        for n in [0, 1, 127, 128, 300, 16_383, 16_384, 70_000] {
            let part = vec![b'x'; n];
            let mut packed = Vec::new();
            put_part(&mut packed, b"id");
            put_part(&mut packed, &part);
            assert_eq!(packed.len(), 1 + 2 + varint_len(n) + n, "length {n}");
            let mut rest = &packed[..];
            assert_eq!(take_part(&mut rest), Some(&b"id"[..]));
            assert_eq!(take_part(&mut rest), Some(&part[..]));
            assert!(rest.is_empty());
            assert_eq!(take_part(&mut rest), None);
        }
        // Cut short, a buffer yields no part rather than a wrong one.
        let mut packed = Vec::new();
        put_part(&mut packed, &[b'y'; 200]);
        let mut rest = &packed[..100];
        assert_eq!(take_part(&mut rest), None);
    }
}

#[cfg(test)]
mod settle_tests {
    use super::*;
    use crate::conversation::Role;

    fn message(content: &str) -> Arc<Message> {
        let mut message = Message::empty(MessageId::new("m1"), None, Role::User, 0);
        message.content = content.into();
        Arc::new(message)
    }

    fn load(store: &MemoryStore, id: &SessionId) -> SessionSnapshot {
        store
            .load(id)
            .now_or_never()
            .expect("the memory store answers at once")
            .expect("readable")
            .expect("stored")
    }

    fn is_encoded(store: &MemoryStore, id: &SessionId) -> bool {
        let shard = store.shard(id);
        matches!(shard.get(id).expect("stored").messages, Messages::Packed(_))
    }

    fn message_with_id(id: &str, content: &str) -> Arc<Message> {
        let mut message = Message::empty(MessageId::new(id), None, Role::User, 0);
        message.content = content.into();
        Arc::new(message)
    }

    /// A settled session is packed into one buffer; a write to it replaces
    /// a message by its id and appends a new one, in order, and settling
    /// packs it again.
    #[test]
    fn a_packed_session_takes_writes_in_place_and_packs_again() {
        let store = MemoryStore::new();
        let id = SessionId::new("packed");
        let record = SessionRecord::new(id.clone(), 0);
        let first: Vec<Arc<Message>> = ["a", "b", "c"]
            .iter()
            .map(|message_id| message_with_id(message_id, message_id))
            .collect();
        let written = store.save_messages(0, &record, &first).now_or_never();
        assert_eq!(written, Some(Ok(Written::Committed(1))));
        store.settle(&id);
        assert!(is_encoded(&store, &id));
        assert_eq!(load(&store, &id).messages, first);
        let written = store.save_session(1, &record).now_or_never();
        assert_eq!(written, Some(Ok(Written::Committed(2))));
        assert!(is_encoded(&store, &id), "a row-only write leaves it packed");

        let changed = vec![message_with_id("b", "b again"), message_with_id("d", "d")];
        let written = store.save_messages(2, &record, &changed).now_or_never();
        assert_eq!(written, Some(Ok(Written::Committed(3))));
        assert!(!is_encoded(&store, &id));
        store.settle(&id);
        assert!(is_encoded(&store, &id));
        let expected = vec![
            first[0].clone(),
            changed[0].clone(),
            first[2].clone(),
            changed[1].clone(),
        ];
        assert_eq!(load(&store, &id).messages, expected);
        let listed = store.list(None, 10, 0).now_or_never();
        let n_listed = listed
            .and_then(Result::ok)
            .map(|page| page[0].message_count);
        assert_eq!(n_listed, Some(4));
    }

    /// While the writer is resident its message is kept as it is, not
    /// encoded; `settle` encodes it, and it loads the same; a later write
    /// is shared again until the next settle.
    #[test]
    fn messages_are_shared_until_settled_then_load_the_same() {
        let store = MemoryStore::new();
        let id = SessionId::new("s");
        let record = SessionRecord::new(id.clone(), 0);
        let first = message("first");
        let written = store.save_messages(0, &record, std::slice::from_ref(&first));
        assert_eq!(written.now_or_never(), Some(Ok(Written::Committed(1))));
        assert!(Arc::ptr_eq(&load(&store, &id).messages[0], &first));
        assert!(!is_encoded(&store, &id));

        store.settle(&id);
        assert!(is_encoded(&store, &id));
        let loaded = load(&store, &id);
        assert!(!Arc::ptr_eq(&loaded.messages[0], &first));
        assert_eq!(loaded.messages, vec![first]);

        let second = message("second");
        let written = store.save_messages(1, &record, std::slice::from_ref(&second));
        assert_eq!(written.now_or_never(), Some(Ok(Written::Committed(2))));
        assert!(!is_encoded(&store, &id));
        store.settle(&id);
        assert!(is_encoded(&store, &id));
        assert_eq!(load(&store, &id).messages, vec![second]);
        // Settling what is settled, or what is not stored, changes nothing.
        store.settle(&id);
        store.settle(&SessionId::new("absent"));
        assert_eq!(load(&store, &id).version, 2);
    }
}

#[cfg(test)]
mod large_load_tests {
    use serde_json::json;

    use super::*;

    /// A session past `offload::INLINE_BYTES` is decoded on the blocking pool
    /// and loads the same as it was written.
    #[tokio::test]
    async fn a_large_session_loads_whole_from_the_blocking_pool() {
        let store = MemoryStore::new();
        let id = SessionId::new("large");
        let messages: Vec<Arc<Message>> = (0..4)
            .map(|n| {
                serde_json::from_value(json!({
                    "id": format!("m{n}"), "role": "user", "created_at": n,
                    "content": "x".repeat(offload::INLINE_BYTES / 2)
                }))
                .map(Arc::new)
                .expect("a message")
            })
            .collect();
        let record = SessionRecord::new(id.clone(), 0);
        let saved = store.save_messages(0, &record, &messages).await;
        assert_eq!(saved, Ok(Written::Committed(1)));
        // Shared with the writer, nothing is left to decode.
        assert!(matches!(store.snapshot(&id), Snapshot::Decoded(_)));
        store.settle(&id);
        assert!(matches!(store.snapshot(&id), Snapshot::Large(_)));
        let loaded = store.load(&id).await.expect("readable").expect("stored");
        assert_eq!(loaded.messages, messages);
        assert_eq!(loaded.version, 1);
    }
}

#[cfg(test)]
mod record_tests {
    use serde_json::json;

    use super::*;
    use crate::contract::{HostContext, OutputMode};
    use crate::ids::ToolCallId;

    /// Every field of the row loads as written; the host context comes back
    /// as a fresh value of the same JSON, and listing reads the same fields.
    #[test]
    fn a_row_loads_as_written_and_lists_its_fields() {
        let store = MemoryStore::new();
        let id = SessionId::new("row");
        let context = HostContext::parse(
            &json!({"version": 1, "view": {"name": "tasks", "data": {"b": 1, "a": [1, 2]}}}),
            "host_context",
        )
        .expect("a valid context");
        let record = SessionRecord {
            id: id.clone(),
            owner_id: Some("alice".into()),
            title: Some("a title".into()),
            created_at: 1_700_000_000_000,
            turn_number: 3,
            active_leaf: Some(MessageId::new("m3")),
            host_context: Some(Arc::new(StoredContext::new(context))),
            pending_action: Some(Arc::new(PendingAction {
                tool_call_id: ToolCallId::new("c1"),
                tool_name: "select".into(),
                arguments: json!({"number": 42}),
                assistant_message_id: MessageId::new("m3"),
                queued: vec![ToolCallId::new("c2")],
                output_mode: OutputMode::Text,
            })),
        };
        let saved = store.save_session(0, &record).now_or_never();
        assert_eq!(saved, Some(Ok(Written::Committed(1))));
        let loaded = store
            .load(&id)
            .now_or_never()
            .and_then(Result::ok)
            .flatten()
            .expect("stored");
        assert_eq!(loaded.record, record);
        let (written, read) = (
            record.host_context.unwrap(),
            loaded.record.host_context.unwrap(),
        );
        assert!(
            !Arc::ptr_eq(&written, &read),
            "the context is decoded, not shared"
        );
        assert_eq!(
            serde_json::to_string(&*read).unwrap(),
            serde_json::to_string(&*written).unwrap()
        );
        let listed = store
            .list(Some("alice"), 10, 0)
            .now_or_never()
            .and_then(Result::ok)
            .expect("listed");
        assert_eq!(
            listed,
            vec![SessionSummary {
                session_id: id,
                owner_id: Some("alice".into()),
                title: Some("a title".into()),
                turn_number: 3,
                message_count: 0,
                created_at: 1_700_000_000_000,
            }]
        );
        let others = store.list(Some("bob"), 10, 0).now_or_never();
        assert_eq!(others, Some(Ok(Vec::new())));
    }
}
