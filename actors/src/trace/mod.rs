//! Per-turn traces: what a turn did, with its timings. The turn engine fills
//! a `TurnTrace` (`recorder`) at coarse points; when the turn ends the actor
//! hands it to `finish`, which gives it to the observer (OpenTelemetry, in
//! the server) and, with `TRACES__ENABLED`, stores it beside the session
//! (`Store::save_trace`). Nothing here runs per delta, and nothing is
//! recorded at all when neither wants the trace.

mod recorder;

pub use recorder::{
    call_outcome, ModelRequestTrace, ToolCallTrace, TraceEvent, TurnTrace, MAX_EVENTS,
};

use std::collections::hash_map::RandomState;
use std::fmt;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};

use crate::contract::{ChatRequest, OutputMode};
use crate::conversation::ToolCategory;
use crate::error_type::ErrorType;
use crate::ids::SessionId;
use crate::model::ModelId;
use crate::store::{SharedStore, StoredTrace, TraceBounds};

/// Receives every finished turn's trace, on the session actor's thread: it
/// must only queue the trace (the OpenTelemetry exporter sends it from a
/// thread of its own).
pub trait TraceObserver: Send + Sync + 'static {
    fn turn_finished(&self, trace: &FinishedTrace);
}

/// What becomes of traces; shared by every session.
#[derive(Clone, Default)]
pub struct TraceConfig {
    /// Whether traces are stored with their session (`TRACES__ENABLED`).
    pub store: bool,
    pub bounds: TraceBounds,
    /// The OpenTelemetry exporter, when `OTEL_EXPORTER_OTLP_ENDPOINT` is set.
    pub observer: Option<Arc<dyn TraceObserver>>,
}

impl fmt::Debug for TraceConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TraceConfig")
            .field("store", &self.store)
            .field("bounds", &self.bounds)
            .field("observer", &self.observer.is_some())
            .finish()
    }
}

impl TraceConfig {
    /// A trace for the turn `request` starts, if anything wants one.
    pub fn begin(
        &self,
        request: &ChatRequest,
        model: &ModelId,
        output_mode: OutputMode,
    ) -> Option<Box<TurnTrace>> {
        if !self.store && self.observer.is_none() {
            return None;
        }
        let is_continuation = request.continuation.is_some();
        Some(Box::new(TurnTrace::begin(
            (!is_continuation).then(|| request.content.clone()),
            is_continuation,
            model.shared_text(),
            output_mode == OutputMode::HostTools,
        )))
    }
}

/// A turn's trace with how the turn ended.
#[derive(Debug)]
pub struct FinishedTrace {
    /// 32 hex digits: the stored trace's id and the exported trace id.
    pub id: String,
    pub session_id: SessionId,
    pub turn: TurnTrace,
    pub duration: Duration,
    /// `completed`, `host_action`, `hold`, `invalid_decision`, `cancelled`,
    /// `usage_limit`, `failed`, `panicked`.
    pub outcome: &'static str,
    pub error_type: Option<ErrorType>,
}

/// Ends `turn`'s trace: the observer gets it, and the store when traces are
/// stored. Called by the session actor as the turn ends, before it stores
/// the turn's result. Encoding and storing run in a task of their own on the
/// actor's thread, after the turn's final response has gone out: the turn
/// neither waits for them nor pays their time.
pub fn finish(
    config: &TraceConfig,
    store: &SharedStore,
    session_id: &SessionId,
    turn: TurnTrace,
    outcome: &'static str,
    error_type: Option<ErrorType>,
) {
    let finished = FinishedTrace {
        id: new_trace_id(),
        session_id: session_id.clone(),
        duration: turn.elapsed(),
        turn,
        outcome,
        error_type,
    };
    if let Some(observer) = &config.observer {
        observer.turn_finished(&finished);
    }
    if !config.store {
        return;
    }
    let store = store.clone();
    let bounds = config.bounds;
    actix::spawn(async move {
        let session_id = &finished.session_id;
        let stored = match finished.stored(bounds) {
            Ok(stored) => stored,
            Err(error) => {
                log::warn!("session {session_id}: the turn's trace could not be encoded: {error}");
                return;
            }
        };
        if let Err(error) = store.save_trace(stored, bounds).await {
            log::warn!("session {session_id}: the turn's trace was not stored: {error}");
        }
    });
}

impl FinishedTrace {
    /// Milliseconds, to the microsecond.
    pub fn duration_ms(&self) -> f64 {
        millis(self.duration)
    }

