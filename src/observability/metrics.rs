//! The Prometheus metrics of `GET /metrics`, on `prometheus-client`: each
//! metric is one line of `families!` (its field, type, name and help),
//! which declares the field, registers it and so puts it in the exposition
//! (the Prometheus text format, version 0.0.4). Labels are typed structs;
//! the labels counted on every request or turn borrow or share their
//! strings, so counting a known label allocates nothing.
//!
//! Turns are observed at the edges (`TurnObserver`), which see every event of
//! every transport; the core stays free of metrics.

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use actors::events::{FinalOutcome, FinalResponse, TurnEvent};
use prometheus_client::encoding::{
    EncodeLabelSet, EncodeLabelValue, EncodeMetric, LabelValueEncoder, MetricEncoder,
};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

/// The door a turn came through.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Transport {
    Http,
    SocketIo,
    Agui,
}

impl EncodeLabelValue for Transport {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        let label = match self {
            Transport::Http => "http",
            Transport::SocketIo => "socketio",
            Transport::Agui => "agui",
        };
        EncodeLabelValue::encode(&label, encoder)
    }
}

/// Upper bounds (seconds) of the latency histograms: milliseconds for the
/// store, up to minutes for a turn with tools.
const BUCKETS: [f64; 14] = [
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 120.0,
];

fn latency_histogram() -> Histogram {
    Histogram::new(BUCKETS)
}

/// A histogram per label set, made on first use.
type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

/// A provider's name: the part of the turn's model id (`provider:name`)
/// before its colon. The label shares the id's string instead of copying it.
#[derive(Clone, Debug)]
struct Provider {
    model: Arc<str>,
    /// The length of the provider part, found once per turn.
    len: usize,
}

impl Provider {
    fn of(model: &Arc<str>) -> Provider {
        Provider {
            model: model.clone(),
            len: model.find(':').unwrap_or(model.len()),
        }
    }

    fn as_str(&self) -> &str {
        &self.model[..self.len]
    }
}

impl PartialEq for Provider {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Provider {}

/// A cheap digest of a label value for the families' hash maps: its
/// length and first eight bytes. Equal strings digest equally, which is all
/// a `Hash` must give; the label values of one family are few and differ
/// early, and a collision costs only a string comparison. Each label set
/// hashes as one `u64`, which the maps' SipHash reads in one block: hashing
/// whole strings field by field was most of what counting a turn cost.
fn digest(value: &str) -> u64 {
    let mut head = [0u8; 8];
    let n = value.len().min(8);
    head[..n].copy_from_slice(&value.as_bytes()[..n]);
    u64::from_le_bytes(head) ^ (value.len() as u64).rotate_left(56)
}

/// Hashes a label set as the one `u64` its fields digest to.
macro_rules! hash_as_u64 {
    ($($labels:ident => |$this:ident| $digest:expr;)*) => {
        $(impl Hash for $labels {
            fn hash<H: Hasher>(&self, state: &mut H) {
                let $this = self;
                state.write_u64($digest);
            }
        })*
    };
}

hash_as_u64! {
    HttpLabels => |l| digest(l.method) ^ u64::from(l.status).rotate_left(40);
    TurnLabels => |l| digest(&l.outcome) ^ l.transport as u64;
    TransportLabels => |l| l.transport as u64;
    ProviderLabels => |l| digest(l.provider.as_str());
    ErrorLabels => |l| digest(l.provider.as_str()) ^ digest(&l.error_type).rotate_left(1);
    TokenLabels => |l| digest(l.provider.as_str()) ^ digest(l.kind).rotate_left(1);
    StoreLabels => |l| digest(l.operation);
}

impl EncodeLabelValue for Provider {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        EncodeLabelValue::encode(&self.as_str(), encoder)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, EncodeLabelSet)]
struct HttpLabels {
    method: &'static str,
    status: u16,
}

#[derive(Clone, Debug, PartialEq, Eq, EncodeLabelSet)]
struct TurnLabels {
    transport: Transport,
    /// `completed`, `host_action`, or the error type.
    outcome: Cow<'static, str>,
}

#[derive(Clone, Debug, PartialEq, Eq, EncodeLabelSet)]
struct TransportLabels {
    transport: Transport,
}

#[derive(Clone, Debug, PartialEq, Eq, EncodeLabelSet)]
struct ProviderLabels {
    provider: Provider,
}

#[derive(Clone, Debug, PartialEq, Eq, EncodeLabelSet)]
struct ErrorLabels {
    provider: Provider,
    error_type: String,
}

