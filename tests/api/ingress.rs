//! Other systems reach a session (docs/protocol.md, "Other systems"):
//! `POST /api/assistant/inject`, the inbox and its drain into the next
//! turn (also across a restart on PostgreSQL, and into a turn that ends on
//! a host call), the per-owner inject, and the heartbeat; with two stock
//! socket.io-client sockets joined to one session (issue-45r's rooms), what
//! each of them sees of it.

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::helpers::{eventually, spawn_app, spawn_app_with, tasks_context, TestApp};
use crate::postgres::{server_on, TestDb};
use crate::process::ServerProcess;
use crate::rooms::{completed, events, join, message, run_room, turns};

const SELECT_ISSUE: &str = "call select_issue {\"number\": 42}";

async fn inject(app: &TestApp, body: Value) -> (StatusCode, Value) {
    app.post_json("/api/assistant/inject", &body).await
}

/// Every text of the session's stored tree: user contents and note segments.
async fn stored_texts(app: &TestApp, session: &str) -> Vec<String> {
    let (status, tree) = app.get(&format!("/api/sessions/{session}/tree")).await;
    assert_eq!(status, 200, "{tree}");
    let mut texts = Vec::new();
    for message in tree.as_array().expect("the tree") {
        if message["role"] == "user" {
            texts.push(message["content"].as_str().unwrap_or_default().to_string());
        }
        for segment in message["segments"].as_array().into_iter().flatten() {
            if segment["kind"] == "note" {
                texts.push(segment["text"].as_str().unwrap_or_default().to_string());
            }
        }
    }
    texts
}

fn count(texts: &[String], text: &str) -> usize {
    texts.iter().filter(|stored| stored.contains(text)).count()
}

async fn waiting(app: &TestApp) -> Vec<Value> {
    let (status, items) = app.get("/api/inbox?surfaced=false").await;
    assert_eq!(status, 200, "{items}");
    items.as_array().expect("a list").clone()
}

#[actix_web::test]
async fn an_inject_with_no_live_turn_is_promoted_to_a_turn_and_stored_with_its_envelope() {
    let app = spawn_app().await;
    let (status, first) = app.say("ing-promoted", "m1", "say hello", None).await;
    assert_eq!(status, 200, "{first}");
    let (status, answer) = inject(
        &app,
        json!({"from": "ci", "via": "github", "message": "the deployment failed", "sessionId": "ing-promoted"}),
    )
    .await;
    assert_eq!(status, 201, "{answer}");
    assert_eq!(
        answer,
        json!({"status": "delivered", "session_id": "ing-promoted", "delivery": "promoted"})
    );
    let envelope = "[via:github from:ci] the deployment failed";
    eventually("the promoted turn to be stored", || async {
        let (_, path) = app.get("/api/sessions/ing-promoted/messages").await;
        let path = path.as_array().cloned().unwrap_or_default();
        path.len() == 4 && path[2]["content"] == envelope && path[3]["role"] == "assistant"
    })
    .await;
    // from == via: the envelope names the channel only.
    let (status, answer) = inject(
        &app,
        json!({"from": "cron", "via": "cron", "message": "nightly", "session_id": "ing-promoted"}),
    )
    .await;
    assert_eq!(status, 201, "{answer}");
    eventually("the second envelope", || async {
        count(
            &stored_texts(&app, "ing-promoted").await,
            "[via:cron] nightly",
        ) == 1
    })
    .await;
}

#[actix_web::test]
async fn an_inject_without_a_session_goes_to_the_most_recently_active_one() {
    let app = spawn_app().await;
    app.say("ing-old", "m1", "say old", None).await;
    app.say("ing-new", "m1", "say new", None).await;
    let (status, answer) = inject(
        &app,
        json!({"from": "bot", "via": "slack", "message": "ping"}),
    )
    .await;
    assert_eq!(status, 201, "{answer}");
    assert_eq!(answer["status"], "delivered");
    assert_eq!(answer["session_id"], "ing-new", "{answer}");
}

