//! The tool registry (configured once at startup) and the `ToolSet` of one turn
//! (what the model is offered, given the host context, the screenshot and the
//! output mode).

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use serde::Serialize;
use serde_json::{json, Value};

use super::backend::BackendTool;
use super::custom::{SharedTool, ToolContext};
use crate::contract::{HostContext, OutputMode};
use crate::conversation::ToolCategory;
use crate::model::ToolSpec;

/// The structured "no host work" answer of a silent decision.
pub const HOLD_TOOL: &str = "hold";

/// A host tool from `TOOLS__HOST_TOOLS`: available every turn.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HostToolConfig {
    pub name: String,
    pub description: String,
    pub parameters: Arc<Value>,
}

#[derive(Clone, Debug, Default)]
pub struct ToolRegistry {
    pub host_tools: Vec<HostToolConfig>,
    /// View name → the backend tools offered on that view. Unlisted views
    /// (and turns without a view) get every backend tool.
    pub page_scopes: HashMap<String, Vec<String>>,
    /// Tool name → what its success invalidates on the host (echoed in tool_result).
    pub invalidations: HashMap<String, Vec<String>>,
    /// Backend tools supplied at startup (a Rust host's own, MCP servers'),
    /// offered after the built-in ones in this order.
    pub custom_tools: Vec<SharedTool>,
    /// What `GET /api/debug/tools` and `/health` say about MCP servers
    /// (a JSON array, one object per configured server).
    pub mcp_servers: Vec<Value>,
    /// Makes the per-turn context custom tools receive (embedding API).
    pub deps_factory: Option<DepsFactory>,
}

/// A turn's deps, as the host's factory made them (`ToolContext::deps`).
pub type TurnDeps = std::sync::Arc<dyn std::any::Any + Send + Sync>;

/// Makes a turn's tool deps from its session id: called once per accepted turn.
#[derive(Clone)]
pub struct DepsFactory(pub std::sync::Arc<dyn Fn(&str) -> TurnDeps + Send + Sync>);

impl std::fmt::Debug for DepsFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DepsFactory")
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum ToolKind {
    Backend(BackendTool),
    Custom(SharedTool),
    Host,
    Hold,
}

#[derive(Clone, Debug, PartialEq)]
pub struct OfferedTool {
    /// Borrowed for the built-in tools: a turn's tool set and each of its
    /// provider requests then copy no text for them.
    pub name: Cow<'static, str>,
    pub description: Cow<'static, str>,
    /// Shared with the host context or registry it came from: a turn's tool
    /// set and its provider requests copy no schema.
    pub parameters: Arc<Value>,
    pub kind: ToolKind,
}

impl OfferedTool {
    pub fn category(&self) -> ToolCategory {
        match &self.kind {
            ToolKind::Backend(_) => ToolCategory::Backend,
            ToolKind::Custom(tool) => tool.category(),
            ToolKind::Host | ToolKind::Hold => ToolCategory::Host,
        }
    }
}

/// The tools of one turn, in a fixed order (backend, configured host, context
/// actions) so the provider request is the same for the same inputs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ToolSet {
    tools: Vec<OfferedTool>,
}

impl ToolSet {
    pub fn find(&self, name: &str) -> Option<&OfferedTool> {
        self.tools.iter().find(|tool| tool.name == name)
    }

    pub fn tools(&self) -> &[OfferedTool] {
        &self.tools
    }

    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools
            .iter()
            .map(|tool| ToolSpec {
                name: tool.name.clone(),
                description: tool.description.clone(),
                parameters: tool.parameters.clone(),
            })
            .collect()
    }
}

