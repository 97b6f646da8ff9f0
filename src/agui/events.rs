//! `TurnEvent` → AG-UI events (the 1.0 names that `@ag-ui/client` accepts),
//! framed as SSE `data: <json>\n\n`. `EventMapper` keeps what the AG-UI
//! verifier needs: every text or reasoning message is started before its
//! content and ended before the next one, a tool call or the run's end.
//!
//! Message ids: text before any tool result takes the assistant message id;
//! a text or tool-call group after tool results (a resumed message, or after
//! backend results) takes its own id (`<assistant id>:<segment index>`, or
//! `<assistant id>:<call id>` for calls), so the client's list reads
//! assistant → tool → assistant as the model saw it. Reasoning messages take
//! the segment id. A host result echoed by the core (the client sent it) is
//! not sent back; a refused call (`tool_error`, retried by the model) is a
//! `CUSTOM` event named `assistant.tool_error`.

use std::collections::HashSet;

use actix_web::web::Bytes;
use actors::error_type::ErrorType;
use actors::events::{DeltaEvent, FinalResponse, TurnEvent};
use serde_json::{json, Value};

/// Translates one run's turn events, in order.
#[derive(Debug)]
pub struct EventMapper {
    thread_id: String,
    run_id: String,
    /// Calls the client answered in this run: their echoed results stay here.
    answered: HashSet<String>,
    /// The assistant message of the turn being streamed.
    assistant_id: String,
    /// The AG-UI message that text and tool calls are attached to now.
    current_message_id: Option<String>,
    /// Tool results came since `current_message_id` was chosen: the next
    /// text or tool call opens a new AG-UI message.
    after_tools: bool,
    open: Option<OpenMessage>,
}

/// The streamed message that has been started and not yet ended.
#[derive(Clone, Debug, PartialEq)]
enum OpenMessage {
    Text {
        message_id: String,
        segment_id: String,
    },
    Reasoning {
        message_id: String,
    },
}

impl EventMapper {
    pub fn new(thread_id: &str, run_id: &str, answered: HashSet<String>) -> EventMapper {
        EventMapper {
            thread_id: thread_id.to_string(),
            run_id: run_id.to_string(),
            answered,
            assistant_id: String::new(),
            current_message_id: None,
            after_tools: false,
            open: None,
        }
    }

    pub fn run_started(&self) -> Value {
        json!({"type": "RUN_STARTED", "threadId": self.thread_id, "runId": self.run_id})
    }

    /// A turn on `assistant_id` begins; `resumed` when it continues a message
    /// after host results.
    pub fn begin_turn(&mut self, assistant_id: &str, resumed: bool) {
        self.assistant_id = assistant_id.to_string();
        self.current_message_id = None;
        self.after_tools = resumed;
        self.open = None;
    }

    /// The AG-UI events of one turn event; the ending (`FinalResponse`,
    /// `Error`) is the route's to write, through `end_turn` and `run_end`.
    pub fn map(&mut self, event: &TurnEvent) -> Vec<Value> {
        let mut out = Vec::new();
        match event {
            TurnEvent::TextDelta(delta) => self.text(delta, &mut out),
            TurnEvent::ThinkingDelta(delta) => self.reasoning(delta, &mut out),
            TurnEvent::ToolCall(call) => {
                self.close(&mut out);
                let parent = self.message_for_call(&call.call_id);
                out.push(
                    json!({"type": "TOOL_CALL_START", "toolCallId": call.call_id,
                                "toolCallName": call.tool_name, "parentMessageId": parent}),
                );
                out.push(json!({"type": "TOOL_CALL_ARGS", "toolCallId": call.call_id,
                                "delta": call.arguments.to_string()}));
                out.push(json!({"type": "TOOL_CALL_END", "toolCallId": call.call_id}));
            }
            TurnEvent::ToolResult(result) => {
                if self.answered.contains(&result.call_id) {
                    return out;
                }
                self.close(&mut out);
                let content = match &result.output {
                    Value::String(text) => text.clone(),
                    other => other.to_string(),
                };
                out.push(json!({"type": "TOOL_CALL_RESULT", "messageId": format!("{}:result", result.call_id),
                                "toolCallId": result.call_id, "content": content, "role": "tool"}));
                self.after_tools = true;
            }
            TurnEvent::ToolError(error) => {
                out.push(json!({"type": "CUSTOM", "name": "assistant.tool_error",
                                "value": {"tool_name": error.tool_name, "call_id": error.call_id, "error": error.error}}));
            }
            // AG-UI has no steering, and a continuation's host-context note
            // is runtime bookkeeping: AG-UI messages carry no segment indices.
            TurnEvent::Note(_) => {}
            TurnEvent::Status(_) | TurnEvent::FinalResponse(_) | TurnEvent::Error(_) => {}
        }
        out
    }

