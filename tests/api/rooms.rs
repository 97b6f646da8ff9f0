//! Session rooms, through several stock socket.io-client sockets at once
//! (`tests/clients/sio_room.mjs`): every socket joined to a session gets each
//! turn's events once and in order, whether a joined socket or HTTP started
//! it; a socket that joins mid-turn gets the rest of it; a room member that
//! never reads is cut off without holding up the others, and the delay of
//! the first delta is measured with and without it (printed, not asserted).

use std::io::Write;
use std::net::SocketAddr;
use std::process::{Command, Stdio};

use serde_json::{json, Value};

use crate::helpers::{spawn_app, spawn_app_with, TestApp};
use crate::raw_ws::RawWs;
use crate::socketio_helpers::{clients_dir, ensure_clients_installed};

/// Runs `sio_room.mjs` with `scenario` and returns its JSON document,
/// checked to have ended without error.
pub(crate) async fn run_room(app: &TestApp, scenario: Value) -> Value {
    let url = app.address.clone();
    let result = actix_web::rt::task::spawn_blocking(move || {
        ensure_clients_installed();
        let mut child = Command::new("node")
            .arg(clients_dir().join("sio_room.mjs"))
            .arg(url)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run sio_room.mjs");
        let mut stdin = child.stdin.take().expect("stdin");
        stdin
            .write_all(scenario.to_string().as_bytes())
            .expect("write the scenario");
        drop(stdin);
        let output = child.wait_with_output().expect("sio_room.mjs output");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let last_line = stdout.lines().last().unwrap_or("");
        serde_json::from_str::<Value>(last_line).unwrap_or_else(|error| {
            panic!(
                "sio_room.mjs printed no JSON ({error}):\n{stdout}\n{}",
                String::from_utf8_lossy(&output.stderr)
            )
        })
    })
    .await
    .expect("scenario thread");
    if result["error"] != Value::Null {
        panic!("{}: {:#}", result["error"], summary(&result));
    }
    result
}

