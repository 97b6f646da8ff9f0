//! `RetryingModel`: sends a failed request again, but only when the failure
//! came before the first event and the transport marked it safe to resend
//! (`Resend`): a connection that failed before any byte of a response, or a
//! 429 / 5xx answered before streaming began. Once anything was yielded the
//! turn has shown it, so a retry would duplicate output; those failures, and
//! silences (`timeout`), go to the turn engine as they are.
//!
//! The wait is the provider's `retry-after` / `retry-after-ms` when it sent
//! one, else exponential backoff with full jitter (a uniform pick between
//! zero and a ceiling that doubles per retry). A provider asking for more
//! than `RetryPolicy::max_wait` is not waited for: the failure is returned
//! at once, as a rate limit usually is, with the wait it asked for.

use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::time::Duration;

use futures_util::stream::{self, StreamExt};

use super::{ModelClient, ModelError, ModelRequest, ModelStream, Resend};

/// How failed requests are retried. `Default` is the one default, for the
/// library and the server alike (`LLM__RETRY_*` override it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Requests sent after the first, at most.
    pub max_retries: u32,
    /// The backoff ceiling before the first retry; it doubles per retry.
    pub base_backoff: Duration,
    /// The longest wait accepted, from the provider or the backoff.
    pub max_wait: Duration,
}

/// Ceiling of the first backoff: long enough to ride out a dropped
/// connection or a brief overload, short enough not to be noticed.
pub const DEFAULT_RETRY_BACKOFF: Duration = Duration::from_millis(500);

/// Longest wait for a provider's `retry-after` by default: a user waiting on
/// an answer gives up long before a provider's hour-long rate-limit window.
pub const DEFAULT_RETRY_MAX_WAIT: Duration = Duration::from_secs(30);

/// Retries by default: three requests in all.
pub const DEFAULT_MAX_RETRIES: u32 = 2;

impl Default for RetryPolicy {
    fn default() -> RetryPolicy {
        RetryPolicy {
            max_retries: DEFAULT_MAX_RETRIES,
            base_backoff: DEFAULT_RETRY_BACKOFF,
            max_wait: DEFAULT_RETRY_MAX_WAIT,
        }
    }
}

impl RetryPolicy {
    /// How long to wait before retry number `retry` (0 for the first) after
    /// `error`, or `Err` with the reason not to retry.
    fn wait(&self, error: &ModelError, retry: u32, random: u64) -> Result<Duration, String> {
        match error.resend {
            Resend::Never => Err("not safe to resend".into()),
            _ if retry >= self.max_retries => Err(format!("{} retries made", self.max_retries)),
            Resend::After(wait) if wait > self.max_wait => Err(format!(
                "the provider asked to wait {} s, more than the {} s allowed (LLM__RETRY_MAX_WAIT_SECONDS)",
                wait.as_secs_f64().ceil(),
                self.max_wait.as_secs()
            )),
            Resend::After(wait) => Ok(wait),
            Resend::Backoff => {
                let ceiling = self
                    .base_backoff
                    .saturating_mul(1u32 << retry.min(16))
                    .min(self.max_wait);
                // Full jitter: clients retrying after one outage spread out
                // instead of arriving together again.
                let nanos = u64::try_from(ceiling.as_nanos()).unwrap_or(u64::MAX);
                Ok(Duration::from_nanos(random % nanos.saturating_add(1)))
            }
        }
    }
}

/// A fresh random number: std's hasher keys are random per `RandomState`.
fn random() -> u64 {
    std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish()
}

/// Wraps any `ModelClient`; `M` may be `dyn ModelClient`.
pub struct RetryingModel<M: ?Sized> {
    inner: Arc<M>,
    policy: RetryPolicy,
}

impl<M: ?Sized> RetryingModel<M> {
    pub fn new(inner: Arc<M>, policy: RetryPolicy) -> RetryingModel<M> {
        RetryingModel { inner, policy }
    }
}

