//! Finds the live `SessionActor` for a `SessionId`, starting one on the thread
//! that asked (ARCHITECTURE.md says why). Sharded maps, not an actor, so
//! lookups never queue behind one mailbox.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Instant;

use actix::{Actor, Addr, Arbiter, ArbiterHandle};

use super::actor::SessionActor;
use super::deps::SessionDeps;
use super::grace::{GracePool, GRACE_SLOTS};
use crate::ids::SessionId;

const N_SHARDS: usize = 64;

/// The actor a message went to, named by its entry's idle check (held, so
/// the name is never reused).
pub struct SentTo(Arc<IdleCheck>);

struct Entry {
    addr: Addr<SessionActor>,
    idle_check: Arc<IdleCheck>,
}

type Shard = HashMap<SessionId, Entry>;

pub struct SessionRegistry {
    shards: Vec<Mutex<Shard>>,
    pub(super) graces: Arc<GracePool>,
    /// For actors asked for off any actix arbiter; started on first use.
    arbiters: OnceLock<Vec<ArbiterHandle>>,
}

impl Default for SessionRegistry {
    fn default() -> Self {
        SessionRegistry {
            shards: (0..N_SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            graces: GracePool::new(GRACE_SLOTS),
            arbiters: OnceLock::new(),
        }
    }
}

impl SessionRegistry {
    fn shard(&self, id: &SessionId) -> MutexGuard<'_, Shard> {
        lock(&self.shards[(id.shard_hash() as usize) % N_SHARDS])
    }

    /// Sends `message` to the live actor, started on this thread when there
    /// is none, and names it for [`Self::forget`]. The address is not cloned:
    /// a clone allocates twice, and this is every request's way in.
    pub fn send<M>(
        self: &Arc<Self>,
        id: &SessionId,
        deps: &Arc<SessionDeps>,
        message: M,
    ) -> (actix::dev::Request<SessionActor, M>, SentTo)
    where
        M: actix::Message + Send + 'static,
        M::Result: Send,
        SessionActor: actix::Handler<M>,
    {
        // Sending only queues the message: the lock is held as for a lookup.
        let send = |entry: &Entry| (entry.addr.send(message), SentTo(entry.idle_check.clone()));
        let mut shard = self.shard(id);
        if let Some(entry) = shard.get(id).filter(|entry| entry.addr.connected()) {
            return send(entry);
        }
        let idle_check = Arc::new(IdleCheck::default());
        let actor = SessionActor::new(id.clone(), deps.clone(), self.clone(), idle_check.clone());
        let addr = if Arbiter::try_current().is_some() {
            actor.start()
        } else {
            SessionActor::start_in_arbiter(&self.arbiter_for(id), |_| actor)
        };
        let entry = Entry { addr, idle_check };
        let sent = send(&entry);
        shard.insert(id.clone(), entry);
        sent
    }

    /// [`Self::remove`] for the actor a message was sent to.
    pub fn forget(&self, id: &SessionId, sent_to: &SentTo) {
        self.remove_if(id, |entry| Arc::ptr_eq(&entry.idle_check, &sent_to.0));
    }

    fn remove_if(&self, id: &SessionId, is_it: impl FnOnce(&Entry) -> bool) {
        let mut shard = self.shard(id);
        if shard.get(id).is_some_and(is_it) {
            shard.remove(id);
        }
    }

    /// One per core, chosen by the id.
    fn arbiter_for(&self, id: &SessionId) -> ArbiterHandle {
        let arbiters = self.arbiters.get_or_init(|| {
            let n = std::thread::available_parallelism().map_or(2, |n| n.get());
            (0..n).map(|_| Arbiter::new().handle()).collect()
        });
        arbiters[(id.shard_hash() as usize) % arbiters.len()].clone()
    }

    /// Without starting one.
    pub fn get(&self, id: &SessionId) -> Option<Addr<SessionActor>> {
        self.shard(id)
            .get(id)
            .map(|entry| &entry.addr)
            .filter(|addr| addr.connected())
            .cloned()
    }

    /// Forgets `addr` if it is still the entry for `id` (a newer actor may have replaced it).
    pub fn remove(&self, id: &SessionId, addr: &Addr<SessionActor>) {
        self.remove_if(id, |entry| entry.addr == *addr);
    }

    /// Only these are woken: asking thousands of resident sessions five
    /// times a second stalls every worker (BENCHMARKS.md).
    pub fn due_for_idle_check(&self, now: Instant) -> Vec<Addr<SessionActor>> {
        let due = |entry: &Entry| entry.idle_check.is_due(now).then(|| entry.addr.clone());
        let mut actors = Vec::new();
        for shard in &self.shards {
            actors.extend(lock(shard).values().filter_map(due));
        }
        actors
    }

    pub fn n_live(&self) -> usize {
        self.shards.iter().map(|shard| lock(shard).len()).sum()
    }
}

/// Only plain map operations run under a shard's lock: a poisoned one still
/// holds a usable map.
fn lock(shard: &Mutex<Shard>) -> MutexGuard<'_, Shard> {
    shard.lock().unwrap_or_else(PoisonError::into_inner)
}

/// When an actor may next be asked whether it is idle: set by the actor,
/// read by the sweeper. Only a hint: one asked early sets it again, one not
/// asked stays in memory. Due until first set.
#[derive(Default)]
pub struct IdleCheck {
    /// Milliseconds since [`epoch`].
    due_at: AtomicU64,
}

impl IdleCheck {
    pub fn set(&self, at: Instant) {
        let millis = at.saturating_duration_since(epoch()).as_millis();
        let millis = u64::try_from(millis).unwrap_or(u64::MAX);
        self.due_at.store(millis, Ordering::Relaxed);
    }

    fn is_due(&self, now: Instant) -> bool {
        let now = now.saturating_duration_since(epoch()).as_millis();
        u128::from(self.due_at.load(Ordering::Relaxed)) <= now
    }
}

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn an_actor_is_due_for_an_idle_check_once_its_time_has_come() {
        let check = IdleCheck::default();
        let now = Instant::now();
        assert!(check.is_due(now), "due until the actor first says when");
        check.set(now + Duration::from_secs(5));
        assert!(!check.is_due(now));
        assert!(!check.is_due(now + Duration::from_secs(4)));
        assert!(check.is_due(now + Duration::from_secs(5)));
        check.set(now);
        assert!(check.is_due(now));
    }
}
