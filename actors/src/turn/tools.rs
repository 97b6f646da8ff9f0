//! Calling tools: a model's calls are checked against the turn's tool set
//! (a bad one goes back to the model as a retry), backend and custom tools run
//! here, and host calls end the turn for the host to answer.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::{CancelToken, TurnPlan};
use crate::conversation::{CallOutcome, CallStatus, ScreenshotOverlay, ToolCategory, ToolRecord};
use crate::events::{EventSink, ToolCallEvent, ToolErrorEvent, ToolResultEvent, TurnEvent};
use crate::ids::{MessageId, ToolCallId};
use crate::offload;
use crate::tools::{check_arguments, check_arguments_inline, success_output, ToolKind};
use crate::trace::{call_outcome, ToolCallTrace, TraceEvent, TurnTrace};

/// A tool call as the model sent it.
pub(super) struct RawCall {
    pub(super) id: String,
    pub(super) name: String,
    pub(super) arguments: String,
}

impl RawCall {
    /// The arguments as parsed, or the raw text when they are not JSON.
    /// Arguments nested past the depth limit stay text, so the store can read them back.
    pub(super) fn arguments_value(&self) -> Value {
        if crate::contract::depth::check_text(self.arguments.as_bytes(), "").is_err() {
            return Value::String(self.arguments.clone());
        }
        serde_json::from_str(&self.arguments)
            .unwrap_or_else(|_| Value::String(self.arguments.clone()))
    }

