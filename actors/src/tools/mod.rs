//! Tools: the backend tools the runtime runs itself, the host tools the host
//! runs (configured ones and the actions a host context declares), and the
//! per-turn `ToolSet` the model is offered. Arguments are checked against each
//! tool's JSON schema before anything runs them.

mod backend;
mod registry;
mod schema;

pub use backend::{BackendOutput, BackendTool};
pub use registry::{HostToolConfig, OfferedTool, ToolKind, ToolRegistry, ToolSet, HOLD_TOOL};
pub use schema::{
    check_arguments, check_schema, is_valid_schema, MAX_PATTERNS, MAX_PATTERN_BYTES,
    MAX_SCHEMA_DEPTH, MAX_SCHEMA_NODES, VALIDATION_BUDGET,
};
