//! The model loop of one turn: build the request from the path, stream the
//! model, run backend tools, stop at host actions, limits, cancellation or a
//! final answer. It owns no session state: it takes the assistant message it
//! extends and hands it back in `TurnOutput`, and the session actor decides
//! what that means for the session.

mod cancel;
mod limits;

pub use cancel::{CancelHandle, CancelToken};
pub use limits::{thinking_budget, Budget, TurnLimits};

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use futures_util::StreamExt;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use crate::contract::{Attachment, OutputMode};
use crate::conversation::{
    build_transcript, CallOutcome, CallStatus, Message, NoteOrigin, ScreenshotOverlay, Segment,
    ToolCategory, ToolRecord, Usage,
};
use crate::events::{
    DeltaEvent, EventSink, NoteEvent, ToolCallEvent, ToolErrorEvent, ToolResultEvent, TurnEvent,
};
use crate::ids::ToolCallId;
use crate::model::echo::estimate_tokens;
use crate::model::pricing::{price_for, Price};
use crate::model::{
    ModelError, ModelEvent, ModelId, ModelRequest, ModelSettings, SharedModelClient, TokenUsage,
    Transcript,
};
use crate::tools::{
    check_arguments, check_arguments_inline, success_output, ToolContext, ToolKind, ToolSet,
};

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
    pub system: String,
    pub tools: ToolSet,
    pub settings: ModelSettings,
    pub limits: TurnLimits,
    pub output_mode: OutputMode,
    pub invalidations: Arc<HashMap<String, Vec<String>>>,
    /// The turn's latest screenshot (data URI), for `look_at_screen`.
    pub screenshot: Option<String>,
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
    pub steering: mpsc::Receiver<SteeringNote>,
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

pub struct TurnOutput {
    pub assistant: Message,
    pub end: TurnEnd,
    /// Handed back so the actor can collect steering that arrived after the
    /// turn's last look (it is promoted to a turn of its own).
    pub steering: mpsc::Receiver<SteeringNote>,
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
            let (_sender, steering) = mpsc::channel(1);
            TurnOutput {
                assistant,
                end: TurnEnd::Panicked(message),
                steering,
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
    } = input;
    let silent = plan.output_mode == OutputMode::HostTools;
    let mut overlay = ScreenshotOverlay::new();
    let mut usage = assistant.usage.take().unwrap_or_default();
    let price = price_for(&plan.model_id);
    // A resumed message carries the usage of its earlier runs; the message
    // keeps the sum, but limits bound this run only, or a continuation after
    // a long chain of host actions could never reach the model again.
    let carried = usage.clone();
    let end = loop {
        if cancel.is_cancelled() {
            break TurnEnd::Cancelled;
        }
        take_steering(&mut steering, &mut assistant, &sink, silent);
        if let Some(reason) = plan
            .limits
            .exceeded_before_request(&run_usage(&usage, &carried))
        {
            break TurnEnd::UsageLimit(reason);
        }
        // The history's chunks are shared; only the live message is built anew.
        let mut messages = history.clone();
        messages.push(build_transcript(&[&assistant], &overlay).into());
        let request = ModelRequest {
            model: plan.model_id.clone(),
            system: plan.system.clone(),
            messages,
            tools: plan.tools.specs(),
            settings: plan.settings.clone(),
        };
        usage.requests += 1;
        let response =
            stream_response(&plan, request, &mut assistant, &sink, &mut cancel, silent).await;
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
            response.calls,
            group_index,
            &sink,
            &mut overlay,
            &mut cancel,
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
    if silent {
        strip_prose(&mut assistant);
    }
    assistant.usage = Some(usage);
    TurnOutput {
        assistant,
        end,
        steering,
    }
}

/// Moves the steering notes waiting in the channel into the assistant message,
/// where the next request's transcript shows them, and tells the client each
/// one arrived (its segment takes an index, so the stream announces it); true
/// if there were any.
fn take_steering(
    steering: &mut mpsc::Receiver<SteeringNote>,
    assistant: &mut Message,
    sink: &EventSink,
    silent: bool,
) -> bool {
    let mut taken = false;
    while let Ok(note) = steering.try_recv() {
        let index = assistant.segments.len();
        if !silent {
            sink.send(TurnEvent::Note(NoteEvent {
                origin: NoteOrigin::Steering,
                message_id: Some(note.id.to_string()),
                content: Some(note.text.clone()),
                segment_id: format!("{}:{index}", assistant.id),
                segment_index: index,
                segment_kind: "steering",
            }));
        }
        assistant.segments.push(Segment::Note {
            origin: NoteOrigin::Steering,
            text: note.text,
            attachments: note.attachments,
        });
        taken = true;
    }
    taken
}

/// A tool call as the model sent it.
struct RawCall {
    id: String,
    name: String,
    arguments: String,
}

impl RawCall {
    /// The arguments as parsed, or the raw text when they are not JSON.
    /// Arguments nested past the depth limit stay text, so the store can read them back.
    fn arguments_value(&self) -> Value {
        if crate::contract::depth::check_text(self.arguments.as_bytes(), "").is_err() {
            return Value::String(self.arguments.clone());
        }
        serde_json::from_str(&self.arguments)
            .unwrap_or_else(|_| Value::String(self.arguments.clone()))
    }