#[derive(Clone, Debug, PartialEq, Eq, EncodeLabelSet)]
struct TokenLabels {
    provider: Provider,
    /// `input` or `output`.
    kind: &'static str,
}

#[derive(Clone, Debug, PartialEq, Eq, EncodeLabelSet)]
struct StoreLabels {
    operation: &'static str,
}

/// A gauge whose sample is written only once it has a value: a family of
/// at most one member, with no labels.
type OptionalGauge = Family<[(&'static str, &'static str); 0], Gauge>;

/// A metric whose `# HELP` and `# TYPE` lines are written even before it
/// has a sample (the registry skips empty families otherwise), so that a
/// scraper sees every family from the first scrape on.
#[derive(Debug)]
struct Declared<M>(M);

impl<M: EncodeMetric> EncodeMetric for Declared<M> {
    fn encode(&self, encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        self.0.encode(encoder)
    }

    fn metric_type(&self) -> MetricType {
        self.0.metric_type()
    }

    fn is_empty(&self) -> bool {
        false
    }
}

/// Declares the metric families: each line is a field of `Families`, its
/// initial value, its name and its help (without the final full stop,
/// which the registry adds; a counter's name without `_total`, which the
/// encoder adds). The order of the lines is the order of the exposition.
macro_rules! families {
    ($($field:ident: $ty:ty = $init:expr, $name:literal, $help:literal;)*) => {
        #[derive(Debug)]
        struct Families {
            $($field: $ty,)*
        }

        impl Families {
            fn register() -> (Families, Registry) {
                let families = Families { $($field: $init,)* };
                let mut registry = Registry::default();
                $(registry.register($name, $help, Declared(families.$field.clone()));)*
                (families, registry)
            }
        }
    };
}

families! {
    http_requests: Family<HttpLabels, Counter> = Family::default(),
        "assistant_http_requests", "HTTP requests by method and status";
    turns: Family<TurnLabels, Counter> = Family::default(),
        "assistant_turns",
        "Turns that ended, by transport and outcome (completed, host_action, or the error_type)";
    turn_seconds: Histograms<TransportLabels> = Family::new_with_constructor(latency_histogram),
        "assistant_turn_duration_seconds", "From a turn's acceptance to its final response";
    first_token_seconds: Histograms<TransportLabels> = Family::new_with_constructor(latency_histogram),
        "assistant_time_to_first_token_seconds",
        "From a streamed turn's acceptance to its first text or thinking delta";
    live_actors: Gauge = Gauge::default(),
        "assistant_live_session_actors", "Session actors in memory now";
    stored_sessions: OptionalGauge = Family::default(),
        "assistant_stored_sessions", "Sessions in the store";
    pending_host_actions: Gauge = Gauge::default(),
        "assistant_pending_host_actions",
        "Sessions whose last turn in this process ended waiting for a host action";
    socket_connections: Gauge = Gauge::default(),
        "assistant_socketio_connections", "Sockets connected to the /assistant namespace";
    provider_requests: Family<ProviderLabels, Counter> = Family::default(),
        "assistant_provider_requests", "Model requests sent, by provider";
    turn_errors: Family<ErrorLabels, Counter> = Family::default(),
        "assistant_turn_errors", "Turns that ended in error, by provider and error_type";
    tokens: Family<TokenLabels, Counter> = Family::default(),
        "assistant_tokens", "Model tokens, by provider and kind (input, output)";
    cost_usd: Family<ProviderLabels, Counter<f64, AtomicU64>> = Family::default(),
        "assistant_cost_usd", "Model cost in US dollars, for models with a known price";
    store_seconds: Histograms<StoreLabels> = Family::new_with_constructor(latency_histogram),
        "assistant_store_operation_seconds", "Store operations, by operation";
    store_errors: Family<StoreLabels, Counter> = Family::default(),
        "assistant_store_errors", "Store operations that failed, by operation";
    store_reachable: Gauge = Gauge::default(),
        "assistant_store_reachable", "1 when the store answered its ping at this scrape";
}

/// Everything `/metrics` reports.
#[derive(Debug)]
pub struct Metrics {
    families: Families,
    registry: Registry,
    /// Sessions whose last turn here ended waiting for a host action: one
    /// set for the process, since a session's next turn may end on another
    /// thread. The gauge is its size.
    pending_sessions: Mutex<BTreeSet<String>>,
    /// The set's size, read without its lock: a turn that ends with nothing
    /// pending has nothing to remove while no session waits.
    n_pending: AtomicUsize,
    /// The store's session count as of the last refresh (`refresh_stored_sessions`,
    /// on a timer): a scrape never runs a query. -1: not counted.
    stored_sessions: AtomicI64,
    handles: Handles,
}

