//! One PostgreSQL database, several runtime processes, no sticky routing:
//! each request goes to whichever process the test picks, so processes hold
//! stale copies of sessions. The store's versioned writes must keep every
//! acknowledged message on the stored path and every accepted result stored
//! once as accepted (docs/persistence.md, "Several processes").
//!
//! The scenarios run two in-process apps on one database (each with its own
//! actors and pool, as two processes would have); the randomized test runs
//! three server binaries and kills and restarts them along the way.

use std::collections::HashMap;
use std::time::Duration;

use actors::ids::SessionId;
use actors::store::postgres::PgStore;
use actors::store::{SessionSnapshot, Store};
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::helpers::{spawn_app_with, tasks_context, tool_records, TestApp};
use crate::postgres::{server_on, TestDb};
use crate::raw_ws::RawWs;

const SELECT_ISSUE: &str = "call select_issue {\"number\": 42}";

// ---- what clients were told, and what the store must hold -----------------

/// Everything a client got a success for, per session.
#[derive(Default, Debug)]
struct Acknowledged {
    /// User messages answered 200, and replies answered 200 without an error.
    messages: Vec<String>,
    /// Continuations answered 200: (call id, the result sent).
    results: Vec<(String, Value)>,
}

impl Acknowledged {
    /// Records a `POST /api/chat` answer for a message `id`.
    fn turn(&mut self, id: &str, status: StatusCode, body: &Value) {
        if status != StatusCode::OK {
            return;
        }
        self.messages.push(id.to_string());
        if body.get("error").is_none_or(Value::is_null) {
            if let Some(reply) = body["message_id"].as_str() {
                self.messages.push(reply.to_string());
            }
        }
    }

    /// Records a continuation's answer.
    fn result(&mut self, call_id: &str, result: &Value, status: StatusCode, body: &Value) {
        if status != StatusCode::OK {
            return;
        }
        self.results.push((call_id.to_string(), result.clone()));
        if body.get("error").is_none_or(Value::is_null) {
            if let Some(reply) = body["message_id"].as_str() {
                self.messages.push(reply.to_string());
            }
        }
    }
}

async fn stored(store: &PgStore, session_id: &str) -> SessionSnapshot {
    store
        .load(&SessionId::new(session_id))
        .await
        .expect("load")
        .unwrap_or_else(|| panic!("session {session_id} is stored"))
}

/// The ids from the root to the active leaf.
fn stored_path(snapshot: &SessionSnapshot) -> Vec<String> {
    let parents: HashMap<&str, Option<&str>> = snapshot
        .messages
        .iter()
        .map(|message| {
            (
                message.id.as_str(),
                message.parent_id.as_ref().map(|id| id.as_str()),
            )
        })
        .collect();
    let mut path = Vec::new();
    let mut next = snapshot.record.active_leaf.as_ref().map(|id| id.as_str());
    while let Some(id) = next {
        assert!(path.len() <= parents.len(), "a cycle in the tree at {id}");
        path.push(id.to_string());
        next = parents.get(id).copied().flatten();
    }
    path.reverse();
    path
}

/// The invariant: every acknowledged message is on the stored path, and
/// every accepted result is stored once, as the result that was accepted.
fn assert_nothing_lost(session_id: &str, snapshot: &SessionSnapshot, acked: &Acknowledged) {
    let path = stored_path(snapshot);
    for id in &acked.messages {
        assert!(
            path.contains(id),
            "session {session_id}: acknowledged message {id} is not on the stored path {path:?}"
        );
    }
    let tree = serde_json::to_value(&snapshot.messages).expect("messages serialize");
    for (call_id, result) in &acked.results {
        let records = tool_records(&tree, call_id);
        assert_eq!(
            records.len(),
            1,
            "session {session_id}: call {call_id} stored {} times",
            records.len()
        );
        let record = &records[0];
        assert_eq!(
            &record["output"], result,
            "session {session_id}: the accepted result of {call_id} was replaced: {record}"
        );
        let status = record["status"].as_str().unwrap_or("success");
        assert!(
            !matches!(status, "superseded" | "unknown" | "cancelled"),
            "session {session_id}: accepted call {call_id} is stored as {status}: {record}"
        );
    }
}

