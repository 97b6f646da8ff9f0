//! The one error of the host contract: which field was wrong (a dotted path
//! with `[i]` indexes, e.g. `host_context.actions[2].name`) and why. The edges
//! turn it into a 422 or an `assistant:error` of type `validation`; this file
//! knows nothing of either.

use std::fmt;

/// A rejected message body, host context or attachment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValidationError {
    /// Where the problem is: `session_id`, `host_context.view.colour`,
    /// `attachments[0].data_uri`; `body` when the whole body is not an object.
    /// Contract field names appear in their snake_case spelling.
    pub path: String,
    /// What is wrong, as a sentence fragment for the client.
    pub message: String,
}

impl ValidationError {
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> ValidationError {
        ValidationError {
            path: path.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for ValidationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

impl std::error::Error for ValidationError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_puts_the_path_before_the_message() {
        let err = ValidationError::new("host_context.view.colour", "unknown field");
        assert_eq!(err.to_string(), "host_context.view.colour: unknown field");
    }
}
