//! A short stay in memory for sessions of one exchange, bounded in number:
//! with an idle timeout of zero they hibernate as their turn ends (a burst
//! would stay resident), but a client going on at once would pay a reload.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How long a session of one exchange holding a [`Grace`] stays after its
/// last request (the idle sweeper looks every 200 ms).
pub const FIRST_EXCHANGE_GRACE: Duration = Duration::from_millis(100);

/// Room for the sessions of a busy moment, a megabyte or two of actors at most.
pub const GRACE_SLOTS: usize = 256;

/// The slots, shared by every actor of the process (in the registry).
pub struct GracePool {
    held: AtomicUsize,
    slots: usize,
}

/// One slot, held by an actor while it stays; given back when dropped.
pub struct Grace(Arc<GracePool>);

impl GracePool {
    pub fn new(slots: usize) -> Arc<GracePool> {
        Arc::new(GracePool {
            held: AtomicUsize::new(0),
            slots,
        })
    }

    pub fn try_take(self: &Arc<Self>) -> Option<Grace> {
        self.held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                (held < self.slots).then_some(held + 1)
            })
            .ok()
            .map(|_| Grace(self.clone()))
    }
}

impl Drop for Grace {
    fn drop(&mut self) {
        self.0.held.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_lent_up_to_the_bound_and_given_back_when_dropped() {
        let pool = GracePool::new(2);
        let first = pool.try_take().expect("a free slot");
        let second = pool.try_take().expect("a free slot");
        assert!(pool.try_take().is_none(), "both slots are held");
        drop(first);
        let third = pool.try_take().expect("the slot given back");
        assert!(pool.try_take().is_none());
        drop((second, third));
        assert_eq!(pool.held.load(Ordering::Acquire), 0);
    }
}
