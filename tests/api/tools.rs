//! What a turn offers the model (page scopes, screenshots, context actions,
//! configured host tools) and how the loop treats calls (schema retries,
//! `max_turns`), plus `GET /api/debug/tools`.

use serde_json::{json, Value};

use crate::fake_provider::FakeProvider;
use crate::helpers::{
    offered_tools, openai_settings, pending_call_id, spawn_app, spawn_app_owned, spawn_app_with,
    tasks_context,
};

const SHOT: &str = "data:image/png;base64,iVBORw0KGgo=";

fn with_screenshot(mut body: Value) -> Value {
    body["attachments"] = json!([{"kind": "image", "purpose": "screenshot", "data_uri": SHOT}]);
    body
}

fn context_on(view: &str) -> Value {
    let mut context = tasks_context();
    context["view"]["name"] = json!(view);
    context
}

#[actix_web::test]
async fn page_scopes_limit_backend_tools_on_listed_views_only() {
    let fake = FakeProvider::start();
    let mut settings = openai_settings(&fake.base_url_openai());
    settings.push((
        "TOOLS__PAGE_SCOPES",
        r#"{"tasks":["get_time"]}"#.to_string(),
    ));
    let app = spawn_app_owned(&settings).await;
    let scoped = with_screenshot(
        json!({"id": "m1", "session_id": "scoped", "content": "hi", "host_context": context_on("tasks")}),
    );
    let (status, answer) = app.post_chat(&scoped).await;
    assert_eq!(status, 200, "{answer}");
    let open = with_screenshot(
        json!({"id": "m1", "session_id": "open", "content": "hi", "host_context": context_on("agents")}),
    );
    let (status, answer) = app.post_chat(&open).await;
    assert_eq!(status, 200, "{answer}");

    let requests = fake.requests();
    assert_eq!(
        offered_tools(&requests[0].body),
        ["get_time", "select_issue", "open_tab"]
    );
    assert_eq!(
        offered_tools(&requests[1].body),
        ["get_time", "look_at_screen", "select_issue", "open_tab"]
    );
}

#[actix_web::test]
async fn look_at_screen_is_offered_only_with_a_screenshot() {
    let fake = FakeProvider::start();
    let app = spawn_app_owned(&openai_settings(&fake.base_url_openai())).await;
    let (status, _) = app.say("screen", "m1", "hi", None).await;
    assert_eq!(status, 200);
    let (status, _) = app
        .post_chat(&with_screenshot(
            json!({"id": "m2", "session_id": "screen", "content": "look"}),
        ))
        .await;
    assert_eq!(status, 200);
    let requests = fake.requests();
    assert_eq!(offered_tools(&requests[0].body), ["get_time"]);
    assert_eq!(
        offered_tools(&requests[1].body),
        ["get_time", "look_at_screen"]
    );
    let (_, tree) = app.get_text("/api/sessions/screen/tree").await;
    assert!(
        !tree.contains("data:image"),
        "a screenshot is never stored: {tree}"
    );
}

#[actix_web::test]
async fn a_context_action_named_like_a_backend_tool_is_ignored() {
    let fake = FakeProvider::start();
    let app = spawn_app_owned(&openai_settings(&fake.base_url_openai())).await;
    let context = json!({"version": 1, "actions": [
        {"name": "get_time", "description": "The host's own clock.", "parameters": {"type": "object", "properties": {"zone": {"type": "string"}}}},
        {"name": "open_tab", "description": "Open a tab.", "parameters": {"type": "object", "properties": {}}}
    ]});
    let (status, answer) = app.say("collide", "m1", "hi", Some(context)).await;
    assert_eq!(status, 200, "{answer}");
    let body = &fake.requests()[0].body;
    assert_eq!(offered_tools(body), ["get_time", "open_tab"]);
    let get_time = &body["tools"][0]["function"];
    assert_eq!(
        get_time["description"],
        "Get the current date and time (UTC)."
    );
    assert_eq!(get_time["parameters"]["properties"], json!({}));
}