    /// This call as a record with no result yet. An unknown tool takes
    /// `default_category`: it was never offered, so it has none of its own.
    pub(super) fn into_record(
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
pub(super) fn answered(
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

/// Checks one call against the turn's tools: its parsed arguments, or the
/// reason to send back to the model.
pub(super) async fn check_call(
    plan: &TurnPlan,
    call: &RawCall,
) -> Result<(Value, ToolKind), (Value, String)> {
    // Checked as text first: the store must read back whatever is accepted.
    if let Err(error) = crate::contract::depth::check_text(call.arguments.as_bytes(), "arguments") {
        return Err((
            Value::String(call.arguments.chars().take(200).collect()),
            error.to_string(),
        ));
    }
    let arguments = match parse_arguments(&call.arguments).await {
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
    let (arguments, checked) = check(&tool.parameters, arguments).await;
    if let Err(problems) = checked {
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

/// The call's arguments as JSON (`{}` when empty); megabytes of them are
/// parsed on the blocking pool (`offload`).
async fn parse_arguments(text: &str) -> Result<Value, String> {
    let parse = |text: &str| {
        let text = if text.trim().is_empty() { "{}" } else { text };
        serde_json::from_str(text).map_err(|error| error.to_string())
    };
    if text.len() <= offload::INLINE_BYTES {
        return parse(text);
    }
    let text = text.to_string();
    offload::on_blocking_pool(move || parse(&text))
        .await
        .unwrap_or_else(|why| Err(format!("could not be parsed: {why}")))
}

/// The schema check. A small one against a compiled schema runs here;
/// anything else goes to the blocking pool: it is bounded
/// (`VALIDATION_BUDGET`), but a large bounded check still should not hold
/// the thread that serves this session's actor and others. The arguments go
/// there and come back, rather than being copied.
async fn check(schema: &Value, arguments: Value) -> (Value, Result<(), String>) {
    if let Some(checked) = check_arguments_inline(schema, &arguments) {
        return (arguments, checked);
    }
    let schema = schema.clone();
    let checked = offload::on_blocking_pool(move || {
        let checked = check_arguments(&schema, &arguments);
        (arguments, checked)
    })
    .await;
    checked.unwrap_or_else(|why| {
        // The check panicked (a bug): the arguments went with it.
        (
            Value::Null,
            Err(format!("the arguments could not be checked: {why}")),
        )
    })
}

pub(super) fn retry_record(
    call: RawCall,
    arguments: Value,
    reason: &str,
    plan: &TurnPlan,
) -> ToolRecord {
    answered(
        call.into_record(plan, arguments, ToolCategory::Backend),
        json!({"success": false, "error": reason, "error_code": "invalid_arguments", "retry": true}),
        CallOutcome::Failed,
        Some(CallStatus::Failed),
    )
}

/// Records a call in the turn's trace, if it has one: run from `started`
/// (a backend or custom tool), or not run here at all (`None`: a host
/// action, a call sent back as invalid), so no clock is read for it untraced.
fn traced(
    trace: &mut Option<&mut TurnTrace>,
    started: Option<Instant>,
    record: &ToolRecord,
    outcome: &'static str,
) {
    if let Some(trace) = trace {
        let (at, duration) = match started {
            Some(started) => (trace.offset(started), started.elapsed()),
            None => (trace.elapsed(), Duration::ZERO),
        };
        trace.push(TraceEvent::ToolCall(ToolCallTrace {
            at,
            duration,
            name: record.name.clone(),
            call_id: record.id.to_string(),
            category: record.category,
            outcome,
        }));
    }
}

/// Runs backend calls, announces host calls, and turns bad calls into retries.
/// A cancel during a custom tool's call (which may wait on a network or a
/// process) interrupts it and every call after it; the flag says so.
#[allow(clippy::too_many_arguments)]
pub(super) async fn run_calls(
    plan: &TurnPlan,
    message_id: &MessageId,
    calls: Vec<RawCall>,
    group_index: usize,
    sink: &EventSink,
    overlay: &mut ScreenshotOverlay,
    cancel: &mut CancelToken,
    mut trace: Option<&mut TurnTrace>,
) -> (Vec<ToolRecord>, Vec<ToolCallId>, bool) {
    let mut records = Vec::with_capacity(calls.len());
    let mut host_calls = Vec::new();
    let mut calls = calls.into_iter();
    while let Some(call) = calls.next() {
        let (arguments, kind) = match check_call(plan, &call).await {
            Ok(checked) => checked,
            Err((arguments, reason)) => {
                sink.send(TurnEvent::ToolError(ToolErrorEvent {
                    message_id: message_id.clone(),
                    tool_name: call.name.clone(),
                    call_id: call.id.clone(),
                    error: reason.clone(),
                    segment_index: group_index,
                }));
                let record = retry_record(call, arguments, &reason, plan);
                traced(&mut trace, None, &record, "invalid");
                records.push(record);
                continue;
            }
        };
        let category = match &kind {
            ToolKind::Backend(_) => ToolCategory::Backend,
            ToolKind::Custom(tool) => tool.category(),
            ToolKind::Host | ToolKind::Hold => ToolCategory::Host,
        };
        sink.send(TurnEvent::ToolCall(ToolCallEvent {
            message_id: message_id.clone(),
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
                traced(
                    &mut trace,
                    Some(started),
                    &record,
                    call_outcome(result.success),
                );
                sink.send(TurnEvent::ToolResult(ToolResultEvent {
                    message_id: message_id.clone(),
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
                    traced(&mut trace, Some(started), &record, "cancelled");
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
                traced(&mut trace, Some(started), &record, call_outcome(success));
                let invalidates = plan.invalidations.get(&record.name).cloned().or_else(|| {
                    let own = tool.invalidates();
                    (!own.is_empty()).then_some(own)
                });
                sink.send(TurnEvent::ToolResult(ToolResultEvent {
                    message_id: message_id.clone(),
                    tool_name: record.name.clone(),
                    output,
                    call_id: record.id.to_string(),
                    duration_ms: started.elapsed().as_millis() as u64,
                    invalidates,
                }));
            }
            ToolKind::Host | ToolKind::Hold => {
                traced(&mut trace, None, &record, "host");
                host_calls.push(record.id.clone());
            }
        }
        records.push(record);
    }
    (records, host_calls, false)
}

pub(super) fn interrupted_record(plan: &TurnPlan, call: RawCall) -> ToolRecord {
    let input = call.arguments_value();
    let mut record = call.into_record(plan, input, ToolCategory::Backend);
    record.interrupt(CallStatus::Cancelled);
    record
}
