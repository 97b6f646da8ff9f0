//! Who a request is, as a host's `authenticate` hook sees it
//! (`ACCESS__MODE=host`): the credentials presented, the principal they map
//! to, or a refusal. The embedding API re-exports these
//! (`assistant_runtime::embed`).

use std::sync::Arc;

use serde_json::Value;

/// The role that administers: sees and changes every session.
pub const ADMIN_ROLE: &str = "admin";

/// What a request presents to be identified: its HTTP headers (lower-case
/// names), or a socket's `auth` payload.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Credentials {
    /// The request's headers, names in lower case.
    pub headers: Vec<(String, String)>,
    /// A Socket.IO connect's `auth` payload (`None` for HTTP requests).
    pub socket_auth: Option<Value>,
}

impl Credentials {
    /// The first header named `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }
}

/// Who a request acts for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Principal {
    /// A stable id: sessions belong to it, limits count per it.
    pub id: String,
}

/// Why a request was refused; its sentence goes back to the client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// Why, in a sentence for the client (the 401's `error`).
    pub message: String,
}

/// Maps credentials to a principal or a refusal (`ACCESS__MODE=host`).
pub type AuthenticateHook = Arc<dyn Fn(&Credentials) -> Result<Principal, Refusal> + Send + Sync>;
