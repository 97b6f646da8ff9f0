//! `POST /api/chat` (a non-streaming turn) and its cancel route.

use actix_web::http::header::{self, HeaderValue};
use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use actors::contract::{ChatRequest, MessageType, ValidationError};
use actors::error_type::ErrorType;
use actors::events::{EventSink, FinalResponse};
use actors::session::{Caller, Runtime, SessionError, DATABASE_UNREACHABLE};
use serde_json::json;

use super::idempotency;
use crate::access::limits::Limits;
use crate::access::{require_json, Authenticated};
use crate::body::{parse_off_worker, read_body, BodyLimits};
use crate::errors::{parse_json, ApiError, ErrorBody};
use crate::observability::access_log::note_session;
use crate::observability::{Metrics, Transport, TurnObserver};

/// The query of `POST /api/chat`: `?session_id=` lets a load balancer route
/// by session without reading the body (config/nginx-sticky.conf).
#[derive(serde::Deserialize)]
struct ChatQuery {
    session_id: Option<String>,
}

#[utoipa::path(post, path = "/api/chat", tag = "chat",
    params(
        ("session_id" = Option<String>, Query, description = "The body's session_id, for a load balancer routing by session; must equal the body's when both are given"),
        ("Idempotency-Key" = Option<String>, Header, description = "IETF Idempotency-Key (an sf-string, or its bare text; 1..255 printable ASCII). Resent with the same key and the byte-identical request, a new message gets the first one's outcome: its final response once its turn ended (a turn the process running it never finished runs again), 409 \"in progress\" while it runs; another body under the key is 422. Scoped to the session and the principal; kept as long as the message. Without it a resent message id is a 409")),
    request_body(content = MessageBody, description = "The message body (docs/protocol.md)"),
    responses(
        (status = 200, description = "The turn ended: an answer, a pending host action, a decision, or a saved cancelled/usage-limited turn; for a resent Idempotency-Key, the first request's final response", body = FinalResponse),
        (status = 409, description = "session_error: the message does not fit the session (a duplicate id), or the turn of the message first sent with this Idempotency-Key is in progress", body = ErrorBody),
        (status = 413, description = "Body too large", body = ErrorBody),
        (status = 422, description = "validation: names the field path (`Idempotency-Key` for a malformed key or one used with another body)", body = ErrorBody),
        (status = 500, description = "The turn failed; `type` is its error_type, with the final response fields", body = ErrorBody),
        (status = 503, description = "Database unreachable", body = ErrorBody)))]
pub async fn post_chat(
    http: HttpRequest,
    Authenticated(caller): Authenticated,
    runtime: web::Data<Runtime>,
    limits: web::Data<Limits>,
    metrics: web::Data<Metrics>,
    body_limits: web::Data<BodyLimits>,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    require_json(&http, None)?;
    let key = idempotency::key(&http)?;
    let body = read_body(payload, &body_limits).await?;
    // The reply is the final response alone: the turn's other events are
    // dropped where they are sent.
    let (sink, final_response) = EventSink::final_only();
    // The request is boxed as it is parsed (760 bytes, moved as a pointer
    // from there to its turn), handed to its slot before the turn is
    // waited for.
    let (_live, observer, sent) = {
        let request = parse_request(&http, &caller, key, body).await?;
        note_session(&http, request.session_id.as_str());
        if request.message_type == MessageType::Steering {
            return Err(ValidationError {
                path: "message_type".into(),
                message: "steering is only accepted over Socket.IO, where a turn can be live"
                    .into(),
            }
            .into());
        }
        let live = limits.into_inner().admit(&caller, &request.session_id)?;
        let observer = TurnObserver::start(Transport::Http);
        (live, observer, runtime.send_message(&caller, request, sink))
    };
    sent.await?;
    let Some(outcome) = final_response.recv().await else {
        return Err(
            SessionError::Internal("the turn ended without a final response".into()).into(),
        );
    };
    observer.finish(&metrics, &outcome);
    // The request's id is looked up only for a turn that may be logged.
    if outcome.response.error_type.is_some() {
        crate::observability::turn_failure::log_if_failed(
            crate::observability::access_log::request_id(&http).as_ref(),
            &outcome.response,
        );
    }
    Ok(final_reply(*outcome.response))
}

