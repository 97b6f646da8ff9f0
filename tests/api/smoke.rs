//! The first things a host developer tries: health, one echo turn, one host action.

use serde_json::json;

use crate::helpers::{spawn_app, tasks_context};

#[actix_web::test]
async fn health_is_ok_on_echo_with_memory() {
    let app = spawn_app().await;
    let (status, body) = app.get("/health").await;
    assert_eq!(status, 200);
    assert_eq!(body["runtime"], "assistant-runtime");
    assert_eq!(body["healthy"], true);
}

#[actix_web::test]
async fn one_host_action_round_trip() {
    let app = spawn_app().await;
    let (status, first) = app
        .say(
            "smoke",
            "m1",
            "call select_issue {\"number\": 42}",
            Some(tasks_context()),
        )
        .await;
    assert_eq!(status, 200, "{first}");
    let pending = &first["pending_tool_call"];
    assert_eq!(pending["tool_name"], "select_issue");
    assert_eq!(pending["arguments"], json!({"number": 42}));
    let call_id = pending["call_id"].as_str().unwrap().to_string();
    let info = app.session("smoke").await;
    assert_eq!(info["pending_action"]["tool_call_id"], call_id);
    let (status, resumed) = app
        .continue_call("smoke", "m2", &call_id, json!({"selected": 42}))
        .await;
    assert_eq!(status, 200, "{resumed}");
    assert_eq!(resumed["message_id"], first["message_id"]);
    assert!(resumed["content"]
        .as_str()
        .unwrap()
        .contains("select_issue"));
    assert!(app.session("smoke").await["pending_action"].is_null());
}
