//! Sessions: one actor per session owning its tree, host context, pending call
//! and live turn; the registry that finds or starts it; and the `Runtime`
//! handle the transports call.

mod actor;
mod budget;
mod caller;
mod deps;
mod error;
mod grace;
mod recovery;
mod registry;
mod requests;
mod runtime;

pub use actor::SessionActor;
pub use budget::{attachment_bytes, AttachmentBudget, AttachmentLease};
pub use caller::Caller;
pub use deps::{SessionConfig, SessionDeps};
pub use error::{SessionError, DATABASE_UNREACHABLE};
pub use registry::SessionRegistry;
pub use requests::{AcceptedAs, SessionInfo, TurnAccepted};
pub use runtime::{Runtime, RuntimeHealth};
