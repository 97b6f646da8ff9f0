//! Identifier newtypes. Each is a client- or runtime-chosen string of 1..=64
//! characters; the newtype keeps a session id from being passed where a call id
//! belongs. Shared, immutable text: a turn hands its ids to the store, the
//! tree, its events and its reply, a score of copies that are each a count
//! increment rather than an allocation.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// The longest id a client may choose (runtime.md, "The message body").
pub const MAX_ID_CHARS: usize = 64;

/// FNV-1a, unkeyed: ids are short, and this costs a fraction of SipHash.
/// For spreading ids over shards or comparing before the bytes, where ids a
/// client chose to collide cost only contention or a string comparison;
/// never a map's hasher, where they would cost a scan per look-up.
pub fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

macro_rules! string_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(Arc<str>);

        impl $name {
            /// Wraps a string the caller has already checked (or generated).
            pub fn new(value: impl AsRef<str>) -> Self {
                Self(Arc::from(value.as_ref()))
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// A fast, unkeyed hash of the id ([`fnv1a`]), for choosing a
            /// shard; a map keyed by ids keeps std's keyed hasher.
            pub fn shard_hash(&self) -> u64 {
                fnv1a(&self.0)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }
    };
}

string_id!(
    /// A conversation, named by the client.
    SessionId
);
string_id!(
    /// One message of a session's tree: the client's id for user messages,
    /// a runtime-made one for assistant messages.
    MessageId
);
string_id!(
    /// One tool call, as named by the model (or the runtime when a model gives none).
    ToolCallId
);

/// Whether `value` is an acceptable client-chosen id.
pub fn is_valid_id(value: &str) -> bool {
    let n_chars = value.chars().count();
    (1..=MAX_ID_CHARS).contains(&n_chars)
}
