//! What an operator sees: `/metrics` moving after turns on each transport,
//! the request id round trip (HTTP header, socket ack and events), one access
//! log line per request, and `/livez` / `/readyz`.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::helpers::{spawn_app, spawn_app_with, TestApp};
use crate::socketio_helpers::{run_scenario, Client};

/// The value of one sample line (`name{labels} value`), 0 when absent.
fn sample(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|value| value.parse().ok())
        .unwrap_or(0.0)
}

async fn scrape(app: &TestApp) -> String {
    let response = app
        .client
        .get(format!("{}/metrics", app.address))
        .send()
        .await
        .expect("scrape");
    assert_eq!(response.status(), 200);
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_string();
    assert!(content_type.starts_with("text/plain"), "{content_type}");
    response.text().await.expect("metrics text")
}

#[actix_web::test]
async fn metrics_move_after_turns_on_http_agui_and_socketio() {
    let app = spawn_app_with(&[("METRICS__STORED_SESSIONS_INTERVAL_SECONDS", "1")]).await;
    let before = scrape(&app).await;
    for family in [
        "# TYPE assistant_turns_total counter",
        "# TYPE assistant_turn_duration_seconds histogram",
        "# TYPE assistant_time_to_first_token_seconds histogram",
        "# TYPE assistant_live_session_actors gauge",
        "# TYPE assistant_stored_sessions gauge",
        "# TYPE assistant_pending_host_actions gauge",
        "# TYPE assistant_socketio_connections gauge",
        "# TYPE assistant_provider_requests_total counter",
        "# TYPE assistant_turn_errors_total counter",
        "# TYPE assistant_tokens_total counter",
        "# TYPE assistant_cost_usd_total counter",
        "# TYPE assistant_store_operation_seconds histogram",
    ] {
        assert!(before.contains(family), "missing {family}:\n{before}");
    }

    // HTTP: a completed turn, a turn that hands over a host action, a failed turn.
    let (status, _) = app
        .post_chat(&json!({"id": "m1", "session_id": "metrics-http", "content": "say hello"}))
        .await;
    assert_eq!(status, 200);
    let (status, reply) = app
        .post_chat(&json!({"id": "m2", "session_id": "metrics-pending",
            "content": "call select_issue {\"number\": 1}",
            "host_context": crate::helpers::tasks_context()}))
        .await;
    assert_eq!(status, 200, "{reply}");
    let (status, _) = app
        .post_chat(&json!({"id": "m3", "session_id": "metrics-fail", "content": "fail rate_limit"}))
        .await;
    assert_eq!(status, 500);
    // AG-UI: one streamed turn.
    let agui = app
        .client
        .post(format!("{}/api/agui", app.address))
        .json(&json!({"threadId": "metrics-agui", "runId": "r1",
            "messages": [{"id": "u1", "role": "user", "content": "say hi there"}],
            "tools": [], "context": [], "state": {}, "forwardedProps": {}}))
        .send()
        .await
        .expect("agui");
    assert!(agui.text().await.expect("sse").contains("RUN_FINISHED"));
    // Socket.IO: one streamed turn with the stock client.
    let socket = run_scenario(
        Client::Node,
        app.address.clone(),
        "websocket",
        json!({"steps": [
            {"call": "assistant_message", "data": {"id": "s1", "session_id": "metrics-sio", "content": "think a\nsay streamed words"}},
            {"wait": "assistant:status", "match": {"status": "completed"}},
        ]}),
    )
    .await;
    assert_eq!(socket["error"], Value::Null, "{socket}");

    let after = scrape(&app).await;
    let moved = |series: &str| sample(&after, series) - sample(&before, series);
    assert_eq!(
        moved("assistant_turns_total{transport=\"http\",outcome=\"completed\"}"),
        1.0,
        "{after}"
    );
    assert_eq!(
        moved("assistant_turns_total{transport=\"http\",outcome=\"host_action\"}"),
        1.0
    );
    assert_eq!(
        moved("assistant_turns_total{transport=\"http\",outcome=\"rate_limit\"}"),
        1.0
    );
    assert_eq!(
        moved("assistant_turns_total{transport=\"agui\",outcome=\"completed\"}"),
        1.0
    );
    assert_eq!(
        moved("assistant_turns_total{transport=\"socketio\",outcome=\"completed\"}"),
        1.0
    );
    assert_eq!(
        moved("assistant_turn_duration_seconds_count{transport=\"http\"}"),
        3.0
    );
    assert_eq!(
        moved("assistant_time_to_first_token_seconds_count{transport=\"socketio\"}"),
        1.0
    );
    assert_eq!(
        moved("assistant_time_to_first_token_seconds_count{transport=\"agui\"}"),
        1.0
    );
    assert!(
        moved("assistant_provider_requests_total{provider=\"builtin\"}") >= 5.0,
        "{after}"
    );
    assert_eq!(
        moved("assistant_turn_errors_total{provider=\"builtin\",error_type=\"rate_limit\"}"),
        1.0
    );
    assert!(moved("assistant_tokens_total{provider=\"builtin\",kind=\"output\"}") > 0.0);
    assert!(moved("assistant_tokens_total{provider=\"builtin\",kind=\"input\"}") > 0.0);
    assert_eq!(sample(&after, "assistant_pending_host_actions"), 1.0);
    assert!(
        moved("assistant_store_operation_seconds_count{operation=\"save_messages\"}") >= 5.0,
        "{after}"
    );
    assert!(moved("assistant_http_requests_total{method=\"POST\",status=\"200\"}") >= 3.0);
    assert_eq!(sample(&after, "assistant_store_reachable"), 1.0);
    // Five sessions: three over HTTP, one AG-UI thread, one socket session,
    // once the timer has recounted them.
    let stored_before = sample(&before, "assistant_stored_sessions");
    crate::helpers::eventually("the stored-session gauge to count five more", || async {
        sample(&scrape(&app).await, "assistant_stored_sessions") - stored_before == 5.0
    })
    .await;

    // Answering the host action resolves the pending gauge.
    let call_id = reply["pending_tool_call"]["call_id"].clone();
    let (status, _) = app
        .post_chat(
            &json!({"id": "m4", "session_id": "metrics-pending", "content": "",
            "tool_call_id": call_id, "tool_result": {"ok": true}}),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        sample(&scrape(&app).await, "assistant_pending_host_actions"),
        0.0
    );
}

