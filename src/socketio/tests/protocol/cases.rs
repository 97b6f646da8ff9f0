//! Socket.IO transport, black box: the stock python-socketio and
//! socket.io-client drive an echo namespace over both transport modes, and raw
//! HTTP requests check the Engine.IO handshake, errors and session closing.

use std::time::Duration;

use assistant_socketio::SocketIoConfig;
use serde_json::{json, Value};

use crate::raw_ws::RawWs;
use crate::support::{run_probe, spawn_server, Client, ServerKind, TestServer, TEST_NAMESPACE};

/// Server emits per probe; enough to catch reordering across the upgrade.
const BURST: u32 = 100;
/// Upper bound for "eventually" in raw tests (never a timing assertion).
const EVENTUALLY: Duration = Duration::from_secs(10);
/// Short ping timings so dead-peer detection is observable in a test.
const FAST_PING: Duration = Duration::from_millis(300);

/// Every test below runs against both servers the transport is served by:
/// `HttpServer` (a websocket stays inside the h1 dispatcher) and the
/// takeover server the binary builds (`http_service`: an accepted
/// websocket leaves the dispatcher and runs on the socket itself). Each name
/// becomes a module with the tests `http_server` and `takeover`.
macro_rules! on_both_servers {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                use crate::support::ServerKind;

                #[actix_web::test]
                async fn http_server() {
                    super::$name(ServerKind::HttpServer).await;
                }

                #[actix_web::test]
                async fn takeover() {
                    super::$name(ServerKind::Takeover).await;
                }
            }
        )*
    };
}

on_both_servers!(
    python_client_round_trips_after_upgrade,
    python_client_round_trips_over_websocket_only,
    node_client_round_trips_after_upgrade,
    node_client_round_trips_over_websocket_only,
    python_client_gets_connect_error_for_unknown_namespace,
    node_client_gets_connect_error_for_unknown_namespace,
    polling_handshake_advertises_the_session,
    bad_requests_get_engine_io_error_codes,
    polling_answers_cors_for_allowed_origins_only,
    polling_session_connects_namespaces_and_echoes,
    oversized_post_is_refused_and_closes_the_session,
    malformed_packet_closes_only_its_connection,
    client_that_stops_reading_is_dropped_while_others_go_on,
    second_concurrent_poll_is_refused_and_closes_the_session,
    silent_client_is_dropped_while_a_ponging_one_stays,
    websocket_malformed_or_oversized_packet_closes_only_its_connection,
    silent_websocket_client_is_dropped_while_a_ponging_one_stays,
    client_close_packet_ends_the_session_with_ok,
    namespaces_share_one_connection_and_leave_independently,
);

fn fast_config() -> SocketIoConfig {
    SocketIoConfig {
        ping_interval: FAST_PING,
        ping_timeout: FAST_PING,
        max_payload: 10_000,
        ..Default::default()
    }
}

async fn check_round_trips(kind: ServerKind, client: Client, mode: &str) {
    let server = spawn_server(kind, SocketIoConfig::default());
    let report = run_probe(client, server.url(), TEST_NAMESPACE, mode, BURST).await;
    let context = format!("{client:?} {mode}: {report}");
    assert_eq!(report["connected"], true, "{context}");
    assert_eq!(report["error"], Value::Null, "{context}");
    assert_eq!(
        report["echo"],
        json!({"hello": "world", "n": 1}),
        "{context}"
    );
    assert_eq!(report["ack"], json!([1, "two"]), "{context}");
    let expected_burst: Vec<u32> = (0..BURST).collect();
    assert_eq!(report["burst"], json!(expected_burst), "{context}");
    assert_eq!(report["transport"], "websocket", "{context}");
}

async fn check_unknown_namespace(kind: ServerKind, client: Client, mode: &str) {
    let server = spawn_server(kind, SocketIoConfig::default());
    let report = run_probe(client, server.url(), "/nope", mode, 0).await;
    let context = format!("{client:?} {mode}: {report}");
    assert_eq!(report["connected"], false, "{context}");
    assert_eq!(report["connect_error"], "Invalid namespace", "{context}");
}

