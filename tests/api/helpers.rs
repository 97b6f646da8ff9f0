//! The test harness: `spawn_app()` runs the binary's own `Application::build`
//! on 127.0.0.1:0 with settings from a map (never the process environment),
//! and returns a `TestApp` with a method per route.

// Shared by every test module; no single one uses every helper.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::future::Future;
use std::time::{Duration, Instant};

use assistant_runtime::settings::Settings;
use assistant_runtime::startup::Application;
use reqwest::StatusCode;
use serde_json::{json, Value};

pub struct TestApp {
    pub address: String,
    pub port: u16,
    pub client: reqwest::Client,
}

pub async fn spawn_app() -> TestApp {
    spawn_app_with(&[]).await
}

/// Starts a server with these settings on top of the defaults (port 0, echo, memory).
pub async fn spawn_app_with(overrides: &[(&str, &str)]) -> TestApp {
    let mut values = BTreeMap::new();
    values.insert("SERVER__PORT".to_string(), "0".to_string());
    values.insert("SERVER__WORKERS".to_string(), "2".to_string());
    for (key, value) in overrides {
        values.insert(key.to_string(), value.to_string());
    }
    let settings = Settings::from_map(&values).expect("test settings are valid");
    let application = Application::build(settings)
        .await
        .expect("the test server starts");
    let port = application.port();
    actix_web::rt::spawn(application.run_until_stopped());
    TestApp {
        address: format!("http://127.0.0.1:{port}"),
        port,
        client: crate::helpers::http_client(),
    }
}

impl TestApp {
    pub async fn post_chat(&self, body: &Value) -> (StatusCode, Value) {
        self.post_json("/api/chat", body).await
    }

    pub async fn post_json(&self, path: &str, body: &Value) -> (StatusCode, Value) {
        let response = self
            .client
            .post(format!("{}{path}", self.address))
            .json(body)
            .send()
            .await
            .expect("request sent");
        read(response).await
    }

    pub async fn post_raw(
        &self,
        path: &str,
        body: impl Into<reqwest::Body>,
    ) -> (StatusCode, Value) {
        let response = self
            .client
            .post(format!("{}{path}", self.address))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .expect("request sent");
        read(response).await
    }

    pub async fn get(&self, path: &str) -> (StatusCode, Value) {
        let response = self
            .client
            .get(format!("{}{path}", self.address))
            .send()
            .await
            .expect("request sent");
        read(response).await
    }

    pub async fn patch_json(&self, path: &str, body: &Value) -> (StatusCode, Value) {
        let response = self
            .client
            .patch(format!("{}{path}", self.address))
            .json(body)
            .send()
            .await
            .expect("request sent");
        read(response).await
    }

    /// `PATCH /api/sessions/{id}/owner` with `{"owner_id": owner}`.
    pub async fn set_owner(&self, session_id: &str, owner: Option<&str>) -> (StatusCode, Value) {
        self.patch_json(
            &format!("/api/sessions/{session_id}/owner"),
            &serde_json::json!({ "owner_id": owner }),
        )
        .await
    }

    pub async fn delete(&self, path: &str) -> (StatusCode, Value) {
        let response = self
            .client
            .delete(format!("{}{path}", self.address))
            .send()
            .await
            .expect("request sent");
        read(response).await
    }

    /// A user message with optional host context.
    pub async fn say(
        &self,
        session_id: &str,
        id: &str,
        content: &str,
        host_context: Option<Value>,
    ) -> (StatusCode, Value) {
        let mut body = json!({"id": id, "session_id": session_id, "content": content});
        if let Some(context) = host_context {
            body["host_context"] = context;
        }
        self.post_chat(&body).await
    }

    /// A continuation answering `call_id`.
    pub async fn continue_call(
        &self,
        session_id: &str,
        id: &str,
        call_id: &str,
        result: Value,
    ) -> (StatusCode, Value) {
        self.post_chat(&json!({"id": id, "session_id": session_id, "content": "", "tool_call_id": call_id, "tool_result": result}))
            .await
    }

    pub async fn session(&self, session_id: &str) -> Value {
        self.get(&format!("/api/sessions/{session_id}")).await.1
    }

    pub async fn tree(&self, session_id: &str) -> Value {
        self.get(&format!("/api/sessions/{session_id}/tree"))
            .await
            .1
    }

    /// Waits until the session's turn is live.
    pub async fn wait_for_live_turn(&self, session_id: &str) {
        eventually(
            &format!("the turn of {session_id} to start"),
            move || async move { self.session(session_id).await["turn_running"] == true },
        )
        .await;
    }
}