#[actix_web::test]
async fn configured_host_tools_are_offered_and_calling_one_is_a_host_action() {
    let host_tools = r#"{"open_drawer": {"description": "Open the side drawer.", "parameters": {"type": "object", "properties": {"side": {"type": "string"}}, "required": ["side"]}}}"#;
    let app = spawn_app_with(&[("TOOLS__HOST_TOOLS", host_tools)]).await;
    let (status, first) = app
        .say(
            "drawer",
            "m1",
            "call open_drawer {\"side\": \"left\"}",
            None,
        )
        .await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(first["pending_tool_call"]["tool_name"], "open_drawer");
    assert_eq!(
        first["pending_tool_call"]["arguments"],
        json!({"side": "left"})
    );
    let call_id = pending_call_id(&first);
    assert_eq!(
        app.tool_record("drawer", &call_id).await["category"],
        "host"
    );
    let (status, resumed) = app
        .continue_call("drawer", "m2", &call_id, json!("opened"))
        .await;
    assert_eq!(status, 200, "{resumed}");
    assert_eq!(resumed["content"], "Tool results: open_drawer → opened");

    let fake = FakeProvider::start();
    let mut settings = openai_settings(&fake.base_url_openai());
    settings.push(("TOOLS__HOST_TOOLS", host_tools.to_string()));
    let app = spawn_app_owned(&settings).await;
    app.say("drawer", "m1", "hi", Some(tasks_context())).await;
    assert_eq!(
        offered_tools(&fake.requests()[0].body),
        ["get_time", "open_drawer", "select_issue", "open_tab"]
    );
}

#[actix_web::test]
async fn arguments_that_break_the_schema_go_back_to_the_model_not_the_host() {
    let app = spawn_app().await;
    let (status, answer) = app
        .say(
            "schema",
            "m1",
            "call select_issue {\"number\": \"x\"}",
            Some(tasks_context()),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    assert!(answer["pending_tool_call"].is_null(), "{answer}");
    assert!(app.session("schema").await["pending_action"].is_null());
    assert_eq!(
        answer["usage"]["requests"], 2,
        "the model got a retry: {answer}"
    );
    let content = answer["content"].as_str().unwrap();
    assert!(
        content.starts_with("Tool results: select_issue → "),
        "{content}"
    );
    assert!(content.contains("invalid_arguments"), "{content}");
    let tree = app.tree("schema").await;
    let record = &tree[1]["segments"][0]["tools"][0];
    assert_eq!(record["name"], "select_issue");
    assert_eq!(record["output"]["success"], false, "{record}");
    assert_eq!(
        record["output"]["error_code"], "invalid_arguments",
        "{record}"
    );
    assert!(
        record["output"]["error"]
            .as_str()
            .unwrap()
            .contains("number"),
        "{record}"
    );
}

#[actix_web::test]
async fn max_turns_ends_the_loop_with_usage_limit_and_a_saved_partial_message() {
    let app = spawn_app().await;
    let body = json!({"id": "m1", "session_id": "limit", "content": "say checking\ncall get_time {}", "config": {"max_turns": 1}});
    let (status, answer) = app.post_chat(&body).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["error"], true, "{answer}");
    assert_eq!(answer["error_type"], "usage_limit", "{answer}");
    assert_eq!(answer["usage"]["requests"], 1);
    assert_eq!(answer["content"], "checking");
    let tree = app.tree("limit").await;
    let assistant = &tree[1];
    assert_eq!(assistant["error_type"], "usage_limit");
    assert_eq!(
        assistant["segments"][0],
        json!({"kind": "text", "text": "checking"})
    );
    let record = &assistant["segments"][1]["tools"][0];
    assert_eq!(record["name"], "get_time");
    assert_eq!(
        record["outcome"], "success",
        "the completed tool result is kept: {record}"
    );
}

#[actix_web::test]
async fn debug_tools_lists_backend_and_host_tools_and_page_scopes() {
    let app = spawn_app_with(&[
        ("TOOLS__HOST_TOOLS", r#"{"open_drawer": {"description": "Open the side drawer.", "parameters": {"type": "object", "properties": {}}}}"#),
        ("TOOLS__PAGE_SCOPES", r#"{"tasks":["get_time"]}"#),
    ])
    .await;
    let (status, tools) = app.get("/api/debug/tools").await;
    assert_eq!(status, 200, "{tools}");
    let backend: Vec<&str> = tools["backend_tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    assert_eq!(backend, ["get_time", "look_at_screen"]);
    assert_eq!(tools["host_tools"][0]["name"], "open_drawer");
    assert_eq!(
        tools["host_tools"][0]["description"],
        "Open the side drawer."
    );
    assert_eq!(tools["page_scopes"], json!({"tasks": ["get_time"]}));
}
