//! The websocket transport: the handshake for a new session or an upgrade, the
//! reader task that turns frames into messages for the connection actor, and
//! the writer/body pair that carries the actor's frames out. The request's
//! payload is not `Send`, so reading stays on the worker that accepted it.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll as TaskPoll};

use actix::{Actor, Addr};
use actix_http::ws::{CloseCode, CloseReason, OpCode, Parser};
use actix_web::web::{Bytes, BytesMut, Payload};
use actix_web::{HttpRequest, HttpResponse};
use futures_util::{Stream, StreamExt};
use tokio::sync::mpsc;

use super::connection::{AttachProbe, Connection, ConnectionLink, Transport, WsClosed, WsText};
use super::engine_packet::{open_packet, EngineError};
use super::namespace::DisconnectReason;
use super::{sid, Shared};

/// Above this, an emptied read buffer is given back rather than kept for an
/// idle connection (idle memory matters more than one reallocation).
const IDLE_READ_BUFFER_BYTES: usize = 4096;

/// Sends websocket frames to one client. The channel is unbounded; its
/// backlog is counted in `ConnectionLink` and capped by the actor instead.
pub(crate) struct WsWriter {
    tx: mpsc::UnboundedSender<Bytes>,
    link: Arc<ConnectionLink>,
}

impl WsWriter {
    pub(crate) fn new(tx: mpsc::UnboundedSender<Bytes>, link: Arc<ConnectionLink>) -> WsWriter {
        WsWriter { tx, link }
    }

    /// Sends one Engine.IO packet as a text frame.
    pub(crate) fn send_text(&mut self, text: &str) {
        let mut frame = BytesMut::with_capacity(text.len() + 10);
        Parser::write_message(&mut frame, text, OpCode::Text, true, false);
        self.send_frame(frame.freeze());
    }

    /// Sends a close frame; the body ends once every writer is dropped.
    pub(crate) fn close(&mut self) {
        let mut frame = BytesMut::with_capacity(4);
        let reason = CloseReason::from(CloseCode::Normal);
        Parser::write_close(&mut frame, Some(reason), false);
        self.send_frame(frame.freeze());
    }

    fn send_frame(&mut self, frame: Bytes) {
        let n_bytes = frame.len();
        if self.tx.send(frame).is_ok() {
            self.link.add_transport(n_bytes);
        }
    }
}

/// The streaming body of the 101 response: the frames written by the actor.
struct WsBody {
    rx: mpsc::UnboundedReceiver<Bytes>,
    link: Arc<ConnectionLink>,
}

impl Stream for WsBody {
    type Item = Result<Bytes, actix_web::Error>;

    fn poll_next(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
    ) -> TaskPoll<Option<Self::Item>> {
        match self.rx.poll_recv(cx) {
            TaskPoll::Ready(Some(frame)) => {
                self.link.release_transport(frame.len());
                TaskPoll::Ready(Some(Ok(frame)))
            }
            TaskPoll::Ready(None) => TaskPoll::Ready(None),
            TaskPoll::Pending => TaskPoll::Pending,
        }
    }
}

/// `transport=websocket` without sid: a new session that starts on websocket.
pub(crate) fn open(req: &HttpRequest, payload: Payload, shared: &Arc<Shared>) -> HttpResponse {
    let mut response = match actix_web_actors::ws::handshake(req) {
        Ok(response) => response,
        Err(_) => return EngineError::BadRequest.response(),
    };
    let config = &shared.config;
    let link = Arc::new(ConnectionLink::new(config.queue_limit_bytes()));
    let (mut writer, body) = channel(&link);
    let sid: Arc<str> = Arc::from(sid::new_id());
    writer.send_text(&open_packet(
        &sid,
        &[],
        config.ping_interval,
        config.ping_timeout,
        config.max_payload,
    ));
    let pong_tx = writer.tx.downgrade();
    let addr = Connection::new(
        sid.clone(),
        shared.clone(),
        link.clone(),
        Transport::WebSocket(writer),
    )
    .start();
    shared.register(sid, addr.clone());
    actix_web::rt::spawn(read_frames(
        payload,
        addr,
        pong_tx,
        link,
        config.max_payload,
    ));
    response.streaming(body)
}

