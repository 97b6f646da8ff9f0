//! Socket.IO load tool: raw websocket Engine.IO v4 clients for the
//! `/assistant` namespace, cheap enough to hold tens of thousands at once.
//!
//! `sioload hold --url http://127.0.0.1:7100 --conns 20000 --pid PID [--hold-secs 60]`:
//! opens the connections (`GET /socket.io/?EIO=4&transport=websocket`, then
//! `40/assistant,`), answers every server ping `2` with `3`, holds them for
//! `--hold-secs`, and reports how many are held, pings seen and answered, the
//! fewest pings any one connection answered, and the server's resident memory
//! per connection (`VmRSS` of `/proc/PID/status`, after minus before, divided
//! by the count held).
//!
//! `sioload turns --url ... --conns 1000 --turns 20`: each socket sends
//! `assistant_message` (`say ...`, answered by `builtin:echo`) and waits for
//! `assistant:status` `completed` before the next; reports turns per second
//! and p50/p99/max turn latency.
//!
//! Both also report the time to the first `assistant:text_delta` of each turn
//! (p50/p99, and the median of the first and the last tenth of the turns, to
//! see whether a long conversation streams as fast as a new one).
//! `--model openai:bench` sends `config.default_model` so that turns go to a
//! provider (e.g. `loadgen fake-openai`) instead of `builtin:echo`.
//!
//! `sioload poll-turns --url ... --turns 100 [--conns N]`: sessions (one
//! unless `--conns` says more) on HTTP long-polling only, the same turns in
//! sequence, the same figures.
//!
//! `--pause-ms MS` (with `turns` and `poll-turns`) starts each session's
//! turns one pause apart, on a fixed schedule from its first turn, the
//! sessions' starts spread over one pause: N concurrent conversations at a
//! steady pace, to measure the latency the runtime adds below saturation
//! rather than the queueing of a closed loop.
//!
//! `--sources 127.0.0.1,127.0.0.2` spreads connections over loopback source
//! addresses when one address runs out of ephemeral ports. The websocket
//! client is a minimal RFC 6455 handshake and framing over tokio `TcpStream`.

#[path = "load_support/mod.rs"]
mod load_support;

use load_support::{find, paced_start, resident_kib};

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::Semaphore;

const USAGE: &str = "usage: sioload hold|turns|poll-turns [--url URL] [--conns N] [--turns N] \
                     [--pid PID] [--hold-secs S] [--sources IP,IP] [--prefix P] [--model M] \
                     [--pause-ms MS]";
/// Handshakes in flight at once, well under the server's listen backlog (4096).
const MAX_CONNECTING: usize = 256;
/// Any fixed key works: the server's accept hash is not checked here.
const HANDSHAKE_KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";
const MASK: [u8; 4] = [0x37, 0xfa, 0x21, 0x3d];
/// How often progress is printed while connecting and holding.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);
/// The reply every turn asks `builtin:echo` for.
const TURN_CONTENT: &str = "say the quick brown fox jumps over the lazy dog";

struct Options {
    mode: String,
    server: SocketAddr,
    conns: usize,
    turns: usize,
    pid: Option<u32>,
    hold: Duration,
    sources: Vec<IpAddr>,
    prefix: String,
    model: Option<String>,
    /// Each session's wait between its turns.
    pause: Duration,
}

