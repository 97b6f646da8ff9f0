//! What the load generators (`loadgen`, `sioload`) share: reading a server's
//! resident memory and finding bytes in a raw HTTP/websocket buffer. Included
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
