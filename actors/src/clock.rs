//! The wall clock as the runtime stores it: Unix milliseconds. A module of
//! its own, below everything, so that every layer may read it.

/// Milliseconds since the Unix epoch.
pub fn now_millis() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_millis() as u64)
        .unwrap_or(0)
}
