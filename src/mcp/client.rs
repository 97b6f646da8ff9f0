//! One MCP server connection (rmcp client) and its tools as runtime `Tool`s.
//! A call that times out or finds the server gone is a structured tool error
//! for the model; a dead connection is dropped, and the next call connects
//! again (for stdio: starts the process again).

use std::sync::Arc;
use std::time::Duration;

use actors::conversation::ToolCategory;
use actors::tools::{Tool, ToolContext, ToolError, ToolFuture, ToolResult};
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{RoleClient, RunningService, ServiceError, ServiceExt};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use serde_json::{json, Value};
use tokio::sync::Mutex;

use super::config::{McpServerConfig, McpTransport};

type Connection = RunningService<RoleClient, ()>;

/// A configured server and its current connection, if any.
pub struct McpServer {
    pub config: McpServerConfig,
    connection: Mutex<Option<Connection>>,
    call_timeout: Duration,
}

impl McpServer {
    pub fn new(config: McpServerConfig, call_timeout: Duration) -> McpServer {
        McpServer {
            config,
            connection: Mutex::new(None),
            call_timeout,
        }
    }

    /// Connects (or reconnects) and lists the server's tools.
    pub async fn list_tools(&self) -> Result<Vec<rmcp::model::Tool>, String> {
        let peer = self.peer().await?;
        match tokio::time::timeout(self.call_timeout, peer.list_all_tools()).await {
            Ok(Ok(tools)) => Ok(tools),
            Ok(Err(error)) => Err(format!("listing tools failed: {error}")),
            Err(_) => Err(format!(
                "listing tools took longer than {}s",
                self.call_timeout.as_secs()
            )),
        }
    }

    /// The live connection's peer; a closed or missing connection is
    /// replaced by a new one first.
    async fn peer(&self) -> Result<rmcp::service::Peer<RoleClient>, String> {
        let mut connection = self.connection.lock().await;
        if let Some(live) = connection.as_ref() {
            if !live.is_closed() && !live.peer().is_transport_closed() {
                return Ok(live.peer().clone());
            }
            log::warn!(
                "MCP server {:?}: connection closed; reconnecting",
                self.config.name
            );
        }
        *connection = None;
        let fresh = tokio::time::timeout(self.call_timeout, connect(&self.config))
            .await
            .map_err(|_| {
                format!(
                    "connecting took longer than {}s",
                    self.call_timeout.as_secs()
                )
            })??;
        let peer = fresh.peer().clone();
        *connection = Some(fresh);
        Ok(peer)
    }

    /// Drops the connection (killing a stdio child) so the next use starts over.
    async fn forget(&self) {
        if let Some(connection) = self.connection.lock().await.take() {
            let _ = connection.cancel().await;
        }
    }

    /// Calls `tool` (its name on the server) within `MCP__CALL_TIMEOUT_SECONDS`.
    pub async fn call(&self, tool: &str, arguments: Value) -> ToolResult {
        let peer = self.peer().await.map_err(|error| {
            ToolError::new(
                "server_unavailable",
                format!("MCP server {} is unavailable: {error}", self.config.name),
            )
        })?;
        let mut params = CallToolRequestParams::new(tool.to_string());
        params.arguments = match arguments {
            Value::Object(object) => Some(object),
            _ => None,
        };
        match tokio::time::timeout(self.call_timeout, peer.call_tool(params)).await {
            Ok(Ok(result)) => result_output(result),
            Ok(Err(ServiceError::McpError(error))) => Err(ToolError::new(
                "tool_error",
                format!(
                    "MCP server {} refused the call: {}",
                    self.config.name, error.message
                ),
            )),
            Ok(Err(error)) => {
                // The transport failed (a crashed process, a dropped HTTP
                // session): start over on the next use.
                self.forget().await;
                Err(ToolError::new(
                    "server_unavailable",
                    format!(
                        "MCP server {} failed during the call ({error}); it is restarted on the next call",
                        self.config.name
                    ),
                ))
            }
            Err(_) => Err(ToolError::new(
                "timeout",
                format!(
                    "MCP server {} did not answer within {}s",
                    self.config.name,
                    self.call_timeout.as_secs()
                ),
            )),
        }
    }
}

async fn connect(config: &McpServerConfig) -> Result<Connection, String> {
    match &config.transport {
        McpTransport::Stdio { command, args, env } => {
            let mut process = tokio::process::Command::new(command);
            process.args(args).envs(env).kill_on_drop(true);
            let (transport, _stderr) = TokioChildProcess::builder(process)
                .stderr(std::process::Stdio::inherit())
                .spawn()
                .map_err(|error| format!("cannot start {command:?}: {error}"))?;
            ().serve(transport)
                .await
                .map_err(|error| format!("initialisation failed: {error}"))
        }
        McpTransport::Http { url, headers } => {
            // rmcp's reqwest is built without a provider of its own; the
            // first caller installs ring (an error means one is installed).
            let _ = rustls::crypto::ring::default_provider().install_default();
            let mut custom = std::collections::HashMap::new();
            for (name, value) in headers {
                let name = reqwest::header::HeaderName::from_bytes(name.as_bytes())
                    .map_err(|_| format!("header {name:?} is not a valid name"))?;
                let value = reqwest::header::HeaderValue::from_str(value)
                    .map_err(|_| format!("header {name} has an invalid value"))?;
                custom.insert(name, value);
            }
            let transport_config =
                rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
                    url.as_str(),
                )
                .custom_headers(custom);
            ().serve(StreamableHttpClientTransport::from_config(transport_config))
                .await
                .map_err(|error| format!("initialisation failed: {error}"))
        }
    }
}

/// A tool result as the stored output: the text parts joined, plus the
/// structured content when the server gave one. `is_error` is a tool error.
fn result_output(result: CallToolResult) -> ToolResult {
    let text: Vec<&str> = result
        .content
        .iter()
        .filter_map(|block| block.as_text().map(|text| text.text.as_str()))
        .collect();
    let text = text.join("\n");
    if result.is_error == Some(true) {
        return Err(ToolError::new("tool_error", text));
    }
    let mut output = json!({"success": true, "content": text});
    if let Some(structured) = result.structured_content {
        output["structured_content"] = structured;
    }
    Ok(output)
}

/// One MCP tool offered to the model as `<server>_<tool>`.
pub struct McpTool {
    pub server: Arc<McpServer>,
    /// The tool's own name on its server.
    pub remote_name: String,
    /// `<server>_<tool>`.
    pub name: String,
    pub description: String,
    pub parameters: Value,
}

impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> Value {
        self.parameters.clone()
    }

    fn category(&self) -> ToolCategory {
        ToolCategory::Mcp
    }

    fn call(&self, arguments: Value, _context: ToolContext) -> ToolFuture {
        let server = self.server.clone();
        let remote_name = self.remote_name.clone();
        Box::pin(async move { server.call(&remote_name, arguments).await })
    }
}