/// How long `eventually` waits: a bound for a condition that never comes,
/// never a timing the test relies on.
const EVENTUALLY: Duration = Duration::from_secs(10);

/// Polls `done` until it holds, so a test orders its steps on what the
/// server did instead of on fixed sleeps; fails the test naming `what` if it
/// never holds.
pub async fn eventually<F: Future<Output = bool>>(what: &str, mut done: impl FnMut() -> F) {
    let deadline = Instant::now() + EVENTUALLY;
    while !done().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        actix_web::rt::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn read(response: reqwest::Response) -> (StatusCode, Value) {
    let status = response.status();
    let text = response.text().await.expect("body read");
    let value = serde_json::from_str(&text)
        .unwrap_or_else(|_| panic!("a JSON body, got {status}: {text:?}"));
    (status, value)
}

/// A host context declaring `select_issue` (and any extra actions).
pub fn tasks_context() -> Value {
    json!({
        "version": 1,
        "host": {"name": "web-dashboard", "kind": "browser", "version": "2.1"},
        "view": {"name": "tasks", "description": "The issue list.", "data": {"issues": [{"number": 42, "title": "Fix login"}]}},
        "actions": [
            {"name": "select_issue", "description": "Select an issue in the list.",
             "parameters": {"type": "object", "properties": {"number": {"type": "integer"}}, "required": ["number"]}},
            {"name": "open_tab", "description": "Open a tab.",
             "parameters": {"type": "object", "properties": {"tab": {"type": "string"}}, "required": ["tab"]}}
        ]
    })
}

impl TestApp {
    /// The raw body text of a GET, for byte-for-byte comparisons.
    pub async fn get_text(&self, path: &str) -> (StatusCode, String) {
        let response = self
            .client
            .get(format!("{}{path}", self.address))
            .send()
            .await
            .expect("request sent");
        let status = response.status();
        (status, response.text().await.expect("body read"))
    }

    /// A continuation answering `call_id` with `tool_outcome: "failed"`.
    pub async fn fail_call(
        &self,
        session_id: &str,
        id: &str,
        call_id: &str,
        result: Value,
    ) -> (StatusCode, Value) {
        self.post_chat(
            &json!({"id": id, "session_id": session_id, "content": "", "tool_call_id": call_id,
                               "tool_result": result, "tool_outcome": "failed"}),
        )
        .await
    }

    /// The stored record of one tool call, wherever it is in the session's tree.
    pub async fn tool_record(&self, session_id: &str, call_id: &str) -> Value {
        let records = tool_records(&self.tree(session_id).await, call_id);
        assert_eq!(
            records.len(),
            1,
            "exactly one record of {call_id}: {records:?}"
        );
        records[0].clone()
    }
}

/// Every stored record with this call id, across the messages of a tree.
pub fn tool_records(tree: &Value, call_id: &str) -> Vec<Value> {
    let mut found = Vec::new();
    for message in tree.as_array().expect("a tree is an array") {
        for segment in message["segments"].as_array().into_iter().flatten() {
            for tool in segment["tools"].as_array().into_iter().flatten() {
                if tool["id"] == call_id {
                    found.push(tool.clone());
                }
            }
        }
    }
    found
}

/// The call id of the response's pending host action.
pub fn pending_call_id(response: &Value) -> String {
    response["pending_tool_call"]["call_id"]
        .as_str()
        .unwrap_or_else(|| panic!("a pending_tool_call: {response}"))
        .to_string()
}

/// The names of the tools offered in a recorded OpenAI request body.
pub fn offered_tools(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|tool| tool["function"]["name"].as_str().map(str::to_string))
        .collect()
}

/// Settings pointing `openai:gpt-test` at a fake provider.
pub fn openai_settings(base_url: &str) -> Vec<(&'static str, String)> {
    vec![
        ("LLM__PRIMARY_MODEL", "openai:gpt-test".to_string()),
        ("OPENAI_BASE_URL", base_url.to_string()),
        ("OPENAI_API_KEY", "sk-test".to_string()),
    ]
}

/// `spawn_app_with` for owned values.
pub async fn spawn_app_owned(settings: &[(&str, String)]) -> TestApp {
    let borrowed: Vec<(&str, &str)> = settings
        .iter()
        .map(|(key, value)| (*key, value.as_str()))
        .collect();
    spawn_app_with(&borrowed).await
}

/// An HTTP client for the tests. reqwest is built with rustls but without a
/// bundled crypto provider, so ring is installed before any client is built.
pub fn http_client() -> reqwest::Client {
    http_client_builder().build().expect("test client builds")
}

pub fn http_client_builder() -> reqwest::ClientBuilder {
    actors::model::tls::install_crypto_provider();
    reqwest::Client::builder()
}
