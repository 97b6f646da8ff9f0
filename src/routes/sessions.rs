//! The session routes: list, inspect, path, tree, traces, repair, delete.

use actix_web::{web, HttpRequest, HttpResponse};
use actors::contract::ValidationError;
use actors::ids::{is_valid_id, MessageId, SessionId};
use actors::session::Runtime;
use serde::Deserialize;

use crate::access::{require_json, Authenticated};
use crate::errors::{ApiError, ErrorBody};
use actors::session::SessionInfo;
use actors::store::{SessionSummary, StoredTrace};

/// What every route about one stored session may answer besides its own
/// success (the access refusals are added to every `/api/` route by
/// `openapi::with_access`).
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)] // Only describes the responses for the document.
pub enum SessionRefusals {
    #[response(status = 404, description = "Unknown session")]
    Unknown(ErrorBody),
    #[response(status = 422, description = "Bad session id")]
    BadId(ErrorBody),
    #[response(status = 503, description = "Database unreachable")]
    Unavailable(ErrorBody),
}

/// The most sessions one page returns.
const MAX_PAGE: u32 = 500;

pub fn session_id(raw: &str) -> Result<SessionId, ApiError> {
    if !is_valid_id(raw) {
        return Err(ValidationError {
            path: "session_id".into(),
            message: "must be 1 to 64 characters".into(),
        }
        .into());
    }
    Ok(SessionId::new(raw))
}

#[derive(Deserialize)]
pub struct Page {
    limit: Option<String>,
    offset: Option<String>,
}

fn page_number(raw: Option<&str>, name: &str, default: u32) -> Result<u32, ApiError> {
    match raw {
        None => Ok(default),
        Some(text) => text.parse().map_err(|_| {
            ValidationError {
                path: name.into(),
                message: "expected a non-negative whole number".into(),
            }
            .into()
        }),
    }
}

#[utoipa::path(get, path = "/api/sessions", tag = "sessions",
    params(("limit" = Option<u32>, Query, description = "At most 500; default 50"),
           ("offset" = Option<u32>, Query, description = "Default 0")),
    responses((status = 200, description = "Sessions, newest first", body = Vec<SessionSummary>),
        (status = 422, description = "Bad limit or offset", body = ErrorBody),
        (status = 503, description = "Database unreachable", body = ErrorBody)))]
pub async fn list(
    Authenticated(caller): Authenticated,
    runtime: web::Data<Runtime>,
    page: web::Query<Page>,
) -> Result<HttpResponse, ApiError> {
    let limit = page_number(page.limit.as_deref(), "limit", 50)?;
    if limit > MAX_PAGE {
        return Err(ValidationError {
            path: "limit".into(),
            message: format!("at most {MAX_PAGE} sessions a page; page on with offset"),
        }
        .into());
    }
    let offset = page_number(page.offset.as_deref(), "offset", 0)?;
    Ok(HttpResponse::Ok().json(runtime.list(&caller, limit, offset).await?))
}

#[utoipa::path(get, path = "/api/sessions/{session_id}", tag = "sessions", params(("session_id" = String, Path, description = "1..64 characters")),
    responses((status = 200, description = "The session, with its pending action", body = SessionInfo),
        SessionRefusals))]
pub async fn info(
    Authenticated(caller): Authenticated,
    runtime: web::Data<Runtime>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(runtime.session(&caller, &session_id(&path)?).await?))
}

#[derive(Deserialize)]
pub struct Leaf {
    leaf_id: Option<String>,
}

#[utoipa::path(get, path = "/api/sessions/{session_id}/messages", tag = "sessions",
    params(("session_id" = String, Path, description = "1..64 characters"),
           ("leaf_id" = Option<String>, Query, description = "Default: the active leaf")),
    responses((status = 200, description = "Root-to-leaf path of stored messages (docs/protocol.md)", body = Vec<Object>),
        SessionRefusals))]
pub async fn messages(
    Authenticated(caller): Authenticated,
    runtime: web::Data<Runtime>,
    path: web::Path<String>,
    leaf: web::Query<Leaf>,
) -> Result<HttpResponse, ApiError> {
    let leaf_id = leaf
        .leaf_id
        .clone()
        .filter(|id| !id.is_empty())
        .map(MessageId::new);
    Ok(HttpResponse::Ok().json(
        runtime
            .messages(&caller, &session_id(&path)?, leaf_id)
            .await?,
    ))
}

#[utoipa::path(get, path = "/api/sessions/{session_id}/tree", tag = "sessions", params(("session_id" = String, Path, description = "1..64 characters")),
    responses((status = 200, description = "Every stored message, each with parent_id", body = Vec<Object>),
        SessionRefusals))]
pub async fn tree(
    Authenticated(caller): Authenticated,
    runtime: web::Data<Runtime>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(runtime.tree(&caller, &session_id(&path)?).await?))
}

#[utoipa::path(get, path = "/api/sessions/{session_id}/traces", tag = "sessions",
    params(("session_id" = String, Path, description = "1..64 characters"),
           ("limit" = Option<u32>, Query, description = "At most 500; default 50"),
           ("offset" = Option<u32>, Query, description = "Default 0")),
    responses((status = 200, description = "The session's turn traces, oldest first (docs/protocol.md); empty unless TRACES__ENABLED", body = Vec<StoredTrace>),
        (status = 404, description = "Unknown session", body = ErrorBody),
        (status = 422, description = "Bad session id, limit or offset", body = ErrorBody),
        (status = 503, description = "Database unreachable", body = ErrorBody)))]
pub async fn traces(
    Authenticated(caller): Authenticated,
    runtime: web::Data<Runtime>,
    path: web::Path<String>,
    page: web::Query<Page>,
) -> Result<HttpResponse, ApiError> {
    let id = session_id(&path)?;
    let limit = page_number(page.limit.as_deref(), "limit", 50)?;
    if limit > MAX_PAGE {
        return Err(ValidationError {
            path: "limit".into(),
            message: format!("at most {MAX_PAGE} traces a page; page on with offset"),
        }
        .into());
    }
    let offset = page_number(page.offset.as_deref(), "offset", 0)?;
    Ok(HttpResponse::Ok().json(runtime.traces(&caller, &id, limit, offset).await?))
}

#[utoipa::path(post, path = "/api/sessions/{session_id}/repair", tag = "sessions", params(("session_id" = String, Path, description = "1..64 characters")),
    responses((status = 200, description = "The session after resolving unresolved calls as unknown", body = SessionInfo),
        SessionRefusals))]
pub async fn repair(
    req: HttpRequest,
    Authenticated(caller): Authenticated,
    runtime: web::Data<Runtime>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    require_json(&req, None)?;
    Ok(HttpResponse::Ok().json(runtime.repair(&caller, &session_id(&path)?).await?))
}

/// `DELETE /api/sessions/{id}`'s answer.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct Deleted {
    pub deleted: bool,
    pub session_id: String,
}

#[utoipa::path(delete, path = "/api/sessions/{session_id}", tag = "sessions", params(("session_id" = String, Path, description = "1..64 characters")),
    responses((status = 200, description = "Deleted", body = Deleted),
        SessionRefusals))]
pub async fn delete(
    Authenticated(caller): Authenticated,
    runtime: web::Data<Runtime>,
    metrics: web::Data<crate::observability::Metrics>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = session_id(&path)?;
    if !runtime.delete(&caller, &id).await? {
        return Err(actors::session::SessionError::NotFound(id.to_string()).into());
    }
    metrics.session_deleted(id.as_ref());
    Ok(HttpResponse::Ok().json(Deleted {
        deleted: true,
        session_id: id.to_string(),
    }))
}