/// Per socket: how many events, and the first and last few (a failed long
/// turn's document is megabytes).
fn summary(result: &Value) -> Value {
    let sockets: Vec<Value> = (0..result["sockets"].as_array().map_or(0, Vec::len))
        .map(|socket| {
            let events = events(result, socket);
            let n = events.len();
            json!({
                "n_events": n,
                "first": events.iter().take(3).collect::<Vec<_>>(),
                "last": events.iter().skip(n.saturating_sub(3)).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({"sockets": sockets, "marks": result["marks"], "http": result["http"].as_array().map(Vec::len)})
}

pub(crate) fn events(result: &Value, socket: usize) -> Vec<Value> {
    result["sockets"][socket]["events"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// An event as a room member sees it: its name and payload, without the
/// request id the requesting socket's status events carry, and without
/// the arrival time.
fn comparable(event: &Value) -> Value {
    let mut data = event["data"].clone();
    if let Value::Object(fields) = &mut data {
        fields.remove("request_id");
    }
    json!({"event": event["event"], "data": data})
}

/// The events split into turns at `status: completed`; each turn is checked
/// to hold its status pair once, at its ends, and its deltas once each, in
/// order (`delta_index` counting up by one within a segment).
pub(crate) fn turns(label: &str, events: &[Value]) -> Vec<Vec<Value>> {
    let mut turns = Vec::new();
    let mut current = Vec::new();
    for event in events {
        current.push(comparable(event));
        if event["event"] == "assistant:status" && event["data"]["status"] == "completed" {
            turns.push(std::mem::take(&mut current));
        }
    }
    assert!(
        current.is_empty(),
        "{label}: a turn never completed: {current:#?}"
    );
    for turn in &turns {
        let statuses: Vec<&Value> = turn
            .iter()
            .filter(|event| event["event"] == "assistant:status")
            .collect();
        assert_eq!(statuses.len(), 2, "{label}: {turn:#?}");
        assert_eq!(turn[0]["data"]["status"], "started", "{label}");
        let finals = turn
            .iter()
            .filter(|event| event["event"] == "assistant:final_response")
            .count();
        assert_eq!(finals, 1, "{label}: one final response a turn");
        check_delta_order(label, turn);
    }
    turns
}

/// Within each segment, deltas count up by one from the first one seen.
fn check_delta_order(label: &str, events: &[Value]) {
    let mut last: std::collections::HashMap<String, u64> = std::collections::HashMap::new();
    for event in events {
        let name = event["event"].as_str().unwrap_or_default();
        if !name.ends_with("_delta") {
            continue;
        }
        let segment = event["data"]["segment_id"].as_str().unwrap_or_default();
        let index = event["data"]["delta_index"].as_u64().expect("delta_index");
        if let Some(previous) = last.insert(segment.to_string(), index) {
            assert_eq!(index, previous + 1, "{label}: a delta lost or repeated");
        }
    }
}

pub(crate) fn deltas(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .filter(|event| event["event"] == "assistant:text_delta")
        .map(|event| {
            event["data"]["content"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

fn words(n: usize) -> String {
    (1..=n)
        .map(|i| format!("w{i}"))
        .collect::<Vec<_>>()
        .join(" ")
}

pub(crate) fn join(session_id: &str) -> Value {
    json!({"session_id": session_id})
}

pub(crate) fn message(session_id: &str, id: &str, content: &str) -> Value {
    json!({"id": id, "session_id": session_id, "content": content})
}

/// An AG-UI run of one user message on thread `session`.
fn agui_run(session: &str, id: &str, content: &str) -> Value {
    json!({"threadId": session, "runId": id, "state": {}, "tools": [], "context": [],
           "forwardedProps": {}, "messages": [{"id": id, "role": "user", "content": content}]})
}

pub(crate) fn completed(socket: usize, count: usize) -> Value {
    json!({"socket": socket, "wait": "assistant:status", "count": count, "match": {"status": "completed"}})
}

/// Two sockets joined to one session (one over websocket, one that upgrades
/// from polling) and one that never joined: a turn sent by the first socket,
/// one sent over HTTP and an AG-UI run reach both joined sockets, every event
/// once and in the same order, and the other socket not at all. After leaving the room
/// the second socket sees no more turns.
#[actix_web::test]
async fn every_joined_socket_gets_each_turn_once_whichever_door_started_it() {
    let app = spawn_app().await;
    let session = "room-doors";
    let result = run_room(
        &app,
        json!({
            "sockets": [{"mode": "websocket"}, {"mode": "default"}, {"mode": "websocket"}],
            "steps": [
                {"socket": 0, "call": "assistant_join_session", "data": join(session)},
                {"socket": 1, "call": "assistant_join_session", "data": join(session)},
                {"socket": 0, "call": "assistant_message", "data": message(session, "m1", "say one two three")},
                completed(0, 1),
                completed(1, 1),
                {"http": "/api/chat", "body": message(session, "m2", "think hmm\nsay four five")},
                {"http_done": true},
                completed(0, 2),
                completed(1, 2),
                {"http": "/api/agui", "body": agui_run(session, "g1", "say seven")},
                {"http_done": true},
                completed(0, 3),
                completed(1, 3),
                {"socket": 1, "call": "assistant_leave_session", "data": join(session)},
                {"socket": 0, "call": "assistant_message", "data": message(session, "m3", "say six")},
                completed(0, 4),
            ]
        }),
    )
    .await;
    for answer in result["http"].as_array().expect("answers") {
        assert_eq!(answer["status"], 200, "{answer}");
    }
    let first = turns("sender", &events(&result, 0));
    let second = turns("member", &events(&result, 1));
    assert_eq!(first.len(), 4);
    assert_eq!(second.len(), 3, "no turn after leaving: {second:#?}");
    assert_eq!(first[..3], second[..], "the same events in the same order");
    assert_eq!(deltas(&first[0]), ["one ", "two ", "three"]);
    assert_eq!(deltas(&first[1]), ["four ", "five"]);
    assert_eq!(
        deltas(&first[2]),
        ["seven"],
        "an AG-UI run reaches the room"
    );
    assert!(
        first[1]
            .iter()
            .any(|event| event["event"] == "assistant:thinking_delta"),
        "an HTTP turn's every event reaches the room: {:#?}",
        first[1]
    );
    assert_eq!(
        events(&result, 2),
        Vec::<Value>::new(),
        "not joined, nothing"
    );
    for event in events(&result, 1) {
        assert_eq!(event["data"]["session_id"], session);
    }
}

/// A socket that joins while a turn streams gets that turn from the point it
/// joined, to its end: the later deltas in order, the final response and
/// `status: completed`, with nothing replayed.
#[actix_web::test]
async fn a_socket_joining_mid_turn_gets_the_rest_of_it() {
    let app = spawn_app().await;
    let session = "room-late";
    let result = run_room(
        &app,
        json!({
            "sockets": [{"mode": "websocket"}, {"mode": "websocket"}],
            "steps": [
                {"socket": 0, "call": "assistant_join_session", "data": join(session)},
                {"socket": 0, "call": "assistant_message", "data": message(session, "m1", &format!("slow 40\nsay {}", words(30)))},
                {"socket": 0, "wait": "assistant:text_delta", "count": 5},
                {"socket": 1, "call": "assistant_join_session", "data": join(session)},
                completed(0, 1),
                completed(1, 1),
            ]
        }),
    )
    .await;
    let sender = turns("sender", &events(&result, 0));
    let late: Vec<Value> = events(&result, 1).iter().map(comparable).collect();
    check_delta_order("late", &late);
    let (all, rest) = (deltas(&sender[0]), deltas(&late));
    assert_eq!(all.len(), 30);
    assert!(
        !rest.is_empty() && rest.len() < all.len(),
        "joined mid-turn: {rest:?}"
    );
    assert_eq!(
        rest[..],
        all[all.len() - rest.len()..],
        "the rest, in order"
    );
    assert!(
        late.iter()
            .all(|event| event["data"]["status"] != "started"),
        "nothing before the join is replayed"
    );
    let tail: Vec<&Value> = late.iter().rev().take(2).collect();
    assert_eq!(tail[0]["data"]["status"], "completed");
    assert_eq!(tail[1]["event"], "assistant:final_response");
}

/// When an admin hands the session to bob, alice's socket in its room is put
/// out and told (`assistant:error`, `forbidden`), and sees none of bob's
/// turns; bob's socket, joined after the transfer, sees them.
#[actix_web::test]
async fn an_owner_change_puts_the_old_owners_sockets_out_of_the_room() {
    let app = spawn_app_with(&[("ACCESS__MODE", "header")]).await;
    let session = "room-owner";
    let principal = |name: &str, roles: &str| json!({"X-Assistant-Principal": name, "X-Assistant-Roles": roles});
    let result = run_room(
        &app,
        json!({
            "sockets": [
                {"mode": "websocket", "headers": principal("alice", "")},
                {"mode": "websocket", "headers": principal("bob", "")},
            ],
            "steps": [
                {"socket": 0, "call": "assistant_join_session", "data": join(session)},
                {"socket": 0, "call": "assistant_message", "data": message(session, "m1", "say hello")},
                completed(0, 1),
                {"http": format!("/api/sessions/{session}/owner"), "method": "PATCH",
                 "body": {"owner_id": "bob"}, "headers": principal("root", "admin")},
                {"http_done": true},
                {"socket": 0, "wait": "assistant:error", "match": {"type": "forbidden"}},
                {"socket": 1, "call": "assistant_join_session", "data": join(session)},
                {"socket": 1, "call": "assistant_message", "data": message(session, "m2", "say bob's turn")},
                completed(1, 1),
                {"socket": 0, "call": "assistant_join_session", "data": join(session)},
            ]
        }),
    )
    .await;
    assert_eq!(result["http"][0]["status"], 200, "{:#}", result["http"]);
    assert_eq!(
        result["http"][0]["body"],
        json!({"session_id": session, "owner_id": "bob"})
    );
    let alice = events(&result, 0);
    let told = alice
        .iter()
        .find(|event| event["event"] == "assistant:error")
        .expect("alice is told");
    assert_eq!(told["data"]["session_id"], session, "{told}");
    assert!(
        alice
            .iter()
            .all(|event| event["data"]["segment_id"] != "m2:reply:0"),
        "none of bob's turn reaches alice: {alice:#?}"
    );
    let acks = result["sockets"][0]["acks"].as_array().expect("acks");
    assert_eq!(acks[2]["ok"], false, "alice may not join again: {acks:?}");
    assert_eq!(acks[2]["error"]["type"], "forbidden");
}

/// How many short turns each case measures.
const N_SHORT_TURNS: usize = 5;

/// A long turn's thinking deltas (sent over HTTP, 1 ms apart), of
/// `WORD_CHARS` each. Thinking, so that the final response (which carries
/// the text) stays small: one event past a member's outgoing limit would cut
/// off every member.
const WORD_CHARS: usize = 2000;

fn long_turn(session: &str, id: &str, n_words: usize) -> Value {
    let words = (1..=n_words)
        .map(|i| format!("{i:0>width$}", width = WORD_CHARS))
        .collect::<Vec<_>>()
        .join(" ");
    message(session, id, &format!("slow 1\nthink {words}\nsay done"))
}

/// The steps of `N_SHORT_TURNS` short turns sent by socket 0, each marked
/// `short{i}` when sent, each awaited at both sockets.
fn short_turns(session: &str, n_before: usize) -> Vec<Value> {
    (0..N_SHORT_TURNS)
        .flat_map(|i| {
            let id = format!("short{i}");
            [
                json!({"socket": 0, "emit": "assistant_message", "data": message(session, &id, "say one two three"), "mark": id}),
                completed(0, n_before + i + 1),
                completed(1, n_before + i + 1),
            ]
        })
        .collect()
}

/// The first delta's delay of each short turn, from its sending, at the
/// sender (socket 0) and at the other room member (socket 1).
fn first_delta_delays(result: &Value) -> [Vec<f64>; 2] {
    [0, 1].map(|socket| {
        (0..N_SHORT_TURNS)
            .map(|i| {
                let id = format!("short{i}");
                let sent = result["marks"][&id].as_f64().expect("mark");
                let segment = format!("{id}:reply:0");
                events(result, socket)
                    .iter()
                    .find(|event| event["data"]["segment_id"] == segment.as_str())
                    .and_then(|event| event["t"].as_f64())
                    .expect("the turn's first delta")
                    - sent
            })
            .collect()
    })
}

fn median(values: &[f64]) -> f64 {
    let mut values = values.to_vec();
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Joins `sessions` over a raw websocket that then never reads again.
fn stalled_member(addr: SocketAddr, sessions: &[&str]) -> RawWs {
    let mut ws = RawWs::connect(addr, "EIO=4&transport=websocket");
    ws.recv_until(false, |text| text.starts_with('0'))
        .expect("open packet");
    ws.send_text("40/assistant,");
    ws.recv_until(false, |text| text.starts_with("40/assistant,"))
        .expect("namespace CONNECT reply");
    for (ack_id, session) in sessions.iter().enumerate() {
        ws.send_text(&format!(
            "42/assistant,{ack_id}{}",
            json!(["assistant_join_session", join(session)])
        ));
        let ack = format!("43/assistant,{ack_id}");
        ws.recv_until(false, |text| text.starts_with(&ack))
            .expect("the join's ack");
    }
    ws
}

/// A room member that never reads: two healthy members measure the first
/// delta of short turns in a session without it, then in one with it in the
/// room holding a 3 MB backlog. The backlog comes from a long turn of a
/// second session it also joined (so both measured sessions have the same
/// short history; each case runs that long turn first). A second long turn
/// there takes it past its connection's outgoing limit (1 MiB with
/// `SOCKETIO__MAX_PAYLOAD=100000`, plus the loopback connection's kernel
/// buffers) and it is cut off: its connection is closed before that turn's
/// end, while the healthy members get every delta. The delays are printed
/// (medians), not asserted.
#[actix_web::test]
async fn a_stalled_room_member_is_cut_off_without_holding_up_the_others() {
    let app = spawn_app_with(&[("SOCKETIO__MAX_PAYLOAD", "100000")]).await;
    let addr: SocketAddr = ([127, 0, 0, 1], app.port).into();
    let healthy =
        json!([{"mode": "websocket", "brief": true}, {"mode": "websocket", "brief": true}]);
    let (n_filling, n_cutting) = (1500, 3500);
    // Both sockets join `measured` and `long`; a long turn in `long`, then
    // the short turns in `measured`, then (with `cutting`) a second long turn.
    let steps = |measured: &str, long: &str, cutting: bool| {
        let mut steps = Vec::new();
        for session in [measured, long] {
            for socket in [0, 1] {
                steps.push(json!({"socket": socket, "call": "assistant_join_session", "data": join(session)}));
            }
        }
        steps.extend([
            json!({"http": "/api/chat", "body": long_turn(long, "filling", n_filling)}),
            completed(0, 1),
            completed(1, 1),
        ]);
        steps.extend(short_turns(measured, 1));
        if cutting {
            steps.extend([
                json!({"http": "/api/chat", "body": long_turn(long, "cutting", n_cutting)}),
                completed(0, N_SHORT_TURNS + 2),
                completed(1, N_SHORT_TURNS + 2),
            ]);
        }
        json!({"sockets": healthy, "steps": steps})
    };
    let without = run_room(&app, steps("room-without", "room-long-1", false)).await;

    let stalled = actix_web::rt::task::spawn_blocking(move || {
        stalled_member(addr, &["room-with", "room-long-2"])
    })
    .await
    .expect("stalled member");
    let with = run_room(&app, steps("room-with", "room-long-2", true)).await;
    for socket in [0, 1] {
        let thinking = events(&with, socket)
            .iter()
            .filter(|event| event["event"] == "assistant:thinking_delta")
            .count();
        assert_eq!(
            thinking,
            n_filling + n_cutting,
            "member {socket} got every delta"
        );
        turns("member", &events(&with, socket));
    }
    // Read now: what the server sent before it cut the member off, then the
    // close; never the end of the second long turn.
    let saw_the_end = actix_web::rt::task::spawn_blocking(move || {
        let mut stalled = stalled;
        stalled
            .recv_until(false, |text| text.contains("\"cutting:reply\""))
            .is_some()
    })
    .await
    .expect("read the stalled member");
    assert!(
        !saw_the_end,
        "the stalled member was cut off before the end"
    );

    for (label, result) in [("without", &without), ("with", &with)] {
        let [sender, member] = first_delta_delays(result);
        eprintln!(
            "rooms: first delta {label} a stalled member, median of {N_SHORT_TURNS} turns: \
             {:.2} ms at the sender, {:.2} ms at the other member (each: {sender:.2?} / {member:.2?})",
            median(&sender),
            median(&member),
        );
    }
}
