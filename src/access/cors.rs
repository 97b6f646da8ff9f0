//! One CORS policy for every door: HTTP routes and AG-UI through actix-cors,
//! Socket.IO polling through its own origin check, both asking
//! [`CorsPolicy::allows`]. A refused origin is logged once at `info`.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use actix_cors::Cors;
use actix_web::http::{header, Method};
use regex::Regex;

use super::config::CorsSettings;
use crate::socketio::OriginPolicy;

/// Refused origins remembered for the log-once rule; past this many the set
/// is cleared, so a flood of made-up origins cannot grow memory.
const MAX_REMEMBERED_REFUSALS: usize = 1024;
/// How long browsers may cache a preflight answer, in seconds.
const PREFLIGHT_MAX_AGE_SECS: usize = 86_400;

pub struct CorsPolicy {
    any_origin: bool,
    origins: Vec<String>,
    regex: Option<Regex>,
    refused: Mutex<HashSet<String>>,
}

impl CorsPolicy {
    pub fn new(settings: &CorsSettings) -> Result<CorsPolicy, String> {
        let regex = match &settings.origin_regex {
            None => None,
            Some(pattern) => Some(Regex::new(pattern).map_err(|error| {
                format!("setting ACCESS__CORS_ORIGIN_REGEX: invalid regex: {error}")
            })?),
        };
        Ok(CorsPolicy {
            any_origin: settings.any_origin,
            origins: settings.origins.clone(),
            regex,
            refused: Mutex::new(HashSet::new()),
        })
    }

    /// Whether a page from `origin` may call; logs a refused origin once.
    pub fn allows(&self, origin: &str) -> bool {
        let allowed = self.any_origin
            || self.origins.iter().any(|allowed| allowed == origin)
            || self
                .regex
                .as_ref()
                .is_some_and(|regex| regex.is_match(origin));
        if !allowed {
            let mut refused = self
                .refused
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            if refused.len() >= MAX_REMEMBERED_REFUSALS {
                refused.clear();
            }
            if refused.insert(origin.to_string()) {
                log::info!(
                    "CORS: refused origin {origin:?} (allow it with ACCESS__CORS_ORIGINS or ACCESS__CORS_ORIGIN_REGEX)"
                );
            }
        }
        allowed
    }

    /// Whether browsers may send credentials (cookies, HTTP auth): not with `*`.
    pub fn credentials(&self) -> bool {
        !self.any_origin
    }

    /// The actix-cors middleware of the HTTP routes and AG-UI. A request
    /// from a refused origin is answered 400 before any handler runs, so
    /// even a request the browser sends without a preflight does nothing.
    pub fn middleware(self: &Arc<Self>) -> Cors {
        let cors = Cors::default()
            .allowed_methods([Method::GET, Method::POST, Method::DELETE, Method::OPTIONS])
            .allow_any_header()
            .expose_headers([header::RETRY_AFTER])
            .max_age(PREFLIGHT_MAX_AGE_SECS)
            .block_on_origin_mismatch(true);
        if self.any_origin {
            return cors.allow_any_origin().send_wildcard();
        }
        let policy = self.clone();
        cors.allowed_origin_fn(move |origin, _request| {
            origin.to_str().is_ok_and(|origin| policy.allows(origin))
        })
        .supports_credentials()
    }

    /// The same decision for the Socket.IO transport.
    pub fn socket_policy(self: &Arc<Self>) -> OriginPolicy {
        let policy = self.clone();
        OriginPolicy(Arc::new(move |origin| policy.allows(origin)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::config::DEFAULT_ORIGIN_REGEX;

    fn policy(any: bool, origins: &[&str], regex: Option<&str>) -> CorsPolicy {
        CorsPolicy::new(&CorsSettings {
            any_origin: any,
            origins: origins.iter().map(|o| o.to_string()).collect(),
            origin_regex: regex.map(str::to_string),
        })
        .expect("valid")
    }

    #[test]
    fn the_default_regex_allows_loopback_pages_only() {
        let policy = policy(false, &[], Some(DEFAULT_ORIGIN_REGEX));
        for (origin, allowed) in [
            ("http://localhost:3000", true),
            ("http://127.0.0.1", true),
            ("https://[::1]:8443", true),
            ("http://localhost.evil.com", false),
            ("http://127.0.0.1.evil.com:80", false),
            ("https://app.example.com", false),
            ("null", false),
        ] {
            assert_eq!(policy.allows(origin), allowed, "{origin}");
        }
    }

    #[test]
    fn exact_origins_and_star() {
        let exact = policy(false, &["https://app.example.com"], None);
        assert!(exact.allows("https://app.example.com"));
        assert!(!exact.allows("https://app.example.com:444"));
        assert!(exact.credentials());
        let any = policy(true, &[], None);
        assert!(any.allows("https://anything.example"));
        assert!(!any.credentials());
    }
}
