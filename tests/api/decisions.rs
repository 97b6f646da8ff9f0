//! Silent host decisions (`output_mode: "host_tools"`, host-contract.md
//! "Silent host decisions"), over `POST /api/chat` and the `/assistant`
//! Socket.IO namespace (driven by the stock python client through
//! tests/clients/sio_decision.py). The offline echo model proposes the
//! actions; the fake OpenAI provider shows what a real model is offered.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::fake_provider::{FakeProvider, Script};
use crate::helpers::{
    eventually, openai_settings, spawn_app, spawn_app_owned, spawn_app_with, TestApp,
};

/// The spec's example context: one action, `set_position`, and a scene view.
fn scene_context() -> Value {
    json!({
        "actions": [{
            "name": "set_position",
            "description": "Set the controlled object's position",
            "parameters": {
                "type": "object",
                "properties": {"x": {"type": "number"}},
                "required": ["x"],
                "additionalProperties": false
            }
        }],
        "view": {"name": "scene", "data": {"current_x": 0, "revision": 3}}
    })
}

/// A second context action, so a model can propose two different actions.
fn scene_context_with_jump() -> Value {
    let mut context = scene_context();
    context["actions"].as_array_mut().unwrap().push(json!({
        "name": "jump",
        "description": "Jump once",
        "parameters": {"type": "object", "properties": {}}
    }));
    context
}

const SET_X: &str = r#"call set_position {"x": 1}"#;

/// A decision request body.
fn decision_body(session_id: &str, id: &str, content: &str) -> Value {
    json!({
        "id": id,
        "session_id": session_id,
        "output_mode": "host_tools",
        "content": content,
        "host_context": scene_context(),
    })
}

/// A receipt body for `call_id` (without `output_mode`; callers add it).
fn receipt_body(session_id: &str, id: &str, call_id: &str, result: Value) -> Value {
    json!({
        "id": id,
        "session_id": session_id,
        "output_mode": "host_tools",
        "content": "",
        "tool_call_id": call_id,
        "tool_result": result,
    })
}

async fn decide(app: &TestApp, session_id: &str, id: &str, content: &str) -> (StatusCode, Value) {
    app.post_chat(&decision_body(session_id, id, content)).await
}

/// A pending decision for `set_position {"x": 1}`; returns its call id.
async fn pending_decision(app: &TestApp, session_id: &str, id: &str) -> String {
    let (status, body) = decide(app, session_id, id, SET_X).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["decision"], "pending", "{body}");
    body["pending_tool_call"]["call_id"]
        .as_str()
        .expect("a pending call id")
        .to_string()
}

/// Every assistant message of the session.
async fn assistant_messages(app: &TestApp, session_id: &str) -> Vec<Value> {
    let tree = app.tree(session_id).await;
    tree.as_array()
        .expect("the tree is an array of messages")
        .iter()
        .filter(|message| message["role"] == "assistant")
        .cloned()
        .collect()
}

