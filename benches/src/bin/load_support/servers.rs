//! The two reference servers of `loadgen`, for comparisons a future change
//! can rerun:
//!
//! - `bare`: a bare actix-web handler of `POST /api/chat` that parses the
//!   same request shape and answers the same reply shape as the runtime, with
//!   no session, store or model: the framework's own ceiling on this machine.
//! - `fake-openai`: an OpenAI-compatible `POST /v1/chat/completions` that
//!   streams a short reply with no delay, counting the TCP connections it
//!   accepted (`GET /stats`), so that a benchmark can show the runtime keeps
//!   its provider connections alive.
//!
//! Included by `loadgen` only, with `#[path]`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use actix_web::web::{self, Bytes};
use actix_web::{App, HttpResponse, HttpServer};
use serde_json::{json, Value};

/// Serves the bare handler on `port` until killed.
pub fn run_bare(port: u16, workers: usize) -> std::io::Result<()> {
    actix_web::rt::System::new().block_on(async move {
        println!("bare actix-web POST /api/chat on 127.0.0.1:{port}");
        HttpServer::new(|| App::new().route("/api/chat", web::post().to(bare_chat)))
            .workers(workers)
            .bind(("127.0.0.1", port))?
            .run()
            .await
    })
}

/// Parses the body as the runtime does (JSON, then the fields it reads) and
/// answers a final response of the runtime's shape.
async fn bare_chat(body: Bytes) -> HttpResponse {
    let value: Value = match serde_json::from_slice(&body) {
        Ok(value) => value,
        Err(error) => {
            return HttpResponse::UnprocessableEntity()
                .json(json!({"error": error.to_string(), "type": "validation"}))
        }
    };
    let (Some(id), Some(session_id), Some(content)) = (
        value["id"].as_str(),
        value["session_id"].as_str(),
        value["content"].as_str(),
    ) else {
        return HttpResponse::UnprocessableEntity().json(
            json!({"error": "id, session_id and content are required", "type": "validation"}),
        );
    };
    HttpResponse::Ok().json(json!({
        "content": format!("Echo: {content}"),
        "model": "builtin:echo",
        "streamed": false,
        "session_id": session_id,
        "turn_number": 1,
        "message_id": format!("{id}:reply"),
        "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15,
                  "requests": 1, "tool_calls": 0, "cost_usd": null},
        "pending_tool_call": null,
        "decision": null,
    }))
}

/// Connections accepted by the fake, shared with its `/stats` route.
#[derive(Default)]
struct FakeStats {
    connections: AtomicU64,
    requests: AtomicU64,
}

/// The largest request body the fake reads.
const FAKE_MAX_BODY_BYTES: usize = 64 * 1024 * 1024;

/// Serves the zero-delay OpenAI-compatible fake on `port` until killed.
pub fn run_fake_openai(port: u16) -> std::io::Result<()> {
    let stats = Arc::new(FakeStats::default());
    actix_web::rt::System::new().block_on(async move {
        println!("fake OpenAI on http://127.0.0.1:{port}/v1 (GET /stats counts connections)");
        let on_connect_stats = stats.clone();
        HttpServer::new(move || {
            App::new()
                .app_data(web::Data::from(stats.clone()))
                // A long conversation's request is the whole history: past
                // actix-web's 256 KiB default (about 260 turns).
                .app_data(web::PayloadConfig::new(FAKE_MAX_BODY_BYTES))
                .route("/v1/chat/completions", web::post().to(fake_completion))
                .route("/stats", web::get().to(fake_stats))
        })
        .on_connect(move |_, _| {
            on_connect_stats.connections.fetch_add(1, Ordering::Relaxed);
        })
        .workers(1)
        .bind(("127.0.0.1", port))?
        .run()
        .await
    })
}

/// The SSE body of one streamed completion: two text deltas, the finish,
/// usage and `[DONE]`, in one write.
fn completion_body() -> String {
    let chunk = |delta: Value, finish: Option<&str>| {
        let chunk = json!({"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 0,
                           "model": "bench", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        format!("data: {chunk}\n\n")
    };
    let usage = json!({"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 0,
                       "model": "bench", "choices": [],
                       "usage": {"prompt_tokens": 12, "completion_tokens": 2, "total_tokens": 14}});
    [
        chunk(json!({"role": "assistant", "content": "Hello"}), None),
        chunk(json!({"content": " there"}), None),
        chunk(json!({}), Some("stop")),
        format!("data: {usage}\n\n"),
        "data: [DONE]\n\n".to_string(),
    ]
    .concat()
}

async fn fake_completion(stats: web::Data<FakeStats>, _body: Bytes) -> HttpResponse {
    stats.requests.fetch_add(1, Ordering::Relaxed);
    HttpResponse::Ok()
        .content_type("text/event-stream")
        .body(completion_body())
}

async fn fake_stats(stats: web::Data<FakeStats>) -> HttpResponse {
    HttpResponse::Ok().json(json!({
        "connections": stats.connections.load(Ordering::Relaxed),
        "requests": stats.requests.load(Ordering::Relaxed),
    }))
}