async fn python_client_round_trips_after_upgrade(kind: ServerKind) {
    check_round_trips(kind, Client::Python, "default").await;
}

async fn python_client_round_trips_over_websocket_only(kind: ServerKind) {
    check_round_trips(kind, Client::Python, "websocket").await;
}

async fn node_client_round_trips_after_upgrade(kind: ServerKind) {
    check_round_trips(kind, Client::Node, "default").await;
}

async fn node_client_round_trips_over_websocket_only(kind: ServerKind) {
    check_round_trips(kind, Client::Node, "websocket").await;
}

async fn python_client_gets_connect_error_for_unknown_namespace(kind: ServerKind) {
    check_unknown_namespace(kind, Client::Python, "default").await;
    check_unknown_namespace(kind, Client::Python, "websocket").await;
}

async fn node_client_gets_connect_error_for_unknown_namespace(kind: ServerKind) {
    check_unknown_namespace(kind, Client::Node, "default").await;
    check_unknown_namespace(kind, Client::Node, "websocket").await;
}

// Raw Engine.IO over HTTP.

/// One client per test thread: building one loads the system's roots, too
/// slow to repeat per request within the fast ping periods.
fn http() -> reqwest::Client {
    thread_local! {
        static CLIENT: reqwest::Client = crate::support::http_client_builder()
            .timeout(EVENTUALLY)
            .build()
            .expect("reqwest client");
    }
    CLIENT.with(Clone::clone)
}

/// Opens a polling session; returns its sid.
async fn open_polling(server: &TestServer) -> String {
    let body = http()
        .get(server.engine_url("EIO=4&transport=polling"))
        .send()
        .await
        .expect("handshake")
        .text()
        .await
        .expect("handshake body");
    let handshake: Value = serde_json::from_str(&body[1..]).expect("handshake JSON");
    handshake["sid"].as_str().expect("sid").to_owned()
}

async fn poll(server: &TestServer, sid: &str) -> (u16, String) {
    let res = http()
        .get(server.engine_url(&format!("EIO=4&transport=polling&sid={sid}")))
        .send()
        .await
        .expect("poll");
    (res.status().as_u16(), res.text().await.expect("poll body"))
}

async fn post(server: &TestServer, sid: &str, body: impl Into<String>) -> u16 {
    http()
        .post(server.engine_url(&format!("EIO=4&transport=polling&sid={sid}")))
        .body(body.into())
        .send()
        .await
        .expect("post")
        .status()
        .as_u16()
}

async fn error_of(res: reqwest::Response) -> (u16, Value) {
    let status = res.status().as_u16();
    (status, res.json().await.expect("error JSON"))
}

