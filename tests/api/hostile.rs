//! Hostile input: schemas that crashed or pinned the process,
//! JSON nested past the depth limit, concurrent messages and DELETEs on one
//! session, odd session ids, a panicking turn. Every answer is one the
//! contract names, the process stays up, and sessions stay usable.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use serde_json::{json, Value};

use crate::helpers::{spawn_app, TestApp};
use crate::raw_ws::RawWs;

/// The depth limit of `docs/protocol.md`.
const MAX_DEPTH: usize = actors::contract::MAX_JSON_DEPTH;

/// `{"a": {"a": … leaf …}}` with `depth` objects, built without recursion.
fn nested(depth: usize, leaf: Value) -> Value {
    let mut value = leaf;
    for _ in 0..depth {
        value = json!({ "a": value });
    }
    value
}

/// The schema shapes of the issue that crashed (stack overflow) or pinned
/// (backtracking regex) the process; each must be refused when declared.
fn crash_shapes() -> Vec<(&'static str, Value)> {
    let mut deep_all_of = json!({"type": "object"});
    for _ in 0..100 {
        deep_all_of = json!({ "allOf": [deep_all_of] });
    }
    deep_all_of["type"] = json!("object");
    vec![
        ("$ref to the root", json!({"type": "object", "$ref": "#"})),
        (
            "$ref cycle",
            json!({"type": "object", "definitions": {"a": {"$ref": "#/definitions/b"}, "b": {"$ref": "#/definitions/a"}}, "properties": {"x": {"$ref": "#/definitions/a"}}}),
        ),
        (
            "if/then back to the root",
            json!({"type": "object", "if": {"$ref": "#"}, "then": {"$ref": "#"}}),
        ),
        (
            "dependencies back to the root",
            json!({"type": "object", "dependencies": {"x": {"$ref": "#"}}}),
        ),
        ("100-deep allOf", deep_all_of),
        (
            "huge regex in pattern",
            json!({"type": "object", "properties": {"s": {"type": "string", "pattern": "(a{1000}){1000}{1000}"}}}),
        ),
        (
            "huge regex in patternProperties",
            json!({"type": "object", "patternProperties": {"((x+)+y){500}{500}": {}}}),
        ),
        (
            "multipleOf 0",
            json!({"type": "object", "properties": {"n": {"type": "number", "multipleOf": 0}}}),
        ),
        (
            "$ref outside the schema",
            json!({"type": "object", "$ref": "http://127.0.0.1:9/schema.json"}),
        ),
    ]
}

fn context_with(parameters: Value) -> Value {
    json!({"version": 1, "actions": [{"name": "act", "description": "d", "parameters": parameters}]})
}

