//! A fake model provider on loopback that speaks both real wire formats:
//! OpenAI Chat Completions SSE (`POST /chat/completions`, also under `/v1`)
//! and Anthropic Messages SSE (`POST /v1/messages`). It records every request
//! and answers each from a scripted queue, so tests can point adapters or the
//! whole server at it. It runs on its own thread and actix system, so any
//! test runtime can use it.
//!
//! ```ignore
//! let fake = FakeProvider::start();
//! fake.push(Script::openai_tool_calls(&[("call_1", "get_time", r#"{"zone":"UTC"}"#)]));
//! // point OPENAI_BASE_URL at fake.base_url_openai(), run a turn...
//! assert_eq!(fake.requests()[0].body["model"], "gpt-test");
//! ```

// Shared by every test module; no single one uses every helper.
#![allow(dead_code)]

use std::collections::{BTreeMap, VecDeque};
use std::net::{SocketAddr, TcpListener};
use std::sync::{mpsc, Arc, Mutex};

use actix_web::dev::ServerHandle;
use actix_web::web::{self, Bytes};
use actix_web::{App, HttpRequest, HttpResponse, HttpServer};
use actors::model::TokenUsage;
use futures_util::stream::{self, StreamExt};
use serde_json::{json, Value};

/// What OpenAI scripts report as usage, decoded: 12 prompt tokens (3 cached), 5 completion.
pub const OPENAI_USAGE: TokenUsage = TokenUsage {
    input_tokens: 12,
    output_tokens: 5,
    cache_read_tokens: 3,
    cache_write_tokens: 0,
};

/// What Anthropic scripts report as usage, decoded: 10 uncached + 4 cache-read
/// + 2 cache-write input tokens, 6 output tokens.
pub const ANTHROPIC_USAGE: TokenUsage = TokenUsage {
    input_tokens: 16,
    output_tokens: 6,
    cache_read_tokens: 4,
    cache_write_tokens: 2,
};

/// Text of the reply given when the script queue is empty.
pub const DEFAULT_REPLY: &str = "Hello from the fake provider.";

/// Large enough for base64 screenshots and documents in request bodies.
const MAX_REQUEST_BYTES: usize = 64 * 1024 * 1024;

/// The answer to one request. The variant picks the wire format, whichever
/// path was hit; tests push scripts matching the provider they configured.
#[derive(Clone, Debug)]
pub enum Script {
    /// Text deltas, one chunk each.
    OpenAiText(Vec<String>),
    /// `reasoning_content` deltas, then text deltas.
    OpenAiReasoning {
        reasoning: Vec<String>,
        text: Vec<String>,
    },
    /// Parallel tool calls `(id, name, arguments_json)`: id and name first,
    /// then the arguments in three pieces each, interleaved across calls.
    OpenAiToolCalls(Vec<(String, String, String)>),
    /// Text deltas, then nothing more: the connection stays open (idle timeout mid-stream).
    OpenAiStall(Vec<String>),
    AnthropicText(Vec<String>),
    /// A signed thinking block, then a text block.
    AnthropicThinking {
        thinking: Vec<String>,
        signature: String,
        text: Vec<String>,
    },
    /// `tool_use` blocks `(id, name, input_json)`, inputs in `input_json_delta` pieces.
    AnthropicToolUse(Vec<(String, String, String)>),
    /// `message_start`, then an `error` event of this type (e.g. `overloaded_error`).
    AnthropicError {
        error_type: String,
        message: String,
    },
    /// Any status with this body (JSON error bodies are the realistic choice).
    Status(u16, String),
    /// As `Status`, with these response headers.
    StatusWithHeaders(u16, String, Vec<(String, String)>),
    /// A 200 SSE body of one `data:` line this many bytes long that never
    /// ends, made on the fly in 64 KiB chunks (nothing this big is held).
    EndlessLine(usize),
    /// Never answers: not even headers.
    Hang,
    /// Raw SSE chunks, sent exactly as given.
    RawSse(Vec<String>),
}

impl Script {
    pub fn openai_text(pieces: &[&str]) -> Script {
        Script::OpenAiText(strings(pieces))
    }

