//! A bounded, process-wide cache of values made from host input, keyed by
//! that input's JSON text, so what repeats is made once: a host action's
//! compiled schema (`schema`), a validated host context
//! (`contract::host_context`). The same host context comes back with every
//! request of a conversation, and with it its action schemas.
//!
//! The keys are host input: the cache is bounded both in entries and in an
//! estimate of the memory its values hold (`weight`), an entry too heavy for
//! its share is not kept at all, and when full the least recently used
//! entries are dropped. Failures are never cached: refused input is checked
//! (and refused) again, as bounded as the first time.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// Values by key, each made once while it stays in the cache.
pub(crate) struct BoundedCache<T> {
    /// Most entries kept.
    max_entries: usize,
    /// Most total weight kept (each entry's key bytes plus its own estimate).
    max_weight: usize,
    /// A std `Mutex`: it is held only for a map lookup or an insertion, never
    /// across making a value, so contention is a few hundred nanoseconds.
    state: Mutex<State<T>>,
}

struct State<T> {
    entries: HashMap<Box<str>, Entry<T>>,
    /// The sum of the entries' weights.
    weight: usize,
    /// Counts lookups; an entry's `last_used` is the clock at its last hit.
    clock: u64,
}

struct Entry<T> {
    value: Arc<T>,
    weight: usize,
    last_used: u64,
}

impl<T> BoundedCache<T> {
    pub(crate) fn new(max_entries: usize, max_weight: usize) -> Self {
        BoundedCache {
            max_entries,
            max_weight,
            state: Mutex::new(State {
                entries: HashMap::new(),
                weight: 0,
                clock: 0,
            }),
        }
    }

    /// The value cached under `key`, or `make`'s, kept if it fits. `make`
    /// returns the value and its weight beyond the key's bytes; it runs
    /// without the lock held, so two threads missing the same key at once
    /// may both make it (the second insertion replaces the first).
    pub(crate) fn get_or_make<E>(
        &self,
        key: String,
        make: impl FnOnce() -> Result<(T, usize), E>,
    ) -> Result<Arc<T>, E> {
        if let Some(value) = self.get(&key) {
            return Ok(value);
        }
        let (value, weight) = make()?;
        let value = Arc::new(value);
        self.insert(key, Arc::clone(&value), weight);
        Ok(value)
    }

    /// The value cached under `key`, if any.
    pub(crate) fn get(&self, key: &str) -> Option<Arc<T>> {
        let mut state = self.lock();
        state.clock += 1;
        let clock = state.clock;
        let entry = state.entries.get_mut(key)?;
        entry.last_used = clock;
        Some(Arc::clone(&entry.value))
    }

    /// Keeps `value` under `key` if it fits (`weight` as for `get_or_make`).
    pub(crate) fn insert(&self, key: String, value: Arc<T>, weight: usize) {
        let weight = weight.saturating_add(key.len());
        // One entry may take at most a quarter of the cache, so a single
        // heavy value cannot flush everything else.
        if weight > self.max_weight / 4 || self.max_entries == 0 {
            return;
        }
        let mut state = self.lock();
        if let Some(old) = state.entries.remove(key.as_str()) {
            state.weight -= old.weight;
        }
        while state.entries.len() >= self.max_entries || state.weight + weight > self.max_weight {
            if !state.evict_least_recently_used() {
                break;
            }
        }
        state.clock += 1;
        let last_used = state.clock;
        state.weight += weight;
        state.entries.insert(
            key.into_boxed_str(),
            Entry {
                value,
                weight,
                last_used,
            },
        );
    }

    /// A panic elsewhere while holding the lock leaves the map consistent
    /// (every mutation is a single map operation plus its weight), so a
    /// poisoned lock is used as is.
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().entries.len()
    }

    #[cfg(test)]
    fn weight(&self) -> usize {
        self.lock().weight
    }
}

impl<T> State<T> {
    /// Drops the entry unused the longest; a scan, because evictions happen
    /// only on a miss that makes a value, which costs far more than the scan.
    fn evict_least_recently_used(&mut self) -> bool {
        let oldest = self
            .entries
            .iter()
            .min_by_key(|(_, entry)| entry.last_used)
            .map(|(key, _)| key.clone());
        let Some(oldest) = oldest else {
            return false;
        };
        if let Some(entry) = self.entries.remove(&oldest) {
            self.weight -= entry.weight;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    fn make_counting(n_made: &Cell<u32>, weight: usize) -> Result<(u32, usize), String> {
        n_made.set(n_made.get() + 1);
        Ok((n_made.get(), weight))
    }

    #[test]
    fn a_second_lookup_is_a_hit() {
        let cache = BoundedCache::new(8, 1_000);
        let n_made = Cell::new(0);
        let first = cache
            .get_or_make("a".into(), || make_counting(&n_made, 1))
            .unwrap();
        let second = cache
            .get_or_make("a".into(), || make_counting(&n_made, 1))
            .unwrap();
        assert_eq!(n_made.get(), 1);
        assert!(Arc::ptr_eq(&first, &second));
    }

    #[test]
    fn failures_are_not_cached() {
        let cache: BoundedCache<u32> = BoundedCache::new(8, 1_000);
        let n_made = Cell::new(0);
        for _ in 0..2 {
            let outcome = cache.get_or_make("bad".into(), || {
                n_made.set(n_made.get() + 1);
                Err("refused")
            });
            assert_eq!(outcome.unwrap_err(), "refused");
        }
        assert_eq!(n_made.get(), 2);
        assert_eq!(cache.len(), 0);
    }

    #[test]
    fn entries_are_bounded_and_the_least_recently_used_goes_first() {
        let cache = BoundedCache::new(3, 1_000);
        let n_made = Cell::new(0);
        for key in ["a", "b", "c"] {
            cache
                .get_or_make(key.into(), || make_counting(&n_made, 1))
                .unwrap();
        }
        // "a" is used again, so "b" is the oldest when "d" comes in.
        cache
            .get_or_make("a".into(), || make_counting(&n_made, 1))
            .unwrap();
        cache
            .get_or_make("d".into(), || make_counting(&n_made, 1))
            .unwrap();
        assert_eq!(cache.len(), 3);
        assert_eq!(n_made.get(), 4);
        cache
            .get_or_make("a".into(), || make_counting(&n_made, 1))
            .unwrap();
        assert_eq!(n_made.get(), 4, "a was evicted");
        cache
            .get_or_make("b".into(), || make_counting(&n_made, 1))
            .unwrap();
        assert_eq!(n_made.get(), 5, "b was kept");
    }

    #[test]
    fn weight_is_bounded_and_a_heavy_entry_is_not_kept() {
        let cache = BoundedCache::new(100, 400);
        let n_made = Cell::new(0);
        for i in 0..50 {
            cache
                .get_or_make(format!("k{i:02}"), || make_counting(&n_made, 37))
                .unwrap();
            assert!(cache.weight() <= 400);
        }
        // 37 + 3 key bytes each: ten fit.
        assert_eq!(cache.len(), 10);
        // More than a quarter of the cache: made and returned, not kept.
        let heavy = cache
            .get_or_make("heavy".into(), || make_counting(&n_made, 101))
            .unwrap();
        assert_eq!(*heavy, 51);
        assert_eq!(cache.len(), 10);
        cache
            .get_or_make("heavy".into(), || make_counting(&n_made, 101))
            .unwrap();
        assert_eq!(n_made.get(), 52);
    }
}