#[actix_web::test]
async fn an_inject_during_a_live_turn_is_delivered_as_steering() {
    let app = spawn_app().await;
    let body = json!({"id": "m1", "session_id": "ing-live",
                      "content": "slow 100\nsay one two three four five six seven eight"});
    let turn = app.post_chat(&body);
    let steer = async {
        app.wait_for_live_turn("ing-live").await;
        inject(
            &app,
            json!({"from": "ops", "via": "pager", "message": "stop and check the logs", "session_id": "ing-live"}),
        )
        .await
    };
    let ((status, reply), (inject_status, answer)) = futures_util::join!(turn, steer);
    assert_eq!(status, 200, "{reply}");
    assert_eq!(inject_status, 201, "{answer}");
    assert_eq!(
        answer,
        json!({"status": "delivered", "session_id": "ing-live", "delivery": "queued"})
    );
    let texts = stored_texts(&app, "ing-live").await;
    assert_eq!(
        count(&texts, "[via:pager from:ops] stop and check the logs"),
        1,
        "{texts:?}"
    );
}

#[actix_web::test]
async fn an_inject_with_no_session_waits_in_the_inbox_and_joins_the_next_turn_once() {
    let app = spawn_app().await;
    let (status, answer) = inject(
        &app,
        json!({"from": "ci", "via": "github", "message": "order 7 shipped"}),
    )
    .await;
    assert_eq!(status, 201, "{answer}");
    assert_eq!(answer["status"], "queued", "{answer}");
    let inbox_id = answer["inbox_id"]
        .as_str()
        .expect("an inbox id")
        .to_string();
    let items = waiting(&app).await;
    assert_eq!(items.len(), 1, "{items:?}");
    assert_eq!(items[0]["id"], inbox_id.as_str());
    assert_eq!(items[0]["from_agent"], "ci");
    assert_eq!(items[0]["message"], "order 7 shipped");
    assert_eq!(items[0]["severity"], "info");
    assert_eq!(items[0]["surfaced"], false);
    assert_eq!(items[0]["context"]["via"], "github");

    let (status, reply) = app.say("ing-drain", "m1", "say hi", None).await;
    assert_eq!(status, 200, "{reply}");
    assert!(waiting(&app).await.is_empty());
    let (status, reply) = app.say("ing-drain", "m2", "say again", None).await;
    assert_eq!(status, 200, "{reply}");
    let (status, other) = app.say("ing-other", "m1", "say elsewhere", None).await;
    assert_eq!(status, 200, "{other}");
    let envelope = "[via:github from:ci] order 7 shipped";
    assert_eq!(count(&stored_texts(&app, "ing-drain").await, envelope), 1);
    assert_eq!(count(&stored_texts(&app, "ing-other").await, envelope), 0);
    // The first turn's reply opens with it, as steering.
    let tree = app.tree("ing-drain").await;
    let reply = tree
        .as_array()
        .unwrap()
        .iter()
        .find(|message| message["id"] == "m1:reply")
        .expect("the first reply")
        .clone();
    assert_eq!(reply["segments"][0]["origin"], "steering", "{reply}");
    let (_, surfaced) = app.get("/api/inbox?surfaced=true").await;
    assert_eq!(surfaced[0]["id"], inbox_id.as_str(), "{surfaced}");
    assert_eq!(surfaced[0]["surfaced"], true);
}

/// The lesson of a previous attempt: items given to a turn that ends on a
/// host call were dropped as late steering. Here they are in the reply
/// that made the call, stored with it.
#[actix_web::test]
async fn an_inbox_item_drained_into_a_turn_that_ends_on_a_host_call_is_kept() {
    let app = spawn_app().await;
    let (status, answer) = app
        .post_json(
            "/api/inbox",
            // The echo model reads the newest user text, here the note:
            // its second line makes the host call.
            &json!({"from": "billing", "message": format!("invoice 12 is overdue\n{SELECT_ISSUE}"),
                    "severity": "urgent"}),
        )
        .await;
    assert_eq!(status, 201, "{answer}");
    assert_eq!(answer["status"], "queued");
    let (status, reply) = app
        .say(
            "ing-host",
            "m1",
            "look at the invoices",
            Some(tasks_context()),
        )
        .await;
    assert_eq!(status, 200, "{reply}");
    assert!(
        reply["pending_tool_call"].is_object(),
        "the turn ends on the host call: {reply}"
    );
    let texts = stored_texts(&app, "ing-host").await;
    assert_eq!(
        count(&texts, "[via:inbox from:billing] invoice 12 is overdue"),
        1,
        "{texts:?}"
    );
    assert!(waiting(&app).await.is_empty());
}