fn pending_call(body: &Value) -> Option<String> {
    body["pending_tool_call"]["call_id"]
        .as_str()
        .map(str::to_string)
}

/// `assistant_join_session` over a raw websocket to `port`; returns the ack,
/// or `None` when the process is gone (the randomized test kills them).
async fn join_over_socket(port: u16, session_id: &str, context: Value) -> Option<Value> {
    let session_id = session_id.to_string();
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().expect("an address");
    std::net::TcpStream::connect(addr).ok()?;
    actix_web::rt::task::spawn_blocking(move || {
        let mut ws = RawWs::connect(addr, "EIO=4&transport=websocket");
        ws.send_text("40/assistant,");
        ws.recv_until(true, |text| text.starts_with("40/assistant,"))?;
        let event =
            json!(["assistant_join_session", {"session_id": session_id, "host_context": context}]);
        ws.send_text(&format!("42/assistant,7{event}"));
        let ack = ws.recv_until(true, |text| text.starts_with("43/assistant,7"))?;
        serde_json::from_str::<Value>(&ack["43/assistant,7".len()..]).ok()
    })
    .await
    .ok()
    .flatten()
}

async fn two_apps(db: &TestDb) -> (TestApp, TestApp) {
    let a = spawn_app_with(&[("DATABASE_URL", db.url.as_str())]).await;
    let b = spawn_app_with(&[("DATABASE_URL", db.url.as_str())]).await;
    (a, b)
}

// ---- scenarios ---------------------------------------------------------------

#[actix_web::test]
async fn a_result_accepted_on_one_process_is_not_erased_by_a_message_on_the_other() {
    let db = TestDb::create().await;
    let (a, b) = two_apps(&db).await;
    let mut acked = Acknowledged::default();
    let (status, first) = a
        .say("erase", "m1", SELECT_ISSUE, Some(tasks_context()))
        .await;
    acked.turn("m1", status, &first);
    let call_id = pending_call(&first).expect("a pending call");
    // B has no copy: it loads the pending call and accepts the result.
    let result = json!({"title": "accepted on B"});
    let (status, body) = b
        .continue_call("erase", "c1", &call_id, result.clone())
        .await;
    assert_eq!(status, 200, "{body}");
    acked.result(&call_id, &result, status, &body);
    // A still holds the call as pending; its next message must not supersede it.
    let (status, body) = a.say("erase", "m2", "next question", None).await;
    assert_eq!(status, 200, "{body}");
    acked.turn("m2", status, &body);

    let store = PgStore::new(&db.url, 1).unwrap();
    let snapshot = stored(&store, "erase").await;
    assert_nothing_lost("erase", &snapshot, &acked);
    assert_eq!(snapshot.record.turn_number, 2);
}

#[actix_web::test]
async fn a_join_on_a_stale_process_does_not_bring_back_an_accepted_call() {
    let db = TestDb::create().await;
    let (a, b) = two_apps(&db).await;
    let mut acked = Acknowledged::default();
    let (status, first) = a
        .say("double", "m1", SELECT_ISSUE, Some(tasks_context()))
        .await;
    acked.turn("m1", status, &first);
    let call_id = pending_call(&first).expect("a pending call");
    let result = json!({"title": "once"});
    let (status, body) = b
        .continue_call("double", "c1", &call_id, result.clone())
        .await;
    assert_eq!(status, 200, "{body}");
    acked.result(&call_id, &result, status, &body);

    // A joins with a new context from its old copy, where the call is pending.
    let ack = join_over_socket(a.port, "double", tasks_context())
        .await
        .expect("an ack from A");
    assert_eq!(ack[0]["ok"], true, "{ack}");
    let store = PgStore::new(&db.url, 1).unwrap();
    assert_eq!(stored(&store, "double").await.record.pending_action, None);

    // The same result again, on either process: refused, never applied twice.
    for app in [&a, &b] {
        let (status, body) = app
            .continue_call("double", "c2", &call_id, json!({"title": "twice"}))
            .await;
        assert_eq!(status, StatusCode::CONFLICT, "{body}");
    }
    assert_nothing_lost("double", &stored(&store, "double").await, &acked);
}

