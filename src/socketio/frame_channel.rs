//! An unbounded channel of websocket frames, smaller than tokio's: tokio's
//! `mpsc` allocates a 32-slot block (over 1 KiB for `Bytes`) plus cache-padded
//! state up front, for every connection, idle or not. This one is one small
//! allocation and a `VecDeque` that is empty while the connection is idle.
//! The backlog is bounded elsewhere (`ConnectionLink`).

use std::collections::VecDeque;
use std::future::poll_fn;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use actix_web::web::Bytes;

/// Above this many slots, an emptied queue gives its memory back.
const IDLE_QUEUE_SLOTS: usize = 8;

struct State {
    queue: VecDeque<Bytes>,
    rx_waker: Option<Waker>,
    rx_closed: bool,
    /// Live `Sender`s (not counting `WeakSender`s).
    senders: usize,
}

struct Shared {
    state: Mutex<State>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// A new channel: frames sent are received in order; `recv` ends (`None`)
/// once every `Sender` is dropped.
pub(crate) fn channel() -> (Sender, Receiver) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            queue: VecDeque::new(),
            rx_waker: None,
            rx_closed: false,
            senders: 1,
        }),
    });
    (
        Sender {
            shared: shared.clone(),
        },
        Receiver { shared },
    )
}

pub(crate) struct Sender {
    shared: Arc<Shared>,
}

impl Sender {
    /// Queues a frame; gives it back if the receiver is gone.
    pub(crate) fn send(&self, frame: Bytes) -> Result<(), Bytes> {
        let waker = {
            let mut state = self.shared.lock();
            if state.rx_closed {
                return Err(frame);
            }
            state.queue.push_back(frame);
            state.rx_waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
        Ok(())
    }

    /// A handle that does not keep the channel open.
    pub(crate) fn downgrade(&self) -> WeakSender {
        WeakSender {
            shared: self.shared.clone(),
        }
    }
}

impl Drop for Sender {
    fn drop(&mut self) {
        let waker = {
            let mut state = self.shared.lock();
            state.senders -= 1;
            if state.senders > 0 {
                return;
            }
            state.rx_waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

pub(crate) struct WeakSender {
    shared: Arc<Shared>,
}

impl WeakSender {
    /// A `Sender`, unless every `Sender` is already gone.
    pub(crate) fn upgrade(&self) -> Option<Sender> {
        let mut state = self.shared.lock();
        if state.senders == 0 {
            return None;
        }
        state.senders += 1;
        Some(Sender {
            shared: self.shared.clone(),
        })
    }
}

pub(crate) struct Receiver {
    shared: Arc<Shared>,
}

impl Receiver {
    pub(crate) fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        let mut state = self.shared.lock();
        if let Some(frame) = state.queue.pop_front() {
            if state.queue.is_empty() && state.queue.capacity() > IDLE_QUEUE_SLOTS {
                state.queue = VecDeque::new();
            }
            return Poll::Ready(Some(frame));
        }
        if state.senders == 0 {
            return Poll::Ready(None);
        }
        match &mut state.rx_waker {
            Some(waker) => waker.clone_from(cx.waker()),
            None => state.rx_waker = Some(cx.waker().clone()),
        }
        Poll::Pending
    }

    /// A frame already queued, without waiting.
    pub(crate) fn try_recv(&mut self) -> Option<Bytes> {
        let mut state = self.shared.lock();
        let frame = state.queue.pop_front();
        if state.queue.is_empty() && state.queue.capacity() > IDLE_QUEUE_SLOTS {
            state.queue = VecDeque::new();
        }
        frame
    }

    pub(crate) async fn recv(&mut self) -> Option<Bytes> {
        poll_fn(|cx| self.poll_recv(cx)).await
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let mut state = self.shared.lock();
        state.rx_closed = true;
        state.rx_waker = None;
        state.queue = VecDeque::new();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn frames_arrive_in_order_and_the_end_follows_the_last_sender() {
        let (tx, mut rx) = channel();
        let weak = tx.downgrade();
        let second = weak.upgrade().expect("a sender is alive");
        tx.send(Bytes::from_static(b"a")).unwrap();
        second.send(Bytes::from_static(b"b")).unwrap();
        drop(tx);
        assert_eq!(rx.recv().await.as_deref(), Some(&b"a"[..]));
        drop(second);
        assert_eq!(rx.recv().await.as_deref(), Some(&b"b"[..]));
        assert_eq!(rx.recv().await, None);
        assert!(weak.upgrade().is_none());
    }

    #[tokio::test]
    async fn a_dropped_receiver_refuses_frames() {
        let (tx, rx) = channel();
        drop(rx);
        assert!(tx.send(Bytes::from_static(b"a")).is_err());
    }

    #[tokio::test]
    async fn a_waiting_receiver_is_woken() {
        let (tx, mut rx) = channel();
        let waiter = tokio::spawn(async move { rx.recv().await });
        tokio::task::yield_now().await;
        tx.send(Bytes::from_static(b"x")).unwrap();
        assert_eq!(waiter.await.unwrap().as_deref(), Some(&b"x"[..]));
    }
}