/// The members of the families that nearly every request or turn counts,
/// each taken from its family on first use and kept: counting through a
/// kept member skips the family's lock and the hashing of its labels (nine
/// look-ups a turn were most of what counting one cost). Taken on first use,
/// so the exposition still shows only the label sets that were counted.
#[derive(Debug, Default)]
struct Handles {
    /// By `Transport`, then `completed` and `host_action`.
    turns: [[OnceLock<Counter>; 2]; 3],
    turn_seconds: [OnceLock<Histogram>; 3],
    first_token_seconds: [OnceLock<Histogram>; 3],
    /// Status 200 by method label (`KNOWN_METHODS`, then `other`).
    http_ok: [OnceLock<Counter>; KNOWN_METHODS.len() + 1],
    /// By `STORE_OPERATIONS_KEPT`.
    store_seconds: [OnceLock<Histogram>; STORE_OPERATIONS_KEPT.len()],
    /// The first provider a turn ended with (nearly always the only one).
    provider: OnceLock<ProviderHandles>,
}

/// The store operations of every turn, whose histograms are kept.
const STORE_OPERATIONS_KEPT: [&str; 3] = ["save_messages", "save_session", "load"];

#[derive(Debug)]
struct ProviderHandles {
    provider: Provider,
    requests: Counter,
    input_tokens: Counter,
    output_tokens: Counter,
}

/// The kept member of `family` for `labels`, taken from it on first use.
fn kept<'a, L, M, C>(slot: &'a OnceLock<M>, family: &Family<L, M, C>, labels: &L) -> &'a M
where
    L: Clone + Hash + Eq,
    M: Clone,
    C: prometheus_client::metrics::family::MetricConstructor<M>,
{
    slot.get_or_init(|| family.get_or_create(labels).clone())
}

impl Default for Metrics {
    fn default() -> Metrics {
        let (families, registry) = Families::register();
        Metrics {
            families,
            registry,
            pending_sessions: Mutex::default(),
            n_pending: AtomicUsize::new(0),
            stored_sessions: AtomicI64::new(-1),
            handles: Handles::default(),
        }
    }
}

/// The methods counted under their own name; any other is `other`.
const KNOWN_METHODS: [&str; 7] = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];

/// The method's place in `KNOWN_METHODS`; `None`: counted as `other`.
fn method_index(method: &str) -> Option<usize> {
    KNOWN_METHODS.iter().position(|known| *known == method)
}

/// What `/metrics` reads from the runtime when it is scraped.
#[derive(Clone, Copy, Debug)]
pub struct Snapshot {
    pub live_actors: usize,
    /// `None` when the store cannot count (or is unreachable).
    pub stored_sessions: Option<u64>,
    pub store_reachable: bool,
}

fn gauge_value(n: impl TryInto<i64>) -> i64 {
    n.try_into().unwrap_or(i64::MAX)
}

impl Metrics {
    /// Records whether `session`'s last turn ended waiting for a host action.
    fn set_pending(&self, session: &str, pending: bool) {
        if !pending && self.n_pending.load(Ordering::Acquire) == 0 {
            return;
        }
        // A panic while holding the lock cannot leave the set half updated.
        let mut sessions = self
            .pending_sessions
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if !pending {
            sessions.remove(session);
        } else if !sessions.contains(session) {
            sessions.insert(session.to_string());
        }
        self.n_pending.store(sessions.len(), Ordering::Release);
        self.families
            .pending_host_actions
            .set(gauge_value(sessions.len()));
    }

    /// Counts a reply. The method label is one of a closed set, so invented
    /// methods cannot grow the number of series.
    pub fn count_http_request(&self, method: &str, status: u16) {
        let index = method_index(method);
        let labels = HttpLabels {
            method: index.map_or("other", |index| KNOWN_METHODS[index]),
            status,
        };
        let family = &self.families.http_requests;
        if status != 200 {
            family.get_or_create(&labels).inc();
            return;
        }
        let slot = &self.handles.http_ok[index.unwrap_or(KNOWN_METHODS.len())];
        kept(slot, family, &labels).inc();
    }

    /// Records the store's session count (`None`: the store could not count).
    pub fn set_stored_sessions(&self, count: Option<u64>) {
        let value = count.map_or(-1, gauge_value);
        self.stored_sessions.store(value, Ordering::Relaxed);
    }

