//! Who the caller is, on every door: `ACCESS__MODE` (`trusted_local` with an
//! optional token, `header` behind an authenticating proxy, `jwt`), the
//! per-principal limits, the browser rules (CORS, JSON-only POSTs). Handlers
//! take an [`Authenticated`] caller; the session actor decides what it may
//! touch (`actors::session::Caller`). See `docs/access.md`.

pub mod cors;
pub mod identity;
pub mod jwt;
pub mod limits;
pub mod proxies;

use std::future::{ready, Ready};

use actix_web::dev::Payload;
use actix_web::http::header::{self, HeaderMap, HeaderName, HeaderValue};
use actix_web::{web, FromRequest, HttpRequest};
use actors::session::{Caller, SessionError};
use secrecy::{ExposeSecret, SecretString};
use serde_json::Value;
use subtle::ConstantTimeEq;

use self::jwt::JwtVerifier;
use crate::access_settings::{AccessMode, AccessSettings};
use crate::errors::ApiError;

pub use identity::{AuthenticateHook, Credentials, Principal, Refusal, ADMIN_ROLE};

/// The identity half of `ACCESS__*`, ready to check requests.
pub struct Access {
    mode: Mode,
    /// `METRICS__TOKEN`: a scraper's bearer token for `/metrics` alone.
    metrics_token: Option<SecretString>,
}

enum Mode {
    TrustedLocal {
        token: Option<SecretString>,
    },
    Header {
        principal: HeaderName,
        roles: HeaderName,
    },
    Jwt(JwtVerifier),
    Host(AuthenticateHook),
}

impl Access {
    /// Builds the checker; a JWKS file that cannot be used is an error, and
    /// so is `ACCESS__MODE=host` without a host's `authenticate` hook.
    pub fn new(
        settings: &AccessSettings,
        host_hook: Option<AuthenticateHook>,
    ) -> Result<Access, String> {
        let mode = match &settings.mode {
            AccessMode::TrustedLocal { token } => Mode::TrustedLocal {
                token: token.clone(),
            },
            AccessMode::Header {
                principal_header,
                roles_header,
            } => Mode::Header {
                principal: header_name(principal_header)?,
                roles: header_name(roles_header)?,
            },
            AccessMode::Jwt(jwt) => Mode::Jwt(JwtVerifier::new(jwt)?),
            AccessMode::Host => Mode::Host(host_hook.ok_or(
                "ACCESS__MODE=host needs an authenticate hook: build the server with \
                 embed::AssistantDefinition::authenticate",
            )?),
        };
        Ok(Access {
            mode,
            metrics_token: None,
        })
    }

    /// Lets a `METRICS__TOKEN` bearer read `/metrics` without being an admin.
    pub fn with_metrics_token(mut self, token: Option<SecretString>) -> Access {
        self.metrics_token = token;
        self
    }

    /// Whether a request may read `/metrics`: it carries the metrics token,
    /// or its caller is an admin (in `trusted_local` without a token, every
    /// caller is). 401 without acceptable credentials, 403 for a non-admin.
    pub fn metrics_allowed(&self, headers: &HeaderMap) -> Result<(), ApiError> {
        if let (Some(token), Some(offered)) = (&self.metrics_token, bearer(headers)) {
            if bool::from(token.expose_secret().as_bytes().ct_eq(offered.as_bytes())) {
                return Ok(());
            }
        }
        let caller = self.http_caller(headers).map_err(|why| {
            ApiError::Unauthorized(format!(
                "{why} (an admin's), or Authorization: Bearer <METRICS__TOKEN>"
            ))
        })?;
        if !caller.admin {
            return Err(ApiError::Session(SessionError::Forbidden(
                "/metrics is for an admin or a METRICS__TOKEN bearer".into(),
            )));
        }
        Ok(())
    }

    /// The caller of an HTTP request (routes and AG-UI), or why not.
    pub fn http_caller(&self, headers: &HeaderMap) -> Result<Caller, String> {
        match &self.mode {
            Mode::TrustedLocal { token: None } => Ok(Caller::operator()),
            Mode::TrustedLocal { token: Some(token) } => {
                let offered =
                    bearer(headers).ok_or("send Authorization: Bearer <ACCESS__LOCAL_TOKEN>")?;
                check_token(token.expose_secret(), offered)
            }
            Mode::Header { principal, roles } => from_headers(
                headers.get(principal),
                headers.get(roles),
                principal.as_str(),
            ),
            Mode::Jwt(verifier) => {
                let token = bearer(headers).ok_or("send Authorization: Bearer <JWT>")?;
                verifier.verify(token)
            }
            Mode::Host(hook) => {
                let headers = headers
                    .iter()
                    .filter_map(|(name, value)| Some((name.to_string(), value.to_str().ok()?)))
                    .map(|(name, value)| (name, value.to_string()))
                    .collect();
                host_caller(
                    hook,
                    &Credentials {
                        headers,
                        socket_auth: None,
                    },
                )
            }
        }
    }

