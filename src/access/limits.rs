//! Per-principal limits: turns started per minute and sessions with a turn
//! running at once. Over either, the request is refused with
//! `SessionError::RateLimited` (429 + `Retry-After`, or `assistant:error`
//! of type `rate_limited` on the socket) before anything is stored. Admins
//! (the local operator included) are not limited: the caps protect the
//! operator's provider bill from the principals they let in.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use actors::ids::SessionId;
use actors::session::{Caller, SessionError};

const WINDOW: Duration = Duration::from_secs(60);
/// Principals tracked before idle ones are forgotten, so a stream of new
/// principals costs bounded memory.
const PRUNE_ABOVE: usize = 10_000;
/// What a refused live-session request is told to wait, in seconds.
const LIVE_RETRY_AFTER_SECS: u64 = 1;

#[derive(Default)]
struct Usage {
    /// When this principal's turns of the last minute started.
    turns: VecDeque<Instant>,
    /// Sessions with a turn running, and how many requests hold each.
    live: HashMap<SessionId, u32>,
}

pub struct Limits {
    turns_per_minute: u32,
    live_sessions: u32,
    usage: Mutex<HashMap<Arc<str>, Usage>>,
}

impl Limits {
    /// `0` turns off a cap.
    pub fn new(turns_per_minute: u32, live_sessions: u32) -> Arc<Limits> {
        Arc::new(Limits {
            turns_per_minute,
            live_sessions,
            usage: Mutex::new(HashMap::new()),
        })
    }

    fn usage(&self) -> MutexGuard<'_, HashMap<Arc<str>, Usage>> {
        self.usage
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Counts a turn on `session` for `caller`, or refuses it. The returned
    /// guard keeps the session live for the caller until it is dropped
    /// (when the request's turn has ended or its stream was abandoned).
    pub fn admit(
        self: &Arc<Self>,
        caller: &Caller,
        session: &SessionId,
    ) -> Result<LiveGuard, SessionError> {
        if caller.admin {
            return Ok(LiveGuard { release: None });
        }
        let now = Instant::now();
        let mut all = self.usage();
        if all.len() > PRUNE_ABOVE {
            all.retain(|_, usage| {
                !usage.live.is_empty()
                    || usage
                        .turns
                        .back()
                        .is_some_and(|last| now.duration_since(*last) < WINDOW)
            });
        }
        let usage = all.entry(caller.principal.clone()).or_default();
        while usage
            .turns
            .front()
            .is_some_and(|first| now.duration_since(*first) >= WINDOW)
        {
            usage.turns.pop_front();
        }
        if self.turns_per_minute > 0 && usage.turns.len() >= self.turns_per_minute as usize {
            let oldest = usage.turns.front().copied().unwrap_or(now);
            let wait = WINDOW.saturating_sub(now.duration_since(oldest));
            return Err(SessionError::RateLimited {
                message: format!(
                    "rate limited: at most {} turns per minute per principal (ASSISTANT__TURNS_PER_MINUTE)",
                    self.turns_per_minute
                ),
                retry_after_secs: wait.as_secs().max(1),
            });
        }
        let new_session = !usage.live.contains_key(session);
        if self.live_sessions > 0 && new_session && usage.live.len() >= self.live_sessions as usize
        {
            return Err(SessionError::RateLimited {
                message: format!(
                    "rate limited: at most {} sessions with a running turn per principal (ASSISTANT__LIVE_SESSIONS_PER_PRINCIPAL)",
                    self.live_sessions
                ),
                retry_after_secs: LIVE_RETRY_AFTER_SECS,
            });
        }
        usage.turns.push_back(now);
        *usage.live.entry(session.clone()).or_insert(0) += 1;
        Ok(LiveGuard {
            release: Some((self.clone(), caller.principal.clone(), session.clone())),
        })
    }

    fn release(&self, principal: &Arc<str>, session: &SessionId) {
        let mut all = self.usage();
        let Some(usage) = all.get_mut(principal) else {
            return;
        };
        if let Some(count) = usage.live.get_mut(session) {
            *count -= 1;
            if *count == 0 {
                usage.live.remove(session);
            }
        }
    }
}

/// Holds one live session of a principal; dropping it releases it.
pub struct LiveGuard {
    release: Option<(Arc<Limits>, Arc<str>, SessionId)>,
}

impl Drop for LiveGuard {
    fn drop(&mut self) {
        if let Some((limits, principal, session)) = self.release.take() {
            limits.release(&principal, &session);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turns_per_minute_are_capped_with_a_retry_after() {
        let limits = Limits::new(2, 0);
        let alice = Caller::new("alice", false);
        let session = SessionId::new("s");
        drop(limits.admit(&alice, &session).expect("first"));
        drop(limits.admit(&alice, &session).expect("second"));
        match limits.admit(&alice, &session) {
            Err(SessionError::RateLimited {
                retry_after_secs, ..
            }) => assert!((1..=60).contains(&retry_after_secs)),
            Err(other) => panic!("expected a rate limit, got {other:?}"),
            Ok(_) => panic!("expected a rate limit, got a turn"),
        }
        assert!(limits.admit(&Caller::new("bob", false), &session).is_ok());
        assert!(limits.admit(&Caller::new("root", true), &session).is_ok());
    }

    #[test]
    fn live_sessions_are_capped_until_released() {
        let limits = Limits::new(0, 1);
        let alice = Caller::new("alice", false);
        let first = limits.admit(&alice, &SessionId::new("a")).expect("first");
        // The same session again is not a new live session.
        let again = limits.admit(&alice, &SessionId::new("a")).expect("same");
        assert!(limits.admit(&alice, &SessionId::new("b")).is_err());
        drop(first);
        drop(again);
        assert!(limits.admit(&alice, &SessionId::new("b")).is_ok());
    }
}
