//! The assistant-runtime server: settings, the HTTP routes, the Socket.IO
//! transport and AG-UI, all thin edges over the `actors` core.
//!
//! Layout:
//! - `settings`: layered configuration, validated at startup.
//! - `startup`: builds the runtime and the HTTP server (`Application`).
//! - `routes`: the HTTP routes.
//! - `errors`: the one mapping from errors to status codes and payloads.
//! - `agui`: the AG-UI edge, `POST /api/agui` (RunAgentInput in, SSE out).

pub mod agui;
pub mod errors;
pub mod routes;
pub mod settings;
pub mod startup;
