//! The Prometheus metrics of `GET /metrics`, counted into registries behind
//! a mutex each (updates are a few map operations per request or turn, far
//! below a turn's own cost), added up when scraped, and written in the text
//! exposition format by hand: the format is a few lines per family and needs
//! no crate.
//!
//! Each thread counts into a registry of its own (one of `N_SHARDS`,
//! chosen once per thread): with one registry, every request and store
//! operation on one worker took the lock the other worker had just taken,
//! and the lock's cache line crossed between cores several times a turn.
//!
//! Turns are observed at the edges (`TurnObserver`), which see every event of
//! every transport; the core stays free of metrics.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use actors::events::{FinalOutcome, FinalResponse, TurnEvent};

/// The door a turn came through.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Transport {
    Http,
    SocketIo,
    Agui,
}

impl Transport {
    fn label(self) -> &'static str {
        match self {
            Transport::Http => "http",
            Transport::SocketIo => "socketio",
            Transport::Agui => "agui",
        }
    }
}

/// Upper bounds (seconds) of the latency histograms: milliseconds for the
/// store, up to minutes for a turn with tools.
const BUCKETS: [f64; 14] = [
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 120.0,
];

#[derive(Clone, Debug, Default)]
struct Histogram {
    /// Observations at or below each bound of `BUCKETS` (not cumulative).
    counts: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

impl Histogram {
    fn add(&mut self, other: &Histogram) {
        for (mine, theirs) in self.counts.iter_mut().zip(&other.counts) {
            *mine += theirs;
        }
        self.count += other.count;
        self.sum += other.sum;
    }

    fn observe(&mut self, seconds: f64) {
        if let Some(index) = BUCKETS.iter().position(|bound| seconds <= *bound) {
            self.counts[index] += 1;
        }
        self.count += 1;
        self.sum += seconds;
    }
}

#[derive(Debug, Default)]
struct Registry {
    // Keyed by their strings first, so that counting a known label is a
    // lookup by `&str`: a request or a turn allocates nothing here.
    /// By method, then status.
    http_requests: BTreeMap<String, BTreeMap<u16, u64>>,
    /// By transport, then outcome.
    turns: BTreeMap<Transport, BTreeMap<String, u64>>,
    turn_seconds: BTreeMap<Transport, Histogram>,
    first_token_seconds: BTreeMap<Transport, Histogram>,
    provider_requests: BTreeMap<String, u64>,
    /// By provider, then error type.
    turn_errors: BTreeMap<String, BTreeMap<String, u64>>,
    /// By provider: input, output.
    tokens: BTreeMap<String, [u64; 2]>,
    cost_usd: BTreeMap<String, f64>,
    store_seconds: BTreeMap<&'static str, Histogram>,
    store_errors: BTreeMap<&'static str, u64>,
}

impl Registry {
    /// Adds `other`'s counts to these.
    fn add(&mut self, other: &Registry) {
        for (method, statuses) in &other.http_requests {
            let mine = slot(&mut self.http_requests, method);
            for (status, n) in statuses {
                *mine.entry(*status).or_default() += n;
            }
        }
        for (transport, outcomes) in &other.turns {
            let mine = self.turns.entry(*transport).or_default();
            for (outcome, n) in outcomes {
                *slot(mine, outcome) += n;
            }
        }
        add_histograms(&mut self.turn_seconds, &other.turn_seconds);
        add_histograms(&mut self.first_token_seconds, &other.first_token_seconds);
        for (provider, n) in &other.provider_requests {
            *slot(&mut self.provider_requests, provider) += n;
        }
        for (provider, errors) in &other.turn_errors {
            let mine = slot(&mut self.turn_errors, provider);
            for (error_type, n) in errors {
                *slot(mine, error_type) += n;
            }
        }
        for (provider, [input, output]) in &other.tokens {
            let mine = slot(&mut self.tokens, provider);
            mine[0] += input;
            mine[1] += output;
        }
        for (provider, cost) in &other.cost_usd {
            *slot(&mut self.cost_usd, provider) += cost;
        }
        add_histograms(&mut self.store_seconds, &other.store_seconds);
        for (operation, n) in &other.store_errors {
            *self.store_errors.entry(operation).or_default() += n;
        }
    }
}

fn add_histograms<K: Ord + Clone>(
    mine: &mut BTreeMap<K, Histogram>,
    theirs: &BTreeMap<K, Histogram>,
) {
    for (key, histogram) in theirs {
        mine.entry(key.clone()).or_default().add(histogram);
    }
}

/// Registries counted into; more than the threads that count (the workers,
/// the blocking pool's few), so that threads rarely share one.
const N_SHARDS: usize = 16;

/// A registry on a cache line of its own, so that two threads counting into
/// neighbouring registries do not contend for the line either.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Shard(Mutex<Registry>);

/// Everything `/metrics` reports that is counted, not read at scrape time.
#[derive(Debug, Default)]
pub struct Metrics {
    shards: [Shard; N_SHARDS],
    /// Sessions whose last turn here ended waiting for a host action: one
    /// set for the process, since a session's next turn may end on another
    /// thread.
    pending_sessions: Mutex<BTreeSet<String>>,
    /// The set's size, read without its lock: a turn that ends with nothing
    /// pending has nothing to remove while no session waits.
    n_pending: AtomicUsize,
    socket_connections: AtomicI64,
    /// The store's session count as of the last refresh (`refresh_stored_sessions`,
    /// on a timer): a scrape never runs a query.
    stored_sessions: Mutex<Option<u64>>,
}

/// The methods counted under their own name; any other is `other`.
const KNOWN_METHODS: [&str; 7] = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];

