//! The Prometheus metrics of `GET /metrics`, kept in one registry behind a
//! mutex (updates are a few map operations per request or turn, far below a
//! turn's own cost) and written in the text exposition format by hand: the
//! format is a few lines per family and needs no crate.
//!
//! Turns are observed at the edges (`TurnObserver`), which see every event of
//! every transport; the core stays free of metrics.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;
use std::sync::atomic::{AtomicI64, Ordering};
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
    /// Sessions whose last turn here ended waiting for a host action.
    pending_sessions: BTreeSet<String>,
    store_seconds: BTreeMap<&'static str, Histogram>,
    store_errors: BTreeMap<&'static str, u64>,
}

/// Everything `/metrics` reports that is counted, not read at scrape time.
#[derive(Debug, Default)]
pub struct Metrics {
    registry: Mutex<Registry>,
    socket_connections: AtomicI64,
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
    fn with<T>(&self, update: impl FnOnce(&mut Registry) -> T) -> T {
        // A panic while holding the lock cannot leave a registry half
        // updated in a way that matters: keep counting.
        let mut registry = match self.registry.lock() {
            Ok(registry) => registry,
            Err(poisoned) => poisoned.into_inner(),
        };
        update(&mut registry)
    }

    pub fn count_http_request(&self, method: &str, status: u16) {
        self.with(|registry| {
            *slot(&mut registry.http_requests, method)
                .entry(status)
                .or_default() += 1;
        });
    }

    pub fn socket_connected(&self) {
        self.socket_connections.fetch_add(1, Ordering::Relaxed);
    }

    pub fn socket_disconnected(&self) {
        self.socket_connections.fetch_sub(1, Ordering::Relaxed);
    }

    pub fn session_deleted(&self, session_id: &str) {
        self.with(|registry| registry.pending_sessions.remove(session_id));
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
            let session = &final_response.session_id;
            if final_response.pending_tool_call.is_none() {
                registry.pending_sessions.remove(session);
            } else if !registry.pending_sessions.contains(session) {
                registry.pending_sessions.insert(session.clone());
            }
        });
    }

    /// The Prometheus text exposition (version 0.0.4). Formatting a few
    /// kilobytes under the lock is cheaper than copying the registry.
    pub fn render(&self, snapshot: Snapshot) -> String {
        let connections = self.socket_connections.load(Ordering::Relaxed);
        self.with(|registry| render(registry, snapshot, connections))
    }
}

fn render(registry: &Registry, snapshot: Snapshot, connections: i64) -> String {
    let mut out = String::new();
    let pending = registry.pending_sessions.len();
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
    if let Some(stored) = snapshot.stored_sessions {
        family(
            &mut out,
            "assistant_stored_sessions",
            "gauge",
            "Sessions in the store.",
        );
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
}
