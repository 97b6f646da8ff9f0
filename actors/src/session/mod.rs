//! Sessions: one actor per session owning its tree, host context, pending call
//! and live turn; the registry that finds or starts it; and the `Runtime`
//! handle the transports call.

mod actor;
mod budget;
mod caller;
mod deps;
mod error;
mod grace;
mod messages;
mod recovery;
mod registry;
mod runtime;

pub use actor::SessionActor;
pub use budget::{attachment_bytes, AttachmentBudget, AttachmentLease};
pub use caller::Caller;
pub use deps::{SessionConfig, SessionDeps};
pub use error::{SessionError, DATABASE_UNREACHABLE};
pub use messages::{AcceptedAs, SessionInfo, TurnAccepted};
pub use registry::SessionRegistry;
pub use runtime::{Runtime, RuntimeHealth};
