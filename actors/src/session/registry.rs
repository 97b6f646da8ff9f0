//! The session registry: finds the live `SessionActor` for a `SessionId`,
//! starting one (which loads itself from the store) on first use. It hands out
//! addresses and nothing else: no turn work passes through it. Sharded maps
//! instead of an actor, so lookups never queue behind one mailbox.
//!
//! A new actor runs on the thread that asked for it: the HTTP worker that
//! serves the session's connection. Its messages, its turn and the turn's
//! events then never cross a thread; a hand-off to another thread costs a
//! wake-up and a context switch each way, about a tenth of a short turn's
//! CPU (BENCHMARKS.md, issue 17). What grows with its input (bodies, tool
//! arguments and stored sessions past 64 KiB, and any argument check past a
//! small step budget) runs on the blocking pool (`offload`), so a session's
//! work does not hold the worker's other connections.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use actix::{Actor, Addr, Arbiter, ArbiterHandle};

use super::actor::SessionActor;
use super::deps::SessionDeps;
use crate::ids::SessionId;

const N_SHARDS: usize = 64;

pub struct SessionRegistry {
    shards: Vec<Mutex<HashMap<SessionId, Addr<SessionActor>>>>,
    hasher: std::collections::hash_map::RandomState,
    /// Threads for actors asked for from outside any actix arbiter (a
    /// plain tokio thread); started on first such use, inside the actix system.
    arbiters: OnceLock<Vec<ArbiterHandle>>,
}

impl Default for SessionRegistry {
    fn default() -> Self {
        SessionRegistry {
            shards: (0..N_SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            hasher: Default::default(),
            arbiters: OnceLock::new(),
        }
    }
}

impl SessionRegistry {
    fn shard(&self, id: &SessionId) -> MutexGuard<'_, HashMap<SessionId, Addr<SessionActor>>> {
        let index = (self.hasher.hash_one(id) as usize) % N_SHARDS;
        // Only plain map operations run under the lock; a poisoned shard still holds a usable map.
        self.shards[index]
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The live actor, started on this thread when there is none.
    pub fn get_or_start(
        self: &Arc<Self>,
        id: &SessionId,
        deps: &Arc<SessionDeps>,
    ) -> Addr<SessionActor> {
        let mut shard = self.shard(id);
        if let Some(addr) = shard.get(id) {
            if addr.connected() {
                return addr.clone();
            }
        }
        let actor = SessionActor::new(id.clone(), deps.clone(), self.clone());
        let addr = if Arbiter::try_current().is_some() {
            actor.start()
        } else {
            SessionActor::start_in_arbiter(&self.arbiter_for(id), |_| actor)
        };
        shard.insert(id.clone(), addr.clone());
        addr
    }

    /// The arbiter for an actor asked for off any arbiter: one per core, chosen by the id.
    fn arbiter_for(&self, id: &SessionId) -> ArbiterHandle {
        let arbiters = self.arbiters.get_or_init(|| {
            let n = std::thread::available_parallelism().map_or(2, |n| n.get());
            (0..n).map(|_| Arbiter::new().handle()).collect()
        });
        arbiters[(self.hasher.hash_one(id) as usize) % arbiters.len()].clone()
    }

    /// The live actor, if any, without starting one.
    pub fn get(&self, id: &SessionId) -> Option<Addr<SessionActor>> {
        self.shard(id)
            .get(id)
            .filter(|addr| addr.connected())
            .cloned()
    }

    /// Forgets `addr` if it is still the entry for `id` (a newer actor may have replaced it).
    pub fn remove(&self, id: &SessionId, addr: &Addr<SessionActor>) {
        let mut shard = self.shard(id);
        if shard.get(id) == Some(addr) {
            shard.remove(id);
        }
    }

    /// Every live actor, for the idle sweeper.
    pub fn live_actors(&self) -> Vec<Addr<SessionActor>> {
        let mut actors = Vec::new();
        for shard in &self.shards {
            let shard = shard
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            actors.extend(shard.values().cloned());
        }
        actors
    }

    pub fn n_live(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| shard.lock().map(|map| map.len()).unwrap_or(0))
            .sum()
    }
}
