//! Load generator for `POST /api/chat` with `builtin:echo`.
//!
//! `loadgen turns --url http://127.0.0.1:7100 --sessions 200 --turns 10 [--rounds 5]`:
//! each session is one keep-alive connection sending its turns in sequence;
//! prints turns per second and p50/p99/max latency per round and overall.
//!
//! `loadgen idle --url ... --pid PID --sessions 10000`: creates that many
//! sessions with one turn each and reports the server's resident memory per
//! session (RSS after minus RSS before, divided by the count).
//!
//! `loadgen roundtrips --url ... --sessions 50 --turns 20`: each turn is a
//! host action round trip: a message whose `builtin:echo` reply calls the
//! host action `select_issue` (declared by the host context with a small
//! JSON schema), then the continuation answering it. Reports round trips/s.
//!
//! `--pid PID` (with `turns` or `roundtrips`) also reports the server's CPU
//! time per turn (user + system of `/proc/PID/stat`, over the whole run).
//! `--model M` sends `config.default_model` (e.g. `openai:bench` against the fake).
//! `--pause-ms MS` (with `turns`, `roundtrips` and `provider`) starts each
//! session's turns one pause apart, the sessions' starts spread over one
//! pause: concurrent conversations at a steady pace, to measure the latency
//! the runtime adds below saturation (a closed loop measures queueing). The
//! schedule is fixed from the session's first turn (`paced_start`).
//!
//! `loadgen provider --url http://127.0.0.1:7399 --sessions 50 --turns 20`:
//! the same load straight at an OpenAI-compatible `/v1/chat/completions`
//! (the fake's own latency, to subtract from the runtime's).
//!
//! `loadgen bare --port 7398 [--workers N]`: serves a bare actix-web handler
//! of the same request and reply shapes (the framework's ceiling);
//! `loadgen fake-openai --port 7399`: a zero-delay OpenAI-compatible stream
//! that counts the connections it accepted (`GET /stats`). See
//! `load_support/servers.rs`.
//!
//! It speaks HTTP/1.1 over raw sockets so that the client costs as little CPU
//! as possible next to the server on the same machine.

#[path = "load_support/mod.rs"]
mod load_support;
#[path = "load_support/servers.rs"]
mod servers;

use load_support::{find, paced_start, resident_kib};

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

struct Options {
    mode: String,
    host: String,
    port: u16,
    sessions: usize,
    turns: usize,
    rounds: usize,
    pid: Option<u32>,
    prefix: String,
    model: Option<String>,
    port_to_serve: u16,
    workers: usize,
    /// Each session's wait between its turns.
    pause: Duration,
}

/// What one request of a session sends.
#[derive(Clone, Copy, PartialEq)]
enum Load {
    /// A chat turn (`turns`).
    Turn,
    /// A host action round trip: two requests (`roundtrips`).
    RoundTrip,
    /// A completion request straight to an OpenAI-compatible provider.
    Provider,
}

fn parse_options() -> Result<Options, String> {
    let mut args = std::env::args().skip(1);
    let mode = args.next().ok_or(
        "usage: loadgen turns|roundtrips|idle|provider|bare|fake-openai [--url URL] [--sessions N] \
         [--turns N] [--rounds N] [--pid PID] [--model M] [--port P] [--workers N] [--pause-ms MS]",
    )?;
    let mut options = Options {
        mode,
        host: "127.0.0.1".into(),
        port: 7100,
        sessions: 200,
        turns: 10,
        rounds: 1,
        pid: None,
        prefix: format!("load{}", std::process::id()),
        model: None,
        port_to_serve: 7398,
        workers: std::thread::available_parallelism().map_or(2, |n| n.get()),
        pause: Duration::ZERO,
    };
    while let Some(flag) = args.next() {
        let value = args.next().ok_or(format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--url" => {
                let rest = value.trim_start_matches("http://").trim_end_matches('/');
                let (host, port) = rest.split_once(':').unwrap_or((rest, "80"));
                options.host = host.to_string();
                options.port = port.parse().map_err(|_| format!("bad port in {value}"))?;
            }
            "--sessions" => options.sessions = value.parse().map_err(|_| "bad --sessions")?,
            "--turns" => options.turns = value.parse().map_err(|_| "bad --turns")?,
            "--rounds" => options.rounds = value.parse().map_err(|_| "bad --rounds")?,
            "--pid" => options.pid = Some(value.parse().map_err(|_| "bad --pid")?),
            "--prefix" => options.prefix = value,
            "--model" => options.model = Some(value),
            "--port" => options.port_to_serve = value.parse().map_err(|_| "bad --port")?,
            "--workers" => options.workers = value.parse().map_err(|_| "bad --workers")?,
            "--pause-ms" => {
                options.pause = Duration::from_millis(value.parse().map_err(|_| "bad --pause-ms")?);
            }
            other => return Err(format!("unknown flag {other}")),
        }
    }
    Ok(options)
}

