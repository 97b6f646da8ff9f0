//! MCP tools against real MCP servers (`tests/mcp_server/server.rs`, built
//! with rmcp's server side) over stdio and streamable HTTP: listing, calls,
//! tool errors, timeouts, a crash and restart, a server that fails at
//! startup, page scopes, and exclusion from silent decisions.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::fake_provider::{FakeProvider, Script};
use crate::helpers::{offered_tools, openai_settings, spawn_app_owned, tasks_context, TestApp};
use crate::process::{example_binary, scratch_dir};

fn test_server() -> PathBuf {
    example_binary("mcp_test_server")
}

/// Writes an `mcpServers` file and returns its path.
fn mcp_config(servers: Value) -> String {
    let path = scratch_dir("ar_mcp").join("mcp_servers.json");
    std::fs::write(&path, json!({"mcpServers": servers}).to_string()).expect("write config");
    path.display().to_string()
}

fn stdio_server() -> Value {
    json!({"command": test_server().display().to_string()})
}

async fn app_with_mcp(servers: Value, extra: &[(&'static str, &str)]) -> TestApp {
    let mut settings = vec![("MCP_CONFIG_PATH", mcp_config(servers))];
    for (key, value) in extra {
        settings.push((key, value.to_string()));
    }
    spawn_app_owned(&settings).await
}

/// Every tool record of the session's active path, in order.
async fn tool_records(app: &TestApp, session_id: &str) -> Vec<Value> {
    let (status, messages) = app
        .get(&format!("/api/sessions/{session_id}/messages"))
        .await;
    assert_eq!(status, 200, "{messages}");
    messages
        .as_array()
        .or_else(|| messages["messages"].as_array())
        .expect("messages")
        .iter()
        .flat_map(|message| message["segments"].as_array().cloned().unwrap_or_default())
        .filter(|segment| segment["kind"] == "tool_group")
        .flat_map(|segment| segment["tools"].as_array().cloned().unwrap_or_default())
        .collect()
}

/// One echo turn calling `tool` with `arguments`; the call's record.
async fn call(app: &TestApp, session_id: &str, id: &str, tool: &str, arguments: Value) -> Value {
    let (status, reply) = app
        .say(session_id, id, &format!("call {tool} {arguments}"), None)
        .await;
    assert_eq!(status, 200, "a tool failure never fails the turn: {reply}");
    tool_records(app, session_id)
        .await
        .pop()
        .expect("a tool record")
}

#[actix_web::test]
async fn stdio_tools_are_listed_as_server_tool_and_called_with_category_mcp() {
    let app = app_with_mcp(json!({"tests": stdio_server()}), &[]).await;
    let (status, tools) = app.get("/api/debug/tools").await;
    assert_eq!(status, 200);
    let names: Vec<&str> = tools["custom_tools"]
        .as_array()
        .expect("custom_tools")
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "tests_add",
            "tests_fail",
            "tests_sleep",
            "tests_crash",
            "tests_pid"
        ]
    );
    assert!(tools["custom_tools"]
        .as_array()
        .unwrap()
        .iter()
        .all(|tool| tool["category"] == "mcp"));
    assert_eq!(tools["mcp_servers"][0]["name"], "tests");
    assert_eq!(tools["mcp_servers"][0]["transport"], "stdio");
    assert_eq!(tools["mcp_servers"][0]["connected"], true);
    let (status, health) = app.get("/health").await;
    assert_eq!(status, 200, "{health}");
    assert_eq!(health["components"]["mcp"]["healthy"], true);

    let record = call(&app, "mcp-call", "m1", "tests_add", json!({"a": 2, "b": 3})).await;
    assert_eq!(record["name"], "tests_add");
    assert_eq!(record["category"], "mcp");
    assert_eq!(
        record["output"],
        json!({"success": true, "content": "5", "structured_content": {"sum": 5}})
    );

    // The same schema check as built-in tools: a bad argument is sent back.
    let record = call(&app, "mcp-call", "m2", "tests_add", json!({"a": "two"})).await;
    assert_eq!(
        record["output"]["error_code"], "invalid_arguments",
        "{record}"
    );
}