async fn assert_alive(app: &TestApp) {
    let (status, health) = app.get("/health").await;
    assert_eq!(status, 200, "{health}");
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

/// Each crash shape is a 422 naming the parameters, over HTTP (text and
/// host_tools), AG-UI `tools` and Socket.IO; the process answers /health after.
#[actix_web::test]
async fn every_crash_shape_is_refused_on_every_transport() {
    let app = spawn_app().await;
    let addr: SocketAddr = ([127, 0, 0, 1], app.port).into();
    for (i, (label, schema)) in crash_shapes().into_iter().enumerate() {
        for output_mode in ["text", "host_tools"] {
            let (status, body) = app
                .post_chat(&json!({
                    "id": "m1", "session_id": format!("shape-{i}-{output_mode}"),
                    "content": "call act {}", "output_mode": output_mode,
                    "host_context": context_with(schema.clone())
                }))
                .await;
            assert_eq!(status, 422, "{label} ({output_mode}): {body}");
            assert!(
                body["error"]
                    .as_str()
                    .unwrap()
                    .starts_with("host_context.actions[0].parameters"),
                "{label}: {body}"
            );
        }
        let (status, body) = app
            .post_json(
                "/api/agui",
                &json!({
                    "threadId": format!("agui-shape-{i}"), "runId": "r1",
                    "messages": [{"id": "u1", "role": "user", "content": "call act {}"}],
                    "tools": [{"name": "act", "description": "d", "parameters": schema.clone()}]
                }),
            )
            .await;
        assert_eq!(status, 422, "{label} (AG-UI): {body}");
        assert!(
            body["error"].as_str().unwrap().starts_with("tools[0]"),
            "{label}: {body}"
        );
        let packet = json!(["assistant_message", {
            "id": "m1", "session_id": format!("sio-shape-{i}"), "content": "call act {}",
            "host_context": context_with(schema.clone())
        }]);
        let error = actix_web::rt::task::spawn_blocking(move || {
            let mut ws = raw_joined(addr);
            ws.send_text(&format!("42/assistant,{packet}"));
            ws.recv_until(true, |text| text.contains("assistant:error"))
        })
        .await
        .unwrap()
        .expect("an assistant:error");
        assert!(error.contains("\"validation\""), "{label}: {error}");
        assert!(
            error.contains("host_context.actions[0].parameters"),
            "{label}: {error}"
        );
        assert_alive(&app).await;
    }
}

/// A configured host tool with a crash shape stops the server at startup,
/// naming the setting, instead of at the first call.
#[actix_web::test]
async fn a_configured_host_tool_with_a_crash_shape_is_a_settings_error() {
    for (label, schema) in crash_shapes() {
        let tools = json!({"act": {"description": "d", "parameters": schema}}).to_string();
        let mut values = std::collections::BTreeMap::new();
        values.insert("TOOLS__HOST_TOOLS".to_string(), tools);
        let error = match assistant_runtime::settings::Settings::from_map(&values) {
            Ok(_) => panic!("{label}: accepted"),
            Err(error) => error.to_string(),
        };
        assert!(error.contains("TOOLS__HOST_TOOLS"), "{label}: {error}");
    }
}

/// The worst arguments an accepted schema allows (uniqueItems over 70,000
/// objects; 60,000 took valico 18 s) come back to the model as a retry once
/// the validation budget is spent, and /health answers while it runs.
#[actix_web::test]
async fn the_worst_allowed_validation_is_a_retry_and_health_stays_responsive() {
    let app = spawn_app().await;
    let items: Vec<Value> = (0..70_000).map(|i| json!({ "i": i })).collect();
    let arguments = json!({ "xs": items }).to_string();
    let schema = json!({"type": "object", "properties": {"xs": {"type": "array", "uniqueItems": true, "items": {"type": "object"}}}});
    let body = json!({
        "id": "m1", "session_id": "unique-items", "content": format!("call act {arguments}"),
        "host_context": context_with(schema)
    });
    let chats = (0..2).map(|i| {
        let mut body = body.clone();
        body["session_id"] = json!(format!("unique-items-{i}"));
        let app = &app;
        async move { app.post_chat(&body).await }
    });
    let health = async {
        let mut slowest = Duration::ZERO;
        for _ in 0..20 {
            let started = Instant::now();
            assert_alive(&app).await;
            slowest = slowest.max(started.elapsed());
        }
        slowest
    };
    let (answers, slowest) = futures_util::join!(join_all(chats), health);
    // Reported, not asserted: timings belong in BENCHMARKS.md.
    println!("slowest /health during the validations: {slowest:?}");
    for (status, reply) in answers {
        assert_eq!(status, 200, "{reply}");
        let record = &app.tree(reply["session_id"].as_str().unwrap()).await;
        let text = record.to_string();
        assert!(text.contains("invalid_arguments"), "{text:.500}");
        assert!(text.contains("too large to check"), "{text:.500}");
    }
}

/// A tool result nested past the limit is a 422 naming its path, nothing is
/// stored, and the same pending call then takes a result at the limit (which
/// reads back) and the session goes on.
#[actix_web::test]
async fn a_too_deep_tool_result_is_refused_and_the_session_stays_usable() {
    let app = spawn_app().await;
    let schema = json!({"type": "object", "properties": {}});
    let (status, first) = app
        .say("deep", "m1", "call act {}", Some(context_with(schema)))
        .await;
    assert_eq!(status, 200, "{first}");
    let call_id = crate::helpers::pending_call_id(&first);
    // The body is one level around tool_result.
    let (status, refused) = app
        .continue_call("deep", "m2", &call_id, nested(MAX_DEPTH, json!(1)))
        .await;
    assert_eq!(status, 422, "{refused}");
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .starts_with("tool_result.a.a"),
        "{refused}"
    );
    let (status, session) = app.get("/api/sessions/deep").await;
    assert_eq!(status, 200, "{session}");
    assert_eq!(session["pending_action"]["tool_call_id"], call_id.as_str());
    let at_limit = nested(MAX_DEPTH - 1, json!("leaf"));
    let (status, resumed) = app
        .continue_call("deep", "m2", &call_id, at_limit.clone())
        .await;
    assert_eq!(status, 200, "{resumed}");
    let record = app.tool_record("deep", &call_id).await;
    assert_eq!(record["output"], at_limit);
    for path in [
        "/api/sessions/deep",
        "/api/sessions/deep/messages",
        "/api/sessions/deep/tree",
    ] {
        let (status, body) = app.get(path).await;
        assert_eq!(status, 200, "{path}: {body}");
    }
    let (status, next) = app.say("deep", "m3", "say still here", None).await;
    assert_eq!(status, 200, "{next}");
    assert_eq!(next["content"], "still here");
}

