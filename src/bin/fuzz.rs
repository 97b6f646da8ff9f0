//! Black-box fuzzer for a live server on loopback.
//!
//! `fuzz --url http://127.0.0.1:7100 [--count 100000] [--seconds 600]
//!       [--concurrency 16] [--seed 1]`
//!
//! Sends generated inputs until `--count` or `--seconds` runs out: message
//! bodies over `POST /api/chat` (hostile schemas, deep and odd JSON, wrong
//! types, tool results, echo commands), AG-UI runs, session routes with odd
//! ids, malformed JSON text, and Socket.IO packets over Engine.IO polling.
//! It prints a count per target and status, every 5xx, and whether `/health`
//! still answered at the end. Exit status 1 on any 5xx or a dead server.
//! It refuses any host but 127.0.0.1 / localhost: it is an attack tool.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

struct Options {
    url: String,
    count: usize,
    seconds: u64,
    concurrency: usize,
    seed: u64,
}

fn parse_options() -> Result<Options, String> {
    let mut options = Options {
        url: "http://127.0.0.1:7100".into(),
        count: 100_000,
        seconds: 600,
        concurrency: 16,
        seed: 1,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or(format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--url" => options.url = value.trim_end_matches('/').to_string(),
            "--count" => options.count = value.parse().map_err(|_| "bad --count")?,
            "--seconds" => options.seconds = value.parse().map_err(|_| "bad --seconds")?,
            "--concurrency" => {
                options.concurrency = value.parse().map_err(|_| "bad --concurrency")?
            }
            "--seed" => options.seed = value.parse().map_err(|_| "bad --seed")?,
            other => return Err(format!("unknown flag {other}")),
        }
    }
    let host = options
        .url
        .trim_start_matches("http://")
        .split(['/', ':'])
        .next()
        .unwrap_or_default();
    if host != "127.0.0.1" && host != "localhost" {
        return Err(format!(
            "refusing {host}: the fuzzer only runs against loopback"
        ));
    }
    Ok(options)
}

/// xorshift64*: reproducible from `--seed`, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}

const WORDS: &[&str] = &[
    "a", "id", "type", "x", "", "ü", "name", "$ref", "../", "\u{0}",
];

fn any_string(rng: &mut Rng) -> String {
    match rng.below(6) {
        0 => String::new(),
        1 => "x".repeat(rng.below(200)),
        2 => "é".repeat(rng.below(70)),
        3 => (0..rng.below(20))
            .map(|_| char::from_u32(rng.below(0x2FF) as u32).unwrap_or('?'))
            .collect(),
        _ => rng.pick(WORDS).to_string(),
    }
}

/// Random JSON up to `depth` levels (iteratively nested at the leaves).
fn any_json(rng: &mut Rng, depth: usize) -> Value {
    if depth == 0 || rng.chance(30) {
        return match rng.below(6) {
            0 => Value::Null,
            1 => json!(rng.chance(50)),
            2 => json!(rng.next() as i64),
            3 => json!((rng.next() % 1000) as f64 / 7.0),
            _ => Value::String(any_string(rng)),
        };
    }
    if rng.chance(50) {
        Value::Array(
            (0..rng.below(4))
                .map(|_| any_json(rng, depth - 1))
                .collect(),
        )
    } else {
        let mut object = Map::new();
        for _ in 0..rng.below(4) {
            object.insert(any_string(rng), any_json(rng, depth - 1));
        }
        Value::Object(object)
    }
}

/// `[[[…]]]` or `{"a":{…}}` of `min + below(spread)` levels, as text (never built as a Value).
fn deep_text(rng: &mut Rng, min: usize, spread: usize) -> String {
    let depth = min + rng.below(spread);
    if rng.chance(50) {
        format!("{}1{}", "[".repeat(depth), "]".repeat(depth))
    } else {
        format!("{}1{}", "{\"a\":".repeat(depth), "}".repeat(depth))
    }
}

