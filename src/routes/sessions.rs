//! The session routes: list, inspect, path, tree, repair, delete.

use actix_web::{web, HttpRequest, HttpResponse};
use actors::contract::ValidationError;
use actors::ids::{is_valid_id, MessageId, SessionId};
use actors::session::Runtime;
use serde::Deserialize;
use serde_json::json;

use crate::access::{require_json, Authenticated};
use crate::errors::ApiError;

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

pub async fn list(
    Authenticated(caller): Authenticated,
    runtime: web::Data<Runtime>,
    page: web::Query<Page>,
) -> Result<HttpResponse, ApiError> {
    let limit = page_number(page.limit.as_deref(), "limit", 50)?.min(MAX_PAGE);
    let offset = page_number(page.offset.as_deref(), "offset", 0)?;
    Ok(HttpResponse::Ok().json(runtime.list(&caller, limit, offset).await?))
}

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

pub async fn tree(
    Authenticated(caller): Authenticated,
    runtime: web::Data<Runtime>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(runtime.tree(&caller, &session_id(&path)?).await?))
}

pub async fn repair(
    req: HttpRequest,
    Authenticated(caller): Authenticated,
    runtime: web::Data<Runtime>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    require_json(&req, None)?;
    Ok(HttpResponse::Ok().json(runtime.repair(&caller, &session_id(&path)?).await?))
}

pub async fn delete(
    Authenticated(caller): Authenticated,
    runtime: web::Data<Runtime>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = session_id(&path)?;
    if !runtime.delete(&caller, &id).await? {
        return Err(actors::session::SessionError::NotFound(id.to_string()).into());
    }
    Ok(HttpResponse::Ok().json(json!({"deleted": true, "session_id": id})))
}
