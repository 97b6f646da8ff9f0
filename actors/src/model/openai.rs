//! OpenAI Chat Completions adapter (`openai:*`): turns a `ModelRequest` into
//! a streamed `POST {base_url}/chat/completions` and the SSE chunks back into
//! `ModelEvent`s. Any compatible server (vLLM, llama.cpp, Ollama, OpenRouter)
//! works through `base_url`. It translates wire formats and nothing else.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};
use serde_json::{json, Map, Value};

use super::sse::SseEvent;
use super::wire::{self, Decoder, Outbox};
use super::{
    AssistantPart, ChatItem, ContentPart, MediaSource, ModelClient, ModelError, ModelErrorKind,
    ModelEvent, ModelRequest, ModelStream, Resend, TokenUsage, ToolResultItem,
};

pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// Thinking budgets up to this many tokens ask for `reasoning_effort: low`.
const LOW_EFFORT_MAX_BUDGET: u32 = 2048;
/// Budgets above `LOW_EFFORT_MAX_BUDGET` and up to this ask for `medium`; more is `high`.
const MEDIUM_EFFORT_MAX_BUDGET: u32 = 8192;

/// One configured OpenAI-compatible model.
#[derive(Clone, Debug)]
pub struct OpenAiModel {
    /// Shared connection pool; built with the connect timeout (`wire::build_http_client`).
    pub client: reqwest::Client,
    /// API root without the `/chat/completions` suffix, e.g. `https://api.openai.com/v1`.
    pub base_url: String,
    /// Sent as a bearer token when set; local servers usually need none.
    pub api_key: Option<SecretString>,
    /// The provider's model name, sent as `model` (the id's part after `openai:`).
    pub model: String,
    /// Longest silence allowed before headers and between chunks.
    pub idle_timeout: Duration,
    /// Largest SSE event or line accepted from the provider.
    pub max_event_bytes: usize,
    /// Names the provider in error messages (its configured name).
    pub label: Arc<str>,
}

impl OpenAiModel {
    /// `base_url: None` means the public OpenAI API.
    pub fn new(
        client: reqwest::Client,
        base_url: Option<String>,
        api_key: Option<SecretString>,
        model: impl Into<String>,
    ) -> OpenAiModel {
        let base_url = base_url.unwrap_or_else(|| DEFAULT_BASE_URL.to_string());
        OpenAiModel {
            client,
            base_url: base_url.trim_end_matches('/').to_string(),
            api_key,
            model: model.into(),
            idle_timeout: wire::DEFAULT_IDLE_TIMEOUT,
            max_event_bytes: wire::DEFAULT_MAX_EVENT_BYTES,
            label: Arc::from("OpenAI"),
        }
    }

    pub fn with_idle_timeout(mut self, idle_timeout: Duration) -> OpenAiModel {
        self.idle_timeout = idle_timeout;
        self
    }

    pub fn with_max_event_bytes(mut self, max_event_bytes: usize) -> OpenAiModel {
        self.max_event_bytes = max_event_bytes;
        self
    }

    pub fn with_label(mut self, label: &str) -> OpenAiModel {
        self.label = Arc::from(label);
        self
    }

    /// The JSON body for `request`, encoded; deterministic, so an unchanged
    /// history gives an unchanged prefix for the provider's prompt cache.
    /// Each stored message's part of `messages` is encoded once and kept
    /// with its transcript chunk, so a long conversation's request copies
    /// bytes instead of encoding its whole history again.
    pub fn encode_body(&self, request: &ModelRequest) -> Vec<u8> {
        let mut out = Vec::with_capacity(1024);
        out.extend_from_slice(b"{\"model\":");
        write_json(&mut out, &self.model);
        out.extend_from_slice(
            b",\"stream\":true,\"stream_options\":{\"include_usage\":true},\"messages\":[",
        );
        write_messages(&mut out, request);
        out.push(b']');
        for (key, value) in self.options(request) {
            out.push(b',');
            write_json(&mut out, key);
            out.push(b':');
            write_json(&mut out, &value);
        }
        out.push(b'}');
        out
    }

