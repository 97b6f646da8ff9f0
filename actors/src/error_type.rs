//! The one vocabulary of error words the runtime sends: the HTTP body's
//! `type`, the socket's `assistant:error` `type` and `error_type`, AG-UI's
//! `RUN_ERROR` `code`, and a turn's `error_type` (docs/protocol.md, "Errors").
//! Each word is spelled once, here, so no transport can drift from another.

use std::fmt;

use serde::{Serialize, Serializer};

/// An error word on the wire. The spellings are a public contract: hosts
/// match on them, so a variant may be renamed but its string may not change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorType {
    // Refused requests.
    /// A malformed request (422).
    Validation,
    /// The request does not fit the session's state (409).
    SessionError,
    /// An unknown session or route (404).
    NotFound,
    /// A known route with the wrong method (405).
    MethodNotAllowed,
    /// No acceptable credentials (401, or a refused socket connect).
    Unauthorized,
    /// The session is not the caller's (403).
    Forbidden,
    /// The caller is over a per-principal limit (429).
    RateLimited,
    /// The body or its attachments are over a limit (413).
    PayloadTooLarge,
    /// A POST that is not JSON (415).
    UnsupportedMediaType,
    /// A browser origin CORS does not allow (400).
    OriginRefused,
    /// The database cannot be reached (503). Spelled as the word hosts
    /// already match on, hence the capitals.
    DatabaseError,
    /// The session's actor stopped or is starting; sending again is safe (503).
    Unavailable,
    /// An AG-UI client read the stream too slowly and was cut off; the
    /// turn ran on and is saved.
    SlowReader,
    /// The socket's one word for a refusal that is the server's side
    /// (database, restart, bug, memory); the precise word is in `error_type`.
    Error,

    // Turn endings (`error_type` of a final response).
    /// The provider throttled.
    RateLimit,
    /// The provider refused the key.
    ProviderAuth,
    /// The provider refused the request as malformed.
    ProviderClientError,
    /// The provider failed (5xx, bad answer).
    ProviderError,
    /// The provider could not be reached.
    ConnectionError,
    /// The provider went silent too long, or a body did not arrive in time (408).
    Timeout,
    /// `max_turns` or a budget was reached; the partial message is saved.
    UsageLimit,
    /// Cancelled by the host or a newer message.
    Cancelled,
    /// A silent decision proposed several actions.
    InvalidDecision,
    /// A bug or an unexpected failure in the runtime (500).
    Internal,
}

impl ErrorType {
    /// Every word, for parsing and for the tests that hold the spellings.
    pub const ALL: [ErrorType; 24] = [
        ErrorType::Validation,
        ErrorType::SessionError,
        ErrorType::NotFound,
        ErrorType::MethodNotAllowed,
        ErrorType::Unauthorized,
        ErrorType::Forbidden,
        ErrorType::RateLimited,
        ErrorType::PayloadTooLarge,
        ErrorType::UnsupportedMediaType,
        ErrorType::OriginRefused,
        ErrorType::DatabaseError,
        ErrorType::Unavailable,
        ErrorType::SlowReader,
        ErrorType::Error,
        ErrorType::RateLimit,
        ErrorType::ProviderAuth,
        ErrorType::ProviderClientError,
        ErrorType::ProviderError,
        ErrorType::ConnectionError,
        ErrorType::Timeout,
        ErrorType::UsageLimit,
        ErrorType::Cancelled,
        ErrorType::InvalidDecision,
        ErrorType::Internal,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ErrorType::Validation => "validation",
            ErrorType::SessionError => "session_error",
            ErrorType::NotFound => "not_found",
            ErrorType::MethodNotAllowed => "method_not_allowed",
            ErrorType::Unauthorized => "unauthorized",
            ErrorType::Forbidden => "forbidden",
            ErrorType::RateLimited => "rate_limited",
            ErrorType::PayloadTooLarge => "payload_too_large",
            ErrorType::UnsupportedMediaType => "unsupported_media_type",
            ErrorType::OriginRefused => "origin_refused",
            ErrorType::DatabaseError => "DatabaseError",
            ErrorType::Unavailable => "unavailable",
            ErrorType::SlowReader => "slow_reader",
            ErrorType::Error => "error",
            ErrorType::RateLimit => "rate_limit",
            ErrorType::ProviderAuth => "provider_auth",
            ErrorType::ProviderClientError => "provider_client_error",
            ErrorType::ProviderError => "provider_error",
            ErrorType::ConnectionError => "connection_error",
            ErrorType::Timeout => "timeout",
            ErrorType::UsageLimit => "usage_limit",
            ErrorType::Cancelled => "cancelled",
            ErrorType::InvalidDecision => "invalid_decision",
            ErrorType::Internal => "internal",
        }
    }

    /// The word as read back from a stored or streamed `error_type`; `None`
    /// for a word this runtime never sends.
    pub fn parse(word: &str) -> Option<ErrorType> {
        ErrorType::ALL
            .into_iter()
            .find(|error_type| error_type.as_str() == word)
    }

    /// Whether a turn that ended this way is a normal, saved ending (the
    /// partial reply is kept, HTTP answers 200) rather than a failure.
    pub fn is_saved_ending(self) -> bool {
        matches!(self, ErrorType::Cancelled | ErrorType::UsageLimit)
    }
}

impl fmt::Display for ErrorType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for ErrorType {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl PartialEq<ErrorType> for str {
    fn eq(&self, other: &ErrorType) -> bool {
        self == other.as_str()
    }
}

impl PartialEq<ErrorType> for &str {
    fn eq(&self, other: &ErrorType) -> bool {
        *self == other.as_str()
    }
}

impl PartialEq<ErrorType> for String {
    fn eq(&self, other: &ErrorType) -> bool {
        self == other.as_str()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_word_reads_back_as_itself() {
        for error_type in ErrorType::ALL {
            assert_eq!(ErrorType::parse(error_type.as_str()), Some(error_type));
        }
        assert_eq!(ErrorType::parse("no_such_word"), None);
    }

    #[test]
    fn serializes_as_its_word() {
        let json = serde_json::to_value([ErrorType::DatabaseError, ErrorType::Unavailable]);
        assert_eq!(
            json.ok(),
            Some(serde_json::json!(["DatabaseError", "unavailable"]))
        );
    }

    #[test]
    fn the_words_hosts_match_on_are_unchanged() {
        // docs/protocol.md's tables; a change here breaks hosts.
        let words: Vec<&str> = ErrorType::ALL.iter().map(|kind| kind.as_str()).collect();
        assert_eq!(
            words,
            [
                "validation",
                "session_error",
                "not_found",
                "method_not_allowed",
                "unauthorized",
                "forbidden",
                "rate_limited",
                "payload_too_large",
                "unsupported_media_type",
                "origin_refused",
                "DatabaseError",
                "unavailable",
                "slow_reader",
                "error",
                "rate_limit",
                "provider_auth",
                "provider_client_error",
                "provider_error",
                "connection_error",
                "timeout",
                "usage_limit",
                "cancelled",
                "invalid_decision",
                "internal",
            ]
        );
    }
}