/// The kinds of a message's segments, in order.
fn segment_kinds(message: &Value) -> Vec<String> {
    message["segments"]
        .as_array()
        .map(|segments| {
            segments
                .iter()
                .map(|segment| segment["kind"].as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default()
}

fn assert_no_prose(message: &Value) {
    let kinds = segment_kinds(message);
    assert!(
        !kinds
            .iter()
            .any(|kind| kind == "text" || kind == "thinking"),
        "the stored message keeps prose: {message}"
    );
}

/// Every tool record of a message.
fn tools_of(message: &Value) -> Vec<Value> {
    message["segments"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|segment| segment["kind"] == "tool_group")
        .flat_map(|segment| segment["tools"].as_array().cloned().unwrap_or_default())
        .collect()
}

fn openai_app_settings(fake: &FakeProvider) -> Vec<(&'static str, String)> {
    vec![
        ("LLM__PRIMARY_MODEL", "openai:gpt-test".to_string()),
        ("OPENAI_BASE_URL", fake.base_url_openai()),
        ("OPENAI_API_KEY", "sk-test".to_string()),
    ]
}

async fn spawn_with(settings: &[(&'static str, String)]) -> TestApp {
    let pairs: Vec<(&str, &str)> = settings
        .iter()
        .map(|(key, value)| (*key, value.as_str()))
        .collect();
    spawn_app_with(&pairs).await
}

// ---- the socket client ------------------------------------------------------

fn clients_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/clients")
}

/// Runs `sio_decision.py` with these steps; returns its `steps` (each with
/// `ack` and `events`: `[{event, data}]`).
async fn socket_steps(app: &TestApp, steps: Value) -> Vec<Value> {
    let url = app.address.clone();
    let scenario = json!({ "steps": steps }).to_string();
    let output = actix_web::rt::task::spawn_blocking(move || {
        let dir = clients_dir();
        if !dir.join(".venv/bin/python").exists() {
            let status = Command::new("bash")
                .arg(dir.join("install.sh"))
                .status()
                .expect("bash runs tests/clients/install.sh");
            assert!(status.success(), "installing the stock clients failed");
        }
        Command::new(dir.join(".venv/bin/python"))
            .arg(dir.join("sio_decision.py"))
            .args([url, scenario])
            .output()
            .expect("run sio_decision.py")
    })
    .await
    .expect("the client thread finished");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let result: Value =
        serde_json::from_str(stdout.lines().last().unwrap_or("")).unwrap_or_else(|error| {
            panic!("sio_decision.py printed no JSON ({error}):\n{stdout}\n{stderr}")
        });
    assert_eq!(result["connected"], true, "{result}");
    assert!(result["error"].is_null(), "{result}");
    let steps = result["steps"].as_array().cloned().unwrap_or_default();
    for step in &steps {
        assert_eq!(step["timed_out"], false, "a step never completed: {result}");
    }
    steps
}

fn event_names(step: &Value) -> Vec<String> {
    step["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|event| event["event"].as_str().unwrap().to_string())
        .collect()
}

fn event_data<'a>(step: &'a Value, name: &str) -> Vec<&'a Value> {
    step["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|event| event["event"] == name)
        .map(|event| &event["data"])
        .collect()
}

fn final_of(step: &Value) -> Value {
    let finals = event_data(step, "assistant:final_response");
    assert_eq!(finals.len(), 1, "one final_response: {step}");
    finals[0].clone()
}

/// Only status, final_response and error events in silent mode.
fn assert_silent_events(step: &Value) {
    for name in event_names(step) {
        assert!(
            matches!(
                name.as_str(),
                "assistant:status" | "assistant:final_response" | "assistant:error"
            ),
            "{name} was published in host_tools mode: {step}"
        );
    }
}

// ---- hold ------------------------------------------------------------------

#[actix_web::test]
async fn hold_has_null_content_and_no_pending_call() {
    let app = spawn_app().await;
    let (status, body) = decide(&app, "decision-hold", "d1", "hold").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["decision"], "hold");
    assert!(body["content"].is_null(), "{body}");
    assert!(body["pending_tool_call"].is_null(), "{body}");
    assert!(app.session("decision-hold").await["pending_action"].is_null());
}

#[actix_web::test]
async fn hold_wins_over_co_emitted_actions_and_admits_none() {
    let app = spawn_app().await;
    let content = format!("{SET_X}\nhold");
    let (status, body) = decide(&app, "decision-hold-wins", "d1", &content).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["decision"], "hold", "{body}");
    assert!(body["content"].is_null());
    assert!(body["pending_tool_call"].is_null(), "{body}");
    assert!(app.session("decision-hold-wins").await["pending_action"].is_null());
    // The co-emitted action was recorded as not admitted, never as awaiting a result.
    let assistant = &assistant_messages(&app, "decision-hold-wins").await[0];
    let action = tools_of(assistant)
        .into_iter()
        .find(|tool| tool["name"] == "set_position")
        .expect("the proposed action is recorded");
    assert_eq!(action["output"]["admitted"], false, "{action}");
    // A receipt for it is refused.
    let call_id = action["id"].as_str().unwrap();
    let (status, body) = app
        .post_chat(&receipt_body(
            "decision-hold-wins",
            "r1",
            call_id,
            json!({"ok": true}),
        ))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
}

// ---- pending, receipt, completed ----------------------------------------------

#[actix_web::test]
async fn one_action_is_pending_and_its_receipt_completes_without_a_model() {
    let app = spawn_app().await;
    let (status, body) = decide(&app, "decision-1", "decision-1", SET_X).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["decision"], "pending", "{body}");
    assert!(body["content"].is_null(), "{body}");
    let pending = &body["pending_tool_call"];
    assert_eq!(pending["tool_name"], "set_position");
    assert_eq!(pending["arguments"], json!({"x": 1}));
    assert_eq!(pending["queued"], json!([]));
    let call_id = pending["call_id"].as_str().unwrap().to_string();
    let requests_before = body["usage"]["requests"].clone();
    assert_eq!(requests_before, 1);

    let session = app.session("decision-1").await;
    assert_eq!(session["pending_action"]["tool_call_id"], call_id.as_str());
    assert_eq!(session["pending_action"]["output_mode"], "host_tools");

    let (status, receipt) = app
        .post_chat(&receipt_body(
            "decision-1",
            "decision-1-receipt",
            &call_id,
            json!({"x": 1, "moved": true}),
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "{receipt}");
    assert_eq!(receipt["decision"], "completed", "{receipt}");
    assert!(receipt["content"].is_null(), "{receipt}");
    assert!(receipt["pending_tool_call"].is_null(), "{receipt}");
    assert_eq!(
        receipt["usage"]["requests"], requests_before,
        "no model ran"
    );
    // The receipt extends the original assistant row.
    assert_eq!(receipt["message_id"], body["message_id"]);
    assert!(app.session("decision-1").await["pending_action"].is_null());

    let assistants = assistant_messages(&app, "decision-1").await;
    assert_eq!(
        assistants.len(),
        1,
        "no new assistant message: {assistants:?}"
    );
    let tools = tools_of(&assistants[0]);
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0]["output"], json!({"x": 1, "moved": true}));
    assert_eq!(tools[0]["outcome"], "success");
    assert_no_prose(&assistants[0]);
}

