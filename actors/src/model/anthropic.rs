//! Anthropic Messages adapter (`anthropic:*`): turns a `ModelRequest` into a
//! streamed `POST {base_url}/v1/messages` with prompt-cache breakpoints, and
//! the SSE events back into `ModelEvent`s. It translates wire formats and
//! nothing else.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};
use serde_json::{json, Map, Value};

use super::sse::SseEvent;
use super::wire::{self, Decoder, Outbox};
use super::{
    AssistantPart, ChatItem, ContentPart, MediaSource, ModelClient, ModelError, ModelErrorKind,
    ModelEvent, ModelRequest, ModelStream, Resend, TokenUsage, ToolResultItem, Transcript,
};

pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
pub const API_VERSION: &str = "2023-06-01";

/// `max_tokens` when the request sets no limit and thinking is off.
const DEFAULT_MAX_TOKENS: u32 = 8192;
/// Answer tokens allowed on top of the thinking budget when the request sets no limit.
const DEFAULT_ANSWER_TOKENS_AFTER_THINKING: u32 = 4096;
/// The smallest `budget_tokens` the API accepts; smaller budgets turn thinking off.
const MIN_THINKING_BUDGET: u32 = 1024;

/// One configured Anthropic model.
#[derive(Clone, Debug)]
pub struct AnthropicModel {
    /// Shared connection pool; built with the connect timeout (`wire::build_http_client`).
    pub client: reqwest::Client,
    /// API root without `/v1/messages`, e.g. `https://api.anthropic.com`.
    pub base_url: String,
    /// Sent as `x-api-key` when set.
    pub api_key: Option<SecretString>,
    /// The provider's model name, sent as `model` (the id's part after `anthropic:`).
    pub model: String,
    /// Longest silence allowed before headers and between chunks.
    pub idle_timeout: Duration,
    /// Largest SSE event or line accepted from the provider.
    pub max_event_bytes: usize,
    /// Names the provider in error messages (its configured name).
    pub label: Arc<str>,
}

impl AnthropicModel {
    /// `base_url: None` means the public Anthropic API.
    pub fn new(
        client: reqwest::Client,
        base_url: Option<String>,
        api_key: Option<SecretString>,
        model: impl Into<String>,
    ) -> AnthropicModel {
        let base_url = base_url.unwrap_or_else(|| DEFAULT_BASE_URL.to_string());
        AnthropicModel {
            client,
            base_url: base_url.trim_end_matches('/').to_string(),
            api_key,
            model: model.into(),
            idle_timeout: wire::DEFAULT_IDLE_TIMEOUT,
            max_event_bytes: wire::DEFAULT_MAX_EVENT_BYTES,
            label: Arc::from("Anthropic"),
        }
    }

    pub fn with_idle_timeout(mut self, idle_timeout: Duration) -> AnthropicModel {
        self.idle_timeout = idle_timeout;
        self
    }

    pub fn with_max_event_bytes(mut self, max_event_bytes: usize) -> AnthropicModel {
        self.max_event_bytes = max_event_bytes;
        self
    }

    pub fn with_label(mut self, label: &str) -> AnthropicModel {
        self.label = Arc::from(label);
        self
    }

    /// The JSON body for `request`. Deterministic, with cache breakpoints on
    /// the system block, the last tool and the end of the replayed history,
    /// so every turn reads the previous turns from the prompt cache.
    pub fn request_body(&self, request: &ModelRequest) -> Value {
        let settings = &request.settings;
        let thinking_budget = settings
            .thinking_budget
            .filter(|budget| *budget >= MIN_THINKING_BUDGET);
        let max_tokens = match thinking_budget {
            // `max_tokens` must exceed the budget: the limit the request sets
            // is for the answer, on top of the thinking.
            Some(budget) => {
                budget
                    + settings
                        .max_output_tokens
                        .unwrap_or(DEFAULT_ANSWER_TOKENS_AFTER_THINKING)
            }
            None => settings.max_output_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
        };
        let mut body = Map::new();
        body.insert("model".into(), json!(self.model));
        body.insert("max_tokens".into(), json!(max_tokens));
        body.insert("stream".into(), json!(true));
        if !request.system.is_empty() {
            body.insert(
                "system".into(),
                json!([{"type": "text", "text": request.system, "cache_control": ephemeral()}]),
            );
        }
        body.insert("messages".into(), Value::Array(messages(&request.messages)));
        if !request.tools.is_empty() {
            let mut tools: Vec<Value> = request
                .tools
                .iter()
                .map(|tool| {
                    json!({
                        "name": tool.name,
                        "description": tool.description,
                        "input_schema": tool.parameters,
                    })
                })
                .collect();
            if let Some(Value::Object(last)) = tools.last_mut() {
                last.insert("cache_control".into(), ephemeral());
            }
            body.insert("tools".into(), Value::Array(tools));
        }
        match thinking_budget {
            // The API refuses a temperature together with thinking.
            Some(budget) => {
                body.insert(
                    "thinking".into(),
                    json!({"type": "enabled", "budget_tokens": budget}),
                );
            }
            None => {
                if let Some(temperature) = settings.temperature {
                    body.insert("temperature".into(), json!(temperature));
                }
            }
        }
        Value::Object(body)
    }
}

