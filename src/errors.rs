//! The one place an error becomes a status code and `{"error", "type"}`, and
//! the `assistant:error` payload of the socket, so transports cannot drift.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};
use actors::contract::ValidationError;
use actors::session::SessionError;
use serde_json::{json, Value};

#[derive(Debug)]
pub enum ApiError {
    Session(SessionError),
    /// The body is larger than the server accepts.
    TooLarge(usize),
    /// The body did not arrive within this many seconds (a slow-body client).
    BodyTimeout(u64),
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ApiError::Session(error) => write!(f, "{error}"),
            ApiError::TooLarge(limit) => {
                write!(f, "body: larger than the {limit} bytes this server accepts")
            }
            ApiError::BodyTimeout(seconds) => {
                write!(f, "body: not received within {seconds} s")
            }
        }
    }
}

impl From<SessionError> for ApiError {
    fn from(error: SessionError) -> Self {
        ApiError::Session(error)
    }
}

impl From<ValidationError> for ApiError {
    fn from(error: ValidationError) -> Self {
        ApiError::Session(SessionError::Validation(error))
    }
}

impl ApiError {
    pub fn kind(&self) -> &'static str {
        match self {
            ApiError::Session(error) => error.kind(),
            ApiError::TooLarge(_) => "payload_too_large",
            ApiError::BodyTimeout(_) => "timeout",
        }
    }

    pub fn body(&self) -> Value {
        json!({"error": self.to_string(), "type": self.kind()})
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        match self {
            ApiError::Session(SessionError::Validation(_)) => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::Session(SessionError::Conflict(_)) => StatusCode::CONFLICT,
            ApiError::Session(SessionError::NotFound(_)) => StatusCode::NOT_FOUND,
            ApiError::Session(SessionError::Unavailable(_) | SessionError::Restarting(_)) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            ApiError::Session(SessionError::Internal(_)) => StatusCode::INTERNAL_SERVER_ERROR,
            ApiError::TooLarge(_) | ApiError::Session(SessionError::TooLarge(_)) => {
                StatusCode::PAYLOAD_TOO_LARGE
            }
            ApiError::BodyTimeout(_) => StatusCode::REQUEST_TIMEOUT,
        }
    }

    fn error_response(&self) -> HttpResponse {
        if let ApiError::Session(SessionError::Internal(cause) | SessionError::Unavailable(cause)) =
            self
        {
            log::warn!("request failed: {cause}");
        }
        HttpResponse::build(self.status_code()).json(self.body())
    }
}

/// The `assistant:error` payload for a request error on the socket.
pub fn socket_error(error: &SessionError) -> Value {
    let kind = match error {
        SessionError::Validation(_) => "validation",
        SessionError::Conflict(_) | SessionError::NotFound(_) => "session_error",
        SessionError::Unavailable(_)
        | SessionError::Restarting(_)
        | SessionError::Internal(_)
        | SessionError::TooLarge(_) => "error",
    };
    let retry_allowed = matches!(
        error,
        SessionError::Unavailable(_) | SessionError::Restarting(_) | SessionError::TooLarge(_)
    );
    json!({"type": kind, "message": error.to_string(), "error_type": error.kind(), "terminal": true,
           "retry_allowed": retry_allowed})
}

/// Parses a JSON body, naming `body` when it is not JSON.
pub fn parse_json(bytes: &[u8]) -> Result<Value, ApiError> {
    // Before parsing: the parser recurses, and its own limit names no path.
    actors::contract::depth::check_text(bytes, "")?;
    serde_json::from_slice(bytes).map_err(|error| {
        ApiError::from(ValidationError {
            path: "body".into(),
            message: format!("invalid JSON: {error}"),
        })
    })
}

/// Turns actix's own plain-text error replies (oversized body, wrong method,
/// bad path) into the JSON error shape, so no client ever sees a non-JSON error.
pub fn json_error_pages<B: actix_web::body::MessageBody + 'static>(
    max_body: usize,
) -> actix_web::middleware::ErrorHandlers<B> {
    use actix_web::middleware::{ErrorHandlerResponse, ErrorHandlers};
    let rewrite = move |response: actix_web::dev::ServiceResponse<B>| {
        let is_json = response
            .headers()
            .get(actix_web::http::header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.starts_with("application/json"));
        if is_json {
            return Ok(ErrorHandlerResponse::Response(
                response.map_into_left_body(),
            ));
        }
        let status = response.status();
        let body = match status {
            StatusCode::PAYLOAD_TOO_LARGE => ApiError::TooLarge(max_body).body(),
            StatusCode::METHOD_NOT_ALLOWED => {
                json!({"error": "method not allowed on this route", "type": "method_not_allowed"})
            }
            StatusCode::NOT_FOUND => json!({"error": "no such route", "type": "not_found"}),
            other => {
                json!({"error": other.canonical_reason().unwrap_or("request failed"), "type": if other.is_client_error() { "validation" } else { "internal" }})
            }
        };
        let (request, _) = response.into_parts();
        let replaced = HttpResponse::build(status).json(body);
        Ok(ErrorHandlerResponse::Response(
            actix_web::dev::ServiceResponse::new(request, replaced).map_into_right_body(),
        ))
    };
    ErrorHandlers::new().default_handler(rewrite)
}
