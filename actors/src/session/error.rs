//! The one error type of session requests: `error_type()` the word the
//! transports send, `Display` the sentence a host developer reads.

use std::fmt;

use crate::contract::ValidationError;
use crate::error_type::ErrorType;
use crate::store::StoreError;

/// What a host reads when the database cannot be reached, for a refused
/// request and for a turn whose result could not be saved alike.
pub const DATABASE_UNREACHABLE: &str = "Database not reachable";

pub type SessionResult<T> = Result<T, SessionError>;

#[derive(Clone, Debug, PartialEq)]
pub enum SessionError {
    /// 422: the request itself is malformed.
    Validation(ValidationError),
    /// 409: the request does not fit the session's state.
    Conflict(String),
    NotFound(String),
    /// 403; also to a non-admin about a session that does not exist, so the
    /// reply never tells whether someone else's does.
    Forbidden(String),
    /// 429: over a per-principal limit.
    RateLimited {
        message: String,
        retry_after_secs: u64,
    },
    /// Unreachable (503) or failed (500); the `source()`, so a log keeps
    /// the driver's error under it.
    Store(StoreError),
    /// 503: the actor stopped or is starting; sending again is safe.
    ActorUnavailable(String),
    Internal(String),
    /// 413: over the attachment budget.
    TooLarge(String),
}

impl SessionError {
    pub fn error_type(&self) -> ErrorType {
        match self {
            SessionError::Validation(_) => ErrorType::Validation,
            SessionError::Conflict(_) => ErrorType::SessionError,
            SessionError::NotFound(_) => ErrorType::NotFound,
            SessionError::Forbidden(_) => ErrorType::Forbidden,
            SessionError::RateLimited { .. } => ErrorType::RateLimited,
            SessionError::Store(error) => error.error_type(),
            SessionError::ActorUnavailable(_) => ErrorType::Unavailable,
            SessionError::Internal(_) => ErrorType::Internal,
            SessionError::TooLarge(_) => ErrorType::PayloadTooLarge,
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
            | SessionError::TooLarge(message)
            | SessionError::RateLimited { message, .. } => f.write_str(message),
            SessionError::NotFound(id) => write!(f, "session {id:?} does not exist"),
            SessionError::Forbidden(id) => {
                write!(f, "session {id:?} is not yours to see or change")
            }
            SessionError::Store(error @ StoreError::Unavailable(_)) => match error.remedy() {
                Some(remedy) => write!(f, "{DATABASE_UNREACHABLE}: {remedy}"),
                None => f.write_str(DATABASE_UNREACHABLE),
            },
            SessionError::Store(StoreError::Failed(cause)) => write!(f, "storage failed: {cause}"),
            SessionError::ActorUnavailable(cause) => write!(
                f,
                "the session is not available right now ({cause}); send the request again"
            ),
        }
    }
}

impl std::error::Error for SessionError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SessionError::Store(error) => Some(error),
            _ => None,
        }
    }
}

impl From<ValidationError> for SessionError {
    fn from(error: ValidationError) -> Self {
        SessionError::Validation(error)
    }
}

impl From<crate::budget::OverBudget> for SessionError {
    fn from(error: crate::budget::OverBudget) -> Self {
        SessionError::TooLarge(error.0)
    }
}

impl From<StoreError> for SessionError {
    fn from(error: StoreError) -> Self {
        SessionError::Store(error)
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error;

    use super::*;
    use crate::store::StoreCause;

    fn io_cause() -> StoreCause {
        StoreCause::caused_by(
            "connection refused",
            std::io::Error::from(std::io::ErrorKind::ConnectionRefused),
        )
    }

    #[test]
    fn a_store_error_keeps_its_source() {
        let error = SessionError::from(StoreError::Unavailable(io_cause()));
        let store = error.source().map(ToString::to_string);
        assert_eq!(
            store.as_deref(),
            Some("database unavailable: connection refused")
        );
        let driver = error.source().and_then(Error::source);
        assert!(driver.is_some_and(|driver| driver.is::<std::io::Error>()));
    }

    #[test]
    fn store_errors_keep_their_wire_words() {
        let unreachable = SessionError::from(StoreError::Unavailable(io_cause()));
        assert_eq!(unreachable.error_type().as_str(), "DatabaseError");
        assert_eq!(unreachable.to_string(), DATABASE_UNREACHABLE);
        let failed = SessionError::from(StoreError::Failed("bad row".into()));
        assert_eq!(failed.error_type().as_str(), "internal");
        assert_eq!(failed.to_string(), "storage failed: bad row");
        let stopped = SessionError::ActorUnavailable("session stopped".into());
        assert_eq!(stopped.error_type().as_str(), "unavailable");
    }
}
