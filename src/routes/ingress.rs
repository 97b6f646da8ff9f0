//! Other systems' doors (`crate::ingress`): `POST /api/assistant/inject`
//! and the inbox (admin), and `POST /api/sessions/{id}/inject`, the
//! per-owner door into one's own session. Bodies are the original's.

use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use actors::contract::ValidationError;
use actors::error_type::ErrorType;
use actors::ids::SessionId;
use actors::session::{Caller, Runtime, SessionError};
use actors::store::inbox::Severity;
use actors::store::InboxItem;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::sessions::session_id;
use crate::access::limits::Limits;
use crate::access::{require_json, Authenticated};
use crate::body::{read_body, BodyLimits};
use crate::errors::{parse_json, ApiError, ErrorBody};
use crate::ingress::{
    deliver, deliver_owned, Delivery, Note, MAX_CONTEXT_BYTES, MAX_MESSAGE_CHARS, MAX_NAME_CHARS,
};
use crate::observability::access_log::note_session;

/// The most inbox items one page lists.
const MAX_INBOX_PAGE: u32 = 100;

fn invalid(path: &str, message: impl Into<String>) -> ApiError {
    ValidationError {
        path: path.into(),
        message: message.into(),
    }
    .into()
}

fn admin_only(caller: &Caller, what: &str) -> Result<(), ApiError> {
    if caller.admin {
        Ok(())
    } else {
        Err(SessionError::Forbidden(format!("{what} is for admins")).into())
    }
}

/// The body as a JSON object.
async fn object(
    payload: web::Payload,
    limits: &BodyLimits,
) -> Result<Map<String, Value>, ApiError> {
    match parse_json(&read_body(payload, limits).await?)? {
        Value::Object(map) => Ok(map),
        _ => Err(invalid("body", "expected a JSON object")),
    }
}

/// A required text field of 1..=`max` characters.
fn text(body: &Map<String, Value>, key: &str, max: usize) -> Result<String, ApiError> {
    match body.get(key) {
        None | Some(Value::Null) => Err(invalid(key, "required")),
        Some(Value::String(text)) if text.is_empty() => Err(invalid(key, "must not be empty")),
        Some(Value::String(text)) if text.chars().count() > max => {
            Err(invalid(key, format!("at most {max} characters")))
        }
        Some(Value::String(text)) => Ok(text.clone()),
        Some(_) => Err(invalid(key, "expected a string")),
    }
}

/// An optional session id under `key`.
fn optional_session(body: &Map<String, Value>, key: &str) -> Result<Option<SessionId>, ApiError> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(raw)) => session_id(raw)
            .map(Some)
            .map_err(|_| invalid(key, "must be 1 to 64 characters")),
        Some(_) => Err(invalid(key, "expected a string")),
    }
}

/// `?session_id=` on an ingress URL, for a load balancer routing by
/// session (config/nginx-sticky.conf): the session when the body names
/// none, and equal to the body's when both do.
#[derive(Deserialize)]
pub struct RoutingQuery {
    session_id: Option<String>,
}

fn routed_session(
    body: Option<SessionId>,
    query: &RoutingQuery,
    field: &str,
) -> Result<Option<SessionId>, ApiError> {
    let Some(raw) = query.session_id.as_deref().filter(|raw| !raw.is_empty()) else {
        return Ok(body);
    };
    let routed = session_id(raw)?;
    match body {
        Some(named) if named != routed => Err(invalid(
            field,
            format!("the query's session_id {raw:?} names another session than the body"),
        )),
        _ => Ok(Some(routed)),
    }
}

fn created(delivery: Delivery) -> HttpResponse {
    HttpResponse::build(StatusCode::CREATED).json(delivery)
}

/// The inject body (`from`, `via`, `message`, `session_id`/`sessionId`).
#[derive(utoipa::ToSchema)]
#[allow(dead_code)] // Only describes the body for the document.
pub struct InjectBody {
    /// The sender (1..128 characters).
    from: String,
    /// The channel it came through (1..128 characters).
    via: String,
    /// 1..32000 characters.
    message: String,
    /// The session; default the most recently active one. Also `sessionId`.
    session_id: Option<String>,
}

#[utoipa::path(post, path = "/api/assistant/inject", tag = "ingress",
    params(("session_id" = Option<String>, Query, description = "The session, for a load balancer routing by session; must equal the body's when both are given")),
    request_body(content = InjectBody, description = "Delivered as `[via:<via> from:<from>] <message>` (`[via:<via>] <message>` when from equals via)"),
    responses(
        (status = 201, description = "`delivered` (`delivery`: `queued` into the live turn, `promoted` to a turn of its own) or `queued` in the inbox", body = Delivery),
        (status = 403, description = "Not an admin", body = ErrorBody),
        (status = 413, description = "Body too large, or the inbox is full", body = ErrorBody),
        (status = 422, description = "validation: names the field", body = ErrorBody),
        (status = 503, description = "Database unreachable", body = ErrorBody)))]
