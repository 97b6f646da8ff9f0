//! `POST /api/agui`, driven by the stock `@ag-ui/client` `HttpAgent`
//! (tests/clients/agui/run_agui.mjs, whose verifier rejects a malformed
//! stream) and by raw SSE reads with reqwest.

use std::path::PathBuf;
use std::sync::Once;

use futures_util::StreamExt;
use serde_json::{json, Value};

use crate::helpers::{spawn_app, TestApp};

/// Installs the npm client once per test binary (skipped when installed).
static INSTALL: Once = Once::new();

fn client_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/clients/agui")
}

/// Runs a scenario through `HttpAgent` against `app`; returns what the
/// script printed: `{"runs": [{"events", "error", "result"}], "messages"}`.
async fn run_client(app: &TestApp, mut scenario: Value) -> Value {
    scenario["url"] = json!(format!("{}/api/agui", app.address));
    let dir = client_dir();
    tokio::task::spawn_blocking(move || {
        INSTALL.call_once(|| {
            let status = std::process::Command::new("bash")
                .arg(dir.join("install.sh"))
                .status()
                .expect("bash runs tests/clients/agui/install.sh");
            assert!(status.success(), "installing @ag-ui/client failed");
        });
        let output = std::process::Command::new("node")
            .arg(dir.join("run_agui.mjs"))
            .arg(scenario.to_string())
            .output()
            .expect("node runs run_agui.mjs");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "run_agui.mjs failed: {stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        serde_json::from_str::<Value>(&stdout)
            .unwrap_or_else(|_| panic!("run_agui.mjs printed no JSON: {stdout:?}"))
    })
    .await
    .expect("the client thread finished")
}

fn types(events: &Value) -> Vec<&str> {
    events
        .as_array()
        .unwrap()
        .iter()
        .map(|event| event["type"].as_str().unwrap())
        .collect()
}

/// The text of the run's text messages, in order.
fn text_of(events: &Value) -> String {
    events
        .as_array()
        .unwrap()
        .iter()
        .filter(|event| event["type"] == "TEXT_MESSAGE_CONTENT")
        .map(|event| event["delta"].as_str().unwrap())
        .collect()
}

fn events_of_type<'a>(events: &'a Value, kind: &str) -> Vec<&'a Value> {
    events
        .as_array()
        .unwrap()
        .iter()
        .filter(|event| event["type"] == kind)
        .collect()
}

/// The tools of an assistant message's tool groups.
fn tools_of(message: &Value) -> Vec<Value> {
    message["segments"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|segment| segment["kind"] == "tool_group")
        .flat_map(|segment| segment["tools"].as_array().unwrap().clone())
        .collect()
}