async fn request_id_of(app: &TestApp, request: reqwest::RequestBuilder) -> (u16, String) {
    let _ = app;
    let response = request.send().await.expect("request");
    let status = response.status().as_u16();
    let id = response
        .headers()
        .get("x-request-id")
        .and_then(|value| value.to_str().ok())
        .expect("every reply carries x-request-id")
        .to_string();
    (status, id)
}

#[actix_web::test]
async fn a_request_id_round_trips_and_one_is_made_when_missing_or_unusable() {
    let app = spawn_app().await;
    let chat = format!("{}/api/chat", app.address);
    let body = json!({"id": "m1", "session_id": "rid", "content": "say hi"});
    let (status, id) = request_id_of(
        &app,
        app.client
            .post(&chat)
            .header("x-request-id", "req-abc.123")
            .json(&body),
    )
    .await;
    assert_eq!((status, id.as_str()), (200, "req-abc.123"));
    // Error replies carry it too: a 422 and an unknown route.
    let (status, id) = request_id_of(
        &app,
        app.client
            .post(&chat)
            .header("x-request-id", "req-bad-body")
            .json(&json!({"id": "m2"})),
    )
    .await;
    assert_eq!((status, id.as_str()), (422, "req-bad-body"));
    let (status, id) = request_id_of(
        &app,
        app.client
            .get(format!("{}/no/such/route", app.address))
            .header("x-request-id", "req-404"),
    )
    .await;
    assert_eq!((status, id.as_str()), (404, "req-404"));
    // None, or one that is not a plain token: a fresh id, different each time.
    let (_, first) = request_id_of(&app, app.client.get(format!("{}/livez", app.address))).await;
    let (_, second) = request_id_of(
        &app,
        app.client
            .get(format!("{}/livez", app.address))
            .header("x-request-id", "has spaces and \"quotes\""),
    )
    .await;
    for id in [&first, &second] {
        assert_eq!(id.len(), 32, "{id}");
        assert!(id.chars().all(|c| c.is_ascii_hexdigit()), "{id}");
    }
    assert_ne!(first, second);
}

