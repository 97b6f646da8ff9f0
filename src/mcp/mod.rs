//! MCP tools: servers from `MCP_CONFIG_PATH`, reached with the official Rust
//! SDK (`rmcp`) over stdio or streamable HTTP, connected at startup. Each
//! server's tools become backend tools named `<server>_<tool>` with category
//! `mcp`. A server that fails at startup is logged and reported (in `/health`
//! and `GET /api/debug/tools`) and does not stop the others.

pub mod client;
pub mod config;

use std::sync::Arc;
use std::time::Duration;

use actors::tools::{is_valid_schema, SharedTool};
use serde_json::{json, Value};

pub use client::{McpServer, McpTool};
pub use config::{McpServerConfig, McpTransport};

/// What startup got from the configured servers.
#[derive(Default)]
pub struct McpTools {
    pub tools: Vec<SharedTool>,
    /// One report per server, in name order (see `report`).
    pub servers: Vec<Value>,
}

/// Connects every server at once and lists its tools. A tool whose name is
/// in `reserved` (built-in, configured host and a Rust host's tools) is skipped.
pub async fn connect_all(
    configs: &[McpServerConfig],
    call_timeout: Duration,
    reserved: &[String],
) -> McpTools {
    let connected = futures_util::future::join_all(configs.iter().map(|config| async move {
        let server = Arc::new(McpServer::new(config.clone(), call_timeout));
        let listed = server.list_tools().await;
        (server, listed)
    }))
    .await;
    let mut result = McpTools::default();
    let mut taken: Vec<String> = reserved.to_vec();
    for (server, listed) in connected {
        let name = server.config.name.clone();
        let transport = server.config.transport_name();
        let listed = match listed {
            Ok(listed) => listed,
            Err(error) => {
                log::error!("MCP server {name:?} ({transport}) is unavailable: {error}");
                result
                    .servers
                    .push(report(&name, transport, Err(&error), &[]));
                continue;
            }
        };
        let mut offered = Vec::new();
        let mut skipped = Vec::new();
        for tool in listed {
            let full_name = format!("{name}_{}", tool.name);
            let parameters = Value::Object((*tool.input_schema).clone());
            let problem = if !actors::tool_name::is_valid(&full_name) {
                Some("the name is not 1 to 64 of A-Z, a-z, 0-9, _ and -")
            } else if taken.contains(&full_name) {
                Some("another tool has this name")
            } else if !is_valid_schema(&parameters) {
                Some("its input schema does not compile")
            } else {
                None
            };
            if let Some(problem) = problem {
                log::warn!("MCP tool {full_name:?} is not offered: {problem}");
                skipped.push(json!({"name": full_name, "reason": problem}));
                continue;
            }
            taken.push(full_name.clone());
            offered.push(full_name.clone());
            result.tools.push(SharedTool::new(McpTool {
                server: server.clone(),
                remote_name: tool.name.to_string(),
                name: full_name,
                description: tool.description.as_deref().unwrap_or("").to_string(),
                parameters,
            }));
        }
        log::info!("MCP server {name:?} ({transport}): {} tools", offered.len());
        let mut entry = report(&name, transport, Ok(()), &offered);
        if !skipped.is_empty() {
            entry["skipped_tools"] = Value::Array(skipped);
        }
        result.servers.push(entry);
    }
    result
}

/// `{"name", "transport", "connected", "tools", "error"}` for one server.
fn report(name: &str, transport: &str, outcome: Result<(), &str>, tools: &[String]) -> Value {
    json!({
        "name": name,
        "transport": transport,
        "connected": outcome.is_ok(),
        "tools": tools,
        "error": outcome.err(),
    })
}
