//! Host actions end to end: the pending call, continuations (one, a batch
//! handed over in order, failed), and every way a continuation is refused.

use serde_json::{json, Value};

use crate::fake_provider::{FakeProvider, Script};
use crate::helpers::{
    pending_call_id, spawn_app, spawn_app_with, tasks_context, tool_records, TestApp,
};

/// Three host calls in one model response.
const THREE_CALLS: &str =
    "call select_issue {\"number\": 1}\ncall select_issue {\"number\": 2}\ncall open_tab {\"tab\": \"x\"}";

/// Starts a turn whose one host call is left pending; returns its response.
async fn pending_select(app: &TestApp, session_id: &str) -> Value {
    let (status, first) = app
        .say(
            session_id,
            "m1",
            "call select_issue {\"number\": 42}",
            Some(tasks_context()),
        )
        .await;
    assert_eq!(status, 200, "{first}");
    first
}

fn assert_conflict(status: reqwest::StatusCode, answer: &Value, words: &[&str]) {
    assert_eq!(status, 409, "{answer}");
    assert_eq!(answer["type"], "session_error", "{answer}");
    let sentence = answer["error"].as_str().unwrap();
    for word in words {
        assert!(
            sentence.contains(word),
            "{sentence:?} should mention {word:?}"
        );
    }
}

#[actix_web::test]
async fn one_host_action_is_stored_shown_pending_and_resumed_on_the_same_message() {
    let app = spawn_app().await;
    let first = pending_select(&app, "one").await;
    let call_id = pending_call_id(&first);
    assert_eq!(first["pending_tool_call"]["tool_name"], "select_issue");
    assert_eq!(first["pending_tool_call"]["queued"], json!([]));
    let record = app.tool_record("one", &call_id).await;
    assert_eq!(record["category"], "host");
    assert_eq!(record["input"], json!({"number": 42}));
    assert!(record.get("output").is_none(), "{record}");
    let pending = &app.session("one").await["pending_action"];
    assert_eq!(pending["tool_call_id"], call_id.as_str());
    assert_eq!(pending["tool_name"], "select_issue");
    assert_eq!(pending["arguments"], json!({"number": 42}));
    assert_eq!(pending["assistant_message_id"], first["message_id"]);
    assert_eq!(pending["queued"], json!([]));

    let (status, resumed) = app
        .continue_call("one", "m2", &call_id, json!({"selected": 42}))
        .await;
    assert_eq!(status, 200, "{resumed}");
    assert_eq!(resumed["message_id"], first["message_id"]);
    assert!(resumed["pending_tool_call"].is_null(), "{resumed}");
    assert!(
        resumed["content"]
            .as_str()
            .unwrap()
            .contains("select_issue → {\"selected\":42}"),
        "{resumed}"
    );
    let record = app.tool_record("one", &call_id).await;
    assert_eq!(record["output"], json!({"selected": 42}));
    assert_eq!(record["outcome"], "success");
    assert!(app.session("one").await["pending_action"].is_null());
}

#[actix_web::test]
async fn a_batch_of_three_host_calls_is_handed_over_one_at_a_time_in_order() {
    let app = spawn_app().await;
    let (status, first) = app
        .say("batch", "m1", THREE_CALLS, Some(tasks_context()))
        .await;
    assert_eq!(status, 200, "{first}");
    let ids: Vec<String> = tool_records_in_order(&app.tree("batch").await);
    assert_eq!(ids.len(), 3);
    assert_eq!(pending_call_id(&first), ids[0]);
    assert_eq!(
        first["pending_tool_call"]["queued"],
        json!([ids[1], ids[2]])
    );
    assert_eq!(first["usage"]["requests"], 1);

    let (status, second) = app
        .continue_call("batch", "m2", &ids[0], json!("one"))
        .await;
    assert_eq!(status, 200, "{second}");
    assert_eq!(pending_call_id(&second), ids[1]);
    assert_eq!(second["pending_tool_call"]["tool_name"], "select_issue");
    assert_eq!(
        second["pending_tool_call"]["arguments"],
        json!({"number": 2})
    );
    assert_eq!(second["pending_tool_call"]["queued"], json!([ids[2]]));
    assert_eq!(second["usage"]["requests"], 1, "no model ran: {second}");
    assert_eq!(second["message_id"], first["message_id"]);
    assert_eq!(
        app.session("batch").await["pending_action"]["queued"],
        json!([ids[2]])
    );

    let (status, third) = app
        .continue_call("batch", "m3", &ids[1], json!("two"))
        .await;
    assert_eq!(status, 200, "{third}");
    assert_eq!(pending_call_id(&third), ids[2]);
    assert_eq!(third["pending_tool_call"]["tool_name"], "open_tab");
    assert_eq!(third["pending_tool_call"]["queued"], json!([]));
    assert_eq!(third["usage"]["requests"], 1, "no model ran: {third}");

    let (status, last) = app
        .continue_call("batch", "m4", &ids[2], json!("three"))
        .await;
    assert_eq!(status, 200, "{last}");
    assert!(last["pending_tool_call"].is_null(), "{last}");
    assert_eq!(
        last["usage"]["requests"], 2,
        "the model resumed once: {last}"
    );
    assert_eq!(last["message_id"], first["message_id"]);
    assert_eq!(
        last["content"],
        "Tool results: select_issue → one; select_issue → two; open_tab → three"
    );
}

