//! Socket.IO v5 over Engine.IO v4 at `/socket.io/`, for the stock
//! `socket.io-client` and `python-socketio` clients with default options
//! (polling, then upgrade to websocket; or websocket only).
//!
//! Layout:
//! - `config`: [`SocketIoConfig`] (timings, limits, CORS origins).
//! - `namespace`: the handler-facing API ([`NamespaceHandler`], [`SocketRef`],
//!   [`AckSender`], [`DisconnectReason`]).
//! - `connection`: the one actor per Engine.IO session; all protocol state.
//! - `polling`, `websocket`: the HTTP edges of the two transports. A server
//!   built with [`serve_upgrade`] as its `HttpService` upgrade service runs
//!   websockets on the socket itself (no h1 dispatcher buffers); under a plain
//!   `HttpServer` they stream through the dispatcher.
//! - `frame_channel`: the small channel carrying the actor's websocket frames.
//! - `takeover`: [`http_service`], an actix-web `App` served with
//!   [`serve_upgrade`] as its upgrade service.
//! - `engine_packet`, `socket_packet`: pure wire formats. `sid`: random ids.
//! - `depth`: how deep an event's arguments nest, read before parsing.
//!
//! Architecture Invariant: nothing here knows about sessions, turns or the
//! assistant runtime's crates (it depends on neither); the server's
//! `/assistant` namespace is just a registered handler.
//!
//! ```no_run
//! use assistant_socketio::{AckSender, NamespaceHandler, SocketIo, SocketIoConfig, SocketRef};
//! use serde_json::Value;
//!
//! struct Echo;
//! impl NamespaceHandler for Echo {
//!     fn on_event(&self, socket: SocketRef, event: String, args: Vec<Value>, ack: Option<AckSender>) {
//!         match ack {
//!             Some(ack) => ack.send(args),
//!             None => { socket.emit(&event, args.into_iter().next().unwrap_or(Value::Null)); }
//!         }
//!     }
//! }
//!
//! # async fn run() -> std::io::Result<()> {
//! let io = SocketIo::new(SocketIoConfig::default()).namespace("/assistant", Echo);
//! actix_web::HttpServer::new(move || actix_web::App::new().configure(|cfg| io.configure(cfg)))
//!     .bind(("127.0.0.1", 7100))?
//!     .run()
//!     .await
//! # }
//! ```

mod config;
mod connection;
mod depth;
mod engine_packet;
mod frame_channel;
mod namespace;
mod polling;
mod sid;
mod socket_packet;
mod takeover;
mod websocket;

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use actix::Addr;
use actix_web::http::header::{self, HeaderValue};
use actix_web::http::{Method, StatusCode};
use actix_web::web::{self, Payload};
use actix_web::{HttpRequest, HttpResponse};
use serde::Deserialize;

pub use config::{ClientAddress, ClientAddressFn, OriginPolicy, SocketIoConfig};
pub use namespace::{AckSender, DisconnectReason, HandshakeHeaders, NamespaceHandler, SocketRef};
pub use takeover::http_service;
pub use websocket::{serve_upgrade, AppService};

use connection::Connection;
use engine_packet::{EngineError, PROTOCOL_VERSION};

/// How long browsers may cache a CORS preflight answer, in seconds.
const PREFLIGHT_MAX_AGE_SECS: &str = "86400";

/// The Socket.IO server: configuration, namespace handlers and the registry of
/// live sessions. Build it once (all `namespace` calls before `configure`), then
/// call [`SocketIo::configure`] in every worker's `App`; clones share sessions.
#[derive(Clone)]
pub struct SocketIo {
    shared: Arc<Shared>,
}

/// What every connection and HTTP handler shares.
pub(crate) struct Shared {
    pub(crate) config: SocketIoConfig,
    pub(crate) namespaces: HashMap<String, Arc<dyn NamespaceHandler>>,
    /// sid → connection actor, for polling requests and upgrades, which may
    /// land on any worker. A std `Mutex`: held only for one map operation,
    /// never across an await.
    pub(crate) sessions: Mutex<HashMap<Arc<str>, Addr<Connection>>>,
    /// Who opened each session, for the per-address cap
    /// (`SocketIoConfig::max_sessions_per_ip`).
    peers: Mutex<Peers>,
}

#[derive(Default)]
struct Peers {
    by_sid: HashMap<Arc<str>, IpAddr>,
    by_ip: HashMap<IpAddr, usize>,
}

impl Shared {
    fn new(
        config: SocketIoConfig,
        namespaces: HashMap<String, Arc<dyn NamespaceHandler>>,
    ) -> Shared {
        Shared {
            config,
            namespaces,
            sessions: Mutex::new(HashMap::new()),
            peers: Mutex::new(Peers::default()),
        }
    }

    pub(crate) fn register(&self, sid: Arc<str>, addr: Addr<Connection>, peer: Option<IpAddr>) {
        if let Some(ip) = peer {
            let mut peers = self
                .peers
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            *peers.by_ip.entry(ip).or_default() += 1;
            peers.by_sid.insert(sid.clone(), ip);
        }
        self.sessions
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(sid, addr);
    }

