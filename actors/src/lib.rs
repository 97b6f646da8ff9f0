//! assistant-runtime core: sessions, turns, the host contract, models, tools
//! and storage, with no knowledge of HTTP, Socket.IO or AG-UI.
//!
//! Layout:
//! - `ids`: identifier newtypes. `clock`: the wall clock, in Unix milliseconds.
//! - `contract`: the host contract (host_context, attachments, message body): parse and validate.
//! - `prompt`: the system prompt and the rendered `<host_context>` block.
//! - `conversation`: stored messages, the tree, and the transcript the model reads.
//! - `model`: the provider-neutral model interface, the catalog, and adapters (echo, OpenAI, Anthropic).
//! - `schema`: the bounded JSON Schema subset of tool parameters: compile, validate, limits.
//! - `tools`: backend tools, host tools and the per-turn tool set.
//! - `turn`: the model loop of one turn.
//! - `history`: what the model reads of a long path: compaction and working memory.
//! - `session`: the session actor, its registry and the `Runtime` handle.
//! - `events`: what a turn emits, for the transports to encode.
//! - `error_type`: the error words every transport sends.
//! - `budget`: the attachment bytes running turns may hold, per session and per process.
//! - `bounded_cache`: values made once from repeated host input (schemas, contexts).
//! - `offload`: large parsing and decoding moved to the blocking pool.
//! - `text`: joining strings without collecting them first.
//! - `tool_name`: the one rule for a tool's name.
//! - `store`: the store trait with memory and Postgres implementations.
//! - `trace`: per-turn traces with their timings, stored and exported.

mod bounded_cache;
pub mod budget;
pub mod clock;
pub mod contract;
pub mod conversation;
pub mod error_type;
pub mod events;
pub mod history;
pub mod ids;
pub mod model;
pub mod offload;
pub mod prompt;
pub mod schema;
pub mod session;
pub mod store;
mod text;
pub mod tool_name;
pub mod tools;
pub mod trace;
pub mod turn;