/// Model tool-call arguments past the limit are a retry the model sees.
#[actix_web::test]
async fn too_deep_model_arguments_are_a_retry() {
    let app = spawn_app().await;
    let arguments = nested(MAX_DEPTH + 1, json!(1)).to_string();
    let schema = json!({"type": "object"});
    let (status, reply) = app
        .say(
            "deep-args",
            "m1",
            &format!("call act {arguments}"),
            Some(context_with(schema)),
        )
        .await;
    assert_eq!(status, 200, "{reply}");
    let tree = app.tree("deep-args").await.to_string();
    assert!(tree.contains("invalid_arguments"), "{tree:.400}");
    assert!(tree.contains("nested more than"), "{tree:.400}");
}

/// Bodies nested far past anything serde_json parses (100,000 levels) are a
/// 422 naming the path, on the chat route and on AG-UI.
#[actix_web::test]
async fn absurdly_deep_bodies_are_refused_with_their_path() {
    let app = spawn_app().await;
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    for route in ["/api/chat", "/api/agui"] {
        let body = format!("{{\"id\": \"m1\", \"session_id\": \"s\", \"content\": {deep}}}");
        let (status, reply) = app.post_raw(route, body).await;
        assert_eq!(status, 422, "{route}: {reply:.300}");
        assert!(
            reply["error"]
                .as_str()
                .unwrap()
                .starts_with("content[0][0]"),
            "{route}"
        );
    }
    assert_alive(&app).await;
}

/// Statuses a racing message or DELETE may get (docs/protocol.md).
fn allowed(status: u16, body: &Value) -> bool {
    match status {
        200 => body["error_type"].is_null() || body["error_type"] == "cancelled",
        409 | 404 => true,
        _ => false,
    }
}

/// The stored path is a chain: user, assistant, user, …, each the parent's child.
async fn assert_consistent_path(app: &TestApp, session_id: &str) {
    let (status, messages) = app
        .get(&format!("/api/sessions/{session_id}/messages"))
        .await;
    if status == 404 {
        return;
    }
    assert_eq!(status, 200, "{messages}");
    let messages = messages["messages"]
        .as_array()
        .or(messages.as_array())
        .cloned()
        .unwrap_or_default();
    let mut parent: Option<String> = None;
    for message in &messages {
        assert_eq!(
            message["parent_id"].as_str().map(str::to_string),
            parent,
            "{messages:?}"
        );
        parent = message["id"].as_str().map(str::to_string);
    }
}

/// N concurrent messages (and DELETEs) on each of several sessions over HTTP:
/// every answer is a 200 (completed or cancelled), a 409 or a 404, never a
/// 5xx, and each stored path is a consistent chain.
#[actix_web::test]
async fn concurrent_messages_and_deletes_on_one_session_get_named_answers() {
    let app = spawn_app().await;
    let mut requests = Vec::new();
    for session in 0..6 {
        let session_id = format!("race-{session}");
        for i in 0..8 {
            let content = if i % 2 == 0 { "slow 20" } else { "say a b c d" };
            let body = json!({"id": format!("m{i}"), "session_id": session_id, "content": content});
            let app = &app;
            requests.push(Box::pin(async move {
                let (status, reply) = app.post_chat(&body).await;
                (status.as_u16(), reply)
            })
                as std::pin::Pin<Box<dyn std::future::Future<Output = (u16, Value)>>>);
        }
        if session % 2 == 1 {
            for _ in 0..2 {
                let app = &app;
                let path = format!("/api/sessions/{session_id}");
                requests.push(Box::pin(async move {
                    let (status, reply) = app.delete(&path).await;
                    // A DELETE answers 200 (deleted) or 404 (nothing to delete).
                    (if status == 200 { 200 } else { status.as_u16() }, reply)
                }));
            }
        }
    }
    let answers = join_all(requests).await;
    for (status, body) in &answers {
        assert!(allowed(*status, body), "{status}: {body}");
    }
    for session in 0..6 {
        assert_consistent_path(&app, &format!("race-{session}")).await;
    }
}