impl ModelClient for AnthropicModel {
    fn stream(&self, request: ModelRequest) -> ModelStream {
        let body = self.request_body(&request);
        let url = format!("{}/v1/messages", self.base_url);
        let mut http_request = self
            .client
            .post(url)
            .header("anthropic-version", API_VERSION)
            .json(&body);
        if let Some(api_key) = &self.api_key {
            http_request = http_request.header("x-api-key", api_key.expose_secret());
        }
        wire::stream_sse(
            Arc::clone(&self.label),
            http_request,
            wire::StreamLimits {
                idle_timeout: self.idle_timeout,
                max_event_bytes: self.max_event_bytes,
            },
            EventDecoder::default(),
        )
    }
}

fn ephemeral() -> Value {
    json!({"type": "ephemeral"})
}

/// Maps the transcript to alternating `user`/`assistant` messages: tool
/// results and any user item right after them share one `user` message, as
/// do other adjacent items of one role, since the API requires alternation.
fn messages(items: &Transcript) -> Vec<Value> {
    let mut messages: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for item in items {
        let (role, blocks) = match item {
            ChatItem::User(parts) => ("user", parts.iter().filter_map(content_block).collect()),
            ChatItem::Assistant(parts) => ("assistant", assistant_blocks(parts)),
            ChatItem::ToolResult(result) => ("user", vec![tool_result_block(result)]),
        };
        // The API rejects empty messages; a response that was only unsigned
        // thinking has nothing to replay.
        if blocks.is_empty() {
            continue;
        }
        match messages.last_mut() {
            Some((last_role, last_blocks)) if *last_role == role => last_blocks.extend(blocks),
            _ => messages.push((role, blocks)),
        }
    }
    // The end of the replayed history is everything before the newest user
    // message; its last block is the breakpoint the next turn reads from.
    let n_messages = messages.len();
    if n_messages >= 2 && messages[n_messages - 1].0 == "user" {
        let history_end = &mut messages[n_messages - 2].1;
        // Thinking blocks cannot carry `cache_control`.
        let cacheable = history_end.iter_mut().rev().find(|block| {
            !matches!(
                block.get("type").and_then(Value::as_str),
                Some("thinking" | "redacted_thinking")
            )
        });
        if let Some(Value::Object(block)) = cacheable {
            block.insert("cache_control".into(), ephemeral());
        }
    }
    messages
        .into_iter()
        .map(|(role, blocks)| json!({"role": role, "content": blocks}))
        .collect()
}

/// Empty text is dropped: the API rejects empty text blocks.
fn content_block(part: &ContentPart) -> Option<Value> {
    match part {
        ContentPart::Text(text) if text.is_empty() => None,
        ContentPart::Text(text) => Some(json!({"type": "text", "text": text})),
        ContentPart::Image(source) => {
            Some(json!({"type": "image", "source": media_source(source)}))
        }
        ContentPart::Document { source, name } => Some(document_block(source, name.as_deref())),
    }
}

fn media_source(source: &MediaSource) -> Value {
    match source {
        MediaSource::Base64 { media_type, data } => {
            json!({"type": "base64", "media_type": media_type, "data": data})
        }
        MediaSource::Url(url) => json!({"type": "url", "url": url}),
    }
}