#[actix_web::test]
async fn inbox_posts_are_routed_by_their_context_and_validated() {
    let app = spawn_app().await;
    app.say("ing-inbox", "m1", "say hello", None).await;
    let (status, answer) = app
        .post_json(
            "/api/inbox",
            &json!({"from": "crm", "message": "a lead replied", "severity": "action_needed",
                    "context": {"session_id": "ing-inbox", "via": "email", "lead": 9}}),
        )
        .await;
    assert_eq!(status, 201, "{answer}");
    assert_eq!(
        answer,
        json!({"status": "delivered", "session_id": "ing-inbox", "delivery": "promoted"})
    );
    eventually("the inbox note's turn", || async {
        count(
            &stored_texts(&app, "ing-inbox").await,
            "[via:email from:crm] a lead replied",
        ) == 1
    })
    .await;
    for (body, field) in [
        (json!({"message": "x"}), "from"),
        (json!({"from": "a"}), "message"),
        (json!({"from": "a", "message": ""}), "message"),
        (
            json!({"from": "a", "message": "x", "severity": "panic"}),
            "severity",
        ),
        (
            json!({"from": "a", "message": "x", "context": [1]}),
            "context",
        ),
        (
            json!({"from": "a", "message": "x", "context": {"session_id": ""}}),
            "context.session_id",
        ),
        (json!({"from": "a".repeat(129), "message": "x"}), "from"),
    ] {
        let (status, error) = app.post_json("/api/inbox", &body).await;
        assert_eq!(status, 422, "{body}: {error}");
        assert!(
            error["error"]
                .as_str()
                .unwrap_or_default()
                .starts_with(field),
            "{body}: {error}"
        );
    }
    for (body, field) in [
        (json!({"via": "x", "message": "x"}), "from"),
        (json!({"from": "x", "message": "x"}), "via"),
        (json!({"from": "x", "via": "x", "message": 3}), "message"),
        (
            json!({"from": "x", "via": "x", "message": "x", "session_id": "a b".repeat(30)}),
            "session_id",
        ),
    ] {
        let (status, error) = inject(&app, body.clone()).await;
        assert_eq!(status, 422, "{body}: {error}");
        assert!(
            error["error"]
                .as_str()
                .unwrap_or_default()
                .starts_with(field),
            "{body}: {error}"
        );
    }
    // The routing query must agree with the body.
    let (status, error) = app
        .post_json(
            "/api/assistant/inject?session_id=other",
            &json!({"from": "x", "via": "y", "message": "z", "session_id": "ing-inbox"}),
        )
        .await;
    assert_eq!(status, 422, "{error}");
    for query in ["surfaced=maybe", "limit=0", "limit=101", "offset=-1"] {
        let (status, error) = app.get(&format!("/api/inbox?{query}")).await;
        assert_eq!(status, 422, "{query}: {error}");
    }
}

#[actix_web::test]
async fn an_item_marked_surfaced_leaves_the_waiting_ones() {
    let app = spawn_app().await;
    let (_, answer) = app
        .post_json("/api/inbox", &json!({"from": "a", "message": "read me"}))
        .await;
    let id = answer["inbox_id"].as_str().unwrap().to_string();
    let response = app
        .client
        .patch(format!("{}/api/inbox/{id}/surfaced", app.address))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let item: Value = response.json().await.unwrap();
    assert_eq!(
        (item["id"].as_str(), &item["surfaced"]),
        (Some(id.as_str()), &json!(true))
    );
    assert!(waiting(&app).await.is_empty());
    // Not drained into a turn any more.
    app.say("ing-surfaced", "m1", "say hi", None).await;
    assert_eq!(
        count(&stored_texts(&app, "ing-surfaced").await, "read me"),
        0
    );
    let response = app
        .client
        .patch(format!("{}/api/inbox/nope/surfaced", app.address))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 404);
}