/// The body as a request (the session is logged even when the rest of the
/// body is refused). A small body is parsed here, at once; a larger one on
/// the blocking pool, in a boxed future the handler's keeps no room for.
async fn parse_request(
    http: &HttpRequest,
    caller: &Caller,
    key: Option<String>,
    body: web::Bytes,
) -> Result<Box<ChatRequest>, ApiError> {
    let query = http.query_string().to_string();
    // With the key only: the principal scopes it.
    let keyed = key.map(|key| (key, caller.principal.clone()));
    let parse = move |body: &[u8]| {
        let mut parsed = parse_chat(body, &query)?;
        // Hashed here, off the worker with the parse: bodies reach 64 MiB.
        if let (Ok(request), Some((key, principal))) = (&mut parsed, keyed) {
            let mark = idempotency::mark(&principal, &key, &query, body);
            request.idempotency = Some(Box::new(mark));
        }
        Ok(parsed)
    };
    let parsed = match body.len() <= actors::offload::INLINE_BYTES {
        true => parse(&body)?,
        false => Box::pin(parse_off_worker(body, parse)).await?,
    };
    parsed.map_err(|(session_id, error)| {
        if let Some(session_id) = &session_id {
            note_session(http, session_id);
        }
        error.into()
    })
}

/// A request, or the field it fails on with the session it names.
type Parsed = Result<Box<ChatRequest>, (Option<String>, ValidationError)>;

/// The body as a request, or the field it fails on with the session it
/// names (for the access log).
fn parse_chat(body: &[u8], query: &str) -> Result<Parsed, ApiError> {
    if query.is_empty() {
        if let Some(request) = ChatRequest::parse_plain(body) {
            return Ok(Ok(request));
        }
    }
    let mut value = parse_json(body)?;
    merge_query_session(&mut value, query)?;
    Ok(ChatRequest::parse(&value).map(Box::new).map_err(|error| {
        let session_id = value
            .get("session_id")
            .or_else(|| value.get("sessionId"))
            .and_then(|id| id.as_str())
            .map(str::to_string);
        (session_id, error)
    }))
}

/// Takes `?session_id=` into the body: it fills a body without one, and must
/// equal the body's when both are given (a balancer routed by the query, so a
/// different body id would land the session on the wrong process).
fn merge_query_session(body: &mut serde_json::Value, query: &str) -> Result<(), ValidationError> {
    let query = web::Query::<ChatQuery>::from_query(query).map_err(|error| ValidationError {
        path: "query".into(),
        message: format!("the query string is not valid: {error}"),
    })?;
    let Some(from_query) = query.into_inner().session_id else {
        return Ok(());
    };
    let Some(object) = body.as_object_mut() else {
        // Not an object: the body parser names that.
        return Ok(());
    };
    match object.get("session_id") {
        None | Some(serde_json::Value::Null) => {
            object.insert("session_id".into(), json!(from_query));
            Ok(())
        }
        Some(serde_json::Value::String(in_body)) if *in_body == from_query => Ok(()),
        Some(in_body) => Err(ValidationError {
            path: "session_id".into(),
            message: format!(
                "the body's session_id {in_body} differs from ?session_id={from_query:?} in the URL; send one id"
            ),
        }),
    }
}

/// Bytes reserved for a reply: an answer of a few sentences fits.
const REPLY_CAPACITY: usize = 1024;