/// Omitting or changing `output_mode` on the receipt cannot make a model
/// narrate: the fake provider sees no request after the decision's own.
#[actix_web::test]
async fn a_receipt_without_or_with_another_output_mode_is_still_silent() {
    let fake = FakeProvider::start();
    let app = spawn_with(&openai_app_settings(&fake)).await;
    for (session_id, receipt_mode) in [("decision-omit", None), ("decision-text", Some("text"))] {
        fake.push(Script::openai_tool_calls(&[(
            &format!("call_{session_id}"),
            "set_position",
            r#"{"x": 2}"#,
        )]));
        let before = fake.requests().len();
        let (status, body) = decide(&app, session_id, "d1", "move to 2").await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body["decision"], "pending", "{body}");
        assert_eq!(fake.requests().len(), before + 1);
        let call_id = body["pending_tool_call"]["call_id"].as_str().unwrap();

        let mut receipt = receipt_body(session_id, "r1", call_id, json!({"x": 2}));
        match receipt_mode {
            None => {
                receipt.as_object_mut().unwrap().remove("output_mode");
            }
            Some(mode) => receipt["output_mode"] = json!(mode),
        }
        let (status, receipt) = app.post_chat(&receipt).await;
        assert_eq!(status, StatusCode::OK, "{receipt}");
        assert_eq!(receipt["decision"], "completed", "{receipt}");
        assert!(receipt["content"].is_null(), "{receipt}");
        assert_eq!(
            fake.requests().len(),
            before + 1,
            "the receipt ran a model ({receipt_mode:?})"
        );
        assert_eq!(receipt["usage"]["requests"], body["usage"]["requests"]);
        let assistants = assistant_messages(&app, session_id).await;
        assert_eq!(assistants.len(), 1);
        assert_no_prose(&assistants[0]);
    }
}

