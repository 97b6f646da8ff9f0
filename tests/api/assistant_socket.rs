//! The `/assistant` namespace driven through whole turns by the stock
//! python-socketio and socket.io-client (polling then upgrade, and websocket
//! only): host actions, batches, cancellation, steering, validation errors,
//! joined context, parity with HTTP, disconnects and stalled clients. Every
//! run also checks the per-turn event order and the delta segment metadata.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use futures_util::future::join_all;
use serde_json::{json, Value};

use crate::helpers::{spawn_app, spawn_app_with, tasks_context, TestApp};
use crate::raw_ws::RawWs;
use crate::socketio_helpers::{run_scenario, Client};

/// Every stock client with every transport choice.
const CLIENT_MODES: [(Client, &str); 4] = [
    (Client::Python, "default"),
    (Client::Python, "websocket"),
    (Client::Node, "default"),
    (Client::Node, "websocket"),
];

/// Small ping settings for the tests that wait for a dead client to be dropped.
const FAST_PING: [(&str, &str); 2] = [
    ("SOCKETIO__PING_INTERVAL_MS", "300"),
    ("SOCKETIO__PING_TIMEOUT_MS", "300"),
];

/// How often, and how many times, a test polls the session routes for a turn
/// to finish (a bound, not a timing being tested).
const POLL_EVERY: Duration = Duration::from_millis(100);
const MAX_POLLS: usize = 150;

/// One scenario run by one client in one mode.
struct Run {
    label: String,
    session_id: String,
    result: Value,
}

impl Run {
    fn events(&self) -> &[Value] {
        self.result["events"].as_array().map_or(&[], Vec::as_slice)
    }

    fn acks(&self) -> &[Value] {
        self.result["acks"].as_array().map_or(&[], Vec::as_slice)
    }

    /// The events split into turns (checked for order and delta metadata),
    /// and the events outside any turn.
    fn turns(&self) -> (Vec<Vec<Value>>, Vec<Value>) {
        split_turns(&self.label, self.events())
    }
}

/// Runs `scenario(session_id)` with each `(client, mode)`, concurrently, one
/// session each; asserts each connected, finished without error and ended on
/// websocket (the default mode upgrades).
async fn run_with(
    app: &TestApp,
    name: &str,
    client_modes: &[(Client, &str)],
    scenario: impl Fn(&str) -> Value,
) -> Vec<Run> {
    let runs = client_modes.iter().map(|&(client, mode)| {
        let label = format!("{name} {client:?}/{mode}");
        let session_id = format!("{name}-{client:?}-{mode}").to_lowercase();
        let steps = scenario(&session_id);
        let url = app.address.clone();
        async move {
            let result = run_scenario(client, url, mode, steps).await;
            Run {
                label,
                session_id,
                result,
            }
        }
    });
    let runs = join_all(runs).await;
    for run in &runs {
        assert_eq!(
            run.result["error"],
            Value::Null,
            "{}: {:#}",
            run.label,
            run.result
        );
        assert_eq!(run.result["connected"], true, "{}", run.label);
        assert_eq!(run.result["transport"], "websocket", "{}", run.label);
        check_session_ids(run);
    }
    runs
}

async fn run_everywhere(app: &TestApp, name: &str, scenario: impl Fn(&str) -> Value) -> Vec<Run> {
    run_with(app, name, &CLIENT_MODES, scenario).await
}

/// Every `assistant:*` event names the session it belongs to, so a client
/// following several sessions on one socket can route each.
fn check_session_ids(run: &Run) {
    for event in run.events() {
        assert_eq!(
            event["data"]["session_id"],
            run.session_id.as_str(),
            "{}: {event}",
            run.label
        );
    }
}

/// Splits events into turns: each starts with `status: started` and ends with
/// `status: completed`, with nothing of the turn outside that pair, and its
/// deltas carry consistent segment metadata.
fn split_turns(label: &str, events: &[Value]) -> (Vec<Vec<Value>>, Vec<Value>) {
    let mut turns = Vec::new();
    let mut outside = Vec::new();
    let mut current: Option<Vec<Value>> = None;
    for event in events {
        let name = event["event"].as_str().unwrap_or_default();
        let status = event["data"]["status"].as_str();
        if name == "assistant:status" {
            match (status, current.take()) {
                (Some("started"), None) => current = Some(vec![event.clone()]),
                (Some("completed"), Some(mut turn)) => {
                    turn.push(event.clone());
                    turns.push(turn);
                }
                _ => panic!("{label}: status {status:?} out of order in {events:#?}"),
            }
            continue;
        }
        match current.as_mut() {
            Some(turn) => turn.push(event.clone()),
            None => outside.push(event.clone()),
        }
    }
    assert!(
        current.is_none(),
        "{label}: a turn never completed: {events:#?}"
    );
    for turn in &turns {
        check_deltas(label, turn);
        announced_segments(label, turn);
    }
    (turns, outside)
}