    /// The session count of the last refresh.
    pub fn stored_sessions(&self) -> Option<u64> {
        u64::try_from(self.stored_sessions.load(Ordering::Relaxed)).ok()
    }

    pub fn socket_connected(&self) {
        self.families.socket_connections.inc();
    }

    pub fn socket_disconnected(&self) {
        self.families.socket_connections.dec();
    }

    pub fn session_deleted(&self, session_id: &str) {
        self.set_pending(session_id, false);
    }

    pub fn observe_store(&self, operation: &'static str, elapsed: Duration, ok: bool) {
        let labels = StoreLabels { operation };
        let family = &self.families.store_seconds;
        match STORE_OPERATIONS_KEPT
            .iter()
            .position(|kept| *kept == operation)
        {
            Some(index) => kept(&self.handles.store_seconds[index], family, &labels)
                .observe(elapsed.as_secs_f64()),
            None => family.get_or_create(&labels).observe(elapsed.as_secs_f64()),
        }
        if !ok {
            self.families.store_errors.get_or_create(&labels).inc();
        }
    }

    fn turn_ended(
        &self,
        transport: Transport,
        final_response: &FinalResponse,
        elapsed: Duration,
        first_token: Option<Duration>,
    ) {
        let (families, handles) = (&self.families, &self.handles);
        let outcome = match (
            &final_response.error_type,
            &final_response.pending_tool_call,
        ) {
            (Some(error_type), _) => Err(error_type.clone()),
            (None, Some(_)) => Ok(1),
            (None, None) => Ok(0),
        };
        let turns = &families.turns;
        match outcome {
            Ok(kind) => {
                let outcome = Cow::Borrowed(["completed", "host_action"][kind]);
                let labels = TurnLabels { transport, outcome };
                kept(&handles.turns[transport as usize][kind], turns, &labels).inc();
            }
            Err(error_type) => {
                let outcome = Cow::Owned(error_type);
                turns
                    .get_or_create(&TurnLabels { transport, outcome })
                    .inc();
            }
        }
        let by_transport = TransportLabels { transport };
        let slot = &handles.turn_seconds[transport as usize];
        kept(slot, &families.turn_seconds, &by_transport).observe(elapsed.as_secs_f64());
        if let Some(first_token) = first_token {
            let slot = &handles.first_token_seconds[transport as usize];
            kept(slot, &families.first_token_seconds, &by_transport)
                .observe(first_token.as_secs_f64());
        }
        let provider = Provider::of(&final_response.model);
        self.count_usage(&provider, &final_response.usage);
        if let Some(error_type) = &final_response.error_type {
            families
                .turn_errors
                .get_or_create(&ErrorLabels {
                    provider,
                    error_type: error_type.clone(),
                })
                .inc();
        }
        self.set_pending(
            final_response.session_id.as_str(),
            final_response.pending_tool_call.is_some(),
        );
    }

    /// Counts a turn's model requests, tokens and cost under its provider.
    fn count_usage(&self, provider: &Provider, usage: &actors::conversation::Usage) {
        let families = &self.families;
        let by_provider = ProviderLabels {
            provider: provider.clone(),
        };
        let kept = self.handles.provider.get_or_init(|| ProviderHandles {
            provider: provider.clone(),
            requests: families
                .provider_requests
                .get_or_create(&by_provider)
                .clone(),
            input_tokens: self.token_counter(provider, "input"),
            output_tokens: self.token_counter(provider, "output"),
        });
        if kept.provider == *provider {
            kept.requests.inc_by(u64::from(usage.requests));
            kept.input_tokens.inc_by(usage.input_tokens);
            kept.output_tokens.inc_by(usage.output_tokens);
        } else {
            families
                .provider_requests
                .get_or_create(&by_provider)
                .inc_by(u64::from(usage.requests));
            self.token_counter(provider, "input")
                .inc_by(usage.input_tokens);
            self.token_counter(provider, "output")
                .inc_by(usage.output_tokens);
        }
        if let Some(cost) = usage.cost_usd {
            families.cost_usd.get_or_create(&by_provider).inc_by(cost);
        }
    }

    fn token_counter(&self, provider: &Provider, kind: &'static str) -> Counter {
        let labels = TokenLabels {
            provider: provider.clone(),
            kind,
        };
        self.families.tokens.get_or_create(&labels).clone()
    }

