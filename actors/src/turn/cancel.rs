//! Cancellation of a live turn: the session actor keeps the handle, the turn
//! task the token. A watch channel, so a token that starts waiting after the
//! cancel still sees it.

use tokio::sync::watch;

pub struct CancelHandle {
    tx: watch::Sender<bool>,
}

#[derive(Clone)]
pub struct CancelToken {
    rx: watch::Receiver<bool>,
}

impl CancelHandle {
    pub fn new() -> (CancelHandle, CancelToken) {
        let (tx, rx) = watch::channel(false);
        (CancelHandle { tx }, CancelToken { rx })
    }

    pub fn cancel(&self) {
        self.tx.send_replace(true);
    }
}

impl CancelToken {
    pub fn is_cancelled(&self) -> bool {
        *self.rx.borrow()
    }

    /// Resolves once cancelled; never resolves if the handle is dropped uncancelled.
    pub async fn cancelled(&mut self) {
        if self.rx.wait_for(|cancelled| *cancelled).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}