fn pick_tool() -> Value {
    json!({"name": "pick", "description": "Pick an item.",
           "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}})
}

#[actix_web::test]
async fn a_text_turn_streams_one_assistant_message() {
    let app = spawn_app().await;
    let out = run_client(
        &app,
        json!({"threadId": "agui-text", "runs": [{"user": "say hello there", "id": "u1"}]}),
    )
    .await;
    let run = &out["runs"][0];
    assert!(run["error"].is_null(), "{run}");
    let events = &run["events"];
    let kinds = types(events);
    assert_eq!(kinds.first(), Some(&"RUN_STARTED"));
    assert_eq!(kinds[1], "TEXT_MESSAGE_START");
    assert_eq!(kinds[kinds.len() - 2], "TEXT_MESSAGE_END");
    assert_eq!(kinds.last(), Some(&"RUN_FINISHED"));
    assert_eq!(text_of(events), "hello there");
    let start = events_of_type(events, "RUN_STARTED")[0];
    assert_eq!(start["threadId"], "agui-text");
    assert_eq!(start["runId"], "agui-text-run-0");
    // The client built the assistant message from the stream.
    let messages = out["messages"].as_array().unwrap();
    assert_eq!(messages[1]["role"], "assistant");
    assert_eq!(messages[1]["content"], "hello there");
    assert_eq!(run["result"]["content"], "hello there");
    // The turn's usage in AG-UI's own field, accepted by the client's schema.
    let finished = events_of_type(events, "RUN_FINISHED")[0];
    assert_eq!(finished["usage"][0]["provider"], "builtin");
    assert_eq!(finished["usage"][0]["model"], "echo");
    assert!(finished["usage"][0]["inputTokens"].as_u64().unwrap() > 0);
    assert_eq!(
        finished["usage"][0]["totalTokens"],
        run["result"]["usage"]["total_tokens"]
    );
}

#[actix_web::test]
async fn a_reloaded_agent_connecting_gets_the_threads_history_as_a_messages_snapshot() {
    let app = spawn_app().await;
    let out = run_client(
        &app,
        json!({"threadId": "agui-reload", "tools": [pick_tool()], "runs": [
            {"user": "call pick {\"n\": 1}", "id": "u1"},
            {"answer": [{"result": "{\"picked\":1}"}]},
            {"user": "say second answer", "id": "u2"},
            {"reload": true},
            {"reload": true, "connect": true},
        ]}),
    )
    .await;
    // runAgent() with no new message, then AG-UI's connectAgent(): a page
    // reloaded twice; the last holds what the page had before the first.
    for reload in [&out["runs"][3], &out["runs"][4]] {
        assert!(reload["error"].is_null(), "{reload}");
        assert_eq!(
            types(&reload["events"]),
            ["RUN_STARTED", "MESSAGES_SNAPSHOT", "RUN_FINISHED"]
        );
    }
    assert_eq!(out["before_reload"].as_array().map(Vec::len), Some(6));
    // The new agent holds what the page had before the reload: same ids,
    // roles and text, the call and its result (a tool message's id was the
    // page's own, which the server does not keep: it names it by the call).
    let brief = |messages: &Value| -> Vec<(String, String, String)> {
        messages
            .as_array()
            .unwrap()
            .iter()
            .map(|message| {
                let id = match message["role"].as_str() {
                    Some("tool") => message["toolCallId"].as_str(),
                    _ => message["id"].as_str(),
                };
                (
                    id.unwrap_or("").to_string(),
                    message["role"].as_str().unwrap_or("").to_string(),
                    message["content"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect()
    };
    assert_eq!(brief(&out["messages"]), brief(&out["before_reload"]));
    let messages = out["messages"].as_array().unwrap();
    let call = messages
        .iter()
        .find(|message| message["toolCalls"].is_array())
        .expect("the assistant message with its call");
    assert_eq!(call["toolCalls"][0]["function"]["name"], "pick");
    assert!(messages
        .iter()
        .any(|message| message["role"] == "tool" && message["content"] == "{\"picked\":1}"));
    assert_eq!(messages.last().unwrap()["content"], "second answer");
}

#[actix_web::test]
async fn a_run_with_nothing_new_on_an_unknown_thread_is_an_empty_snapshot() {
    let app = spawn_app().await;
    let (status, _, events) = post_run(
        &app,
        &json!({"threadId": "agui-nothing", "runId": "r1", "messages": [], "tools": [], "context": [], "state": {}, "forwardedProps": {}}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        events[1],
        json!({"type": "MESSAGES_SNAPSHOT", "messages": []})
    );
    assert_eq!(events[2]["type"], "RUN_FINISHED");
    let (status, _) = app.get("/api/sessions/agui-nothing").await;
    assert_eq!(status, 404, "a history request stores nothing");
}

#[actix_web::test]
async fn a_host_call_is_answered_in_the_next_run() {
    let app = spawn_app().await;
    let out = run_client(
        &app,
        json!({
            "threadId": "agui-host", "tools": [pick_tool()],
            "runs": [
                {"user": "call pick {\"n\": 42}", "id": "u1"},
                {"answer": [{"result": "{\"picked\": 42}"}]}
            ]
        }),
    )
    .await;
    let first = &out["runs"][0];
    assert!(first["error"].is_null(), "{first}");
    let start = events_of_type(&first["events"], "TOOL_CALL_START")[0];
    assert_eq!(start["toolCallName"], "pick");
    let call_id = start["toolCallId"].as_str().unwrap().to_string();
    let args = events_of_type(&first["events"], "TOOL_CALL_ARGS")[0];
    let arguments: Value = serde_json::from_str(args["delta"].as_str().unwrap()).unwrap();
    assert_eq!(arguments, json!({"n": 42}));
    let finished = events_of_type(&first["events"], "RUN_FINISHED")[0];
    assert_eq!(
        finished["outcome"],
        json!({"type": "success", "pendingToolCallIds": [call_id]})
    );
    assert!(events_of_type(&first["events"], "TOOL_CALL_RESULT").is_empty());

    let second = &out["runs"][1];
    assert!(second["error"].is_null(), "{second}");
    assert_eq!(
        types(&second["events"]).last(),
        Some(&"RUN_FINISHED"),
        "{second}"
    );
    assert!(
        text_of(&second["events"]).contains("pick → {\"picked\":42}"),
        "{second}"
    );
    assert!(app.session("agui-host").await["pending_action"].is_null());
    let tree = app.tree("agui-host").await;
    let tools = tools_of(&tree[1]);
    assert_eq!(tools[0]["id"], call_id.as_str());
    assert_eq!(tools[0]["output"], json!({"picked": 42}));
    assert_eq!(tools[0]["outcome"], "success");
}

#[actix_web::test]
async fn a_batch_of_host_calls_is_answered_in_one_run() {
    let app = spawn_app().await;
    let out = run_client(
        &app,
        json!({
            "threadId": "agui-batch", "tools": [pick_tool()],
            "runs": [
                {"user": "call pick {\"n\": 1}\ncall pick {\"n\": 2}", "id": "u1"},
                // Sent out of order: the server answers them in the order it asked.
                {"answer": [{"result": "second"}, {"result": "first"}], "reverse": true}
            ]
        }),
    )
    .await;
    let first = &out["runs"][0];
    let starts = events_of_type(&first["events"], "TOOL_CALL_START");
    assert_eq!(starts.len(), 2, "{first}");
    let pending =
        &events_of_type(&first["events"], "RUN_FINISHED")[0]["outcome"]["pendingToolCallIds"];
    assert_eq!(
        pending,
        &json!([starts[0]["toolCallId"], starts[1]["toolCallId"]])
    );

    let second = &out["runs"][1];
    assert!(second["error"].is_null(), "{second}");
    // The model resumed once, after both results.
    assert_eq!(
        events_of_type(&second["events"], "TEXT_MESSAGE_START").len(),
        1
    );
    assert_eq!(
        text_of(&second["events"]),
        "Tool results: pick → first; pick → second"
    );
    let tree = app.tree("agui-batch").await;
    let tools = tools_of(&tree[1]);
    assert_eq!(tools[0]["id"], starts[0]["toolCallId"]);
    assert_eq!(tools[0]["output"], "first");
    assert_eq!(tools[1]["id"], starts[1]["toolCallId"]);
    assert_eq!(tools[1]["output"], "second");
    assert!(app.session("agui-batch").await["pending_action"].is_null());
}

#[actix_web::test]
async fn a_tool_message_with_an_error_is_a_failed_result() {
    let app = spawn_app().await;
    let out = run_client(
        &app,
        json!({
            "threadId": "agui-failed", "tools": [pick_tool()],
            "runs": [
                {"user": "call pick {\"n\": 7}", "id": "u1"},
                {"answer": [{"error": "the list is gone"}]}
            ]
        }),
    )
    .await;
    let second = &out["runs"][1];
    assert!(second["error"].is_null(), "{second}");
    assert_eq!(types(&second["events"]).last(), Some(&"RUN_FINISHED"));
    let tree = app.tree("agui-failed").await;
    let tools = tools_of(&tree[1]);
    assert_eq!(tools[0]["outcome"], "failed");
    assert_eq!(tools[0]["status"], "failed");
    assert_eq!(tools[0]["output"], "the list is gone");
}

#[actix_web::test]
async fn a_bad_tool_schema_is_a_422_before_the_stream_and_a_failed_run_in_the_client() {
    let app = spawn_app().await;
    let bad_tool =
        json!({"name": "pick", "description": "Pick.", "parameters": {"type": "string"}});
    let out = run_client(
        &app,
        json!({"threadId": "agui-invalid", "tools": [bad_tool], "runs": [{"user": "hi", "id": "u1"}]}),
    )
    .await;
    let run = &out["runs"][0];
    assert_eq!(run["error"]["status"], 422, "{run}");
    assert_eq!(run["error"]["payload"]["type"], "validation");
    let sentence = run["error"]["payload"]["error"].as_str().unwrap();
    assert!(sentence.starts_with("tools[0].parameters: "), "{sentence}");
    // The client's onRunFailed saw it, and no event was streamed.
    assert_eq!(run["failed"]["status"], 422);
    assert_eq!(run["events"], json!([]));
    let (status, _) = app.get("/api/sessions/agui-invalid").await;
    assert_eq!(status, 404);
}

#[actix_web::test]
async fn the_tree_is_the_conversation_the_runs_implied() {
    let app = spawn_app().await;
    let out = run_client(
        &app,
        json!({
            "threadId": "agui-tree", "tools": [pick_tool()],
            "runs": [
                {"user": "say hi", "id": "u1"},
                {"user": "call pick {\"n\": 3}", "id": "u2"},
                {"answer": [{"result": "3"}]},
                {"user": "say bye", "id": "u3"}
            ]
        }),
    )
    .await;
    for run in out["runs"].as_array().unwrap() {
        assert!(run["error"].is_null(), "{run}");
    }
    let tree = app.tree("agui-tree").await;
    let tree = tree.as_array().unwrap();
    let shape: Vec<(&str, &str, Option<&str>)> = tree
        .iter()
        .map(|message| {
            (
                message["id"].as_str().unwrap(),
                message["role"].as_str().unwrap(),
                message["parent_id"].as_str(),
            )
        })
        .collect();
    let reply_1 = events_of_type(&out["runs"][0]["events"], "TEXT_MESSAGE_START")[0]["messageId"]
        .as_str()
        .unwrap();
    let reply_2 = events_of_type(&out["runs"][1]["events"], "TOOL_CALL_START")[0]
        ["parentMessageId"]
        .as_str()
        .unwrap();
    let reply_3 = events_of_type(&out["runs"][3]["events"], "TEXT_MESSAGE_START")[0]["messageId"]
        .as_str()
        .unwrap();
    assert_eq!(
        shape,
        [
            ("u1", "user", None),
            (reply_1, "assistant", Some("u1")),
            ("u2", "user", Some(reply_1)),
            (reply_2, "assistant", Some("u2")),
            ("u3", "user", Some(reply_2)),
            (reply_3, "assistant", Some("u3")),
        ]
    );
    // The resumed reply is a new AG-UI message after the tool message.
    let resumed = events_of_type(&out["runs"][2]["events"], "TEXT_MESSAGE_START")[0]["messageId"]
        .as_str()
        .unwrap();
    assert!(resumed.starts_with(&format!("{reply_2}:")), "{resumed}");
    let info = app.session("agui-tree").await;
    assert_eq!(info["active_leaf"], reply_3);
    assert_eq!(info["turn_number"], 3);
}

#[actix_web::test]
async fn results_and_a_new_user_message_in_one_run_stream_both_replies() {
    let app = spawn_app().await;
    let out = run_client(
        &app,
        json!({
            "threadId": "agui-both", "tools": [pick_tool()],
            "runs": [
                {"user": "call pick {\"n\": 5}", "id": "u1"},
                {"answer": [{"result": "5"}], "user": "say next", "id": "u2"}
            ]
        }),
    )
    .await;
    let second = &out["runs"][1];
    assert!(second["error"].is_null(), "{second}");
    assert_eq!(
        events_of_type(&second["events"], "TEXT_MESSAGE_START").len(),
        2
    );
    assert_eq!(text_of(&second["events"]), "Tool results: pick → 5next");
    let tree = app.tree("agui-both").await;
    let roles: Vec<&str> = tree
        .as_array()
        .unwrap()
        .iter()
        .map(|message| message["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "user", "assistant"]);
    assert_eq!(tree[2]["id"], "u2");
    assert_eq!(tree[2]["parent_id"], tree[1]["id"]);
    assert_eq!(tools_of(&tree[1])[0]["outcome"], "success");
}

/// Posts a run and returns the status, content type and SSE events (or the JSON error).
async fn post_run(app: &TestApp, body: &Value) -> (u16, String, Vec<Value>) {
    let response = app
        .client
        .post(format!("{}/api/agui", app.address))
        .json(body)
        .send()
        .await
        .expect("request sent");
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .map(|value| value.to_str().unwrap().to_string())
        .unwrap_or_default();
    let text = response.text().await.expect("body read");
    if !content_type.starts_with("text/event-stream") {
        return (
            status,
            content_type,
            vec![serde_json::from_str(&text).unwrap()],
        );
    }
    assert!(text.ends_with("\n\n"), "{text:?}");
    let events = text
        .trim_end()
        .split("\n\n")
        .map(|frame| {
            let data = frame
                .strip_prefix("data: ")
                .unwrap_or_else(|| panic!("not a data frame: {frame:?}"));
            serde_json::from_str(data).expect("JSON data")
        })
        .collect();
    (status, content_type, events)
}

fn user_run(thread_id: &str, id: &str, content: &str) -> Value {
    json!({"threadId": thread_id, "runId": "r1", "messages": [{"id": id, "role": "user", "content": content}],
           "tools": [], "context": [], "state": {}, "forwardedProps": {}})
}

#[actix_web::test]
async fn the_raw_stream_is_sse_frames_in_order_ending_with_run_finished() {
    let app = spawn_app().await;
    let (status, content_type, events) = post_run(
        &app,
        &user_run("agui-raw", "u1", "think let me see\nsay done"),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(content_type, "text/event-stream");
    let kinds: Vec<&str> = events
        .iter()
        .map(|event| event["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "RUN_STARTED",
            "REASONING_START",
            "REASONING_MESSAGE_START",
            "REASONING_MESSAGE_CONTENT",
            "REASONING_MESSAGE_CONTENT",
            "REASONING_MESSAGE_CONTENT",
            "REASONING_MESSAGE_END",
            "REASONING_END",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "RUN_FINISHED"
        ]
    );
    assert_eq!(
        events[0],
        json!({"type": "RUN_STARTED", "threadId": "agui-raw", "runId": "r1"})
    );
    let last = events.last().unwrap();
    assert_eq!(last["threadId"], "agui-raw");
    assert_eq!(last["runId"], "r1");
    assert_eq!(last["result"]["message_id"], events[8]["messageId"]);
    assert_eq!(events[8]["role"], "assistant");
    assert_eq!(events[2]["role"], "reasoning");
}

#[actix_web::test]
async fn a_provider_failure_ends_the_stream_with_run_error() {
    let app = spawn_app().await;
    let (status, _, events) = post_run(&app, &user_run("agui-fail", "u1", "fail rate_limit")).await;
    assert_eq!(status, 200);
    let last = events.last().unwrap();
    assert_eq!(last["type"], "RUN_ERROR", "{events:?}");
    assert_eq!(last["code"], "rate_limit");
    assert!(last["message"].as_str().unwrap().contains("rate_limit"));
}

#[actix_web::test]
async fn request_errors_are_json_before_any_stream() {
    let app = spawn_app().await;
    let (status, content_type, body) =
        post_run(&app, &json!({"threadId": "agui-bad", "messages": "hello"})).await;
    assert_eq!((status, content_type.as_str()), (422, "application/json"));
    assert_eq!(body[0]["type"], "validation");
    assert!(body[0]["error"].as_str().unwrap().starts_with("messages: "));
    let (status, _, body) = post_run(
        &app,
        &json!({"threadId": "agui-bad", "messages": [{"id": "t1", "role": "tool", "toolCallId": "nope", "content": "x"}]}),
    )
    .await;
    assert_eq!(status, 409);
    assert_eq!(body[0]["type"], "session_error");
    let (status, _, _) = post_run(&app, &user_run("agui-dup", "u1", "say one")).await;
    assert_eq!(status, 200);
    let (status, _, body) = post_run(&app, &user_run("agui-dup", "u1", "say again")).await;
    assert_eq!(status, 409, "{body:?}");
}

/// A tool result sent again for a call whose result is recorded: a 409
/// before any stream, naming the recorded status `completed`.
#[actix_web::test]
async fn a_duplicate_tool_result_is_a_409_saying_status_completed() {
    let app = spawn_app().await;
    let question = "call pick {\"n\": 42}";
    let mut first = user_run("agui-dup-result", "u1", question);
    first["tools"] = json!([pick_tool()]);
    let (status, _, events) = post_run(&app, &first).await;
    assert_eq!(status, 200, "{events:?}");
    let events = Value::Array(events);
    let call_id = events_of_type(&events, "TOOL_CALL_START")[0]["toolCallId"]
        .as_str()
        .unwrap()
        .to_string();
    let answer = |tool_message_id: &str| {
        json!({"threadId": "agui-dup-result", "runId": "r2", "messages": [
            {"id": "u1", "role": "user", "content": question},
            {"id": "a1", "role": "assistant", "toolCalls": [{"id": call_id, "type": "function",
              "function": {"name": "pick", "arguments": "{\"n\":42}"}}]},
            {"id": tool_message_id, "role": "tool", "toolCallId": call_id, "content": "{\"picked\": 42}"}
        ], "tools": [pick_tool()], "context": [], "state": {}, "forwardedProps": {}})
    };
    let (status, _, body) = post_run(&app, &answer("t1")).await;
    assert_eq!(status, 200, "{body:?}");
    let (status, content_type, body) = post_run(&app, &answer("t2")).await;
    assert_eq!((status, content_type.as_str()), (409, "application/json"));
    assert_eq!(body[0]["type"], "session_error");
    let sentence = body[0]["error"].as_str().unwrap_or_default();
    assert!(
        sentence.contains("already recorded (status: completed)"),
        "{sentence}"
    );
}

#[actix_web::test]
async fn a_client_that_hangs_up_cancels_the_turn() {
    let app = spawn_app().await;
    let response = app
        .client
        .post(format!("{}/api/agui", app.address))
        .json(&user_run(
            "agui-gone",
            "u1",
            "slow 200\nsay one two three four five six seven eight",
        ))
        .send()
        .await
        .expect("request sent");
    let mut body = response.bytes_stream();
    let first = body.next().await.expect("a first frame").expect("bytes");
    assert!(String::from_utf8_lossy(&first).contains("RUN_STARTED"));
    drop(body);
    // Bounded wait for the cancel to land (each step is one echo delta at most).
    let mut info = app.session("agui-gone").await;
    for _ in 0..50 {
        if info["turn_running"] == false {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        info = app.session("agui-gone").await;
    }
    assert_eq!(info["turn_running"], false, "{info}");
    let tree = app.tree("agui-gone").await;
    assert_eq!(tree[1]["error_type"], "cancelled", "{tree}");
    let saved = tree[1]["segments"][0]["text"].as_str().unwrap_or("");
    assert!(
        !saved.contains("eight"),
        "the turn ran to the end: {saved:?}"
    );
}