#[actix_web::test]
async fn the_inbox_is_bounded() {
    let app = spawn_app().await;
    let long = "x".repeat(32_001);
    let (status, error) = app
        .post_json("/api/inbox", &json!({"from": "a", "message": long}))
        .await;
    assert_eq!(status, 422, "{error}");
    let big_context = json!({"blob": "y".repeat(17 * 1024)});
    let (status, error) = app
        .post_json(
            "/api/inbox",
            &json!({"from": "a", "message": "m", "context": big_context}),
        )
        .await;
    assert_eq!(status, 422, "{error}");
    // 1000 waiting items at most: the next is 413.
    let posts = (0..1000).map(|i| {
        let app = &app;
        async move {
            app.post_json(
                "/api/inbox",
                &json!({"from": "a", "message": format!("n{i}")}),
            )
            .await
            .0
        }
    });
    let statuses = futures_util::future::join_all(posts).await;
    assert!(statuses.iter().all(|status| *status == 201));
    let (status, error) = app
        .post_json("/api/inbox", &json!({"from": "a", "message": "one more"}))
        .await;
    assert_eq!(status, 413, "{error}");
    assert_eq!(error["type"], "payload_too_large", "{error}");
}

/// The inbox is a table with PostgreSQL: an item queued before a restart
/// is drained into the first turn after it, exactly once (the drain is
/// written with the turn's message, sql/0005_inbox.sql).
#[actix_web::test]
async fn a_queued_inject_survives_a_restart_and_is_drained_once_with_postgres() {
    let db = TestDb::create().await;
    let server = server_on(&db.url).await;
    let (status, answer) = inject(
        &server.app,
        json!({"from": "ci", "via": "github", "message": "build 31 is green"}),
    )
    .await;
    assert_eq!(status, 201, "{answer}");
    assert_eq!(answer["status"], "queued", "{answer}");
    server.crash();

    let server = server_on(&db.url).await;
    assert_eq!(waiting(&server.app).await.len(), 1);
    let (status, reply) = server.app.say("ing-pg", "m1", "say hi", None).await;
    assert_eq!(status, 200, "{reply}");
    let (status, reply) = server.app.say("ing-pg", "m2", "say more", None).await;
    assert_eq!(status, 200, "{reply}");
    let envelope = "[via:github from:ci] build 31 is green";
    assert_eq!(
        count(&stored_texts(&server.app, "ing-pg").await, envelope),
        1
    );
    let row = db
        .client()
        .await
        .query_one("SELECT surfaced, taken_by FROM inbox", &[])
        .await
        .unwrap();
    assert!(row.get::<_, bool>(0));
    assert_eq!(row.get::<_, Option<String>>(1).as_deref(), Some("ing-pg"));
    server.crash();

    // Restarted again: the taken item is not delivered a second time.
    let server = server_on(&db.url).await;
    assert!(waiting(&server.app).await.is_empty());
    let (status, reply) = server.app.say("ing-pg2", "m1", "say hi", None).await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(
        count(&stored_texts(&server.app, "ing-pg2").await, envelope),
        0
    );
    let (_, listed) = server.app.get("/api/inbox").await;
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
}

#[actix_web::test]
async fn the_heartbeat_checks_in_with_the_most_recent_session() {
    // The interval's floor is 30 s; a debug build reads a shorter one from
    // the test-only variable (never a setting).
    let server = ServerProcess::runtime(&[
        ("HEARTBEAT__ENABLED", "true"),
        ("HEARTBEAT__MESSAGE", "anything to report?"),
        ("HEARTBEAT__FROM", "scheduler"),
        ("ASSISTANT_RUNTIME_TEST_HEARTBEAT_MS", "200"),
    ])
    .await;
    let (status, reply) = server.app.say("ing-beat", "m1", "say hello", None).await;
    assert_eq!(status, 200, "{reply}");
    eventually("a heartbeat turn", || async {
        count(
            &stored_texts(&server.app, "ing-beat").await,
            "[via:heartbeat from:scheduler] anything to report?",
        ) >= 1
    })
    .await;
    // With no session at all nothing is queued.
    let (_, items) = server.app.get("/api/inbox").await;
    assert_eq!(items, json!([]));
}

