//! The one error type of session requests. `kind()` is the machine word the
//! transports put in `type`; `Display` the sentence a host developer reads.

use std::fmt;

use crate::contract::ValidationError;
use crate::store::StoreError;

#[derive(Clone, Debug, PartialEq)]
pub enum SessionError {
    /// The request itself is malformed (422 / `validation`).
    Validation(ValidationError),
    /// The request does not fit the session's state (409 / `session_error`).
    Conflict(String),
    /// The session does not exist (404 on session routes).
    NotFound(String),
    /// The caller may not touch this session (403 / `forbidden`). Also the
    /// answer, for a caller who is not an admin, about a session that does
    /// not exist, so the reply never tells whether someone else's does.
    Forbidden(String),
    /// The caller is over a per-principal limit (429 / `rate_limited`);
    /// trying again after `retry_after_secs` may succeed.
    RateLimited {
        message: String,
        retry_after_secs: u64,
    },
    /// The store cannot be reached (503, `DatabaseError`).
    Unavailable(String),
    /// The session's actor stopped or is starting while the request was in
    /// flight (503, `unavailable`); sending the request again is safe.
    Restarting(String),
    /// A bug or an unexpected failure (500).
    Internal(String),
    /// The request needs more memory than the server grants it (413,
    /// `payload_too_large`): the attachment budget.
    TooLarge(String),
}

impl SessionError {
    pub fn kind(&self) -> &'static str {
        match self {
            SessionError::Validation(_) => "validation",
            SessionError::Conflict(_) => "session_error",
            SessionError::NotFound(_) => "not_found",
            SessionError::Forbidden(_) => "forbidden",
            SessionError::RateLimited { .. } => "rate_limited",
            SessionError::Unavailable(_) => "DatabaseError",
            SessionError::Restarting(_) => "unavailable",
            SessionError::Internal(_) => "internal",
            SessionError::TooLarge(_) => "payload_too_large",
        }
    }

    pub fn forbidden(id: &crate::ids::SessionId) -> SessionError {
        SessionError::Forbidden(id.to_string())
    }

    pub fn validation(path: &str, message: impl Into<String>) -> SessionError {
        SessionError::Validation(ValidationError {
            path: path.to_string(),
            message: message.into(),
        })
    }
}

impl fmt::Display for SessionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SessionError::Validation(error) => write!(f, "{error}"),
            SessionError::Conflict(message)
            | SessionError::Internal(message)
            | SessionError::TooLarge(message) => f.write_str(message),
            SessionError::NotFound(id) => write!(f, "session {id:?} does not exist"),
            SessionError::Forbidden(id) => {
                write!(f, "session {id:?} is not yours to see or change")
            }
            SessionError::RateLimited { message, .. } => f.write_str(message),
            SessionError::Unavailable(_) => f.write_str("Database not reachable"),
            SessionError::Restarting(cause) => {
                write!(
                    f,
                    "the session is not available right now ({cause}); send the request again"
                )
            }
        }
    }
}

impl std::error::Error for SessionError {}

impl From<ValidationError> for SessionError {
    fn from(error: ValidationError) -> Self {
        SessionError::Validation(error)
    }
}

impl From<StoreError> for SessionError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::Unavailable(cause) => SessionError::Unavailable(cause),
            StoreError::Failed(cause) => SessionError::Internal(format!("storage failed: {cause}")),
        }
    }
}
