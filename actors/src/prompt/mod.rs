//! Prompt text the runtime builds for the model: the system prompt (composed
//! from the assistant profile) and the rendered `<host_context>` block.

pub mod host_block;
pub mod profile;
pub mod system;