    /// Ends whatever message is open (the turn is over).
    pub fn end_turn(&mut self) -> Vec<Value> {
        let mut out = Vec::new();
        self.close(&mut out);
        out
    }

    /// `RUN_FINISHED` (completed, waiting for host results, or cancelled) or
    /// `RUN_ERROR` (a failed turn, or one stopped by a usage limit), from the
    /// turn's final response.
    pub fn run_end(&self, final_response: &FinalResponse) -> Value {
        let failed = final_response
            .error_type
            .as_deref()
            // A cancelled run finished (`RUN_FINISHED`); any other ending failed.
            .filter(|error_type| *error_type != ErrorType::Cancelled);
        if let Some(code) = failed {
            let message = final_response
                .error_message
                .clone()
                .unwrap_or_else(|| code.to_string());
            let mut event = self.run_error(&message, code);
            event["usage"] = token_usage(final_response);
            return event;
        }
        let result = serde_json::to_value(final_response).unwrap_or(Value::Null);
        let mut event = json!({"type": "RUN_FINISHED", "threadId": self.thread_id,
                               "runId": self.run_id, "result": result,
                               "usage": token_usage(final_response)});
        if final_response.error_type.is_some() {
            event["outcome"] = json!({"type": "cancelled"});
        } else if let Some(pending) = &final_response.pending_tool_call {
            let mut ids = vec![pending.call_id.clone()];
            ids.extend(pending.queued.iter().cloned());
            event["outcome"] = json!({"type": "success", "pendingToolCallIds": ids});
        }
        event
    }

    /// A run that ran no turn (a history request).
    pub fn run_finished(&self) -> Value {
        json!({"type": "RUN_FINISHED", "threadId": self.thread_id, "runId": self.run_id})
    }

    pub fn run_error(&self, message: &str, code: &str) -> Value {
        json!({"type": "RUN_ERROR", "message": message, "code": code})
    }