impl ToolRegistry {
    /// The tools for a turn. `has_screenshot` offers `look_at_screen`.
    pub fn tool_set(
        &self,
        context: Option<&HostContext>,
        has_screenshot: bool,
        output_mode: OutputMode,
    ) -> ToolSet {
        let mut tools = Vec::new();
        if output_mode == OutputMode::HostTools {
            push_context_actions(&mut tools, context, |name| name == HOLD_TOOL);
            tools.push(hold_tool());
            return ToolSet { tools };
        }
        let view_name = context
            .and_then(|context| context.view.as_ref())
            .map(|view| view.name.as_str());
        let scope = view_name.and_then(|name| self.page_scopes.get(name));
        for backend in BackendTool::ALL {
            if backend == BackendTool::LookAtScreen && !has_screenshot {
                continue;
            }
            if let Some(allowed) = scope {
                if !allowed.iter().any(|name| name == backend.name()) {
                    continue;
                }
            }
            tools.push(OfferedTool {
                name: Cow::Borrowed(backend.name()),
                description: Cow::Borrowed(backend.description()),
                parameters: backend.parameters(),
                kind: ToolKind::Backend(backend),
            });
        }
        for tool in &self.custom_tools {
            if let Some(allowed) = scope {
                if !allowed.iter().any(|name| name == tool.name()) {
                    continue;
                }
            }
            tools.push(OfferedTool {
                name: Cow::Owned(tool.name().to_string()),
                description: Cow::Owned(tool.description().to_string()),
                parameters: Arc::new(tool.parameters()),
                kind: ToolKind::Custom(tool.clone()),
            });
        }
        for host_tool in &self.host_tools {
            tools.push(OfferedTool {
                name: Cow::Owned(host_tool.name.clone()),
                description: Cow::Owned(host_tool.description.clone()),
                parameters: host_tool.parameters.clone(),
                kind: ToolKind::Host,
            });
        }
        if context.is_none_or(|context| context.actions.is_empty()) {
            return ToolSet { tools };
        }
        let taken = |name: &str| {
            BackendTool::from_name(name).is_some()
                || self.custom_tools.iter().any(|tool| tool.name() == name)
                || self.host_tools.iter().any(|tool| tool.name == name)
        };
        push_context_actions(&mut tools, context, taken);
        ToolSet { tools }
    }

    /// What `GET /api/debug/tools` shows.
    pub fn describe(&self) -> Value {
        json!({
            "backend_tools": BackendTool::ALL.iter().map(|tool| json!({
                "name": tool.name(),
                "description": tool.description(),
                "parameters": tool.parameters(),
            })).collect::<Vec<_>>(),
            "custom_tools": self.custom_tools.iter().map(|tool| json!({
                "name": tool.name(),
                "description": tool.description(),
                "parameters": tool.parameters(),
                "category": tool.category(),
            })).collect::<Vec<_>>(),
            "mcp_servers": self.mcp_servers,
            "host_tools": self.host_tools,
            "page_scopes": self.page_scopes,
            "invalidations": self.invalidations,
        })
    }
}

impl ToolRegistry {
    /// The context custom tools get in a turn of `session_id`.
    pub fn tool_context(&self, session_id: &str) -> ToolContext {
        ToolContext {
            session_id: session_id.to_string(),
            deps: self
                .deps_factory
                .as_ref()
                .map(|factory| (factory.0)(session_id)),
        }
    }
}

fn push_context_actions(
    tools: &mut Vec<OfferedTool>,
    context: Option<&HostContext>,
    taken: impl Fn(&str) -> bool,
) {
    let Some(context) = context else { return };
    for action in &context.actions {
        if taken(&action.name) {
            log::warn!(
                "host action {:?} collides with a registered tool and is ignored",
                action.name
            );
            continue;
        }
        tools.push(OfferedTool {
            name: Cow::Owned(action.name.clone()),
            description: Cow::Owned(action.description.clone()),
            parameters: action.parameters.clone(),
            kind: ToolKind::Host,
        });
    }
}

fn hold_tool() -> OfferedTool {
    OfferedTool {
        name: Cow::Borrowed(HOLD_TOOL),
        description: Cow::Borrowed("Decide that no host action is needed now."),
        parameters: Arc::new(
            json!({"type": "object", "properties": {"reason": {"type": "string"}}, "additionalProperties": false}),
        ),
        kind: ToolKind::Hold,
    }
}