    /// [`Self::encode_body`] as a JSON value (tests, tools).
    pub fn request_body(&self, request: &ModelRequest) -> Value {
        serde_json::from_slice(&self.encode_body(request)).expect("the adapter encodes valid JSON")
    }

    /// The body's fields after `messages`: tools and settings.
    fn options(&self, request: &ModelRequest) -> Vec<(&'static str, Value)> {
        let mut options = Vec::new();
        if !request.tools.is_empty() {
            let tools = request
                .tools
                .iter()
                .map(|tool| {
                    json!({
                        "type": "function",
                        "function": {
                            "name": tool.name,
                            "description": tool.description,
                            "parameters": tool.parameters,
                        },
                    })
                })
                .collect();
            options.push(("tools", Value::Array(tools)));
        }
        let settings = &request.settings;
        if let Some(temperature) = settings.temperature {
            options.push(("temperature", json!(temperature)));
        }
        if let Some(max_output_tokens) = settings.max_output_tokens {
            // `max_tokens` is deprecated and rejected by reasoning models.
            options.push(("max_completion_tokens", json!(max_output_tokens)));
        }
        if let Some(budget) = settings.thinking_budget.filter(|budget| *budget > 0) {
            options.push(("reasoning_effort", json!(reasoning_effort(budget))));
        }
        options
    }
}

/// Appends `value`'s compact JSON. Writing to a `Vec` cannot fail, and
/// strings and `Value`s always serialise.
fn write_json(out: &mut Vec<u8>, value: &(impl serde::Serialize + ?Sized)) {
    serde_json::to_writer(out, value).expect("strings and JSON values always serialise");
}

impl ModelClient for OpenAiModel {
    fn stream(&self, request: ModelRequest) -> ModelStream {
        let body = self.encode_body(&request);
        let url = format!("{}/chat/completions", self.base_url);
        let mut http_request = self
            .client
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body);
        if let Some(api_key) = &self.api_key {
            http_request = http_request.bearer_auth(api_key.expose_secret());
        }
        wire::stream_sse(
            Arc::clone(&self.label),
            http_request,
            wire::StreamLimits {
                idle_timeout: self.idle_timeout,
                max_event_bytes: self.max_event_bytes,
            },
            ChunkDecoder::default(),
        )
    }
}

fn reasoning_effort(budget: u32) -> &'static str {
    if budget <= LOW_EFFORT_MAX_BUDGET {
        "low"
    } else if budget <= MEDIUM_EFFORT_MAX_BUDGET {
        "medium"
    } else {
        "high"
    }
}

/// Appends the request's messages, comma-separated: the system prompt,
/// then each chunk's cached encoding where it stands alone, or its items
/// one by one where a run of tool results carries media across it.
fn write_messages(out: &mut Vec<u8>, request: &ModelRequest) {
    let mut first = true;
    let mut separate = |out: &mut Vec<u8>| {
        if !std::mem::take(&mut first) {
            out.push(b',');
        }
    };
    if !request.system.is_empty() {
        separate(out);
        // Written around the prompt, which `json!` would copy per request.
        out.extend_from_slice(b"{\"role\":\"system\",\"content\":");
        write_json(out, &request.system);
        out.push(b'}');
    }
    let mut tool_media: Vec<Value> = Vec::new();
    for chunk in request.messages.chunks() {
        if tool_media.is_empty() {
            if let Some(encoded) = chunk.openai_messages(encode_alone) {
                if !encoded.is_empty() {
                    separate(out);
                    out.extend_from_slice(encoded.as_bytes());
                }
                continue;
            }
        }
        for item in chunk.iter() {
            map_item(item, &mut tool_media, &mut |message| {
                separate(out);
                write_json(out, &message);
            });
        }
    }
    if !tool_media.is_empty() {
        separate(out);
        write_json(out, &json!({"role": "user", "content": tool_media}));
    }
}

