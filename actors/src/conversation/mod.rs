//! The conversation a session holds: messages, their segments and tool records,
//! usage, the pending host action, and the message tree with its active leaf.
//! Pure data and pure functions; the session actor is the only writer.

mod message;
mod stored_context;
mod transcript;
mod tree;

pub use message::*;
pub use stored_context::StoredContext;
pub use transcript::{build_transcript, ScreenshotOverlay};
pub use tree::MessageTree;
