//! `RetryingModel`: sends a failed request once more after a short pause,
//! but only when the failure is retryable and came before the first event.
//! Once anything was yielded the turn has shown it, so a retry would
//! duplicate output; those failures go to the turn engine as they are.

use std::sync::Arc;
use std::time::Duration;

use futures_util::stream::{self, StreamExt};

use super::{ModelClient, ModelRequest, ModelStream};

/// Pause before the retry when none is configured: long enough to ride out a
/// dropped connection or a brief overload, short enough not to be noticed.
pub const DEFAULT_RETRY_BACKOFF: Duration = Duration::from_millis(200);

/// Wraps any `ModelClient`; `M` may be `dyn ModelClient`.
pub struct RetryingModel<M: ?Sized> {
    inner: Arc<M>,
    /// Pause between the failed attempt and the retry.
    backoff: Duration,
}

impl<M: ?Sized> RetryingModel<M> {
    pub fn new(inner: Arc<M>, backoff: Duration) -> RetryingModel<M> {
        RetryingModel { inner, backoff }
    }
}

impl<M: ModelClient + ?Sized + 'static> ModelClient for RetryingModel<M> {
    fn stream(&self, request: ModelRequest) -> ModelStream {
        let inner = Arc::clone(&self.inner);
        let backoff = self.backoff;
        let attempt = async move {
            let mut first = inner.stream(request.clone());
            match first.next().await {
                Some(Err(error)) if error.kind.retry_allowed() => {
                    log::warn!("model request failed before any output, retrying once: {error}");
                    drop(first);
                    tokio::time::sleep(backoff).await;
                    inner.stream(request)
                }
                Some(item) => stream::once(async move { item }).chain(first).boxed(),
                None => stream::empty().boxed(),
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
    use crate::model::{ModelError, ModelErrorKind, ModelEvent, ModelId, ModelSettings};

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

    fn failure(kind: ModelErrorKind) -> Result<ModelEvent, ModelError> {
        Err(ModelError {
            kind,
            message: "x".into(),
        })
    }

    fn text(value: &str) -> Result<ModelEvent, ModelError> {
        Ok(ModelEvent::TextDelta(value.into()))
    }

    async fn run(
        scripts: Vec<Vec<Result<ModelEvent, ModelError>>>,
    ) -> (Vec<Result<ModelEvent, ModelError>>, usize) {
        let inner = Arc::new(ScriptedModel {
            attempts: AtomicUsize::new(0),
            scripts: Mutex::new(scripts),
        });
        let model = RetryingModel::new(Arc::clone(&inner), Duration::from_millis(1));
        let request = ModelRequest {
            model: ModelId::parse("test:model").unwrap(),
            system: "".into(),
            messages: Default::default(),
            tools: vec![],
            settings: ModelSettings::default(),
        };
        let items = model.stream(request).collect().await;
        (items, inner.attempts.load(Ordering::SeqCst))
    }

    #[tokio::test]
    async fn retryable_failure_before_output_is_retried_once() {
        let (items, n_attempts) = run(vec![
            vec![failure(ModelErrorKind::RateLimit)],
            vec![failure(ModelErrorKind::RateLimit)],
        ])
        .await;
        assert_eq!(n_attempts, 2);
        assert_eq!(items, vec![failure(ModelErrorKind::RateLimit)]);

        let (items, n_attempts) = run(vec![
            vec![failure(ModelErrorKind::Timeout)],
            vec![text("ok")],
        ])
        .await;
        assert_eq!((items, n_attempts), (vec![text("ok")], 2));
    }

    #[tokio::test]
    async fn failure_after_output_or_not_retryable_is_passed_through() {
        let (items, n_attempts) = run(vec![vec![
            text("a"),
            failure(ModelErrorKind::ConnectionError),
        ]])
        .await;
        assert_eq!(
            (items, n_attempts),
            (vec![text("a"), failure(ModelErrorKind::ConnectionError)], 1)
        );

        let (items, n_attempts) = run(vec![vec![failure(ModelErrorKind::ProviderAuth)]]).await;
        assert_eq!(
            (items, n_attempts),
            (vec![failure(ModelErrorKind::ProviderAuth)], 1)
        );
    }
}