/// The other way round: a text-mode pending call whose receipt says
/// `host_tools` still resumes the model in text mode (the stored mode wins),
/// and the prose already in the message is kept.
#[actix_web::test]
async fn a_text_pending_call_keeps_its_mode_when_the_receipt_says_host_tools() {
    let app = spawn_app().await;
    let mut body = decision_body("text-pending", "t1", &format!("say moving now\n{SET_X}"));
    body.as_object_mut().unwrap().remove("output_mode");
    let (status, body) = app.post_chat(&body).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body["decision"].is_null(), "{body}");
    assert_eq!(body["content"], "moving now");
    let call_id = body["pending_tool_call"]["call_id"].as_str().unwrap();
    assert_eq!(
        app.session("text-pending").await["pending_action"]["output_mode"],
        "text"
    );
    let (status, receipt) = app
        .post_chat(&receipt_body(
            "text-pending",
            "r1",
            call_id,
            json!({"x": 1}),
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "{receipt}");
    assert!(receipt["decision"].is_null(), "{receipt}");
    let content = receipt["content"].as_str().expect("text content");
    assert!(content.starts_with("moving now"), "{receipt}");
    assert!(content.contains("Tool results: set_position"), "{receipt}");
    let assistant = &assistant_messages(&app, "text-pending").await[0];
    assert_eq!(
        segment_kinds(assistant).first().map(String::as_str),
        Some("text"),
        "{assistant}"
    );
}

#[actix_web::test]
async fn a_failed_receipt_completes_and_records_the_failure() {
    let app = spawn_app().await;
    let call_id = pending_decision(&app, "decision-failed", "d1").await;
    let mut receipt = receipt_body(
        "decision-failed",
        "r1",
        &call_id,
        json!({"error": "motor stalled"}),
    );
    receipt["tool_outcome"] = json!("failed");
    let (status, body) = app.post_chat(&receipt).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["decision"], "completed", "{body}");
    assert!(body["content"].is_null());
    let tools = tools_of(&assistant_messages(&app, "decision-failed").await[0]);
    assert_eq!(tools[0]["status"], "failed", "{tools:?}");
    assert_eq!(tools[0]["outcome"], "failed", "{tools:?}");
    assert_eq!(tools[0]["output"], json!({"error": "motor stalled"}));
}

#[actix_web::test]
async fn duplicate_late_and_mismatched_receipts_are_409() {
    let app = spawn_app().await;

    // Mismatched: a call id that is not the pending one; the pending one survives.
    let call_id = pending_decision(&app, "decision-409", "d1").await;
    let (status, body) = app
        .post_chat(&receipt_body("decision-409", "r0", "call_wrong", json!({})))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(
        app.session("decision-409").await["pending_action"]["tool_call_id"],
        call_id.as_str()
    );

    // Duplicate: the same receipt again (under a new request id), after it completed.
    let (status, body) = app
        .post_chat(&receipt_body(
            "decision-409",
            "r1",
            &call_id,
            json!({"x": 1}),
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["decision"], "completed");
    let (status, body) = app
        .post_chat(&receipt_body(
            "decision-409",
            "r2",
            &call_id,
            json!({"x": 1}),
        ))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    let sentence = body["error"].as_str().unwrap_or_default();
    assert!(
        sentence.contains("already recorded (status: completed)"),
        "{sentence}"
    );

    // Late: a newer message superseded the pending call before its receipt came.
    let stale = pending_decision(&app, "decision-late", "d1").await;
    let (status, body) = decide(&app, "decision-late", "d2", "hold").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["decision"], "hold");
    let (status, body) = app
        .post_chat(&receipt_body(
            "decision-late",
            "r1",
            &stale,
            json!({"x": 1}),
        ))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(app.session("decision-late").await["pending_action"].is_null());

    // Late while the newer decision is still planning: the receipt waits for
    // it (a receipt never cancels) and is then refused; the newer one stands.
    let older = pending_decision(&app, "decision-late-live", "d1").await;
    let newer = {
        let client = app.client.clone();
        let url = format!("{}/api/chat", app.address);
        let body = decision_body("decision-late-live", "d2", &format!("slow 400\n{SET_X}"));
        actix_web::rt::spawn(async move {
            let response = client.post(url).json(&body).send().await.unwrap();
            (response.status(), response.json::<Value>().await.unwrap())
        })
    };
    app.wait_for_live_turn("decision-late-live").await;
    let (status, body) = app
        .post_chat(&receipt_body(
            "decision-late-live",
            "r1",
            &older,
            json!({"x": 1}),
        ))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    let (status, newer) = newer.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{newer}");
    assert_eq!(newer["decision"], "pending", "{newer}");
    assert_eq!(
        app.session("decision-late-live").await["pending_action"]["tool_call_id"],
        newer["pending_tool_call"]["call_id"]
    );
}

// ---- invalid decisions -----------------------------------------------------------

