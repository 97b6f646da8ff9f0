//! Unguessable identifiers for Engine.IO sessions and Socket.IO sockets.
//! std has no RNG, so each id is SipHash (a keyed PRF) under the secret random
//! keys of a fresh `RandomState`, fed a process-wide counter and the clock.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// URL-safe base64 alphabet: ids travel in query strings unescaped.
const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
/// 128 bits of PRF output, 6 bits per character.
const ID_CHARS: usize = 22;

/// Makes ids distinct even when the clock does not move between two calls.
static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A fresh random id of [`ID_CHARS`] URL-safe characters.
pub(crate) fn new_id() -> String {
    let count = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let keys = RandomState::new();
    let mut words = [0u64; 2];
    for (i, word) in words.iter_mut().enumerate() {
        let mut hasher = keys.build_hasher();
        hasher.write_u64(count);
        hasher.write_u128(nanos);
        hasher.write_usize(i);
        *word = hasher.finish();
    }
    let mut bits = (u128::from(words[0]) << 64) | u128::from(words[1]);
    let mut id = String::with_capacity(ID_CHARS);
    for _ in 0..ID_CHARS {
        id.push(char::from(ALPHABET[(bits & 63) as usize]));
        bits >>= 6;
    }
    id
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn ids_are_long_url_safe_and_distinct() {
        let ids: HashSet<String> = (0..10_000).map(|_| new_id()).collect();
        assert_eq!(ids.len(), 10_000);
        for id in &ids {
            assert_eq!(id.len(), ID_CHARS);
            assert!(id.bytes().all(|b| ALPHABET.contains(&b)));
        }
    }
}
