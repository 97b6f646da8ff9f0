//! Silent decisions (`output_mode: host_tools`): of a response's calls, `hold`
//! wins, one valid action becomes pending, several fail the turn. Nothing is
//! published but the decision, and no prose is kept.

use serde_json::json;

use super::tools::{answered, check_call, retry_record, RawCall};
use super::{TurnEnd, TurnPlan};
use crate::conversation::{CallOutcome, CallStatus, Message, Segment, ToolCategory, ToolRecord};

/// Silent decisions: hold wins, one valid action is pending, several fail the
/// turn. `None` means a bad call was sent back to the model for a retry.
/// Publishes nothing: in this mode only status, final_response and error go out.
pub(super) async fn decide(
    plan: &TurnPlan,
    calls: Vec<RawCall>,
    assistant: &mut Message,
) -> Option<TurnEnd> {
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

/// Silent mode publishes and keeps nothing but the decision.
pub(super) fn strip_prose(assistant: &mut Message) {
    assistant
        .segments
        .retain(|segment| matches!(segment, Segment::ToolGroup { .. } | Segment::Note { .. }));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strip_prose_keeps_tool_groups_and_notes_only() {
        let mut assistant: Message = serde_json::from_value(json!({
            "id": "m1:reply", "role": "assistant", "created_at": 0, "segments": [
                {"kind": "thinking", "text": "hmm"},
                {"kind": "text", "text": "I will click"},
                {"kind": "tool_group", "tools": []},
                {"kind": "note", "origin": "host_context", "text": "<host_context/>"}
            ]
        }))
        .unwrap();
        strip_prose(&mut assistant);
        let kinds: Vec<bool> = assistant
            .segments
            .iter()
            .map(|segment| matches!(segment, Segment::ToolGroup { .. }))
            .collect();
        assert_eq!(kinds, [true, false]);
    }
}
