//! Tools: the backend tools the runtime runs itself (built in, or supplied
//! at startup through `Tool`: a Rust host's own and MCP servers'), the host tools the host
//! runs (configured ones and the actions a host context declares), and the
//! per-turn `ToolSet` the model is offered. Arguments are checked against each
//! tool's JSON schema before anything runs them.

mod backend;
mod custom;
mod registry;

pub use backend::{BackendOutput, BackendTool};
pub use custom::{
    success_output, SharedTool, Tool, ToolContext, ToolError, ToolFuture, ToolResult,
};
pub use registry::{
    DepsFactory, HostToolConfig, OfferedTool, ToolKind, ToolRegistry, ToolSet, HOLD_TOOL,
};
// The schema checks live below both tools and the contract (`crate::schema`);
// re-exported here, where hosts declaring tools look for them.
pub use crate::schema::{
    check_arguments, check_arguments_inline, check_schema, is_valid_schema, MAX_PATTERNS,
    MAX_PATTERN_BYTES, MAX_SCHEMA_DEPTH, MAX_SCHEMA_NODES, VALIDATION_BUDGET,
};
