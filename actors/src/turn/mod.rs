//! The model loop of one turn: build the request from the path, stream the
//! model, run backend tools, stop at host actions, limits, cancellation or a
//! final answer. It owns no session state: it takes the assistant message it
//! extends and hands it back in `TurnOutput`, and the session actor decides
//! what that means for the session.

mod cancel;
mod deciding;
mod limits;
mod steering;
mod streaming;
mod tools;

pub use cancel::{CancelHandle, CancelToken};
pub use limits::{thinking_budget, Budget, TurnLimits};
pub use steering::{steering_queue, NotQueued, SteeringReceiver, SteeringSender};

use deciding::{decide, strip_prose};
use streaming::stream_response;
use tools::{interrupted_record, run_calls};

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use crate::contract::{Attachment, OutputMode};
use crate::conversation::{
    build_transcript, Message, NoteOrigin, ScreenshotOverlay, Segment, Usage,
};
use crate::events::{EventSink, NoteEvent, TurnEvent};
use crate::ids::ToolCallId;
use crate::model::pricing::{price_for, Price};
use crate::model::{
    ModelError, ModelId, ModelRequest, ModelSettings, SharedModelClient, TokenUsage, Transcript,
    TranscriptChunk,
};
use crate::tools::{ToolContext, ToolSet};
use crate::trace::{ModelRequestTrace, TraceEvent, TurnTrace};

/// Text delivered into a live turn before the model's next request.
#[derive(Clone, Debug, PartialEq)]
pub struct SteeringNote {
    /// The steering message's own id, used if it has to become a turn of its own.
    pub id: crate::ids::MessageId,
    pub text: String,
    pub attachments: Vec<Attachment>,
}

/// Everything a turn needs, decided by the session actor before it starts.
pub struct TurnPlan {
    pub model_id: ModelId,
    pub model: SharedModelClient,
    pub system: Arc<str>,
    pub tools: ToolSet,
    pub settings: ModelSettings,
    pub limits: TurnLimits,
    pub output_mode: OutputMode,
    pub invalidations: Arc<HashMap<String, Vec<String>>>,
    /// The turn's latest screenshot (data URI), for `look_at_screen`.
    pub screenshot: Option<Arc<str>>,
    /// What custom tools (`tools::Tool`) receive with each call.
    pub tool_context: ToolContext,
}

pub struct TurnInput {
    pub plan: TurnPlan,
    /// The transcript before the assistant message (root to the user
    /// message): the session's shared per-message items, never copied.
    pub history: Transcript,
    /// The assistant message this turn extends: new, or resumed after host results.
    pub assistant: Message,
    pub sink: EventSink,
    pub cancel: CancelToken,
    pub steering: SteeringReceiver,
    /// The turn's trace, when traces are stored or exported; filled in as it runs.
    pub trace: Option<Box<TurnTrace>>,
}

/// How the turn ended.
#[derive(Clone, Debug, PartialEq)]
pub enum TurnEnd {
    /// The model answered without further tool calls.
    Completed,
    /// The model asked the host to act; these calls (in order) have no result yet.
    HostCalls(Vec<ToolCallId>),
    /// Silent decision: the model chose `hold`.
    Hold,
    /// Silent decision: more than one action proposed; none admitted.
    InvalidDecision(String),
    Cancelled,
    UsageLimit(String),
    Failed(ModelError),
    /// The turn's own code panicked; the message is the panic's.
    Panicked(String),
}

impl TurnEnd {
    /// The word a trace records for this ending.
    pub fn trace_outcome(&self) -> &'static str {
        match self {
            TurnEnd::Completed => "completed",
            TurnEnd::HostCalls(_) => "host_action",
            TurnEnd::Hold => "hold",
            TurnEnd::InvalidDecision(_) => "invalid_decision",
            TurnEnd::Cancelled => "cancelled",
            TurnEnd::UsageLimit(_) => "usage_limit",
            TurnEnd::Failed(_) => "failed",
            TurnEnd::Panicked(_) => "panicked",
        }
    }
}

pub struct TurnOutput {
    pub assistant: Message,
    pub end: TurnEnd,
    /// Handed back so the actor can collect steering that arrived after the
    /// turn's last look (it is promoted to a turn of its own).
    pub steering: SteeringReceiver,
    /// The turn's trace, if it was given one (lost with a panic).
    pub trace: Option<Box<TurnTrace>>,
}

