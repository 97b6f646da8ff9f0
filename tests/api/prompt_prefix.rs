//! The stable prefix (runtime.md section 3): each provider request begins with
//! exactly the previous request and its response, so the provider's prompt
//! cache holds; the system prompt never changes; the host context block leads
//! each user message and is replayed byte for byte.

use serde_json::{json, Value};

use crate::fake_provider::{FakeProvider, Script};
use crate::helpers::{openai_settings, pending_call_id, spawn_app_owned, tasks_context};

/// The text of an OpenAI user message, whether a string or text parts.
fn user_text(message: &Value) -> String {
    match &message["content"] {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|part| part["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        other => panic!("user content {other}"),
    }
}

fn host_block(text: &str) -> &str {
    let end = text
        .find("</host_context>")
        .expect("a closed host_context block")
        + "</host_context>".len();
    &text[..end]
}

fn messages(body: &Value) -> Vec<Value> {
    body["messages"].as_array().expect("messages").clone()
}

#[actix_web::test]
async fn each_turn_replays_the_previous_request_and_response_as_a_stable_prefix() {
    let fake = FakeProvider::start();
    let app = spawn_app_owned(&openai_settings(&fake.base_url_openai())).await;
    fake.push(Script::openai_text(&["Hello ", "there."]));
    let (status, first) = app.say("prefix", "m1", "hi", Some(tasks_context())).await;
    assert_eq!(status, 200, "{first}");

    fake.push(Script::openai_tool_calls(&[(
        "call_1",
        "select_issue",
        "{\"number\": 42}",
    )]));
    fake.push(Script::openai_text(&["Selected ", "42."]));
    let (status, second) = app.say("prefix", "m2", "select 42", None).await;
    assert_eq!(status, 200, "{second}");
    assert_eq!(pending_call_id(&second), "call_1");
    let (status, resumed) = app
        .continue_call("prefix", "m3", "call_1", json!({"selected": 42}))
        .await;
    assert_eq!(status, 200, "{resumed}");
    assert_eq!(resumed["content"], "Selected 42.");

    fake.push(Script::openai_text(&["Done."]));
    let (status, third) = app.say("prefix", "m4", "thanks", None).await;
    assert_eq!(status, 200, "{third}");

    let requests: Vec<Vec<Value>> = fake
        .requests()
        .iter()
        .map(|request| messages(&request.body))
        .collect();
    assert_eq!(requests.len(), 4, "turn 1, turn 2 twice, turn 3");
    let system = &requests[0][0];
    assert_eq!(system["role"], "system");
    for request in &requests {
        assert_eq!(
            &request[0], system,
            "the system prompt is the same in every request"
        );
    }

    // Turn 1's request and response begin turn 2's first request.
    let turn_1 = &requests[0];
    assert_eq!(&requests[1][..turn_1.len()], &turn_1[..]);
    assert_eq!(
        requests[1][turn_1.len()],
        json!({"role": "assistant", "content": "Hello there."})
    );

    // Turn 2 resumed: the tool call and its result follow, then the current context.
    let turn_2_first = &requests[1];
    let turn_2_last = &requests[2];
    assert_eq!(&turn_2_last[..turn_2_first.len()], &turn_2_first[..]);
    let replayed_call = &turn_2_last[turn_2_first.len()];
    assert_eq!(replayed_call["role"], "assistant");
    assert_eq!(replayed_call["tool_calls"][0]["id"], "call_1");
    assert_eq!(
        replayed_call["tool_calls"][0]["function"]["name"],
        "select_issue"
    );
    assert_eq!(turn_2_last[turn_2_first.len() + 1]["role"], "tool");
    assert_eq!(
        turn_2_last[turn_2_first.len() + 1]["tool_call_id"],
        "call_1"
    );

    // Turn 3 begins with exactly turn 2's last request and its response.
    let turn_3 = &requests[3];
    assert_eq!(
        &turn_3[..turn_2_last.len()],
        &turn_2_last[..],
        "turn 3 extends turn 2's last request"
    );
    assert_eq!(
        turn_3[turn_2_last.len()],
        json!({"role": "assistant", "content": "Selected 42."})
    );
    assert_eq!(
        turn_3.len(),
        turn_2_last.len() + 2,
        "then only the new user message"
    );

    // Every user message leads with the same rendered host context.
    let user_messages: Vec<String> = turn_3
        .iter()
        .filter(|message| message["role"] == "user")
        .map(user_text)
        .collect();
    assert_eq!(
        user_messages.len(),
        4,
        "three user messages and the context after the tool result: {user_messages:?}"
    );
    let block = host_block(&user_messages[0]).to_string();
    assert!(block.starts_with("<host_context>"), "{block}");
    assert!(block.contains("Fix login"), "{block}");
    for text in &user_messages {
        assert!(text.starts_with("<host_context>"), "{text}");
        assert_eq!(
            host_block(text),
            block,
            "the same context renders to the same bytes"
        );
    }
    assert!(user_messages[0].ends_with("hi"));
    assert!(user_messages[3].ends_with("thanks"));
}
