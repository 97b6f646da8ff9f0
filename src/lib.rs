//! The assistant-runtime server: settings, the HTTP routes, the Socket.IO
//! transport and AG-UI, all thin edges over the `actors` core. Everything the
//! binary wires together lives here so the black-box tests can build it.
//!
//! Layout:
//! - `settings`: layered configuration, validated at startup.
//! - `access`: who the caller is (`ACCESS__MODE`), CORS, per-principal limits.
//! - `startup`: builds the runtime and the HTTP server (`Application`).
//! - `routes`: the HTTP routes.
//! - `socketio`: the Socket.IO v5 / Engine.IO v4 transport (polling, websocket,
//!   upgrade, namespaces), the `assistant-socketio` crate re-exported; it
//!   knows nothing of sessions or turns.
//! - `assistant_socket`: the `/assistant` namespace, mapping socket events to the `Runtime`.
//! - `agui`: the AG-UI edge, `POST /api/agui` (RunAgentInput in, SSE out).
//! - `cli`: the command line (clap) and `doctor`.
//! - `observability`: request ids, the access log, `/metrics`.
//! - `playground`: the static page at `GET /`.
//! - `api_docs`: Swagger UI at `GET /docs`.
//! - `mcp`: MCP servers' tools (rmcp client, stdio and streamable HTTP).
//! - `embed`: `AssistantDefinition`, for Rust hosts: mount the assistant in
//!   their own actix-web `App`, or build their own binary.
//! - `mount`: the assembled `Assistant` and its routes, served whole by
//!   `startup` or mounted under a host's prefix.
//! - `errors`: the one mapping from errors to status codes and payloads.
//! - `body`: reading a request body within a size limit and a deadline.
//! - `ingress`: other systems' messages (inject, the inbox, the heartbeat).

pub mod access;
pub mod access_settings;
pub mod agui;
pub mod allocator;
pub mod api_docs;
pub mod assistant_socket;
pub mod body;
pub mod cli;
pub mod deployment;
pub mod edge;
pub mod embed;
pub mod errors;
pub mod extensions;
pub mod ingress;
pub mod mcp;
pub mod models_info;
pub mod mount;
pub mod mount_prefix;
pub mod observability;
pub mod open_files;
pub mod playground;
pub mod provider_settings;
pub mod routes;
pub mod settings;
pub mod settings_error;
pub mod startup;

/// The Socket.IO transport (the `assistant-socketio` crate), under the name
/// the server's modules and Rust hosts have always used.
pub use assistant_socketio as socketio;