pub async fn inject(
    http: HttpRequest,
    Authenticated(caller): Authenticated,
    runtime: web::Data<Runtime>,
    body_limits: web::Data<BodyLimits>,
    query: web::Query<RoutingQuery>,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    admin_only(&caller, "POST /api/assistant/inject")?;
    require_json(&http, None)?;
    let body = object(payload, &body_limits).await?;
    let from = text(&body, "from", MAX_NAME_CHARS)?;
    let via = text(&body, "via", MAX_NAME_CHARS)?;
    let message = text(&body, "message", MAX_MESSAGE_CHARS)?;
    let named = match optional_session(&body, "session_id")? {
        Some(id) => Some(id),
        None => optional_session(&body, "sessionId")?,
    };
    let session = routed_session(named, &query, "session_id")?;
    if let Some(id) = &session {
        note_session(&http, id.as_str());
    }
    let note = Note {
        from,
        via,
        message,
        severity: Severity::Info,
        session_id: session,
        context: None,
    };
    Ok(created(deliver(&runtime, &caller, note, true).await?))
}

/// The per-owner inject body.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)] // Only describes the body for the document.
pub struct OwnedInjectBody {
    from: String,
    via: String,
    message: String,
}

#[utoipa::path(post, path = "/api/sessions/{session_id}/inject", tag = "ingress",
    params(("session_id" = String, Path, description = "1..64 characters")),
    request_body(content = OwnedInjectBody, description = "As `POST /api/assistant/inject`, into this session only"),
    responses(
        (status = 201, description = "`delivered`, `delivery` `queued` (into the live turn) or `promoted` (a turn of its own)", body = Delivery),
        (status = 403, description = "Not the session's owner (also for a session that does not exist)", body = ErrorBody),
        (status = 404, description = "Unknown session (to an admin)", body = ErrorBody),
        (status = 409, description = "The session cannot take steering now (no conversation yet, a silent decision live)", body = ErrorBody),
        (status = 422, description = "validation: names the field", body = ErrorBody),
        (status = 429, description = "Over the caller's turns per minute", body = ErrorBody),
        (status = 503, description = "Database unreachable", body = ErrorBody)))]
pub async fn inject_owned(
    http: HttpRequest,
    Authenticated(caller): Authenticated,
    runtime: web::Data<Runtime>,
    limits: web::Data<Limits>,
    body_limits: web::Data<BodyLimits>,
    path: web::Path<String>,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let session = session_id(&path)?;
    require_json(&http, None)?;
    let body = object(payload, &body_limits).await?;
    let note = Note {
        from: text(&body, "from", MAX_NAME_CHARS)?,
        via: text(&body, "via", MAX_NAME_CHARS)?,
        message: text(&body, "message", MAX_MESSAGE_CHARS)?,
        severity: Severity::Info,
        session_id: Some(session.clone()),
        context: None,
    };
    // A turn the caller starts, counted as its chat's turns are
    // (`ASSISTANT__TURNS_PER_MINUTE`; admins are exempt).
    let _admitted = limits.into_inner().admit(&caller, &session)?;
    Ok(created(
        deliver_owned(&runtime, &caller, &session, &note).await?,
    ))
}

/// The inbox post's body.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)] // Only describes the body for the document.
pub struct InboxBody {
    from: String,
    message: String,
    /// `info` (default), `action_needed` or `urgent`.
    severity: Option<String>,
    /// Kept with the item; `session_id` and `via` (default `inbox`) in it route it.
    #[schema(value_type = Option<Object>)]
    context: Option<Value>,
}

#[utoipa::path(post, path = "/api/inbox", tag = "ingress",
    params(("session_id" = Option<String>, Query, description = "The session, for a load balancer routing by session; must equal `context.session_id` when both are given")),
    request_body(content = InboxBody, description = "A note for the assistant, delivered as an inject is"),
    responses(
        (status = 201, description = "`delivered` or `queued`, as for an inject", body = Delivery),
        (status = 403, description = "Not an admin", body = ErrorBody),
        (status = 413, description = "Body too large, or the inbox is full", body = ErrorBody),
        (status = 422, description = "validation: names the field", body = ErrorBody),
        (status = 503, description = "Database unreachable", body = ErrorBody)))]
