//! What the load generators (`loadgen`, `sioload`) share: reading a server's
//! resident memory, finding bytes in a raw HTTP/websocket buffer, and the
//! schedule of paced sessions (`--pause-ms`). Included
//! by each binary with `#[path]`; not part of the server library.

/// The `VmRSS` of process `pid`, in KiB.
pub fn resident_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|line| {
        line.strip_prefix("VmRSS:")?
            .trim()
            .trim_end_matches(" kB")
            .trim()
            .parse()
            .ok()
    })
}

/// Where `needle` first occurs in `haystack`.
pub fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

/// When a paced session's turn `turn` starts: `turn` pauses after its first
/// (at once if that time has passed). A fixed schedule keeps the sessions'
/// starts spread over the pause. A pause after each answer did not: a slow
/// turn moved its session's later turns towards the next session's, and
/// over a run the sessions drifted into step and queued behind each other
/// (at 50 sessions the median of the last tenth of turns was two to seven
/// times the first tenth's, with one session flat).
pub fn paced_start(
    first: tokio::time::Instant,
    pause: std::time::Duration,
    turn: usize,
) -> tokio::time::Instant {
    first + pause.saturating_mul(u32::try_from(turn).unwrap_or(u32::MAX))
}