    pub fn openai_reasoning(reasoning: &[&str], text: &[&str]) -> Script {
        Script::OpenAiReasoning {
            reasoning: strings(reasoning),
            text: strings(text),
        }
    }

    pub fn openai_tool_calls(calls: &[(&str, &str, &str)]) -> Script {
        Script::OpenAiToolCalls(triples(calls))
    }

    pub fn anthropic_text(pieces: &[&str]) -> Script {
        Script::AnthropicText(strings(pieces))
    }

    pub fn anthropic_thinking(thinking: &[&str], signature: &str, text: &[&str]) -> Script {
        Script::AnthropicThinking {
            thinking: strings(thinking),
            signature: signature.to_string(),
            text: strings(text),
        }
    }

    pub fn anthropic_tool_use(calls: &[(&str, &str, &str)]) -> Script {
        Script::AnthropicToolUse(triples(calls))
    }

    /// A status with the usual `{"error": {"type", "message"}}` body.
    pub fn status(status: u16, message: &str) -> Script {
        let body = json!({"error": {"type": "fake_error", "message": message}});
        Script::Status(status, body.to_string())
    }

    /// `status` with extra response headers (`retry-after`, `retry-after-ms`).
    pub fn status_with_headers(status: u16, message: &str, headers: &[(&str, &str)]) -> Script {
        let body = json!({"error": {"type": "fake_error", "message": message}});
        Script::StatusWithHeaders(
            status,
            body.to_string(),
            headers
                .iter()
                .map(|(name, value)| (name.to_string(), value.to_string()))
                .collect(),
        )
    }
}

/// One request as the fake received it.
#[derive(Clone, Debug)]
pub struct RecordedRequest {
    pub path: String,
    /// Lower-case header names.
    pub headers: BTreeMap<String, String>,
    /// The JSON body; a string holding the raw text if it was not JSON.
    pub body: Value,
    /// When the request arrived.
    pub at: std::time::Instant,
}

impl RecordedRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
    }
}

/// A running fake; stops when dropped.
pub struct FakeProvider {
    address: SocketAddr,
    state: Arc<FakeState>,
    server: ServerHandle,
}

impl FakeProvider {
    /// Binds `127.0.0.1:0` and serves on a thread of its own.
    pub fn start() -> FakeProvider {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let address = listener.local_addr().expect("bound address");
        let state = Arc::new(FakeState::default());
        let server_state = web::Data::from(Arc::clone(&state));
        let (handle_tx, handle_rx) = mpsc::channel();
        std::thread::spawn(move || {
            actix_web::rt::System::new().block_on(async move {
                let server = HttpServer::new(move || {
                    App::new()
                        .app_data(server_state.clone())
                        .app_data(web::PayloadConfig::new(MAX_REQUEST_BYTES))
                        .route("/chat/completions", web::post().to(openai_route))
                        .route("/v1/chat/completions", web::post().to(openai_route))
                        .route("/v1/messages", web::post().to(anthropic_route))
                        .route("/models", web::get().to(models_route))
                        .route("/v1/models", web::get().to(models_route))
                })
                .workers(1)
                .disable_signals()
                .shutdown_timeout(0)
                .listen(listener)
                .expect("listen on bound socket")
                .run();
                handle_tx
                    .send(server.handle())
                    .expect("test thread waits for the handle");
                let _ = server.await;
            });
        });
        let server = handle_rx.recv().expect("fake provider thread started");
        FakeProvider {
            address,
            state,
            server,
        }
    }

    /// For `OPENAI_BASE_URL` / `OpenAiModel::base_url` (the fake serves
    /// `/chat/completions` at its root).
    pub fn base_url_openai(&self) -> String {
        format!("http://{}", self.address)
    }

    /// For `ANTHROPIC_BASE_URL` / `AnthropicModel::base_url`.
    pub fn base_url_anthropic(&self) -> String {
        format!("http://{}", self.address)
    }

    /// Queues the answer to a future request, first in first out.
    pub fn push(&self, script: Script) {
        self.state.scripts.lock().unwrap().push_back(script);
    }

    /// Drops the queued scripts no request took.
    pub fn discard_scripts(&self) {
        self.state.scripts.lock().unwrap().clear();
    }