fn method_label(method: &str) -> &'static str {
    KNOWN_METHODS
        .iter()
        .find(|known| **known == method)
        .copied()
        .unwrap_or("other")
}

/// This thread's registry, chosen the first time it counts.
fn shard_index() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static INDEX: usize = NEXT.fetch_add(1, Ordering::Relaxed) % N_SHARDS;
    }
    INDEX.with(|index| *index)
}

/// A panic while holding one of these locks cannot leave the counts half
/// updated in a way that matters: keep counting.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// What `/metrics` reads from the runtime when it is scraped.
#[derive(Clone, Copy, Debug)]
pub struct Snapshot {
    pub live_actors: usize,
    /// `None` when the store cannot count (or is unreachable).
    pub stored_sessions: Option<u64>,
    pub store_reachable: bool,
}

impl Metrics {
    /// Counts into this thread's registry.
    fn with<T>(&self, update: impl FnOnce(&mut Registry) -> T) -> T {
        update(&mut lock(&self.shards[shard_index()].0))
    }

    /// Records whether `session`'s last turn ended waiting for a host action.
    fn set_pending(&self, session: &str, pending: bool) {
        if !pending && self.n_pending.load(Ordering::Acquire) == 0 {
            return;
        }
        let mut sessions = lock(&self.pending_sessions);
        if !pending {
            sessions.remove(session);
        } else if !sessions.contains(session) {
            sessions.insert(session.to_string());
        }
        self.n_pending.store(sessions.len(), Ordering::Release);
    }

    /// Counts a reply. The method label is one of a closed set, so invented
    /// methods cannot grow the number of series.
    pub fn count_http_request(&self, method: &str, status: u16) {
        let method = method_label(method);
        self.with(|registry| {
            *slot(&mut registry.http_requests, method)
                .entry(status)
                .or_default() += 1;
        });
    }

    /// Records the store's session count (`None`: the store could not count).
    pub fn set_stored_sessions(&self, count: Option<u64>) {
        *lock(&self.stored_sessions) = count;
    }

    /// The session count of the last refresh.
    pub fn stored_sessions(&self) -> Option<u64> {
        *lock(&self.stored_sessions)
    }

    pub fn socket_connected(&self) {
        self.socket_connections.fetch_add(1, Ordering::Relaxed);
    }

    pub fn socket_disconnected(&self) {
        self.socket_connections.fetch_sub(1, Ordering::Relaxed);
    }

    pub fn session_deleted(&self, session_id: &str) {
        self.set_pending(session_id, false);
    }

    pub fn observe_store(&self, operation: &'static str, elapsed: Duration, ok: bool) {
        self.with(|registry| {
            registry
                .store_seconds
                .entry(operation)
                .or_default()
                .observe(elapsed.as_secs_f64());
            if !ok {
                *registry.store_errors.entry(operation).or_default() += 1;
            }
        });
    }