/// The per-owner door in header mode: alice's backend reaches alice's
/// session (a turn counted against her turns per minute), never bob's.
#[actix_web::test]
async fn an_owner_injects_into_their_own_session_only() {
    let app = spawn_app_with(&[
        ("ACCESS__MODE", "header"),
        ("ASSISTANT__TURNS_PER_MINUTE", "2"),
    ])
    .await;
    let post = |who: &'static str, path: String, body: Value| {
        let request = app
            .client
            .post(format!("{}{path}", app.address))
            .header("X-Assistant-Principal", who)
            .json(&body);
        async move {
            let response = request.send().await.expect("request sent");
            let status = response.status();
            (
                status,
                response.json::<Value>().await.unwrap_or(Value::Null),
            )
        }
    };
    let (status, body) = post(
        "alice",
        "/api/chat".into(),
        json!({"id": "m1", "session_id": "ing-alice", "content": "say hi"}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let note = json!({"from": "shop", "via": "webhook", "message": "order 7 shipped"});
    let (status, body) = post("bob", "/api/sessions/ing-alice/inject".into(), note.clone()).await;
    assert_eq!(
        (status, &body["type"]),
        (StatusCode::FORBIDDEN, &json!("forbidden"))
    );
    let (status, body) = post(
        "alice",
        "/api/sessions/ing-alice/inject".into(),
        note.clone(),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["status"], "delivered", "{body}");
    let (status, body) = post("alice", "/api/sessions/ing-alice/inject".into(), note).await;
    assert_eq!(status, 429, "the third turn in a minute: {body}");
    let (status, body) = post(
        "alice",
        "/api/assistant/inject".into(),
        json!({"from": "x", "via": "y", "message": "z"}),
    )
    .await;
    assert_eq!(status, 403, "the admin door: {body}");
}

// ---- with session rooms: two stock socket.io-client sockets ------------------

/// Two sockets joined to a session, no turn live: an inject is a turn of
/// its own, and both sockets get its events, in order, each once; the
/// stored conversation holds the envelope as its user message.
#[actix_web::test]
async fn both_joined_sockets_get_the_background_turn_of_an_inject() {
    let app = spawn_app().await;
    let session = "ing-room";
    let (status, first) = app.say(session, "m1", "say hello", None).await;
    assert_eq!(status, 200, "{first}");
    let result = run_room(
        &app,
        json!({
            "sockets": [{"mode": "websocket"}, {"mode": "default"}],
            "steps": [
                {"socket": 0, "call": "assistant_join_session", "data": join(session)},
                {"socket": 1, "call": "assistant_join_session", "data": join(session)},
                {"http": "/api/assistant/inject",
                 "body": {"from": "ci", "via": "github", "message": "say deployment failed", "session_id": session}},
                {"http_done": true},
                completed(0, 1),
                completed(1, 1),
            ]
        }),
    )
    .await;
    assert_eq!(result["http"][0]["status"], 201, "{result:#}");
    assert_eq!(
        result["http"][0]["body"],
        json!({"status": "delivered", "session_id": session, "delivery": "promoted"})
    );
    let first = turns("first", &events(&result, 0));
    let second = turns("second", &events(&result, 1));
    assert_eq!(first.len(), 1, "{first:#?}");
    assert_eq!(
        first, second,
        "the same events in the same order, once each"
    );
    let finals: Vec<&Value> = first[0]
        .iter()
        .filter(|event| event["event"] == "assistant:final_response")
        .collect();
    assert_eq!(
        finals[0]["data"]["content"], "Echo: [via:github from:ci] say deployment failed",
        "{finals:#?}"
    );
    let (_, path) = app.get(&format!("/api/sessions/{session}/messages")).await;
    assert_eq!(
        path[2]["content"], "[via:github from:ci] say deployment failed",
        "{path}"
    );
}

/// An inject while a socket's turn streams joins that turn as steering:
/// both joined sockets see it delivered, once, inside the one turn.
#[actix_web::test]
async fn an_inject_into_a_live_turn_is_steering_for_every_joined_socket() {
    let app = spawn_app().await;
    let session = "ing-room-live";
    let (status, first) = app.say(session, "m0", "say hello", None).await;
    assert_eq!(status, 200, "{first}");
    let result = run_room(
        &app,
        json!({
            "sockets": [{"mode": "websocket"}, {"mode": "websocket"}],
            "steps": [
                {"socket": 0, "call": "assistant_join_session", "data": join(session)},
                {"socket": 1, "call": "assistant_join_session", "data": join(session)},
                // A second of deltas left after the second: the inject
                // must find the turn live on a loaded machine too.
                {"socket": 0, "emit": "assistant_message",
                 "data": message(session, "m1", "slow 100\nsay one two three four five six seven eight nine ten eleven twelve")},
                {"socket": 1, "wait": "assistant:text_delta", "count": 2},
                {"http": "/api/assistant/inject",
                 "body": {"from": "ops", "via": "pager", "message": "check the logs", "session_id": session}},
                {"http_done": true},
                completed(0, 1),
                completed(1, 1),
            ]
        }),
    )
    .await;
    assert_eq!(
        result["http"][0]["body"],
        json!({"status": "delivered", "session_id": session, "delivery": "queued"}),
        "{result:#}"
    );
    for socket in [0, 1] {
        let turns = turns("socket", &events(&result, socket));
        assert_eq!(turns.len(), 1, "one turn: {turns:#?}");
        let delivered: Vec<&Value> = turns[0]
            .iter()
            .filter(|event| event["event"] == "assistant:steering_delivered")
            .collect();
        assert_eq!(delivered.len(), 1, "socket {socket}: {delivered:#?}");
        assert_eq!(
            delivered[0]["data"]["content"],
            "[via:pager from:ops] check the logs"
        );
    }
}

/// An inject with no session waits in the inbox; the next turn that starts
/// takes it as steering, which every joined socket sees once.
#[actix_web::test]
async fn a_queued_inject_opens_the_next_turn_for_every_joined_socket() {
    let app = spawn_app().await;
    let (status, answer) = inject(
        &app,
        json!({"from": "ci", "via": "github", "message": "order 7 shipped"}),
    )
    .await;
    assert_eq!(
        (status, &answer["status"]),
        (StatusCode::CREATED, &json!("queued"))
    );
    let session = "ing-room-drain";
    let result = run_room(
        &app,
        json!({
            "sockets": [{"mode": "websocket"}, {"mode": "websocket"}],
            "steps": [
                {"socket": 0, "call": "assistant_join_session", "data": join(session)},
                {"socket": 1, "call": "assistant_join_session", "data": join(session)},
                {"socket": 0, "call": "assistant_message", "data": message(session, "m1", "say hi")},
                completed(0, 1),
                completed(1, 1),
                {"socket": 0, "call": "assistant_message", "data": message(session, "m2", "say again")},
                completed(0, 2),
                completed(1, 2),
            ]
        }),
    )
    .await;
    for socket in [0, 1] {
        let turns = turns("socket", &events(&result, socket));
        assert_eq!(turns.len(), 2);
        let delivered = |turn: &[Value]| -> Vec<Value> {
            turn.iter()
                .filter(|event| event["event"] == "assistant:steering_delivered")
                .map(|event| event["data"]["content"].clone())
                .collect()
        };
        assert_eq!(
            delivered(&turns[0]),
            [json!("[via:github from:ci] order 7 shipped")]
        );
        assert!(delivered(&turns[1]).is_empty(), "drained once");
    }
    assert!(waiting(&app).await.is_empty());
}