/// Each delta names its segment; a segment's first delta has index 0 and
/// `segment_started`, the next ones count up; kind matches the event name.
fn check_deltas(label: &str, turn: &[Value]) {
    let mut segments: HashMap<String, (u64, u64)> = HashMap::new();
    for event in turn {
        let kind = match event["event"].as_str() {
            Some("assistant:text_delta") => "text",
            Some("assistant:thinking_delta") => "thinking",
            _ => continue,
        };
        let delta = &event["data"];
        assert!(delta["content"].is_string(), "{label}: {delta}");
        assert_eq!(delta["segment_kind"], kind, "{label}: {delta}");
        let segment_id = delta["segment_id"]
            .as_str()
            .unwrap_or_else(|| panic!("{label}: no segment_id in {delta}"))
            .to_owned();
        let segment_index = delta["segment_index"].as_u64().expect("segment_index");
        let delta_index = delta["delta_index"].as_u64().expect("delta_index");
        let started = delta["segment_started"].as_bool().expect("segment_started");
        match segments.get(&segment_id) {
            None => {
                assert!(started && delta_index == 0, "{label}: first delta {delta}");
            }
            Some(&(index, last_delta)) => {
                assert!(!started, "{label}: restarted segment {delta}");
                assert_eq!(segment_index, index, "{label}: {delta}");
                assert_eq!(delta_index, last_delta + 1, "{label}: {delta}");
            }
        }
        segments.insert(segment_id, (segment_index, delta_index));
    }
}

/// The segment indices a turn announces, in order, checked to follow on
/// without a gap. A segment is announced by its first delta (text, thinking),
/// by its `tool_call` / `tool_error` events (a tool group, one index for the
/// group), or by `steering_delivered` / `context_delivered` (a runtime note).
fn announced_segments(label: &str, turn: &[Value]) -> Vec<u64> {
    let mut announced: Vec<u64> = Vec::new();
    for event in turn {
        let data = &event["data"];
        let (index, group) = match event["event"].as_str() {
            Some("assistant:text_delta" | "assistant:thinking_delta")
                if data["segment_started"] == true =>
            {
                (data["segment_index"].as_u64(), false)
            }
            Some("assistant:tool_call" | "assistant:tool_error") => {
                (data["segment_index"].as_u64(), true)
            }
            Some("assistant:steering_delivered" | "assistant:context_delivered") => {
                (data["segment_index"].as_u64(), false)
            }
            _ => continue,
        };
        let index = index.unwrap_or_else(|| panic!("{label}: no segment_index in {event}"));
        match announced.last() {
            Some(&last) if group && index == last => continue,
            Some(&last) => assert_eq!(index, last + 1, "{label}: gap before {event}"),
            None => {}
        }
        announced.push(index);
    }
    announced
}

/// The payloads of the events named `name` in a turn.
fn all<'a>(turn: &'a [Value], name: &str) -> Vec<&'a Value> {
    turn.iter()
        .filter(|event| event["event"] == name)
        .map(|event| &event["data"])
        .collect()
}

/// The one event named `name` in a turn.
fn only<'a>(label: &str, turn: &'a [Value], name: &str) -> &'a Value {
    let found = all(turn, name);
    assert_eq!(found.len(), 1, "{label}: one {name} in {turn:#?}");
    found[0]
}

fn streamed_text(turn: &[Value]) -> String {
    all(turn, "assistant:text_delta")
        .iter()
        .filter_map(|delta| delta["content"].as_str())
        .collect()
}