#[actix_web::test]
async fn socket_requests_carry_a_request_id_in_their_ack_and_status_events() {
    let app = spawn_app().await;
    let result = run_scenario(
        Client::Node,
        app.address.clone(),
        "default",
        json!({"steps": [
            {"call": "assistant_message", "data": {"id": "s1", "session_id": "rid-sio", "content": "say hi"}},
            {"wait": "assistant:status", "match": {"status": "completed"}},
            {"call": "assistant_message", "data": {"id": "s2"}},
            {"wait": "assistant:error"},
        ]}),
    )
    .await;
    assert_eq!(result["error"], Value::Null, "{result}");
    let acks = result["acks"].as_array().expect("acks");
    let ack_id = |index: usize| {
        let ack = &acks[index];
        let ack = ack.get("args").and_then(|args| args.get(0)).unwrap_or(ack);
        ack["request_id"].as_str().map(str::to_string)
    };
    let first = ack_id(0).unwrap_or_else(|| panic!("no request_id in the ack: {result}"));
    let second = ack_id(1).unwrap_or_else(|| panic!("no request_id in the ack: {result}"));
    assert_ne!(first, second);
    let events = result["events"].as_array().expect("events");
    let ids_of = |name: &str| -> Vec<String> {
        events
            .iter()
            .filter(|item| item["event"] == name)
            .filter_map(|item| item["data"]["request_id"].as_str().map(str::to_string))
            .collect()
    };
    assert_eq!(ids_of("assistant:status"), vec![first.clone(), first]);
    assert_eq!(ids_of("assistant:error"), vec![second]);
}

#[actix_web::test]
async fn livez_is_always_up_and_readyz_names_what_is_missing() {
    let app = spawn_app().await;
    assert_eq!(app.get("/livez").await.0, 200);
    let (status, body) = app.get("/readyz").await;
    assert_eq!(
        (status.as_u16(), body["status"].clone()),
        (200, json!("ready"))
    );

    let unusable = spawn_app_with(&[("LLM__PRIMARY_MODEL", "openai:gpt-4o")]).await;
    assert_eq!(unusable.get("/livez").await.0, 200);
    let (status, body) = unusable.get("/readyz").await;
    assert_eq!(status, 503);
    assert_eq!(body["missing"], json!(["model"]));
}

