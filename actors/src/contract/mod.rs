//! The host contract (host-contract.md, runtime.md "The message body"): the
//! wire JSON a host sends, parsed once at the door into typed values. Nothing
//! past this module reads contract JSON; it knows no transport or status code.
//!
//! - `error`: `ValidationError`, a field path and a reason.
//! - `keys`: contract key spelling (snake_case or camelCase) and unknown fields.
//! - `host_context`, `attachment`: the context and its attachments;
//!   `timestamp`: the ISO 8601 shape of `captured_at`.
//! - `body`: the message body; `join`: the join and cancel payloads.
//! - `cases`: the shared table of invalid bodies, for unit and black-box tests;
//!   built only for this crate's tests and with the `test-support` feature.

pub mod attachment;
pub mod body;
#[cfg(any(test, feature = "test-support"))]
pub mod cases;
pub mod depth;
pub mod error;
pub mod host_context;
pub mod join;
mod keys;
mod timestamp;

pub use attachment::{
    Attachment, AttachmentKind, AttachmentPurpose, AttachmentSource, MAX_ATTACHMENT_CONTENT_CHARS,
};
pub use body::{
    ChatRequest, Continuation, IdempotencyMark, MessageType, OutputMode, RequestConfig, ToolOutcome,
};
pub use depth::MAX_JSON_DEPTH;
pub use error::ValidationError;
pub use host_context::{
    HostAction, HostContext, HostInfo, HostKind, NavigationTarget, View, MAX_ACTIONS,
    MAX_ATTACHMENTS, MAX_CONTEXT_JSON_CHARS, MAX_NAVIGATION_TARGETS,
};
pub use join::{CancelRequest, JoinRequest};