    pub(crate) fn unregister(&self, sid: &Arc<str>) {
        self.sessions
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .remove(sid);
        let mut peers = self
            .peers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(ip) = peers.by_sid.remove(sid) {
            if let Some(count) = peers.by_ip.get_mut(&ip) {
                *count = count.saturating_sub(1);
                if *count == 0 {
                    peers.by_ip.remove(&ip);
                }
            }
        }
    }

    /// Whether `peer` may open one more session. Checked before the
    /// handshake and counted at `register`: concurrent handshakes from one
    /// address may pass the cap by the number of workers, no more.
    fn has_room(&self, peer: Option<IpAddr>) -> bool {
        let cap = self.config.max_sessions_per_ip;
        let Some(ip) = peer else {
            return true;
        };
        if cap == 0 {
            return true;
        }
        let peers = self
            .peers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        peers.by_ip.get(&ip).copied().unwrap_or(0) < cap
    }

    fn lookup(&self, sid: &str) -> Option<Addr<Connection>> {
        self.sessions
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(sid)
            .cloned()
    }
}

impl SocketIo {
    /// A server with no namespaces: every CONNECT is answered CONNECT_ERROR
    /// `Invalid namespace` until handlers are registered.
    pub fn new(config: SocketIoConfig) -> SocketIo {
        SocketIo {
            shared: Arc::new(Shared::new(config, HashMap::new())),
        }
    }

    /// Registers the handler of a namespace (`"/assistant"`; a missing leading
    /// slash is added). Call before `configure`: it starts a fresh registry.
    pub fn namespace(self, name: &str, handler: impl NamespaceHandler) -> SocketIo {
        let name = if name.starts_with('/') {
            name.to_owned()
        } else {
            format!("/{name}")
        };
        let mut namespaces = self.shared.namespaces.clone();
        namespaces.insert(name, Arc::new(handler));
        SocketIo {
            shared: Arc::new(Shared::new(self.shared.config.clone(), namespaces)),
        }
    }

    /// Number of live Engine.IO sessions (for health and load checks).
    pub fn n_sessions(&self) -> usize {
        self.shared
            .sessions
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .len()
    }

    /// Registers `/socket.io/` and `/socket.io` (GET polling + websocket
    /// upgrade, POST polling, OPTIONS for CORS) on an actix-web
    /// `ServiceConfig`. Two resources of one path each, not one of both
    /// paths: a resource of several paths is matched by a regex set, and
    /// every request to a route registered after it (all of the API) was
    /// tried against that set first.
    pub fn configure(&self, cfg: &mut web::ServiceConfig) {
        for path in PATHS {
            cfg.service(
                web::resource(path)
                    .app_data(web::Data::from(self.shared.clone()))
                    .route(web::get().to(handle_get))
                    .route(web::post().to(handle_post))
                    .route(web::method(Method::OPTIONS).to(handle_preflight))
                    .default_service(web::to(|| async {
                        EngineError::BadHandshakeMethod.response()
                    })),
            );
        }
    }
}

/// The paths Engine.IO is served on.
pub const PATHS: [&str; 2] = ["/socket.io/", "/socket.io"];

