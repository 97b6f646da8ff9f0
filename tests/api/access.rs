//! Identity and ownership on every door: the principal × route matrix in
//! `header` and `jwt` modes (expired, wrong issuer, wrong audience and badly
//! signed tokens included), the local token of `trusted_local`, the same
//! checks on the Socket.IO events (stock socket.io-client), and that a
//! refused request changes nothing stored. Also the JSON-only POST rule,
//! request models and the per-principal limits.

use std::time::{SystemTime, UNIX_EPOCH};

use jsonwebtoken::{encode, EncodingKey, Header};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::helpers::{spawn_app_with, tasks_context, TestApp};
use crate::socketio_helpers::{run_scenario, Client};

/// Who sends a request in the matrix.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Who {
    Nobody,
    Alice,
    Bob,
    Admin,
}

/// How a mode turns `Who` into credentials.
trait Credentials {
    /// Headers of an HTTP request (and of a socket's HTTP requests).
    fn headers(&self, who: Who) -> Vec<(String, String)>;
    /// The Socket.IO CONNECT `auth` payload.
    fn socket_auth(&self, who: Who) -> Option<Value>;
}

struct ProxyHeaders;

impl Credentials for ProxyHeaders {
    fn headers(&self, who: Who) -> Vec<(String, String)> {
        let principal = |name: &str| ("X-Assistant-Principal".to_string(), name.to_string());
        match who {
            Who::Nobody => vec![("X-Assistant-Roles".into(), "admin".into())],
            Who::Alice => vec![principal("alice")],
            Who::Bob => vec![
                principal("bob"),
                ("X-Assistant-Roles".into(), "viewer".into()),
            ],
            Who::Admin => vec![
                principal("root"),
                ("X-Assistant-Roles".into(), "viewer, admin".into()),
            ],
        }
    }

    fn socket_auth(&self, _who: Who) -> Option<Value> {
        None
    }
}

const JWT_SECRET: &str = "test-secret-of-enough-length-for-hs256";
const ISSUER: &str = "https://id.example";
const AUDIENCE: &str = "assistant-runtime";

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_secs() as i64
}

fn token(claims: Value, secret: &str) -> String {
    encode(
        &Header::default(),
        &claims,
        &EncodingKey::from_secret(secret.as_bytes()),
    )
    .expect("encodes")
}

fn claims(sub: &str, roles: &[&str]) -> Value {
    json!({"sub": sub, "iss": ISSUER, "aud": AUDIENCE, "exp": now() + 600, "nbf": now() - 5, "roles": roles})
}

struct Jwt;

impl Jwt {
    fn token(who: Who) -> Option<String> {
        match who {
            Who::Nobody => None,
            Who::Alice => Some(token(claims("alice", &[]), JWT_SECRET)),
            Who::Bob => Some(token(claims("bob", &["viewer"]), JWT_SECRET)),
            Who::Admin => Some(token(claims("root", &["admin"]), JWT_SECRET)),
        }
    }
}

impl Credentials for Jwt {
    fn headers(&self, who: Who) -> Vec<(String, String)> {
        Jwt::token(who)
            .map(|token| vec![("Authorization".to_string(), format!("Bearer {token}"))])
            .unwrap_or_default()
    }

    fn socket_auth(&self, who: Who) -> Option<Value> {
        Jwt::token(who).map(|token| json!({"token": token}))
    }
}

/// The app's address with a client sending these headers on every request.
/// The admin-only routes of other systems (inject, the inbox), as `caller`.
async fn admin_routes(caller: &TestApp) -> Vec<(&'static str, (StatusCode, Value))> {
    let patched = caller
        .client
        .patch(format!("{}/api/inbox/some-item/surfaced", caller.address))
        .send()
        .await
        .expect("request sent");
    let patched = (
        patched.status(),
        patched.json::<Value>().await.unwrap_or(Value::Null),
    );
    vec![
        (
            "inject",
            caller
                .post_json(
                    "/api/assistant/inject",
                    &json!({"from": "x", "via": "y", "message": "z", "session_id": "s-alice"}),
                )
                .await,
        ),
        (
            "inbox post",
            caller
                .post_json("/api/inbox", &json!({"from": "x", "message": "z"}))
                .await,
        ),
        ("inbox list", caller.get("/api/inbox").await),
        ("inbox surfaced", patched),
    ]
}

fn as_caller(app: &TestApp, headers: &[(String, String)]) -> TestApp {
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        map.insert(
            HeaderName::from_bytes(name.as_bytes()).expect("header name"),
            HeaderValue::from_str(value).expect("header value"),
        );
    }
    TestApp {
        address: app.address.clone(),
        port: app.port,
        client: crate::helpers::http_client_builder()
            .default_headers(map)
            .build()
            .expect("client"),
    }
}

fn expected(who: Who) -> StatusCode {
    match who {
        Who::Nobody => StatusCode::UNAUTHORIZED,
        Who::Bob => StatusCode::FORBIDDEN,
        Who::Alice | Who::Admin => StatusCode::OK,
    }
}

/// What alice's session holds, read by alice: the change detector of
/// "nothing stored changes after a refused request".
async fn stored_state(alice: &TestApp, session: &str) -> (Value, Value) {
    let (status, tree) = alice.get(&format!("/api/sessions/{session}/tree")).await;
    assert_eq!(status, StatusCode::OK, "{tree}");
    let (_, mut info) = alice.get(&format!("/api/sessions/{session}")).await;
    info["turn_running"] = Value::Null;
    (tree, info)
}