/// Call ids in the order they were stored.
fn tool_records_in_order(tree: &Value) -> Vec<String> {
    tree.as_array()
        .unwrap()
        .iter()
        .flat_map(|message| message["segments"].as_array().cloned().unwrap_or_default())
        .flat_map(|segment| segment["tools"].as_array().cloned().unwrap_or_default())
        .map(|tool| tool["id"].as_str().unwrap().to_string())
        .collect()
}

#[actix_web::test]
async fn a_queued_call_answered_out_of_order_names_the_call_to_answer_first() {
    let app = spawn_app().await;
    let (_, first) = app
        .say("order", "m1", THREE_CALLS, Some(tasks_context()))
        .await;
    let pending = pending_call_id(&first);
    let queued = first["pending_tool_call"]["queued"][1]
        .as_str()
        .unwrap()
        .to_string();
    let (status, answer) = app
        .continue_call("order", "m2", &queued, json!("early"))
        .await;
    assert_conflict(
        status,
        &answer,
        &[&queued, &format!("answer {pending:?} first")],
    );
    assert_eq!(
        app.session("order").await["pending_action"]["tool_call_id"],
        pending.as_str()
    );
    assert!(app
        .tool_record("order", &queued)
        .await
        .get("output")
        .is_none());
}

#[actix_web::test]
async fn a_failed_outcome_is_stored_as_failed_and_the_model_sees_an_error_result() {
    let fake = FakeProvider::start();
    let base_url = fake.base_url_anthropic();
    let app = spawn_app_with(&[
        ("LLM__PRIMARY_MODEL", "anthropic:claude-test"),
        ("ANTHROPIC_BASE_URL", &base_url),
        ("ANTHROPIC_API_KEY", "sk-ant-test"),
    ])
    .await;
    fake.push(Script::anthropic_tool_use(&[(
        "toolu_1",
        "select_issue",
        "{\"number\": 42}",
    )]));
    fake.push(Script::anthropic_text(&["Sorry, ", "that failed."]));
    let (status, first) = app
        .say("failed", "m1", "select 42", Some(tasks_context()))
        .await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(pending_call_id(&first), "toolu_1");
    let (status, resumed) = app
        .fail_call("failed", "m2", "toolu_1", json!("issue 42 is locked"))
        .await;
    assert_eq!(status, 200, "{resumed}");
    assert_eq!(resumed["content"], "Sorry, that failed.");
    let record = app.tool_record("failed", "toolu_1").await;
    assert_eq!(record["status"], "failed");
    assert_eq!(record["outcome"], "failed");
    assert_eq!(record["output"], "issue 42 is locked");

    let requests = fake.requests();
    assert_eq!(requests.len(), 2);
    let messages = requests[1].body["messages"].as_array().unwrap();
    let result = messages
        .iter()
        .flat_map(|message| message["content"].as_array().cloned().unwrap_or_default())
        .find(|block| block["type"] == "tool_result")
        .expect("the tool result reaches the model");
    assert_eq!(result["tool_use_id"], "toolu_1");
    assert_eq!(result["is_error"], true, "{result}");
    assert!(
        result["content"].to_string().contains("issue 42 is locked"),
        "{result}"
    );
}