/// 200 for a completed turn and for a cancelled or budget-limited one (a
/// normal, saved ending); 503 when the turn's result could not be stored
/// because the database is unreachable; 500 for the runtime's or the
/// provider's failure.
fn final_reply(final_response: FinalResponse) -> HttpResponse {
    let failed = final_response
        .error_type
        .as_deref()
        .filter(|error_type| !ErrorType::parse(error_type).is_some_and(ErrorType::is_saved_ending));
    let Some(error_type) = failed else {
        // The common answer, written straight from the struct into a
        // buffer its usual size (a few hundred bytes) needs no growing.
        // Made directly, not through a builder: its content type is a
        // static header value rather than one made from a `Mime`.
        let mut body = Vec::with_capacity(REPLY_CAPACITY);
        return match final_response.write_json(&mut body) {
            Ok(()) => {
                let mut reply = HttpResponse::with_body(StatusCode::OK, body);
                let json = HeaderValue::from_static("application/json");
                reply.headers_mut().insert(header::CONTENT_TYPE, json);
                reply.map_into_boxed_body()
            }
            Err(_) => HttpResponse::Ok().json(&final_response),
        };
    };
    let mut body = serde_json::to_value(&final_response).unwrap_or_default();
    if error_type == ErrorType::DatabaseError {
        body["type"] = json!(ErrorType::DatabaseError);
        body["error"] = json!(DATABASE_UNREACHABLE);
        return HttpResponse::ServiceUnavailable().json(body);
    }
    body["type"] = json!(error_type);
    body["error"] = json!(final_response
        .error_message
        .clone()
        .unwrap_or_else(|| error_type.to_string()));
    HttpResponse::InternalServerError().json(body)
}

/// `POST /api/chat/{id}/cancel`'s answer.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct CancelReply {
    /// False when no turn was live.
    pub cancel_requested: bool,
}

#[utoipa::path(post, path = "/api/chat/{session_id}/cancel", tag = "chat",
    params(("session_id" = String, Path, description = "1..64 characters")),
    responses((status = 200, description = "Whether a live turn was asked to stop", body = CancelReply),
        (status = 422, description = "Bad session id", body = ErrorBody),
        (status = 503, description = "Database unreachable", body = ErrorBody)))]
pub async fn cancel(
    req: HttpRequest,
    Authenticated(caller): Authenticated,
    runtime: web::Data<Runtime>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    require_json(&req, None)?;
    let session_id = super::sessions::session_id(&path)?;
    let cancel_requested = runtime.cancel(&caller, &session_id).await?;
    Ok(HttpResponse::Ok().json(CancelReply { cancel_requested }))
}

/// The message body of `POST /api/chat` (and of the socket's
/// `assistant_message`). `actors::contract::ChatRequest::parse` is what checks
/// it; this type only describes the wire form for the document.
#[derive(serde::Serialize, utoipa::ToSchema)]
#[allow(dead_code)]
pub struct MessageBody {
    /// Client message id, 1..64 characters; unique within the session.
    id: String,
    /// 1..64 characters; the session is created on first use.
    session_id: String,
    /// The user's text; may be empty on a continuation.
    content: Option<String>,
    /// Branch from this message; omitted, continue from the active leaf.
    parent_id: Option<String>,
    /// `standard` (default) or `steering` (Socket.IO only).
    #[schema(pattern = "^(standard|steering)$")]
    message_type: Option<String>,
    /// `text` (default) or `host_tools` (silent decisions).
    #[schema(pattern = "^(text|host_tools)$")]
    output_mode: Option<String>,
    /// At most 16: `{kind, purpose, name, description, media_type}` and one of `data_uri`, `url`, `text`.
    attachments: Option<Vec<serde_json::Value>>,
    /// Legacy screenshot data URIs.
    images: Option<Vec<String>>,
    /// One screenshot data URI.
    screenshot: Option<String>,
    /// What is on screen and what the host can do (docs/protocol.md).
    host_context: Option<serde_json::Value>,
    /// Per-request overrides: `default_model`, `thinking_budget`, `temperature`, `max_turns`.
    config: Option<serde_json::Value>,
    /// Continuation: the call id being answered.
    tool_call_id: Option<String>,
    /// Continuation: the action's result, any JSON.
    tool_result: Option<serde_json::Value>,
    /// Continuation: `success` (default) or `failed`.
    #[schema(pattern = "^(success|failed)$")]
    tool_outcome: Option<String>,
}