#[actix_web::test]
async fn a_tool_error_and_a_timeout_are_structured_tool_errors() {
    let app = app_with_mcp(
        json!({"tests": stdio_server()}),
        &[("MCP__CALL_TIMEOUT_SECONDS", "1")],
    )
    .await;
    let record = call(&app, "mcp-errors", "m1", "tests_fail", json!({})).await;
    assert_eq!(
        record["output"],
        json!({"success": false, "error": "it failed on purpose", "error_code": "tool_error"})
    );
    assert_eq!(record["outcome"], "failed");

    let record = call(
        &app,
        "mcp-errors",
        "m2",
        "tests_sleep",
        json!({"seconds": 30}),
    )
    .await;
    assert_eq!(record["output"]["success"], false, "{record}");
    assert_eq!(record["output"]["error_code"], "timeout", "{record}");

    // The server is still there for the next call.
    let record = call(
        &app,
        "mcp-errors",
        "m3",
        "tests_add",
        json!({"a": 1, "b": 1}),
    )
    .await;
    assert_eq!(record["output"]["content"], "2", "{record}");
}

#[actix_web::test]
async fn a_crashed_stdio_server_is_a_tool_error_and_restarts_on_next_use() {
    let app = app_with_mcp(json!({"tests": stdio_server()}), &[]).await;
    let first = call(&app, "mcp-crash", "m1", "tests_pid", json!({})).await;
    let first_pid = first["output"]["content"]
        .as_str()
        .expect("a pid")
        .to_string();

    let crashed = call(&app, "mcp-crash", "m2", "tests_crash", json!({})).await;
    assert_eq!(crashed["output"]["success"], false, "{crashed}");
    assert_eq!(
        crashed["output"]["error_code"], "server_unavailable",
        "{crashed}"
    );

    let again = call(&app, "mcp-crash", "m3", "tests_pid", json!({})).await;
    let second_pid = again["output"]["content"].as_str().expect("a pid");
    assert_ne!(first_pid, second_pid, "a new process answered");
}

/// The test server over streamable HTTP, killed on drop.
struct HttpServer {
    child: Child,
    url: String,
}