/// One keep-alive HTTP/1.1 connection.
struct Connection {
    stream: TcpStream,
    host: String,
    buffer: Vec<u8>,
}

impl Connection {
    async fn open(host: &str, port: u16) -> std::io::Result<Connection> {
        let stream = TcpStream::connect((host, port)).await?;
        stream.set_nodelay(true)?;
        Ok(Connection {
            stream,
            host: host.to_string(),
            buffer: Vec::with_capacity(4096),
        })
    }

    /// POSTs `body` to `path`; returns the status code.
    async fn post(&mut self, path: &str, body: &str) -> std::io::Result<u16> {
        self.post_reading(path, body)
            .await
            .map(|(status, _)| status)
    }

    /// POSTs `body` to `path`; returns the status code and the response body.
    async fn post_reading(&mut self, path: &str, body: &str) -> std::io::Result<(u16, &[u8])> {
        let request = format!(
            "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            self.host,
            body.len()
        );
        self.stream.write_all(request.as_bytes()).await?;
        self.read_response().await
    }

    async fn read_response(&mut self) -> std::io::Result<(u16, &[u8])> {
        self.buffer.clear();
        let mut chunk = [0u8; 8192];
        loop {
            if let Some(end) = find(&self.buffer, b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&self.buffer[..end]).to_string();
                let status: u16 = head
                    .split(' ')
                    .nth(1)
                    .and_then(|code| code.parse().ok())
                    .unwrap_or(0);
                let length: usize = head
                    .lines()
                    .find_map(|line| {
                        let (name, value) = line.split_once(':')?;
                        name.eq_ignore_ascii_case("content-length")
                            .then(|| value.trim().parse().ok())?
                    })
                    .unwrap_or(0);
                while self.buffer.len() < end + 4 + length {
                    let n = self.stream.read(&mut chunk).await?;
                    if n == 0 {
                        return Err(std::io::ErrorKind::UnexpectedEof.into());
                    }
                    self.buffer.extend_from_slice(&chunk[..n]);
                }
                return Ok((status, &self.buffer[end + 4..end + 4 + length]));
            }
            let n = self.stream.read(&mut chunk).await?;
            if n == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            self.buffer.extend_from_slice(&chunk[..n]);
        }
    }
}

