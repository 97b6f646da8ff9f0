//! A small MCP server for the black-box tests, written with rmcp's server
//! side. `mcp_test_server` speaks stdio; `mcp_test_server --http ADDR` serves
//! streamable HTTP at `http://ADDR/mcp`. Its tools: `add` (a sum, with
//! structured content), `fail` (a tool error), `sleep` (answers after
//! `seconds`), `crash` (the process exits mid-call) and `pid` (which process
//! answered, to see a restart).

use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, ServerHandler, ServiceExt};
use serde_json::{json, Value};

#[derive(Clone)]
struct TestServer;

fn object(value: Value) -> serde_json::Map<String, Value> {
    match value {
        Value::Object(object) => object,
        _ => serde_json::Map::new(),
    }
}

fn tools() -> Vec<Tool> {
    let empty = json!({"type": "object", "properties": {}});
    vec![
        Tool::new(
            "add",
            "Add two integers.",
            object(
                json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}),
            ),
        ),
        Tool::new("fail", "Always fails.", object(empty.clone())),
        Tool::new(
            "sleep",
            "Answer after some seconds.",
            object(
                json!({"type": "object", "properties": {"seconds": {"type": "number"}}, "required": ["seconds"]}),
            ),
        ),
        Tool::new("crash", "Exit the server process.", object(empty.clone())),
        Tool::new("pid", "The server's process id.", object(empty)),
    ]
}

impl ServerHandler for TestServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = request.arguments.unwrap_or_default();
        let result = match request.name.as_ref() {
            "add" => {
                let a = arguments.get("a").and_then(Value::as_i64).unwrap_or(0);
                let b = arguments.get("b").and_then(Value::as_i64).unwrap_or(0);
                let mut result =
                    CallToolResult::success(vec![ContentBlock::text(format!("{}", a + b))]);
                result.structured_content = Some(json!({"sum": a + b}));
                result
            }
            "fail" => CallToolResult::error(vec![ContentBlock::text("it failed on purpose")]),
            "sleep" => {
                let seconds = arguments
                    .get("seconds")
                    .and_then(Value::as_f64)
                    .unwrap_or(0.0);
                tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
                CallToolResult::success(vec![ContentBlock::text("awake")])
            }
            "crash" => std::process::exit(3),
            "pid" => {
                CallToolResult::success(vec![ContentBlock::text(format!("{}", std::process::id()))])
            }
            other => return Err(ErrorData::invalid_params(format!("no tool {other}"), None)),
        };
        Ok(result.into())
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [flag, addr] if flag == "--http" => {
            let service: StreamableHttpService<TestServer, LocalSessionManager> =
                StreamableHttpService::new(
                    || Ok(TestServer),
                    Default::default(),
                    StreamableHttpServerConfig::default(),
                );
            let router = axum::Router::new().nest_service("/mcp", service);
            let listener = tokio::net::TcpListener::bind(addr.as_str()).await?;
            axum::serve(listener, router).await?;
        }
        _ => {
            let running = TestServer.serve(rmcp::transport::stdio()).await?;
            running.waiting().await?;
        }
    }
    Ok(())
}
