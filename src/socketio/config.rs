//! Settings of the Socket.IO transport: the timings and limits advertised in the
//! Engine.IO handshake and the CORS origin allow-list. Read by every connection;
//! nothing here changes after [`super::SocketIo::new`].

use std::time::Duration;

/// Engine.IO's default ping interval, the one the stock clients expect.
pub const DEFAULT_PING_INTERVAL: Duration = Duration::from_secs(25);
/// Engine.IO's default time a client has to answer a ping.
pub const DEFAULT_PING_TIMEOUT: Duration = Duration::from_secs(20);
/// Engine.IO's default largest packet (and polling body), in bytes.
pub const DEFAULT_MAX_PAYLOAD_BYTES: usize = 1_000_000;
/// Nesting an event argument may have by default: what the assistant
/// runtime accepts in any JSON.
pub const DEFAULT_MAX_EVENT_DEPTH: usize = 64;
/// How many `max_payload`s of unsent output a connection may hold before it is
/// dropped as too slow: enough for a burst of streamed deltas, small enough that
/// 50,000 stalled clients cannot exhaust memory one by one.
const QUEUE_LIMIT_IN_PAYLOADS: usize = 4;
/// Floor of the outgoing queue limit, so a tiny `max_payload` in tests does not
/// make ordinary bursts (100 events) drop the connection.
const MIN_QUEUE_LIMIT_BYTES: usize = 1024 * 1024;

/// Configuration of [`super::SocketIo`]. Build with struct update syntax over
/// `Default` so that fields added later do not break callers.
#[derive(Clone, Debug)]
pub struct SocketIoConfig {
    /// How often the server pings each client (Engine.IO v4: the server pings).
    pub ping_interval: Duration,
    /// How long after a ping a client may stay silent before it is dropped.
    pub ping_timeout: Duration,
    /// Largest Engine.IO packet or polling POST body accepted, in bytes.
    pub max_payload: usize,
    /// Allowed `Origin` values (exact, e.g. `https://app.example.com`). Empty:
    /// allow `localhost` / `127.0.0.1` / `[::1]` origins on any port, and
    /// requests without `Origin` (non-browser clients) are always allowed.
    pub cors_origins: Vec<String>,
    /// Headers of the opening request kept for the namespace handlers'
    /// `on_connect` (credentials a proxy set). Only these are kept, so an idle
    /// connection costs nothing for headers it does not need.
    pub handshake_headers: Vec<actix_web::http::header::HeaderName>,
    /// Replaces the origin check when set (one CORS policy for HTTP and
    /// Socket.IO); `cors_origins` is then unused.
    pub origin_policy: Option<OriginPolicy>,
    /// Whether allowed origins may send credentials (`false` for a `*` policy).
    pub cors_credentials: bool,
    /// Engine.IO sessions one peer address may hold at once (429 past it);
    /// 0: no cap. Behind a proxy every client has the proxy's address unless
    /// `client_address` says otherwise.
    pub max_sessions_per_ip: usize,
    /// The client's address for `max_sessions_per_ip`, decided by the
    /// application (the forwarded client behind a trusted proxy). `None`:
    /// the peer's address.
    pub client_address: Option<ClientAddress>,
    /// How long a polling POST body may take to arrive.
    pub body_timeout: Duration,
    /// Most arrays/objects one event argument may nest (`{}` is 1). An
    /// event with a deeper one goes unparsed to
    /// [`NamespaceHandler::on_too_deep`](super::NamespaceHandler::on_too_deep).
    /// serde_json refuses more than 128 levels, so a packet past
    /// `min(this, 127)` never reaches `on_event`.
    pub max_event_depth: usize,
}

/// Whether a browser `Origin` may talk to the server, decided by the application.
#[derive(Clone)]
pub struct OriginPolicy(pub std::sync::Arc<dyn Fn(&str) -> bool + Send + Sync>);

impl std::fmt::Debug for OriginPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OriginPolicy")
    }
}

/// The address a request counts against `max_sessions_per_ip`, decided by the
/// application; `None` for a request that has none (it is then not capped).
#[derive(Clone)]
pub struct ClientAddress(pub std::sync::Arc<ClientAddressFn>);

/// What a [`ClientAddress`] calls.
pub type ClientAddressFn =
    dyn Fn(&actix_web::HttpRequest) -> Option<std::net::IpAddr> + Send + Sync;

impl std::fmt::Debug for ClientAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClientAddress")
    }
}

impl Default for SocketIoConfig {
    fn default() -> Self {
        SocketIoConfig {
            ping_interval: DEFAULT_PING_INTERVAL,
            ping_timeout: DEFAULT_PING_TIMEOUT,
            max_payload: DEFAULT_MAX_PAYLOAD_BYTES,
            cors_origins: Vec::new(),
            max_sessions_per_ip: 0,
            client_address: None,
            body_timeout: Duration::from_secs(30),
            handshake_headers: Vec::new(),
            origin_policy: None,
            cors_credentials: true,
            max_event_depth: DEFAULT_MAX_EVENT_DEPTH,
        }
    }
}

impl SocketIoConfig {
    /// Unsent bytes one connection may queue before it is dropped as too slow.
    pub(crate) fn queue_limit_bytes(&self) -> usize {
        self.max_payload
            .saturating_mul(QUEUE_LIMIT_IN_PAYLOADS)
            .max(MIN_QUEUE_LIMIT_BYTES)
    }

    /// The address `request` counts against `max_sessions_per_ip`.
    pub(crate) fn client_address(
        &self,
        request: &actix_web::HttpRequest,
    ) -> Option<std::net::IpAddr> {
        match &self.client_address {
            Some(address) => (address.0)(request),
            None => Some(request.peer_addr()?.ip().to_canonical()),
        }
    }

    /// Whether a browser page from `origin` may talk to us.
    pub(crate) fn origin_allowed(&self, origin: &str) -> bool {
        if let Some(policy) = &self.origin_policy {
            return (policy.0)(origin);
        }
        if !self.cors_origins.is_empty() {
            return self.cors_origins.iter().any(|allowed| allowed == origin);
        }
        let Some(rest) = origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"))
        else {
            return false;
        };
        let host = match rest.strip_prefix("[::1]") {
            Some(after) => return after.is_empty() || is_port_suffix(after),
            None => rest.split(':').next().unwrap_or(rest),
        };
        let after_host = &rest[host.len()..];
        (host == "localhost" || host == "127.0.0.1")
            && (after_host.is_empty() || is_port_suffix(after_host))
    }
}

/// `:1234` and nothing else.
fn is_port_suffix(s: &str) -> bool {
    s.strip_prefix(':')
        .is_some_and(|port| !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_origins_are_loopback_on_any_port() {
        let config = SocketIoConfig::default();
        for (origin, allowed) in [
            ("http://localhost:3000", true),
            ("http://127.0.0.1", true),
            ("https://[::1]:8443", true),
            ("http://localhost.evil.com", false),
            ("http://127.0.0.1:80/x", false),
            ("http://example.com", false),
            ("null", false),
        ] {
            assert_eq!(config.origin_allowed(origin), allowed, "{origin}");
        }
    }

    #[test]
    fn configured_origins_match_exactly() {
        let config = SocketIoConfig {
            cors_origins: vec!["https://app.example.com".into()],
            ..Default::default()
        };
        assert!(config.origin_allowed("https://app.example.com"));
        assert!(!config.origin_allowed("http://localhost:3000"));
    }
}
