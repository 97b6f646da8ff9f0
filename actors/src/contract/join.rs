//! The small Socket.IO payloads: `assistant_join_session` `{session_id,
//! host_context?}` and `assistant_cancel` `{session_id}`. Same key rules and
//! error paths as the message body.

use serde_json::Value;

use super::body::{required_id, BODY_PATH};
use super::error::ValidationError;
use super::host_context::HostContext;
use super::keys::Fields;
use crate::ids::SessionId;

/// Join a session's room, and store and warm its context if one is given.
#[derive(Clone, Debug, PartialEq)]
pub struct JoinRequest {
    pub session_id: SessionId,
    pub host_context: Option<HostContext>,
}

/// Cancel the session's running turn.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CancelRequest {
    pub session_id: SessionId,
}

impl JoinRequest {
    pub fn parse(value: &Value) -> Result<JoinRequest, ValidationError> {
        if !value.is_object() {
            return Err(ValidationError::new(BODY_PATH, "expected a JSON object"));
        }
        super::depth::check_value(value, "")?;
        let fields = Fields::read(value, "", &["session_id", "host_context"])?;
        let session_id = SessionId::new(required_id(&fields, "session_id")?);
        let host_context = match fields.value("host_context") {
            Some(context) => Some(HostContext::parse(context, &fields.path("host_context"))?),
            None => None,
        };
        Ok(JoinRequest {
            session_id,
            host_context,
        })
    }
}

impl CancelRequest {
    pub fn parse(value: &Value) -> Result<CancelRequest, ValidationError> {
        if !value.is_object() {
            return Err(ValidationError::new(BODY_PATH, "expected a JSON object"));
        }
        super::depth::check_value(value, "")?;
        let fields = Fields::read(value, "", &["session_id"])?;
        Ok(CancelRequest {
            session_id: SessionId::new(required_id(&fields, "session_id")?),
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn check(result: Result<impl std::fmt::Debug, ValidationError>, expected: &str) {
        assert_eq!(result.unwrap_err().to_string(), expected);
    }

    #[test]
    fn join_accepts_camel_case_and_a_context() {
        let join =
            JoinRequest::parse(&json!({"sessionId": "s1", "hostContext": {"view": {"name": "v"}}}))
                .unwrap();
        assert_eq!(join.session_id.as_str(), "s1");
        assert_eq!(join.host_context.unwrap().view.unwrap().name, "v");
    }

    #[test]
    fn join_and_cancel_reject_bad_payloads_with_paths() {
        check(
            JoinRequest::parse(&json!("s1")),
            "body: expected a JSON object",
        );
        check(JoinRequest::parse(&json!({})), "session_id: is required");
        check(
            JoinRequest::parse(&json!({"session_id": "s", "content": "x"})),
            "content: unknown field",
        );
        check(
            JoinRequest::parse(&json!({"session_id": "s", "host_context": {"version": 3}})),
            "host_context.version: unsupported version 3; this runtime speaks version 1",
        );
        check(
            CancelRequest::parse(&json!({"session_id": ""})),
            "session_id: must be 1 to 64 characters",
        );
        check(
            CancelRequest::parse(&json!({"session_id": "s", "id": "m"})),
            "id: unknown field",
        );
    }

    #[test]
    fn cancel_takes_only_a_session_id() {
        let cancel = CancelRequest::parse(&json!({"session_id": "s1"})).unwrap();
        assert_eq!(cancel.session_id.as_str(), "s1");
    }
}