    fn turn_ended(
        &self,
        transport: Transport,
        final_response: &FinalResponse,
        elapsed: Duration,
        first_token: Option<Duration>,
    ) {
        let provider = final_response
            .model
            .split_once(':')
            .map(|(provider, _)| provider)
            .unwrap_or(&final_response.model);
        let outcome = match (
            &final_response.error_type,
            &final_response.pending_tool_call,
        ) {
            (Some(error_type), _) => error_type.as_str(),
            (None, Some(_)) => "host_action",
            (None, None) => "completed",
        };
        let usage = &final_response.usage;
        self.with(|registry| {
            *slot(registry.turns.entry(transport).or_default(), outcome) += 1;
            registry
                .turn_seconds
                .entry(transport)
                .or_default()
                .observe(elapsed.as_secs_f64());
            if let Some(first_token) = first_token {
                registry
                    .first_token_seconds
                    .entry(transport)
                    .or_default()
                    .observe(first_token.as_secs_f64());
            }
            *slot(&mut registry.provider_requests, provider) += u64::from(usage.requests);
            if let Some(error_type) = &final_response.error_type {
                *slot(slot(&mut registry.turn_errors, provider), error_type) += 1;
            }
            let tokens = slot(&mut registry.tokens, provider);
            tokens[0] += usage.input_tokens;
            tokens[1] += usage.output_tokens;
            if let Some(cost) = usage.cost_usd {
                *slot(&mut registry.cost_usd, provider) += cost;
            }
        });
        self.set_pending(
            final_response.session_id.as_str(),
            final_response.pending_tool_call.is_some(),
        );
    }

    /// The Prometheus text exposition (version 0.0.4), of every thread's
    /// counts added up.
    pub fn render(&self, snapshot: Snapshot) -> String {
        let mut total = Registry::default();
        for shard in &self.shards {
            total.add(&lock(&shard.0));
        }
        let connections = self.socket_connections.load(Ordering::Relaxed);
        let pending = lock(&self.pending_sessions).len();
        render(&total, snapshot, connections, pending)
    }
}

fn render(registry: &Registry, snapshot: Snapshot, connections: i64, pending: usize) -> String {
    let mut out = String::new();
    family(
        &mut out,
        "assistant_http_requests_total",
        "counter",
        "HTTP requests by method and status.",
    );
    for (method, statuses) in &registry.http_requests {
        for (status, n) in statuses {
            sample(
                &mut out,
                "assistant_http_requests_total",
                &[("method", method), ("status", &status.to_string())],
                *n as f64,
            );
        }
    }
    family(
        &mut out,
        "assistant_turns_total",
        "counter",
        "Turns that ended, by transport and outcome (completed, host_action, or the error_type).",
    );
    for (transport, outcomes) in &registry.turns {
        for (outcome, n) in outcomes {
            sample(
                &mut out,
                "assistant_turns_total",
                &[("transport", transport.label()), ("outcome", outcome)],
                *n as f64,
            );
        }
    }
    histogram_family(
        &mut out,
        "assistant_turn_duration_seconds",
        "From a turn's acceptance to its final response.",
        &registry.turn_seconds,
    );
    histogram_family(
        &mut out,
        "assistant_time_to_first_token_seconds",
        "From a streamed turn's acceptance to its first text or thinking delta.",
        &registry.first_token_seconds,
    );
    family(
        &mut out,
        "assistant_live_session_actors",
        "gauge",
        "Session actors in memory now.",
    );
    sample(
        &mut out,
        "assistant_live_session_actors",
        &[],
        snapshot.live_actors as f64,
    );
    // The family is always declared; its sample only once the store has
    // been counted (the count runs on a timer).
    family(
        &mut out,
        "assistant_stored_sessions",
        "gauge",
        "Sessions in the store.",
    );
    if let Some(stored) = snapshot.stored_sessions {
        sample(&mut out, "assistant_stored_sessions", &[], stored as f64);
    }
    family(
        &mut out,
        "assistant_pending_host_actions",
        "gauge",
        "Sessions whose last turn in this process ended waiting for a host action.",
    );
    sample(
        &mut out,
        "assistant_pending_host_actions",
        &[],
        pending as f64,
    );
    family(
        &mut out,
        "assistant_socketio_connections",
        "gauge",
        "Sockets connected to the /assistant namespace.",
    );
    sample(
        &mut out,
        "assistant_socketio_connections",
        &[],
        connections as f64,
    );
    family(
        &mut out,
        "assistant_provider_requests_total",
        "counter",
        "Model requests sent, by provider.",
    );
    for (provider, n) in &registry.provider_requests {
        sample(
            &mut out,
            "assistant_provider_requests_total",
            &[("provider", provider)],
            *n as f64,
        );
    }
    family(
        &mut out,
        "assistant_turn_errors_total",
        "counter",
        "Turns that ended in error, by provider and error_type.",
    );
    for (provider, errors) in &registry.turn_errors {
        for (error_type, n) in errors {
            sample(
                &mut out,
                "assistant_turn_errors_total",
                &[("provider", provider), ("error_type", error_type)],
                *n as f64,
            );
        }
    }
    family(
        &mut out,
        "assistant_tokens_total",
        "counter",
        "Model tokens, by provider and kind (input, output).",
    );
    for (provider, counts) in &registry.tokens {
        for (kind, n) in ["input", "output"].into_iter().zip(counts) {
            sample(
                &mut out,
                "assistant_tokens_total",
                &[("provider", provider), ("kind", kind)],
                *n as f64,
            );
        }
    }
    family(
        &mut out,
        "assistant_cost_usd_total",
        "counter",
        "Model cost in US dollars, for models with a known price.",
    );
    for (provider, cost) in &registry.cost_usd {
        sample(
            &mut out,
            "assistant_cost_usd_total",
            &[("provider", provider)],
            *cost,
        );
    }
    histogram_family(
        &mut out,
        "assistant_store_operation_seconds",
        "Store operations, by operation.",
        &registry.store_seconds,
    );
    family(
        &mut out,
        "assistant_store_errors_total",
        "counter",
        "Store operations that failed, by operation.",
    );
    for (operation, n) in &registry.store_errors {
        sample(
            &mut out,
            "assistant_store_errors_total",
            &[("operation", operation)],
            *n as f64,
        );
    }
    family(
        &mut out,
        "assistant_store_reachable",
        "gauge",
        "1 when the store answered its ping at this scrape.",
    );
    sample(
        &mut out,
        "assistant_store_reachable",
        &[],
        if snapshot.store_reachable { 1.0 } else { 0.0 },
    );
    out
}