/// A user message with a host context whose one `select_issue` call stays pending.
fn pending_turn(session: &str, id: &str) -> Value {
    json!({"id": id, "session_id": session, "content": "call select_issue {\"number\": 42}",
           "host_context": tasks_context()})
}

/// Every session route and socket event, for each principal, in one mode.
async fn route_matrix(app: &TestApp, credentials: &dyn Credentials) {
    let alice = as_caller(app, &credentials.headers(Who::Alice));
    let (status, body) = alice.post_chat(&pending_turn("s-alice", "a1")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let call_id = body["pending_tool_call"]["call_id"]
        .as_str()
        .expect("a pending call")
        .to_string();
    let before = stored_state(&alice, "s-alice").await;

    for who in [Who::Nobody, Who::Bob] {
        let caller = as_caller(app, &credentials.headers(who));
        let want = expected(who);
        let requests: Vec<(&str, (StatusCode, Value))> = vec![
            (
                "chat",
                caller
                    .post_chat(&json!({"id": format!("x-{who:?}"), "session_id": "s-alice", "content": "hi"}))
                    .await,
            ),
            (
                "continuation",
                caller
                    .continue_call("s-alice", &format!("c-{who:?}"), &call_id, json!({"ok": true}))
                    .await,
            ),
            (
                "decision receipt",
                caller
                    .post_chat(&json!({"id": format!("d-{who:?}"), "session_id": "s-alice", "content": "",
                                       "tool_call_id": call_id, "tool_result": {"status": "failed", "error": "no"}}))
                    .await,
            ),
            (
                "cancel",
                caller.post_json("/api/chat/s-alice/cancel", &json!({})).await,
            ),
            ("info", caller.get("/api/sessions/s-alice").await),
            ("messages", caller.get("/api/sessions/s-alice/messages").await),
            ("tree", caller.get("/api/sessions/s-alice/tree").await),
            ("traces", caller.get("/api/sessions/s-alice/traces").await),
            (
                "repair",
                caller.post_json("/api/sessions/s-alice/repair", &json!({})).await,
            ),
            ("delete", caller.delete("/api/sessions/s-alice").await),
            ("owner", caller.set_owner("s-alice", Some("bob")).await),
            (
                "owner inject",
                caller
                    .post_json(
                        "/api/sessions/s-alice/inject",
                        &json!({"from": "x", "via": "y", "message": "z"}),
                    )
                    .await,
            ),
            (
                "agui",
                caller
                    .post_json("/api/agui", &json!({"threadId": "s-alice", "runId": "r1", "state": {}, "tools": [], "context": [], "forwardedProps": {},
                                                    "messages": [{"id": format!("g-{who:?}"), "role": "user", "content": "hi"}]}))
                    .await,
            ),
        ];
        for (route, (status, body)) in requests {
            assert_eq!(status, want, "{who:?} {route}: {body}");
            let kind = if who == Who::Nobody {
                "unauthorized"
            } else {
                "forbidden"
            };
            assert_eq!(body["type"], kind, "{who:?} {route}: {body}");
        }
        // A session that does not exist answers a non-admin exactly like
        // someone else's: the status does not tell which.
        if who == Who::Bob {
            let (status, missing) = caller.get("/api/sessions/nobody-has-this").await;
            assert_eq!(status, StatusCode::FORBIDDEN, "{missing}");
            let (_, theirs) = caller.get("/api/sessions/s-alice").await;
            assert_eq!(
                missing["error"]
                    .as_str()
                    .map(|e| e.replace("nobody-has-this", "ID")),
                theirs["error"].as_str().map(|e| e.replace("s-alice", "ID"))
            );
        }
        let (status, list) = caller.get("/api/sessions").await;
        match who {
            Who::Nobody => assert_eq!(status, StatusCode::UNAUTHORIZED, "{list}"),
            _ => assert_eq!(list, json!([]), "bob lists none of alice's sessions"),
        }
        for path in ["/api/models", "/api/debug/tools"] {
            let (status, body) = caller.get(path).await;
            let want = match who {
                Who::Nobody => StatusCode::UNAUTHORIZED,
                _ => StatusCode::OK,
            };
            assert_eq!(status, want, "{who:?} {path}: {body}");
        }
        // The composed system prompt is the operator's: admins only.
        let (status, body) = caller.get("/api/debug/prompt").await;
        let want = match who {
            Who::Nobody => StatusCode::UNAUTHORIZED,
            Who::Alice | Who::Bob => StatusCode::FORBIDDEN,
            Who::Admin => StatusCode::OK,
        };
        assert_eq!(status, want, "{who:?} /api/debug/prompt: {body}");
        // Other systems' doors are the operator's too (the per-owner
        // inject above is the owner's).
        for (route, (status, body)) in admin_routes(&caller).await {
            assert_eq!(status, want, "{who:?} {route}: {body}");
        }
    }
    assert_eq!(
        stored_state(&alice, "s-alice").await,
        before,
        "refused requests changed nothing stored"
    );
    let (status, _) = app.get("/health").await;
    assert_eq!(status, StatusCode::OK, "/health needs no credentials");

    // The socket: a connection without credentials is refused; bob's events
    // on alice's session are `forbidden`; alice's own are served.
    socket_matrix(app, credentials).await;
    assert_eq!(stored_state(&alice, "s-alice").await, before);

    // The owner and an admin may do everything.
    let (status, body) = alice
        .continue_call("s-alice", "a2", &call_id, json!({"ok": true}))
        .await;
    assert_eq!(status, StatusCode::OK, "alice continues: {body}");
    let admin = as_caller(app, &credentials.headers(Who::Admin));
    for (route, (status, body)) in [
        ("chat", alice.say("s-alice", "a3", "hello", None).await),
        (
            "admin chat",
            admin.say("s-alice", "r3", "hello", None).await,
        ),
        ("admin info", admin.get("/api/sessions/s-alice").await),
        ("alice tree", alice.get("/api/sessions/s-alice/tree").await),
        ("admin tree", admin.get("/api/sessions/s-alice/tree").await),
        (
            "alice traces",
            alice.get("/api/sessions/s-alice/traces").await,
        ),
        (
            "admin traces",
            admin.get("/api/sessions/s-alice/traces").await,
        ),
        (
            "alice messages",
            alice.get("/api/sessions/s-alice/messages").await,
        ),
        (
            "alice repair",
            alice
                .post_json("/api/sessions/s-alice/repair", &json!({}))
                .await,
        ),
        (
            "admin cancel",
            admin
                .post_json("/api/chat/s-alice/cancel", &json!({}))
                .await,
        ),
    ] {
        assert_eq!(status, expected(Who::Alice), "{route}: {body}");
    }
    // Other systems: an owner's own backend injects into the owner's own
    // session with the owner's credentials; the admin doors stay closed to it.
    for (route, (status, body)) in admin_routes(&alice).await {
        assert_eq!(status, StatusCode::FORBIDDEN, "alice {route}: {body}");
    }
    let note = json!({"from": "alice-backend", "via": "webhook", "message": "order shipped"});
    let (status, body) = alice.post_json("/api/sessions/s-alice/inject", &note).await;
    assert_eq!(status, StatusCode::CREATED, "alice's own inject: {body}");
    assert_eq!(body["status"], "delivered", "{body}");
    let mut admin_note = note.clone();
    admin_note["session_id"] = json!("s-alice");
    let (status, body) = admin.post_json("/api/assistant/inject", &admin_note).await;
    assert_eq!(status, StatusCode::CREATED, "admin inject: {body}");
    let (status, info) = admin.get("/api/sessions/s-alice").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        info["owner_id"], "alice",
        "an admin's message does not take the session"
    );
    let (_, missing) = admin.get("/api/sessions/nobody-has-this").await;
    assert_eq!(missing["type"], "not_found", "an admin is told the truth");
    let (status, missing) = admin.get("/api/sessions/nobody-has-this/traces").await;
    assert_eq!(
        (status, &missing["type"]),
        (StatusCode::NOT_FOUND, &json!("not_found")),
        "{missing}"
    );

    // Lists: own sessions only; an admin sees all, with their owners.
    let bob = as_caller(app, &credentials.headers(Who::Bob));
    let (status, body) = bob.say("s-bob", "b1", "mine", None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let owners = |list: &Value| -> Vec<(String, String)> {
        let mut rows: Vec<(String, String)> = list
            .as_array()
            .expect("a list")
            .iter()
            .map(|row| {
                (
                    row["session_id"].as_str().unwrap_or("").to_string(),
                    row["owner_id"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect();
        rows.sort();
        rows
    };
    let pair = |s: &str, o: &str| (s.to_string(), o.to_string());
    assert_eq!(
        owners(&alice.get("/api/sessions").await.1),
        vec![pair("s-alice", "alice")]
    );
    assert_eq!(
        owners(&bob.get("/api/sessions").await.1),
        vec![pair("s-bob", "bob")]
    );
    assert_eq!(
        owners(&admin.get("/api/sessions").await.1),
        vec![pair("s-alice", "alice"), pair("s-bob", "bob")]
    );
    // Bob's AG-UI run on his own thread streams.
    let response = bob
        .client
        .post(format!("{}/api/agui", app.address))
        .json(&json!({"threadId": "s-bob", "runId": "r2", "state": {}, "tools": [], "context": [], "forwardedProps": {},
                      "messages": [{"id": "b2", "role": "user", "content": "hi"}]}))
        .send()
        .await
        .expect("sent");
    assert_eq!(response.status(), StatusCode::OK);
    let stream = response.text().await.expect("the SSE body");
    assert!(stream.contains("RUN_FINISHED"), "{stream}");
    owner_transfer(&alice, &bob, &admin).await;
    // Delete last: bob cannot, alice can.
    assert_eq!(
        bob.delete("/api/sessions/s-alice").await.0,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        alice.delete("/api/sessions/s-alice").await.0,
        StatusCode::OK
    );
}

/// `PATCH /api/sessions/{id}/owner`: admins only (even the owner gets 403);
/// after a transfer the old owner gets 403 on every route and the new one
/// reads and sends; with no owner only admins may touch it. Hands `s-alice`
/// back to alice at the end.
async fn owner_transfer(alice: &TestApp, bob: &TestApp, admin: &TestApp) {
    let (status, body) = alice.set_owner("s-alice", Some("bob")).await;
    assert_eq!(
        (status, &body["type"]),
        (StatusCode::FORBIDDEN, &json!("forbidden")),
        "{body}"
    );
    let (status, body) = admin.set_owner("nobody-has-this", Some("bob")).await;
    assert_eq!(
        (status, &body["type"]),
        (StatusCode::NOT_FOUND, &json!("not_found")),
        "{body}"
    );
    for bad in [json!({}), json!({"owner_id": ""}), json!({"owner_id": 7})] {
        let (status, body) = admin.patch_json("/api/sessions/s-alice/owner", &bad).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{bad}: {body}");
        assert!(
            body["error"]
                .as_str()
                .is_some_and(|e| e.contains("owner_id")),
            "{body}"
        );
    }

    let (status, body) = admin.set_owner("s-alice", Some("bob")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body, json!({"session_id": "s-alice", "owner_id": "bob"}));
    for (route, (status, body)) in [
        ("info", alice.get("/api/sessions/s-alice").await),
        (
            "messages",
            alice.get("/api/sessions/s-alice/messages").await,
        ),
        (
            "chat",
            alice.say("s-alice", "a4", "still mine?", None).await,
        ),
        ("delete", alice.delete("/api/sessions/s-alice").await),
    ] {
        assert_eq!(
            status,
            StatusCode::FORBIDDEN,
            "the old owner's {route}: {body}"
        );
    }
    let (status, info) = bob.get("/api/sessions/s-alice").await;
    assert_eq!(
        (status, &info["owner_id"]),
        (StatusCode::OK, &json!("bob")),
        "{info}"
    );
    let (status, body) = bob.say("s-alice", "b3", "mine now", None).await;
    assert_eq!(status, StatusCode::OK, "the new owner sends: {body}");
    assert_eq!(
        bob.get("/api/sessions/s-alice/messages").await.0,
        StatusCode::OK
    );

    let (status, body) = admin.set_owner("s-alice", None).await;
    assert_eq!(
        (status, &body["owner_id"]),
        (StatusCode::OK, &Value::Null),
        "{body}"
    );
    assert_eq!(
        bob.get("/api/sessions/s-alice").await.0,
        StatusCode::FORBIDDEN
    );
    assert_eq!(admin.get("/api/sessions/s-alice").await.0, StatusCode::OK);

    let (status, body) = admin.set_owner("s-alice", Some("alice")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(alice.get("/api/sessions/s-alice").await.0, StatusCode::OK);
}

async fn socket_run(app: &TestApp, credentials: &dyn Credentials, who: Who, steps: Value) -> Value {
    let headers: serde_json::Map<String, Value> = credentials
        .headers(who)
        .into_iter()
        .map(|(name, value)| (name, Value::String(value)))
        .collect();
    let mut scenario = json!({"steps": steps, "headers": headers});
    if let Some(auth) = credentials.socket_auth(who) {
        scenario["auth"] = auth;
    }
    run_scenario(Client::Node, app.address.clone(), "default", scenario).await
}

async fn socket_matrix(app: &TestApp, credentials: &dyn Credentials) {
    let refused = socket_run(app, credentials, Who::Nobody, json!([])).await;
    assert_eq!(refused["connected"], false, "{refused}");
    assert!(
        refused["error"]
            .as_str()
            .is_some_and(|error| error.contains("unauthorized")),
        "{refused}"
    );
    let steps = json!([
        {"call": "assistant_join_session", "data": {"session_id": "s-alice"}},
        {"call": "assistant_message", "data": {"id": "sock-b1", "session_id": "s-alice", "content": "hi"}},
        {"call": "assistant_cancel", "data": {"session_id": "s-alice"}},
    ]);
    let bob = socket_run(app, credentials, Who::Bob, steps).await;
    assert_eq!(bob["connected"], true, "{bob}");
    let acks = bob["acks"].as_array().expect("acks");
    assert_eq!(acks.len(), 3, "{bob}");
    for ack in acks {
        assert_eq!(ack["ok"], false, "{bob}");
        assert_eq!(ack["error"]["type"], "forbidden", "{bob}");
    }
    let errors = bob["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|event| event["event"] == "assistant:error" && event["data"]["type"] == "forbidden")
        .count();
    assert_eq!(errors, 3, "{bob}");
    let alice = socket_run(
        app,
        credentials,
        Who::Alice,
        json!([{"call": "assistant_join_session", "data": {"session_id": "s-alice"}}]),
    )
    .await;
    assert_eq!(alice["acks"][0]["ok"], true, "{alice}");
}

#[actix_web::test]
async fn header_mode_every_route_and_event_checks_the_owner() {
    let app = spawn_app_with(&[("ACCESS__MODE", "header")]).await;
    route_matrix(&app, &ProxyHeaders).await;
}

#[actix_web::test]
async fn jwt_mode_every_route_and_event_checks_the_owner() {
    let app = spawn_app_with(&[
        ("ACCESS__MODE", "jwt"),
        ("ACCESS__JWT_SECRET", JWT_SECRET),
        ("ACCESS__JWT_ISSUER", ISSUER),
        ("ACCESS__JWT_AUDIENCE", AUDIENCE),
    ])
    .await;
    route_matrix(&app, &Jwt).await;
}

#[actix_web::test]
async fn jwt_mode_refuses_expired_foreign_and_forged_tokens() {
    let app = spawn_app_with(&[
        ("ACCESS__MODE", "jwt"),
        ("ACCESS__JWT_SECRET", JWT_SECRET),
        ("ACCESS__JWT_ISSUER", ISSUER),
        ("ACCESS__JWT_AUDIENCE", AUDIENCE),
    ])
    .await;
    let mut expired = claims("alice", &[]);
    expired["exp"] = json!(now() - 3600);
    let mut not_yet = claims("alice", &[]);
    not_yet["nbf"] = json!(now() + 3600);
    let mut wrong_issuer = claims("alice", &[]);
    wrong_issuer["iss"] = json!("https://other.example");
    let mut wrong_audience = claims("alice", &[]);
    wrong_audience["aud"] = json!("another-service");
    let mut no_sub = claims("alice", &[]);
    no_sub.as_object_mut().expect("object").remove("sub");
    let cases = [
        ("expired", token(expired, JWT_SECRET)),
        ("not yet valid", token(not_yet, JWT_SECRET)),
        ("wrong issuer", token(wrong_issuer, JWT_SECRET)),
        ("wrong audience", token(wrong_audience, JWT_SECRET)),
        (
            "bad signature",
            token(claims("alice", &[]), "another-secret-entirely"),
        ),
        ("no sub", token(no_sub, JWT_SECRET)),
        ("not a JWT", "abc.def".to_string()),
    ];
    for (case, bad) in cases {
        let caller = as_caller(&app, &[("Authorization".into(), format!("Bearer {bad}"))]);
        let (status, body) = caller.say("jwt-bad", "m1", "hi", None).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{case}: {body}");
        assert_eq!(body["type"], "unauthorized", "{case}");
        let (status, _) = caller.get("/api/sessions").await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{case}");
        let socket = run_scenario(
            Client::Node,
            app.address.clone(),
            "default",
            json!({"steps": [], "auth": {"token": bad}}),
        )
        .await;
        assert_eq!(socket["connected"], false, "{case}: {socket}");
    }
    let admin = as_caller(&app, &Jwt.headers(Who::Admin));
    let (_, list) = admin.get("/api/sessions").await;
    assert_eq!(list, json!([]), "no refused request stored a session");
}

#[actix_web::test]
async fn the_local_token_is_required_on_http_agui_and_the_socket() {
    let app = spawn_app_with(&[("ACCESS__LOCAL_TOKEN", "s3cret-token")]).await;
    let right = as_caller(
        &app,
        &[("Authorization".into(), "Bearer s3cret-token".into())],
    );
    for (label, caller) in [
        ("no token", as_caller(&app, &[])),
        (
            "wrong token",
            as_caller(
                &app,
                &[("Authorization".into(), "Bearer s3cret-tokem".into())],
            ),
        ),
        (
            "a prefix",
            as_caller(&app, &[("Authorization".into(), "Bearer s3cret".into())]),
        ),
    ] {
        let (status, body) = caller.say("local", "m1", "hi", None).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{label}: {body}");
        let (status, _) = caller
            .post_json("/api/agui", &json!({"threadId": "local", "runId": "r", "messages": [{"id": "g", "role": "user", "content": "hi"}]}))
            .await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{label} agui");
        assert_eq!(
            caller.get("/api/sessions/local").await.0,
            StatusCode::UNAUTHORIZED
        );
    }
    let (_, list) = right.get("/api/sessions").await;
    assert_eq!(list, json!([]), "nothing was stored by refused requests");
    let (status, body) = right.say("local", "m1", "hi", None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, info) = right.get("/api/sessions/local").await;
    assert_eq!(info["owner_id"], "local");

    let refused = run_scenario(
        Client::Node,
        app.address.clone(),
        "default",
        json!({"steps": [], "auth": {"token": "wrong"}}),
    )
    .await;
    assert_eq!(refused["connected"], false, "{refused}");
    let accepted = run_scenario(
        Client::Node,
        app.address.clone(),
        "default",
        json!({"steps": [{"call": "assistant_join_session", "data": {"session_id": "local"}}],
               "auth": {"token": "s3cret-token"}}),
    )
    .await;
    assert_eq!(accepted["acks"][0]["ok"], true, "{accepted}");
}

#[actix_web::test]
async fn a_post_that_is_not_json_runs_nothing() {
    let app = spawn_app_with(&[]).await;
    let body = json!({"id": "m1", "session_id": "plain", "content": "hi"}).to_string();
    for content_type in [
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
    ] {
        for path in ["/api/chat", "/api/agui", "/api/chat/plain/cancel"] {
            let response = app
                .client
                .post(format!("{}{path}", app.address))
                .header("content-type", content_type)
                .body(body.clone())
                .send()
                .await
                .expect("sent");
            assert_eq!(
                response.status(),
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "{path} {content_type}"
            );
            let reply: Value = response.json().await.expect("JSON error");
            assert_eq!(reply["type"], "unsupported_media_type");
        }
    }
    assert_eq!(app.get("/api/sessions").await.1, json!([]));
    // `application/json; charset=utf-8` is JSON.
    let response = app
        .client
        .post(format!("{}/api/chat", app.address))
        .header("content-type", "application/json; charset=utf-8")
        .body(body)
        .send()
        .await
        .expect("sent");
    assert_eq!(response.status(), StatusCode::OK);
}

#[actix_web::test]
async fn requests_may_only_name_the_listed_models() {
    let app = spawn_app_with(&[]).await;
    let (status, body) = app
        .post_chat(&json!({"id": "m1", "session_id": "models", "content": "hi",
                           "config": {"default_model": "openai:gpt-4o"}}))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(
        body["error"]
            .as_str()
            .is_some_and(|error| error.starts_with("config.default_model")),
        "{body}"
    );
    let (status, _) = app
        .post_chat(&json!({"id": "m2", "session_id": "models", "content": "hi",
                           "config": {"default_model": "builtin:echo"}}))
        .await;
    assert_eq!(
        status,
        StatusCode::OK,
        "the configured default is always allowed"
    );
    let (_, tree) = app.get("/api/sessions/models/tree").await;
    assert_eq!(
        tree.as_array().map(Vec::len),
        Some(2),
        "the refused message was not stored"
    );
}

#[actix_web::test]
async fn a_principal_over_its_turn_rate_gets_429_with_retry_after() {
    let app = spawn_app_with(&[
        ("ACCESS__MODE", "header"),
        ("ASSISTANT__TURNS_PER_MINUTE", "2"),
    ])
    .await;
    let alice = as_caller(&app, &ProxyHeaders.headers(Who::Alice));
    for id in ["m1", "m2"] {
        assert_eq!(alice.say("rate", id, "hi", None).await.0, StatusCode::OK);
    }
    let response = alice
        .client
        .post(format!("{}/api/chat", app.address))
        .json(&json!({"id": "m3", "session_id": "rate", "content": "hi"}))
        .send()
        .await
        .expect("sent");
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    let retry_after: u64 = response
        .headers()
        .get("retry-after")
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse().ok())
        .expect("a Retry-After in seconds");
    assert!((1..=60).contains(&retry_after));
    let body: Value = response.json().await.expect("JSON");
    assert_eq!(body["type"], "rate_limited");
    let (_, tree) = alice.get("/api/sessions/rate/tree").await;
    assert_eq!(
        tree.as_array().map(Vec::len),
        Some(4),
        "the refused turn stored nothing"
    );
    // The socket says so too; other principals and admins are not affected.
    let socket = socket_run(
        &app,
        &ProxyHeaders,
        Who::Alice,
        json!([{"call": "assistant_message", "data": {"id": "s1", "session_id": "rate", "content": "hi"}}]),
    )
    .await;
    assert_eq!(
        socket["acks"][0]["error"]["type"], "rate_limited",
        "{socket}"
    );
    let bob = as_caller(&app, &ProxyHeaders.headers(Who::Bob));
    assert_eq!(
        bob.say("rate-bob", "m1", "hi", None).await.0,
        StatusCode::OK
    );
}

#[actix_web::test]
async fn a_flood_of_new_sessions_evicts_the_oldest_idle_ones_from_memory() {
    // A bound of 64: one session per shard of the memory store.
    let app = spawn_app_with(&[("ASSISTANT__MAX_MEMORY_SESSIONS", "64")]).await;
    let flood = |from: usize, to: usize| {
        let app = &app;
        async move {
            for n in from..to {
                let (status, body) = app.say(&format!("flood-{n}"), "m1", "hi", None).await;
                assert_eq!(status, StatusCode::OK, "{body}");
            }
        }
    };
    flood(0, 150).await;
    // Sessions whose actor is still in memory are never evicted; wait (a
    // bound, not a timing under test) until every actor has hibernated.
    for _ in 0..100 {
        let (_, health) = app.get("/health").await;
        if health["components"]["sessions"]["live"] == 0 {
            break;
        }
        actix_web::rt::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    flood(150, 300).await;
    let (status, list) = app.get("/api/sessions?limit=500").await;
    assert_eq!(status, StatusCode::OK);
    let n_held = list.as_array().map_or(0, Vec::len);
    assert!(n_held < 300, "{n_held} sessions held: nothing was evicted");
    // The oldest one is gone: its next read says so.
    let (status, body) = app.get("/api/sessions/flood-0").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    let (status, _) = app.get("/api/sessions/flood-299").await;
    assert_eq!(status, StatusCode::OK, "the newest stays");
}

/// Test-only key pairs (generated with openssl for this test; never used
/// elsewhere): an Ed25519 key (EdDSA) and a P-256 key (ES256), and the JWKS
/// file holding their public halves.
const ED25519_PRIVATE_PEM: &str = "-----BEGIN PRIVATE KEY-----
MC4CAQAwBQYDK2VwBCIEIItFCxTeiJ+XH5qre8p8N7n9OHPh8F2LPbyzHhi9msnC
-----END PRIVATE KEY-----
";
const P256_PRIVATE_PEM: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgzMjbVY29oZIWLKF+
DF3lnkPRLVNPikbgGFBGUC9+UR+hRANCAAR4YLlMSNc0hz1LtpCH/tIaR2BIcVZO
x5R88j7Di36ckoHuxXO6iINcPGzunBBpOnFFIPyp17MWdiJuu1dZ8Krh
-----END PRIVATE KEY-----
";

fn jwks() -> Value {
    json!({"keys": [
        {"kty": "OKP", "crv": "Ed25519", "kid": "ed-1", "x": "yC2DZiZ-osFfOTE2zaaeO2SkmJBsbruNJhOK8A8nb2E"},
        {"kty": "EC", "crv": "P-256", "kid": "ec-1",
         "x": "eGC5TEjXNIc9S7aQh_7SGkdgSHFWTseUfPI-w4t-nJI", "y": "ge7Fc7qIg1w8bO6cEGk6cUUg_KnXsxZ2Im67V1nwquE"}
    ]})
}

#[actix_web::test]
async fn jwt_mode_verifies_eddsa_and_es256_tokens_against_a_jwks_file() {
    use jsonwebtoken::Algorithm;
    let path = std::env::temp_dir().join(format!("jwks-{}.json", std::process::id()));
    std::fs::write(&path, jwks().to_string()).expect("write the JWKS");
    let path_text = path.to_string_lossy().to_string();
    let app = spawn_app_with(&[
        ("ACCESS__MODE", "jwt"),
        ("ACCESS__JWT_PUBLIC_KEYS_PATH", &path_text),
        ("ACCESS__JWT_ISSUER", ISSUER),
        ("ACCESS__JWT_AUDIENCE", AUDIENCE),
    ])
    .await;
    let signed = |algorithm: Algorithm, kid: &str, key: EncodingKey, sub: &str| {
        let mut header = Header::new(algorithm);
        header.kid = Some(kid.to_string());
        encode(&header, &claims(sub, &[]), &key).expect("signs")
    };
    let ed = EncodingKey::from_ed_pem(ED25519_PRIVATE_PEM.as_bytes()).expect("ed key");
    let ec = EncodingKey::from_ec_pem(P256_PRIVATE_PEM.as_bytes()).expect("ec key");
    for (label, token, want) in [
        (
            "EdDSA",
            signed(Algorithm::EdDSA, "ed-1", ed.clone(), "carol"),
            StatusCode::OK,
        ),
        (
            "ES256",
            signed(Algorithm::ES256, "ec-1", ec, "carol"),
            StatusCode::OK,
        ),
        (
            "EdDSA under the EC key's kid",
            signed(Algorithm::EdDSA, "ec-1", ed, "carol"),
            StatusCode::UNAUTHORIZED,
        ),
        (
            "HS256 with the public key as a secret",
            token(
                claims("mallory", &["admin"]),
                "yC2DZiZ-osFfOTE2zaaeO2SkmJBsbruNJhOK8A8nb2E",
            ),
            StatusCode::UNAUTHORIZED,
        ),
    ] {
        let caller = as_caller(&app, &[("Authorization".into(), format!("Bearer {token}"))]);
        let (status, body) = caller.get("/api/sessions").await;
        assert_eq!(status, want, "{label}: {body}");
    }
    let _ = std::fs::remove_file(&path);
}

#[actix_web::test]
async fn a_principal_over_its_live_sessions_gets_429_until_one_ends() {
    let app = spawn_app_with(&[
        ("ACCESS__MODE", "header"),
        ("ASSISTANT__LIVE_SESSIONS_PER_PRINCIPAL", "1"),
    ])
    .await;
    let alice = as_caller(&app, &ProxyHeaders.headers(Who::Alice));
    let slow_body = json!({"id": "m1", "session_id": "live-a", "content": "slow 100\nsay one two three four five six seven eight"});
    let slow = alice.post_chat(&slow_body);
    let second = async {
        // Once live-a's turn runs (a bound on polling, not a timing under test),
        // a second session of alice's is over the cap.
        for _ in 0..500 {
            let (_, info) = alice.get("/api/sessions/live-a").await;
            if info["turn_running"] == true {
                break;
            }
            actix_web::rt::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        let refused = alice.say("live-b", "m1", "hi", None).await;
        // Bob is not limited by alice's sessions.
        let bob = as_caller(&app, &ProxyHeaders.headers(Who::Bob))
            .say("live-bob", "m1", "hi", None)
            .await;
        (refused, bob)
    };
    let ((status, first), ((refused_status, refused), (bob_status, _))) =
        futures_util::join!(slow, second);
    assert_eq!(status, StatusCode::OK, "{first}");
    assert_eq!(refused_status, StatusCode::TOO_MANY_REQUESTS, "{refused}");
    assert_eq!(refused["type"], "rate_limited");
    assert_eq!(bob_status, StatusCode::OK);
    assert_eq!(
        alice.get("/api/sessions/live-b").await.0,
        StatusCode::FORBIDDEN,
        "the refused message created nothing"
    );
    // With live-a's turn over, live-b may start.
    assert_eq!(
        alice.say("live-b", "m1", "hi", None).await.0,
        StatusCode::OK
    );
}

/// One raw HTTP/1.1 request with exactly `head` (no `Content-Type`, as
/// `curl -X POST` sends); the status and the body of the answer.
async fn raw_request(app: &crate::helpers::TestApp, head: &str, body: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", app.port))
        .await
        .expect("connect");
    stream
        .write_all(format!("{head}Host: 127.0.0.1\r\nConnection: close\r\n\r\n{body}").as_bytes())
        .await
        .expect("send");
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.expect("read");
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_string())
        .unwrap_or_default();
    (status, body)
}

#[actix_web::test]
async fn a_post_without_a_body_needs_no_content_type() {
    let app = spawn_app_with(&[]).await;
    let (status, reply) = app.say("bodyless", "m1", "hi", None).await;
    assert_eq!(status, 200, "{reply}");
    for path in ["/api/chat/bodyless/cancel", "/api/sessions/bodyless/repair"] {
        for length in ["", "Content-Length: 0\r\n"] {
            let (status, body) =
                raw_request(&app, &format!("POST {path} HTTP/1.1\r\n{length}"), "").await;
            assert_eq!(status, 200, "{path} {length:?}: {body}");
            assert!(!body.contains("unsupported_media_type"), "{body}");
        }
    }
    // A body that does not say it is JSON is still refused.
    let (status, body) = raw_request(
        &app,
        "POST /api/chat/bodyless/cancel HTTP/1.1\r\nContent-Length: 2\r\n",
        "{}",
    )
    .await;
    assert_eq!(status, 415, "{body}");
    // A page of another origin sending the same body-less POST is refused by its origin.
    let (status, body) = raw_request(
        &app,
        "POST /api/chat/bodyless/cancel HTTP/1.1\r\nOrigin: https://evil.example\r\n",
        "",
    )
    .await;
    assert_ne!(status, 200, "{body}");
}

/// Validly signed tokens whose `iss` or `aud` is not a string, or whose
/// `nbf` is not a number, are refused (GHSA-h395-gr6q-cpjc: jsonwebtoken
/// before 10.3 skipped those checks).
#[actix_web::test]
async fn jwt_mode_refuses_tokens_with_malformed_claims() {
    let app = spawn_app_with(&[
        ("ACCESS__MODE", "jwt"),
        ("ACCESS__JWT_SECRET", JWT_SECRET),
        ("ACCESS__JWT_ISSUER", ISSUER),
        ("ACCESS__JWT_AUDIENCE", AUDIENCE),
    ])
    .await;
    let mut issuer_not_a_string = claims("alice", &["admin"]);
    issuer_not_a_string["iss"] = json!(42);
    let mut audience_not_a_string = claims("alice", &["admin"]);
    audience_not_a_string["aud"] = json!({"service": AUDIENCE});
    let mut not_before_not_a_number = claims("alice", &["admin"]);
    not_before_not_a_number["nbf"] = json!("tomorrow");
    let mut no_issuer = claims("alice", &["admin"]);
    no_issuer.as_object_mut().expect("object").remove("iss");
    for (case, claims) in [
        ("iss absent while ACCESS__JWT_ISSUER is set", no_issuer),
        ("iss not a string", issuer_not_a_string),
        ("aud not a string", audience_not_a_string),
        ("nbf not a number", not_before_not_a_number),
    ] {
        let caller = as_caller(
            &app,
            &[(
                "Authorization".into(),
                format!("Bearer {}", token(claims, JWT_SECRET)),
            )],
        );
        let (status, body) = caller.say("jwt-malformed", "m1", "hi", None).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{case}: {body}");
        let (status, body) = caller.get("/api/sessions").await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{case}: {body}");
    }
    // The same claims, well formed, pass.
    let caller = as_caller(
        &app,
        &[(
            "Authorization".into(),
            format!("Bearer {}", token(claims("alice", &[]), JWT_SECRET)),
        )],
    );
    let (status, body) = caller.say("jwt-malformed", "m1", "hi", None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

/// `GET /metrics` with `headers`, its status.
async fn scrape(app: &TestApp, headers: &[(&str, String)]) -> u16 {
    let mut request = app.client.get(format!("{}/metrics", app.address));
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    request.send().await.expect("a response").status().as_u16()
}

/// `/metrics` answers an admin or a METRICS__TOKEN bearer, in header and
/// jwt modes; without credentials 401, a caller who is no admin 403.
#[actix_web::test]
async fn metrics_need_an_admin_or_the_metrics_token() {
    let header_app = spawn_app_with(&[
        ("ACCESS__MODE", "header"),
        ("METRICS__TOKEN", "scrape-secret"),
    ])
    .await;
    assert_eq!(scrape(&header_app, &[]).await, 401);
    assert_eq!(
        scrape(&header_app, &[("Authorization", "Bearer wrong".into())]).await,
        401
    );
    assert_eq!(
        scrape(&header_app, &[("X-Assistant-Principal", "bob".into())]).await,
        403
    );
    assert_eq!(
        scrape(
            &header_app,
            &[
                ("X-Assistant-Principal", "root".into()),
                ("X-Assistant-Roles", "admin".into())
            ]
        )
        .await,
        200
    );
    assert_eq!(
        scrape(
            &header_app,
            &[("Authorization", "Bearer scrape-secret".into())]
        )
        .await,
        200
    );

    let jwt_app = spawn_app_with(&[
        ("ACCESS__MODE", "jwt"),
        ("ACCESS__JWT_SECRET", JWT_SECRET),
        ("ACCESS__JWT_ISSUER", ISSUER),
        ("ACCESS__JWT_AUDIENCE", AUDIENCE),
    ])
    .await;
    let bearer = |roles: &[&str]| format!("Bearer {}", token(claims("carol", roles), JWT_SECRET));
    assert_eq!(scrape(&jwt_app, &[]).await, 401);
    assert_eq!(
        scrape(&jwt_app, &[("Authorization", bearer(&[]))]).await,
        403
    );
    assert_eq!(
        scrape(&jwt_app, &[("Authorization", bearer(&["admin"]))]).await,
        200
    );
    // No METRICS__TOKEN configured: no bearer other than a JWT is accepted.
    assert_eq!(
        scrape(
            &jwt_app,
            &[("Authorization", "Bearer scrape-secret".into())]
        )
        .await,
        401
    );
}

/// The number of `assistant_http_requests_total` series.
async fn n_request_series(app: &TestApp) -> usize {
    let text = app
        .client
        .get(format!("{}/metrics", app.address))
        .header("Authorization", "Bearer scrape-secret")
        .send()
        .await
        .expect("a response")
        .text()
        .await
        .expect("text");
    text.lines()
        .filter(|line| line.starts_with("assistant_http_requests_total{"))
        .count()
}

/// 50 requests with invented methods add no series: they are all `other`.
#[actix_web::test]
async fn invented_methods_leave_the_number_of_series_unchanged() {
    let app = spawn_app_with(&[
        ("ACCESS__MODE", "header"),
        ("METRICS__TOKEN", "scrape-secret"),
    ])
    .await;
    let method = reqwest::Method::from_bytes(b"WARMUP").expect("a method");
    let _ = app
        .client
        .request(method, format!("{}/health", app.address))
        .send()
        .await;
    // Counts the scrape itself and the first `other`.
    let before = n_request_series(&app).await;
    let before = before.max(n_request_series(&app).await);
    for index in 0..50 {
        let method =
            reqwest::Method::from_bytes(format!("INVENTED{index}").as_bytes()).expect("a method");
        let _ = app
            .client
            .request(method, format!("{}/health", app.address))
            .send()
            .await
            .expect("a response");
    }
    assert_eq!(n_request_series(&app).await, before);
}
