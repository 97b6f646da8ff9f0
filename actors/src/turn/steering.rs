//! Steering notes on their way from the session actor to its live turn: a
//! bounded queue the turn drains between model requests. Neither side ever
//! waits on it, so a lock around a deque is all it needs; a tokio channel
//! allocated and zeroed a block of slots for every turn, steered or not,
//! and was 1 % of the server's CPU samples under a turn load.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use super::SteeringNote;

/// A queue of at most `bound` notes, as its two ends.
pub fn steering_queue(bound: usize) -> (SteeringSender, SteeringReceiver) {
    let queue = Arc::new(Queue {
        bound,
        inner: Mutex::new(Inner::default()),
    });
    (
        SteeringSender {
            queue: queue.clone(),
        },
        SteeringReceiver { queue },
    )
}

/// The actor's end.
pub struct SteeringSender {
    queue: Arc<Queue>,
}

/// The turn's end; the queue closes when it is dropped.
pub struct SteeringReceiver {
    queue: Arc<Queue>,
}

/// Why a note was not queued; the note comes back.
#[derive(Debug)]
pub enum NotQueued {
    /// `bound` notes are waiting already.
    Full(SteeringNote),
    /// The turn's end is gone: the turn is over.
    Closed(SteeringNote),
}

struct Queue {
    bound: usize,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    notes: VecDeque<SteeringNote>,
    closed: bool,
}

impl Queue {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Only plain deque operations run under the lock.
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl SteeringSender {
    pub fn try_send(&self, note: SteeringNote) -> Result<(), NotQueued> {
        let mut inner = self.queue.lock();
        if inner.closed {
            Err(NotQueued::Closed(note))
        } else if inner.notes.len() >= self.queue.bound {
            Err(NotQueued::Full(note))
        } else {
            inner.notes.push_back(note);
            Ok(())
        }
    }
}

impl SteeringReceiver {
    /// The oldest waiting note, if any.
    pub fn try_recv(&mut self) -> Option<SteeringNote> {
        self.queue.lock().notes.pop_front()
    }

    pub fn is_empty(&self) -> bool {
        self.queue.lock().notes.is_empty()
    }
}

impl Drop for SteeringReceiver {
    fn drop(&mut self) {
        self.queue.lock().closed = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note(id: &str) -> SteeringNote {
        SteeringNote {
            id: crate::ids::MessageId::new(id),
            text: id.to_string(),
            attachments: Vec::new(),
        }
    }

    #[test]
    fn notes_come_out_in_order_up_to_the_bound() {
        let (sender, mut receiver) = steering_queue(2);
        assert!(receiver.is_empty());
        sender.try_send(note("a")).unwrap();
        sender.try_send(note("b")).unwrap();
        assert!(matches!(sender.try_send(note("c")), Err(NotQueued::Full(n)) if n.text == "c"));
        assert_eq!(receiver.try_recv().map(|n| n.text).as_deref(), Some("a"));
        sender.try_send(note("c")).unwrap();
        assert_eq!(receiver.try_recv().map(|n| n.text).as_deref(), Some("b"));
        assert_eq!(receiver.try_recv().map(|n| n.text).as_deref(), Some("c"));
        assert!(receiver.try_recv().is_none());
    }

    #[test]
    fn a_dropped_turn_end_closes_the_queue() {
        let (sender, receiver) = steering_queue(2);
        drop(receiver);
        assert!(matches!(sender.try_send(note("a")), Err(NotQueued::Closed(n)) if n.text == "a"));
    }
}
