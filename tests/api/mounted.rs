//! `examples/mounted_host.rs`, built and run as its own process: a host's
//! actix-web app with its own route and middleware, and the assistant
//! mounted under `/assistant` with a typed tool, typed state and an
//! authenticate hook. HTTP, Socket.IO (the stock python-socketio client at
//! `/assistant/socket.io/`), the playground and OpenAPI follow the prefix.

use std::path::Path;

use serde_json::{json, Value};

use crate::helpers::TestApp;
use crate::process::{example_binary, ServerProcess};
use crate::socketio_helpers::{run_scenario, Client};

async fn mounted_host() -> ServerProcess {
    let binary = example_binary("mounted_host");
    ServerProcess::start_with(Path::new(&binary), true, &[]).await
}

async fn chat(app: &TestApp, token: Option<&str>, body: Value) -> (u16, Value) {
    let mut request = app
        .client
        .post(format!("{}/assistant/api/chat", app.address))
        .json(&body);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.expect("request");
    let status = response.status().as_u16();
    let body = response.json().await.unwrap_or(Value::Null);
    (status, body)
}

/// The tool records of the session's active path, read under the prefix.
async fn tool_outputs(app: &TestApp, session_id: &str) -> Vec<Value> {
    let response = app
        .client
        .get(format!(
            "{}/assistant/api/sessions/{session_id}/messages",
            app.address
        ))
        .bearer_auth("demo-token")
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), 200);
    let messages: Value = response.json().await.expect("json");
    messages
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .flat_map(|message| message["segments"].as_array().cloned().unwrap_or_default())
        .filter(|segment| segment["kind"] == "tool_group")
        .flat_map(|segment| segment["tools"].as_array().cloned().unwrap_or_default())
        .map(|tool| tool["output"].clone())
        .collect()
}

#[actix_web::test]
async fn the_hosts_own_route_and_middleware_answer_beside_the_assistant() {
    let server = mounted_host().await;
    let response = reqwest::get(format!("{}/orders/A-17", server.app.address))
        .await
        .expect("request");
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-served-by"], "mounted-host");
    let order: Value = response.json().await.expect("json");
    assert_eq!(order, json!({"order_id": "A-17", "status": "shipped"}));
    // The host's middleware wraps the assistant's answers too.
    let health = reqwest::get(format!("{}/assistant/livez", server.app.address))
        .await
        .expect("request");
    assert_eq!(health.status(), 200);
    assert_eq!(health.headers()["x-served-by"], "mounted-host");
    // A path of neither is the assistant's JSON 404 only under its prefix.
    let missing = reqwest::get(format!("{}/assistant/nope", server.app.address))
        .await
        .expect("request");
    assert_eq!(missing.status(), 404);
    let body: Value = missing.json().await.expect("json");
    assert_eq!(body["type"], "not_found");
}

#[actix_web::test]
async fn the_mounted_chat_needs_the_hooks_token_and_runs_the_typed_tool() {
    let server = mounted_host().await;
    let app = &server.app;
    let body = json!({"id": "m1", "session_id": "mounted-1",
                      "content": "call order_status {\"order_id\": \"A-17\"}"});
    for token in [None, Some("wrong")] {
        let (status, refused) = chat(app, token, body.clone()).await;
        assert_eq!(status, 401, "{token:?}: {refused}");
        assert_eq!(refused["type"], "unauthorized", "{refused}");
    }
    let (status, reply) = chat(app, Some("demo-token"), body).await;
    assert_eq!(status, 200, "{reply}: {}", server.log_text());
    assert_eq!(
        tool_outputs(app, "mounted-1").await,
        vec![
            json!({"order_id": "A-17", "status": "shipped", "shop": "Demo Shop", "success": true})
        ]
    );

    // The typed error becomes the result's error and error_code.
    let (status, reply) = chat(
        app,
        Some("demo-token"),
        json!({"id": "m2", "session_id": "mounted-1",
               "content": "call order_status {\"order_id\": \"Z-9\"}"}),
    )
    .await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(
        tool_outputs(app, "mounted-1").await.pop(),
        Some(json!({"success": false, "error": "no order Z-9", "error_code": "not_found"}))
    );
}