/// The same race over Socket.IO, with DELETEs over HTTP in the middle on
/// one of the two sessions: every message gets a final response that
/// completed or was cancelled, or an `assistant:error` of type
/// session_error (409, or 404 for messages queued behind a deleted session).
#[actix_web::test]
async fn concurrent_messages_over_socketio_get_named_answers() {
    let app = spawn_app().await;
    for session_id in ["sio-race", "sio-race-deleted"] {
        socket_race(&app, session_id, session_id.ends_with("deleted")).await;
    }
}

async fn socket_race(app: &TestApp, session_id: &'static str, delete: bool) {
    let addr: SocketAddr = ([127, 0, 0, 1], app.port).into();
    let n = 8;
    let deletes = async {
        if delete {
            for _ in 0..3 {
                actix_web::rt::time::sleep(Duration::from_millis(30)).await;
                let (status, body) = app.delete(&format!("/api/sessions/{session_id}")).await;
                assert!(status == 200 || status == 404, "{status}: {body}");
            }
        }
    };
    let finals = actix_web::rt::task::spawn_blocking(move || {
        let mut ws = raw_joined(addr);
        for i in 0..n {
            let content = if i % 2 == 0 { "slow 20" } else { "say a b c d" };
            let packet = json!(["assistant_message", {"id": format!("m{i}"), "session_id": session_id, "content": content}]);
            ws.send_text(&format!("42/assistant,{packet}"));
        }
        let mut answers = Vec::new();
        while answers.len() < n {
            let text = ws
                .recv_until(true, |text| {
                    text.contains("assistant:final_response") || text.contains("assistant:error")
                })
                .expect("an answer per message");
            answers.push(text);
        }
        answers
    });
    let (finals, ()) = futures_util::join!(finals, deletes);
    for text in finals.unwrap() {
        assert!(
            !text.contains("\"internal\"") && !text.contains("\"unavailable\""),
            "{text}"
        );
        if text.contains("assistant:final_response") {
            assert!(
                !text.contains("\"error_type\"") || text.contains("\"error_type\":\"cancelled\""),
                "{text}"
            );
        }
    }
    assert_consistent_path(app, session_id).await;
}

/// Odd session ids on the session routes are answered 4xx, never 5xx.
#[actix_web::test]
async fn odd_session_ids_get_a_4xx() {
    let app = spawn_app().await;
    let ids = [
        "..%2F..%2Fetc%2Fpasswd",
        "%00",
        "%F0%9F%92%A9",
        "a%20b",
        &"x".repeat(65),
        "%25%25",
        "..",
    ];
    for id in ids {
        for suffix in ["", "/messages?leaf_id=m1", "/tree", "/repair"] {
            let path = format!("/api/sessions/{id}{suffix}");
            let (status, body) = if suffix == "/repair" {
                app.post_json(&path, &json!({})).await
            } else {
                app.get(&path).await
            };
            assert!(status.is_client_error(), "{path}: {status} {body}");
        }
        let (status, body) = app.delete(&format!("/api/sessions/{id}")).await;
        assert!(status.is_client_error(), "DELETE {id}: {status} {body}");
    }
}

/// A panic inside a turn is a failed turn for that session; the process and
/// the session go on.
#[actix_web::test]
async fn a_panicking_turn_fails_alone() {
    let app = spawn_app().await;
    let (status, failed) = app.say("panics", "m1", "panic", None).await;
    assert_eq!(status, 500, "{failed}");
    assert_eq!(failed["error_type"], "internal");
    let (status, next) = app.say("panics", "m2", "say fine", None).await;
    assert_eq!(status, 200, "{next}");
    assert_eq!(next["content"], "fine");
    let (status, other) = app.say("bystander", "m1", "say hello", None).await;
    assert_eq!(status, 200, "{other}");
}