impl HttpServer {
    fn start() -> HttpServer {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("a free port")
            .port();
        let child = Command::new(test_server())
            .args(["--http", &format!("127.0.0.1:{port}")])
            .stdout(Stdio::null())
            .spawn()
            .expect("start the HTTP MCP server");
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "the HTTP MCP server did not listen"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        HttpServer {
            child,
            url: format!("http://127.0.0.1:{port}/mcp"),
        }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[actix_web::test]
async fn streamable_http_tools_are_listed_and_called() {
    let server = HttpServer::start();
    let app = app_with_mcp(json!({"remote": {"url": server.url}}), &[]).await;
    let (_, tools) = app.get("/api/debug/tools").await;
    assert_eq!(tools["mcp_servers"][0]["transport"], "streamable_http");
    assert_eq!(tools["mcp_servers"][0]["connected"], true, "{tools}");
    let record = call(
        &app,
        "mcp-http",
        "m1",
        "remote_add",
        json!({"a": 20, "b": 22}),
    )
    .await;
    assert_eq!(record["category"], "mcp");
    assert_eq!(record["output"]["content"], "42", "{record}");
    let record = call(&app, "mcp-http", "m2", "remote_fail", json!({})).await;
    assert_eq!(record["output"]["error_code"], "tool_error", "{record}");
}

#[actix_web::test]
async fn a_server_that_fails_at_startup_is_reported_and_the_others_work() {
    let app = app_with_mcp(
        json!({
            "broken": {"command": "/nonexistent/mcp-server"},
            "tests": stdio_server(),
        }),
        &[(
            "TOOLS__HOST_TOOLS",
            r#"{"tests_pid": {"description": "The host's own.", "parameters": {"type": "object"}}}"#,
        )],
    )
    .await;
    let (status, health) = app.get("/health").await;
    assert_eq!(
        status, 200,
        "a failed MCP server does not stop turns: {health}"
    );
    let mcp = &health["components"]["mcp"];
    assert_eq!(mcp["healthy"], false);
    assert_eq!(mcp["servers"][0]["name"], "broken");
    assert_eq!(mcp["servers"][0]["connected"], false);
    assert!(mcp["servers"][0]["error"]
        .as_str()
        .unwrap()
        .contains("/nonexistent/mcp-server"));
    let (_, tools) = app.get("/api/debug/tools").await;
    assert_eq!(tools["mcp_servers"][0]["connected"], false);
    // A configured host tool keeps its name; the MCP tool is skipped.
    assert_eq!(
        tools["mcp_servers"][1]["skipped_tools"][0]["name"], "tests_pid",
        "{tools}"
    );
    let record = call(
        &app,
        "mcp-partial",
        "m1",
        "tests_add",
        json!({"a": 1, "b": 2}),
    )
    .await;
    assert_eq!(record["output"]["content"], "3", "{record}");
}

#[actix_web::test]
async fn page_scopes_name_mcp_tools_and_silent_decisions_exclude_them() {
    let fake = FakeProvider::start();
    let mut settings = openai_settings(&fake.base_url_openai());
    settings.push((
        "MCP_CONFIG_PATH",
        mcp_config(json!({"tests": stdio_server()})),
    ));
    settings.push((
        "TOOLS__PAGE_SCOPES",
        r#"{"tasks":["tests_add"]}"#.to_string(),
    ));
    let app = spawn_app_owned(&settings).await;

    fake.push(Script::openai_text(&["ok"]));
    let (status, reply) = app.say("scoped", "m1", "hi", Some(tasks_context())).await;
    assert_eq!(status, 200, "{reply}");
    let mut other_view = tasks_context();
    other_view["view"]["name"] = json!("agents");
    fake.push(Script::openai_text(&["ok"]));
    let (status, reply) = app.say("open", "m1", "hi", Some(other_view)).await;
    assert_eq!(status, 200, "{reply}");
    fake.push(Script::openai_tool_calls(&[("call_h", "hold", "{}")]));
    let silent = json!({"id": "d1", "session_id": "silent", "content": "decide",
        "output_mode": "host_tools", "host_context": tasks_context()});
    let (status, reply) = app.post_chat(&silent).await;
    assert_eq!(status, 200, "{reply}");

    let requests = fake.requests();
    assert_eq!(
        offered_tools(&requests[0].body),
        ["tests_add", "select_issue", "open_tab"],
        "the tasks view is scoped to tests_add"
    );
    let open = offered_tools(&requests[1].body);
    for name in ["get_time", "tests_add", "tests_pid", "select_issue"] {
        assert!(open.iter().any(|offered| offered == name), "{open:?}");
    }
    let silent = offered_tools(&requests[2].body);
    assert!(
        silent.iter().all(|name| !name.starts_with("tests_")),
        "no MCP tool in a silent decision: {silent:?}"
    );
}

#[actix_web::test]
async fn cancelling_a_turn_interrupts_a_running_mcp_call() {
    let app = app_with_mcp(
        json!({"tests": stdio_server()}),
        &[("MCP__CALL_TIMEOUT_SECONDS", "120")],
    )
    .await;
    let turn = app.say(
        "mcp-cancel",
        "m1",
        "call tests_sleep {\"seconds\": 100}",
        None,
    );
    let canceller = async {
        for _ in 0..500 {
            if app.session("mcp-cancel").await["turn_running"] == true {
                break;
            }
            actix_web::rt::time::sleep(Duration::from_millis(20)).await;
        }
        app.post_json("/api/chat/mcp-cancel/cancel", &json!({}))
            .await
    };
    let ((_, reply), (status, cancel)) = futures_util::join!(turn, canceller);
    assert_eq!(status, 200, "{cancel}");
    assert_eq!(cancel["cancel_requested"], true, "{cancel}");
    let records = tool_records(&app, "mcp-cancel").await;
    let record = records.last().expect("a record");
    assert_eq!(record["name"], "tests_sleep", "{reply}");
    assert_eq!(record["status"], "cancelled", "{record}");
}