/// `items`' messages, comma-separated, when they map without carrying tool
/// media past their end; `None` otherwise.
fn encode_alone(items: &[ChatItem]) -> Option<String> {
    let mut out = Vec::new();
    let mut tool_media = Vec::new();
    for item in items {
        map_item(item, &mut tool_media, &mut |message| {
            if !out.is_empty() {
                out.push(b',');
            }
            write_json(&mut out, &message);
        });
    }
    if !tool_media.is_empty() {
        return None;
    }
    Some(String::from_utf8(out).expect("serde_json writes UTF-8"))
}

/// Emits `item`'s message. Media returned by the current run of tool
/// results wait in `tool_media` (OpenAI tool messages take text only) and
/// follow the run in one user message, emitted before the next other item.
fn map_item(item: &ChatItem, tool_media: &mut Vec<Value>, emit: &mut impl FnMut(Value)) {
    if !matches!(item, ChatItem::ToolResult(_)) && !tool_media.is_empty() {
        emit(json!({"role": "user", "content": std::mem::take(tool_media)}));
    }
    match item {
        ChatItem::User(parts) => emit(user_message(parts)),
        ChatItem::Assistant(parts) => emit(assistant_message(parts)),
        ChatItem::ToolResult(result) => emit(tool_message(result, tool_media)),
    }
}

/// A lone text part is sent as a plain string (the form every compatible
/// server accepts); anything else as a content-part array.
fn user_message(parts: &[ContentPart]) -> Value {
    if let [ContentPart::Text(text)] = parts {
        return json!({"role": "user", "content": text});
    }
    let content: Vec<Value> = parts.iter().map(content_part).collect();
    json!({"role": "user", "content": content})
}

fn content_part(part: &ContentPart) -> Value {
    match part {
        ContentPart::Text(text) => json!({"type": "text", "text": text}),
        ContentPart::Image(source) => {
            json!({"type": "image_url", "image_url": {"url": source.to_data_uri()}})
        }
        ContentPart::Document { source, name } => document_part(source, name.as_deref()),
    }
}

/// Chat Completions takes files (PDFs) as base64 data URIs only. Text
/// documents are inlined as text, since file inputs reject them, and URL
/// documents are named in a text part: the API cannot fetch them.
fn document_part(source: &MediaSource, name: Option<&str>) -> Value {
    let filename = name.unwrap_or("document");
    match source {
        MediaSource::Base64 { media_type, data } if media_type.starts_with("text/") => {
            match wire::decode_base64_text(data) {
                Some(text) => {
                    json!({"type": "text", "text": format!("Document {filename}:\n{text}")})
                }
                None => {
                    json!({"type": "text", "text": format!("Document {filename}: (could not be decoded)")})
                }
            }
        }
        MediaSource::Base64 { .. } => {
            json!({"type": "file", "file": {"filename": filename, "file_data": source.to_data_uri()}})
        }
        MediaSource::Url(url) => {
            json!({"type": "text", "text": format!("Document {filename}: {url}")})
        }
    }
}

/// Thinking is not sent back: Chat Completions has no field for it.
fn assistant_message(parts: &[AssistantPart]) -> Value {
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    for part in parts {
        match part {
            AssistantPart::Thinking { .. } => {}
            AssistantPart::Text(piece) => text.push_str(piece),
            AssistantPart::ToolCall {
                id,
                name,
                arguments,
            } => tool_calls.push(json!({
                "id": id,
                "type": "function",
                "function": {"name": name, "arguments": arguments_text(arguments)},
            })),
        }
    }
    let mut message = Map::new();
    message.insert("role".into(), json!("assistant"));
    let content = match (text.is_empty(), tool_calls.is_empty()) {
        (true, false) => Value::Null,
        // An assistant message needs content or tool calls; a response that
        // was only thinking is replayed as empty text.
        _ => json!(text),
    };
    message.insert("content".into(), content);
    if !tool_calls.is_empty() {
        message.insert("tool_calls".into(), Value::Array(tool_calls));
    }
    Value::Object(message)
}

/// Compact JSON; arguments stored as a string (unparseable model output) are
/// sent back exactly as the model wrote them.
fn arguments_text(arguments: &Value) -> String {
    match arguments {
        Value::String(raw) => raw.clone(),
        other => other.to_string(),
    }
}