pub async fn post_inbox(
    http: HttpRequest,
    Authenticated(caller): Authenticated,
    runtime: web::Data<Runtime>,
    body_limits: web::Data<BodyLimits>,
    query: web::Query<RoutingQuery>,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    admin_only(&caller, "POST /api/inbox")?;
    require_json(&http, None)?;
    let body = object(payload, &body_limits).await?;
    let from = text(&body, "from", MAX_NAME_CHARS)?;
    let message = text(&body, "message", MAX_MESSAGE_CHARS)?;
    let severity = match body.get("severity") {
        None | Some(Value::Null) => Severity::Info,
        Some(Value::String(word)) => Severity::parse(word).ok_or_else(|| {
            invalid(
                "severity",
                "expected \"info\", \"action_needed\" or \"urgent\"",
            )
        })?,
        Some(_) => return Err(invalid("severity", "expected a string")),
    };
    let context = match body.get("context") {
        None | Some(Value::Null) => None,
        Some(Value::Object(context)) => {
            if Value::Object(context.clone()).to_string().len() > MAX_CONTEXT_BYTES {
                return Err(invalid(
                    "context",
                    format!("at most {MAX_CONTEXT_BYTES} bytes of JSON"),
                ));
            }
            Some(context.clone())
        }
        Some(_) => return Err(invalid("context", "expected an object")),
    };
    let field = |key: &str| context.as_ref().and_then(|context| context.get(key));
    let named = match field("session_id") {
        Some(Value::String(raw)) => Some(
            session_id(raw)
                .map_err(|_| invalid("context.session_id", "must be 1 to 64 characters"))?,
        ),
        _ => None,
    };
    let via = match field("via") {
        Some(Value::String(via)) if !via.is_empty() && via.chars().count() <= MAX_NAME_CHARS => {
            via.clone()
        }
        Some(Value::String(_)) => {
            return Err(invalid(
                "context.via",
                format!("1 to {MAX_NAME_CHARS} characters"),
            ))
        }
        _ => "inbox".to_string(),
    };
    let session = routed_session(named, &query, "context.session_id")?;
    if let Some(id) = &session {
        note_session(&http, id.as_str());
    }
    let note = Note {
        from,
        via,
        message,
        severity,
        session_id: session,
        context,
    };
    Ok(created(deliver(&runtime, &caller, note, true).await?))
}

#[derive(Deserialize)]
pub struct InboxPage {
    surfaced: Option<String>,
    limit: Option<String>,
    offset: Option<String>,
}

fn whole(raw: Option<&str>, name: &str, default: u32) -> Result<u32, ApiError> {
    match raw {
        None => Ok(default),
        Some(text) => text
            .parse()
            .map_err(|_| invalid(name, "expected a non-negative whole number")),
    }
}

#[utoipa::path(get, path = "/api/inbox", tag = "ingress",
    params(("surfaced" = Option<bool>, Query, description = "false: only waiting items; true: only surfaced ones; default all"),
           ("limit" = Option<u32>, Query, description = "1..100; default 20"),
           ("offset" = Option<u32>, Query, description = "Default 0")),
    responses(
        (status = 200, description = "Inbox items, oldest first", body = Vec<InboxItem>),
        (status = 403, description = "Not an admin", body = ErrorBody),
        (status = 422, description = "Bad surfaced, limit or offset", body = ErrorBody),
        (status = 503, description = "Database unreachable", body = ErrorBody)))]
pub async fn list_inbox(
    Authenticated(caller): Authenticated,
    runtime: web::Data<Runtime>,
    page: web::Query<InboxPage>,
) -> Result<HttpResponse, ApiError> {
    admin_only(&caller, "GET /api/inbox")?;
    let surfaced = match page.surfaced.as_deref() {
        None => None,
        Some("true") => Some(true),
        Some("false") => Some(false),
        Some(_) => return Err(invalid("surfaced", "expected true or false")),
    };
    let limit = whole(page.limit.as_deref(), "limit", 20)?;
    if !(1..=MAX_INBOX_PAGE).contains(&limit) {
        return Err(invalid("limit", format!("1 to {MAX_INBOX_PAGE}")));
    }
    let offset = whole(page.offset.as_deref(), "offset", 0)?;
    let items = runtime
        .deps()
        .inbox
        .list(surfaced, limit, offset)
        .await
        .map_err(SessionError::from)?;
    Ok(HttpResponse::Ok().json(items))
}

#[utoipa::path(patch, path = "/api/inbox/{item_id}/surfaced", tag = "ingress",
    params(("item_id" = String, Path, description = "The item's id")),
    responses(
        (status = 200, description = "The item, surfaced", body = InboxItem),
        (status = 403, description = "Not an admin", body = ErrorBody),
        (status = 404, description = "No such item", body = ErrorBody),
        (status = 503, description = "Database unreachable", body = ErrorBody)))]
pub async fn mark_surfaced(
    Authenticated(caller): Authenticated,
    runtime: web::Data<Runtime>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    admin_only(&caller, "PATCH /api/inbox/{id}/surfaced")?;
    let id = path.into_inner();
    if id.is_empty() || id.len() > 64 {
        return Err(invalid("item_id", "must be 1 to 64 characters"));
    }
    match runtime
        .deps()
        .inbox
        .mark_surfaced(&id)
        .await
        .map_err(SessionError::from)?
    {
        Some(item) => Ok(HttpResponse::Ok().json(item)),
        None => Ok(HttpResponse::NotFound().json(json!({
            "error": format!("inbox item {id:?} does not exist"),
            "type": ErrorType::NotFound.as_str(),
        }))),
    }
}