/// `w1 w2 ... wN`: a reply long enough to be cancelled or steered mid-stream.
fn words(n: usize) -> String {
    (1..=n)
        .map(|i| format!("w{i}"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn message(session_id: &str, id: &str, content: &str) -> Value {
    json!({"id": id, "session_id": session_id, "content": content})
}

fn continuation(session_id: &str, id: &str, result: Value) -> Value {
    json!({"id": id, "session_id": session_id, "content": "",
           "tool_call_id": "$pending_call_id", "tool_result": result})
}

fn completed(count: usize) -> Value {
    json!({"wait": "assistant:status", "count": count, "match": {"status": "completed"}})
}

fn call(event: &str, data: Value) -> Value {
    json!({"call": event, "data": data})
}

async fn messages(app: &TestApp, session_id: &str) -> Vec<Value> {
    let (status, body) = app
        .get(&format!("/api/sessions/{session_id}/messages"))
        .await;
    assert_eq!(status, 200, "{body}");
    body.as_array().cloned().unwrap_or_default()
}

/// The text segments of a stored message, joined.
fn stored_text(message: &Value) -> String {
    message["segments"]
        .as_array()
        .map(|segments| {
            segments
                .iter()
                .filter(|segment| segment["kind"] == "text")
                .filter_map(|segment| segment["text"].as_str())
                .collect()
        })
        .unwrap_or_default()
}

/// Polls the session until no turn is running (bounded by `MAX_POLLS`).
async fn wait_until_idle(app: &TestApp, session_id: &str) -> Value {
    for _ in 0..MAX_POLLS {
        let (status, info) = app.get(&format!("/api/sessions/{session_id}")).await;
        if status == 200 && info["turn_running"] == false {
            return info;
        }
        tokio::time::sleep(POLL_EVERY).await;
    }
    panic!("session {session_id} still has a running turn");
}

#[actix_web::test]
async fn host_action_round_trip_with_both_clients_and_transports() {
    let app = spawn_app().await;
    let runs = run_everywhere(&app, "roundtrip", |session| {
        let mut first = message(session, "m1", "call select_issue {\"number\": 42}");
        first["host_context"] = tasks_context();
        json!({"steps": [
            call("assistant_message", first),
            completed(1),
            call("assistant_message", continuation(session, "m2", json!({"selected": 42}))),
            completed(2),
        ]})
    })
    .await;
    for run in &runs {
        let label = &run.label;
        let (turns, outside) = run.turns();
        assert!(outside.is_empty(), "{label}: {outside:#?}");
        assert_eq!(turns.len(), 2, "{label}");
        let tool_call = only(label, &turns[0], "assistant:tool_call");
        assert_eq!(tool_call["tool_name"], "select_issue", "{label}");
        assert_eq!(tool_call["category"], "host", "{label}");
        assert_eq!(tool_call["arguments"], json!({"number": 42}), "{label}");
        let asked = only(label, &turns[0], "assistant:final_response");
        assert_eq!(
            asked["pending_tool_call"]["call_id"], tool_call["call_id"],
            "{label}"
        );
        assert_eq!(asked["streamed"], true, "{label}");
        let tool_result = only(label, &turns[1], "assistant:tool_result");
        assert_eq!(tool_result["call_id"], tool_call["call_id"], "{label}");
        assert_eq!(tool_result["output"], json!({"selected": 42}), "{label}");
        // Both name the assistant message they belong to, before any text.
        assert_eq!(tool_call["message_id"], asked["message_id"], "{label}");
        assert_eq!(tool_result["message_id"], asked["message_id"], "{label}");
        let answered = only(label, &turns[1], "assistant:final_response");
        assert_eq!(answered["pending_tool_call"], Value::Null, "{label}");
        let content = answered["content"].as_str().unwrap_or_default();
        assert!(
            content.starts_with("Tool results: select_issue"),
            "{label}: {content}"
        );
        assert_eq!(content, streamed_text(&turns[1]), "{label}");
        // The call's group is 0; the continuation's host-context note 1
        // (announced), its answer 2.
        assert_eq!(announced_segments(label, &turns[0]), [0], "{label}");
        assert_eq!(announced_segments(label, &turns[1]), [1, 2], "{label}");
        let context = only(label, &turns[1], "assistant:context_delivered");
        assert_eq!(
            context["segment_kind"], "host_context",
            "{label}: {context}"
        );
        for ack in run.acks() {
            assert_eq!(ack["ok"], true, "{label}: {ack}");
            assert_eq!(ack["accepted_as"], "turn", "{label}: {ack}");
        }
    }
}

#[actix_web::test]
async fn a_duplicate_continuation_is_an_error_saying_status_completed() {
    let app = spawn_app().await;
    // The call is answered over HTTP first; each client then sends the same
    // result again on the socket.
    let mut call_ids = HashMap::new();
    for (client, mode) in CLIENT_MODES {
        let session_id = format!("dup409-{client:?}-{mode}").to_lowercase();
        let (status, asked) = app
            .say(
                &session_id,
                "m1",
                "call select_issue {\"number\": 42}",
                Some(tasks_context()),
            )
            .await;
        assert_eq!(status, 200, "{asked}");
        let call_id = crate::helpers::pending_call_id(&asked);
        let (status, done) = app
            .continue_call(&session_id, "m2", &call_id, json!({"selected": 42}))
            .await;
        assert_eq!(status, 200, "{done}");
        call_ids.insert(session_id, call_id);
    }
    let runs = run_everywhere(&app, "dup409", |session| {
        let duplicate = json!({"id": "m3", "session_id": session, "content": "",
                               "tool_call_id": call_ids[session], "tool_result": {"selected": 42}});
        json!({"steps": [
            call("assistant_message", duplicate),
            {"wait": "assistant:error", "count": 1},
        ]})
    })
    .await;
    for run in &runs {
        let label = &run.label;
        let (turns, outside) = run.turns();
        assert!(turns.is_empty(), "{label}: {turns:#?}");
        assert_eq!(outside.len(), 1, "{label}: {outside:#?}");
        let error = &outside[0]["data"];
        assert_eq!(error["type"], "session_error", "{label}: {error}");
        assert_eq!(
            error["session_id"],
            run.session_id.as_str(),
            "{label}: {error}"
        );
        let sentence = error["message"].as_str().unwrap_or_default();
        assert!(
            sentence.contains("already recorded (status: completed)"),
            "{label}: {sentence}"
        );
        assert_eq!(run.acks()[0]["ok"], false, "{label}");
    }
}

/// After a continuation, `final_response.content` is the whole assistant
/// message (every text segment, a blank line between them), while the
/// continuation's deltas carry only the text it added.
#[actix_web::test]
async fn a_continuation_final_response_holds_the_whole_message() {
    let app = spawn_app().await;
    let runs = run_everywhere(&app, "wholemsg", |session| {
        let mut first = message(
            session,
            "m1",
            "say Let me select it.\ncall select_issue {\"number\": 42}",
        );
        first["host_context"] = tasks_context();
        json!({"steps": [
            call("assistant_message", first),
            completed(1),
            call("assistant_message", continuation(session, "m2", json!({"selected": 42}))),
            completed(2),
        ]})
    })
    .await;
    for run in &runs {
        let label = &run.label;
        let (turns, _) = run.turns();
        assert_eq!(turns.len(), 2, "{label}");
        let before = streamed_text(&turns[0]);
        assert_eq!(before, "Let me select it.", "{label}");
        let added = streamed_text(&turns[1]);
        assert!(
            added.starts_with("Tool results: select_issue"),
            "{label}: {added}"
        );
        let answered = only(label, &turns[1], "assistant:final_response");
        assert_eq!(
            answered["content"].as_str(),
            Some(format!("{before}\n\n{added}").as_str()),
            "{label}"
        );
        // text 0, group 1 in the first turn; note 2, text 3 in the second.
        assert_eq!(announced_segments(label, &turns[0]), [0, 1], "{label}");
        assert_eq!(announced_segments(label, &turns[1]), [2, 3], "{label}");
    }
}

/// The echo model's `hold` outside `output_mode: "host_tools"` (README): not
/// a tool there, so a `tool_error` whose group index the stream announces.
#[actix_web::test]
async fn hold_in_text_mode_is_a_tool_error_and_indices_stay_contiguous() {
    let app = spawn_app().await;
    let runs = run_with(&app, "holdtext", &CLIENT_MODES[..1], |session| {
        json!({"steps": [
            call("assistant_message", message(session, "m1", "hold")),
            completed(1),
        ]})
    })
    .await;
    let run = &runs[0];
    let label = &run.label;
    let (turns, _) = run.turns();
    let error = only(label, &turns[0], "assistant:tool_error");
    assert_eq!(error["tool_name"], "hold", "{label}: {error}");
    assert_eq!(error["segment_index"], 0, "{label}: {error}");
    assert_eq!(announced_segments(label, &turns[0]), [0, 1], "{label}");
}

#[actix_web::test]
async fn batch_of_host_calls_is_answered_one_by_one() {
    let app = spawn_app().await;
    let runs = run_everywhere(&app, "batch", |session| {
        let mut first = message(
            session,
            "m1",
            "call select_issue {\"number\": 1}\ncall open_tab {\"tab\": \"files\"}",
        );
        first["host_context"] = tasks_context();
        json!({"steps": [
            call("assistant_message", first),
            completed(1),
            call("assistant_message", continuation(session, "m2", json!({"selected": 1}))),
            completed(2),
            call("assistant_message", continuation(session, "m3", json!({"opened": "files"}))),
            completed(3),
        ]})
    })
    .await;
    for run in &runs {
        let label = &run.label;
        let (turns, outside) = run.turns();
        assert!(outside.is_empty(), "{label}: {outside:#?}");
        assert_eq!(turns.len(), 3, "{label}");
        let calls = all(&turns[0], "assistant:tool_call");
        let names: Vec<_> = calls.iter().map(|call| call["tool_name"].clone()).collect();
        assert_eq!(names, [json!("select_issue"), json!("open_tab")], "{label}");
        let first = only(label, &turns[0], "assistant:final_response");
        assert_eq!(
            first["pending_tool_call"]["call_id"], calls[0]["call_id"],
            "{label}"
        );
        assert_eq!(
            first["pending_tool_call"]["queued"],
            json!([calls[1]["call_id"]]),
            "{label}"
        );
        // The first answer only moves the queue on: no model request, no text.
        assert_eq!(
            only(label, &turns[1], "assistant:tool_result")["call_id"],
            calls[0]["call_id"]
        );
        assert!(all(&turns[1], "assistant:text_delta").is_empty(), "{label}");
        let second = only(label, &turns[1], "assistant:final_response");
        assert_eq!(
            second["pending_tool_call"]["call_id"], calls[1]["call_id"],
            "{label}"
        );
        assert_eq!(
            only(label, &turns[2], "assistant:tool_result")["call_id"],
            calls[1]["call_id"]
        );
        let last = only(label, &turns[2], "assistant:final_response");
        let content = last["content"].as_str().unwrap_or_default();
        assert!(
            content.starts_with("Tool results: select_issue") && content.contains("open_tab"),
            "{label}: {content}"
        );
        assert_eq!(last["pending_tool_call"], Value::Null, "{label}");
    }
}

#[actix_web::test]
async fn cancel_mid_stream_saves_the_partial_text_and_ends_in_order() {
    let app = spawn_app().await;
    let full = words(40);
    let runs = run_everywhere(&app, "cancel", |session| {
        json!({"steps": [
            {"emit": "assistant_message", "data": message(session, "m1", &format!("slow 100\nsay {full}"))},
            {"wait": "assistant:text_delta", "count": 2},
            call("assistant_cancel", json!({"session_id": session})),
            completed(1),
        ]})
    })
    .await;
    for run in &runs {
        let label = &run.label;
        assert_eq!(run.acks()[0]["cancel_requested"], true, "{label}");
        let (turns, outside) = run.turns();
        assert!(outside.is_empty(), "{label}: {outside:#?}");
        assert_eq!(turns.len(), 1, "{label}");
        let turn = &turns[0];
        let tail: Vec<_> = turn[turn.len() - 3..]
            .iter()
            .map(|e| e["event"].clone())
            .collect();
        assert_eq!(
            tail,
            [
                "assistant:final_response",
                "assistant:error",
                "assistant:status"
            ],
            "{label}"
        );
        let last = &turn[turn.len() - 3]["data"];
        assert_eq!(last["error"], true, "{label}");
        assert_eq!(last["error_type"], "cancelled", "{label}");
        assert_eq!(last["message_id"], "m1:reply", "{label}");
        let error = &turn[turn.len() - 2]["data"];
        assert_eq!(error["type"], "error", "{label}");
        assert_eq!(error["error_type"], "cancelled", "{label}");
        assert_eq!(error["terminal"], true, "{label}");
        let partial = last["content"].as_str().unwrap_or_default().to_owned();
        assert_eq!(partial, streamed_text(turn), "{label}");
        assert!(
            !partial.is_empty() && partial.len() < full.len(),
            "{label}: {partial}"
        );

        let stored = messages(&app, &run.session_id).await;
        let reply = stored.last().expect("the assistant message");
        assert_eq!(reply["id"], "m1:reply", "{label}");
        assert_eq!(reply["error_type"], "cancelled", "{label}");
        assert_eq!(stored_text(reply), partial, "{label}");
        // Cancellation keeps the usage counted before it: the provider had
        // not reported yet, so the runtime's own count of what it sent and
        // what streamed (about four characters a token).
        let usage = &last["usage"];
        assert_eq!(usage["requests"], 1, "{label}: {usage}");
        assert!(usage["input_tokens"].as_u64() > Some(0), "{label}: {usage}");
        assert_eq!(
            usage["output_tokens"].as_u64(),
            Some((partial.len() as u64).div_ceil(4)),
            "{label}: {usage}"
        );
        assert_eq!(
            usage["total_tokens"].as_u64(),
            Some(
                usage["input_tokens"].as_u64().unwrap() + usage["output_tokens"].as_u64().unwrap()
            ),
            "{label}: {usage}"
        );
        assert_eq!(&reply["usage"], usage, "{label}: stored as reported");
    }
}

#[actix_web::test]
async fn steering_joins_the_live_turn_before_its_next_request() {
    let app = spawn_app().await;
    let runs = run_everywhere(&app, "steer", |session| {
        let steering = json!({"id": "m2", "session_id": session, "content": "say steered",
                              "message_type": "steering"});
        json!({"steps": [
            {"emit": "assistant_message",
             "data": message(session, "m1", "slow 100\nsay one two three four five six\ncall get_time {}")},
            {"wait": "assistant:text_delta", "count": 1},
            call("assistant_message", steering),
            completed(1),
        ]})
    })
    .await;
    for run in &runs {
        let label = &run.label;
        assert_eq!(run.acks()[0]["ok"], true, "{label}");
        assert_eq!(run.acks()[0]["accepted_as"], "steering", "{label}");
        let (turns, outside) = run.turns();
        assert!(outside.is_empty(), "{label}: {outside:#?}");
        assert_eq!(
            turns.len(),
            1,
            "{label}: steering never starts a turn of its own"
        );
        let turn = &turns[0];
        assert_eq!(
            only(label, turn, "assistant:tool_call")["category"],
            "backend"
        );
        let content = only(label, turn, "assistant:final_response")["content"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(content.starts_with("one two"), "{label}: {content}");
        assert!(content.ends_with("steered"), "{label}: {content}");
        // text 0, the get_time group 1, the steering note 2, the answer 3.
        assert_eq!(announced_segments(label, turn), [0, 1, 2, 3], "{label}");
        let delivered = only(label, turn, "assistant:steering_delivered");
        assert_eq!(delivered["message_id"], "m2", "{label}: {delivered}");
        assert_eq!(delivered["content"], "say steered", "{label}: {delivered}");
        assert_eq!(
            delivered["segment_kind"], "steering",
            "{label}: {delivered}"
        );
        assert_eq!(
            delivered["segment_id"], "m1:reply:2",
            "{label}: {delivered}"
        );

        let stored = messages(&app, &run.session_id).await;
        let reply = stored.last().expect("the assistant message");
        let note = &reply["segments"][2];
        assert_eq!(note["kind"], "note", "{label}: {reply:#}");
        assert_eq!(note["origin"], "steering", "{label}");
        assert_eq!(note["text"], "say steered", "{label}");
    }
}

/// Steering that arrives while the turn's last response streams (no tool
/// call follows) is answered by one more request in the same turn.
#[actix_web::test]
async fn steering_during_the_last_response_is_answered_in_the_same_turn() {
    let app = spawn_app().await;
    let runs = run_everywhere(&app, "steerlast", |session| {
        let steering = json!({"id": "m2", "session_id": session, "content": "say steered",
                              "message_type": "steering"});
        json!({"steps": [
            {"emit": "assistant_message",
             "data": message(session, "m1", "slow 100\nsay one two three four five six")},
            {"wait": "assistant:text_delta", "count": 1},
            call("assistant_message", steering),
            completed(1),
        ]})
    })
    .await;
    for run in &runs {
        let label = &run.label;
        assert_eq!(run.acks()[0]["accepted_as"], "steering", "{label}");
        let (turns, outside) = run.turns();
        assert!(outside.is_empty(), "{label}: {outside:#?}");
        assert_eq!(turns.len(), 1, "{label}");
        let last = only(label, &turns[0], "assistant:final_response");
        assert_eq!(
            last["content"], "one two three four five six\n\nsteered",
            "{label}"
        );
        // The steering note takes index 1 and is announced: no gap before 2.
        assert_eq!(announced_segments(label, &turns[0]), [0, 1, 2], "{label}");
        let delivered = only(label, &turns[0], "assistant:steering_delivered");
        assert_eq!(delivered["segment_index"], 1, "{label}: {delivered}");
        assert_eq!(last["usage"]["requests"], 2, "{label}");
        let stored = messages(&app, &run.session_id).await;
        let kinds: Vec<_> = stored[1]["segments"]
            .as_array()
            .map(|segments| segments.iter().map(|s| s["kind"].clone()).collect())
            .unwrap_or_default();
        assert_eq!(kinds, ["text", "note", "text"], "{label}: {:#}", stored[1]);
    }
}

#[actix_web::test]
async fn steering_without_a_live_turn_is_promoted_to_a_turn() {
    let app = spawn_app().await;
    let runs = run_everywhere(&app, "promote", |session| {
        let steering = json!({"id": "m2", "session_id": session, "content": "say promoted",
                              "message_type": "steering"});
        json!({"steps": [
            call("assistant_message", message(session, "m1", "say hello")),
            completed(1),
            call("assistant_message", steering),
            completed(2),
        ]})
    })
    .await;
    for run in &runs {
        let label = &run.label;
        assert_eq!(run.acks()[1]["accepted_as"], "turn", "{label}");
        assert_eq!(run.acks()[1]["message_id"], "m2:reply", "{label}");
        let (turns, outside) = run.turns();
        assert!(outside.is_empty(), "{label}: {outside:#?}");
        assert_eq!(turns.len(), 2, "{label}");
        let promoted = only(label, &turns[1], "assistant:final_response");
        assert_eq!(promoted["content"], "promoted", "{label}");
        let stored = messages(&app, &run.session_id).await;
        let ids: Vec<_> = stored.iter().map(|m| m["id"].clone()).collect();
        assert_eq!(ids, ["m1", "m1:reply", "m2", "m2:reply"], "{label}");
    }
}

#[actix_web::test]
async fn invalid_message_gets_a_validation_error_naming_the_path() {
    let app = spawn_app().await;
    let runs = run_everywhere(&app, "invalid", |session| {
        let mut bad = message(session, "m1", "say never");
        let mut context = tasks_context();
        context["view"]["colour"] = json!("red");
        bad["host_context"] = context;
        json!({"steps": [
            call("assistant_message", bad),
            call("assistant_message", message(session, "m2", "say still here")),
            completed(1),
        ]})
    })
    .await;
    for run in &runs {
        let label = &run.label;
        let (turns, outside) = run.turns();
        assert_eq!(outside.len(), 1, "{label}: {outside:#?}");
        assert_eq!(outside[0]["event"], "assistant:error", "{label}");
        let error = &outside[0]["data"];
        assert_eq!(error["type"], "validation", "{label}");
        let sentence = error["message"].as_str().unwrap_or_default();
        assert!(
            sentence.contains("host_context.view.colour"),
            "{label}: {sentence}"
        );
        assert_eq!(run.acks()[0]["ok"], false, "{label}");
        assert_eq!(run.acks()[0]["error"]["type"], "validation", "{label}");
        // The socket goes on, and nothing of the bad message was stored.
        assert_eq!(turns.len(), 1, "{label}");
        assert_eq!(
            only(label, &turns[0], "assistant:final_response")["content"],
            "still here"
        );
        let stored = messages(&app, &run.session_id).await;
        let ids: Vec<_> = stored.iter().map(|m| m["id"].clone()).collect();
        assert_eq!(ids, ["m2", "m2:reply"], "{label}");
    }
}

#[actix_web::test]
async fn joined_context_is_reused_by_later_messages() {
    let app = spawn_app().await;
    let runs = run_everywhere(&app, "join", |session| {
        json!({"steps": [
            call("assistant_join_session", json!({"session_id": session, "host_context": tasks_context()})),
            call("assistant_message", message(session, "m1", "call select_issue {\"number\": 42}")),
            completed(1),
            call("assistant_message", continuation(session, "m2", json!({"selected": 42}))),
            completed(2),
            call("assistant_message", message(session, "m3", "say again")),
            completed(3),
        ]})
    })
    .await;
    for run in &runs {
        let label = &run.label;
        assert_eq!(run.acks()[0]["ok"], true, "{label}");
        assert_eq!(
            run.acks()[0]["session_id"],
            run.session_id.as_str(),
            "{label}"
        );
        let (turns, outside) = run.turns();
        assert!(outside.is_empty(), "{label}: {outside:#?}");
        assert_eq!(turns.len(), 3, "{label}");
        // select_issue is only a host action because the joined context declares it.
        let tool_call = only(label, &turns[0], "assistant:tool_call");
        assert_eq!(tool_call["tool_name"], "select_issue", "{label}");
        assert_eq!(tool_call["category"], "host", "{label}");
        assert_eq!(
            only(label, &turns[2], "assistant:final_response")["content"],
            "again"
        );

        let stored = messages(&app, &run.session_id).await;
        let blocks: Vec<_> = stored
            .iter()
            .filter(|m| m["role"] == "user")
            .map(|m| m["host_block"].as_str().unwrap_or_default().to_owned())
            .collect();
        assert_eq!(blocks.len(), 2, "{label}: {stored:#?}");
        assert!(
            blocks[0].starts_with("<host_context>"),
            "{label}: {}",
            blocks[0]
        );
        assert!(blocks[0].contains("select_issue"), "{label}");
        assert_eq!(
            blocks[0], blocks[1],
            "{label}: the same context, the same bytes"
        );
    }
}

/// The same turns over HTTP and over the socket: the final responses, the
/// pending call and the stored messages match once ids that are random by
/// design (call ids) and transport facts (`streamed`) are set aside.
#[actix_web::test]
async fn socket_and_http_give_the_same_turns() {
    let app = spawn_app().await;
    let first = |session: &str| message(session, "m1", "think pondering\nsay hello world");
    let second = |session: &str| {
        let mut body = message(
            session,
            "m2",
            "say looking\ncall select_issue {\"number\": 7}",
        );
        body["host_context"] = tasks_context();
        body
    };
    let result = json!({"selected": 7});
    let runs = run_with(
        &app,
        "parity",
        &[(Client::Python, "websocket")],
        |session| {
            json!({"steps": [
                call("assistant_message", first(session)),
                completed(1),
                call("assistant_message", second(session)),
                completed(2),
                call("assistant_message", continuation(session, "m3", result.clone())),
                completed(3),
            ]})
        },
    )
    .await;
    let run = &runs[0];
    let (turns, _) = run.turns();
    let socket_finals: Vec<Value> = turns
        .iter()
        .map(|turn| only(&run.label, turn, "assistant:final_response").clone())
        .collect();

    let http_session = "parity-http";
    let mut http_finals = Vec::new();
    for body in [first(http_session), second(http_session)] {
        let (status, reply) = app.post_chat(&body).await;
        assert_eq!(status, 200, "{reply}");
        http_finals.push(reply);
    }
    let call_id = http_finals[1]["pending_tool_call"]["call_id"].clone();
    let (status, reply) = app
        .post_chat(
            &json!({"id": "m3", "session_id": http_session, "content": "",
                           "tool_call_id": call_id, "tool_result": result}),
        )
        .await;
    assert_eq!(status, 200, "{reply}");
    http_finals.push(reply);

    assert_eq!(socket_finals.len(), 3);
    for (socket_final, http_final) in socket_finals.iter().zip(&http_finals) {
        assert_eq!(socket_final["streamed"], true);
        assert_eq!(http_final["streamed"], false);
        assert_eq!(comparable(socket_final), comparable(http_final));
    }
    assert_eq!(
        socket_finals[1]["pending_tool_call"]["tool_name"],
        "select_issue"
    );
    let socket_stored = messages(&app, &run.session_id).await;
    let http_stored = messages(&app, http_session).await;
    // A continuation completes the assistant message it answers: four messages.
    assert_eq!(socket_stored.len(), 4);
    assert_eq!(comparable_all(&socket_stored), comparable_all(&http_stored));
}

/// Drops what differs between two sessions by design: call ids (random),
/// session ids, times, `streamed`.
fn comparable(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(key, _)| {
                    !matches!(
                        key.as_str(),
                        "session_id" | "streamed" | "created_at" | "duration_ms"
                    )
                })
                .map(|(key, item)| {
                    let item = match key.as_str() {
                        "call_id" | "tool_call_id" | "id" if is_call_id(item) => json!("<call>"),
                        "queued" => json!(item.as_array().map_or(0, Vec::len)),
                        _ => comparable(item),
                    };
                    (key.clone(), item)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(comparable).collect()),
        other => other.clone(),
    }
}

fn comparable_all(values: &[Value]) -> Vec<Value> {
    values.iter().map(comparable).collect()
}

fn is_call_id(value: &Value) -> bool {
    value.as_str().is_some_and(|id| id.starts_with("call_"))
}

#[actix_web::test]
async fn disconnect_leaves_the_turn_running_to_the_end() {
    let app = spawn_app().await;
    let full = words(20);
    let client_modes = [(Client::Python, "default"), (Client::Node, "websocket")];
    let runs = run_with(&app, "hangup", &client_modes, |session| {
        json!({"steps": [
            {"emit": "assistant_message", "data": message(session, "m1", &format!("slow 50\nsay {full}"))},
            {"wait": "assistant:text_delta", "count": 1},
            {"disconnect": true},
        ]})
    })
    .await;
    for run in &runs {
        let label = &run.label;
        let streamed = all(run.events(), "assistant:text_delta").len();
        assert!(streamed < 20, "{label}: the client left before the end");
        let info = wait_until_idle(&app, &run.session_id).await;
        assert_eq!(info["message_count"], 2, "{label}: {info}");
        let stored = messages(&app, &run.session_id).await;
        let reply = stored.last().expect("the assistant message");
        assert_eq!(reply["error_type"], Value::Null, "{label}: {reply:#}");
        assert_eq!(stored_text(reply), full, "{label}");
    }
}

/// Opens a websocket-only Engine.IO session and joins `/assistant`.
fn raw_joined(addr: SocketAddr) -> RawWs {
    let mut ws = RawWs::connect(addr, "EIO=4&transport=websocket");
    ws.recv_until(false, |text| text.starts_with('0'))
        .expect("open packet");
    ws.send_text("40/assistant,");
    ws.recv_until(true, |text| text.starts_with("40/assistant,"))
        .expect("namespace CONNECT reply");
    ws
}

/// A client that stops reading in the middle of a long turn, and one that
/// reads but never answers pings, are both dropped after the ping timeout,
/// while a healthy client's turns go through meanwhile; the stalled client's
/// turn still runs to the end and is stored.
#[actix_web::test]
async fn stalled_and_silent_clients_are_dropped_without_slowing_others() {
    let app = spawn_app_with(&FAST_PING).await;
    let addr: SocketAddr = ([127, 0, 0, 1], app.port).into();
    let long_reply = words(3000);
    let stalled_request = json!([
        "assistant_message",
        message("stalled", "m1", &format!("say {long_reply}"))
    ]);
    let bad_clients = actix_web::rt::task::spawn_blocking(move || {
        let mut stalled = raw_joined(addr);
        stalled.send_text(&format!("42/assistant,{stalled_request}"));
        let mut silent = raw_joined(addr);
        // The silent client reads everything, answers nothing: the server
        // closes it after pingInterval + pingTimeout.
        assert_eq!(silent.recv_until(false, |_| false), None);
        // The stalled one, once it reads again, finds the server gone too.
        assert_eq!(stalled.recv_until(false, |_| false), None);
    });
    let healthy = run_with(
        &app,
        "healthy",
        &[(Client::Python, "websocket")],
        |session| {
            let mut first = message(session, "m1", "call select_issue {\"number\": 42}");
            first["host_context"] = tasks_context();
            json!({"steps": [
                call("assistant_message", first),
                completed(1),
                call("assistant_message", continuation(session, "m2", json!({"selected": 42}))),
                completed(2),
            ]})
        },
    )
    .await;
    let (turns, _) = healthy[0].turns();
    assert_eq!(turns.len(), 2);
    bad_clients.await.expect("the bad clients were dropped");

    wait_until_idle(&app, "stalled").await;
    let stored = messages(&app, "stalled").await;
    let reply = stored.last().expect("the stalled client's reply");
    assert_eq!(stored_text(reply), long_reply);
}
