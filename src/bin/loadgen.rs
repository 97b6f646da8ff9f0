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
//! It speaks HTTP/1.1 over raw sockets so that the client costs as little CPU
//! as possible next to the server on the same machine.

#[path = "load_support/mod.rs"]
mod load_support;

use load_support::{find, resident_kib};

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
}

fn parse_options() -> Result<Options, String> {
    let mut args = std::env::args().skip(1);
    let mode = args.next().ok_or(
        "usage: loadgen turns|idle [--url URL] [--sessions N] [--turns N] [--rounds N] [--pid PID]",
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
        let request = format!(
            "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            self.host,
            body.len()
        );
        self.stream.write_all(request.as_bytes()).await?;
        self.read_response().await
    }

    async fn read_response(&mut self) -> std::io::Result<u16> {
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
                return Ok(status);
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

struct RoundResult {
    latencies: Vec<Duration>,
    errors: usize,
    elapsed: Duration,
}

async fn run_round(options: &Options, round: usize) -> RoundResult {
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(options.sessions);
    for index in 0..options.sessions {
        let host = options.host.clone();
        let port = options.port;
        let turns = options.turns;
        let session = format!("{}-r{round}-s{index}", options.prefix);
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(turns);
            let mut errors = 0;
            let Ok(mut connection) = Connection::open(&host, port).await else {
                return (latencies, turns);
            };
            for turn in 0..turns {
                let body = chat_body(&session, turn);
                let sent = Instant::now();
                match connection.post("/api/chat", &body).await {
                    Ok(200) => latencies.push(sent.elapsed()),
                    Ok(_) => errors += 1,
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

#[tokio::main]
async fn main() {
    let options = match parse_options() {
        Ok(options) => options,
        Err(message) => {
            eprintln!("loadgen: {message}");
            std::process::exit(2);
        }
    };
    match options.mode.as_str() {
        "turns" => {
            let mut all = Vec::new();
            let mut errors = 0;
            let mut elapsed = Duration::ZERO;
            for round in 0..options.rounds {
                let mut result = run_round(&options, round).await;
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
            report(
                &format!(
                    "overall ({} sessions x {} turns x {} rounds)",
                    options.sessions, options.turns, options.rounds
                ),
                &mut all,
                errors,
                elapsed,
            );
        }
        "idle" => {
            if let Err(message) = idle_memory(&options).await {
                eprintln!("loadgen: {message}");
                std::process::exit(1);
            }
        }
        other => {
            eprintln!("loadgen: unknown mode {other}");
            std::process::exit(2);
        }
    }
}