/// The value of `key`, its key allocated only the first time it is counted.
fn slot<'m, V: Default>(map: &'m mut BTreeMap<String, V>, key: &str) -> &'m mut V {
    if !map.contains_key(key) {
        map.insert(key.to_string(), V::default());
    }
    map.get_mut(key).expect("inserted above when missing")
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// Label values are escaped as the format requires (`\`, `"`, newline).
fn sample(out: &mut String, name: &str, labels: &[(&str, &str)], value: f64) {
    out.push_str(name);
    if !labels.is_empty() {
        out.push('{');
        for (index, (key, value)) in labels.iter().enumerate() {
            if index > 0 {
                out.push(',');
            }
            let escaped = value
                .replace('\\', "\\\\")
                .replace('"', "\\\"")
                .replace('\n', "\\n");
            let _ = write!(out, "{key}=\"{escaped}\"");
        }
        out.push('}');
    }
    let _ = writeln!(out, " {value}");
}

trait HistogramLabel {
    fn label_pair(&self) -> (&'static str, &str);
}

impl HistogramLabel for Transport {
    fn label_pair(&self) -> (&'static str, &str) {
        ("transport", self.label())
    }
}

impl HistogramLabel for &'static str {
    fn label_pair(&self) -> (&'static str, &str) {
        ("operation", self)
    }
}

fn histogram_family<K: HistogramLabel>(
    out: &mut String,
    name: &str,
    help: &str,
    histograms: &BTreeMap<K, Histogram>,
) {
    family(out, name, "histogram", help);
    for (key, histogram) in histograms {
        let (label, value) = key.label_pair();
        let mut cumulative = 0;
        for (bound, n) in BUCKETS.iter().zip(histogram.counts) {
            cumulative += n;
            sample(
                out,
                &format!("{name}_bucket"),
                &[(label, value), ("le", &bound.to_string())],
                cumulative as f64,
            );
        }
        sample(
            out,
            &format!("{name}_bucket"),
            &[(label, value), ("le", "+Inf")],
            histogram.count as f64,
        );
        sample(
            out,
            &format!("{name}_sum"),
            &[(label, value)],
            histogram.sum,
        );
        sample(
            out,
            &format!("{name}_count"),
            &[(label, value)],
            histogram.count as f64,
        );
    }
}

/// Follows one turn's events at an edge: when it was accepted, when its first
/// token came, and its final response, which it reports to the metrics.
#[derive(Debug)]
pub struct TurnObserver {
    transport: Transport,
    started: Instant,
    first_token: Option<Duration>,
}

impl TurnObserver {
    pub fn start(transport: Transport) -> TurnObserver {
        TurnObserver {
            transport,
            started: Instant::now(),
            first_token: None,
        }
    }