    fn text(&mut self, delta: &DeltaEvent, out: &mut Vec<Value>) {
        let continuing = matches!(&self.open, Some(OpenMessage::Text { segment_id, .. }) if *segment_id == delta.segment_id);
        if !continuing {
            self.close(out);
            let message_id = match (&self.current_message_id, self.after_tools) {
                (Some(current), false) => current.clone(),
                (None, false) => self.assistant_id.clone(),
                (_, true) => delta.segment_id.clone(),
            };
            self.current_message_id = Some(message_id.clone());
            self.after_tools = false;
            out.push(
                json!({"type": "TEXT_MESSAGE_START", "messageId": message_id, "role": "assistant"}),
            );
            self.open = Some(OpenMessage::Text {
                message_id,
                segment_id: delta.segment_id.clone(),
            });
        }
        if let (Some(OpenMessage::Text { message_id, .. }), false) =
            (&self.open, delta.content.is_empty())
        {
            out.push(json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": message_id, "delta": delta.content}));
        }
    }

    fn reasoning(&mut self, delta: &DeltaEvent, out: &mut Vec<Value>) {
        let continuing = matches!(&self.open, Some(OpenMessage::Reasoning { message_id }) if *message_id == delta.segment_id);
        if !continuing {
            self.close(out);
            let message_id = delta.segment_id.clone();
            out.push(json!({"type": "REASONING_START", "messageId": message_id}));
            out.push(json!({"type": "REASONING_MESSAGE_START", "messageId": message_id, "role": "reasoning"}));
            self.open = Some(OpenMessage::Reasoning { message_id });
        }
        if !delta.content.is_empty() {
            out.push(json!({"type": "REASONING_MESSAGE_CONTENT", "messageId": delta.segment_id, "delta": delta.content}));
        }
    }

    /// The AG-UI message a tool call belongs to.
    fn message_for_call(&mut self, call_id: &str) -> String {
        let message_id = match (&self.current_message_id, self.after_tools) {
            (Some(current), false) => current.clone(),
            (None, false) => self.assistant_id.clone(),
            (_, true) => format!("{}:{call_id}", self.assistant_id),
        };
        self.current_message_id = Some(message_id.clone());
        self.after_tools = false;
        message_id
    }

    fn close(&mut self, out: &mut Vec<Value>) {
        match self.open.take() {
            Some(OpenMessage::Text { message_id, .. }) => {
                out.push(json!({"type": "TEXT_MESSAGE_END", "messageId": message_id}));
            }
            Some(OpenMessage::Reasoning { message_id }) => {
                out.push(json!({"type": "REASONING_MESSAGE_END", "messageId": message_id}));
                out.push(json!({"type": "REASONING_END", "messageId": message_id}));
            }
            None => {}
        }
    }
}

/// One SSE frame. Compact JSON has no newline, so one `data:` line suffices.
pub fn sse_frame(event: &Value) -> Bytes {
    Bytes::from(format!("data: {event}\n\n"))
}

/// The turn's usage in AG-UI's own field (`RUN_FINISHED.usage`, a list of
/// `TokenUsage` per provider and model). The model calls made for the turn
/// but not by it (summarizing) are in `result.usage.auxiliary`, by name, not
/// here: they carry no model of their own.
fn token_usage(final_response: &FinalResponse) -> Value {
    let usage = &final_response.usage;
    let (provider, model) = final_response
        .model
        .split_once(':')
        .unwrap_or(("", &final_response.model));
    json!([{"provider": provider, "model": model,
            "inputTokens": usage.input_tokens, "outputTokens": usage.output_tokens,
            "totalTokens": usage.total_tokens}])
}

#[cfg(test)]
mod tests {
    use actors::conversation::{ToolCategory, Usage};
    use actors::events::{PendingToolCall, ToolCallEvent, ToolResultEvent};
    use actors::ids::MessageId;

    use super::*;

    fn delta(kind: &'static str, index: usize, content: &str, started: bool) -> DeltaEvent {
        DeltaEvent {
            content: content.into(),
            segment_id: format!("a1:{index}"),
            segment_index: index,
            delta_index: 0,
            segment_started: started,
            segment_kind: kind,
        }
    }

    fn types(events: &[Value]) -> Vec<String> {
        events
            .iter()
            .map(|event| event["type"].as_str().unwrap().to_string())
            .collect()
    }

    fn final_response(pending: Option<PendingToolCall>, error_type: Option<&str>) -> FinalResponse {
        FinalResponse {
            content: Some("x".into()),
            model: "builtin:echo".into(),
            streamed: true,
            session_id: actors::ids::SessionId::new("t"),
            turn_number: 1,
            message_id: actors::ids::MessageId::new("a1"),
            usage: Usage::default(),
            pending_tool_call: pending,
            decision: None,
            error: error_type.map(|_| true),
            error_type: error_type.map(str::to_string),
            error_message: error_type.map(|kind| format!("it was {kind}")),
        }
    }