// ---- limits and timeouts -------------------------------------------------------

/// A body sent one byte at a time past `SERVER__BODY_TIMEOUT_SECONDS` is
/// answered 408 and the connection is let go; other clients go on meanwhile.
#[actix_web::test]
async fn a_slow_body_is_cut_off_with_408() {
    use std::io::{Read, Write};
    let app = crate::helpers::spawn_app_with(&[("SERVER__BODY_TIMEOUT_SECONDS", "1")]).await;
    let addr: SocketAddr = ([127, 0, 0, 1], app.port).into();
    let reply = actix_web::rt::task::spawn_blocking(move || {
        let mut stream = std::net::TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        write!(
            stream,
            "POST /api/chat HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{{"
        )
        .unwrap();
        // A byte every 200 ms, until the server answers or 10 s pass.
        for _ in 0..50 {
            std::thread::sleep(Duration::from_millis(200));
            if stream.write_all(b" ").is_err() {
                break;
            }
        }
        let mut reply = String::new();
        let _ = stream.read_to_string(&mut reply);
        reply
    });
    assert_alive(&app).await;
    let reply = reply.await.unwrap();
    assert!(reply.starts_with("HTTP/1.1 408"), "{reply}");
    assert!(reply.contains("not received within 1 s"), "{reply}");
}