#[actix_web::test]
async fn a_duplicate_continuation_is_a_409_naming_the_call_and_its_recorded_status() {
    let app = spawn_app().await;
    let call_id = pending_call_id(&pending_select(&app, "dup").await);
    let (status, _) = app
        .continue_call("dup", "m2", &call_id, json!({"ok": true}))
        .await;
    assert_eq!(status, 200);
    let tree_before = app.get_text("/api/sessions/dup/tree").await;
    let (status, answer) = app
        .continue_call("dup", "m3", &call_id, json!({"ok": "again"}))
        .await;
    assert_conflict(
        status,
        &answer,
        &[&call_id, "already recorded", "(status: completed)"],
    );
    assert!(!answer["error"].to_string().contains("success"), "{answer}");
    assert_eq!(app.get_text("/api/sessions/dup/tree").await, tree_before);

    let failed_id = pending_call_id(
        &app.say("dup", "m4", "call open_tab {\"tab\": \"a\"}", None)
            .await
            .1,
    );
    let (status, _) = app.fail_call("dup", "m5", &failed_id, json!("no")).await;
    assert_eq!(status, 200);
    let (status, answer) = app
        .continue_call("dup", "m6", &failed_id, json!("yes"))
        .await;
    assert_conflict(status, &answer, &[&failed_id, "status: failed"]);
}

#[actix_web::test]
async fn a_superseded_call_is_refused_and_stored_as_superseded() {
    let app = spawn_app().await;
    let call_id = pending_call_id(&pending_select(&app, "super").await);
    let (status, newer) = app.say("super", "m2", "say never mind", None).await;
    assert_eq!(status, 200, "{newer}");
    assert_eq!(newer["content"], "never mind");
    assert!(app.session("super").await["pending_action"].is_null());
    let (status, answer) = app
        .continue_call("super", "m3", &call_id, json!({"selected": 42}))
        .await;
    assert_conflict(status, &answer, &[&call_id, "superseded"]);
    let record = app.tool_record("super", &call_id).await;
    assert_eq!(record["status"], "superseded");
    assert_eq!(record["outcome"], "interrupted");
}

#[actix_web::test]
async fn fifty_identical_racing_continuations_are_accepted_exactly_once() {
    let app = spawn_app().await;
    let call_id = pending_call_id(&pending_select(&app, "race").await);
    let body = json!({"id": "m2", "session_id": "race", "content": "", "tool_call_id": call_id, "tool_result": {"n": 1}});
    let answers = futures_util::future::join_all((0..50).map(|_| app.post_chat(&body))).await;
    let n_accepted = answers.iter().filter(|(status, _)| *status == 200).count();
    let n_refused = answers.iter().filter(|(status, _)| *status == 409).count();
    assert_eq!((n_accepted, n_refused), (1, 49), "{answers:?}");
    for (status, answer) in &answers {
        if *status == 409 {
            assert_conflict(*status, answer, &[&call_id, "already recorded"]);
        }
    }
    let records = tool_records(&app.tree("race").await, &call_id);
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(records[0]["output"], json!({"n": 1}));
    let info = app.session("race").await;
    assert_eq!(info["message_count"], 2, "{info}");
    assert!(info["pending_action"].is_null());
}

#[actix_web::test]
async fn a_continuation_for_an_unknown_session_is_a_409() {
    let app = spawn_app().await;
    let (status, answer) = app.continue_call("nobody", "m1", "call_x", json!({})).await;
    assert_conflict(status, &answer, &["call_x", "does not exist"]);
    assert_eq!(app.get("/api/sessions/nobody").await.0, 404);
}

#[actix_web::test]
async fn a_continuation_with_nothing_pending_is_a_409() {
    let app = spawn_app().await;
    app.say("idle", "m1", "say hi", None).await;
    let (status, answer) = app.continue_call("idle", "m2", "call_x", json!({})).await;
    assert_conflict(status, &answer, &["call_x", "nothing is pending"]);
}