    /// The caller of a Socket.IO connection: the CONNECT packet's `auth`
    /// (`{"token": ...}`) and the opening request's kept headers.
    pub fn socket_caller(
        &self,
        header: impl Fn(&HeaderName) -> Option<HeaderValue>,
        auth: Option<&Value>,
    ) -> Result<Caller, String> {
        let auth_token = auth
            .and_then(|auth| auth.get("token"))
            .and_then(Value::as_str);
        match &self.mode {
            Mode::TrustedLocal { token: None } => Ok(Caller::operator()),
            Mode::TrustedLocal { token: Some(token) } => {
                let offered = auth_token.ok_or("send auth.token = ACCESS__LOCAL_TOKEN")?;
                check_token(token.expose_secret(), offered)
            }
            Mode::Header { principal, roles } => from_headers(
                header(principal).as_ref(),
                header(roles).as_ref(),
                principal.as_str(),
            ),
            Mode::Jwt(verifier) => {
                let from_header = header(&header::AUTHORIZATION);
                let token = match auth_token {
                    Some(token) => token,
                    None => from_header
                        .as_ref()
                        .and_then(bearer_value)
                        .ok_or("send auth.token = <JWT>")?,
                };
                verifier.verify(token)
            }
            Mode::Host(hook) => {
                let headers = HOST_HANDSHAKE_HEADERS
                    .iter()
                    .filter_map(|name| {
                        let value = header(name)?;
                        Some((name.to_string(), value.to_str().ok()?.to_string()))
                    })
                    .collect();
                host_caller(
                    hook,
                    &Credentials {
                        headers,
                        socket_auth: auth.cloned(),
                    },
                )
            }
        }
    }

    /// Headers of a Socket.IO opening request the socket check reads.
    pub fn handshake_headers(&self) -> Vec<HeaderName> {
        match &self.mode {
            Mode::TrustedLocal { .. } => Vec::new(),
            Mode::Header { principal, roles } => vec![principal.clone(), roles.clone()],
            Mode::Jwt(_) => vec![header::AUTHORIZATION],
            Mode::Host(_) => HOST_HANDSHAKE_HEADERS.to_vec(),
        }
    }
}

/// The opening request's headers a socket keeps for a host's hook (beside
/// the CONNECT packet's `auth`): the usual places credentials travel.
const HOST_HANDSHAKE_HEADERS: [HeaderName; 2] = [header::AUTHORIZATION, header::COOKIE];

/// A host's hook's answer as a caller: its principals are never admins.
fn host_caller(hook: &AuthenticateHook, credentials: &Credentials) -> Result<Caller, String> {
    match hook(credentials) {
        Ok(principal) if !principal.id.is_empty() => Ok(Caller::new(principal.id, false)),
        Ok(_) => Err("the host's authenticate hook named an empty principal".into()),
        Err(refusal) => Err(refusal.message),
    }
}

fn header_name(name: &str) -> Result<HeaderName, String> {
    HeaderName::from_bytes(name.as_bytes()).map_err(|_| format!("{name:?} is not a header name"))
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers.get(header::AUTHORIZATION).and_then(bearer_value)
}

fn bearer_value(value: &HeaderValue) -> Option<&str> {
    let text = value.to_str().ok()?;
    let (scheme, token) = text.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then_some(token.trim())
        .filter(|token| !token.is_empty())
}

/// Compares in constant time, so the reply's timing does not reveal how
/// much of a guess was right (only the length can differ in time).
fn check_token(expected: &str, offered: &str) -> Result<Caller, String> {
    if bool::from(expected.as_bytes().ct_eq(offered.as_bytes())) {
        Ok(Caller::operator())
    } else {
        Err("the token is not ACCESS__LOCAL_TOKEN".into())
    }
}