fn tool_message(result: &ToolResultItem, tool_media: &mut Vec<Value>) -> Value {
    let mut texts = Vec::new();
    let mut n_media = 0;
    for part in &result.content {
        match part {
            ContentPart::Text(text) => texts.push(text.as_str()),
            media => {
                if n_media == 0 {
                    tool_media.push(json!({
                        "type": "text",
                        "text": format!("Attachments returned by tool {} (call {}):", result.tool_name, result.call_id),
                    }));
                }
                n_media += 1;
                tool_media.push(content_part(media));
            }
        }
    }
    let mut content = texts.join("\n");
    if result.is_error {
        // Chat Completions has no error flag on tool messages; say it in words
        // so a failed host action never reads as a success.
        content.insert_str(0, "Error: ");
    }
    if n_media > 0 {
        if !content.is_empty() {
            content.push('\n');
        }
        content.push_str("(attachments follow in the next user message)");
    }
    json!({"role": "tool", "tool_call_id": result.call_id, "content": content})
}

/// A tool call being assembled from `delta.tool_calls` pieces.
#[derive(Debug, Default)]
struct PartialToolCall {
    id: String,
    name: String,
    arguments: String,
}

#[derive(Debug, Default)]
struct ChunkDecoder {
    /// Calls by their `index`: pieces of parallel calls interleave, and
    /// they are emitted in index order.
    tool_calls: BTreeMap<u64, PartialToolCall>,
    /// The latest usage seen; some compatible servers repeat it per chunk.
    usage: Option<TokenUsage>,
}

impl ChunkDecoder {
    fn flush_tool_calls(&mut self, out: &mut Outbox) {
        for (index, call) in std::mem::take(&mut self.tool_calls) {
            let id = if call.id.is_empty() {
                format!("call_{index}")
            } else {
                call.id
            };
            out.push_back(Ok(ModelEvent::ToolCall {
                id,
                name: call.name,
                arguments: call.arguments,
            }));
        }
    }

    fn finish(&mut self, out: &mut Outbox) {
        self.flush_tool_calls(out);
        if let Some(usage) = self.usage.take() {
            out.push_back(Ok(ModelEvent::Usage(usage)));
        }
    }

    fn delta(&mut self, delta: &Value, out: &mut Outbox) {
        for key in ["reasoning_content", "reasoning"] {
            if let Some(text) = delta
                .get(key)
                .and_then(Value::as_str)
                .filter(|text| !text.is_empty())
            {
                out.push_back(Ok(ModelEvent::ThinkingDelta(text.to_string())));
            }
        }
        if let Some(text) = delta
            .get("content")
            .and_then(Value::as_str)
            .filter(|text| !text.is_empty())
        {
            out.push_back(Ok(ModelEvent::TextDelta(text.to_string())));
        }
        let Some(pieces) = delta.get("tool_calls").and_then(Value::as_array) else {
            return;
        };
        for (position, piece) in pieces.iter().enumerate() {
            let index = piece
                .get("index")
                .and_then(Value::as_u64)
                .unwrap_or(position as u64);
            let call = self.tool_calls.entry(index).or_default();
            if let Some(id) = piece.get("id").and_then(Value::as_str) {
                call.id.push_str(id);
            }
            let function = piece.get("function");
            if let Some(name) = function
                .and_then(|function| function.get("name"))
                .and_then(Value::as_str)
            {
                call.name.push_str(name);
            }
            if let Some(arguments) = function
                .and_then(|function| function.get("arguments"))
                .and_then(Value::as_str)
            {
                call.arguments.push_str(arguments);
            }
        }
    }
}

