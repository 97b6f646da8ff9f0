//! assistant-runtime core: everything about sessions, turns, the host contract,
//! models, tools and storage, with no knowledge of HTTP, Socket.IO or AG-UI.
//!
//! Layout:
//! - `ids`: identifier newtypes.
//! - `contract`: the host contract (host_context, attachments, message body): parse and validate.
//! - `prompt`: the system prompt and the rendered `<host_context>` block.
//! - `model`: the provider-neutral model interface and its adapters (echo, OpenAI, Anthropic).
//! - `tools`: backend tools, host tools, the registry and schema checks.
//! - `session`: the session actor, its messages and registry.
//! - `turn`: the model loop of one turn.
//! - `store`: the store trait with memory and Postgres implementations.

pub mod contract;
pub mod ids;
pub mod model;
pub mod prompt;