#[actix_web::test]
async fn each_request_gets_one_access_log_line_at_info() {
    let dir = std::env::temp_dir().join(format!("ar_access_log_{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch folder");
    let log = dir.join("server.log");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port();
    // No RUST_LOG: the default level (info) must show the line.
    let mut child = Command::new(env!("CARGO_BIN_EXE_assistant-runtime"))
        .args(["serve", "--port", &port.to_string()])
        .env_clear()
        // This test's client plays a proxy on loopback for the first request.
        .env("SERVER__TRUSTED_PROXIES", "127.0.0.1")
        .current_dir(&dir)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log file"))
        .spawn()
        .expect("start the server");
    let client = crate::helpers::http_client();
    let address = format!("http://127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while client.get(format!("{address}/livez")).send().await.is_err() {
        assert!(Instant::now() < deadline, "server did not come up");
        actix_web::rt::time::sleep(Duration::from_millis(50)).await;
    }
    let reply = client
        .post(format!("{address}/api/chat"))
        .header("x-request-id", "req-log-1")
        .header("x-forwarded-for", "6.6.6.6, 198.51.100.7")
        .json(&json!({"id": "m1", "session_id": "logged-session", "content": "say hi"}))
        .send()
        .await
        .expect("chat");
    assert_eq!(reply.status(), 200);
    let reply = client
        .get(format!("{address}/api/sessions/logged-session"))
        .header("x-request-id", "req-log-2")
        .send()
        .await
        .expect("session");
    assert_eq!(reply.status(), 200);
    let _ = child.kill();
    let _ = child.wait();
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    let line = |id: &str| {
        let lines: Vec<&str> = text.lines().filter(|line| line.contains(id)).collect();
        assert_eq!(lines.len(), 1, "one line for {id}:\n{text}");
        lines[0].to_string()
    };
    let chat = line("request_id=req-log-1");
    assert!(chat.contains(" INFO "), "{chat}");
    assert!(chat.contains("POST /api/chat 200 "), "{chat}");
    assert!(chat.contains("ms session=logged-session "), "{chat}");
    // The rightmost hop the trusted proxy (loopback) was handed.
    assert!(chat.ends_with("client=198.51.100.7"), "{chat}");
    let info = line("request_id=req-log-2");
    assert!(
        info.contains("GET /api/sessions/logged-session 200 "),
        "{info}"
    );
    assert!(info.contains("session=logged-session"), "{info}");
    assert!(info.ends_with("client=127.0.0.1"), "{info}");
}

#[actix_web::test]
async fn stored_sessions_are_counted_in_postgres_too() {
    let admin_url = "postgres://postgres@127.0.0.1:5432/postgres";
    let name = format!(
        "ar_test_metrics_{}_{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .subsec_nanos()
    );
    let (admin, connection) = tokio_postgres::connect(admin_url, tokio_postgres::NoTls)
        .await
        .expect("connect to the test PostgreSQL");
    actix_web::rt::spawn(async move {
        let _ = connection.await;
    });
    admin
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .expect("create database");
    let url = format!("postgres://postgres@127.0.0.1:5432/{name}");
    let app = spawn_app_with(&[
        ("DATABASE_URL", url.as_str()),
        ("METRICS__STORED_SESSIONS_INTERVAL_SECONDS", "1"),
    ])
    .await;
    for session in ["pg-a", "pg-b"] {
        let (status, _) = app
            .post_chat(&json!({"id": "m1", "session_id": session, "content": "say hi"}))
            .await;
        assert_eq!(status, 200);
    }
    crate::helpers::eventually("the stored-session gauge to count two", || async {
        sample(&scrape(&app).await, "assistant_stored_sessions") == 2.0
    })
    .await;
    let text = scrape(&app).await;
    admin
        .batch_execute(&format!("DROP DATABASE {name} WITH (FORCE)"))
        .await
        .expect("drop database");
    assert_eq!(sample(&text, "assistant_stored_sessions"), 2.0, "{text}");
    assert!(
        sample(
            &text,
            "assistant_store_operation_seconds_count{operation=\"save_messages\"}"
        ) >= 2.0
    );
}

/// Point 7: a provider's failure is explained in the server's log: one
/// WARN line with its `error_type`, the provider's own message and the
/// request's id (a wrong key; then a provider that is down).
#[actix_web::test]
async fn point_7_a_provider_failure_logs_its_type_message_and_request_id() {
    let fake = crate::fake_provider::FakeProvider::start();
    let base_url = fake.base_url_openai();
    let server = crate::process::ServerProcess::runtime(&[
        ("LLM__PRIMARY_MODEL", "openai:gpt-4o-mini"),
        ("OPENAI_API_KEY", "sk-wrong"),
        ("OPENAI_BASE_URL", &base_url),
        ("LLM__RETRY_BACKOFF_MS", "1"),
    ])
    .await;
    fake.push(crate::fake_provider::Script::status(
        401,
        "Incorrect API key provided: sk-wrong",
    ));
    let response = server
        .app
        .client
        .post(format!("{}/api/chat", server.app.address))
        .header("x-request-id", "req-wrong-key")
        .json(&json!({"id": "m1", "session_id": "p7", "content": "hi"}))
        .send()
        .await
        .expect("sent");
    assert_eq!(response.status(), 500);
    let log = server.log_text();
    let line = log
        .lines()
        .find(|line| line.contains("request_id=req-wrong-key") && line.contains("WARN"))
        .unwrap_or_else(|| panic!("no WARN line for the request: {log}"));
    assert!(line.contains("error_type=provider_auth"), "{line}");
    assert!(line.contains("Incorrect API key provided"), "{line}");

    // Down: nothing listens on port 1.
    let down = crate::process::ServerProcess::runtime(&[
        ("LLM__PRIMARY_MODEL", "openai:gpt-4o-mini"),
        ("OPENAI_API_KEY", "sk-any"),
        ("OPENAI_BASE_URL", "http://127.0.0.1:1/v1"),
        ("LLM__RETRY_BACKOFF_MS", "1"),
    ])
    .await;
    let response = down
        .app
        .client
        .post(format!("{}/api/chat", down.app.address))
        .header("x-request-id", "req-down")
        .json(&json!({"id": "m1", "session_id": "p7", "content": "hi"}))
        .send()
        .await
        .expect("sent");
    assert_eq!(response.status(), 500);
    let log = down.log_text();
    assert!(
        log.lines().any(|line| line.contains("request_id=req-down")
            && line.contains("error_type=connection_error")),
        "{log}"
    );
}