#[actix_web::test]
async fn a_stale_process_takes_a_call_another_process_made_pending() {
    let db = TestDb::create().await;
    let (a, b) = two_apps(&db).await;
    let two_calls = "call select_issue {\"number\": 1}\ncall select_issue {\"number\": 2}";
    let (status, first) = a.say("queue", "m1", two_calls, Some(tasks_context())).await;
    assert_eq!(status, 200, "{first}");
    let first_call = pending_call(&first).expect("a pending call");
    // B answers the first call; the second becomes pending there.
    let (status, second) = b.continue_call("queue", "c1", &first_call, json!(1)).await;
    assert_eq!(status, 200, "{second}");
    let second_call = pending_call(&second).expect("the queued call is pending now");
    // A's copy still has the second call queued behind the first: it must
    // not refuse from that copy.
    let (status, third) = a.continue_call("queue", "c2", &second_call, json!(2)).await;
    assert_eq!(status, 200, "{third}");
    let mut acked = Acknowledged::default();
    acked.turn("m1", StatusCode::OK, &first);
    acked.result(&first_call, &json!(1), StatusCode::OK, &second);
    acked.result(&second_call, &json!(2), StatusCode::OK, &third);
    let store = PgStore::new(&db.url, 1).unwrap();
    assert_nothing_lost("queue", &stored(&store, "queue").await, &acked);
}

#[actix_web::test]
async fn turns_on_a_then_b_then_a_keep_b_on_the_path() {
    let db = TestDb::create().await;
    let (a, b) = two_apps(&db).await;
    let mut acked = Acknowledged::default();
    for (app, id) in [(&a, "m1"), (&b, "m2"), (&a, "m3")] {
        let (status, body) = app.say("fork", id, id, None).await;
        assert_eq!(status, 200, "{body}");
        acked.turn(id, status, &body);
    }
    let store = PgStore::new(&db.url, 1).unwrap();
    let snapshot = stored(&store, "fork").await;
    assert_nothing_lost("fork", &snapshot, &acked);
    assert_eq!(
        stored_path(&snapshot),
        ["m1", "m1:reply", "m2", "m2:reply", "m3", "m3:reply"]
    );
    assert_eq!(snapshot.record.turn_number, 3);
    // What A's model read for m3 included B's turn.
    let (_, path) = a.get("/api/sessions/fork/messages").await;
    let ids: Vec<&str> = path
        .as_array()
        .map(|messages| messages.iter().filter_map(|m| m["id"].as_str()).collect())
        .unwrap_or_default();
    assert!(ids.contains(&"m2:reply"), "{path}");
}

#[actix_web::test]
async fn a_message_racing_a_continuation_on_another_process_ends_in_a_serial_state() {
    let db = TestDb::create().await;
    let (a, b) = two_apps(&db).await;
    let store = PgStore::new(&db.url, 2).unwrap();
    for round in 0..8 {
        let session = format!("race{round}");
        let mut acked = Acknowledged::default();
        let (status, first) = a
            .say(&session, "m1", SELECT_ISSUE, Some(tasks_context()))
            .await;
        acked.turn("m1", status, &first);
        let call_id = pending_call(&first).expect("a pending call");
        // B loads its own copy first, so both start from the same state.
        let _ = b.session(&session).await;
        let result = json!({"round": round});
        // Alternate which process gets the plain message.
        let (plain, cont) = if round % 2 == 0 { (&a, &b) } else { (&b, &a) };
        let ((message_status, message), (result_status, accepted)) = futures_util::join!(
            plain.say(&session, "m2", "interrupting", None),
            cont.continue_call(&session, "c1", &call_id, result.clone()),
        );
        acked.turn("m2", message_status, &message);
        acked.result(&call_id, &result, result_status, &accepted);
        assert_eq!(message_status, 200, "{message}");
        assert!(
            [StatusCode::OK, StatusCode::CONFLICT].contains(&result_status),
            "{result_status} {accepted}"
        );
        let snapshot = stored(&store, &session).await;
        assert_nothing_lost(&session, &snapshot, &acked);
        // Serial: the call is either accepted (and m2 came after it) or superseded.
        let tree = serde_json::to_value(&snapshot.messages).unwrap();
        let status = tool_records(&tree, &call_id)[0]["status"].clone();
        if result_status == StatusCode::OK {
            assert_ne!(status, "superseded");
        } else {
            assert_eq!(status, "superseded", "{tree}");
        }
    }
}

