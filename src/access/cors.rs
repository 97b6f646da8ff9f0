//! One CORS policy for every door: HTTP routes and AG-UI through actix-cors,
//! Socket.IO polling through its own origin check, both asking
//! [`CorsPolicy::allows`]. A refused origin is logged once at `info`.
//!
//! Only a request that carries `Origin` goes through actix-cors
//! ([`CorsGate`]): CORS is a conversation with a browser about another
//! origin, and a request without one (a server, a CLI, a same-origin
//! navigation) got nothing from it but three headers and a boxed future
//! on every reply (2,400 of a turn's 125,000 instructions).

use std::collections::HashSet;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use actix_cors::{Cors, CorsMiddleware};
use actix_web::body::{EitherBody, MessageBody};
use actix_web::dev::{Service, ServiceRequest, ServiceResponse, Transform};
use actix_web::http::header::HeaderValue;
use actix_web::http::{header, Method};
use actix_web::Error;
use futures_util::future::{Either, LocalBoxFuture, MapOk, TryFutureExt};
use regex::Regex;

use crate::access_settings::CorsSettings;
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

    /// The CORS middleware of the HTTP routes and AG-UI. A request from a
    /// refused origin is answered 400 before any handler runs, so even a
    /// request the browser sends without a preflight does nothing. Requests
    /// to `answering_itself` (Socket.IO's paths, which apply this policy
    /// themselves) pass untouched.
    pub fn middleware(self: &Arc<Self>, answering_itself: &'static [&'static str]) -> CorsGate {
        CorsGate {
            cors: self.actix_cors(),
            answering_itself,
        }
    }

    /// actix-cors, configured from this policy.
    fn actix_cors(self: &Arc<Self>) -> Cors {
        let cors = Cors::default()
            .allowed_methods([
                Method::GET,
                Method::POST,
                Method::PATCH,
                Method::DELETE,
                Method::OPTIONS,
            ])
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

/// What actix-cors says caches must key on, for every response it passes.
const VARY: &str = "Origin, Access-Control-Request-Method, Access-Control-Request-Headers";

/// actix-cors for requests with an `Origin` header; the rest go straight to
/// the routes, with the `Vary` that keeps a shared cache from handing their
/// answer to a cross-origin page. It wraps the whole app (a scope of its own
/// would be one more router and service layer on every request), so the
/// paths that answer CORS themselves are named to it.
pub struct CorsGate {
    cors: Cors,
    answering_itself: &'static [&'static str],
}

impl<S, B> Transform<S, ServiceRequest> for CorsGate
where
    S: Service<ServiceRequest, Response = ServiceResponse<B>, Error = Error> + 'static,
    B: MessageBody + 'static,
{
    type Response = ServiceResponse<EitherBody<B>>;
    type Error = Error;
    type Transform = CorsGateService<S>;
    type InitError = ();
    type Future = LocalBoxFuture<'static, Result<Self::Transform, ()>>;

    fn new_transform(&self, service: S) -> Self::Future {
        let routes = Rc::new(service);
        let cors = self.cors.new_transform(SharedService(routes.clone()));
        let answering_itself = self.answering_itself;
        Box::pin(async move {
            Ok(CorsGateService {
                routes,
                cors: cors.await?,
                answering_itself,
            })
        })
    }
}

pub struct CorsGateService<S> {
    routes: Rc<S>,
    cors: CorsMiddleware<SharedService<S>>,
    answering_itself: &'static [&'static str],
}

type WithoutOrigin<S, B> = MapOk<
    <S as Service<ServiceRequest>>::Future,
    fn(ServiceResponse<B>) -> ServiceResponse<EitherBody<B>>,
>;

impl<S, B> Service<ServiceRequest> for CorsGateService<S>
where
    S: Service<ServiceRequest, Response = ServiceResponse<B>, Error = Error> + 'static,
    B: MessageBody + 'static,
{
    type Response = ServiceResponse<EitherBody<B>>;
    type Error = Error;
    type Future = Either<
        WithoutOrigin<S, B>,
        <CorsMiddleware<SharedService<S>> as Service<ServiceRequest>>::Future,
    >;

    fn poll_ready(&self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        self.routes.poll_ready(cx)
    }

    fn call(&self, request: ServiceRequest) -> Self::Future {
        // The path below the scope the routes are mounted in (all of it
        // for the standalone server).
        if self
            .answering_itself
            .contains(&request.match_info().unprocessed())
        {
            let untouched: fn(ServiceResponse<B>) -> ServiceResponse<EitherBody<B>> =
                ServiceResponse::map_into_left_body;
            return Either::Left(self.routes.call(request).map_ok(untouched));
        }
        if request.headers().contains_key(header::ORIGIN) {
            return Either::Right(self.cors.call(request));
        }
        // Appended: a `Vary` of the route's own stays, and caches key on both.
        let vary: fn(ServiceResponse<B>) -> ServiceResponse<EitherBody<B>> = |mut response| {
            response
                .headers_mut()
                .append(header::VARY, HeaderValue::from_static(VARY));
            response.map_into_left_body()
        };
        Either::Left(self.routes.call(request).map_ok(vary))
    }
}

/// The routes, shared by the gate and the actix-cors it holds.
pub struct SharedService<S>(Rc<S>);

impl<S: Service<ServiceRequest>> Service<ServiceRequest> for SharedService<S> {
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&self, request: ServiceRequest) -> S::Future {
        self.0.call(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access_settings::DEFAULT_ORIGIN_REGEX;

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