    /// The row the stores keep. A trace whose events alone pass the byte
    /// bound keeps its first and last events only (and says how many went).
    pub fn stored(&self, bounds: TraceBounds) -> Result<StoredTrace, serde_json::Error> {
        // Encoded straight into the raw value: `RawValue::from_string`
        // would parse the text again to check it.
        let mut events = serde_json::value::to_raw_value(&Events {
            trace: self,
            keep_all: true,
        })?;
        if events.get().len() as u64 > bounds.max_bytes {
            events = serde_json::value::to_raw_value(&Events {
                trace: self,
                keep_all: false,
            })?;
        }
        Ok(StoredTrace {
            id: self.id.clone(),
            session_id: self.session_id.clone(),
            events,
            user_message: self.turn.user_message.clone(),
            is_continuation: self.turn.is_continuation,
            duration_ms: self.duration_ms(),
            created_at: self
                .turn
                .started_at
                .duration_since(UNIX_EPOCH)
                .map_or(0, |since| since.as_millis() as u64),
        })
    }
}

fn millis(duration: Duration) -> f64 {
    (duration.as_micros() as f64) / 1000.0
}

/// 128 random-looking bits as 32 hex digits: the clock's microseconds and a
/// process-wide count, each mixed with a per-process random key (std's
/// `RandomState`), so ids differ across processes and never repeat in one.
fn new_trace_id() -> String {
    static COUNT: AtomicU64 = AtomicU64::new(0);
    static KEYS: std::sync::OnceLock<RandomState> = std::sync::OnceLock::new();
    let keys = KEYS.get_or_init(RandomState::new);
    let count = COUNT.fetch_add(1, Ordering::Relaxed);
    let micros = std::time::SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_micros() as u64);
    let high = keys.hash_one((micros, count, 1u8));
    let low = keys.hash_one((count, micros, 2u8));
    format!("{high:016x}{low:016x}")
}

/// The stored `events` array: `turn_started`, the steps, `turn_ended`.
struct Events<'a> {
    trace: &'a FinishedTrace,
    /// False: only the first and last steps (the trace was over the byte bound).
    keep_all: bool,
}

impl Serialize for Events<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let trace = self.trace;
        let turn = &trace.turn;
        let steps: Vec<&TraceEvent> = if self.keep_all || turn.events.len() <= 2 {
            turn.events.iter().collect()
        } else {
            vec![&turn.events[0], &turn.events[turn.events.len() - 1]]
        };
        let n_dropped = turn.n_dropped + (turn.events.len() - steps.len());
        let mut seq = serializer.serialize_seq(Some(steps.len() + 2))?;
        seq.serialize_element(&Started(turn))?;
        for step in steps {
            seq.serialize_element(&Step(step))?;
        }
        seq.serialize_element(&Ended { trace, n_dropped })?;
        seq.end()
    }
}

struct Started<'a>(&'a TurnTrace);

impl Serialize for Started<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("type", "turn_started")?;
        map.serialize_entry("at_ms", &0.0)?;
        map.serialize_entry("model", &*self.0.model)?;
        map.serialize_entry(
            "output_mode",
            if self.0.silent { "host_tools" } else { "text" },
        )?;
        map.end()
    }
}

struct Step<'a>(&'a TraceEvent);

impl Serialize for Step<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        match self.0 {
            TraceEvent::ModelRequest(request) => {
                map.serialize_entry("type", "model_request")?;
                map.serialize_entry("at_ms", &millis(request.at))?;
                map.serialize_entry("duration_ms", &millis(request.duration))?;
                map.serialize_entry(
                    "time_to_first_token_ms",
                    &request.time_to_first_token.map(millis),
                )?;
                map.serialize_entry("input_tokens", &request.tokens.input_tokens)?;
                map.serialize_entry("output_tokens", &request.tokens.output_tokens)?;
                if request.tokens.cache_read_tokens > 0 {
                    map.serialize_entry("cache_read_tokens", &request.tokens.cache_read_tokens)?;
                }
                if request.tokens.cache_write_tokens > 0 {
                    map.serialize_entry("cache_write_tokens", &request.tokens.cache_write_tokens)?;
                }
                map.serialize_entry("tool_calls", &request.n_tool_calls)?;
                map.serialize_entry("error_type", &request.error)?;
            }
            TraceEvent::ToolCall(call) => {
                map.serialize_entry("type", "tool_call")?;
                map.serialize_entry("at_ms", &millis(call.at))?;
                map.serialize_entry("duration_ms", &millis(call.duration))?;
                map.serialize_entry("tool_name", &call.name)?;
                map.serialize_entry("call_id", &call.call_id)?;
                map.serialize_entry("category", category(call.category))?;
                map.serialize_entry("outcome", call.outcome)?;
            }
            TraceEvent::Steering { at, n_notes } => {
                map.serialize_entry("type", "steering")?;
                map.serialize_entry("at_ms", &millis(*at))?;
                map.serialize_entry("notes", n_notes)?;
            }
        }
        map.end()
    }
}

