//! `TurnTrace`: what one turn did and when, recorded by the turn engine at
//! coarse points (a model request's start, its first output, its end; a tool
//! call's start and end), never per delta: a response of a thousand deltas
//! costs one clock read more than an untraced one, at its first output.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use crate::conversation::ToolCategory;
use crate::model::TokenUsage;

/// The most events one turn's trace keeps; later ones are counted, not kept,
/// so a turn of many tool calls cannot grow its trace without bound.
pub const MAX_EVENTS: usize = 256;

/// One turn's record, made when the actor starts the turn and filled in by
/// the turn engine as it goes.
#[derive(Debug)]
pub struct TurnTrace {
    /// When the turn began, monotonic: every event is timed from here.
    pub started: Instant,
    /// The same moment on the wall clock: `created_at`, and the spans' times.
    pub started_at: SystemTime,
    pub user_message: Option<String>,
    pub is_continuation: bool,
    pub model: Arc<str>,
    pub silent: bool,
    pub events: Vec<TraceEvent>,
    /// Events past `MAX_EVENTS`, not kept.
    pub n_dropped: usize,
}

/// One step of a turn. `at` is measured from the turn's start.
#[derive(Clone, Debug, PartialEq)]
pub enum TraceEvent {
    ModelRequest(ModelRequestTrace),
    ToolCall(ToolCallTrace),
    /// Steering notes taken into the turn before a model request.
    Steering {
        at: Duration,
        n_notes: usize,
    },
}

/// One model request and its streamed response.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelRequestTrace {
    pub at: Duration,
    pub duration: Duration,
    /// From the request's start to its first text, thinking or tool call;
    /// `None` when nothing came.
    pub time_to_first_token: Option<Duration>,
    pub tokens: TokenUsage,
    pub n_tool_calls: usize,
    /// The provider error's `error_type`, or `cancelled`.
    pub error: Option<&'static str>,
}

/// One tool call the model made.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCallTrace {
    pub at: Duration,
    /// How long the runtime ran it (zero for a host action, which the host runs).
    pub duration: Duration,
    pub name: String,
    pub call_id: String,
    pub category: ToolCategory,
    /// `success`, `failed`, `invalid` (sent back to the model as a retry),
    /// `host` (handed to the host), `cancelled`.
    pub outcome: &'static str,
}

impl TurnTrace {
    /// A trace starting now. `user_message` is the text that started the
    /// turn (none for a continuation, whose input is a tool result).
    pub fn begin(
        user_message: Option<String>,
        is_continuation: bool,
        model: Arc<str>,
        silent: bool,
    ) -> TurnTrace {
        TurnTrace {
            started: Instant::now(),
            started_at: SystemTime::now(),
            user_message,
            is_continuation,
            model,
            silent,
            events: Vec::new(),
            n_dropped: 0,
        }
    }

    /// Time since the turn began.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Time from the turn's start to `instant`.
    pub fn offset(&self, instant: Instant) -> Duration {
        instant.saturating_duration_since(self.started)
    }

    pub fn push(&mut self, event: TraceEvent) {
        if self.events.len() >= MAX_EVENTS {
            self.n_dropped += 1;
            return;
        }
        self.events.push(event);
    }
}

/// The tool-call trace's `outcome` word for a finished call.
pub fn call_outcome(success: bool) -> &'static str {
    if success {
        "success"
    } else {
        "failed"
    }
}