fn parse_options() -> Result<Options, String> {
    let mut args = std::env::args().skip(1);
    let mode = args.next().ok_or(USAGE)?;
    if !["hold", "turns", "poll-turns"].contains(&mode.as_str()) {
        return Err(USAGE.into());
    }
    let mut options = Options {
        mode,
        server: ([127, 0, 0, 1], 7100).into(),
        conns: 1000,
        turns: 10,
        pid: None,
        hold: Duration::from_secs(60),
        sources: Vec::new(),
        prefix: format!("sioload{}", std::process::id()),
        model: None,
        pause: Duration::ZERO,
    };
    let mut conns_given = false;
    while let Some(flag) = args.next() {
        let value = args.next().ok_or(format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--url" => {
                let rest = value.trim_start_matches("http://").trim_end_matches('/');
                options.server = rest
                    .parse()
                    .map_err(|_| format!("--url needs http://IP:PORT, got {value}"))?;
            }
            "--conns" => {
                options.conns = value.parse().map_err(|_| "bad --conns")?;
                conns_given = true;
            }
            "--pause-ms" => {
                options.pause = Duration::from_millis(value.parse().map_err(|_| "bad --pause-ms")?);
            }
            "--turns" => options.turns = value.parse().map_err(|_| "bad --turns")?,
            "--pid" => options.pid = Some(value.parse().map_err(|_| "bad --pid")?),
            "--hold-secs" => {
                options.hold = Duration::from_secs(value.parse().map_err(|_| "bad --hold-secs")?)
            }
            "--sources" => {
                options.sources = value
                    .split(',')
                    .map(|ip| ip.trim().parse().map_err(|_| format!("bad source {ip}")))
                    .collect::<Result<_, String>>()?
            }
            "--prefix" => options.prefix = value,
            "--model" => options.model = Some(value),
            other => return Err(format!("unknown flag {other}\n{USAGE}")),
        }
    }
    if options.mode == "poll-turns" && !conns_given {
        options.conns = 1;
    }
    Ok(options)
}

/// Where session `index` of `n` starts within one pause, so that paced
/// sessions do not all send at once.
fn start_offset(pause: Duration, index: usize, n: usize) -> Duration {
    pause.mul_f64(index as f64 / n.max(1) as f64)
}

/// Counters every connection task updates.
#[derive(Default)]
struct Stats {
    connected: AtomicU64,
    failed: AtomicU64,
    /// Connections the server closed (or reset) after they had joined.
    closed: AtomicU64,
    pings_answered: AtomicU64,
    turns_done: AtomicU64,
    /// Connections whose message the server refused (an `assistant:error`
    /// before the turn started, e.g. a model it does not allow): they stop,
    /// counted in `closed` too.
    refused: AtomicU64,
    /// Set when the measured phase starts (turns mode): all sockets joined.
    go: AtomicBool,
}

/// What one connection is told to do once joined.
#[derive(Clone, Copy)]
enum Work {
    Hold,
    Turns(usize),
}

/// One measured turn: microseconds to the first text delta and to the end.
#[derive(Clone, Copy)]
struct TurnTiming {
    turn: usize,
    first_delta_us: u32,
    completed_us: u32,
}

fn micros(elapsed: Duration) -> u32 {
    elapsed.as_micros().min(u128::from(u32::MAX)) as u32
}

/// The `assistant_message` event of turn `turn`, as a Socket.IO packet.
fn turn_packet(session_id: &str, turn: usize, model: Option<&str>) -> String {
    let config = match model {
        Some(model) => format!(",\"config\":{{\"default_model\":\"{model}\"}}"),
        None => String::new(),
    };
    format!(
        "42/assistant,[\"assistant_message\",{{\"id\":\"t{turn}\",\"session_id\":\"{session_id}\",\"content\":\"{TURN_CONTENT}\"{config}}}]"
    )
}

fn is_status(text: &[u8]) -> bool {
    text.starts_with(b"42/assistant,[\"assistant:status\"")
}

fn is_error(text: &[u8]) -> bool {
    text.starts_with(b"42/assistant,[\"assistant:error\"")
}

fn is_text_delta(text: &[u8]) -> bool {
    text.starts_with(b"42/assistant,[\"assistant:text_delta\"")
}

/// Prints the first-delta figures of `timings` as JSON fields.
fn first_delta_fields(timings: &[TurnTiming]) -> String {
    let ms = |us: u32| f64::from(us) / 1000.0;
    let pick = |sorted: &[u32], p: f64| -> f64 {
        if sorted.is_empty() {
            return 0.0;
        }
        ms(sorted[((sorted.len() as f64 - 1.0) * p).round() as usize])
    };
    let mut firsts: Vec<u32> = timings.iter().map(|t| t.first_delta_us).collect();
    firsts.sort_unstable();
    let n_turns = timings.iter().map(|t| t.turn + 1).max().unwrap_or(0);
    let tenth = n_turns.div_ceil(10);
    let median_of = |keep: &dyn Fn(usize) -> bool| {
        let mut part: Vec<u32> = timings
            .iter()
            .filter(|t| keep(t.turn))
            .map(|t| t.first_delta_us)
            .collect();
        part.sort_unstable();
        pick(&part, 0.5)
    };
    format!(
        "\"first_delta_p50_ms\":{:.2},\"first_delta_p99_ms\":{:.2},\
         \"first_delta_p50_first_tenth_ms\":{:.2},\"first_delta_p50_last_tenth_ms\":{:.2}",
        pick(&firsts, 0.5),
        pick(&firsts, 0.99),
        median_of(&|turn| turn < tenth),
        median_of(&|turn| turn + tenth >= n_turns),
    )
}