    #[test]
    fn thinking_then_text_then_a_host_call_are_opened_and_closed_in_order() {
        let mut mapper = EventMapper::new("t", "r", HashSet::new());
        mapper.begin_turn("a1", false);
        let mut events = Vec::new();
        events.extend(mapper.map(&TurnEvent::ThinkingDelta(delta("thinking", 0, "hm", true))));
        events.extend(mapper.map(&TurnEvent::TextDelta(delta("text", 1, "Hi ", true))));
        events.extend(mapper.map(&TurnEvent::TextDelta(delta("text", 1, "there", false))));
        events.extend(mapper.map(&TurnEvent::ToolCall(ToolCallEvent {
            message_id: MessageId::new("a1"),
            tool_name: "pick".into(),
            arguments: json!({"n": 1}),
            call_id: "c1".into(),
            category: ToolCategory::Host,
            segment_index: 2,
        })));
        events.extend(mapper.end_turn());
        assert_eq!(
            types(&events),
            [
                "REASONING_START",
                "REASONING_MESSAGE_START",
                "REASONING_MESSAGE_CONTENT",
                "REASONING_MESSAGE_END",
                "REASONING_END",
                "TEXT_MESSAGE_START",
                "TEXT_MESSAGE_CONTENT",
                "TEXT_MESSAGE_CONTENT",
                "TEXT_MESSAGE_END",
                "TOOL_CALL_START",
                "TOOL_CALL_ARGS",
                "TOOL_CALL_END"
            ]
        );
        assert_eq!(events[5]["messageId"], "a1");
        assert_eq!(events[9]["parentMessageId"], "a1");
        assert_eq!(events[10]["delta"], "{\"n\":1}");
    }

    #[test]
    fn text_after_tool_results_is_a_new_message_and_answered_results_are_not_echoed() {
        let answered = HashSet::from(["c1".to_string()]);
        let mut mapper = EventMapper::new("t", "r", answered);
        mapper.begin_turn("a1", true);
        let echoed = mapper.map(&TurnEvent::ToolResult(ToolResultEvent {
            message_id: MessageId::new("a1"),
            tool_name: "pick".into(),
            output: json!({"ok": true}),
            call_id: "c1".into(),
            duration_ms: 0,
            invalidates: None,
        }));
        assert!(echoed.is_empty());
        let events = mapper.map(&TurnEvent::TextDelta(delta("text", 3, "done", true)));
        assert_eq!(events[0]["messageId"], "a1:3");
    }

    #[test]
    fn backend_results_are_sent_as_tool_call_results() {
        let mut mapper = EventMapper::new("t", "r", HashSet::new());
        mapper.begin_turn("a1", false);
        let events = mapper.map(&TurnEvent::ToolResult(ToolResultEvent {
            message_id: MessageId::new("a1"),
            tool_name: "clock".into(),
            output: json!({"now": 1}),
            call_id: "b1".into(),
            duration_ms: 3,
            invalidates: None,
        }));
        assert_eq!(
            events[0],
            json!({"type": "TOOL_CALL_RESULT", "messageId": "b1:result", "toolCallId": "b1",
                   "content": "{\"now\":1}", "role": "tool"})
        );
    }

    #[test]
    fn run_end_depends_on_how_the_turn_ended() {
        let mapper = EventMapper::new("t", "r", HashSet::new());
        let done = mapper.run_end(&final_response(None, None));
        assert_eq!(done["type"], "RUN_FINISHED");
        assert!(done.get("outcome").is_none());
        let usage = json!([{"provider": "builtin", "model": "echo",
                            "inputTokens": 0, "outputTokens": 0, "totalTokens": 0}]);
        assert_eq!(done["usage"], usage);
        let pending = PendingToolCall {
            tool_name: "pick".into(),
            call_id: "c1".into(),
            arguments: json!({}),
            queued: vec!["c2".into()],
        };
        let waiting = mapper.run_end(&final_response(Some(pending), None));
        assert_eq!(
            waiting["outcome"],
            json!({"type": "success", "pendingToolCallIds": ["c1", "c2"]})
        );
        let cancelled = mapper.run_end(&final_response(None, Some("cancelled")));
        assert_eq!(cancelled["outcome"], json!({"type": "cancelled"}));
        let failed = mapper.run_end(&final_response(None, Some("rate_limit")));
        assert_eq!(
            failed,
            json!({"type": "RUN_ERROR", "message": "it was rate_limit", "code": "rate_limit", "usage": usage})
        );
    }

    #[test]
    fn a_frame_is_one_data_line() {
        assert_eq!(
            sse_frame(&json!({"a": 1})),
            Bytes::from("data: {\"a\":1}\n\n")
        );
    }
}