struct Ended<'a> {
    trace: &'a FinishedTrace,
    n_dropped: usize,
}

impl Serialize for Ended<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let trace = self.trace;
        let (mut input_tokens, mut output_tokens, mut n_requests) = (0, 0, 0);
        for event in &trace.turn.events {
            if let TraceEvent::ModelRequest(request) = event {
                input_tokens += request.tokens.input_tokens;
                output_tokens += request.tokens.output_tokens;
                n_requests += 1;
            }
        }
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("type", "turn_ended")?;
        map.serialize_entry("at_ms", &trace.duration_ms())?;
        map.serialize_entry("outcome", trace.outcome)?;
        map.serialize_entry("error_type", &trace.error_type.map(ErrorType::as_str))?;
        map.serialize_entry("model_requests", &n_requests)?;
        map.serialize_entry("input_tokens", &input_tokens)?;
        map.serialize_entry("output_tokens", &output_tokens)?;
        if self.n_dropped > 0 {
            map.serialize_entry("events_dropped", &self.n_dropped)?;
        }
        map.end()
    }
}

/// The category's wire word, as `ToolCategory` serializes.
pub fn category(category: ToolCategory) -> &'static str {
    match category {
        ToolCategory::Backend => "backend",
        ToolCategory::Host => "host",
        ToolCategory::Mcp => "mcp",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::TokenUsage;

    fn finished(n_calls: usize) -> FinishedTrace {
        let mut turn = TurnTrace::begin(Some("hi".into()), false, "builtin:echo".into(), false);
        turn.push(TraceEvent::ModelRequest(ModelRequestTrace {
            at: Duration::from_micros(10),
            duration: Duration::from_micros(2500),
            time_to_first_token: Some(Duration::from_micros(1200)),
            tokens: TokenUsage {
                input_tokens: 7,
                output_tokens: 3,
                ..TokenUsage::default()
            },
            n_tool_calls: n_calls,
            error: None,
        }));
        for index in 0..n_calls {
            turn.push(TraceEvent::ToolCall(ToolCallTrace {
                at: Duration::from_millis(3),
                duration: Duration::from_micros(40),
                name: "get_current_time".into(),
                call_id: format!("c{index}"),
                category: ToolCategory::Backend,
                outcome: "success",
            }));
        }
        FinishedTrace {
            id: new_trace_id(),
            session_id: SessionId::new("s"),
            turn,
            duration: Duration::from_millis(4),
            outcome: "completed",
            error_type: None,
        }
    }

    #[test]
    fn a_trace_lists_its_steps_between_start_and_end() {
        let stored = finished(1).stored(TraceBounds::default()).expect("stored");
        let events: serde_json::Value = serde_json::from_str(stored.events.get()).expect("JSON");
        let types: Vec<&str> = events
            .as_array()
            .expect("array")
            .iter()
            .map(|event| event["type"].as_str().expect("type"))
            .collect();
        assert_eq!(
            types,
            ["turn_started", "model_request", "tool_call", "turn_ended"]
        );
        assert_eq!(events[1]["time_to_first_token_ms"], 1.2);
        assert_eq!(events[1]["input_tokens"], 7);
        assert_eq!(events[2]["duration_ms"], 0.04);
        assert_eq!(events[3]["outcome"], "completed");
        assert_eq!(stored.duration_ms, 4.0);
        assert_eq!(stored.user_message.as_deref(), Some("hi"));
        assert_eq!(stored.id.len(), 32);
    }

    #[test]
    fn a_trace_over_the_byte_bound_keeps_its_first_and_last_steps() {
        let bounds = TraceBounds {
            max_traces: 5,
            max_bytes: 600,
        };
        let stored = finished(20).stored(bounds).expect("stored");
        let events: serde_json::Value = serde_json::from_str(stored.events.get()).expect("JSON");
        assert_eq!(events.as_array().expect("array").len(), 4);
        assert_eq!(events[3]["events_dropped"], 19);
    }

    #[test]
    fn trace_ids_do_not_repeat() {
        assert_ne!(new_trace_id(), new_trace_id());
    }
}
