//! Stored per-turn traces (`GET /api/sessions/{id}/traces`): the row shape
//! both stores keep, the per-session bounds, and `TraceLog`, the memory
//! store's copy. A session's traces go with the session (delete, TTL purge,
//! eviction); past either bound the oldest go first.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use serde::{Serialize, Serializer};
use serde_json::value::RawValue;

use crate::ids::SessionId;

/// How much of a session's trace history is kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceBounds {
    /// Traces per session (`TRACES__MAX_PER_SESSION`).
    pub max_traces: u32,
    /// Bytes of events JSON and user messages per session
    /// (`TRACES__MAX_BYTES_PER_SESSION`).
    pub max_bytes: u64,
}

impl Default for TraceBounds {
    fn default() -> TraceBounds {
        TraceBounds {
            max_traces: 50,
            max_bytes: 512 * 1024,
        }
    }
}

/// One turn's trace as stored and listed; the field names are the Python
/// original's.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Serialize)]
pub struct StoredTrace {
    /// 32 hex digits; the OpenTelemetry trace id of the same turn when spans are exported.
    pub id: String,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub session_id: SessionId,
    /// The turn's steps in order, each with `type` and `at_ms` (docs/protocol.md).
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<Object>))]
    pub events: Box<RawValue>,
    /// The text that started the turn; null for a continuation.
    pub user_message: Option<String>,
    pub is_continuation: bool,
    pub duration_ms: f64,
    /// Unix milliseconds; listed as an ISO 8601 UTC date-time.
    #[serde(serialize_with = "iso_8601")]
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub created_at: u64,
}

impl StoredTrace {
    /// What the byte bound counts: the events' JSON and the user message.
    pub fn n_bytes(&self) -> u64 {
        (self.events.get().len() + self.user_message.as_ref().map_or(0, String::len)) as u64
    }
}

fn iso_8601<S: Serializer>(millis: &u64, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&format_iso_8601(*millis))
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` for Unix milliseconds.
pub fn format_iso_8601(millis: u64) -> String {
    let seconds = millis / 1000;
    let (days, in_day) = (seconds / 86_400, seconds % 86_400);
    // Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        in_day / 3600,
        in_day % 3600 / 60,
        in_day % 60,
        millis % 1000
    )
}

/// The memory store's traces, by session, oldest first. One lock: a trace
/// is written once per turn (when traces are on) and read on request only.
#[derive(Default)]
pub struct TraceLog {
    sessions: Mutex<HashMap<SessionId, SessionTraces>>,
}

#[derive(Default)]
struct SessionTraces {
    traces: VecDeque<Arc<StoredTrace>>,
    n_bytes: u64,
}

impl TraceLog {
    /// Adds `trace`, then drops the session's oldest past `bounds` (never
    /// the one just added).
    pub fn push(&self, trace: StoredTrace, bounds: TraceBounds) {
        let mut sessions = self.lock();
        let session = sessions.entry(trace.session_id.clone()).or_default();
        session.n_bytes += trace.n_bytes();
        session.traces.push_back(Arc::new(trace));
        while session.traces.len() > 1
            && (session.traces.len() > bounds.max_traces.max(1) as usize
                || session.n_bytes > bounds.max_bytes)
        {
            if let Some(oldest) = session.traces.pop_front() {
                session.n_bytes -= oldest.n_bytes();
            }
        }
    }

    /// A page of the session's traces, oldest first.
    pub fn page(&self, id: &SessionId, limit: u32, offset: u32) -> Vec<Arc<StoredTrace>> {
        self.lock().get(id).map_or_else(Vec::new, |session| {
            session
                .traces
                .iter()
                .skip(offset as usize)
                .take(limit as usize)
                .cloned()
                .collect()
        })
    }

    pub fn forget(&self, id: &SessionId) {
        let mut sessions = self.lock();
        if !sessions.is_empty() {
            sessions.remove(id);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<SessionId, SessionTraces>> {
        self.sessions
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trace(session: &str, id: &str, events: &str) -> StoredTrace {
        StoredTrace {
            id: id.into(),
            session_id: SessionId::new(session),
            events: RawValue::from_string(events.into()).expect("JSON"),
            user_message: None,
            is_continuation: false,
            duration_ms: 1.0,
            created_at: 0,
        }
    }

    fn ids(log: &TraceLog, session: &str) -> Vec<String> {
        log.page(&SessionId::new(session), 100, 0)
            .iter()
            .map(|trace| trace.id.clone())
            .collect()
    }

    #[test]
    fn the_oldest_go_first_past_the_count() {
        let log = TraceLog::default();
        let bounds = TraceBounds {
            max_traces: 2,
            max_bytes: 1 << 20,
        };
        for id in ["a", "b", "c"] {
            log.push(trace("s", id, "[]"), bounds);
        }
        assert_eq!(ids(&log, "s"), ["b", "c"]);
    }

    #[test]
    fn the_oldest_go_first_past_the_bytes_but_the_newest_stays() {
        let log = TraceLog::default();
        let bounds = TraceBounds {
            max_traces: 10,
            max_bytes: 5,
        };
        log.push(trace("s", "a", "[1,2]"), bounds);
        log.push(trace("s", "b", "[3]"), bounds);
        assert_eq!(ids(&log, "s"), ["b"]);
        log.push(trace("s", "c", "[1,2,3,4]"), bounds);
        assert_eq!(ids(&log, "s"), ["c"]);
        log.forget(&SessionId::new("s"));
        assert!(ids(&log, "s").is_empty());
    }

    #[test]
    fn timestamps_read_as_iso_8601() {
        assert_eq!(format_iso_8601(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            format_iso_8601(1_709_210_096_789),
            "2024-02-29T12:34:56.789Z"
        );
    }
}