#[tokio::main]
async fn main() {
    let options = match parse_options() {
        Ok(options) => options,
        Err(message) => {
            eprintln!("sioload: {message}");
            std::process::exit(2);
        }
    };
    let result = match options.mode.as_str() {
        "hold" => hold(&options).await,
        "poll-turns" => poll_turns(&options).await,
        _ => turns(&options).await,
    };
    if let Err(message) = result {
        eprintln!("sioload: {message}");
        std::process::exit(1);
    }
}

/// Starts `options.conns` connection tasks; returns their per-connection
/// ping counters and latency lists.
fn start_connections(
    options: &Options,
    stats: &Arc<Stats>,
    work: Work,
) -> (Arc<Vec<AtomicU32>>, Arc<Mutex<Vec<TurnTiming>>>) {
    let pings: Arc<Vec<AtomicU32>> =
        Arc::new((0..options.conns).map(|_| AtomicU32::new(0)).collect());
    let latencies = Arc::new(Mutex::new(Vec::new()));
    let connecting = Arc::new(Semaphore::new(MAX_CONNECTING));
    for index in 0..options.conns {
        let source = match options.sources.len() {
            0 => None,
            n => Some(options.sources[index % n]),
        };
        let client = Client {
            index,
            server: options.server,
            source,
            session_id: format!("{}-{index}", options.prefix),
            stats: stats.clone(),
            pings: pings.clone(),
            latencies: latencies.clone(),
            work,
            model: options.model.clone(),
            pause: options.pause,
            offset: start_offset(options.pause, index, options.conns),
        };
        let connecting = connecting.clone();
        tokio::spawn(async move {
            if let Err(error) = client.run(connecting).await {
                // Only the first few failures are worth reading.
                if client.stats.failed.fetch_add(1, Ordering::Relaxed) < 5 {
                    eprintln!("connection {index}: {error}");
                }
            }
        });
    }
    (pings, latencies)
}