#[actix_web::test]
async fn repair_resolves_the_pending_and_unresolved_calls_as_unknown() {
    let app = spawn_app().await;
    let (_, first) = app
        .say("repair", "m1", THREE_CALLS, Some(tasks_context()))
        .await;
    let pending = pending_call_id(&first);
    let (status, info) = app
        .post_json("/api/sessions/repair/repair", &json!({}))
        .await;
    assert_eq!(status, 200, "{info}");
    assert!(info["pending_action"].is_null(), "{info}");
    assert!(app.session("repair").await["pending_action"].is_null());
    for call_id in tool_records_in_order(&app.tree("repair").await) {
        let record = app.tool_record("repair", &call_id).await;
        assert_eq!(record["status"], "unknown", "{record}");
        assert_eq!(record["outcome"], "interrupted", "{record}");
    }
    let (status, answer) = app.continue_call("repair", "m2", &pending, json!({})).await;
    assert_conflict(status, &answer, &[&pending, "status: unknown"]);
    let (status, next) = app.say("repair", "m3", "say fresh start", None).await;
    assert_eq!(status, 200, "{next}");
    assert_eq!(next["content"], "fresh start");
}

#[actix_web::test]
async fn a_screenshot_in_a_host_result_is_kept_from_the_model_and_offered_to_look_at_screen() {
    let app = spawn_app().await;
    let call_id = pending_call_id(&pending_select(&app, "shot").await);
    let result =
        json!({"selected": 42, "view": {"screenshot": "data:image/png;base64,iVBORw0KGgo="}});
    let (status, resumed) = app.continue_call("shot", "m2", &call_id, result).await;
    assert_eq!(status, 200, "{resumed}");
    let content = resumed["content"].as_str().unwrap();
    assert!(!content.contains("data:image"), "{content}");
    assert!(content.contains("look_at_screen"), "{content}");
    let (_, tree) = app.get_text("/api/sessions/shot/tree").await;
    assert!(!tree.contains("data:image"), "{tree}");
    let record = app.tool_record("shot", &call_id).await;
    assert_eq!(record["output"]["selected"], 42);

    // A later message without a screenshot of its own has none: the old
    // screen is not offered again, so the call goes back to the model.
    let (status, looked) = app.say("shot", "m3", "call look_at_screen {}", None).await;
    assert_eq!(status, 200, "{looked}");
    let look = tool_records_in_order(&app.tree("shot").await)
        .pop()
        .unwrap();
    let record = app.tool_record("shot", &look).await;
    assert_eq!(record["outcome"], "failed", "{record}");
    assert_eq!(
        record["output"]["error_code"], "invalid_arguments",
        "{record}"
    );

    // A message that brings one offers look_at_screen, and the image is never stored.
    let with_screenshot = json!({"id": "m4", "session_id": "shot", "content": "call look_at_screen {}",
                                 "screenshot": "data:image/png;base64,iVBORw0KGgo="});
    let (status, looked) = app.post_chat(&with_screenshot).await;
    assert_eq!(status, 200, "{looked}");
    let look = tool_records_in_order(&app.tree("shot").await)
        .pop()
        .unwrap();
    let record = app.tool_record("shot", &look).await;
    assert_eq!(record["name"], "look_at_screen");
    assert_eq!(record["outcome"], "success", "{record}");
    let (_, tree) = app.get_text("/api/sessions/shot/tree").await;
    assert!(
        !tree.contains("data:image"),
        "a screenshot is never stored: {tree}"
    );
}

#[actix_web::test]
async fn a_data_uri_inside_a_text_result_is_removed_too() {
    let app = spawn_app().await;
    let call_id = pending_call_id(&pending_select(&app, "inline").await);
    let result = json!({"note": "Selected. Screen: data:image/png;base64,iVBORw0KGgo= (after)"});
    let (status, resumed) = app.continue_call("inline", "m2", &call_id, result).await;
    assert_eq!(status, 200, "{resumed}");
    assert!(
        !resumed["content"].as_str().unwrap().contains("data:image"),
        "{resumed}"
    );
    let output = app.tool_record("inline", &call_id).await["output"].clone();
    let note = output["note"].as_str().unwrap();
    assert!(
        note.starts_with("Selected. Screen: ") && note.ends_with(" (after)"),
        "{note}"
    );
    assert!(
        !note.contains("data:image") && !note.contains("iVBORw0KGgo"),
        "{note}"
    );
}