#[actix_web::test]
async fn the_session_id_may_come_in_the_query_and_must_match_the_body() {
    let app = spawn_app_with(&[]).await;
    let url = format!("{}/api/chat?session_id=by_query", app.address);
    let answer = |body: Value| {
        let request = app.client.post(&url).json(&body).send();
        async move {
            let response = request.await.expect("a response");
            let status = response.status();
            (
                status,
                response.json::<Value>().await.unwrap_or(Value::Null),
            )
        }
    };
    // The body may leave the id to the query, or repeat it.
    let (status, body) = answer(json!({"id": "m1", "content": "hello"})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["session_id"], "by_query");
    let (status, body) =
        answer(json!({"id": "m2", "session_id": "by_query", "content": "again"})).await;
    assert_eq!(status, 200, "{body}");
    // A different id in the body would be routed by one and stored under the other.
    let (status, body) =
        answer(json!({"id": "m3", "session_id": "other", "content": "mismatch"})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(
        body["error"].as_str().unwrap_or("").contains("session_id"),
        "{body}"
    );
    assert_eq!(app.session("other").await["type"], "not_found");
    assert_eq!(app.session("by_query").await["turn_number"], 2);
}

// ---- randomized: N processes, random routing, kills and restarts -------------

/// A small deterministic generator (xorshift64*), seeded per run and printed,
/// so a failing run can be replayed by setting `SCALE_OUT_SEED`.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// What the test knows of one session: acknowledgements and the newest
/// pending call it was told of.
#[derive(Default)]
struct Tracked {
    acked: Acknowledged,
    pending: Option<String>,
}

#[actix_web::test]
async fn random_routing_kills_and_restarts_lose_no_acknowledged_message_or_result() {
    const N_PROCESSES: usize = 3;
    const N_SESSIONS: usize = 6;
    const N_WAVES: usize = 24;
    const WAVE_SIZE: usize = 5;
    let seed = std::env::var("SCALE_OUT_SEED")
        .ok()
        .and_then(|seed| seed.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|elapsed| elapsed.as_nanos() as u64)
                .unwrap_or(1)
                | 1
        });
    eprintln!("scale-out randomized test: SCALE_OUT_SEED={seed}");
    let mut random = Random(seed);
    let db = TestDb::create().await;
    let mut processes = Vec::new();
    for _ in 0..N_PROCESSES {
        processes.push(server_on(&db.url).await);
    }
    let mut sessions: Vec<Tracked> = (0..N_SESSIONS).map(|_| Tracked::default()).collect();
    let mut n_ops = 0;
    let mut n_kills = 0;
    let mut n_joins = 0;
    for wave in 0..N_WAVES {
        // Now and then a process dies (SIGKILL, mid-request for some) and
        // comes back on a new port.
        if wave > 0 && wave % 5 == 0 {
            let victim = random.below(N_PROCESSES);
            let apps: Vec<&TestApp> = processes.iter().map(|process| &process.app).collect();
            let requests = plan_wave(&mut random, &mut sessions, &apps, wave, WAVE_SIZE);
            let killed = processes.remove(victim);
            let (outcomes, ()) = futures_util::join!(run_wave(requests), async move {
                actix_web::rt::time::sleep(Duration::from_millis(5)).await;
                killed.crash();
            });
            n_joins += record(&mut sessions, outcomes);
            processes.insert(victim, server_on(&db.url).await);
            n_kills += 1;
            n_ops += WAVE_SIZE;
            continue;
        }
        let apps: Vec<&TestApp> = processes.iter().map(|process| &process.app).collect();
        let requests = plan_wave(&mut random, &mut sessions, &apps, wave, WAVE_SIZE);
        let outcomes = run_wave(requests).await;
        n_joins += record(&mut sessions, outcomes);
        n_ops += WAVE_SIZE;
    }
    let store = PgStore::new(&db.url, 2).unwrap();
    let mut n_acked = 0;
    let mut n_results = 0;
    for (index, tracked) in sessions.iter().enumerate() {
        let session_id = session_name(index);
        if tracked.acked.messages.is_empty() {
            continue;
        }
        n_acked += tracked.acked.messages.len();
        n_results += tracked.acked.results.len();
        assert_nothing_lost(
            &session_id,
            &stored(&store, &session_id).await,
            &tracked.acked,
        );
    }
    eprintln!(
        "{n_ops} requests, {n_kills} kills, {n_joins} joins: {n_acked} acknowledged messages and {n_results} accepted results all stored"
    );
    assert!(
        n_acked > 0 && n_results > 0 && n_joins > 0,
        "the run acknowledged too little to prove anything"
    );
}

