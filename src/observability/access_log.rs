//! One `info` line per HTTP request (method, path, status, duration, session
//! id, request id), the id echoed in the `x-request-id` response header and
//! the request counted in the metrics. Run by the outermost middleware
//! (`edge::Edge`), so it sees the final status of every reply, error pages
//! included.

use std::net::IpAddr;
use std::time::Instant;

use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::Method;
use actix_web::{web, Error, HttpMessage, HttpRequest};

use super::request_id::{RequestId, HEADER};
use super::Metrics;

/// The session a request was about, when its path does not say (the body of
/// `POST /api/chat`): handlers record it for the log line.
#[derive(Clone, Debug)]
pub struct LoggedSession(pub String);

/// Records the session id of this request for its access log line (when
/// that line is written at all).
pub fn note_session(request: &HttpRequest, session_id: &str) {
    if log::log_enabled!(log::Level::Info) {
        request
            .extensions_mut()
            .insert(LoggedSession(session_id.to_string()));
    }
}

/// The request id the access log gave this request.
pub fn request_id(request: &HttpRequest) -> Option<RequestId> {
    request.extensions().get::<RequestId>().cloned()
}

/// What the access log keeps of a request while it is served: taken from
/// the request before it is handed on ([`AccessLine::begin`]), written out
/// with the reply ([`AccessLine::finish`]). `edge::Edge` runs both, outermost,
/// so the line sees the final status of every reply, error pages included.
pub struct AccessLine {
    request_id: RequestId,
    /// A standard method is cloned without allocating.
    method: Method,
    /// The path, the client's address (`access::proxies`) and the start,
    /// only when the line is written at all.
    written: Option<(String, Option<IpAddr>, Instant)>,
    metrics: Option<web::Data<Metrics>>,
}

impl AccessLine {
    /// Gives the request its id (kept in its extensions for the handlers).
    pub fn begin(request: &ServiceRequest) -> AccessLine {
        let request_id = RequestId::from_headers(request.headers());
        request.extensions_mut().insert(request_id.clone());
        AccessLine {
            request_id,
            method: request.method().clone(),
            written: log::log_enabled!(log::Level::Info).then(|| {
                let client = crate::access::proxies::client_ip(request.request());
                (request.path().to_string(), client, Instant::now())
            }),
            metrics: request.app_data::<web::Data<Metrics>>().cloned(),
        }
    }

    /// Logs and counts the reply, and echoes the request id on it.
    pub fn finish<B>(
        self,
        result: Result<ServiceResponse<B>, Error>,
    ) -> Result<ServiceResponse<B>, Error> {
        let status = match &result {
            Ok(response) => response.status(),
            Err(error) => error.as_response_error().status_code(),
        };
        if let Some((path, client, started)) = self.written {
            let session = match &result {
                Ok(response) => session_of(response.request()),
                Err(_) => None,
            };
            log::info!(
                "{} {path} {} {:.1}ms session={} request_id={} client={}",
                self.method,
                status.as_u16(),
                started.elapsed().as_secs_f64() * 1000.0,
                session.as_deref().unwrap_or("-"),
                self.request_id,
                ClientAddress(client),
            );
        }
        if let Some(metrics) = self.metrics {
            metrics.count_http_request(self.method.as_str(), status.as_u16());
        }
        let mut response = result?;
        (response.headers_mut()).insert(HEADER, self.request_id.into_header_value());
        Ok(response)
    }
}

/// The client's address in a log line, `-` when unknown, formatted without
/// an allocation of its own.
struct ClientAddress(Option<IpAddr>);

impl std::fmt::Display for ClientAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(address) => address.fmt(f),
            None => f.write_str("-"),
        }
    }
}

fn session_of(request: &HttpRequest) -> Option<String> {
    if let Some(noted) = request.extensions().get::<LoggedSession>() {
        return Some(noted.0.clone());
    }
    request.match_info().get("session_id").map(str::to_string)
}
