//! Tools the runtime does not know at compile time: a Rust host's own backend
//! tools (the embedding API) and MCP servers' tools. Both implement `Tool`;
//! the turn runs them like the built-in backend tools (same schema check,
//! duration and error shape), awaiting their future.

use std::any::Any;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::{json, Value};

use crate::conversation::ToolCategory;

/// What a tool call gives back: an output the model reads, or an error.
pub type ToolResult = Result<Value, ToolError>;

/// The future of one call. Boxed so `Tool` stays object safe without a macro crate.
pub type ToolFuture = Pin<Box<dyn Future<Output = ToolResult> + Send>>;

/// A failed call, shown to the model as `{"success": false, "error", "error_code"}`
/// like a built-in tool's failure; never a failed turn.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolError {
    pub message: String,
    /// A machine word, e.g. `timeout`, `server_unavailable`, `tool_error`.
    pub code: String,
}

impl ToolError {
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> ToolError {
        ToolError {
            message: message.into(),
            code: code.into(),
        }
    }

    /// The stored output of the failed call.
    pub fn to_output(&self) -> Value {
        json!({"success": false, "error": self.message, "error_code": self.code})
    }
}

/// What a call knows about where it runs.
#[derive(Clone, Default)]
pub struct ToolContext {
    pub session_id: String,
    /// What the host's deps factory made for this turn (embedding API), if any.
    pub deps: Option<Arc<dyn Any + Send + Sync>>,
}

impl ToolContext {
    /// The turn's deps as the host's own type.
    pub fn deps<T: Any + Send + Sync>(&self) -> Option<&T> {
        self.deps.as_deref().and_then(|deps| deps.downcast_ref())
    }
}

impl fmt::Debug for ToolContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolContext")
            .field("session_id", &self.session_id)
            .field("deps", &self.deps.is_some())
            .finish()
    }
}

/// A backend tool supplied at startup.
pub trait Tool: Send + Sync + 'static {
    fn name(&self) -> &str;
    fn description(&self) -> &str;
    /// The JSON schema of the arguments; calls are checked against it first.
    fn parameters(&self) -> Value;
    /// What a successful call invalidates on the host (echoed in `tool_result`).
    fn invalidates(&self) -> Vec<String> {
        Vec::new()
    }
    /// `backend` for a host's own tools; MCP tools say `mcp`.
    fn category(&self) -> ToolCategory {
        ToolCategory::Backend
    }
    /// Runs the call with arguments that passed the schema check.
    fn call(&self, arguments: Value, context: ToolContext) -> ToolFuture;
}

/// A shared `Tool`, comparable by identity so tool sets stay `PartialEq`.
#[derive(Clone)]
pub struct SharedTool(pub Arc<dyn Tool>);

impl SharedTool {
    pub fn new(tool: impl Tool) -> SharedTool {
        SharedTool(Arc::new(tool))
    }
}

impl std::ops::Deref for SharedTool {
    type Target = dyn Tool;
    fn deref(&self) -> &dyn Tool {
        self.0.as_ref()
    }
}

impl PartialEq for SharedTool {
    fn eq(&self, other: &SharedTool) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl fmt::Debug for SharedTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Tool({})", self.0.name())
    }
}

/// The output stored for a call's result: a successful object gains
/// `"success": true` unless it says otherwise; any other value is wrapped as
/// `{"success": true, "result": value}`, so every backend output has one shape.
pub fn success_output(value: Value) -> Value {
    match value {
        Value::Object(mut object) => {
            object
                .entry("success".to_string())
                .or_insert(Value::Bool(true));
            Value::Object(object)
        }
        other => json!({"success": true, "result": other}),
    }
}
