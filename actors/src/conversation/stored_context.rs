//! The session's last host context as the session row keeps it: shared by
//! the actor's copy and every row written from it, with its JSON made once.
//! The row is written at every message and every turn's end, and the
//! context (up to 64 KiB) changes only when a request brings one, so
//! encoding it anew for each write was the larger part of a host action
//! round trip's store writes. Its rendered
//! `<host_context>` block is kept the same way: a user message and every
//! continuation's note after a tool result show the same context, and
//! rendering it again was a round trip's largest piece of prompt work.

use std::ops::Deref;
use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;

use crate::contract::HostContext;
use crate::prompt::host_block::render_host_context;

#[derive(Debug)]
pub struct StoredContext {
    context: HostContext,
    /// The context's compact JSON, made by the first write that needs it.
    encoded: OnceLock<Box<RawValue>>,
    /// The context's `<host_context>` block, made by the first turn that
    /// shows it, and shared by every user message that opens with it.
    rendered: OnceLock<Arc<str>>,
}

impl StoredContext {
    pub fn new(context: HostContext) -> StoredContext {
        StoredContext {
            context,
            encoded: OnceLock::new(),
            rendered: OnceLock::new(),
        }
    }

    pub fn context(&self) -> &HostContext {
        &self.context
    }

    /// The context's compact JSON, encoded once.
    pub fn json(&self) -> serde_json::Result<&RawValue> {
        if let Some(encoded) = self.encoded.get() {
            return Ok(encoded);
        }
        let encoded = serde_json::value::to_raw_value(&self.context)?;
        Ok(self.encoded.get_or_init(|| encoded))
    }

    /// `render_host_context` of this context, rendered once.
    pub fn rendered(&self) -> &Arc<str> {
        self.rendered
            .get_or_init(|| render_host_context(&self.context).into())
    }
}

impl Deref for StoredContext {
    type Target = HostContext;

    fn deref(&self) -> &HostContext {
        &self.context
    }
}

impl PartialEq for StoredContext {
    fn eq(&self, other: &StoredContext) -> bool {
        self.context == other.context
    }
}

impl Serialize for StoredContext {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.json() {
            Ok(encoded) => encoded.serialize(serializer),
            // Whatever failed, the serializer at hand reports it.
            Err(_) => self.context.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for StoredContext {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<StoredContext, D::Error> {
        HostContext::deserialize(deserializer).map(StoredContext::new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_writes_what_the_context_itself_writes_every_time() {
        let body = crate::contract::host_context::tests::spec_example();
        let context = HostContext::parse(&body, "host_context").expect("a valid context");
        let direct = serde_json::to_string(&context).expect("encodes");
        let stored = StoredContext::new(context);
        for _ in 0..2 {
            assert_eq!(serde_json::to_string(&stored).expect("encodes"), direct);
            assert_eq!(
                serde_json::to_value(&stored).expect("encodes"),
                serde_json::from_str::<serde_json::Value>(&direct).expect("json")
            );
        }
        let read: StoredContext = serde_json::from_str(&direct).expect("decodes");
        assert_eq!(read, stored);
    }

    #[test]
    fn its_block_is_what_rendering_the_context_gives_every_time() {
        let body = crate::contract::host_context::tests::spec_example();
        let context = HostContext::parse(&body, "host_context").expect("a valid context");
        let direct = render_host_context(&context);
        let stored = StoredContext::new(context);
        for _ in 0..2 {
            assert_eq!(**stored.rendered(), *direct);
        }
    }
}