    /// Every request received so far, oldest first.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.state.requests.lock().unwrap().clone()
    }
}

impl Drop for FakeProvider {
    fn drop(&mut self) {
        // `stop` sends the command before its future is first polled, so
        // dropping the future still stops the server (and hanging handlers).
        drop(self.server.stop(false));
    }
}

#[derive(Default)]
struct FakeState {
    scripts: Mutex<VecDeque<Script>>,
    requests: Mutex<Vec<RecordedRequest>>,
}

impl FakeState {
    fn record(&self, request: &HttpRequest, body: &Bytes) -> Option<Script> {
        let headers = request
            .headers()
            .iter()
            .map(|(name, value)| {
                (
                    name.as_str().to_ascii_lowercase(),
                    value.to_str().unwrap_or_default().to_string(),
                )
            })
            .collect();
        let body = serde_json::from_slice(body)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(body).into_owned()));
        let recorded = RecordedRequest {
            path: request.path().to_string(),
            headers,
            body,
            at: std::time::Instant::now(),
        };
        self.requests.lock().unwrap().push(recorded);
        self.scripts.lock().unwrap().pop_front()
    }
}

/// The model list both providers' `GET .../models` answer (`data[].id`).
pub const LISTED_MODELS: &[&str] = &["gpt-4o-mini", "fake-model", "claude-sonnet-4-5-20250929"];

async fn models_route() -> HttpResponse {
    let data: Vec<Value> = LISTED_MODELS.iter().map(|id| json!({"id": id})).collect();
    HttpResponse::Ok().json(json!({"data": data, "has_more": false}))
}

async fn openai_route(
    request: HttpRequest,
    body: Bytes,
    state: web::Data<FakeState>,
) -> HttpResponse {
    let script = state
        .record(&request, &body)
        .unwrap_or_else(|| Script::openai_text(&["Hello", " from the fake provider."]));
    respond(script).await
}

async fn anthropic_route(
    request: HttpRequest,
    body: Bytes,
    state: web::Data<FakeState>,
) -> HttpResponse {
    let script = state
        .record(&request, &body)
        .unwrap_or_else(|| Script::anthropic_text(&["Hello", " from the fake provider."]));
    respond(script).await
}

async fn respond(script: Script) -> HttpResponse {
    match script {
        Script::Status(status, body) => {
            let status =
                actix_web::http::StatusCode::from_u16(status).expect("valid status in script");
            HttpResponse::build(status)
                .content_type("application/json")
                .body(body)
        }
        Script::StatusWithHeaders(status, body, headers) => {
            let status =
                actix_web::http::StatusCode::from_u16(status).expect("valid status in script");
            let mut response = HttpResponse::build(status);
            for header in headers {
                response.insert_header(header);
            }
            response.content_type("application/json").body(body)
        }
        Script::EndlessLine(bytes) => {
            const CHUNK: usize = 64 * 1024;
            let first = stream::once(async { Ok::<_, actix_web::Error>(Bytes::from("data: ")) });
            let rest = stream::iter(0..bytes.div_ceil(CHUNK)).map(move |index| {
                let size = CHUNK.min(bytes - index * CHUNK);
                Ok(Bytes::from(vec![b'x'; size]))
            });
            HttpResponse::Ok()
                .content_type("text/event-stream")
                .streaming(first.chain(rest))
        }
        Script::Hang => std::future::pending::<HttpResponse>().await,
        Script::OpenAiStall(pieces) => {
            let mut chunks = vec![openai_chunk(
                json!({"role": "assistant", "content": ""}),
                None,
            )];
            chunks.extend(
                pieces
                    .iter()
                    .map(|piece| openai_chunk(json!({"content": piece}), None)),
            );
            sse_response(chunks, true)
        }
        Script::RawSse(chunks) => {
            let body = stream::iter(
                chunks
                    .into_iter()
                    .map(|chunk| Ok::<_, actix_web::Error>(Bytes::from(chunk))),
            );
            HttpResponse::Ok()
                .content_type("text/event-stream")
                .streaming(body)
        }
        other => sse_response(sse_events(other), false),
    }
}