#[actix_web::test]
async fn several_actions_fail_with_invalid_decision_and_admit_nothing() {
    let app = spawn_app().await;
    for (session_id, content) in [
        ("decision-two-kinds", format!("{SET_X}\ncall jump {{}}")),
        (
            "decision-same-twice",
            format!("{SET_X}\ncall set_position {{\"x\": 2}}"),
        ),
    ] {
        let mut body = decision_body(session_id, "d1", &content);
        body["host_context"] = scene_context_with_jump();
        let (status, body) = app.post_chat(&body).await;
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR, "{body}");
        assert_eq!(body["type"], "invalid_decision", "{body}");
        assert_eq!(body["error_type"], "invalid_decision", "{body}");
        assert!(body["pending_tool_call"].is_null(), "{body}");
        assert!(body["decision"].is_null(), "{body}");
        assert!(body["content"].is_null(), "{body}");
        let session = app.session(session_id).await;
        assert!(session["pending_action"].is_null(), "{session}");
        let assistant = &assistant_messages(&app, session_id).await[0];
        for tool in tools_of(assistant) {
            assert_eq!(tool["output"]["admitted"], false, "{tool}");
        }
    }
}

// ---- what the model is offered --------------------------------------------------------

#[actix_web::test]
async fn only_context_actions_and_hold_are_offered() {
    let fake = FakeProvider::start();
    let mut settings = openai_app_settings(&fake);
    settings.push((
        "TOOLS__HOST_TOOLS",
        json!({"navigate": {"description": "Go somewhere", "parameters": {"type": "object", "properties": {"to": {"type": "string"}}}}})
            .to_string(),
    ));
    let app = spawn_with(&settings).await;
    fake.push(Script::openai_tool_calls(&[("call_h", "hold", "{}")]));
    let (status, body) = decide(&app, "decision-tools", "d1", "what now?").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["decision"], "hold", "{body}");

    let requests = fake.requests();
    assert_eq!(requests.len(), 1, "one model request, no summaries");
    let names: Vec<&str> = requests[0].body["tools"]
        .as_array()
        .expect("tools are offered")
        .iter()
        .map(|tool| tool["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["set_position", "hold"], "{names:?}");

    // Without a host_context the session's last context supplies the actions.
    fake.push(Script::openai_tool_calls(&[("call_h2", "hold", "{}")]));
    let mut body = decision_body("decision-tools", "d2", "and now?");
    body.as_object_mut().unwrap().remove("host_context");
    let (status, body) = app.post_chat(&body).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["decision"], "hold", "{body}");
    let again: Vec<String> = fake.requests()[1].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["function"]["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(again, vec!["set_position", "hold"]);

    // The same server offers the backend and configured tools in text mode.
    fake.push(Script::openai_text(&["ok"]));
    let (status, _) = app.say("decision-tools-text", "t1", "hi", None).await;
    assert_eq!(status, StatusCode::OK);
    let text_names: Vec<String> = fake.requests()[2].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["function"]["name"].as_str().unwrap().to_string())
        .collect();
    assert!(
        text_names.iter().any(|name| name == "get_time"),
        "{text_names:?}"
    );
    assert!(
        text_names.iter().any(|name| name == "navigate"),
        "{text_names:?}"
    );
}

#[actix_web::test]
async fn an_action_named_hold_is_refused_with_host_tools() {
    let app = spawn_app().await;
    let mut context = scene_context();
    context["actions"].as_array_mut().unwrap().push(json!({
        "name": "hold",
        "description": "A host no-op",
        "parameters": {"type": "object", "properties": {}}
    }));
    let mut body = decision_body("decision-hold-name", "d1", "hold");
    body["host_context"] = context.clone();
    let (status, reply) = app.post_chat(&body).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{reply}");

    // Also when the reserved name comes from the session's last context.
    let (status, _) = app
        .say("decision-hold-last", "t1", "hello", Some(context))
        .await;
    assert_eq!(status, StatusCode::OK);
    let mut body = decision_body("decision-hold-last", "d1", "hold");
    body.as_object_mut().unwrap().remove("host_context");
    let (status, reply) = app.post_chat(&body).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{reply}");
}

// ---- no prose kept ------------------------------------------------------------

