//! The one place an error becomes a status code and `{"error", "type"}`, and
//! the `assistant:error` payload of the socket, so transports cannot drift.

use actix_web::body::EitherBody;
use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};
use actors::contract::ValidationError;
use actors::error_type::ErrorType;
use actors::session::SessionError;
use actors::store::StoreError;
use serde::Serialize;
use serde_json::{json, Value};
use utoipa::ToSchema;

#[derive(Debug)]
pub enum ApiError {
    Session(SessionError),
    /// The body is larger than the server accepts.
    TooLarge(usize),
    /// No acceptable credentials: why, for the developer (401).
    Unauthorized(String),
    /// A POST whose `Content-Type` is not JSON (415): a form or `text/plain`
    /// request a browser sends cross-site without a preflight must not run a turn.
    UnsupportedMediaType(String),
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
            ApiError::Unauthorized(why) => write!(f, "unauthorized: {why}"),
            ApiError::UnsupportedMediaType(why) => write!(f, "Content-Type: {why}"),
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

/// Every HTTP error's body.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    /// A sentence for people; a validation error starts with the field path.
    pub error: String,
    /// A word for programs: `validation`, `session_error`, `not_found`, `DatabaseError`, ...
    #[serde(rename = "type")]
    #[schema(value_type = String)]
    pub kind: ErrorType,
}

impl ApiError {
    pub fn kind(&self) -> ErrorType {
        match self {
            ApiError::Session(error) => error.error_type(),
            ApiError::TooLarge(_) => ErrorType::PayloadTooLarge,
            ApiError::Unauthorized(_) => ErrorType::Unauthorized,
            ApiError::UnsupportedMediaType(_) => ErrorType::UnsupportedMediaType,
            ApiError::BodyTimeout(_) => ErrorType::Timeout,
        }
    }

    pub fn body(&self) -> Value {
        error_body(self.to_string(), self.kind())
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        match self {
            ApiError::Session(SessionError::Validation(_)) => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::Session(SessionError::Conflict(_)) => StatusCode::CONFLICT,
            ApiError::Session(SessionError::NotFound(_)) => StatusCode::NOT_FOUND,
            ApiError::Session(SessionError::Forbidden(_)) => StatusCode::FORBIDDEN,
            ApiError::Session(SessionError::RateLimited { .. }) => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Session(
                SessionError::Store(StoreError::Unavailable(_)) | SessionError::ActorUnavailable(_),
            ) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Session(
                SessionError::Internal(_) | SessionError::Store(StoreError::Failed(_)),
            ) => StatusCode::INTERNAL_SERVER_ERROR,
            ApiError::TooLarge(_) | ApiError::Session(SessionError::TooLarge(_)) => {
                StatusCode::PAYLOAD_TOO_LARGE
            }
            ApiError::BodyTimeout(_) => StatusCode::REQUEST_TIMEOUT,
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
        }
    }

    fn error_response(&self) -> HttpResponse {
        match self {
            ApiError::Session(SessionError::Internal(cause)) => {
                log::warn!("request failed: {cause}");
            }
            ApiError::Session(SessionError::Store(cause)) => {
                log::warn!("request failed: {cause}");
            }
            _ => {}
        }
        let mut response = HttpResponse::build(self.status_code());
        if let ApiError::Session(SessionError::RateLimited {
            retry_after_secs, ..
        }) = self
        {
            response.insert_header(("Retry-After", retry_after_secs.to_string()));
        }
        if let ApiError::Unauthorized(_) = self {
            response.insert_header(("WWW-Authenticate", "Bearer"));
        }
        response.json(self.body())
    }
}

/// The HTTP error body `{"error", "type"}`.
pub fn error_body(error: impl Into<String>, kind: ErrorType) -> Value {
    serde_json::to_value(ErrorBody {
        error: error.into(),
        kind,
    })
    .unwrap_or(Value::Null)
}

/// The body of a 404 for a path no route serves.
pub fn no_such_route() -> Value {
    error_body("no such route", ErrorType::NotFound)
}

/// The `assistant:error` payload for a request error on the socket.
pub fn socket_error(error: &SessionError) -> Value {
    let kind = match error {
        SessionError::Validation(_) => ErrorType::Validation,
        SessionError::Conflict(_) | SessionError::NotFound(_) => ErrorType::SessionError,
        SessionError::Forbidden(_) => ErrorType::Forbidden,
        SessionError::RateLimited { .. } => ErrorType::RateLimited,
        SessionError::Store(_)
        | SessionError::ActorUnavailable(_)
        | SessionError::Internal(_)
        | SessionError::TooLarge(_) => ErrorType::Error,
    };
    let retry_allowed = matches!(
        error,
        SessionError::Store(StoreError::Unavailable(_))
            | SessionError::ActorUnavailable(_)
            | SessionError::RateLimited { .. }
            | SessionError::TooLarge(_)
    );
    let mut payload = json!({"type": kind, "message": error.to_string(), "error_type": error.error_type(),
           "terminal": true, "retry_allowed": retry_allowed});
    if let SessionError::RateLimited {
        retry_after_secs, ..
    } = error
    {
        payload["retry_after"] = json!(retry_after_secs);
    }
    payload
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

/// An error reply (4xx or 5xx) in the JSON error shape: actix's own
/// plain-text ones (oversized body, wrong method, bad path) are replaced,
/// so no client ever sees a non-JSON error; JSON replies pass as they are.
/// Applied by `edge::Edge` to every reply.
pub fn json_error_page<B>(
    response: actix_web::dev::ServiceResponse<B>,
    max_body: usize,
) -> actix_web::dev::ServiceResponse<EitherBody<B>> {
    let is_json = response
        .headers()
        .get(actix_web::http::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("application/json"));
    if is_json {
        return response.map_into_left_body();
    }
    let status = response.status();
    let refused_origin = (status == StatusCode::BAD_REQUEST)
        .then(|| {
            response
                .request()
                .headers()
                .get(actix_web::http::header::ORIGIN)
        })
        .flatten()
        .filter(|_| {
            !response
                .headers()
                .contains_key(actix_web::http::header::ACCESS_CONTROL_ALLOW_ORIGIN)
        })
        .map(|origin| String::from_utf8_lossy(origin.as_bytes()).into_owned());
    let body = match status {
        // actix-cors refused the request's origin before any handler ran.
        StatusCode::BAD_REQUEST if refused_origin.is_some() => error_body(
            format!(
                "origin {:?} is not allowed (ACCESS__CORS_ORIGINS, ACCESS__CORS_ORIGIN_REGEX)",
                refused_origin.unwrap_or_default()
            ),
            ErrorType::OriginRefused,
        ),
        StatusCode::PAYLOAD_TOO_LARGE => ApiError::TooLarge(max_body).body(),
        StatusCode::METHOD_NOT_ALLOWED => error_body(
            "method not allowed on this route",
            ErrorType::MethodNotAllowed,
        ),
        StatusCode::NOT_FOUND => no_such_route(),
        other => error_body(
            other.canonical_reason().unwrap_or("request failed"),
            if other.is_client_error() {
                ErrorType::Validation
            } else {
                ErrorType::Internal
            },
        ),
    };
    let (request, original) = response.into_parts();
    let mut replaced = HttpResponse::build(status).json(body);
    // Keep the CORS answer, so a browser page can read the error.
    for (name, value) in original.headers() {
        if name.as_str().starts_with("access-control-") || name == actix_web::http::header::VARY {
            replaced.headers_mut().insert(name.clone(), value.clone());
        }
    }
    actix_web::dev::ServiceResponse::new(request, replaced).map_into_right_body()
}
