//! `PATCH /api/sessions/{id}/owner` (admins): hands a session to another
//! principal, `{"owner_id": "..."}`, or to none, `{"owner_id": null}` (then
//! only admins may touch it). Answers `{"session_id", "owner_id"}` as the
//! Python original does; the change goes through the session's actor and
//! the store (`Runtime::set_owner`).

use std::sync::Arc;

use actix_web::{web, HttpRequest, HttpResponse};
use actors::contract::ValidationError;
use actors::session::{Runtime, SessionError};
use serde_json::Value;

use super::sessions::{session_id, SessionRefusals};
use crate::access::{require_json, Authenticated};
use crate::body::{read_body, BodyLimits};
use crate::errors::{ApiError, ErrorBody};

/// The longest owner id (the original's limit).
pub const MAX_OWNER_ID_CHARS: usize = 128;

/// The body of `PATCH /api/sessions/{id}/owner`.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)] // Only describes the body for the document; parsed by hand.
pub struct OwnerUpdate {
    /// The new owner's principal id (1..=128 characters), or null for none.
    owner_id: Option<String>,
}

/// Its answer.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct OwnerSet {
    pub session_id: String,
    pub owner_id: Option<String>,
}

#[utoipa::path(patch, path = "/api/sessions/{session_id}/owner", tag = "sessions",
    params(("session_id" = String, Path, description = "1..64 characters")),
    request_body = OwnerUpdate,
    responses((status = 200, description = "The session's new owner", body = OwnerSet),
        (status = 403, description = "Not an admin", body = ErrorBody),
        SessionRefusals))]
pub async fn set_owner(
    req: HttpRequest,
    Authenticated(caller): Authenticated,
    runtime: web::Data<Runtime>,
    body_limits: web::Data<BodyLimits>,
    path: web::Path<String>,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    if !caller.admin {
        return Err(SessionError::Forbidden("handing a session over is for admins".into()).into());
    }
    let id = session_id(&path)?;
    require_json(&req, None)?;
    let body = read_body(payload, &body_limits).await?;
    let owner_id = parse_owner(&body)?;
    runtime.set_owner(&caller, &id, owner_id.clone()).await?;
    Ok(HttpResponse::Ok().json(OwnerSet {
        session_id: id.to_string(),
        owner_id: owner_id.as_deref().map(String::from),
    }))
}

/// `{"owner_id": string | null}`, and nothing else. The key is required: an
/// empty body leaving a session to admins only would be too easy a mistake.
fn parse_owner(body: &[u8]) -> Result<Option<Arc<str>>, ValidationError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|error| ValidationError::new("body", format!("not JSON: {error}")))?;
    let Value::Object(fields) = value else {
        return Err(ValidationError::new(
            "body",
            "expected an object {\"owner_id\": ...}",
        ));
    };
    if let Some(unknown) = fields.keys().find(|key| *key != "owner_id") {
        return Err(ValidationError::new(
            unknown,
            "unknown field; the body is {\"owner_id\": ...}",
        ));
    }
    match fields.get("owner_id") {
        None => Err(ValidationError::new(
            "owner_id",
            "required: the new owner's principal id, or null for none",
        )),
        Some(Value::Null) => Ok(None),
        Some(Value::String(owner)) if (1..=MAX_OWNER_ID_CHARS).contains(&owner.chars().count()) => {
            Ok(Some(Arc::from(owner.as_str())))
        }
        Some(_) => Err(ValidationError::new(
            "owner_id",
            format!("expected a string of 1 to {MAX_OWNER_ID_CHARS} characters, or null"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(body: &str, expected: Result<Option<&str>, &str>) {
        let parsed = parse_owner(body.as_bytes());
        match expected {
            Ok(owner) => assert_eq!(parsed.expect(body).as_deref(), owner),
            Err(path) => assert_eq!(parsed.expect_err(body).path, path),
        }
    }

    #[test]
    fn an_owner_body_is_a_principal_or_null_and_nothing_else() {
        check(r#"{"owner_id": "bob"}"#, Ok(Some("bob")));
        check(r#"{"owner_id": null}"#, Ok(None));
        check(r#"{}"#, Err("owner_id"));
        check(r#"{"owner_id": ""}"#, Err("owner_id"));
        check(r#"{"owner_id": 7}"#, Err("owner_id"));
        check(
            &format!(r#"{{"owner_id": "{}"}}"#, "x".repeat(129)),
            Err("owner_id"),
        );
        check(r#"{"owner_id": "bob", "role": "admin"}"#, Err("role"));
        check(r#"["bob"]"#, Err("body"));
        check("bob", Err("body"));
    }
}
