//! The attachment memory budget. The contract allows 16 attachments of up to
//! 12,000,000 characters each per message, so one request may hold ~190 MB
//! of attachment text while its turn runs; a deployment holds what its
//! memory allows. Each accepted message leases its attachments' bytes from
//! its session's share and from the process's until its turn is over (the
//! lease rides on the turn's `EventSink`); a message that would go past
//! either is refused (`OverBudget`, HTTP 413) before anything is stored.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::contract::{Attachment, AttachmentSource};
use crate::ids::SessionId;

/// Limits and what is leased now; clones share the count.
#[derive(Clone, Debug)]
pub struct AttachmentBudget {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    per_session: usize,
    per_process: usize,
    leased: Mutex<Leased>,
}

#[derive(Debug, Default)]
struct Leased {
    total: usize,
    by_session: HashMap<SessionId, usize>,
}

impl PartialEq for AttachmentBudget {
    fn eq(&self, other: &Self) -> bool {
        self.limits() == other.limits()
    }
}

/// A lease refused: the sentence for the host (`SessionError::TooLarge`).
#[derive(Debug)]
pub struct OverBudget(pub String);

/// Bytes leased for one message's turn; given back when dropped.
#[derive(Debug)]
pub struct AttachmentLease {
    inner: Arc<Inner>,
    session: SessionId,
    bytes: usize,
}

/// The bytes an attachment's content holds in memory.
pub fn attachment_bytes(attachment: &Attachment) -> usize {
    match &attachment.source {
        AttachmentSource::DataUri(text) | AttachmentSource::Text(text) => text.len(),
        AttachmentSource::Url(url) => url.len(),
    }
}

impl AttachmentBudget {
    pub fn new(per_session: usize, per_process: usize) -> AttachmentBudget {
        AttachmentBudget {
            inner: Arc::new(Inner {
                per_session,
                per_process,
                leased: Mutex::new(Leased::default()),
            }),
        }
    }

    /// (per session, per process), in bytes.
    pub fn limits(&self) -> (usize, usize) {
        (self.inner.per_session, self.inner.per_process)
    }

    /// Leases `attachments` for `session`, or says which budget they exceed.
    pub fn lease(
        &self,
        session: &SessionId,
        attachments: &[Attachment],
    ) -> Result<Option<AttachmentLease>, OverBudget> {
        let bytes: usize = attachments.iter().map(attachment_bytes).sum();
        if bytes == 0 {
            return Ok(None);
        }
        let mut leased = self.inner.leased();
        let session_now = leased.by_session.get(session).copied().unwrap_or(0);
        if session_now + bytes > self.inner.per_session {
            return Err(OverBudget(format!(
                "attachments: {bytes} bytes, with {session_now} bytes of this session's turns still running, exceed the per-session attachment budget of {} bytes",
                self.inner.per_session
            )));
        }
        if leased.total + bytes > self.inner.per_process {
            return Err(OverBudget(format!(
                "attachments: {bytes} bytes exceed what this server can hold right now (attachment budget {} bytes, {} in use); send them again later or smaller",
                self.inner.per_process, leased.total
            )));
        }
        leased.total += bytes;
        *leased.by_session.entry(session.clone()).or_default() += bytes;
        Ok(Some(AttachmentLease {
            inner: self.inner.clone(),
            session: session.clone(),
            bytes,
        }))
    }

    /// Bytes leased now, in total.
    pub fn in_use(&self) -> usize {
        self.inner.leased().total
    }
}

impl Inner {
    /// Only counts change under the lock: a poisoned one still holds them.
    fn leased(&self) -> MutexGuard<'_, Leased> {
        self.leased.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for AttachmentLease {
    fn drop(&mut self) {
        let mut leased = self.inner.leased();
        leased.total = leased.total.saturating_sub(self.bytes);
        if let Some(held) = leased.by_session.get_mut(&self.session) {
            *held = held.saturating_sub(self.bytes);
            if *held == 0 {
                leased.by_session.remove(&self.session);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn text_attachment(chars: usize) -> Attachment {
        Attachment::parse(&json!({"kind": "text", "text": "x".repeat(chars)}), "a").unwrap()
    }

    #[test]
    fn leases_are_bounded_per_session_and_per_process_and_given_back() {
        let budget = AttachmentBudget::new(100, 150);
        let (a, b) = (SessionId::new("a"), SessionId::new("b"));
        let first = budget.lease(&a, &[text_attachment(80)]).unwrap();
        assert!(matches!(
            budget.lease(&a, &[text_attachment(30)]),
            Err(OverBudget(_))
        ));
        let second = budget.lease(&b, &[text_attachment(70)]).unwrap();
        assert!(matches!(
            budget.lease(&b, &[text_attachment(10)]),
            Err(OverBudget(_))
        ));
        drop(first);
        drop(second);
        assert_eq!(budget.in_use(), 0);
        assert!(budget.lease(&a, &[text_attachment(100)]).unwrap().is_some());
    }
}