/// `run_turn` with a panic anywhere inside it caught: it becomes a failed
/// turn of this session (`Panicked`, with the message as it was before the
/// turn), never a dead actor or thread.
pub async fn run_turn_guarded(input: TurnInput) -> TurnOutput {
    use futures_util::FutureExt;
    let assistant = input.assistant.clone();
    match std::panic::AssertUnwindSafe(run_turn(input))
        .catch_unwind()
        .await
    {
        Ok(output) => output,
        Err(panic) => {
            let message = panic
                .downcast_ref::<&str>()
                .map(|text| text.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".to_string());
            log::error!("turn of {} panicked: {message}", assistant.id);
            let (_sender, steering) = steering_queue(1);
            TurnOutput {
                assistant,
                end: TurnEnd::Panicked(message),
                steering,
                trace: None,
            }
        }
    }
}

/// Runs the loop until it ends; never panics on model output.
pub async fn run_turn(input: TurnInput) -> TurnOutput {
    let TurnInput {
        plan,
        history,
        mut assistant,
        sink,
        mut cancel,
        mut steering,
        mut trace,
    } = input;
    let silent = plan.output_mode == OutputMode::HostTools;
    let mut overlay = ScreenshotOverlay::new();
    let mut usage = assistant
        .usage
        .take()
        .map(|usage| *usage)
        .unwrap_or_default();
    let price = price_for(&plan.model_id);
    // A resumed message carries the usage of its earlier runs; the message
    // keeps the sum, but limits bound this run only, or a continuation after
    // a long chain of host actions could never reach the model again.
    let carried = usage.clone();
    let end = loop {
        if cancel.is_cancelled() {
            break TurnEnd::Cancelled;
        }
        let n_notes = take_steering(&mut steering, &mut assistant, &sink, silent);
        if let (Some(trace), true) = (trace.as_deref_mut(), n_notes > 0) {
            let at = trace.elapsed();
            trace.push(TraceEvent::Steering { at, n_notes });
        }
        if let Some(reason) = plan
            .limits
            .exceeded_before_request(&run_usage(&usage, &carried))
        {
            break TurnEnd::UsageLimit(reason);
        }
        // The history's chunks are shared; only the live message is built anew.
        let mut messages = history.clone();
        // Before its first step the live message has no items to add.
        if !assistant.segments.is_empty() {
            messages.push(TranscriptChunk::shared(build_transcript(
                &[&assistant],
                &overlay,
            )));
        }
        let request = ModelRequest {
            model: plan.model_id.clone(),
            system: plan.system.clone(),
            messages,
            tools: plan.tools.specs(),
            settings: plan.settings.clone(),
            purpose: crate::model::Purpose::Turn,
        };
        usage.requests += 1;
        // Timed at its start and end, and at its first output (one clock
        // read in `stream_response`), only when traced.
        let request_started = trace.is_some().then(Instant::now);
        let response = stream_response(
            &plan,
            request,
            &mut assistant,
            &sink,
            &mut cancel,
            silent,
            request_started.is_some(),
        )
        .await;
        if let (Some(trace), Some(started)) = (trace.as_deref_mut(), request_started) {
            trace.push(TraceEvent::ModelRequest(ModelRequestTrace {
                at: trace.offset(started),
                duration: started.elapsed(),
                time_to_first_token: response
                    .first_output
                    .map(|first| first.saturating_duration_since(started)),
                tokens: response.tokens,
                n_tool_calls: response.calls.len(),
                error: match (&response.error, response.cancelled) {
                    (Some(error), _) => Some(error.kind.error_type().as_str()),
                    (None, true) => Some("cancelled"),
                    (None, false) => None,
                },
            }));
        }
        add_usage(&mut usage, &response.tokens, price);
        if let Some(error) = response.error {
            break TurnEnd::Failed(error);
        }
        if response.cancelled {
            break TurnEnd::Cancelled;
        }
        if response.calls.is_empty() {
            if silent {
                break TurnEnd::Hold;
            }
            // Steering that arrived during the final answer still reaches the
            // model in this turn: one more request with it appended. Past a
            // limit it is left for the actor, which promotes it to a turn.
            let over_limit = plan
                .limits
                .exceeded_before_request(&run_usage(&usage, &carried))
                .is_some();
            if steering.is_empty() || over_limit {
                break TurnEnd::Completed;
            }
            continue;
        }
        if silent {
            if let Some(end) = decide(&plan, response.calls, &mut assistant).await {
                break end;
            }
            continue;
        }
        usage.tool_calls += response.calls.len() as u32;
        if let Some(reason) = plan
            .limits
            .exceeded_tool_calls(&run_usage(&usage, &carried))
        {
            let records = response
                .calls
                .into_iter()
                .map(|call| interrupted_record(&plan, call))
                .collect();
            assistant
                .segments
                .push(Segment::ToolGroup { tools: records });
            break TurnEnd::UsageLimit(reason);
        }
        let group_index = assistant.segments.len();
        let ran = run_calls(
            &plan,
            &assistant.id,
            response.calls,
            group_index,
            &sink,
            &mut overlay,
            &mut cancel,
            trace.as_deref_mut(),
        )
        .await;
        let (records, host_calls, cancelled) = ran;
        assistant
            .segments
            .push(Segment::ToolGroup { tools: records });
        if cancelled {
            break TurnEnd::Cancelled;
        }
        if !host_calls.is_empty() {
            break TurnEnd::HostCalls(host_calls);
        }
    };
    // The one place prose is dropped from a silent turn. (A turn that
    // panicked hands back the message as it began: a silent turn always
    // begins on a new, empty message, since a silent call's result never
    // resumes the model.)
    if silent {
        strip_prose(&mut assistant);
    }
    assistant.usage = Some(Box::new(usage));
    TurnOutput {
        assistant,
        end,
        steering,
        trace,
    }
}

/// Moves the steering notes waiting in the channel into the assistant message,
/// where the next request's transcript shows them, and tells the client each
/// one arrived (its segment takes an index, so the stream announces it); how
/// many there were.
fn take_steering(
    steering: &mut SteeringReceiver,
    assistant: &mut Message,
    sink: &EventSink,
    silent: bool,
) -> usize {
    let mut taken = 0;
    while let Some(note) = steering.try_recv() {
        let id = Some(note.id.to_string());
        let event = push_note(
            assistant,
            NoteOrigin::Steering,
            id,
            note.text,
            note.attachments,
        );
        if !silent {
            sink.send(event);
        }
        taken += 1;
    }
    taken
}

/// Puts a note (steering, or a host context after tool results) into the
/// reply, and makes the event that announces it: its segment takes an
/// index, which the client would otherwise never see. Steering carries its
/// id and text; a host knows its own context.
pub fn push_note(
    assistant: &mut Message,
    origin: NoteOrigin,
    message_id: Option<String>,
    text: String,
    attachments: Vec<Attachment>,
) -> TurnEvent {
    let index = assistant.segments.len();
    let (content, segment_kind) = match origin {
        NoteOrigin::Steering => (Some(text.clone()), "steering"),
        NoteOrigin::HostContext => (None, "host_context"),
    };
    assistant.segments.push(Segment::Note {
        origin,
        text,
        attachments,
    });
    TurnEvent::Note(NoteEvent {
        origin,
        message_id,
        content,
        segment_id: format!("{}:{index}", assistant.id),
        segment_index: index,
        segment_kind,
    })
}

/// What this run added to a message's usage (cost aside: limits ignore it).
/// Saturating, since a stored message's usage is data read back, not an invariant.
fn run_usage(usage: &Usage, carried: &Usage) -> Usage {
    Usage {
        input_tokens: usage.input_tokens.saturating_sub(carried.input_tokens),
        output_tokens: usage.output_tokens.saturating_sub(carried.output_tokens),
        total_tokens: usage.total_tokens.saturating_sub(carried.total_tokens),
        requests: usage.requests.saturating_sub(carried.requests),
        tool_calls: usage.tool_calls.saturating_sub(carried.tool_calls),
        cost_usd: None,
        auxiliary: Default::default(),
    }
}

/// Adds one request's tokens to the message's usage and, when the model has
/// a price, its cost; without one `cost_usd` stays null.
fn add_usage(usage: &mut Usage, tokens: &TokenUsage, price: Option<Price>) {
    usage.add_tokens(tokens.input_tokens, tokens.output_tokens);
    if let Some(price) = price {
        let cost = usage.cost_usd.unwrap_or(0.0) + price.cost_usd(tokens);
        // Whole nano-dollars: keeps float noise out of stored and shown sums.
        usage.cost_usd = Some((cost * 1e9).round() / 1e9);
    }
}