/// Base64 text documents are decoded into a plain-text source (the API's
/// base64 source takes PDFs only); other documents pass through as sources.
fn document_block(source: &MediaSource, name: Option<&str>) -> Value {
    let source_value = match source {
        MediaSource::Base64 { media_type, data } if media_type.starts_with("text/") => {
            match wire::decode_base64_text(data) {
                Some(text) => json!({"type": "text", "media_type": "text/plain", "data": text}),
                None => media_source(source),
            }
        }
        other => media_source(other),
    };
    let mut block = Map::new();
    block.insert("type".into(), json!("document"));
    block.insert("source".into(), source_value);
    if let Some(name) = name {
        block.insert("title".into(), json!(name));
    }
    Value::Object(block)
}

fn assistant_blocks(parts: &[AssistantPart]) -> Vec<Value> {
    parts
        .iter()
        .filter_map(|part| match part {
            // Thinking without its signature is refused by the API.
            AssistantPart::Thinking {
                text,
                signature: Some(signature),
            } => Some(json!({
                "type": "thinking",
                "thinking": text,
                "signature": signature,
            })),
            AssistantPart::Thinking {
                signature: None, ..
            } => None,
            AssistantPart::Text(text) if text.is_empty() => None,
            AssistantPart::Text(text) => Some(json!({"type": "text", "text": text})),
            AssistantPart::ToolCall {
                id,
                name,
                arguments,
            } => Some(json!({
                "type": "tool_use",
                "id": id,
                "name": name,
                "input": tool_input(arguments),
            })),
        })
        .collect()
}

/// `input` must be an object: arguments stored as raw text are parsed if
/// they hold one, and anything else is replayed as `{}`.
fn tool_input(arguments: &Value) -> Value {
    match arguments {
        Value::Object(_) => arguments.clone(),
        Value::String(raw) => match serde_json::from_str::<Value>(raw) {
            Ok(parsed @ Value::Object(_)) => parsed,
            _ => json!({}),
        },
        _ => json!({}),
    }
}

fn tool_result_block(result: &ToolResultItem) -> Value {
    let content: Vec<Value> = result.content.iter().filter_map(content_block).collect();
    let mut block = Map::new();
    block.insert("type".into(), json!("tool_result"));
    block.insert("tool_use_id".into(), json!(result.call_id));
    if !content.is_empty() {
        block.insert("content".into(), Value::Array(content));
    }
    block.insert("is_error".into(), json!(result.is_error));
    Value::Object(block)
}

/// A `tool_use` block whose input is still arriving.
#[derive(Debug)]
struct PartialToolUse {
    id: String,
    name: String,
    /// `input_json_delta.partial_json` pieces, concatenated.
    input_json: String,
    /// The block's initial `input`, used when no delta arrives.
    initial_input: Value,
}

#[derive(Debug, Default)]
struct EventDecoder {
    /// Open tool-use blocks by content block index.
    tool_uses: HashMap<u64, PartialToolUse>,
    /// Counts from `message_start`, completed by `message_delta`; sent at `message_stop`.
    usage: TokenUsage,
    saw_usage: bool,
}

impl EventDecoder {
    fn block_start(&mut self, event: &Value, out: &mut Outbox) {
        let index = event.get("index").and_then(Value::as_u64).unwrap_or(0);
        let Some(block) = event.get("content_block") else {
            return;
        };
        let text_of = |key: &str| {
            block
                .get(key)
                .and_then(Value::as_str)
                .filter(|text| !text.is_empty())
                .map(str::to_string)
        };
        match block.get("type").and_then(Value::as_str) {
            Some("text") => {
                if let Some(text) = text_of("text") {
                    out.push_back(Ok(ModelEvent::TextDelta(text)));
                }
            }
            Some("thinking") => {
                if let Some(text) = text_of("thinking") {
                    out.push_back(Ok(ModelEvent::ThinkingDelta(text)));
                }
            }
            Some("tool_use") => {
                let tool_use = PartialToolUse {
                    id: text_of("id").unwrap_or_default(),
                    name: text_of("name").unwrap_or_default(),
                    input_json: String::new(),
                    initial_input: block.get("input").cloned().unwrap_or(Value::Null),
                };
                self.tool_uses.insert(index, tool_use);
            }
            // `redacted_thinking` cannot be represented in `ModelEvent`; it is dropped.
            _ => {}
        }
    }