impl<M: ModelClient + ?Sized + 'static> ModelClient for RetryingModel<M> {
    fn stream(&self, request: ModelRequest) -> ModelStream {
        let inner = Arc::clone(&self.inner);
        let policy = self.policy;
        let attempt = async move {
            let mut retry = 0;
            loop {
                let mut attempt = inner.stream(request.clone());
                match attempt.next().await {
                    Some(Err(mut error)) => match policy.wait(&error, retry, random()) {
                        Ok(wait) => {
                            log::warn!(
                                "model request failed before any output, retrying in {wait:?}: {error}"
                            );
                            drop(attempt);
                            tokio::time::sleep(wait).await;
                            retry += 1;
                        }
                        Err(reason) => {
                            if matches!(error.resend, Resend::After(_)) {
                                error.message = format!("{} ({reason})", error.message);
                            }
                            return stream::once(async move { Err(error) }).boxed();
                        }
                    },
                    Some(item) => return stream::once(async move { item }).chain(attempt).boxed(),
                    None => return stream::empty().boxed(),
                }
            }
        };
        stream::once(attempt).flatten().boxed()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;

    use super::*;
    use crate::model::{ModelErrorKind, ModelEvent, ModelId, ModelSettings};

    /// Answers each attempt with the next scripted list of items.
    struct ScriptedModel {
        attempts: AtomicUsize,
        scripts: Mutex<Vec<Vec<Result<ModelEvent, ModelError>>>>,
    }

    impl ModelClient for ScriptedModel {
        fn stream(&self, _request: ModelRequest) -> ModelStream {
            self.attempts.fetch_add(1, Ordering::SeqCst);
            let items = self.scripts.lock().unwrap().remove(0);
            stream::iter(items).boxed()
        }
    }

    fn failure(kind: ModelErrorKind, resend: Resend) -> Result<ModelEvent, ModelError> {
        Err(ModelError {
            kind,
            message: "x".into(),
            resend,
        })
    }

    fn text(value: &str) -> Result<ModelEvent, ModelError> {
        Ok(ModelEvent::TextDelta(value.into()))
    }

    fn policy() -> RetryPolicy {
        RetryPolicy {
            max_retries: 2,
            base_backoff: Duration::from_millis(1),
            max_wait: Duration::from_secs(2),
        }
    }

    async fn run(
        scripts: Vec<Vec<Result<ModelEvent, ModelError>>>,
    ) -> (Vec<Result<ModelEvent, ModelError>>, usize) {
        let inner = Arc::new(ScriptedModel {
            attempts: AtomicUsize::new(0),
            scripts: Mutex::new(scripts),
        });
        let model = RetryingModel::new(Arc::clone(&inner), policy());
        let request = ModelRequest {
            model: ModelId::parse("test:model").unwrap(),
            system: "".into(),
            messages: Default::default(),
            tools: vec![],
            settings: ModelSettings::default(),
            purpose: Default::default(),
        };
        let items = model.stream(request).collect().await;
        (items, inner.attempts.load(Ordering::SeqCst))
    }

    #[tokio::test]
    async fn a_safe_failure_before_output_is_retried_up_to_the_limit() {
        let limited = failure(ModelErrorKind::RateLimit, Resend::Backoff);
        let (items, n_attempts) = run(vec![vec![limited.clone()]; 3]).await;
        assert_eq!((items, n_attempts), (vec![limited], 3));

        let refused = failure(ModelErrorKind::ConnectionError, Resend::Backoff);
        let (items, n_attempts) = run(vec![vec![refused], vec![text("ok")]]).await;
        assert_eq!((items, n_attempts), (vec![text("ok")], 2));
    }

    #[tokio::test]
    async fn failures_after_output_or_unsafe_to_resend_are_passed_through() {
        let lost = failure(ModelErrorKind::ConnectionError, Resend::Backoff);
        let (items, n_attempts) = run(vec![vec![text("a"), lost.clone()]]).await;
        assert_eq!((items, n_attempts), (vec![text("a"), lost], 1));

        let silent = failure(ModelErrorKind::Timeout, Resend::Never);
        let (items, n_attempts) = run(vec![vec![silent.clone()]]).await;
        assert_eq!((items, n_attempts), (vec![silent], 1));
    }

    #[tokio::test]
    async fn a_wait_over_the_cap_fails_at_once_saying_why() {
        let hour = failure(
            ModelErrorKind::RateLimit,
            Resend::After(Duration::from_secs(3600)),
        );
        let (items, n_attempts) = run(vec![vec![hour]]).await;
        assert_eq!(n_attempts, 1);
        let error = items[0].clone().unwrap_err();
        assert_eq!(error.kind, ModelErrorKind::RateLimit);
        assert!(error.message.contains("3600 s"), "{}", error.message);
        assert!(error.message.contains("LLM__RETRY_MAX_WAIT_SECONDS"));
    }

    #[test]
    fn backoff_is_jittered_below_a_doubling_ceiling_and_retry_after_is_kept() {
        let policy = RetryPolicy {
            max_retries: 10,
            base_backoff: Duration::from_millis(100),
            max_wait: Duration::from_secs(1),
        };
        let backoff = ModelError {
            kind: ModelErrorKind::ProviderError,
            message: "x".into(),
            resend: Resend::Backoff,
        };
        for retry in 0..6 {
            let ceiling = Duration::from_millis(100 << retry).min(Duration::from_secs(1));
            for _ in 0..50 {
                assert!(policy.wait(&backoff, retry, random()).unwrap() <= ceiling);
            }
            let nanos = ceiling.as_nanos() as u64;
            assert_eq!(policy.wait(&backoff, retry, 0), Ok(Duration::ZERO));
            assert_eq!(policy.wait(&backoff, retry, nanos), Ok(ceiling));
        }
        let told = ModelError {
            resend: Resend::After(Duration::from_millis(1500)),
            ..backoff
        };
        assert!(
            policy.wait(&told, 0, 0).is_err(),
            "1.5 s is over the 1 s cap"
        );
        let policy = RetryPolicy {
            max_wait: Duration::from_secs(2),
            ..policy
        };
        assert_eq!(policy.wait(&told, 0, 0), Ok(Duration::from_millis(1500)));
    }
}
