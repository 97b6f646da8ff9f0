//! Work whose cost grows with its input (parsing or decoding megabytes of
//! JSON) runs on tokio's blocking pool once the input passes `INLINE_BYTES`,
//! so it does not hold the thread it came from: an HTTP worker, where
//! session actors run too (its other connections and sessions, `/health`
//! included, would wait). Smaller inputs stay where they are: the hand-off
//! costs more than the work.

/// Inputs up to this size are handled in place.
pub const INLINE_BYTES: usize = 64 * 1024;

/// `work()` on the blocking pool, or in place outside a tokio runtime (a
/// test polling a future by hand). `Err` says why it did not finish there
/// (it panicked, or the runtime is shutting down).
pub async fn on_blocking_pool<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, String> {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return Ok(work());
    };
    runtime
        .spawn_blocking(work)
        .await
        .map_err(|error| error.to_string())
}
