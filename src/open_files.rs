//! The process's limit on open files. Every held Socket.IO or HTTP
//! connection is a file, and the soft limit (often 1,024) is what a process
//! gets by default, while the hard limit is what it may raise itself to
//! without privileges; so `serve` raises the soft limit to the hard one at
//! startup, before it accepts anything.

/// The soft and hard limits after raising the soft one to the hard one, or
/// why it could not be raised (then the limits stay as they were).
// `rlim_t` is u64 on Linux, not on every target.
#[allow(clippy::unnecessary_cast)]
pub fn raise_soft_limit() -> Result<(u64, u64), std::io::Error> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a valid, writable rlimit for the call to fill.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // An unlimited hard limit still caps files at the kernel's `nr_open`,
    // whose default this is.
    let target = limit.rlim_max.min(1 << 20);
    if limit.rlim_cur < target {
        let raised = libc::rlimit {
            rlim_cur: target,
            rlim_max: limit.rlim_max,
        };
        // SAFETY: `raised` is a valid rlimit; the call only reads it.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        limit = raised;
    }
    Ok((limit.rlim_cur as u64, limit.rlim_max as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_soft_limit_ends_at_the_hard_one() {
        let (soft, hard) = raise_soft_limit().expect("getrlimit and setrlimit work here");
        assert!(soft == hard || soft == 1 << 20, "soft {soft}, hard {hard}");
    }
}