/// `transport=websocket&sid=..`: a probe for upgrading a polling session.
pub(crate) async fn upgrade(
    req: &HttpRequest,
    payload: Payload,
    shared: &Arc<Shared>,
    addr: Addr<Connection>,
) -> HttpResponse {
    let mut response = match actix_web_actors::ws::handshake(req) {
        Ok(response) => response,
        Err(_) => return EngineError::BadRequest.response(),
    };
    let (tx, rx) = mpsc::unbounded_channel();
    let pong_tx = tx.downgrade();
    // The probe shares the session's counters, so its backlog counts too.
    let link = match addr.send(AttachProbe { tx }).await {
        Ok(Ok(link)) => link,
        Ok(Err(error)) => return error.response(),
        Err(_) => return EngineError::SessionIdUnknown.response(),
    };
    let body = WsBody {
        rx,
        link: link.clone(),
    };
    actix_web::rt::spawn(read_frames(
        payload,
        addr,
        pong_tx,
        link,
        shared.config.max_payload,
    ));
    response.streaming(body)
}

fn channel(link: &Arc<ConnectionLink>) -> (WsWriter, WsBody) {
    let (tx, rx) = mpsc::unbounded_channel();
    let writer = WsWriter {
        tx,
        link: link.clone(),
    };
    let body = WsBody {
        rx,
        link: link.clone(),
    };
    (writer, body)
}

/// Reads frames until the peer closes, answering websocket pings itself and
/// forwarding text messages to the actor one at a time (the `send().await` is
/// the backpressure: a flooding client waits for its own actor).
async fn read_frames(
    mut payload: Payload,
    addr: Addr<Connection>,
    pong_tx: mpsc::WeakUnboundedSender<Bytes>,
    link: Arc<ConnectionLink>,
    max_payload: usize,
) {
    let mut buf = BytesMut::new();
    // A fragmented text message being reassembled.
    let mut fragments: Option<BytesMut> = None;
    let reason = 'read: loop {
        loop {
            let (finished, opcode, data) = match Parser::parse(&mut buf, true, max_payload) {
                Ok(Some(frame)) => frame,
                Ok(None) => break,
                Err(actix_http::ws::ProtocolError::Overflow) => {
                    break 'read DisconnectReason::PayloadTooLarge
                }
                Err(_) => break 'read DisconnectReason::TransportError,
            };
            let data = data.unwrap_or_default();
            let text = match (opcode, finished) {
                (OpCode::Text, true) if fragments.is_none() => data,
                (OpCode::Text, false) if fragments.is_none() => {
                    fragments = Some(data);
                    continue;
                }
                (OpCode::Continue, _) => {
                    let Some(partial) = fragments.as_mut() else {
                        break 'read DisconnectReason::TransportError;
                    };
                    if partial.len() + data.len() > max_payload {
                        break 'read DisconnectReason::PayloadTooLarge;
                    }
                    partial.extend_from_slice(&data);
                    if !finished {
                        continue;
                    }
                    match fragments.take() {
                        Some(whole) => whole,
                        None => continue,
                    }
                }
                // Binary attachments are not supported; skip them.
                (OpCode::Binary, _) => continue,
                (OpCode::Ping, _) => {
                    if let Some(tx) = pong_tx.upgrade() {
                        let mut frame = BytesMut::with_capacity(data.len() + 2);
                        Parser::write_message(&mut frame, &data, OpCode::Pong, true, false);
                        let frame = frame.freeze();
                        let n_bytes = frame.len();
                        if tx.send(frame).is_ok() {
                            link.add_transport(n_bytes);
                        }
                    }
                    continue;
                }
                (OpCode::Pong, _) => continue,
                (OpCode::Close, _) => break 'read DisconnectReason::TransportClose,
                _ => break 'read DisconnectReason::TransportError,
            };
            let text = match String::from_utf8(Vec::from(text)) {
                Ok(text) => text,
                Err(_) => break 'read DisconnectReason::ParseError,
            };
            if addr.send(WsText { text }).await.is_err() {
                return;
            }
        }
        if buf.is_empty() && buf.capacity() > IDLE_READ_BUFFER_BYTES {
            buf = BytesMut::new();
        }
        match payload.next().await {
            Some(Ok(chunk)) => buf.extend_from_slice(&chunk),
            Some(Err(_)) | None => break DisconnectReason::TransportClose,
        }
    };
    addr.do_send(WsClosed { reason });
}