impl Decoder for ChunkDecoder {
    fn event(&mut self, event: SseEvent, out: &mut Outbox) -> bool {
        if event.is_done() {
            self.finish(out);
            return true;
        }
        let chunk: Value = match serde_json::from_str(&event.data) {
            Ok(chunk) => chunk,
            Err(error) => {
                out.push_back(Err(ModelError {
                    kind: ModelErrorKind::ProviderError,
                    resend: Resend::Never,
                    message: wire::truncate(&format!(
                        "OpenAI sent an unreadable chunk ({error}): {}",
                        event.data
                    )),
                }));
                return true;
            }
        };
        // Errors after the stream started arrive as a chunk with `error`.
        if let Some(error) = chunk.get("error").filter(|error| !error.is_null()) {
            out.push_back(Err(stream_error(error)));
            return true;
        }
        if let Some(choice) = chunk.get("choices").and_then(|choices| choices.get(0)) {
            if let Some(delta) = choice.get("delta") {
                self.delta(delta, out);
            }
            if choice
                .get("finish_reason")
                .is_some_and(|reason| !reason.is_null())
            {
                self.flush_tool_calls(out);
            }
        }
        if let Some(usage) = chunk.get("usage").filter(|usage| usage.is_object()) {
            self.usage = Some(parse_usage(usage));
        }
        false
    }

    fn end(&mut self, out: &mut Outbox) {
        // Not every compatible server sends `[DONE]`; the body's end is as good.
        self.finish(out);
    }
}

/// `input_tokens` counts every prompt token, cached ones included, as
/// OpenAI's `prompt_tokens` does; `cache_read_tokens` is the cached share.
fn parse_usage(usage: &Value) -> TokenUsage {
    let count = |pointer: &str| usage.pointer(pointer).and_then(Value::as_u64).unwrap_or(0);
    TokenUsage {
        input_tokens: count("/prompt_tokens"),
        output_tokens: count("/completion_tokens"),
        cache_read_tokens: count("/prompt_tokens_details/cached_tokens"),
        cache_write_tokens: 0,
    }
}