    /// Records a turn whose events were dropped at the sink (a final-only
    /// sink), from its final response and the time of its first delta.
    pub fn finish(self, metrics: &Metrics, outcome: &FinalOutcome) {
        let first_token = outcome
            .first_delta
            .map(|at| at.saturating_duration_since(self.started));
        metrics.turn_ended(
            self.transport,
            &outcome.response,
            self.started.elapsed(),
            first_token,
        );
    }

    pub fn observe(&mut self, metrics: &Metrics, event: &TurnEvent) {
        match event {
            TurnEvent::TextDelta(_) | TurnEvent::ThinkingDelta(_) if self.first_token.is_none() => {
                self.first_token = Some(self.started.elapsed());
            }
            TurnEvent::FinalResponse(final_response) => {
                metrics.turn_ended(
                    self.transport,
                    final_response,
                    self.started.elapsed(),
                    self.first_token,
                );
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_are_cumulative_and_labels_escaped() {
        let metrics = Metrics::default();
        metrics.observe_store("load", Duration::from_millis(3), true);
        metrics.observe_store("load", Duration::from_secs(500), false);
        metrics.count_http_request("GET", 200);
        let text = metrics.render(Snapshot {
            live_actors: 2,
            stored_sessions: Some(5),
            store_reachable: true,
        });
        assert!(text.contains(
            "assistant_store_operation_seconds_bucket{operation=\"load\",le=\"0.001\"} 0\n"
        ));
        assert!(text.contains(
            "assistant_store_operation_seconds_bucket{operation=\"load\",le=\"0.005\"} 1\n"
        ));
        assert!(text.contains(
            "assistant_store_operation_seconds_bucket{operation=\"load\",le=\"+Inf\"} 2\n"
        ));
        assert!(text.contains("assistant_store_operation_seconds_count{operation=\"load\"} 2\n"));
        assert!(text.contains("assistant_store_errors_total{operation=\"load\"} 1\n"));
        assert!(text.contains("assistant_http_requests_total{method=\"GET\",status=\"200\"} 1\n"));
        assert!(text.contains("assistant_live_session_actors 2\n"));
        assert!(text.contains("assistant_stored_sessions 5\n"));
        let mut out = String::new();
        sample(&mut out, "x", &[("a", "q\"\\\n")], 1.0);
        assert_eq!(out, "x{a=\"q\\\"\\\\\\n\"} 1\n");
    }

    fn scrape(metrics: &Metrics) -> String {
        metrics.render(Snapshot {
            live_actors: 0,
            stored_sessions: None,
            store_reachable: true,
        })
    }

    #[test]
    fn counts_made_on_many_threads_are_added_up() {
        let metrics = Metrics::default();
        std::thread::scope(|scope| {
            for _ in 0..N_SHARDS + 3 {
                scope.spawn(|| {
                    metrics.count_http_request("POST", 200);
                    metrics.observe_store("load", Duration::from_millis(3), true);
                });
            }
        });
        metrics.count_http_request("POST", 200);
        let text = scrape(&metrics);
        let n = N_SHARDS + 4;
        assert!(
            text.contains(&format!(
                "assistant_http_requests_total{{method=\"POST\",status=\"200\"}} {n}\n"
            )),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "assistant_store_operation_seconds_count{{operation=\"load\"}} {}\n",
                n - 1
            )),
            "{text}"
        );
    }

    #[test]
    fn invented_methods_share_one_label() {
        let metrics = Metrics::default();
        for index in 0..50 {
            metrics.count_http_request(&format!("INVENTED{index}"), 405);
        }
        metrics.count_http_request("get", 405);
        let text = scrape(&metrics);
        assert!(
            text.contains("assistant_http_requests_total{method=\"other\",status=\"405\"} 51\n"),
            "{text}"
        );
        assert!(!text.contains("INVENTED"), "{text}");
    }

    #[test]
    fn a_session_pending_on_one_thread_is_cleared_from_another() {
        let metrics = Metrics::default();
        std::thread::scope(|scope| {
            scope.spawn(|| metrics.set_pending("s1", true));
        });
        metrics.set_pending("s2", true);
        assert!(scrape(&metrics).contains("assistant_pending_host_actions 2\n"));
        std::thread::scope(|scope| {
            scope.spawn(|| metrics.set_pending("s1", false));
        });
        metrics.session_deleted("s2");
        assert!(scrape(&metrics).contains("assistant_pending_host_actions 0\n"));
        assert_eq!(metrics.n_pending.load(Ordering::Relaxed), 0);
    }
}