/// Polls until the session is reported unknown (code 1), within `EVENTUALLY`.
async fn assert_session_closed(server: &TestServer, sid: &str) {
    let deadline = tokio::time::Instant::now() + EVENTUALLY;
    loop {
        let (status, body) = poll(server, sid).await;
        if status == 400 && body.contains(r#""code":1"#) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "session {sid} still open: {status} {body}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn polling_handshake_advertises_the_session(kind: ServerKind) {
    let server = spawn_server(kind, SocketIoConfig::default());
    let res = http()
        .get(server.engine_url("EIO=4&transport=polling&t=abc"))
        .send()
        .await
        .expect("handshake");
    assert_eq!(res.status().as_u16(), 200);
    let body = res.text().await.expect("body");
    assert!(body.starts_with('0'), "{body}");
    let handshake: Value = serde_json::from_str(&body[1..]).expect("JSON");
    assert!(
        handshake["sid"].as_str().is_some_and(|sid| sid.len() >= 20),
        "{handshake}"
    );
    assert_eq!(handshake["upgrades"], json!(["websocket"]));
    assert_eq!(handshake["pingInterval"], 25_000);
    assert_eq!(handshake["pingTimeout"], 20_000);
    assert_eq!(handshake["maxPayload"], 1_000_000);
}

async fn bad_requests_get_engine_io_error_codes(kind: ServerKind) {
    let server = spawn_server(kind, SocketIoConfig::default());
    let cases = [
        (
            "EIO=4&transport=polling&sid=nosuchsession",
            1,
            "Session ID unknown",
        ),
        ("EIO=3&transport=polling", 5, "Unsupported protocol version"),
        ("transport=polling", 5, "Unsupported protocol version"),
        ("EIO=4&transport=carrier-pigeon", 0, "Transport unknown"),
        ("EIO=4", 0, "Transport unknown"),
    ];
    for (query, code, message) in cases {
        let res = http()
            .get(server.engine_url(query))
            .send()
            .await
            .expect("request");
        let (status, body) = error_of(res).await;
        assert_eq!(status, 400, "{query}");
        assert_eq!(body, json!({"code": code, "message": message}), "{query}");
    }
}

async fn polling_answers_cors_for_allowed_origins_only(kind: ServerKind) {
    let server = spawn_server(kind, SocketIoConfig::default());
    let origin = "http://localhost:5173";
    let res = http()
        .get(server.engine_url("EIO=4&transport=polling"))
        .header("Origin", origin)
        .send()
        .await
        .expect("handshake");
    assert_eq!(res.status().as_u16(), 200);
    assert_eq!(res.headers()["access-control-allow-origin"], origin);
    assert_eq!(res.headers()["access-control-allow-credentials"], "true");

    let res = http()
        .request(
            reqwest::Method::OPTIONS,
            server.engine_url("EIO=4&transport=polling"),
        )
        .header("Origin", origin)
        .header("Access-Control-Request-Method", "POST")
        .header("Access-Control-Request-Headers", "content-type")
        .send()
        .await
        .expect("preflight");
    assert_eq!(res.status().as_u16(), 204);
    assert_eq!(res.headers()["access-control-allow-origin"], origin);
    assert_eq!(res.headers()["access-control-allow-credentials"], "true");
    assert!(res.headers()["access-control-allow-methods"]
        .to_str()
        .is_ok_and(|methods| methods.contains("POST")));

    let res = http()
        .get(server.engine_url("EIO=4&transport=polling"))
        .header("Origin", "http://evil.example")
        .send()
        .await
        .expect("handshake");
    let (status, body) = error_of(res).await;
    assert_eq!(status, 403);
    assert_eq!(body["code"], 4);
}

async fn polling_session_connects_namespaces_and_echoes(kind: ServerKind) {
    let server = spawn_server(kind, SocketIoConfig::default());
    let sid = open_polling(&server).await;
    assert_eq!(post(&server, &sid, "40/test,\u{1e}40/nope,").await, 200);
    let (_, body) = poll(&server, &sid).await;
    let packets: Vec<&str> = body.split('\u{1e}').collect();
    assert!(packets[0].starts_with(r#"40/test,{"sid":""#), "{body}");
    assert_eq!(
        packets.get(1),
        Some(&r#"44/nope,{"message":"Invalid namespace"}"#),
        "{body}"
    );

    assert_eq!(
        post(&server, &sid, r#"42/test,7["ack_me",{"a":1}]"#).await,
        200
    );
    let (_, body) = poll(&server, &sid).await;
    assert_eq!(body, r#"43/test,7[{"a":1}]"#);
}

async fn oversized_post_is_refused_and_closes_the_session(kind: ServerKind) {
    let server = spawn_server(kind, fast_config());
    let sid = open_polling(&server).await;
    let body = format!("42/test,[\"echo\",\"{}\"]", "x".repeat(20_000));
    assert_eq!(post(&server, &sid, body).await, 413);
    assert_session_closed(&server, &sid).await;
}

async fn malformed_packet_closes_only_its_connection(kind: ServerKind) {
    let server = spawn_server(kind, SocketIoConfig::default());
    let bad = open_polling(&server).await;
    let good = open_polling(&server).await;
    assert_eq!(post(&server, &good, "40/test,").await, 200);
    for garbage in ["4zzz", "x", r#"42/test,{"not":"an array"}"#] {
        let sid = open_polling(&server).await;
        assert_eq!(post(&server, &sid, "40/test,").await, 200);
        assert_eq!(post(&server, &sid, garbage).await, 400, "{garbage}");
        assert_session_closed(&server, &sid).await;
    }
    assert_eq!(post(&server, &bad, "9").await, 400);
    assert_session_closed(&server, &bad).await;
    let (status, body) = poll(&server, &good).await;
    assert_eq!(status, 200);
    assert!(body.starts_with("40/test,"), "{body}");
}

async fn client_that_stops_reading_is_dropped_while_others_go_on(kind: ServerKind) {
    // Default ping timings, so only the queue limit can close the session in time.
    let server = spawn_server(
        kind,
        SocketIoConfig {
            max_payload: 10_000,
            ..Default::default()
        },
    );
    let slow = open_polling(&server).await;
    let healthy = open_polling(&server).await;
    for sid in [&slow, &healthy] {
        assert_eq!(post(&server, sid, "40/test,").await, 200);
    }
    // 2 MB of emits for a client that never polls: past the 1 MiB queue limit.
    let flood = r#"42/test,["flood",{"count":200,"size":10000}]"#;
    assert_eq!(post(&server, &slow, flood).await, 200);
    assert_session_closed(&server, &slow).await;
    let (status, body) = poll(&server, &healthy).await;
    assert_eq!(status, 200);
    assert!(body.starts_with("40/test,"), "{body}");
}

async fn second_concurrent_poll_is_refused_and_closes_the_session(kind: ServerKind) {
    let server = spawn_server(kind, SocketIoConfig::default());
    let sid = open_polling(&server).await;
    // Two polls at once, with no sleep to order them: whichever reaches the
    // session second is refused (400), and closing the session answers the
    // one waiting there with a close packet.
    let (one, other) = tokio::join!(poll(&server, &sid), poll(&server, &sid));
    let mut outcomes = [one, other];
    outcomes.sort();
    let [(waited, close), (refused, error)] = outcomes;
    assert_eq!((waited, close.as_str()), (200, "1"), "{error}");
    assert_eq!(refused, 400, "{error}");
    assert_session_closed(&server, &sid).await;
}

async fn silent_client_is_dropped_while_a_ponging_one_stays(kind: ServerKind) {
    let server = spawn_server(kind, fast_config());
    let silent = open_polling(&server).await;
    let healthy = open_polling(&server).await;
    assert_eq!(post(&server, &healthy, "40/test,").await, 200);
    // Answer every ping of the healthy session for several ping periods.
    let deadline = tokio::time::Instant::now() + FAST_PING * 8;
    let mut n_pongs = 0;
    while tokio::time::Instant::now() < deadline {
        let (status, body) = poll(&server, &healthy).await;
        assert_eq!(status, 200, "{body}");
        for packet in body.split('\u{1e}') {
            if packet == "2" {
                assert_eq!(post(&server, &healthy, "3").await, 200);
                n_pongs += 1;
            }
        }
    }
    assert!(n_pongs >= 2, "only {n_pongs} pings seen");
    assert_session_closed(&server, &silent).await;
    assert_eq!(
        post(&server, &healthy, r#"42/test,["echo","still here"]"#).await,
        200
    );
    let (status, body) = poll(&server, &healthy).await;
    assert_eq!(status, 200);
    assert!(body.contains(r#"42/test,["echo","still here"]"#), "{body}");
}

// Raw Engine.IO over websocket.

/// Runs blocking raw-websocket work off the test's runtime thread.
async fn blocking<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    actix_web::rt::task::spawn_blocking(work)
        .await
        .expect("blocking test work")
}

/// Opens a direct websocket session and joins the test namespace.
fn ws_joined(server_addr: std::net::SocketAddr) -> RawWs {
    let mut ws = RawWs::connect(server_addr, "EIO=4&transport=websocket");
    let open = ws.recv_until(false, |_| true).expect("open packet");
    let handshake: Value = serde_json::from_str(&open[1..]).expect("open JSON");
    assert_eq!(handshake["upgrades"], json!([]), "{open}");
    ws.send_text("40/test,");
    ws.recv_until(true, |text| text.starts_with("40/test,"))
        .expect("namespace CONNECT reply");
    ws
}

fn assert_echoes(ws: &mut RawWs) {
    ws.send_text(r#"42/test,["echo","still here"]"#);
    let echo = ws.recv_until(true, |text| text.starts_with("42/test,"));
    assert_eq!(echo.as_deref(), Some(r#"42/test,["echo","still here"]"#));
}

async fn websocket_malformed_or_oversized_packet_closes_only_its_connection(kind: ServerKind) {
    let server = spawn_server(kind, fast_config());
    let addr = server.addr;
    blocking(move || {
        let mut good = ws_joined(addr);
        for bad_packet in ["4zzz".to_owned(), "x".repeat(20_000)] {
            let mut bad = ws_joined(addr);
            bad.send_text(&bad_packet);
            assert_eq!(bad.recv_until(true, |_| false), None, "{bad_packet:.10}");
            assert_echoes(&mut good);
        }
    })
    .await;
}

async fn silent_websocket_client_is_dropped_while_a_ponging_one_stays(kind: ServerKind) {
    let server = spawn_server(kind, fast_config());
    let addr = server.addr;
    blocking(move || {
        let mut silent = ws_joined(addr);
        // The healthy one answers its pings on its own thread meanwhile.
        let healthy = std::thread::spawn(move || {
            let mut healthy = ws_joined(addr);
            for _ in 0..4 {
                assert!(healthy.recv_until(false, |text| text == "2").is_some());
                healthy.send_text("3");
            }
            healthy
        });
        // The silent one sees a ping and, unanswered, the end of its session.
        assert_eq!(silent.recv_until(false, |_| false), None);
        let mut healthy = healthy.join().expect("healthy client thread");
        assert_echoes(&mut healthy);
    })
    .await;
}

async fn client_close_packet_ends_the_session_with_ok(kind: ServerKind) {
    let server = spawn_server(kind, SocketIoConfig::default());
    let sid = open_polling(&server).await;
    assert_eq!(post(&server, &sid, "1").await, 200);
    assert_session_closed(&server, &sid).await;
}

async fn namespaces_share_one_connection_and_leave_independently(kind: ServerKind) {
    let server = spawn_server(kind, SocketIoConfig::default());
    let sid = open_polling(&server).await;
    assert_eq!(post(&server, &sid, "40/test,\u{1e}40/other,").await, 200);
    let (_, body) = poll(&server, &sid).await;
    assert!(
        body.contains("40/test,{") && body.contains("40/other,{"),
        "{body}"
    );

    assert_eq!(post(&server, &sid, r#"42/other,["echo","o"]"#).await, 200);
    let (_, body) = poll(&server, &sid).await;
    assert_eq!(body, r#"42/other,["echo","o"]"#);

    // After DISCONNECT from /other, its events are dropped; /test goes on.
    let packets = "41/other,\u{1e}42/other,[\"echo\",\"gone\"]\u{1e}42/test,[\"echo\",\"t\"]";
    assert_eq!(post(&server, &sid, packets).await, 200);
    let (_, body) = poll(&server, &sid).await;
    assert_eq!(body, r#"42/test,["echo","t"]"#);
}
