//! Prompt text the runtime builds for the model: the rendered
//! `<host_context>` block (the system prompt lands here too).

pub mod host_block;
pub mod system;