/// Waits until every connection joined or failed, printing progress.
async fn wait_joined(options: &Options, stats: &Stats) -> Duration {
    let started = Instant::now();
    let mut last_print = Instant::now();
    loop {
        let connected = stats.connected.load(Ordering::Relaxed) as usize;
        let failed = stats.failed.load(Ordering::Relaxed) as usize;
        if connected + failed >= options.conns {
            return started.elapsed();
        }
        if last_print.elapsed() >= PROGRESS_EVERY {
            eprintln!("connecting: {connected} joined, {failed} failed");
            last_print = Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn hold(options: &Options) -> Result<(), String> {
    let pid = options.pid.ok_or("hold needs --pid of the server")?;
    let rss_before = resident_kib(pid).ok_or("cannot read the server's VmRSS")?;
    let stats = Arc::new(Stats::default());
    let (pings, _) = start_connections(options, &stats, Work::Hold);
    let connect_time = wait_joined(options, &stats).await;
    let joined = stats.connected.load(Ordering::Relaxed);
    eprintln!(
        "joined {joined} in {:.1}s ({} failed); holding {}s",
        connect_time.as_secs_f64(),
        stats.failed.load(Ordering::Relaxed),
        options.hold.as_secs()
    );
    let hold_started = Instant::now();
    let mut peak_rss = rss_before;
    while hold_started.elapsed() < options.hold {
        tokio::time::sleep(PROGRESS_EVERY).await;
        let rss = resident_kib(pid).unwrap_or(0);
        peak_rss = peak_rss.max(rss);
        eprintln!(
            "holding: {} open, {} closed by server, {} pings answered, rss {} MiB",
            joined - stats.closed.load(Ordering::Relaxed),
            stats.closed.load(Ordering::Relaxed),
            stats.pings_answered.load(Ordering::Relaxed),
            rss / 1024
        );
    }
    let rss_after = resident_kib(pid).unwrap_or(0);
    let closed = stats.closed.load(Ordering::Relaxed);
    let held = joined - closed;
    let min_pings = pings
        .iter()
        .map(|count| count.load(Ordering::Relaxed))
        .min()
        .unwrap_or(0);
    let per_connection = (rss_after.saturating_sub(rss_before) as f64) / (held.max(1) as f64);
    println!(
        "{{\"mode\":\"hold\",\"conns\":{},\"joined\":{joined},\"held\":{held},\"closed_by_server\":{closed},\
         \"failed\":{},\"connect_secs\":{:.1},\"hold_secs\":{},\"pings_answered\":{},\
         \"min_pings_per_conn\":{min_pings},\"rss_before_kib\":{rss_before},\"rss_after_kib\":{rss_after},\
         \"peak_rss_kib\":{peak_rss},\"kib_per_conn\":{per_connection:.2}}}",
        options.conns,
        stats.failed.load(Ordering::Relaxed),
        connect_time.as_secs_f64(),
        options.hold.as_secs(),
        stats.pings_answered.load(Ordering::Relaxed),
    );
    // Exiting closes every connection.
    Ok(())
}

async fn turns(options: &Options) -> Result<(), String> {
    let stats = Arc::new(Stats::default());
    let (_, latencies) = start_connections(options, &stats, Work::Turns(options.turns));
    let connect_time = wait_joined(options, &stats).await;
    let joined = stats.connected.load(Ordering::Relaxed);
    eprintln!(
        "joined {joined} in {:.1}s; running {} turns each",
        connect_time.as_secs_f64(),
        options.turns
    );
    let started = Instant::now();
    stats.go.store(true, Ordering::Release);
    let expected = joined * options.turns as u64;
    let mut last_print = Instant::now();
    loop {
        let done = stats.turns_done.load(Ordering::Relaxed);
        let lost = stats.closed.load(Ordering::Relaxed);
        if done >= expected || (lost > 0 && done + lost * options.turns as u64 >= expected) {
            break;
        }
        if last_print.elapsed() >= PROGRESS_EVERY {
            eprintln!("turns: {done}/{expected}");
            last_print = Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let done = stats.turns_done.load(Ordering::Relaxed);
    let timings = latencies.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let first_delta = first_delta_fields(&timings);
    let mut latencies: Vec<u32> = timings.iter().map(|t| t.completed_us).collect();
    latencies.sort_unstable();
    let percentile = |p: f64| -> f64 {
        if latencies.is_empty() {
            return 0.0;
        }
        let index = ((latencies.len() as f64 - 1.0) * p).round() as usize;
        f64::from(latencies[index]) / 1000.0
    };
    println!(
        "{{\"mode\":\"turns\",\"conns\":{},\"joined\":{joined},\"turns_per_conn\":{},\"turns_done\":{done},\
         \"closed_by_server\":{},\"refused\":{},\"failed\":{},\"secs\":{elapsed:.2},\"turns_per_sec\":{:.0},\
         \"p50_ms\":{:.2},\"p99_ms\":{:.2},\"max_ms\":{:.1},{first_delta}}}",
        options.conns,
        options.turns,
        stats.closed.load(Ordering::Relaxed),
        stats.refused.load(Ordering::Relaxed),
        stats.failed.load(Ordering::Relaxed),
        done as f64 / elapsed,
        percentile(0.5),
        percentile(0.99),
        percentile(1.0),
    );
    Ok(())
}

/// One raw websocket Engine.IO client.
struct Client {
    index: usize,
    server: SocketAddr,
    source: Option<IpAddr>,
    session_id: String,
    stats: Arc<Stats>,
    pings: Arc<Vec<AtomicU32>>,
    latencies: Arc<Mutex<Vec<TurnTiming>>>,
    work: Work,
    model: Option<String>,
    pause: Duration,
    offset: Duration,
}

/// What the next server frame was.
enum Frame {
    Text(Vec<u8>),
    /// A websocket ping: answered with a pong carrying the same data.
    Ping(Vec<u8>),
    Other,
    Closed,
}

impl Client {
    async fn run(&self, connecting: Arc<Semaphore>) -> Result<(), String> {
        let permit = connecting
            .acquire_owned()
            .await
            .map_err(|_| "semaphore closed")?;
        let mut stream = self.connect().await?;
        let mut buf = Vec::with_capacity(512);
        self.handshake(&mut stream, &mut buf).await?;
        send_text(&mut stream, b"40/assistant,").await?;
        // Until the namespace CONNECT reply, only the open packet and pings come.
        loop {
            match read_frame(&mut stream, &mut buf).await? {
                Frame::Text(text) if text.starts_with(b"40/assistant,") => break,
                Frame::Text(text) if text == b"2" => self.pong(&mut stream).await?,
                Frame::Text(_) | Frame::Other => {}
                Frame::Ping(data) => send_frame(&mut stream, 0xA, &data).await?,
                Frame::Closed => return Err("closed before joining".into()),
            }
        }
        drop(permit);
        self.stats.connected.fetch_add(1, Ordering::Relaxed);
        // Give the read buffer back: an idle client should cost little.
        buf = Vec::new();
        let outcome = match self.work {
            Work::Hold => self.idle(&mut stream, &mut buf).await,
            Work::Turns(n_turns) => self.run_turns(&mut stream, &mut buf, n_turns).await,
        };
        if let Err(error) = outcome {
            // Only the first few are worth reading.
            if self.stats.closed.fetch_add(1, Ordering::Relaxed) < 5 {
                eprintln!("connection {}: {error}", self.index);
            }
        }
        Ok(())
    }

    async fn connect(&self) -> Result<TcpStream, String> {
        let socket = TcpSocket::new_v4().map_err(|error| format!("socket: {error}"))?;
        if let Some(source) = self.source {
            socket
                .bind(SocketAddr::new(source, 0))
                .map_err(|error| format!("bind {source}: {error}"))?;
        }
        let stream = socket
            .connect(self.server)
            .await
            .map_err(|error| format!("connect: {error}"))?;
        stream
            .set_nodelay(true)
            .map_err(|error| format!("nodelay: {error}"))?;
        Ok(stream)
    }

    async fn handshake(&self, stream: &mut TcpStream, buf: &mut Vec<u8>) -> Result<(), String> {
        let request = format!(
            "GET /socket.io/?EIO=4&transport=websocket HTTP/1.1\r\nHost: {}\r\n\
             Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {HANDSHAKE_KEY}\r\n\
             Sec-WebSocket-Version: 13\r\n\r\n",
            self.server
        );
        stream
            .write_all(request.as_bytes())
            .await
            .map_err(|error| format!("handshake write: {error}"))?;
        loop {
            if let Some(end) = find(buf, b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&buf[..end]).into_owned();
                buf.drain(..end + 4);
                if !head.starts_with("HTTP/1.1 101") {
                    return Err(format!(
                        "not upgraded: {}",
                        head.lines().next().unwrap_or("")
                    ));
                }
                return Ok(());
            }
            read_more(stream, buf).await?;
        }
    }

    async fn pong(&self, stream: &mut TcpStream) -> Result<(), String> {
        send_text(stream, b"3").await?;
        self.stats.pings_answered.fetch_add(1, Ordering::Relaxed);
        self.pings[self.index].fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Answers pings until the server closes.
    async fn idle(&self, stream: &mut TcpStream, buf: &mut Vec<u8>) -> Result<(), String> {
        loop {
            match read_frame(stream, buf).await? {
                Frame::Text(text) if text == b"2" => {
                    self.pong(stream).await?;
                    // Between pings an idle client holds no buffer.
                    if buf.is_empty() {
                        *buf = Vec::new();
                    }
                }
                Frame::Ping(data) => send_frame(stream, 0xA, &data).await?,
                Frame::Text(_) | Frame::Other => {}
                Frame::Closed => return Err("closed by server".into()),
            }
        }
    }

    async fn run_turns(
        &self,
        stream: &mut TcpStream,
        buf: &mut Vec<u8>,
        n_turns: usize,
    ) -> Result<(), String> {
        while !self.stats.go.load(Ordering::Acquire) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let mut latencies = Vec::with_capacity(n_turns);
        tokio::time::sleep(self.offset).await;
        let schedule = tokio::time::Instant::now();
        for turn in 0..n_turns {
            if turn > 0 {
                self.paced_wait(stream, buf, paced_start(schedule, self.pause, turn))
                    .await?;
            }
            let message = turn_packet(&self.session_id, turn, self.model.as_deref());
            let started = Instant::now();
            let mut first_delta = None;
            let mut turn_started = false;
            send_text(stream, message.as_bytes()).await?;
            loop {
                match read_frame(stream, buf).await? {
                    Frame::Text(text) if text == b"2" => self.pong(stream).await?,
                    Frame::Text(text) if is_completed(&text) => break,
                    Frame::Text(text) if is_error(&text) && !turn_started => {
                        self.stats.refused.fetch_add(1, Ordering::Relaxed);
                        return Err(format!("refused: {}", String::from_utf8_lossy(&text)));
                    }
                    Frame::Text(text) if is_status(&text) => turn_started = true,
                    Frame::Text(text) if is_text_delta(&text) => {
                        first_delta.get_or_insert_with(|| started.elapsed());
                    }
                    Frame::Ping(data) => send_frame(stream, 0xA, &data).await?,
                    Frame::Text(_) | Frame::Other => {}
                    Frame::Closed => return Err("closed by server".into()),
                }
            }
            let completed = started.elapsed();
            latencies.push(TurnTiming {
                turn,
                first_delta_us: micros(first_delta.unwrap_or(completed)),
                completed_us: micros(completed),
            });
            self.stats.turns_done.fetch_add(1, Ordering::Relaxed);
        }
        self.latencies
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(latencies);
        // Stay connected (answering pings) until the tool exits.
        self.idle(stream, buf).await
    }

    /// Waits until `wake`, the next paced turn's start, still answering pings.
    async fn paced_wait(
        &self,
        stream: &mut TcpStream,
        buf: &mut Vec<u8>,
        wake: tokio::time::Instant,
    ) -> Result<(), String> {
        if self.pause.is_zero() {
            return Ok(());
        }
        loop {
            let frame = tokio::select! {
                frame = read_frame(stream, buf) => frame?,
                _ = tokio::time::sleep_until(wake) => return Ok(()),
            };
            match frame {
                Frame::Text(text) if text == b"2" => self.pong(stream).await?,
                Frame::Ping(data) => send_frame(stream, 0xA, &data).await?,
                Frame::Text(_) | Frame::Other => {}
                Frame::Closed => return Err("closed by server".into()),
            }
        }
    }
}

fn is_completed(text: &[u8]) -> bool {
    text.starts_with(b"42/assistant,[\"assistant:status\"")
        && find(text, b"\"completed\"").is_some()
}

async fn read_more(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Result<(), String> {
    let mut chunk = [0u8; 4096];
    let n = stream
        .read(&mut chunk)
        .await
        .map_err(|error| format!("read: {error}"))?;
    if n == 0 {
        return Err("eof".into());
    }
    buf.extend_from_slice(&chunk[..n]);
    Ok(())
}

/// Reads one (unmasked, unfragmented) server frame; EOF or a reset is `Closed`.
async fn read_frame(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Result<Frame, String> {
    loop {
        if let Some((header_len, payload_len)) = frame_lengths(buf) {
            if buf.len() >= header_len + payload_len {
                let opcode = buf[0] & 0x0f;
                let payload = buf[header_len..header_len + payload_len].to_vec();
                buf.drain(..header_len + payload_len);
                return Ok(match opcode {
                    0x1 => Frame::Text(payload),
                    0x8 => Frame::Closed,
                    0x9 => Frame::Ping(payload),
                    _ => Frame::Other,
                });
            }
        }
        if read_more(stream, buf).await.is_err() {
            return Ok(Frame::Closed);
        }
    }
}

fn frame_lengths(buf: &[u8]) -> Option<(usize, usize)> {
    if buf.len() < 2 {
        return None;
    }
    let masked = buf[1] & 0x80 != 0;
    let mask_len = if masked { 4 } else { 0 };
    match buf[1] & 0x7f {
        126 => {
            let bytes = buf.get(2..4)?;
            Some((
                4 + mask_len,
                usize::from(u16::from_be_bytes([bytes[0], bytes[1]])),
            ))
        }
        127 => {
            let bytes: [u8; 8] = buf.get(2..10)?.try_into().ok()?;
            Some((10 + mask_len, u64::from_be_bytes(bytes) as usize))
        }
        len => Some((2 + mask_len, usize::from(len))),
    }
}

async fn send_text(stream: &mut TcpStream, payload: &[u8]) -> Result<(), String> {
    send_frame(stream, 0x1, payload).await
}

/// Writes one masked client frame.
async fn send_frame(stream: &mut TcpStream, opcode: u8, payload: &[u8]) -> Result<(), String> {
    let mut frame = Vec::with_capacity(payload.len() + 14);
    frame.push(0x80 | opcode);
    match payload.len() {
        len @ 0..=125 => frame.push(0x80 | len as u8),
        len @ 126..=0xffff => {
            frame.push(0x80 | 126);
            frame.extend_from_slice(&(len as u16).to_be_bytes());
        }
        len => {
            frame.push(0x80 | 127);
            frame.extend_from_slice(&(len as u64).to_be_bytes());
        }
    }
    frame.extend_from_slice(&MASK);
    frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ MASK[i % 4]));
    stream
        .write_all(&frame)
        .await
        .map_err(|error| format!("write: {error}"))
}

/// `poll-turns`: one Engine.IO session on HTTP long-polling only (no
/// upgrade), `--turns` turns in sequence; a GET connection and a POST
/// connection, both keep-alive.
async fn poll_turns(options: &Options) -> Result<(), String> {
    let started_all = Instant::now();
    let sessions: Vec<_> = (0..options.conns)
        .map(|index| {
            let server = options.server;
            let session_id = format!("{}-poll{index}", options.prefix);
            let model = options.model.clone();
            let (turns, pause) = (options.turns, options.pause);
            let offset = start_offset(pause, index, options.conns);
            tokio::spawn(async move {
                tokio::time::sleep(offset).await;
                poll_session(server, &session_id, turns, model.as_deref(), pause).await
            })
        })
        .collect();
    let mut timings = Vec::with_capacity(options.conns * options.turns);
    let mut failed = 0;
    for session in sessions {
        match session
            .await
            .map_err(|error| error.to_string())
            .and_then(|r| r)
        {
            Ok(session_timings) => timings.extend(session_timings),
            Err(error) => {
                failed += 1;
                if failed <= 5 {
                    eprintln!("poll session: {error}");
                }
            }
        }
    }
    let elapsed = started_all.elapsed().as_secs_f64();
    let first_delta = first_delta_fields(&timings);
    let mut completed: Vec<u32> = timings.iter().map(|t| t.completed_us).collect();
    completed.sort_unstable();
    let pick = |p: f64| -> f64 {
        completed
            .get(((completed.len().max(1) - 1) as f64 * p).round() as usize)
            .map_or(0.0, |us| f64::from(*us) / 1000.0)
    };
    println!(
        "{{\"mode\":\"poll-turns\",\"conns\":{},\"turns_done\":{},\"failed\":{failed},\"secs\":{elapsed:.2},\
         \"p50_ms\":{:.2},\"p99_ms\":{:.2},{first_delta}}}",
        options.conns,
        timings.len(),
        pick(0.5),
        pick(0.99),
    );
    Ok(())
}

/// One session over long-polling only: joins, then its turns in sequence.
async fn poll_session(
    server: SocketAddr,
    session_id: &str,
    n_turns: usize,
    model: Option<&str>,
    pause: Duration,
) -> Result<Vec<TurnTiming>, String> {
    let mut getter = PollConnection::open(server).await?;
    let mut poster = PollConnection::open(server).await?;
    let open = getter.request("GET", "", "").await?;
    let sid = between(&open, b"\"sid\":\"", b"\"").ok_or("no sid in the open packet")?;
    let query = format!("&sid={sid}");
    poster.request("POST", &query, "40/assistant,").await?;
    loop {
        let packets = getter.request("GET", &query, "").await?;
        if find(&packets, b"40/assistant,").is_some() {
            break;
        }
    }
    let mut timings = Vec::with_capacity(n_turns);
    let schedule = tokio::time::Instant::now();
    for turn in 0..n_turns {
        if turn > 0 && !pause.is_zero() {
            // The server pings every 25 s; a pause far shorter needs no answer.
            tokio::time::sleep_until(paced_start(schedule, pause, turn)).await;
        }
        let message = turn_packet(session_id, turn, model);
        let started = Instant::now();
        poster.request("POST", &query, &message).await?;
        let mut first_delta = None;
        let mut turn_started = false;
        loop {
            let packets = getter.request("GET", &query, "").await?;
            for packet in packets.split(|&byte| byte == 0x1e) {
                if packet == b"2" {
                    poster.request("POST", &query, "3").await?;
                } else if is_text_delta(packet) {
                    first_delta.get_or_insert_with(|| started.elapsed());
                } else if is_status(packet) {
                    turn_started = true;
                } else if is_error(packet) && !turn_started {
                    return Err(format!("refused: {}", String::from_utf8_lossy(packet)));
                }
            }
            if packets.split(|&byte| byte == 0x1e).any(is_completed) {
                break;
            }
        }
        let completed = started.elapsed();
        timings.push(TurnTiming {
            turn,
            first_delta_us: micros(first_delta.unwrap_or(completed)),
            completed_us: micros(completed),
        });
    }
    Ok(timings)
}

/// The bytes between `start` and the next `end` in `haystack`, as text.
fn between(haystack: &[u8], start: &[u8], end: &[u8]) -> Option<String> {
    let from = find(haystack, start)? + start.len();
    let len = find(&haystack[from..], end)?;
    String::from_utf8(haystack[from..from + len].to_vec()).ok()
}

/// One keep-alive HTTP/1.1 connection to `/socket.io/` for polling.
struct PollConnection {
    stream: TcpStream,
    server: SocketAddr,
    buf: Vec<u8>,
}

impl PollConnection {
    async fn open(server: SocketAddr) -> Result<PollConnection, String> {
        let stream = TcpStream::connect(server)
            .await
            .map_err(|error| format!("connect: {error}"))?;
        stream
            .set_nodelay(true)
            .map_err(|error| format!("nodelay: {error}"))?;
        Ok(PollConnection {
            stream,
            server,
            buf: Vec::with_capacity(4096),
        })
    }

    /// One request on the polling transport; returns the response body.
    async fn request(&mut self, method: &str, query: &str, body: &str) -> Result<Vec<u8>, String> {
        let request = format!(
            "{method} /socket.io/?EIO=4&transport=polling{query} HTTP/1.1\r\nHost: {}\r\n\
             Content-Type: text/plain;charset=UTF-8\r\nContent-Length: {}\r\n\r\n{body}",
            self.server,
            body.len()
        );
        self.stream
            .write_all(request.as_bytes())
            .await
            .map_err(|error| format!("write: {error}"))?;
        loop {
            if let Some(end) = find(&self.buf, b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&self.buf[..end]).into_owned();
                if !head.starts_with("HTTP/1.1 200") {
                    return Err(format!("polling: {}", head.lines().next().unwrap_or("")));
                }
                let length: usize = head
                    .lines()
                    .find_map(|line| {
                        let (name, value) = line.split_once(':')?;
                        name.eq_ignore_ascii_case("content-length")
                            .then(|| value.trim().parse().ok())?
                    })
                    .ok_or("polling: no content-length")?;
                while self.buf.len() < end + 4 + length {
                    read_more(&mut self.stream, &mut self.buf).await?;
                }
                let body = self.buf[end + 4..end + 4 + length].to_vec();
                self.buf.drain(..end + 4 + length);
                return Ok(body);
            }
            read_more(&mut self.stream, &mut self.buf).await?;
        }
    }
}
