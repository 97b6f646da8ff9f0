//! The HTTP long-polling transport: the handshake GET, the long-poll GET and
//! the POST of `\x1e`-separated packets. Handlers only check the request and
//! forward to the connection actor; they hold no session state themselves.

use std::sync::Arc;

use actix::{Actor, Addr};
use actix_web::http::header::{self, ContentType};
use actix_web::http::StatusCode;
use actix_web::web::{BytesMut, Payload};
use actix_web::{HttpRequest, HttpResponse};
use futures_util::StreamExt;

use super::connection::{CloseSession, Connection, ConnectionLink, Poll, PollReply, PostPackets};
use super::engine_packet::{open_packet, EngineError, CLOSE};
use super::namespace::DisconnectReason;
use super::{sid, Shared};

/// The transport a polling session may upgrade to, advertised in the handshake.
const UPGRADES: &[&str] = &["websocket"];

/// `GET ?transport=polling` without sid: opens a session. The open packet is
/// the whole first response, as the reference server sends it.
pub(crate) fn handshake(
    req: &HttpRequest,
    shared: &Arc<Shared>,
    peer: Option<std::net::IpAddr>,
) -> HttpResponse {
    let config = &shared.config;
    let sid: Arc<str> = Arc::from(sid::new_id());
    let link = Arc::new(ConnectionLink::new(config.queue_limit_bytes()));
    let addr = Connection::new(sid.clone(), shared.clone(), link, Connection::polling())
        .with_handshake(super::kept_headers(req, config))
        .start();
    shared.register(sid.clone(), addr, peer);
    text(open_packet(
        &sid,
        UPGRADES,
        config.ping_interval,
        config.ping_timeout,
        config.max_payload,
    ))
}

/// `GET ?transport=polling&sid=..`: waits for packets (the server pings every
/// interval, so the wait is bounded by the ping interval).
pub(crate) async fn poll(addr: Addr<Connection>) -> HttpResponse {
    match addr.send(Poll).await {
        Ok(Ok(PollReply::Ready(body))) => text(body),
        Ok(Ok(PollReply::Wait(rx))) => match rx.await {
            Ok(body) => text(body),
            // The actor stopped without answering: the session is over.
            Err(_) => text(CLOSE.to_owned()),
        },
        Ok(Err(error)) => error.response(),
        Err(_) => EngineError::SessionIdUnknown.response(),
    }
}

/// `POST ?transport=polling&sid=..`: packets from the client. A body over
/// `max_payload` is a 413 and closes the session; so does one that is not UTF-8.
pub(crate) async fn post(
    req: &HttpRequest,
    mut payload: Payload,
    shared: &Arc<Shared>,
    addr: Addr<Connection>,
) -> HttpResponse {
    let max_payload = shared.config.max_payload;
    let declared_len = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<usize>().ok());
    if declared_len.is_some_and(|len| len > max_payload) {
        return too_large(&addr);
    }
    let mut body = BytesMut::new();
    // The whole body within the deadline: a slow-body client must not hold the connection.
    let deadline = tokio::time::Instant::now() + shared.config.body_timeout;
    loop {
        let next = match tokio::time::timeout_at(deadline, payload.next()).await {
            Ok(next) => next,
            Err(_) => {
                addr.do_send(CloseSession {
                    reason: DisconnectReason::TransportClose,
                });
                return EngineError::BadRequest.response();
            }
        };
        let Some(chunk) = next else {
            break;
        };
        let Ok(chunk) = chunk else {
            addr.do_send(CloseSession {
                reason: DisconnectReason::TransportClose,
            });
            return EngineError::BadRequest.response();
        };
        if body.len() + chunk.len() > max_payload {
            return too_large(&addr);
        }
        body.extend_from_slice(&chunk);
    }
    let Ok(body) = String::from_utf8(Vec::from(body)) else {
        addr.do_send(CloseSession {
            reason: DisconnectReason::ParseError,
        });
        return EngineError::BadRequest.response();
    };
    match addr.send(PostPackets { body }).await {
        Ok(Ok(())) => HttpResponse::Ok()
            .content_type(ContentType::html())
            .body("ok"),
        Ok(Err(error)) => error.response(),
        Err(_) => EngineError::SessionIdUnknown.response(),
    }
}

fn too_large(addr: &Addr<Connection>) -> HttpResponse {
    addr.do_send(CloseSession {
        reason: DisconnectReason::PayloadTooLarge,
    });
    HttpResponse::build(StatusCode::PAYLOAD_TOO_LARGE).json(serde_json::json!({
        "code": 3,
        "message": "Payload too large",
    }))
}

fn text(body: String) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/plain; charset=UTF-8")
        .body(body)
}