fn chat_body(session: &str, turn: usize) -> String {
    format!(r#"{{"id":"m{turn}","session_id":"{session}","content":"hello number {turn}"}}"#)
}

/// `chat_body` with `config.default_model`, when one is asked for.
fn chat_body_with(session: &str, turn: usize, model: Option<&str>) -> String {
    match model {
        None => chat_body(session, turn),
        Some(model) => format!(
            r#"{{"id":"m{turn}","session_id":"{session}","content":"hello number {turn}","config":{{"default_model":"{model}"}}}}"#
        ),
    }
}

/// The host context of a round trip: one action with a small JSON schema.
const ROUND_TRIP_CONTEXT: &str = r#"{"version":1,"host":{"name":"bench","kind":"browser"},"view":{"name":"tasks","data":{"issues":[{"number":42,"title":"Fix login"}]}},"actions":[{"name":"select_issue","description":"Select an issue in the list.","parameters":{"type":"object","properties":{"number":{"type":"integer"}},"required":["number"]}}]}"#;

/// The first request of a round trip: `builtin:echo` calls `select_issue`.
fn action_body(session: &str, turn: usize) -> String {
    format!(
        r#"{{"id":"a{turn}","session_id":"{session}","content":"call select_issue {{\"number\": 42}}","host_context":{ROUND_TRIP_CONTEXT}}}"#
    )
}

/// The second: the host's result for `call_id`.
fn continuation_body(session: &str, turn: usize, call_id: &str) -> String {
    format!(
        r#"{{"id":"c{turn}","session_id":"{session}","content":"","tool_call_id":"{call_id}","tool_result":{{"selected":42}}}}"#
    )
}

/// A streamed completion request of a short conversation.
const PROVIDER_BODY: &str = r#"{"model":"bench","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"system","content":"You are helpful."},{"role":"user","content":"hello"}]}"#;

/// The pending call's id in a final response.
fn pending_call_id(body: &[u8]) -> Option<String> {
    let key = b"\"call_id\":\"";
    let start = find(body, key)? + key.len();
    let len = body[start..].iter().position(|&byte| byte == b'"')?;
    String::from_utf8(body[start..start + len].to_vec()).ok()
}

/// One unit of `load` for `session`: one request, or the two of a round trip.
async fn one_turn(
    connection: &mut Connection,
    load: Load,
    session: &str,
    turn: usize,
    model: Option<&str>,
) -> std::io::Result<bool> {
    match load {
        Load::Turn => {
            let body = chat_body_with(session, turn, model);
            Ok(connection.post("/api/chat", &body).await? == 200)
        }
        Load::Provider => Ok(connection
            .post("/v1/chat/completions", PROVIDER_BODY)
            .await?
            == 200),
        Load::RoundTrip => {
            let body = action_body(session, turn);
            let (status, reply) = connection.post_reading("/api/chat", &body).await?;
            let Some(call_id) = pending_call_id(reply).filter(|_| status == 200) else {
                return Ok(false);
            };
            let body = continuation_body(session, turn, &call_id);
            Ok(connection.post("/api/chat", &body).await? == 200)
        }
    }
}

/// User + system CPU time of process `pid` so far, in seconds.
fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces) start after ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    // Linux reports them in clock ticks of USER_HZ, 100 on every mainstream build.
    Some((utime + stime) / 100.0)
}

struct RoundResult {
    latencies: Vec<Duration>,
    errors: usize,
    elapsed: Duration,
}

async fn run_round(options: &Options, load: Load, round: usize) -> RoundResult {
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(options.sessions);
    for index in 0..options.sessions {
        let host = options.host.clone();
        let port = options.port;
        let turns = options.turns;
        let session = format!("{}-r{round}-s{index}", options.prefix);
        let model = options.model.clone();
        let pause = options.pause;
        // Paced sessions start spread over one pause.
        let offset = pause.mul_f64(index as f64 / options.sessions.max(1) as f64);
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(turns);
            let mut errors = 0;
            let Ok(mut connection) = Connection::open(&host, port).await else {
                return (latencies, turns);
            };
            tokio::time::sleep(offset).await;
            let schedule = tokio::time::Instant::now();
            for turn in 0..turns {
                if turn > 0 && !pause.is_zero() {
                    tokio::time::sleep_until(paced_start(schedule, pause, turn)).await;
                }
                let sent = Instant::now();
                match one_turn(&mut connection, load, &session, turn, model.as_deref()).await {
                    Ok(true) => latencies.push(sent.elapsed()),
                    Ok(false) => errors += 1,
                    Err(_) => {
                        errors += turns - turn;
                        break;
                    }
                }
            }
            (latencies, errors)
        }));
    }
    let mut result = RoundResult {
        latencies: Vec::new(),
        errors: 0,
        elapsed: Duration::ZERO,
    };
    for task in tasks {
        if let Ok((latencies, errors)) = task.await {
            result.latencies.extend(latencies);
            result.errors += errors;
        }
    }
    result.elapsed = started.elapsed();
    result
}