#[actix_web::test]
async fn the_turn_resumed_after_a_screenshot_result_offers_look_at_screen_without_the_image() {
    let fake = FakeProvider::start();
    let app =
        crate::helpers::spawn_app_owned(&crate::helpers::openai_settings(&fake.base_url_openai()))
            .await;
    fake.push(Script::openai_tool_calls(&[(
        "call_1",
        "select_issue",
        "{\"number\": 42}",
    )]));
    app.say("shot-ai", "m1", "select", Some(tasks_context()))
        .await;
    let result = json!({"selected": 42, "screenshot": "data:image/png;base64,iVBORw0KGgo="});
    let (status, resumed) = app.continue_call("shot-ai", "m2", "call_1", result).await;
    assert_eq!(status, 200, "{resumed}");
    let requests = fake.requests();
    assert!(
        !crate::helpers::offered_tools(&requests[0].body).contains(&"look_at_screen".to_string())
    );
    assert!(
        crate::helpers::offered_tools(&requests[1].body).contains(&"look_at_screen".to_string())
    );
    assert!(
        !requests[1].body.to_string().contains("iVBORw0KGgo"),
        "{}",
        requests[1].body
    );
}

#[actix_web::test]
async fn a_continuation_resumes_in_the_output_mode_its_call_was_made_in() {
    let app = spawn_app().await;
    let call_id = pending_call_id(&pending_select(&app, "mode").await);
    let body = json!({"id": "m2", "session_id": "mode", "content": "", "tool_call_id": call_id,
                      "tool_result": "done", "output_mode": "host_tools"});
    let (status, resumed) = app.post_chat(&body).await;
    assert_eq!(status, 200, "{resumed}");
    assert_eq!(
        resumed["content"], "Tool results: select_issue → done",
        "{resumed}"
    );
    assert!(resumed["decision"].is_null(), "{resumed}");
}

#[actix_web::test]
async fn a_silent_decision_is_pending_then_completed_by_its_receipt_without_a_model_run() {
    let app = spawn_app().await;
    let context = json!({"version": 1, "actions": [{"name": "set_position", "description": "Set x.",
        "parameters": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"], "additionalProperties": false}}]});
    let body = json!({"id": "d1", "session_id": "decision", "output_mode": "host_tools",
                      "content": "say moving\ncall set_position {\"x\": 3}", "host_context": context});
    let (status, first) = app.post_chat(&body).await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(first["decision"], "pending");
    assert!(first["content"].is_null(), "{first}");
    assert_eq!(first["pending_tool_call"]["tool_name"], "set_position");
    assert_eq!(first["pending_tool_call"]["queued"], json!([]));
    let call_id = pending_call_id(&first);
    assert_eq!(
        app.session("decision").await["pending_action"]["output_mode"],
        "host_tools"
    );
    let tree = app.tree("decision").await;
    let kinds: Vec<&str> = tree[1]["segments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|segment| segment["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["tool_group"],
        "prose is never saved in this mode: {tree}"
    );

    let (status, receipt) = app
        .continue_call("decision", "d2", &call_id, json!({"x": 3}))
        .await;
    assert_eq!(status, 200, "{receipt}");
    assert_eq!(receipt["decision"], "completed");
    assert!(receipt["content"].is_null(), "{receipt}");
    assert_eq!(receipt["usage"]["requests"], 1, "no model ran: {receipt}");
    let (status, late) = app
        .continue_call("decision", "d3", &call_id, json!({"x": 3}))
        .await;
    assert_conflict(status, &late, &[&call_id, "already recorded"]);

    let hold = json!({"id": "d4", "session_id": "decision", "output_mode": "host_tools", "content": "hold"});
    let (status, held) = app.post_chat(&hold).await;
    assert_eq!(status, 200, "{held}");
    assert_eq!(held["decision"], "hold");
    assert!(held["pending_tool_call"].is_null());
}

#[actix_web::test]
async fn a_superseded_batch_refuses_its_queued_calls_as_superseded() {
    let app = spawn_app().await;
    let (_, first) = app
        .say("super-batch", "m1", THREE_CALLS, Some(tasks_context()))
        .await;
    let queued = first["pending_tool_call"]["queued"][0]
        .as_str()
        .unwrap()
        .to_string();
    app.say("super-batch", "m2", "say later", None).await;
    let (status, answer) = app
        .continue_call("super-batch", "m3", &queued, json!("x"))
        .await;
    assert_conflict(status, &answer, &[&queued, "superseded"]);
}