/// `header` mode: the proxy's principal and comma-separated roles.
fn from_headers(
    principal: Option<&HeaderValue>,
    roles: Option<&HeaderValue>,
    principal_header: &str,
) -> Result<Caller, String> {
    let principal = principal
        .and_then(|value| value.to_str().ok())
        .map(str::trim)
        .filter(|value| !value.is_empty())
        .ok_or_else(|| format!("no {principal_header} header (set by the authenticating proxy)"))?;
    let admin = roles
        .and_then(|value| value.to_str().ok())
        .is_some_and(|roles| roles.split(',').any(|role| role.trim() == ADMIN_ROLE));
    Ok(Caller::new(principal, admin))
}

/// A handler argument: the request's authenticated caller. Without
/// acceptable credentials the request ends here with 401, before the body
/// is read or anything is stored.
pub struct Authenticated(pub Caller);

impl FromRequest for Authenticated {
    type Error = ApiError;
    type Future = Ready<Result<Authenticated, ApiError>>;

    fn from_request(req: &HttpRequest, _payload: &mut Payload) -> Self::Future {
        let Some(access) = req.app_data::<web::Data<Access>>() else {
            return ready(Err(ApiError::Unauthorized(
                "the server has no access configuration".into(),
            )));
        };
        ready(
            access
                .http_caller(req.headers())
                .map(Authenticated)
                .map_err(ApiError::Unauthorized),
        )
    }
}

/// AG-UI's own media type, accepted on `POST /api/agui` besides JSON.
pub const AGUI_CONTENT_TYPE: &str = "application/vnd.ag-ui.event+proto";

/// `POST` bodies must say they are JSON: a page on another origin can send a
/// form or `text/plain` without a preflight, and it must not run a turn
/// (its reply is unreadable, but the turn would still run and cost). A POST
/// without a body (`curl -X POST .../cancel`) carries nothing to label and
/// needs no content type; a foreign page sending one is still refused by
/// its `Origin` (`cors`).
pub fn require_json(req: &HttpRequest, also: Option<&str>) -> Result<(), ApiError> {
    if has_no_body(req) {
        return Ok(());
    }
    let value = req.headers().get(header::CONTENT_TYPE);
    // Media types are case-insensitive; compared as they are, not lowered
    // into a new string for every request, and as bytes: a value that is
    // not visible ASCII (not text) is refused, checked once it matches.
    let bytes = value.map_or(&[][..], |value| value.as_bytes());
    let essence = bytes.split(|&byte| byte == b';').next().unwrap_or(&[]);
    let essence = essence.trim_ascii();
    let matches = essence.eq_ignore_ascii_case(b"application/json")
        || also.is_some_and(|also| essence.eq_ignore_ascii_case(also.as_bytes()));
    let content_type = value.and_then(|value| value.to_str().ok());
    if matches && content_type.is_some() {
        return Ok(());
    }
    let content_type = content_type.unwrap_or("");
    Err(ApiError::UnsupportedMediaType(format!(
        "POST bodies must be sent as application/json, got {:?}",
        content_type
    )))
}

/// Whether the request says it has no body: `Content-Length: 0`, or, on
/// HTTP/1, neither a length nor `Transfer-Encoding`.
fn has_no_body(req: &HttpRequest) -> bool {
    let headers = req.headers();
    match headers.get(header::CONTENT_LENGTH) {
        Some(length) => length.as_bytes() == b"0",
        None => {
            !headers.contains_key(header::TRANSFER_ENCODING)
                && req.version() < actix_web::http::Version::HTTP_2
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_tokens_are_read_case_insensitively() {
        assert_eq!(
            bearer_value(&HeaderValue::from_static("Bearer abc")),
            Some("abc")
        );
        assert_eq!(
            bearer_value(&HeaderValue::from_static("bearer abc")),
            Some("abc")
        );
        assert_eq!(bearer_value(&HeaderValue::from_static("Basic abc")), None);
    }

    #[test]
    fn the_local_token_must_match_exactly() {
        assert!(check_token("secret", "secret").is_ok());
        assert!(check_token("secret", "secre").is_err());
        assert!(check_token("secret", "secret2").is_err());
    }

    #[test]
    fn header_roles_make_an_admin() {
        let caller = from_headers(
            Some(&HeaderValue::from_static("alice")),
            Some(&HeaderValue::from_static("viewer, admin")),
            "X",
        )
        .expect("a principal");
        assert!(caller.admin);
        assert!(from_headers(None, None, "X").is_err());
    }
}