fn percentile(sorted: &[Duration], fraction: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let index = ((sorted.len() as f64 - 1.0) * fraction).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

fn report(label: &str, latencies: &mut [Duration], errors: usize, elapsed: Duration) {
    latencies.sort();
    let turns = latencies.len();
    println!(
        "{label}: {turns} turns in {:.3}s = {:.0} turns/s, p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms, errors {errors}",
        elapsed.as_secs_f64(),
        turns as f64 / elapsed.as_secs_f64(),
        percentile(latencies, 0.50).as_secs_f64() * 1e3,
        percentile(latencies, 0.99).as_secs_f64() * 1e3,
        latencies.last().copied().unwrap_or_default().as_secs_f64() * 1e3,
    );
}

async fn idle_memory(options: &Options) -> Result<(), String> {
    let pid = options.pid.ok_or("idle needs --pid of the server")?;
    let before = resident_kib(pid).ok_or("cannot read the server's RSS")?;
    let per_task = options.sessions.div_ceil(100);
    let mut tasks = Vec::new();
    for task_index in 0..100 {
        let host = options.host.clone();
        let port = options.port;
        let prefix = options.prefix.clone();
        let range = (task_index * per_task)..((task_index + 1) * per_task).min(options.sessions);
        tasks.push(tokio::spawn(async move {
            let mut connection = Connection::open(&host, port).await.ok()?;
            let mut errors = 0;
            for index in range {
                let body = chat_body(&format!("{prefix}-idle-{index}"), 0);
                if connection.post("/api/chat", &body).await.ok()? != 200 {
                    errors += 1;
                }
            }
            Some(errors)
        }));
    }
    let mut errors = 0;
    for task in tasks {
        errors += task.await.ok().flatten().unwrap_or(per_task);
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = resident_kib(pid).ok_or("cannot read the server's RSS")?;
    let grown = after.saturating_sub(before);
    println!(
        "idle: {} sessions with one turn each, errors {errors}; RSS {before} KiB -> {after} KiB; {:.2} KiB per idle session",
        options.sessions,
        grown as f64 / options.sessions as f64
    );
    Ok(())
}

fn main() {
    let options = match parse_options() {
        Ok(options) => options,
        Err(message) => {
            eprintln!("loadgen: {message}");
            std::process::exit(2);
        }
    };
    let served = match options.mode.as_str() {
        "bare" => servers::run_bare(options.port_to_serve, options.workers),
        "fake-openai" => servers::run_fake_openai(options.port_to_serve),
        _ => {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build();
            match runtime {
                Ok(runtime) => runtime.block_on(drive(options)),
                Err(error) => Err(error),
            }
        }
    };
    if let Err(error) = served {
        eprintln!("loadgen: {error}");
        std::process::exit(1);
    }
}

async fn drive(options: Options) -> std::io::Result<()> {
    let load = match options.mode.as_str() {
        "roundtrips" => Some(Load::RoundTrip),
        "provider" => Some(Load::Provider),
        "turns" => Some(Load::Turn),
        _ => None,
    };
    match (options.mode.as_str(), load) {
        (_, Some(load)) => {
            let mut all = Vec::new();
            let mut errors = 0;
            let mut elapsed = Duration::ZERO;
            let cpu_before = options.pid.and_then(cpu_seconds);
            for round in 0..options.rounds {
                let mut result = run_round(&options, load, round).await;
                report(
                    &format!("round {round}"),
                    &mut result.latencies,
                    result.errors,
                    result.elapsed,
                );
                all.extend(result.latencies);
                errors += result.errors;
                elapsed += result.elapsed;
            }
            let n_done = all.len();
            report(
                &format!(
                    "overall ({} sessions x {} turns x {} rounds)",
                    options.sessions, options.turns, options.rounds
                ),
                &mut all,
                errors,
                elapsed,
            );
            let cpu_after = options.pid.and_then(cpu_seconds);
            if let (Some(before), Some(after)) = (cpu_before, cpu_after) {
                let requests = if load == Load::RoundTrip { 2 } else { 1 };
                println!(
                    "server CPU: {:.2} s, {:.4} ms per turn ({:.4} ms per request)",
                    after - before,
                    (after - before) * 1e3 / n_done.max(1) as f64,
                    (after - before) * 1e3 / (n_done * requests).max(1) as f64,
                );
            }
        }
        ("idle", None) => {
            if let Err(message) = idle_memory(&options).await {
                eprintln!("loadgen: {message}");
                std::process::exit(1);
            }
        }
        (other, _) => {
            eprintln!("loadgen: unknown mode {other}");
            std::process::exit(2);
        }
    }
    Ok(())
}