    fn block_delta(&mut self, event: &Value, out: &mut Outbox) {
        let index = event.get("index").and_then(Value::as_u64).unwrap_or(0);
        let Some(delta) = event.get("delta") else {
            return;
        };
        let field = |key: &str| {
            delta
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        match delta.get("type").and_then(Value::as_str) {
            Some("text_delta") => out.push_back(Ok(ModelEvent::TextDelta(field("text")))),
            Some("thinking_delta") => {
                out.push_back(Ok(ModelEvent::ThinkingDelta(field("thinking"))))
            }
            Some("signature_delta") => {
                out.push_back(Ok(ModelEvent::ThinkingSignature(field("signature"))))
            }
            Some("input_json_delta") => {
                if let Some(tool_use) = self.tool_uses.get_mut(&index) {
                    tool_use.input_json.push_str(&field("partial_json"));
                }
            }
            _ => {}
        }
    }

    fn block_stop(&mut self, event: &Value, out: &mut Outbox) {
        let index = event.get("index").and_then(Value::as_u64).unwrap_or(0);
        let Some(tool_use) = self.tool_uses.remove(&index) else {
            return;
        };
        let arguments = if !tool_use.input_json.trim().is_empty() {
            tool_use.input_json
        } else if tool_use
            .initial_input
            .as_object()
            .is_some_and(|input| !input.is_empty())
        {
            tool_use.initial_input.to_string()
        } else {
            "{}".to_string()
        };
        out.push_back(Ok(ModelEvent::ToolCall {
            id: tool_use.id,
            name: tool_use.name,
            arguments,
        }));
    }

    /// Reads whichever counts `usage` carries: `message_start` has the input
    /// side, `message_delta` the cumulative output (and sometimes input again).
    fn read_usage(&mut self, usage: &Value) {
        let count = |key: &str| usage.get(key).and_then(Value::as_u64);
        if let Some(tokens) = count("input_tokens") {
            self.usage.input_tokens = tokens;
        }
        if let Some(tokens) = count("output_tokens") {
            self.usage.output_tokens = tokens;
        }
        if let Some(tokens) = count("cache_read_input_tokens") {
            self.usage.cache_read_tokens = tokens;
        }
        if let Some(tokens) = count("cache_creation_input_tokens") {
            self.usage.cache_write_tokens = tokens;
        }
        self.saw_usage = true;
    }

    /// `input_tokens` counts every prompt token, as OpenAI's does: Anthropic
    /// reports cache reads and writes apart from `input_tokens`, so they are added.
    fn total_usage(&self) -> TokenUsage {
        TokenUsage {
            input_tokens: self.usage.input_tokens
                + self.usage.cache_read_tokens
                + self.usage.cache_write_tokens,
            ..self.usage
        }
    }
}

impl Decoder for EventDecoder {
    fn event(&mut self, event: SseEvent, out: &mut Outbox) -> bool {
        let payload: Value = match serde_json::from_str(&event.data) {
            Ok(payload) => payload,
            Err(error) => {
                out.push_back(Err(ModelError {
                    kind: ModelErrorKind::ProviderError,
                    resend: Resend::Never,
                    message: wire::truncate(&format!(
                        "Anthropic sent an unreadable event ({error}): {}",
                        event.data
                    )),
                }));
                return true;
            }
        };
        let event_type = payload
            .get("type")
            .and_then(Value::as_str)
            .or(event.event.as_deref())
            .unwrap_or_default();
        match event_type {
            "message_start" => {
                if let Some(usage) = payload.pointer("/message/usage") {
                    self.read_usage(usage);
                }
            }
            "content_block_start" => self.block_start(&payload, out),
            "content_block_delta" => self.block_delta(&payload, out),
            "content_block_stop" => self.block_stop(&payload, out),
            "message_delta" => {
                if let Some(usage) = payload.get("usage") {
                    self.read_usage(usage);
                }
            }
            "message_stop" => {
                if self.saw_usage {
                    out.push_back(Ok(ModelEvent::Usage(self.total_usage())));
                }
                return true;
            }
            "error" => {
                out.push_back(Err(stream_error(payload.get("error").unwrap_or(&payload))));
                return true;
            }
            // `ping` and event types added later.
            _ => {}
        }
        false
    }

