//! The AG-UI edge (`POST /api/agui`): a `RunAgentInput` in, Server-Sent
//! Events out, for `@ag-ui/client` and CopilotKit frontends. It maps the
//! input onto the same message bodies as HTTP and Socket.IO and leaves the
//! turn to the `Runtime`.
//!
//! - `input`: `RunAgentInput` → `ChatRequest`s (the mapping decisions are there).
//! - `events`: `TurnEvent` → AG-UI events and SSE frames.
//! - `history`: the stored path → AG-UI messages for `MESSAGES_SNAPSHOT`.
//! - `route`: the handler, the SSE body, cancel on disconnect.

mod events;
mod history;
mod input;
mod route;

pub use route::{__path_post_agui, post_agui};