    /// This call as a record with no result yet. An unknown tool takes
    /// `default_category`: it was never offered, so it has none of its own.
    fn into_record(
        self,
        plan: &TurnPlan,
        input: Value,
        default_category: ToolCategory,
    ) -> ToolRecord {
        let category = plan
            .tools
            .find(&self.name)
            .map(|tool| tool.category())
            .unwrap_or(default_category);
        ToolRecord {
            id: ToolCallId::new(self.id),
            name: self.name,
            input,
            category,
            output: None,
            outcome: None,
            status: None,
        }
    }
}

/// A record with the result the runtime gives it.
fn answered(
    mut record: ToolRecord,
    output: Value,
    outcome: CallOutcome,
    status: Option<CallStatus>,
) -> ToolRecord {
    record.output = Some(output);
    record.outcome = Some(outcome);
    record.status = status;
    record
}

struct Response {
    calls: Vec<RawCall>,
    /// Summed over the response's `Usage` events (normally one, at the end).
    tokens: TokenUsage,
    cancelled: bool,
    error: Option<ModelError>,
}

/// Streams one model response into `assistant`, forwarding deltas to `sink`.
async fn stream_response(
    plan: &TurnPlan,
    request: ModelRequest,
    assistant: &mut Message,
    sink: &EventSink,
    cancel: &mut CancelToken,
    silent: bool,
) -> Response {
    // Providers report usage at the end of a response; a cancel drops the
    // stream before that, so the turn keeps its own count to fall back on.
    let input_estimate = estimate_tokens(&request);
    let mut streamed_chars = 0usize;
    let mut stream = plan.model.stream(request);
    let first_segment = assistant.segments.len();
    let mut response = Response {
        calls: Vec::new(),
        tokens: TokenUsage::default(),
        cancelled: false,
        error: None,
    };
    let mut delta_index = 0usize;
    loop {
        let next = tokio::select! {
            biased;
            _ = cancel.cancelled() => {
                response.cancelled = true;
                count_unreported(&mut response.tokens, input_estimate, streamed_chars);
                return response;
            }
            next = stream.next() => next,
        };
        let event = match next {
            None => return response,
            Some(Err(error)) => {
                response.error = Some(error);
                return response;
            }
            Some(Ok(event)) => event,
        };
        match event {
            ModelEvent::TextDelta(text) | ModelEvent::ThinkingDelta(text) if text.is_empty() => {}
            ModelEvent::TextDelta(text) => {
                streamed_chars += text.len();
                let delta = append_delta(assistant, first_segment, false, text, &mut delta_index);
                if !silent {
                    sink.send(TurnEvent::TextDelta(delta));
                }
            }
            ModelEvent::ThinkingDelta(text) => {
                streamed_chars += text.len();
                let delta = append_delta(assistant, first_segment, true, text, &mut delta_index);
                if !silent {
                    sink.send(TurnEvent::ThinkingDelta(delta));
                }
            }
            ModelEvent::ThinkingSignature(value) => {
                if let Some(Segment::Thinking { signature, .. }) = assistant.segments.last_mut() {
                    *signature = Some(value);
                }
            }
            ModelEvent::ToolCall {
                id,
                name,
                arguments,
            } => response.calls.push(RawCall {
                id,
                name,
                arguments,
            }),
            ModelEvent::Usage(tokens) => {
                let total = &mut response.tokens;
                total.input_tokens += tokens.input_tokens;
                total.output_tokens += tokens.output_tokens;
                total.cache_read_tokens += tokens.cache_read_tokens;
                total.cache_write_tokens += tokens.cache_write_tokens;
            }
        }
    }
}

/// A cancelled response's usage: what the provider reported before the
/// cancel, and for what it had not reported yet, the runtime's own count
/// (request and streamed text at about four characters a token, the estimate
/// `builtin:echo` reports too).
fn count_unreported(tokens: &mut TokenUsage, input_estimate: u64, streamed_chars: usize) {
    if tokens.input_tokens == 0 {
        tokens.input_tokens = input_estimate;
    }
    if tokens.output_tokens == 0 {
        tokens.output_tokens = (streamed_chars as u64).div_ceil(4);
    }
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

/// Appends a delta to the response's current segment of that kind, or opens
/// one, and describes it for the stream (`delta_index` counts within the segment).
fn append_delta(
    assistant: &mut Message,
    first_segment: usize,
    thinking: bool,
    text: String,
    delta_index: &mut usize,
) -> DeltaEvent {
    let n_segments = assistant.segments.len();
    let continued = n_segments > first_segment
        && match assistant.segments.last_mut() {
            Some(Segment::Thinking {
                text: current,
                signature: None,
            }) if thinking => {
                current.push_str(&text);
                true
            }
            Some(Segment::Text { text: current }) if !thinking => {
                current.push_str(&text);
                true
            }
            _ => false,
        };
    let index = if continued {
        *delta_index += 1;
        n_segments - 1
    } else {
        *delta_index = 0;
        assistant.segments.push(if thinking {
            Segment::Thinking {
                text: text.clone(),
                signature: None,
            }
        } else {
            Segment::Text { text: text.clone() }
        });
        n_segments
    };
    DeltaEvent {
        content: text,
        segment_id: format!("{}:{index}", assistant.id),
        segment_index: index,
        delta_index: *delta_index,
        segment_started: !continued,
        segment_kind: if thinking { "thinking" } else { "text" },
    }
}

/// Checks one call against the turn's tools: its parsed arguments, or the
/// reason to send back to the model.
async fn check_call(plan: &TurnPlan, call: &RawCall) -> Result<(Value, ToolKind), (Value, String)> {
    // Checked as text first: the store must read back whatever is accepted.
    if let Err(error) = crate::contract::depth::check_text(call.arguments.as_bytes(), "arguments") {
        return Err((
            Value::String(call.arguments.chars().take(200).collect()),
            error.to_string(),
        ));
    }
    let arguments: Value = match serde_json::from_str(if call.arguments.trim().is_empty() {
        "{}"
    } else {
        &call.arguments
    }) {
        Ok(arguments) => arguments,
        Err(error) => {
            return Err((
                Value::String(call.arguments.clone()),
                format!("arguments are not valid JSON: {error}"),
            ));
        }
    };
    let Some(tool) = plan.tools.find(&call.name) else {
        return Err((
            arguments,
            format!("unknown tool {:?}; use one of the tools offered", call.name),
        ));
    };
    if let Err(problems) = check_off_thread(tool.parameters.clone(), arguments.clone()).await {
        return Err((
            arguments,
            format!(
                "arguments do not match the schema of {}: {problems}",
                call.name
            ),
        ));
    }
    Ok((arguments, tool.kind.clone()))
}

/// The schema check, on the blocking pool: it is bounded (`VALIDATION_BUDGET`),
/// but a large bounded check still should not hold the thread that serves
/// this session's actor and HTTP connections.
async fn check_off_thread(schema: Value, arguments: Value) -> Result<(), String> {
    if let Some(checked) = check_arguments_inline(&schema, &arguments) {
        return checked; // Small, and the schema compiled: cheaper than the hand-off.
    }
    match tokio::task::spawn_blocking(move || check_arguments(&schema, &arguments)).await {
        Ok(checked) => checked,
        Err(error) => Err(format!("the arguments could not be checked: {error}")),
    }
}

fn retry_record(call: RawCall, arguments: Value, reason: &str, plan: &TurnPlan) -> ToolRecord {
    answered(
        call.into_record(plan, arguments, ToolCategory::Backend),
        json!({"success": false, "error": reason, "error_code": "invalid_arguments", "retry": true}),
        CallOutcome::Failed,
        Some(CallStatus::Failed),
    )
}

/// Runs backend calls, announces host calls, and turns bad calls into retries.
/// A cancel during a custom tool's call (which may wait on a network or a
/// process) interrupts it and every call after it; the flag says so.
async fn run_calls(
    plan: &TurnPlan,
    calls: Vec<RawCall>,
    group_index: usize,
    sink: &EventSink,
    overlay: &mut ScreenshotOverlay,
    cancel: &mut CancelToken,
) -> (Vec<ToolRecord>, Vec<ToolCallId>, bool) {
    let mut records = Vec::with_capacity(calls.len());
    let mut host_calls = Vec::new();
    let mut calls = calls.into_iter();
    while let Some(call) = calls.next() {
        let (arguments, kind) = match check_call(plan, &call).await {
            Ok(checked) => checked,
            Err((arguments, reason)) => {
                sink.send(TurnEvent::ToolError(ToolErrorEvent {
                    tool_name: call.name.clone(),
                    call_id: call.id.clone(),
                    error: reason.clone(),
                    segment_index: group_index,
                }));
                records.push(retry_record(call, arguments, &reason, plan));
                continue;
            }
        };
        let category = match &kind {
            ToolKind::Backend(_) => ToolCategory::Backend,
            ToolKind::Custom(tool) => tool.category(),
            ToolKind::Host | ToolKind::Hold => ToolCategory::Host,
        };
        sink.send(TurnEvent::ToolCall(ToolCallEvent {
            tool_name: call.name.clone(),
            arguments: arguments.clone(),
            call_id: call.id.clone(),
            category,
            segment_index: group_index,
        }));
        let mut record = call.into_record(plan, arguments, category);
        match kind {
            ToolKind::Backend(tool) => {
                let started = Instant::now();
                let result = tool.run(plan.screenshot.as_deref());
                if !result.live_content.is_empty() {
                    overlay.insert(record.id.to_string(), result.live_content);
                }
                record.outcome = Some(if result.success {
                    CallOutcome::Success
                } else {
                    CallOutcome::Failed
                });
                if !result.success {
                    record.status = Some(CallStatus::Failed);
                }
                record.output = Some(result.output.clone());
                sink.send(TurnEvent::ToolResult(ToolResultEvent {
                    tool_name: record.name.clone(),
                    output: result.output,
                    call_id: record.id.to_string(),
                    duration_ms: started.elapsed().as_millis() as u64,
                    invalidates: plan.invalidations.get(&record.name).cloned(),
                }));
            }
            ToolKind::Custom(tool) => {
                let started = Instant::now();
                let arguments = record.input.clone();
                let result = tokio::select! {
                    biased;
                    _ = cancel.cancelled() => None,
                    result = tool.call(arguments, plan.tool_context.clone()) => Some(result),
                };
                let Some(result) = result else {
                    record.interrupt(CallStatus::Cancelled);
                    records.push(record);
                    records.extend(calls.map(|call| interrupted_record(plan, call)));
                    return (records, host_calls, true);
                };
                let (output, success) = match result {
                    Ok(value) => (success_output(value), true),
                    Err(error) => (error.to_output(), false),
                };
                record.outcome = Some(if success {
                    CallOutcome::Success
                } else {
                    CallOutcome::Failed
                });
                if !success {
                    record.status = Some(CallStatus::Failed);
                }
                record.output = Some(output.clone());
                let invalidates = plan.invalidations.get(&record.name).cloned().or_else(|| {
                    let own = tool.invalidates();
                    (!own.is_empty()).then_some(own)
                });
                sink.send(TurnEvent::ToolResult(ToolResultEvent {
                    tool_name: record.name.clone(),
                    output,
                    call_id: record.id.to_string(),
                    duration_ms: started.elapsed().as_millis() as u64,
                    invalidates,
                }));
            }
            ToolKind::Host | ToolKind::Hold => host_calls.push(record.id.clone()),
        }
        records.push(record);
    }
    (records, host_calls, false)
}

/// Silent decisions: hold wins, one valid action is pending, several fail the
/// turn. `None` means a bad call was sent back to the model for a retry.
/// Publishes nothing: in this mode only status, final_response and error go out.
async fn decide(plan: &TurnPlan, calls: Vec<RawCall>, assistant: &mut Message) -> Option<TurnEnd> {
    let holds = calls
        .iter()
        .any(|call| call.name == crate::tools::HOLD_TOOL);
    if holds {
        let records = calls
            .into_iter()
            .map(|call| decided_record(plan, call, "hold"))
            .collect();
        assistant
            .segments
            .push(Segment::ToolGroup { tools: records });
        return Some(TurnEnd::Hold);
    }
    if calls.len() > 1 {
        let names: Vec<String> = calls.iter().map(|call| call.name.clone()).collect();
        let records = calls
            .into_iter()
            .map(|call| decided_record(plan, call, "invalid_decision"))
            .collect();
        assistant
            .segments
            .push(Segment::ToolGroup { tools: records });
        return Some(TurnEnd::InvalidDecision(format!(
            "the model proposed {} host actions ({}); a decision admits at most one",
            names.len(),
            names.join(", ")
        )));
    }
    let call = calls.into_iter().next()?;
    match check_call(plan, &call).await {
        Ok((arguments, _)) => {
            // No tool preview: the decision itself is the final response.
            let record = call.into_record(plan, arguments, ToolCategory::Host);
            let id = record.id.clone();
            assistant.segments.push(Segment::ToolGroup {
                tools: vec![record],
            });
            Some(TurnEnd::HostCalls(vec![id]))
        }
        Err((arguments, reason)) => {
            let record = retry_record(call, arguments, &reason, plan);
            assistant.segments.push(Segment::ToolGroup {
                tools: vec![record],
            });
            None
        }
    }
}

/// A call that was never admitted: it carries a result saying so, so the
/// transcript stays valid for the provider.
fn decided_record(plan: &TurnPlan, call: RawCall, verdict: &str) -> ToolRecord {
    let input = call.arguments_value();
    // `hold` is the decision itself, answered by the runtime; anything else
    // in a decided response was never admitted to the host.
    if call.name == crate::tools::HOLD_TOOL {
        let record = call.into_record(plan, input, ToolCategory::Host);
        return answered(
            record,
            json!({"decision": "hold"}),
            CallOutcome::Success,
            None,
        );
    }
    answered(
        call.into_record(plan, input, ToolCategory::Host),
        json!({"admitted": false, "decision": verdict}),
        CallOutcome::Interrupted,
        Some(CallStatus::Cancelled),
    )
}

fn interrupted_record(plan: &TurnPlan, call: RawCall) -> ToolRecord {
    let input = call.arguments_value();
    let mut record = call.into_record(plan, input, ToolCategory::Backend);
    record.interrupt(CallStatus::Cancelled);
    record
}

/// Silent mode publishes and keeps nothing but the decision.
pub fn strip_prose(assistant: &mut Message) {
    assistant
        .segments
        .retain(|segment| matches!(segment, Segment::ToolGroup { .. } | Segment::Note { .. }));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cancelled_response_keeps_what_the_provider_reported() {
        let mut tokens = TokenUsage {
            input_tokens: 120,
            output_tokens: 7,
            ..TokenUsage::default()
        };
        count_unreported(&mut tokens, 999, 400);
        assert_eq!((tokens.input_tokens, tokens.output_tokens), (120, 7));
    }

    #[test]
    fn a_cancelled_response_without_a_report_is_counted_by_the_runtime() {
        let mut tokens = TokenUsage::default();
        count_unreported(&mut tokens, 50, 9);
        assert_eq!((tokens.input_tokens, tokens.output_tokens), (50, 3));
        // Input reported, output not yet.
        let mut tokens = TokenUsage {
            input_tokens: 80,
            ..TokenUsage::default()
        };
        count_unreported(&mut tokens, 50, 8);
        assert_eq!((tokens.input_tokens, tokens.output_tokens), (80, 2));
    }
}