    fn end(&mut self, out: &mut Outbox) {
        out.push_back(Err(ModelError {
            kind: ModelErrorKind::ProviderError,
            resend: Resend::Never,
            message: "Anthropic stream ended before message_stop".to_string(),
        }));
    }
}

fn stream_error(error: &Value) -> ModelError {
    let error_type = error
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let kind = match error_type {
        "rate_limit_error" => ModelErrorKind::RateLimit,
        "authentication_error" | "permission_error" => ModelErrorKind::ProviderAuth,
        "invalid_request_error" | "not_found_error" | "request_too_large" => {
            ModelErrorKind::ProviderClientError
        }
        // `overloaded_error`, `api_error` and anything new.
        _ => ModelErrorKind::ProviderError,
    };
    let text = error
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or_default();
    ModelError {
        kind,
        resend: Resend::Never,
        message: wire::truncate(&format!("Anthropic stream error {error_type}: {text}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ModelId, ModelSettings, ToolSpec};

    fn decode(events: &[Value]) -> Vec<Result<ModelEvent, ModelError>> {
        let mut decoder = EventDecoder::default();
        let mut out = Outbox::new();
        for event in events {
            let sse_event = SseEvent {
                event: None,
                data: event.to_string(),
            };
            if decoder.event(sse_event, &mut out) {
                return out.into_iter().collect();
            }
        }
        decoder.end(&mut out);
        out.into_iter().collect()
    }

    fn model() -> AnthropicModel {
        AnthropicModel::new(super::wire::build_http_client(), None, None, "claude-test")
    }

    fn request(messages: Vec<ChatItem>, settings: ModelSettings) -> ModelRequest {
        ModelRequest {
            model: ModelId::parse("anthropic:claude-test").unwrap(),
            system: "sys".into(),
            messages: messages.into(),
            tools: vec![],
            settings,
            purpose: Default::default(),
        }
    }

    fn user(text: &str) -> ChatItem {
        ChatItem::User(vec![ContentPart::Text(text.into())])
    }

    fn tool_result(call_id: &str, text: &str) -> ChatItem {
        ChatItem::ToolResult(ToolResultItem {
            call_id: call_id.into(),
            tool_name: "t".into(),
            content: vec![ContentPart::Text(text.into())],
            is_error: false,
        })
    }

    #[test]
    fn thinking_text_and_tool_use_events_decode_in_order() {
        let events = decode(&[
            json!({"type":"message_start","message":{"usage":{"input_tokens":5,"cache_read_input_tokens":7,"cache_creation_input_tokens":1,"output_tokens":1}}}),
            json!({"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}),
            json!({"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm"}}),
            json!({"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"sig"}}),
            json!({"type":"content_block_stop","index":0}),
            json!({"type":"ping"}),
            json!({"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}),
            json!({"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"ok"}}),
            json!({"type":"content_block_stop","index":1}),
            json!({"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"t1","name":"f","input":{}}}),
            json!({"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"a\":"}}),
            json!({"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"2}"}}),
            json!({"type":"content_block_stop","index":2}),
            json!({"type":"content_block_start","index":3,"content_block":{"type":"tool_use","id":"t2","name":"g","input":{}}}),
            json!({"type":"content_block_stop","index":3}),
            json!({"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":30}}),
            json!({"type":"message_stop"}),
        ]);
        assert_eq!(
            events,
            vec![
                Ok(ModelEvent::ThinkingDelta("hmm".into())),
                Ok(ModelEvent::ThinkingSignature("sig".into())),
                Ok(ModelEvent::TextDelta("ok".into())),
                Ok(ModelEvent::ToolCall {
                    id: "t1".into(),
                    name: "f".into(),
                    arguments: "{\"a\":2}".into()
                }),
                Ok(ModelEvent::ToolCall {
                    id: "t2".into(),
                    name: "g".into(),
                    arguments: "{}".into()
                }),
                Ok(ModelEvent::Usage(TokenUsage {
                    input_tokens: 13,
                    output_tokens: 30,
                    cache_read_tokens: 7,
                    cache_write_tokens: 1
                })),
            ]
        );
    }

    #[test]
    fn error_events_map_to_error_kinds() {
        let check = |error_type: &str, kind: ModelErrorKind| {
            let events =
                decode(&[json!({"type":"error","error":{"type":error_type,"message":"m"}})]);
            assert_eq!(events.len(), 1);
            assert_eq!(events[0].as_ref().unwrap_err().kind, kind, "{error_type}");
        };
        check("overloaded_error", ModelErrorKind::ProviderError);
        check("rate_limit_error", ModelErrorKind::RateLimit);
        check("authentication_error", ModelErrorKind::ProviderAuth);
        check("permission_error", ModelErrorKind::ProviderAuth);
        check("invalid_request_error", ModelErrorKind::ProviderClientError);
    }

    #[test]
    fn stream_cut_before_message_stop_is_a_provider_error() {
        let events = decode(&[json!({"type":"message_start","message":{"usage":{}}})]);
        assert_eq!(
            events[0].as_ref().unwrap_err().kind,
            ModelErrorKind::ProviderError
        );
    }

    #[test]
    fn tool_results_and_following_user_item_share_one_user_message() {
        let items = vec![
            user("q"),
            ChatItem::Assistant(vec![
                AssistantPart::Thinking {
                    text: "unsigned".into(),
                    signature: None,
                },
                AssistantPart::ToolCall {
                    id: "a".into(),
                    name: "t".into(),
                    arguments: json!({}),
                },
                AssistantPart::ToolCall {
                    id: "b".into(),
                    name: "t".into(),
                    arguments: json!("not json"),
                },
            ]),
            tool_result("a", "1"),
            tool_result("b", "2"),
            user("steer"),
        ];
        let messages = messages(&items.into());
        assert_eq!(messages.len(), 3);
        assert_eq!(
            messages[1]["content"],
            json!([
                {"type": "tool_use", "id": "a", "name": "t", "input": {}},
                {"type": "tool_use", "id": "b", "name": "t", "input": {}, "cache_control": {"type": "ephemeral"}}
            ])
        );
        assert_eq!(
            messages[2],
            json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "a", "content": [{"type": "text", "text": "1"}], "is_error": false},
                {"type": "tool_result", "tool_use_id": "b", "content": [{"type": "text", "text": "2"}], "is_error": false},
                {"type": "text", "text": "steer"}
            ]})
        );
    }

    #[test]
    fn thinking_sets_budget_and_max_tokens_and_drops_temperature() {
        let settings = ModelSettings {
            temperature: Some(0.5),
            thinking_budget: Some(2000),
            max_output_tokens: None,
        };
        let body = model().request_body(&request(vec![user("q")], settings));
        assert_eq!(
            body["thinking"],
            json!({"type": "enabled", "budget_tokens": 2000})
        );
        assert_eq!(body["max_tokens"], 6096);
        assert!(body.get("temperature").is_none());

        let settings = ModelSettings {
            temperature: Some(0.5),
            thinking_budget: Some(500),
            max_output_tokens: None,
        };
        let body = model().request_body(&request(vec![user("q")], settings));
        assert!(body.get("thinking").is_none());
        assert_eq!(body["max_tokens"], 8192);
        assert_eq!(body["temperature"], 0.5);
    }

    #[test]
    fn system_and_last_tool_carry_cache_breakpoints() {
        let mut request = request(vec![user("q")], ModelSettings::default());
        let tool = |name: &'static str| ToolSpec {
            name: name.into(),
            description: "d".into(),
            parameters: std::sync::Arc::new(json!({"type": "object"})),
        };
        request.tools = vec![tool("a"), tool("b")];
        let body = model().request_body(&request);
        assert_eq!(
            body["system"],
            json!([{"type": "text", "text": "sys", "cache_control": {"type": "ephemeral"}}])
        );
        assert!(body["tools"][0].get("cache_control").is_none());
        assert_eq!(
            body["tools"][1]["cache_control"],
            json!({"type": "ephemeral"})
        );
        assert_eq!(body["tools"][1]["input_schema"], json!({"type": "object"}));
        // A first turn has no history to mark.
        assert!(body["messages"][0]["content"][0]
            .get("cache_control")
            .is_none());
    }

    #[test]
    fn text_documents_are_decoded_and_pdfs_pass_as_base64() {
        let text = ContentPart::Document {
            source: MediaSource::Base64 {
                media_type: "text/plain".into(),
                data: "aGk=".into(),
            },
            name: Some("n.txt".into()),
        };
        let pdf = ContentPart::Document {
            source: MediaSource::Base64 {
                media_type: "application/pdf".into(),
                data: "JVBE".into(),
            },
            name: None,
        };
        assert_eq!(
            content_block(&text),
            Some(
                json!({"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "hi"}, "title": "n.txt"})
            )
        );
        assert_eq!(
            content_block(&pdf),
            Some(
                json!({"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBE"}})
            )
        );
    }
}