fn hostile_schema(rng: &mut Rng) -> Value {
    let mut nested = json!({"type": "object"});
    for _ in 0..rng.below(60) {
        nested = json!({"allOf": [nested]});
    }
    let shapes = [
        json!({"type": "object", "$ref": "#"}),
        json!({"type": "object", "definitions": {"a": {"$ref": "#/definitions/b"}, "b": {"$ref": "#/definitions/a"}}, "$ref": "#/definitions/a"}),
        json!({"type": "object", "if": {"$ref": "#"}, "then": {"$ref": "#"}}),
        json!({"type": "object", "dependencies": {"x": {"$ref": "#"}}}),
        nested,
        json!({"type": "object", "properties": {"s": {"type": "string", "pattern": "(a{1000}){1000}{1000}"}}}),
        json!({"type": "object", "patternProperties": {"((x+)+y)*$": {}}}),
        json!({"type": "object", "properties": {"n": {"multipleOf": 0}}}),
        json!({"type": "object", "properties": {"xs": {"type": "array", "uniqueItems": true}}}),
        json!({"type": "object", "$ref": "http://127.0.0.1:9/x"}),
        json!({"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}, "required": ["n"]}),
        json!({"type": "object"}),
    ];
    let mut schema = rng.pick(&shapes).clone();
    if rng.chance(20) {
        let key = any_string(rng);
        schema[key] = any_json(rng, 3);
    }
    schema
}

fn context(rng: &mut Rng) -> Value {
    let mut context = json!({"version": 1, "actions": [{"name": "act", "description": "d", "parameters": hostile_schema(rng)}]});
    if rng.chance(20) {
        let key = any_string(rng);
        context[key] = any_json(rng, 4);
    }
    if rng.chance(20) {
        context["view"] = json!({"name": any_string(rng), "data": any_json(rng, 5)});
    }
    context
}

fn content(rng: &mut Rng) -> String {
    let arguments = match rng.below(5) {
        0 => deep_text(rng, 30, 200),
        1 => {
            let items: Vec<Value> = (0..rng.below(3000)).map(|i| json!({"i": i % 50})).collect();
            json!({"xs": items}).to_string()
        }
        2 => "{not json".to_string(),
        _ => any_json(rng, 4).to_string(),
    };
    match rng.below(6) {
        0 => format!("call act {arguments}"),
        1 => "slow 5\nsay a b c".to_string(),
        2 => "hold".to_string(),
        3 => format!("call unknown_tool {arguments}"),
        _ => format!("say {}", any_string(rng)),
    }
}

/// One message body, valid or broken in one or two places.
fn chat_body(rng: &mut Rng, session: &str) -> String {
    let mut body = json!({"id": format!("m{}", rng.next() % 100_000), "session_id": session, "content": content(rng)});
    if rng.chance(60) {
        body["host_context"] = context(rng);
    }
    if rng.chance(15) {
        body["output_mode"] = json!("host_tools");
    }
    if rng.chance(20) {
        body["tool_call_id"] = json!(any_string(rng));
        body["tool_result"] = any_json(rng, 6);
    }
    if rng.chance(15) {
        let field = *rng.pick(&[
            "id",
            "session_id",
            "content",
            "parent_id",
            "message_type",
            "output_mode",
            "attachments",
            "config",
            "tool_result",
            "host_context",
            "images",
        ]);
        body[field] = any_json(rng, 3);
    }
    let text = body.to_string();
    match rng.below(20) {
        // Cut anywhere, even inside a character: the server must cope with both.
        0 => String::from_utf8_lossy(&text.as_bytes()[..rng.below(text.len())]).into_owned(),
        1 => text.replacen(
            "\"content\"",
            &format!("\"content\":{},\"x\"", deep_text(rng, 60, 5_000)),
            1,
        ),
        _ => text,
    }
}

fn agui_body(rng: &mut Rng, thread: &str) -> String {
    let mut body = json!({
        "threadId": thread, "runId": "r1",
        "messages": [{"id": format!("u{}", rng.next() % 1000), "role": "user", "content": content(rng)}],
        "tools": [{"name": "act", "description": "d", "parameters": hostile_schema(rng)}]
    });
    if rng.chance(30) {
        let tool = json!({"id": "t1", "role": "tool", "toolCallId": any_string(rng), "content": deep_text(rng, 40, 200)});
        if let Some(messages) = body["messages"].as_array_mut() {
            messages.push(tool);
        }
    }
    if rng.chance(20) {
        let field = rng
            .pick(&["threadId", "messages", "tools", "context", "state"])
            .to_string();
        body[field] = any_json(rng, 4);
    }
    body.to_string()
}

fn odd_id(rng: &mut Rng) -> String {
    let ids = [
        "..%2F..%2Fetc%2Fpasswd",
        "%00",
        "%F0%9F%92%A9",
        "a%20b",
        "%25",
        "..",
        "%2e%2e",
        "x",
    ];
    if rng.chance(30) {
        "y".repeat(rng.below(100))
    } else {
        rng.pick(&ids).to_string()
    }
}

#[derive(Default)]
struct Tally {
    counts: BTreeMap<String, usize>,
    server_errors: Vec<String>,
}

impl Tally {
    fn record(&mut self, target: &str, status: String, detail: impl FnOnce() -> String) {
        *self.counts.entry(format!("{target} {status}")).or_default() += 1;
        let failed = status.starts_with('5') || status == "connection_error";
        if failed && self.server_errors.len() < 20 {
            self.server_errors
                .push(format!("{target} {status}: {}", detail()));
        }
    }
}

async fn send(client: &reqwest::Client, request: reqwest::RequestBuilder) -> (String, String) {
    let _ = client;
    match request.send().await {
        Ok(response) => {
            let status = response.status().as_u16().to_string();
            let text = response.text().await.unwrap_or_default();
            (status, text.chars().take(300).collect())
        }
        Err(error) => ("connection_error".into(), error.to_string()),
    }
}

/// One Engine.IO polling session on `/assistant`; `None` if it could not open.
async fn socket_session(client: &reqwest::Client, url: &str) -> Option<String> {
    let open = client
        .get(format!("{url}/socket.io/?EIO=4&transport=polling"))
        .send()
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    let sid = serde_json::from_str::<Value>(open.get(1..)?).ok()?["sid"]
        .as_str()?
        .to_string();
    let base = format!("{url}/socket.io/?EIO=4&transport=polling&sid={sid}");
    client.post(&base).body("40/assistant,").send().await.ok()?;
    Some(base)
}

async fn one_input(client: &reqwest::Client, url: &str, rng: &mut Rng, tally: &Mutex<Tally>) {
    let session = format!("fz{}", rng.below(200));
    let (target, request, body_for_report) = match rng.below(10) {
        0..=3 => {
            let body = chat_body(rng, &session);
            (
                "chat",
                client
                    .post(format!("{url}/api/chat"))
                    .header("content-type", "application/json")
                    .body(body.clone()),
                body,
            )
        }
        4 | 5 => {
            let body = agui_body(rng, &session);
            (
                "agui",
                client
                    .post(format!("{url}/api/agui"))
                    .header("content-type", "application/json")
                    .body(body.clone()),
                body,
            )
        }
        6 => {
            let suffix = rng
                .pick(&["", "/messages?leaf_id=m1", "/tree", "/messages"])
                .to_string();
            let path = format!("{url}/api/sessions/{}{suffix}", odd_id(rng));
            let request = match rng.below(3) {
                0 => client.delete(&path),
                _ => client.get(&path),
            };
            ("sessions", request, path)
        }
        7 => {
            let path = format!("{url}/api/sessions/{session}");
            ("delete", client.delete(&path), path)
        }
        _ => {
            let Some(base) = socket_session(client, url).await else {
                tally.lock().unwrap_or_else(|p| p.into_inner()).record(
                    "socketio",
                    "connection_error".into(),
                    || "handshake".into(),
                );
                return;
            };
            let event = rng
                .pick(&[
                    "assistant_message",
                    "assistant_join_session",
                    "assistant_cancel",
                    "unknown",
                ])
                .to_string();
            let packet = match rng.below(5) {
                0 => format!("42/assistant,{}", any_json(rng, 5)),
                1 => format!(
                    "42/assistant,[\"assistant_message\",{}]",
                    deep_text(rng, 60, 3000)
                ),
                _ => format!("42/assistant,[\"{event}\",{}]", chat_body(rng, &session)),
            };
            let request = client.post(&base).body(packet.clone());
            let (status, text) = send(client, request).await;
            tally
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .record("socketio", status, || format!("{text} <- {:.200}", packet));
            let _ = client.post(&base).body("1").send().await;
            return;
        }
    };
    let (status, text) = send(client, request).await;
    tally
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .record(target, status, || {
            format!("{text} <- {body_for_report:.200}")
        });
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let options = match parse_options() {
        Ok(options) => options,
        Err(error) => {
            eprintln!("{error}");
            std::process::exit(2);
        }
    };
    actors::model::tls::install_crypto_provider();
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap_or_default();
    let started = Instant::now();
    let deadline = started + Duration::from_secs(options.seconds);
    let sent = Arc::new(AtomicUsize::new(0));
    let tally = Arc::new(Mutex::new(Tally::default()));
    let mut workers = Vec::new();
    for worker in 0..options.concurrency {
        let (client, url, sent, tally) = (
            client.clone(),
            options.url.clone(),
            sent.clone(),
            tally.clone(),
        );
        let count = options.count;
        let mut rng =
            Rng(options.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (worker as u64 + 1) | 1);
        workers.push(tokio::spawn(async move {
            while Instant::now() < deadline && sent.fetch_add(1, Ordering::Relaxed) < count {
                one_input(&client, &url, &mut rng, &tally).await;
            }
        }));
    }
    for worker in workers {
        let _ = worker.await;
    }
    let elapsed = started.elapsed();
    let health = client
        .get(format!("{}/health", options.url))
        .send()
        .await
        .map(|response| response.status().as_u16())
        .unwrap_or(0);
    let tally = tally.lock().unwrap_or_else(|p| p.into_inner());
    let total: usize = tally.counts.values().sum();
    println!(
        "inputs: {total} in {:.1} s (seed {})",
        elapsed.as_secs_f64(),
        options.seed
    );
    for (key, count) in &tally.counts {
        println!("  {key}: {count}");
    }
    let n_5xx: usize = tally
        .counts
        .iter()
        .filter(|(key, _)| {
            key.split(' ')
                .nth(1)
                .is_some_and(|status| status.starts_with('5'))
        })
        .map(|(_, count)| count)
        .sum();
    println!("5xx: {n_5xx}; /health at the end: {health}");
    for error in &tally.server_errors {
        println!("  {error}");
    }
    if n_5xx > 0 || health != 200 {
        std::process::exit(1);
    }
}
