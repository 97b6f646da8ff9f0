//! Sessions: one actor per session owning its tree, host context, pending call
//! and live turn; the registry that finds or starts it; and the `Runtime`
//! handle the transports call; the rooms of sockets that follow a session.

mod actor;
mod caller;
mod deps;
mod error;
mod grace;
mod recovery;
mod registry;
mod requests;
mod rooms;
mod runtime;

pub use actor::SessionActor;
pub use caller::Caller;
pub use deps::{SessionConfig, SessionDeps};
pub use error::{SessionError, SessionResult, DATABASE_UNREACHABLE};
pub use registry::SessionRegistry;
pub use requests::{AcceptedAs, SessionInfo, TurnAccepted};
pub use rooms::{MemberId, Removal, RoomMember, Rooms, MAX_MEMBERS_PER_ROOM};
pub use runtime::{Runtime, RuntimeHealth};
