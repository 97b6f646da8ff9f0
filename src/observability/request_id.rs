//! `x-request-id`: a client's own id is kept when it is a plain token (so it
//! can be grepped across its logs and ours); anything else, or none, gets a
//! fresh one. It never carries a client's bytes into a log line unchecked.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use actix_web::http::header::{HeaderMap, HeaderName, HeaderValue};

pub const HEADER: HeaderName = HeaderName::from_static("x-request-id");

const HEX_DIGITS: &[u8; 16] = b"0123456789abcdef";

/// Longest client id kept.
const MAX_LEN: usize = 128;

/// Shared: the request's extensions and its access log line each hold it.
/// Kept as the header value it is echoed as: a client's own is the
/// request's header itself, and neither is copied into the reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestId(HeaderValue);

impl RequestId {
    /// The request's own id if it is acceptable, else a new one.
    pub fn from_headers(headers: &HeaderMap) -> RequestId {
        headers
            .get(HEADER)
            .filter(|value| is_plain(value.as_bytes()))
            .map(|value| RequestId(value.clone()))
            .unwrap_or_else(RequestId::generate)
    }

    /// 1..=128 characters of `[A-Za-z0-9._:-]`.
    pub fn accept(text: &str) -> Option<RequestId> {
        if !is_plain(text.as_bytes()) {
            return None;
        }
        HeaderValue::from_str(text).ok().map(RequestId)
    }

    /// 32 hex digits: a per-process random key hashing a counter, so ids are
    /// unique within a process and unguessable across processes.
    pub fn generate() -> RequestId {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        static KEY: OnceLock<RandomState> = OnceLock::new();
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let key = KEY.get_or_init(RandomState::new);
        // Both halves hash the counter, then a salt: the counter is written
        // once, into a state each half continues from.
        let mut first = key.build_hasher();
        first.write_u64(n);
        let mut second = first.clone();
        first.write_u64(1);
        second.write_u64(2);
        // Written digit by digit into place: this runs for nearly every
        // request, and `format!` costs several times as much.
        let mut id = [0u8; 32];
        for (digits, half) in id
            .chunks_exact_mut(16)
            .zip([first.finish(), second.finish()])
        {
            for (shift, digit) in (0..16).rev().zip(digits) {
                *digit = HEX_DIGITS[((half >> (shift * 4)) & 0xf) as usize];
            }
        }
        // Hex digits are a valid header value.
        RequestId(HeaderValue::from_bytes(&id).unwrap_or(HeaderValue::from_static("-")))
    }

    pub fn as_str(&self) -> &str {
        // Only plain ids are ever made.
        self.0.to_str().unwrap_or_default()
    }

    /// The header echoing it on the reply.
    pub fn into_header_value(self) -> HeaderValue {
        self.0
    }
}

fn is_plain(text: &[u8]) -> bool {
    !text.is_empty()
        && text.len() <= MAX_LEN
        && text
            .iter()
            .all(|byte| byte.is_ascii_alphanumeric() || b"._:-".contains(byte))
}

impl std::fmt::Display for RequestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_ids_are_kept_and_others_replaced() {
        assert_eq!(
            RequestId::accept("req-42.a:b_c").unwrap().as_str(),
            "req-42.a:b_c"
        );
        assert!(RequestId::accept("").is_none());
        assert!(RequestId::accept("has space").is_none());
        assert!(RequestId::accept("new\nline").is_none());
        assert!(RequestId::accept(&"x".repeat(129)).is_none());
        let (a, b) = (RequestId::generate(), RequestId::generate());
        assert_ne!(a, b);
        assert_eq!(a.as_str().len(), 32);
        assert!(RequestId::accept(a.as_str()).is_some());
    }
}