#[actix_web::test]
async fn model_prose_is_not_kept_in_the_stored_message() {
    let app = spawn_app().await;
    let content = format!("think about it\nsay hello\n{SET_X}");
    let (status, body) = decide(&app, "decision-prose", "d1", &content).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["decision"], "pending");
    assert!(body["content"].is_null());
    let assistant = &assistant_messages(&app, "decision-prose").await[0];
    assert_no_prose(assistant);
    assert_eq!(segment_kinds(assistant), vec!["tool_group"]);

    let (status, body) = decide(&app, "decision-prose-hold", "d1", "say hello\nhold").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["decision"], "hold");
    assert_no_prose(&assistant_messages(&app, "decision-prose-hold").await[0]);
}

#[actix_web::test]
async fn a_cancelled_decision_keeps_no_prose() {
    // The provider streams prose, then stalls with the response open: the
    // turn is cancelled with the prose already streamed, never before it.
    let fake = FakeProvider::start();
    fake.push(Script::OpenAiStall(vec![
        "one two".into(),
        " three four".into(),
        " five six".into(),
    ]));
    let app = spawn_app_owned(&openai_settings(&fake.base_url_openai())).await;
    let running = {
        let app_address = app.address.clone();
        let client = app.client.clone();
        actix_web::rt::spawn(async move {
            let body = decision_body("decision-cancel", "d1", "decide");
            let response = client
                .post(format!("{app_address}/api/chat"))
                .json(&body)
                .send()
                .await
                .unwrap();
            let status = response.status();
            (status, response.json::<Value>().await.unwrap())
        })
    };
    eventually("the provider to answer", || async {
        !fake.requests().is_empty()
    })
    .await;
    let (status, cancel) = app
        .post_json("/api/chat/decision-cancel/cancel", &json!({}))
        .await;
    assert_eq!(status, StatusCode::OK, "{cancel}");
    assert_eq!(cancel["cancel_requested"], true, "{cancel}");
    let (status, body) = running.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["error_type"], "cancelled", "{body}");
    assert!(body["content"].is_null(), "{body}");
    assert!(body["pending_tool_call"].is_null(), "{body}");
    let assistant = &assistant_messages(&app, "decision-cancel").await[0];
    assert_eq!(assistant["error_type"], "cancelled");
    assert_no_prose(assistant);
    assert!(app.session("decision-cancel").await["pending_action"].is_null());
}

#[actix_web::test]
async fn a_usage_limited_decision_keeps_no_prose() {
    let app = spawn_app().await;
    let mut body = decision_body(
        "decision-limit",
        "d1",
        "say let me think\ncall set_position {\"x\": \"far\"}",
    );
    body["config"] = json!({"max_turns": 1});
    let (status, body) = app.post_chat(&body).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["error_type"], "usage_limit", "{body}");
    assert!(body["content"].is_null(), "{body}");
    assert!(body["pending_tool_call"].is_null(), "{body}");
    assert!(app.session("decision-limit").await["pending_action"].is_null());
    let assistant = &assistant_messages(&app, "decision-limit").await[0];
    assert_eq!(assistant["error_type"], "usage_limit");
    assert_no_prose(assistant);
    // The schema-invalid call was sent back for a retry, never admitted.
    let tools = tools_of(assistant);
    assert_eq!(tools.len(), 1, "{tools:?}");
    assert_eq!(tools[0]["outcome"], "failed");
}

// ---- cancellation and idle pending actions ------------------------------------------------