#[actix_web::test]
async fn invalid_typed_arguments_are_a_tool_error_naming_the_field() {
    let server = mounted_host().await;
    let app = &server.app;
    for (id, arguments) in [("m1", "{\"order_id\": 5}"), ("m2", "{}")] {
        let (status, reply) = chat(
            app,
            Some("demo-token"),
            json!({"id": id, "session_id": "mounted-bad",
                   "content": format!("call order_status {arguments}")}),
        )
        .await;
        assert_eq!(status, 200, "{reply}");
        let output = tool_outputs(app, "mounted-bad")
            .await
            .pop()
            .expect("output");
        assert_eq!(output["success"], false, "{output}");
        assert_eq!(output["error_code"], "invalid_arguments", "{output}");
        assert!(
            output["error"]
                .as_str()
                .is_some_and(|error| error.contains("order_id")),
            "{arguments}: {output}"
        );
    }
}

#[actix_web::test]
async fn socket_io_under_the_prefix_streams_a_turn_with_python_socketio() {
    let server = mounted_host().await;
    let session = "mounted-socket";
    let message = json!({"id": "s1", "session_id": session,
                         "content": "call order_status {\"order_id\": \"A-17\"}"});
    let scenario = |headers: Value| {
        json!({
            "socketio_path": "assistant/socket.io",
            "headers": headers,
            "query": {"session_id": session},
            "steps": [
                {"call": "assistant_message", "data": message},
                {"wait": "assistant:status", "count": 1, "match": {"status": "completed"}},
            ],
        })
    };
    let run = run_scenario(
        Client::Python,
        server.app.address.clone(),
        "default",
        scenario(json!({"Authorization": "Bearer demo-token"})),
    )
    .await;
    assert_eq!(run["connected"], true, "{run}: {}", server.log_text());
    // Upgraded inside the host's own HttpServer (the dispatcher's websocket).
    assert_eq!(run["transport"], "websocket", "{run}");
    let events: Vec<&str> = run["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter_map(|event| event["event"].as_str())
        .collect();
    for expected in [
        "assistant:tool_call",
        "assistant:tool_result",
        "assistant:final_response",
    ] {
        assert!(events.contains(&expected), "{expected}: {run}");
    }
    let result = run["events"]
        .as_array()
        .expect("events")
        .iter()
        .find(|event| event["event"] == "assistant:tool_result")
        .expect("a tool result");
    assert_eq!(result["data"]["tool_name"], "order_status", "{result}");

    // Without the token the namespace refuses the connection.
    let refused = run_scenario(
        Client::Python,
        server.app.address.clone(),
        "default",
        scenario(json!({})),
    )
    .await;
    assert_eq!(refused["connected"], false, "{refused}");
}

#[actix_web::test]
async fn the_playground_and_openapi_follow_the_prefix() {
    let server = mounted_host().await;
    let page = reqwest::get(format!("{}/assistant/", server.app.address))
        .await
        .expect("request")
        .text()
        .await
        .expect("text");
    assert!(
        page.contains("/assistant/playground/app.js"),
        "the page loads its script under the prefix: {page}"
    );
    assert!(
        page.contains("\"/assistant\""),
        "the prefix reaches app.js: {page}"
    );
    let script = reqwest::get(format!(
        "{}/assistant/playground/app.js",
        server.app.address
    ))
    .await
    .expect("request");
    assert_eq!(script.status(), 200);
    let document: Value = reqwest::get(format!("{}/assistant/openapi.json", server.app.address))
        .await
        .expect("request")
        .json()
        .await
        .expect("json");
    assert_eq!(document["servers"], json!([{"url": "/assistant"}]));
    let docs = reqwest::get(format!("{}/assistant/docs", server.app.address))
        .await
        .expect("request")
        .text()
        .await
        .expect("text");
    assert!(docs.contains("\"/assistant/openapi.json\""), "{docs}");
}