    /// The Prometheus text exposition (version 0.0.4), with the figures
    /// read at scrape time from `snapshot`.
    pub fn render(&self, snapshot: Snapshot) -> String {
        let families = &self.families;
        families.live_actors.set(gauge_value(snapshot.live_actors));
        match snapshot.stored_sessions {
            Some(stored) => {
                families
                    .stored_sessions
                    .get_or_create(&[])
                    .set(gauge_value(stored));
            }
            None => families.stored_sessions.clear(),
        }
        families
            .store_reachable
            .set(i64::from(snapshot.store_reachable));
        let mut out = String::new();
        // Writing to a String cannot fail; the encoder's own errors are
        // for label values it cannot write, which these types never are.
        let _ = prometheus_client::encoding::prometheus_text::encode(&mut out, &self.registry);
        out
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

    fn response(model: &str) -> FinalResponse {
        FinalResponse {
            content: None,
            model: model.into(),
            streamed: false,
            session_id: actors::ids::SessionId::new("s"),
            turn_number: 1,
            message_id: actors::ids::MessageId::new("m"),
            usage: Default::default(),
            pending_tool_call: None,
            decision: None,
            error: None,
            error_type: None,
            error_message: None,
        }
    }

    fn scrape(metrics: &Metrics) -> String {
        metrics.render(Snapshot {
            live_actors: 0,
            stored_sessions: None,
            store_reachable: true,
        })
    }

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
        assert!(text.contains("assistant_live_session_actors 2\n"), "{text}");
        assert!(text.contains("assistant_stored_sessions 5\n"), "{text}");
        assert!(
            text.contains("# TYPE assistant_turns_total counter\n"),
            "{text}"
        );
        assert!(text.contains("# HELP assistant_turns_total Turns that ended,"));

        let metrics = Metrics::default();
        let response = response("a\"b\\c\nd:model");
        metrics.turn_ended(Transport::Http, &response, Duration::ZERO, None);
        let text = scrape(&metrics);
        assert!(
            text.contains("assistant_provider_requests_total{provider=\"a\\\"b\\\\c\\nd\"} 0\n"),
            "{text}"
        );
    }

    #[test]
    fn the_stored_sessions_sample_is_written_once_counted() {
        let metrics = Metrics::default();
        let text = scrape(&metrics);
        assert!(
            text.contains("# TYPE assistant_stored_sessions gauge\n"),
            "{text}"
        );
        assert!(!text.contains("\nassistant_stored_sessions "), "{text}");
        assert_eq!(metrics.stored_sessions(), None);
        metrics.set_stored_sessions(Some(3));
        assert_eq!(metrics.stored_sessions(), Some(3));
    }

    #[test]
    fn a_turn_counts_its_outcome_provider_and_tokens() {
        let metrics = Metrics::default();
        let mut response = response("builtin:echo");
        response.usage.requests = 2;
        response.usage.input_tokens = 7;
        response.usage.output_tokens = 3;
        metrics.turn_ended(
            Transport::Agui,
            &response,
            Duration::from_millis(2),
            Some(Duration::from_millis(1)),
        );
        response.error_type = Some("rate_limit".into());
        metrics.turn_ended(Transport::Agui, &response, Duration::from_millis(2), None);
        let text = scrape(&metrics);
        for line in [
            "assistant_turns_total{transport=\"agui\",outcome=\"completed\"} 1\n",
            "assistant_turns_total{transport=\"agui\",outcome=\"rate_limit\"} 1\n",
            "assistant_turn_duration_seconds_count{transport=\"agui\"} 2\n",
            "assistant_time_to_first_token_seconds_count{transport=\"agui\"} 1\n",
            "assistant_provider_requests_total{provider=\"builtin\"} 4\n",
            "assistant_turn_errors_total{provider=\"builtin\",error_type=\"rate_limit\"} 1\n",
            "assistant_tokens_total{provider=\"builtin\",kind=\"input\"} 14\n",
            "assistant_tokens_total{provider=\"builtin\",kind=\"output\"} 6\n",
        ] {
            assert!(text.contains(line), "{line}{text}");
        }
    }

    #[test]
    fn counts_made_on_many_threads_are_added_up() {
        let metrics = Metrics::default();
        std::thread::scope(|scope| {
            for _ in 0..19 {
                scope.spawn(|| {
                    metrics.count_http_request("POST", 200);
                    metrics.observe_store("load", Duration::from_millis(3), true);
                });
            }
        });
        metrics.count_http_request("POST", 200);
        let text = scrape(&metrics);
        assert!(
            text.contains("assistant_http_requests_total{method=\"POST\",status=\"200\"} 20\n"),
            "{text}"
        );
        assert!(
            text.contains("assistant_store_operation_seconds_count{operation=\"load\"} 19\n"),
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