#[actix_web::test]
async fn cancelling_leaves_an_idle_pending_action_untouched() {
    let app = spawn_app().await;
    let call_id = pending_decision(&app, "decision-idle-cancel", "d1").await;
    let (status, cancel) = app
        .post_json("/api/chat/decision-idle-cancel/cancel", &json!({}))
        .await;
    assert_eq!(status, StatusCode::OK, "{cancel}");
    assert_eq!(cancel["cancel_requested"], false, "{cancel}");
    let session = app.session("decision-idle-cancel").await;
    assert_eq!(session["pending_action"]["tool_call_id"], call_id.as_str());
    let (status, body) = app
        .post_chat(&receipt_body(
            "decision-idle-cancel",
            "r1",
            &call_id,
            json!({"x": 1}),
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["decision"], "completed", "{body}");
}

// ---- text turns -------------------------------------------------------------------

#[actix_web::test]
async fn normal_text_turns_carry_decision_null() {
    let app = spawn_app().await;
    let (status, body) = app.say("text-turn", "t1", "hello", None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body.as_object().unwrap().contains_key("decision"), "{body}");
    assert!(body["decision"].is_null(), "{body}");
    assert_eq!(body["content"], "Echo: hello");

    let steps = socket_steps(
        &app,
        json!([{"message": {"id": "s1", "session_id": "text-turn-socket", "content": "hello"}}]),
    )
    .await;
    let final_response = final_of(&steps[0]);
    assert!(
        final_response.as_object().unwrap().contains_key("decision"),
        "{final_response}"
    );
    assert!(final_response["decision"].is_null(), "{final_response}");
    assert_eq!(final_response["content"], "Echo: hello");
    assert!(event_names(&steps[0]).contains(&"assistant:text_delta".to_string()));
}

// ---- persistence ------------------------------------------------------------------

#[actix_web::test]
async fn the_mode_persists_with_the_pending_action_across_hibernation() {
    let app = spawn_app_with(&[("ASSISTANT__SESSION_IDLE_SECONDS", "0")]).await;
    let call_id = pending_decision(&app, "decision-hibernate", "d1").await;
    // The session stopped soon after its turn ended (a session waiting for
    // a host result lingers 500 ms for it; the sweeper looks every 200 ms).
    let mut live = 1;
    for _ in 0..150 {
        live = app.get("/health").await.1["components"]["sessions"]["live"]
            .as_u64()
            .unwrap();
        if live == 0 {
            break;
        }
        actix_web::rt::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(live, 0, "the session actor hibernated");
    // Reloaded from the store, the pending action keeps its mode.
    let session = app.session("decision-hibernate").await;
    assert_eq!(session["pending_action"]["tool_call_id"], call_id.as_str());
    assert_eq!(session["pending_action"]["output_mode"], "host_tools");
    assert_eq!(session["turn_running"], false);

    let mut receipt = receipt_body("decision-hibernate", "r1", &call_id, json!({"x": 1}));
    receipt.as_object_mut().unwrap().remove("output_mode");
    let (status, body) = app.post_chat(&receipt).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["decision"], "completed", "{body}");
    assert!(body["content"].is_null(), "{body}");
    assert_eq!(body["usage"]["requests"], 1, "no model ran: {body}");
    let assistants = assistant_messages(&app, "decision-hibernate").await;
    assert_eq!(assistants.len(), 1);
    assert_no_prose(&assistants[0]);
    assert_eq!(tools_of(&assistants[0])[0]["outcome"], "success");
}

// ---- over the socket ----------------------------------------------------------------

#[actix_web::test]
async fn socket_hold_pending_receipt_and_completed_are_silent() {
    let app = spawn_app().await;
    let session = "socket-decision";
    let mut steps = socket_steps(
        &app,
        json!([
            {"message": decision_body(session, "d1", "say I will hold\nhold")},
            {"message": decision_body(session, "d1b", "say let me see\ncall set_position {\"x\": \"far\"}")},
            {"message": decision_body(session, "d2", &format!("think first\nsay hello\n{SET_X}"))},
        ]),
    )
    .await;
    // A schema-invalid action is sent back to the model without a tool_error.
    let retried = steps.remove(1);
    assert_silent_events(&retried);
    assert_eq!(final_of(&retried)["usage"]["requests"], 2, "{retried}");
    for step in &steps {
        assert_eq!(step["ack"]["ok"], true, "{step}");
        assert_silent_events(step);
    }
    let hold = final_of(&steps[0]);
    assert_eq!(hold["decision"], "hold", "{hold}");
    assert!(hold["content"].is_null());
    assert!(hold["pending_tool_call"].is_null());

    let pending = final_of(&steps[1]);
    assert_eq!(pending["decision"], "pending", "{pending}");
    assert!(pending["content"].is_null());
    assert_eq!(pending["pending_tool_call"]["tool_name"], "set_position");
    assert_eq!(pending["pending_tool_call"]["queued"], json!([]));
    let call_id = pending["pending_tool_call"]["call_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        app.session(session).await["pending_action"]["output_mode"],
        "host_tools"
    );

    let mut receipt_no_mode = receipt_body(session, "r1", &call_id, json!({"x": 1}));
    receipt_no_mode
        .as_object_mut()
        .unwrap()
        .remove("output_mode");
    let steps = socket_steps(
        &app,
        json!([
            {"message": receipt_no_mode},
            {"message": receipt_body(session, "r2", &call_id, json!({"x": 1}))},
        ]),
    )
    .await;
    assert_eq!(steps[0]["ack"]["ok"], true, "{}", steps[0]);
    assert_silent_events(&steps[0]);
    let completed = final_of(&steps[0]);
    assert_eq!(completed["decision"], "completed", "{completed}");
    assert!(completed["content"].is_null(), "{completed}");
    assert_eq!(completed["usage"]["requests"], pending["usage"]["requests"]);
    // The duplicate is refused as a conflict.
    assert_eq!(steps[1]["ack"]["ok"], false, "{}", steps[1]);
    let refused = event_data(&steps[1], "assistant:error");
    assert_eq!(refused.len(), 1, "{}", steps[1]);
    assert_eq!(refused[0]["type"], "session_error", "{}", steps[1]);
    assert!(event_data(&steps[1], "assistant:final_response").is_empty());

    let assistants = assistant_messages(&app, session).await;
    for assistant in &assistants {
        assert_no_prose(assistant);
    }
}

#[actix_web::test]
async fn socket_several_actions_are_an_invalid_decision_error() {
    let app = spawn_app().await;
    let mut body = decision_body(
        "socket-invalid",
        "d1",
        &format!("say both\n{SET_X}\ncall jump {{}}"),
    );
    body["host_context"] = scene_context_with_jump();
    let mut both = decision_body("socket-hold-wins", "d1", &format!("{SET_X}\nhold"));
    both["host_context"] = scene_context_with_jump();
    let steps = socket_steps(&app, json!([{"message": body}, {"message": both}])).await;
    assert_silent_events(&steps[0]);
    let errors = event_data(&steps[0], "assistant:error");
    assert_eq!(errors.len(), 1, "{}", steps[0]);
    assert_eq!(errors[0]["error_type"], "invalid_decision", "{}", steps[0]);
    let final_response = final_of(&steps[0]);
    assert!(final_response["pending_tool_call"].is_null());
    assert!(final_response["content"].is_null());
    assert!(app.session("socket-invalid").await["pending_action"].is_null());

    assert_silent_events(&steps[1]);
    assert!(event_data(&steps[1], "assistant:error").is_empty());
    let hold = final_of(&steps[1]);
    assert_eq!(hold["decision"], "hold", "{hold}");
    assert!(hold["pending_tool_call"].is_null());
    assert!(app.session("socket-hold-wins").await["pending_action"].is_null());
}

#[actix_web::test]
async fn socket_steering_is_refused_in_host_tools_mode() {
    let app = spawn_app().await;
    let mut steering = decision_body("socket-steer", "s1", "hold");
    steering["message_type"] = json!("steering");
    let steps = socket_steps(
        &app,
        json!([
            {"message": decision_body("socket-steer", "d1", "hold")},
            {"message": steering},
        ]),
    )
    .await;
    assert_eq!(steps[1]["ack"]["ok"], false, "{}", steps[1]);
    let errors = event_data(&steps[1], "assistant:error");
    assert_eq!(errors.len(), 1, "{}", steps[1]);
    assert_eq!(errors[0]["type"], "validation", "{}", steps[1]);
    assert!(event_data(&steps[1], "assistant:final_response").is_empty());
}

#[actix_web::test]
async fn socket_cancellation_of_a_decision_publishes_no_prose() {
    let app = spawn_app().await;
    let steps = socket_steps(
        &app,
        json!([{
            "message": decision_body(
                "socket-cancel",
                "d1",
                &format!("slow 300\nsay one two three four five six\n{SET_X}"),
            ),
            "cancel_after_ms": 1000
        }]),
    )
    .await;
    assert_eq!(
        steps[0]["cancel_ack"]["cancel_requested"], true,
        "{}",
        steps[0]
    );
    assert_silent_events(&steps[0]);
    let final_response = final_of(&steps[0]);
    assert_eq!(
        final_response["error_type"], "cancelled",
        "{final_response}"
    );
    assert!(final_response["content"].is_null());
    assert_no_prose(&assistant_messages(&app, "socket-cancel").await[0]);
}