/// Streams the events, each split in two chunks so clients must reassemble
/// events across reads; `stall` keeps the body open afterwards.
fn sse_response(events: Vec<String>, stall: bool) -> HttpResponse {
    let mut chunks = Vec::new();
    for event in events {
        let middle = (0..=event.len() / 2)
            .rev()
            .find(|index| event.is_char_boundary(*index))
            .unwrap_or(0);
        let (left, right) = event.split_at(middle);
        chunks.push(Ok::<_, actix_web::Error>(Bytes::from(left.to_string())));
        chunks.push(Ok(Bytes::from(right.to_string())));
    }
    let body = stream::iter(chunks);
    if stall {
        return HttpResponse::Ok()
            .content_type("text/event-stream")
            .streaming(body.chain(stream::pending()));
    }
    HttpResponse::Ok()
        .content_type("text/event-stream")
        .streaming(body)
}

fn sse_events(script: Script) -> Vec<String> {
    match script {
        Script::OpenAiText(pieces) => {
            let mut events = vec![openai_chunk(
                json!({"role": "assistant", "content": ""}),
                None,
            )];
            events.extend(
                pieces
                    .iter()
                    .map(|piece| openai_chunk(json!({"content": piece}), None)),
            );
            openai_end(events, "stop")
        }
        Script::OpenAiReasoning { reasoning, text } => {
            let mut events = vec![openai_chunk(json!({"role": "assistant"}), None)];
            events.extend(
                reasoning
                    .iter()
                    .map(|piece| openai_chunk(json!({"reasoning_content": piece}), None)),
            );
            events.extend(
                text.iter()
                    .map(|piece| openai_chunk(json!({"content": piece}), None)),
            );
            openai_end(events, "stop")
        }
        Script::OpenAiToolCalls(calls) => {
            let mut events = vec![openai_chunk(
                json!({"role": "assistant", "content": null}),
                None,
            )];
            for (index, (id, name, _)) in calls.iter().enumerate() {
                let call = json!({"index": index, "id": id, "type": "function", "function": {"name": name, "arguments": ""}});
                events.push(openai_chunk(json!({"tool_calls": [call]}), None));
            }
            let pieces: Vec<Vec<String>> = calls
                .iter()
                .map(|(_, _, arguments)| thirds(arguments))
                .collect();
            for round in 0..3 {
                for (index, call_pieces) in pieces.iter().enumerate() {
                    let call =
                        json!({"index": index, "function": {"arguments": call_pieces[round]}});
                    events.push(openai_chunk(json!({"tool_calls": [call]}), None));
                }
            }
            openai_end(events, "tool_calls")
        }
        Script::AnthropicText(pieces) => {
            let mut events = vec![anthropic_start()];
            events.extend(anthropic_text_block(0, &pieces));
            anthropic_end(events, "end_turn")
        }
        Script::AnthropicThinking {
            thinking,
            signature,
            text,
        } => {
            let mut events = vec![anthropic_start()];
            events.push(anthropic_event(
                "content_block_start",
                json!({"index": 0, "content_block": {"type": "thinking", "thinking": ""}}),
            ));
            for piece in &thinking {
                events.push(anthropic_event(
                    "content_block_delta",
                    json!({"index": 0, "delta": {"type": "thinking_delta", "thinking": piece}}),
                ));
            }
            events.push(anthropic_event(
                "content_block_delta",
                json!({"index": 0, "delta": {"type": "signature_delta", "signature": signature}}),
            ));
            events.push(anthropic_event("content_block_stop", json!({"index": 0})));
            events.extend(anthropic_text_block(1, &text));
            anthropic_end(events, "end_turn")
        }
        Script::AnthropicToolUse(calls) => {
            let mut events = vec![anthropic_start()];
            for (index, (id, name, input)) in calls.iter().enumerate() {
                events.push(anthropic_event(
                    "content_block_start",
                    json!({"index": index, "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
                ));
                for piece in thirds(input).iter().filter(|piece| !piece.is_empty()) {
                    events.push(anthropic_event(
                        "content_block_delta",
                        json!({"index": index, "delta": {"type": "input_json_delta", "partial_json": piece}}),
                    ));
                }
                events.push(anthropic_event(
                    "content_block_stop",
                    json!({"index": index}),
                ));
            }
            anthropic_end(events, "tool_use")
        }
        Script::AnthropicError {
            error_type,
            message,
        } => vec![
            anthropic_start(),
            anthropic_event(
                "error",
                json!({"error": {"type": error_type, "message": message}}),
            ),
        ],
        Script::Status(..)
        | Script::StatusWithHeaders(..)
        | Script::EndlessLine(_)
        | Script::Hang
        | Script::OpenAiStall(_)
        | Script::RawSse(_) => {
            unreachable!("answered by respond")
        }
    }
}

fn openai_chunk(delta: Value, finish_reason: Option<&str>) -> String {
    let chunk = json!({
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "fake",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    });
    format!("data: {chunk}\n\n")
}

/// The finishing chunk, the usage chunk (`stream_options.include_usage`) and `[DONE]`.
fn openai_end(mut events: Vec<String>, finish_reason: &str) -> Vec<String> {
    events.push(openai_chunk(json!({}), Some(finish_reason)));
    let usage = json!({
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "fake",
        "choices": [],
        "usage": {
            "prompt_tokens": OPENAI_USAGE.input_tokens,
            "completion_tokens": OPENAI_USAGE.output_tokens,
            "total_tokens": OPENAI_USAGE.input_tokens + OPENAI_USAGE.output_tokens,
            "prompt_tokens_details": {"cached_tokens": OPENAI_USAGE.cache_read_tokens},
        },
    });
    events.push(format!("data: {usage}\n\n"));
    events.push("data: [DONE]\n\n".to_string());
    events
}

fn anthropic_event(event_type: &str, mut payload: Value) -> String {
    payload["type"] = json!(event_type);
    format!("event: {event_type}\ndata: {payload}\n\n")
}

fn anthropic_start() -> String {
    let uncached = ANTHROPIC_USAGE.input_tokens
        - ANTHROPIC_USAGE.cache_read_tokens
        - ANTHROPIC_USAGE.cache_write_tokens;
    anthropic_event(
        "message_start",
        json!({"message": {
            "id": "msg_fake", "type": "message", "role": "assistant", "model": "fake",
            "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {
                "input_tokens": uncached,
                "cache_read_input_tokens": ANTHROPIC_USAGE.cache_read_tokens,
                "cache_creation_input_tokens": ANTHROPIC_USAGE.cache_write_tokens,
                "output_tokens": 1,
            },
        }}),
    )
}

fn anthropic_text_block(index: usize, pieces: &[String]) -> Vec<String> {
    let mut events = vec![anthropic_event(
        "content_block_start",
        json!({"index": index, "content_block": {"type": "text", "text": ""}}),
    )];
    events.push(anthropic_event("ping", json!({})));
    for piece in pieces {
        events.push(anthropic_event(
            "content_block_delta",
            json!({"index": index, "delta": {"type": "text_delta", "text": piece}}),
        ));
    }
    events.push(anthropic_event(
        "content_block_stop",
        json!({"index": index}),
    ));
    events
}

fn anthropic_end(mut events: Vec<String>, stop_reason: &str) -> Vec<String> {
    events.push(anthropic_event(
        "message_delta",
        json!({"delta": {"stop_reason": stop_reason, "stop_sequence": null}, "usage": {"output_tokens": ANTHROPIC_USAGE.output_tokens}}),
    ));
    events.push(anthropic_event("message_stop", json!({})));
    events
}

/// Splits text into three pieces at character boundaries (some may be empty).
fn thirds(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let size = chars.len().div_ceil(3);
    (0..3)
        .map(|part| chars.iter().skip(part * size).take(size).collect())
        .collect()
}

fn strings(pieces: &[&str]) -> Vec<String> {
    pieces.iter().map(|piece| piece.to_string()).collect()
}

fn triples(calls: &[(&str, &str, &str)]) -> Vec<(String, String, String)> {
    calls
        .iter()
        .map(|(id, name, arguments)| (id.to_string(), name.to_string(), arguments.to_string()))
        .collect()
}