/// The Engine.IO query parameters we read; others (`t`, `b64`) are ignored.
#[derive(Deserialize)]
struct EngineQuery {
    #[serde(rename = "EIO")]
    eio: Option<String>,
    transport: Option<String>,
    sid: Option<String>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum TransportName {
    Polling,
    WebSocket,
}

/// A request that passed the checks every Engine.IO request gets.
struct Checked {
    transport: TransportName,
    sid: Option<String>,
    /// The `Origin` to echo in CORS headers, when there was one and it is allowed.
    cors_origin: Option<HeaderValue>,
}

/// Transport, origin and protocol version checks, in the reference server's order.
fn check(req: &HttpRequest, shared: &Shared) -> Result<Checked, EngineError> {
    let query = match web::Query::<EngineQuery>::from_query(req.query_string()) {
        Ok(query) => query.into_inner(),
        Err(_) => return Err(EngineError::BadRequest),
    };
    let transport = match query.transport.as_deref() {
        Some("polling") => TransportName::Polling,
        Some("websocket") => TransportName::WebSocket,
        _ => return Err(EngineError::TransportUnknown),
    };
    let cors_origin = check_origin(req, &shared.config)?;
    if query.eio.as_deref() != Some(PROTOCOL_VERSION) {
        return Err(EngineError::UnsupportedProtocolVersion);
    }
    Ok(Checked {
        transport,
        sid: query.sid,
        cors_origin,
    })
}

/// `Ok(None)` without `Origin`; `Ok(Some(origin))` to echo; `Err` if refused.
fn check_origin(
    req: &HttpRequest,
    config: &SocketIoConfig,
) -> Result<Option<HeaderValue>, EngineError> {
    let Some(origin) = req.headers().get(header::ORIGIN) else {
        return Ok(None);
    };
    match origin.to_str() {
        Ok(text) if config.origin_allowed(text) => Ok(Some(origin.clone())),
        _ => Err(EngineError::Forbidden),
    }
}

/// The headers of an opening request the config keeps for `on_connect`.
pub(crate) fn kept_headers(
    req: &HttpRequest,
    config: &SocketIoConfig,
) -> Option<namespace::HandshakeHeaders> {
    if config.handshake_headers.is_empty() {
        return None;
    }
    let kept: Vec<_> = config
        .handshake_headers
        .iter()
        .filter_map(|name| Some((name.clone(), req.headers().get(name)?.clone())))
        .collect();
    Some(kept.into())
}

fn with_cors(
    mut response: HttpResponse,
    cors_origin: Option<HeaderValue>,
    config: &SocketIoConfig,
) -> HttpResponse {
    if let Some(origin) = cors_origin {
        let headers = response.headers_mut();
        headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
        if config.cors_credentials {
            headers.insert(
                header::ACCESS_CONTROL_ALLOW_CREDENTIALS,
                HeaderValue::from_static("true"),
            );
        }
        headers.insert(header::VARY, HeaderValue::from_static("Origin"));
    }
    response
}

/// Answers with the error, with CORS headers when the origin was allowed so a
/// browser can read the error JSON.
fn error_with_cors(req: &HttpRequest, shared: &Shared, error: EngineError) -> HttpResponse {
    let cors_origin = check_origin(req, &shared.config).ok().flatten();
    with_cors(error.response(), cors_origin, &shared.config)
}

async fn handle_get(req: HttpRequest, payload: Payload, shared: web::Data<Shared>) -> HttpResponse {
    let shared = shared.into_inner();
    let checked = match check(&req, &shared) {
        Ok(checked) => checked,
        Err(error) => return error_with_cors(&req, &shared, error),
    };
    // The application may name the forwarded client behind a trusted proxy,
    // so that the per-address cap counts clients rather than the proxy.
    let client = shared.config.client_address(&req);
    let response = match (checked.transport, checked.sid.as_deref()) {
        (_, None) if !shared.has_room(client) => {
            too_many_sessions(shared.config.max_sessions_per_ip)
        }
        (TransportName::Polling, None) => polling::handshake(&req, &shared, client),
        (TransportName::Polling, Some(sid)) => match shared.lookup(sid) {
            Some(addr) => polling::poll(addr).await,
            None => EngineError::SessionIdUnknown.response(),
        },
        (TransportName::WebSocket, None) => websocket::open(&req, payload, &shared),
        (TransportName::WebSocket, Some(sid)) => match shared.lookup(sid) {
            Some(addr) => websocket::upgrade(&req, payload, &shared, addr).await,
            None => EngineError::SessionIdUnknown.response(),
        },
    };
    if checked.transport == TransportName::WebSocket {
        return response;
    }
    with_cors(response, checked.cors_origin, &shared.config)
}

/// 429 for a handshake past `max_sessions_per_ip`, in Engine.IO's error shape.
fn too_many_sessions(cap: usize) -> HttpResponse {
    HttpResponse::TooManyRequests().json(serde_json::json!({
        "code": 4,
        "message": format!("Too many sessions from this address (at most {cap})"),
    }))
}

async fn handle_post(
    req: HttpRequest,
    payload: Payload,
    shared: web::Data<Shared>,
) -> HttpResponse {
    let shared = shared.into_inner();
    let checked = match check(&req, &shared) {
        Ok(checked) => checked,
        Err(error) => return error_with_cors(&req, &shared, error),
    };
    let response = match (checked.transport, checked.sid.as_deref()) {
        (TransportName::Polling, Some(sid)) => match shared.lookup(sid) {
            Some(addr) => polling::post(&req, payload, &shared, addr).await,
            None => EngineError::SessionIdUnknown.response(),
        },
        (TransportName::Polling, None) => EngineError::BadHandshakeMethod.response(),
        (TransportName::WebSocket, _) => EngineError::BadRequest.response(),
    };
    with_cors(response, checked.cors_origin, &shared.config)
}

async fn handle_preflight(req: HttpRequest, shared: web::Data<Shared>) -> HttpResponse {
    let cors_origin = match check_origin(&req, &shared.config) {
        Ok(cors_origin) => cors_origin,
        Err(error) => return error.response(),
    };
    let mut response = HttpResponse::build(StatusCode::NO_CONTENT);
    response
        .insert_header((header::ACCESS_CONTROL_ALLOW_METHODS, "GET, POST, OPTIONS"))
        .insert_header((header::ACCESS_CONTROL_MAX_AGE, PREFLIGHT_MAX_AGE_SECS));
    let requested_headers = req
        .headers()
        .get(header::ACCESS_CONTROL_REQUEST_HEADERS)
        .cloned()
        .unwrap_or_else(|| HeaderValue::from_static("content-type"));
    response.insert_header((header::ACCESS_CONTROL_ALLOW_HEADERS, requested_headers));
    with_cors(response.finish(), cors_origin, &shared.config)
}