fn stream_error(error: &Value) -> ModelError {
    let text = error
        .get("message")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| error.to_string());
    let code = error.get("code").and_then(|code| {
        code.as_str()
            .map(str::to_string)
            .or(code.as_u64().map(|n| n.to_string()))
    });
    let error_type = error.get("type").and_then(Value::as_str).unwrap_or("");
    let kind = match (code.as_deref().unwrap_or(""), error_type) {
        ("429" | "rate_limit_exceeded", _) | (_, "rate_limit_error" | "rate_limit_exceeded") => {
            ModelErrorKind::RateLimit
        }
        ("401" | "403" | "invalid_api_key", _)
        | (_, "authentication_error" | "permission_error") => ModelErrorKind::ProviderAuth,
        (_, "invalid_request_error") => ModelErrorKind::ProviderClientError,
        _ => ModelErrorKind::ProviderError,
    };
    ModelError {
        kind,
        resend: Resend::Never,
        message: wire::truncate(&format!("OpenAI stream error: {text}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ModelId, ModelSettings, ToolSpec, TranscriptChunk};

    fn decode(chunks: &[&str]) -> Vec<Result<ModelEvent, ModelError>> {
        let mut decoder = ChunkDecoder::default();
        let mut out = Outbox::new();
        for chunk in chunks {
            if decoder.event(
                SseEvent {
                    event: None,
                    data: chunk.to_string(),
                },
                &mut out,
            ) {
                return out.into_iter().collect();
            }
        }
        decoder.end(&mut out);
        out.into_iter().collect()
    }

    fn request(messages: Vec<ChatItem>) -> ModelRequest {
        ModelRequest {
            model: ModelId::parse("openai:gpt-test").unwrap(),
            system: "be brief".into(),
            messages: messages.into(),
            tools: vec![],
            settings: ModelSettings::default(),
            purpose: Default::default(),
        }
    }

    fn model() -> OpenAiModel {
        OpenAiModel::new(
            super::wire::build_http_client(),
            Some("http://localhost:1/v1/".into()),
            None,
            "gpt-test",
        )
    }

    #[test]
    fn trailing_slash_of_base_url_is_dropped() {
        assert_eq!(model().base_url, "http://localhost:1/v1");
    }

    #[test]
    fn interleaved_parallel_tool_calls_are_emitted_whole_in_index_order() {
        let events = decode(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"id":"b","function":{"name":"two","arguments":""}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"one","arguments":"{\"x\""}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"function":{"arguments":"{}"}},{"index":0,"function":{"arguments":":1}"}}]}}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
            "[DONE]",
        ]);
        assert_eq!(
            events,
            vec![
                Ok(ModelEvent::ToolCall {
                    id: "a".into(),
                    name: "one".into(),
                    arguments: "{\"x\":1}".into()
                }),
                Ok(ModelEvent::ToolCall {
                    id: "b".into(),
                    name: "two".into(),
                    arguments: "{}".into()
                }),
            ]
        );
    }

    #[test]
    fn tool_calls_without_finish_reason_are_emitted_at_end_of_body() {
        let events = decode(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"f","arguments":"{}"}}]}}]}"#,
        ]);
        assert_eq!(
            events,
            vec![Ok(ModelEvent::ToolCall {
                id: "a".into(),
                name: "f".into(),
                arguments: "{}".into()
            })]
        );
    }

    #[test]
    fn reasoning_fields_become_thinking_and_usage_comes_last() {
        let events = decode(&[
            r#"{"choices":[{"delta":{"role":"assistant","reasoning_content":"hm"}}]}"#,
            r#"{"choices":[{"delta":{"reasoning":"m"}}]}"#,
            r#"{"choices":[{"delta":{"content":"hi"},"finish_reason":"stop"}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":4}}}"#,
            "[DONE]",
        ]);
        assert_eq!(
            events,
            vec![
                Ok(ModelEvent::ThinkingDelta("hm".into())),
                Ok(ModelEvent::ThinkingDelta("m".into())),
                Ok(ModelEvent::TextDelta("hi".into())),
                Ok(ModelEvent::Usage(TokenUsage {
                    input_tokens: 9,
                    output_tokens: 2,
                    cache_read_tokens: 4,
                    cache_write_tokens: 0
                })),
            ]
        );
    }

    #[test]
    fn error_chunk_ends_the_stream_with_its_kind() {
        let events = decode(&[
            r#"{"error":{"message":"slow down","type":"rate_limit_exceeded"}}"#,
            "[DONE]",
        ]);
        assert_eq!(events.len(), 1);
        assert_eq!(
            events[0].as_ref().unwrap_err().kind,
            ModelErrorKind::RateLimit
        );
    }

    #[test]
    fn thinking_budget_maps_to_reasoning_effort_thresholds() {
        assert_eq!(reasoning_effort(1), "low");
        assert_eq!(reasoning_effort(2048), "low");
        assert_eq!(reasoning_effort(2049), "medium");
        assert_eq!(reasoning_effort(8192), "medium");
        assert_eq!(reasoning_effort(8193), "high");
        let mut zero = request(vec![]);
        zero.settings.thinking_budget = Some(0);
        assert!(model()
            .request_body(&zero)
            .get("reasoning_effort")
            .is_none());
    }

    #[test]
    fn history_maps_to_chat_messages() {
        let image = MediaSource::Base64 {
            media_type: "image/png".into(),
            data: "AAAA".into(),
        };
        let mut request = request(vec![
            ChatItem::User(vec![ContentPart::Text("hi".into())]),
            ChatItem::Assistant(vec![
                AssistantPart::Thinking {
                    text: "secret".into(),
                    signature: None,
                },
                AssistantPart::ToolCall {
                    id: "c1".into(),
                    name: "look".into(),
                    arguments: json!({"a": 1}),
                },
            ]),
            ChatItem::ToolResult(ToolResultItem {
                call_id: "c1".into(),
                tool_name: "look".into(),
                content: vec![ContentPart::Text("ok".into()), ContentPart::Image(image)],
                is_error: false,
            }),
        ]);
        request.tools = vec![ToolSpec {
            name: "look".into(),
            description: "d".into(),
            parameters: std::sync::Arc::new(json!({"type": "object"})),
        }];
        let body = model().request_body(&request);
        assert_eq!(
            body["messages"],
            json!([
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "look", "arguments": "{\"a\":1}"}}
                ]},
                {"role": "tool", "tool_call_id": "c1", "content": "ok\n(attachments follow in the next user message)"},
                {"role": "user", "content": [
                    {"type": "text", "text": "Attachments returned by tool look (call c1):"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
                ]}
            ])
        );
        assert_eq!(body["tools"][0]["function"]["name"], "look");
        assert_eq!(body["stream_options"], json!({"include_usage": true}));
    }

    /// A history in shared chunks (one per stored message) encodes to the
    /// same body as the same items in one chunk, including a run of tool
    /// results whose media spill across a chunk's end, and each chunk that
    /// stands alone keeps its encoding for the next request.
    #[test]
    fn chunked_history_encodes_as_one_and_caches_each_chunk() {
        let tool_result = |id: &str, media: bool| {
            let mut content = vec![ContentPart::Text(format!("result {id}"))];
            if media {
                content.push(ContentPart::Image(MediaSource::Url(
                    "https://x/i.png".into(),
                )));
            }
            ChatItem::ToolResult(ToolResultItem {
                call_id: id.into(),
                tool_name: "look".into(),
                content,
                is_error: false,
            })
        };
        let call = |id: &str| AssistantPart::ToolCall {
            id: id.into(),
            name: "look".into(),
            arguments: json!({}),
        };
        let chunks = vec![
            vec![ChatItem::User(vec![ContentPart::Text("hi".into())])],
            vec![
                ChatItem::Assistant(vec![call("c1"), call("c2")]),
                tool_result("c1", false),
                tool_result("c2", true),
            ],
            vec![tool_result("c3", false)],
            vec![ChatItem::Assistant(vec![AssistantPart::Text(
                "done".into(),
            )])],
            vec![ChatItem::User(vec![ContentPart::Text("again".into())])],
        ];
        let whole = request(chunks.concat());
        let shared: Vec<_> = chunks.into_iter().map(TranscriptChunk::shared).collect();
        let mut chunked = request(vec![]);
        for chunk in &shared {
            chunked.messages.push(chunk.clone());
        }
        let expected = model().request_body(&whole);
        assert_eq!(model().request_body(&chunked), expected);
        // Encoded again from the chunks' caches: the same bytes.
        assert_eq!(model().encode_body(&chunked), model().encode_body(&chunked));
        assert_eq!(model().request_body(&chunked), expected);
        let cached = |chunk: &TranscriptChunk| {
            chunk
                .openai_messages(|_| panic!("encoded twice"))
                .map(str::to_string)
        };
        assert!(
            cached(&shared[0]).is_some(),
            "a plain user message is cached"
        );
        assert_eq!(cached(&shared[1]), None, "its media spill past its end");
        // The chunk after the run flushes its media first, so it is mapped
        // item by item; the one after that stands alone again.
        assert!(cached(&shared[4]).is_some());
        assert_eq!(
            expected["messages"][6],
            json!({"role": "user", "content": [
                {"type": "text", "text": "Attachments returned by tool look (call c2):"},
                {"type": "image_url", "image_url": {"url": "https://x/i.png"}}
            ]}),
            "the media follow the whole run of results: {expected}"
        );
    }

    #[test]
    fn documents_become_file_parts_text_or_url_mentions() {
        let pdf = ContentPart::Document {
            source: MediaSource::Base64 {
                media_type: "application/pdf".into(),
                data: "JVBE".into(),
            },
            name: Some("a.pdf".into()),
        };
        let text = ContentPart::Document {
            source: MediaSource::Base64 {
                media_type: "text/plain".into(),
                data: "aGk=".into(),
            },
            name: None,
        };
        let url = ContentPart::Document {
            source: MediaSource::Url("https://x/y.pdf".into()),
            name: Some("y.pdf".into()),
        };
        let body = model().request_body(&request(vec![ChatItem::User(vec![pdf, text, url])]));
        assert_eq!(
            body["messages"][1]["content"],
            json!([
                {"type": "file", "file": {"filename": "a.pdf", "file_data": "data:application/pdf;base64,JVBE"}},
                {"type": "text", "text": "Document document:\nhi"},
                {"type": "text", "text": "Document y.pdf: https://x/y.pdf"}
            ])
        );
    }
}
