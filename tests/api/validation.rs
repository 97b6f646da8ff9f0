//! Bad input: every invalid body of the contract table and the HTTP-level
//! mistakes answer a JSON error (never HTML, never a 500) and change nothing
//! stored.

use serde_json::{json, Value};

use crate::helpers::{spawn_app, spawn_app_with, tasks_context, TestApp};

/// Posts one bad body and checks the 422 names `path`.
async fn check(app: &TestApp, body: &Value, path: &str, label: &str) {
    let (status, answer) = app.post_chat(body).await;
    assert_eq!(status, 422, "{label}: {answer}");
    assert_eq!(answer["type"], "validation", "{label}: {answer}");
    let sentence = answer["error"].as_str().unwrap_or_default();
    assert!(
        sentence.starts_with(&format!("{path}: ")),
        "{label}: {sentence:?} should name {path}"
    );
}

/// What a host can read back about a session, byte for byte.
async fn stored_state(app: &TestApp, session_id: &str) -> (String, String) {
    let (status, info) = app.get_text(&format!("/api/sessions/{session_id}")).await;
    assert_eq!(status, 200, "{info}");
    let (status, tree) = app
        .get_text(&format!("/api/sessions/{session_id}/tree"))
        .await;
    assert_eq!(status, 200, "{tree}");
    (info, tree)
}

#[actix_web::test]
async fn every_invalid_body_is_a_422_naming_its_path_and_changes_nothing() {
    let app = spawn_app().await;
    let (status, first) = app
        .say("s-table", "m-setup", "say hello", Some(tasks_context()))
        .await;
    assert_eq!(status, 200, "{first}");
    let before = stored_state(&app, "s-table").await;
    let info: Value = serde_json::from_str(&before.0).unwrap();
    assert_eq!(info["turn_number"], 1);
    assert_eq!(info["message_count"], 2);
    assert!(info["host_context"]["view"]["name"] == "tasks", "{info}");
    let cases = actors::contract::cases::invalid_body_cases();
    assert!(cases.len() > 100, "the table has {} cases", cases.len());
    for (body, path, label) in &cases {
        check(&app, body, path, label).await;
    }
    assert_eq!(stored_state(&app, "s-table").await, before);
}

#[actix_web::test]
async fn a_body_that_is_not_json_names_body() {
    let app = spawn_app().await;
    let (status, answer) = app.post_raw("/api/chat", "{not json").await;
    assert_eq!(status, 422, "{answer}");
    assert_eq!(answer["type"], "validation");
    assert!(
        answer["error"].as_str().unwrap().starts_with("body: "),
        "{answer}"
    );
}

#[actix_web::test]
async fn a_body_over_the_server_limit_is_a_413_in_json() {
    let app = spawn_app_with(&[("SERVER__MAX_BODY_BYTES", "1024")]).await;
    let body = json!({"id": "m1", "session_id": "big", "content": "x".repeat(4096)});
    let (status, answer) = app.post_chat(&body).await;
    assert_eq!(status, 413, "{answer}");
    assert!(
        answer["error"].as_str().unwrap().contains("1024"),
        "{answer}"
    );
    assert!(answer["type"].is_string(), "{answer}");
    assert_eq!(app.get("/api/sessions/big").await.0, 404);
}

#[actix_web::test]
async fn steering_over_http_is_a_422_naming_message_type() {
    let app = spawn_app().await;
    app.say("steer", "m1", "say hi", None).await;
    let body =
        json!({"id": "m2", "session_id": "steer", "content": "faster", "message_type": "steering"});
    check(&app, &body, "message_type", "steering_over_http").await;
}

#[actix_web::test]
async fn a_host_tools_context_declaring_hold_is_a_422() {
    let app = spawn_app().await;
    let context = json!({"version": 1, "actions": [{"name": "hold", "description": "Do nothing.",
                          "parameters": {"type": "object", "properties": {}}}]});
    let body = json!({"id": "d1", "session_id": "decide", "content": "", "output_mode": "host_tools", "host_context": context});
    check(
        &app,
        &body,
        "host_context.actions",
        "hold_declared_in_host_tools",
    )
    .await;
    assert_eq!(app.get("/api/sessions/decide").await.0, 404);
}

#[actix_web::test]
async fn an_unknown_model_provider_is_a_422_naming_config_default_model() {
    let app = spawn_app().await;
    let body = json!({"id": "m1", "session_id": "models", "content": "hi", "config": {"default_model": "nosuch:model"}});
    check(&app, &body, "config.default_model", "unknown_provider").await;
    assert_eq!(app.get("/api/sessions/models").await.0, 404);
}

#[actix_web::test]
async fn a_session_id_of_65_characters_in_a_path_is_a_422() {
    let app = spawn_app().await;
    let long_id = "x".repeat(65);
    for path in [
        format!("/api/sessions/{long_id}"),
        format!("/api/sessions/{long_id}/tree"),
        format!("/api/sessions/{long_id}/messages"),
    ] {
        let (status, answer) = app.get(&path).await;
        assert_eq!(status, 422, "{path}: {answer}");
        assert_eq!(answer["type"], "validation");
        assert!(
            answer["error"]
                .as_str()
                .unwrap()
                .starts_with("session_id: "),
            "{answer}"
        );
    }
    let (status, answer) = app
        .post_json(&format!("/api/chat/{long_id}/cancel"), &json!({}))
        .await;
    assert_eq!(status, 422, "{answer}");
    let (status, answer) = app.delete(&format!("/api/sessions/{long_id}")).await;
    assert_eq!(status, 422, "{answer}");
}

#[actix_web::test]
async fn an_unknown_route_is_a_404_in_json() {
    let app = spawn_app().await;
    let (status, answer) = app.get("/api/nothing-here").await;
    assert_eq!(status, 404);
    assert!(
        answer["error"].is_string() && answer["type"].is_string(),
        "{answer}"
    );
}

#[actix_web::test]
async fn a_wrong_method_is_a_405_in_json() {
    let app = spawn_app().await;
    let (status, answer) = app.get("/api/chat").await;
    assert_eq!(status, 405, "{answer}");
    assert!(
        answer["error"].is_string() && answer["type"].is_string(),
        "{answer}"
    );
    let (status, answer) = app.delete("/api/sessions").await;
    assert_eq!(status, 405, "{answer}");
    assert!(answer["error"].is_string(), "{answer}");
}