/// Engine.IO handshakes past `SOCKETIO__MAX_SESSIONS_PER_IP` from one address
/// are refused with 429 until one of its sessions closes.
#[actix_web::test]
async fn engine_io_sessions_are_capped_per_address() {
    let app = crate::helpers::spawn_app_with(&[("SOCKETIO__MAX_SESSIONS_PER_IP", "3")]).await;
    let handshake = format!("{}/socket.io/?EIO=4&transport=polling", app.address);
    let mut sids = Vec::new();
    for _ in 0..3 {
        let response = app.client.get(&handshake).send().await.unwrap();
        assert_eq!(response.status(), 200);
        let text = response.text().await.unwrap();
        let open: Value = serde_json::from_str(&text[1..]).unwrap();
        sids.push(open["sid"].as_str().unwrap().to_string());
    }
    let refused = app.client.get(&handshake).send().await.unwrap();
    assert_eq!(refused.status(), 429);
    let refused: Value = refused.json().await.unwrap();
    assert!(refused["message"]
        .as_str()
        .unwrap()
        .contains("Too many sessions"));
    // Closing one (Engine.IO close packet) makes room again.
    let close = app
        .client
        .post(format!("{handshake}&sid={}", sids[0]))
        .body("1")
        .send()
        .await
        .unwrap();
    assert_eq!(close.status(), 200);
    let mut admitted = false;
    for _ in 0..50 {
        if app.client.get(&handshake).send().await.unwrap().status() == 200 {
            admitted = true;
            break;
        }
        actix_web::rt::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(admitted, "a closed session gives its place back");
}

/// Attachments past the per-session budget are a 413 over HTTP and an
/// `assistant:error` of error_type payload_too_large on the socket; nothing
/// is stored, and a smaller message goes through.
#[actix_web::test]
async fn attachments_past_the_budget_are_refused_with_413() {
    let app = crate::helpers::spawn_app_with(&[(
        "ASSISTANT__ATTACHMENT_BUDGET__SESSION_BYTES",
        "100000",
    )])
    .await;
    let big = json!([{"kind": "text", "text": "x".repeat(60_000)}, {"kind": "text", "text": "y".repeat(60_000)}]);
    let (status, refused) = app
        .post_chat(&json!({"id": "m1", "session_id": "big", "content": "hi", "attachments": big}))
        .await;
    assert_eq!(status, 413, "{refused}");
    assert_eq!(refused["type"], "payload_too_large");
    assert!(refused["error"]
        .as_str()
        .unwrap()
        .contains("per-session attachment budget of 100000 bytes"));
    let (status, _) = app.get("/api/sessions/big").await;
    assert_eq!(status, 404);
    let addr: SocketAddr = ([127, 0, 0, 1], app.port).into();
    let packet = json!(["assistant_message", {"id": "m1", "session_id": "big", "content": "hi", "attachments": big}]);
    let error = actix_web::rt::task::spawn_blocking(move || {
        let mut ws = raw_joined(addr);
        ws.send_text(&format!("42/assistant,{packet}"));
        ws.recv_until(true, |text| text.contains("assistant:error"))
    })
    .await
    .unwrap()
    .expect("an assistant:error");
    assert!(error.contains("payload_too_large"), "{error}");
    let small = json!([{"kind": "text", "text": "x".repeat(60_000)}]);
    let (status, reply) = app
        .post_chat(
            &json!({"id": "m1", "session_id": "big", "content": "say ok", "attachments": small}),
        )
        .await;
    assert_eq!(status, 200, "{reply}");
}

/// The new settings name themselves when their value is wrong.
#[test]
fn bad_limit_settings_are_named() {
    for key in [
        "SERVER__BODY_TIMEOUT_SECONDS",
        "SERVER__HEADER_TIMEOUT_SECONDS",
        "SOCKETIO__MAX_SESSIONS_PER_IP",
        "ASSISTANT__ATTACHMENT_BUDGET__SESSION_BYTES",
        "ASSISTANT__ATTACHMENT_BUDGET__PROCESS_BYTES",
    ] {
        let mut values = std::collections::BTreeMap::new();
        values.insert(key.to_string(), "lots".to_string());
        let error = assistant_runtime::settings::Settings::from_map(&values)
            .err()
            .unwrap_or_else(|| panic!("{key} accepted \"lots\""));
        assert!(error.to_string().contains(key), "{error}");
    }
}

/// A request head that never ends is cut off after
/// `SERVER__HEADER_TIMEOUT_SECONDS` (slowloris), and the server answers others.
#[actix_web::test]
async fn a_slow_request_head_is_cut_off() {
    use std::io::{Read, Write};
    let app = crate::helpers::spawn_app_with(&[("SERVER__HEADER_TIMEOUT_SECONDS", "1")]).await;
    let addr: SocketAddr = ([127, 0, 0, 1], app.port).into();
    let reply = actix_web::rt::task::spawn_blocking(move || {
        let mut stream = std::net::TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        write!(stream, "GET /health HTTP/1.1\r\nhost: x\r\n").unwrap();
        for _ in 0..50 {
            std::thread::sleep(Duration::from_millis(200));
            if stream.write_all(b"x-slow: 1\r\n").is_err() {
                break;
            }
        }
        let mut reply = Vec::new();
        let _ = stream.read_to_end(&mut reply);
        String::from_utf8_lossy(&reply).into_owned()
    });
    assert_alive(&app).await;
    let reply = reply.await.unwrap();
    assert!(reply.starts_with("HTTP/1.1 408"), "{reply:?}");
}

/// The costliest validation a small body can ask for (each of 6,000 items
/// tried against 40 `anyOf` branches, past the step budget) runs on the
/// blocking pool: /health keeps answering while four such turns run. The
/// slowest answer is printed for BENCHMARKS.md, not asserted.
#[actix_web::test]
async fn health_answers_while_costly_small_validations_run() {
    let app = spawn_app().await;
    let branches: Vec<Value> = (0..40)
        .map(|i| json!({"type": "object", "required": [format!("k{i}")]}))
        .collect();
    let schema = json!({"type": "object", "properties": {"xs": {"type": "array", "items": {"anyOf": branches}}}});
    let items: Vec<Value> = (0..6_000).map(|_| json!({"z": 0})).collect();
    let content = format!("call act {}", json!({ "xs": items }));
    let chats = (0..4).map(|i| {
        let body = json!({
            "id": "m1", "session_id": format!("costly-{i}"), "content": content,
            "host_context": context_with(schema.clone())
        });
        let app = &app;
        async move { app.post_chat(&body).await }
    });
    let health = async {
        let mut slowest = Duration::ZERO;
        for _ in 0..20 {
            let started = Instant::now();
            assert_alive(&app).await;
            slowest = slowest.max(started.elapsed());
        }
        slowest
    };
    let (answers, slowest) = futures_util::join!(join_all(chats), health);
    println!("slowest /health during costly small validations: {slowest:?}");
    for (status, reply) in answers {
        assert_eq!(status, 200, "{reply}");
        let tree = app
            .tree(reply["session_id"].as_str().unwrap())
            .await
            .to_string();
        assert!(tree.contains("too large to check"), "{tree:.300}");
    }
}
