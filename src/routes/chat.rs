//! `POST /api/chat` (a non-streaming turn) and its cancel route.

use actix_web::{web, HttpResponse};
use actors::contract::{ChatRequest, MessageType, ValidationError};
use actors::events::{EventSink, FinalResponse, TurnEvent};
use actors::session::{Runtime, SessionError};
use serde_json::json;

use crate::body::{read_body, BodyLimits};
use crate::errors::{parse_json, ApiError};

/// Turn errors that are the runtime's or the provider's failure (500); a
/// cancelled or budget-limited turn is a normal, saved ending (200).
const SAVED_ENDINGS: [&str; 2] = ["cancelled", "usage_limit"];

pub async fn post_chat(
    runtime: web::Data<Runtime>,
    limits: web::Data<BodyLimits>,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let body = read_body(payload, &limits).await?;
    let value = parse_json(&body)?;
    let request = ChatRequest::parse(&value)?;
    if request.message_type == MessageType::Steering {
        return Err(ValidationError {
            path: "message_type".into(),
            message: "steering is only accepted over Socket.IO, where a turn can be live".into(),
        }
        .into());
    }
    let (sink, mut events) = EventSink::new(false);
    runtime.send_message(request, sink).await?;
    while let Some(event) = events.recv().await {
        if let TurnEvent::FinalResponse(final_response) = event {
            return Ok(final_reply(*final_response));
        }
    }
    Err(SessionError::Internal("the turn ended without a final response".into()).into())
}

fn final_reply(final_response: FinalResponse) -> HttpResponse {
    let failed = final_response
        .error_type
        .as_deref()
        .filter(|error_type| !SAVED_ENDINGS.contains(error_type));
    let mut body = serde_json::to_value(&final_response).unwrap_or_default();
    if failed == Some(SessionError::Unavailable(String::new()).kind()) {
        // The turn ran but its result could not be stored: the database's fault (503).
        body["type"] = json!(failed);
        body["error"] = json!(SessionError::Unavailable(String::new()).to_string());
        return HttpResponse::ServiceUnavailable().json(body);
    }
    match failed {
        Some(error_type) => {
            body["type"] = json!(error_type);
            body["error"] = json!(final_response
                .error_message
                .clone()
                .unwrap_or_else(|| error_type.to_string()));
            HttpResponse::InternalServerError().json(body)
        }
        None => HttpResponse::Ok().json(body),
    }
}

pub async fn cancel(
    runtime: web::Data<Runtime>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let session_id = super::sessions::session_id(&path)?;
    let cancel_requested = runtime.cancel(&session_id).await?;
    Ok(HttpResponse::Ok().json(json!({"cancel_requested": cancel_requested})))
}