fn session_name(index: usize) -> String {
    format!("rand{index}")
}

/// One request of a wave, already routed to a process.
enum Planned {
    Turn {
        session: usize,
        id: String,
        request: reqwest::RequestBuilder,
    },
    Continuation {
        session: usize,
        call_id: String,
        result: Value,
        request: reqwest::RequestBuilder,
    },
    Join {
        session: usize,
        port: u16,
    },
}

enum Outcome {
    Turn(usize, String, StatusCode, Value),
    Continuation(usize, String, Value, StatusCode, Value),
    Joined,
    Nothing,
}

fn plan_wave(
    random: &mut Random,
    sessions: &mut [Tracked],
    apps: &[&TestApp],
    wave: usize,
    size: usize,
) -> Vec<Planned> {
    (0..size)
        .map(|slot| {
            let session = random.below(sessions.len());
            let app = apps[random.below(apps.len())];
            let session_id = session_name(session);
            let id = format!("w{wave}s{slot}");
            let post = |body: Value| {
                app.client
                    .post(format!("{}/api/chat", app.address))
                    .json(&body)
            };
            let pending = sessions[session].pending.clone();
            match (random.below(10), pending) {
                (0..=4, Some(call_id)) => {
                    let result = json!({"answer": id});
                    Planned::Continuation {
                        session,
                        request: post(json!({"id": id, "session_id": session_id, "content": "",
                                             "tool_call_id": call_id, "tool_result": result})),
                        call_id,
                        result,
                    }
                }
                (5, _) => Planned::Join {
                    session,
                    port: app.port,
                },
                (choice, _) => {
                    let content = if choice % 2 == 0 {
                        SELECT_ISSUE
                    } else {
                        "hello"
                    };
                    Planned::Turn {
                        session,
                        request: post(
                            json!({"id": id, "session_id": session_id, "content": content,
                                             "host_context": tasks_context()}),
                        ),
                        id,
                    }
                }
            }
        })
        .collect()
}

async fn run_wave(requests: Vec<Planned>) -> Vec<Outcome> {
    async fn answer(request: reqwest::RequestBuilder) -> Option<(StatusCode, Value)> {
        let response = request.send().await.ok()?;
        let status = response.status();
        Some((status, response.json().await.unwrap_or(Value::Null)))
    }
    let runs = requests.into_iter().map(|planned| async move {
        match planned {
            Planned::Turn {
                session,
                id,
                request,
            } => match answer(request).await {
                Some((status, body)) => Outcome::Turn(session, id, status, body),
                None => Outcome::Nothing,
            },
            Planned::Continuation {
                session,
                call_id,
                result,
                request,
            } => match answer(request).await {
                Some((status, body)) => {
                    Outcome::Continuation(session, call_id, result, status, body)
                }
                None => Outcome::Nothing,
            },
            Planned::Join { session, port } => {
                match join_over_socket(port, &session_name(session), tasks_context()).await {
                    Some(ack) if ack[0]["ok"] == true => Outcome::Joined,
                    _ => Outcome::Nothing,
                }
            }
        }
    });
    futures_util::future::join_all(runs).await
}

/// Takes a wave's answers into the tracked sessions; returns how many joins succeeded.
fn record(sessions: &mut [Tracked], outcomes: Vec<Outcome>) -> usize {
    let mut n_joins = 0;
    for outcome in outcomes {
        match outcome {
            Outcome::Turn(session, id, status, body) => {
                sessions[session].acked.turn(&id, status, &body);
                if status == StatusCode::OK {
                    sessions[session].pending = pending_call(&body);
                }
            }
            Outcome::Continuation(session, call_id, result, status, body) => {
                sessions[session]
                    .acked
                    .result(&call_id, &result, status, &body);
                if status == StatusCode::OK {
                    sessions[session].pending = pending_call(&body);
                }
            }
            Outcome::Joined => n_joins += 1,
            Outcome::Nothing => {}
        }
    }
    n_joins
}
