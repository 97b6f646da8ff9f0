//! The per-connection actor: one Engine.IO session and the Socket.IO sockets
//! multiplexed on it. It owns the transport state (polling outbox and pending
//! long-poll, or the websocket writer), the ping/pong deadline and the namespace
//! sockets. HTTP handlers and the websocket reader only forward to it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use actix::{Actor, ActorContext, AsyncContext, Context, Handler, Message, SpawnHandle};
use serde_json::Value;
use tokio::sync::oneshot;

use super::engine_packet::{
    EngineError, EnginePacket, CLOSE, NOOP, PING, PONG_PROBE, RECORD_SEPARATOR,
};
use super::namespace::{AckSender, DisconnectReason, NamespaceHandler, SocketRef};
use super::sid;
use super::socket_packet::{encode_message, SocketPacket, SocketPacketKind};
use super::websocket::WsWriter;
use super::Shared;

/// Reply of the server to CONNECT for a namespace nobody registered.
const INVALID_NAMESPACE: &str = r#"{"message":"Invalid namespace"}"#;

/// Byte counters shared by the actor, its `SocketRef`s and the websocket body
/// stream, so that emitters on other threads see a stalled client's backlog.
#[derive(Debug)]
pub(crate) struct ConnectionLink {
    /// Bytes emitted through `SocketRef`s and still in the actor's mailbox.
    mailbox_bytes: AtomicUsize,
    /// Bytes in the polling outbox or the websocket channel, not yet written.
    transport_bytes: AtomicUsize,
    /// Past this sum the connection is dropped as too slow.
    limit_bytes: usize,
}

impl ConnectionLink {
    pub(crate) fn new(limit_bytes: usize) -> ConnectionLink {
        ConnectionLink {
            mailbox_bytes: AtomicUsize::new(0),
            transport_bytes: AtomicUsize::new(0),
            limit_bytes,
        }
    }

    /// Counts an emit on its way to the mailbox; false when over the limit.
    pub(crate) fn reserve_mailbox(&self, n_bytes: usize) -> bool {
        let mailbox = self.mailbox_bytes.fetch_add(n_bytes, Ordering::AcqRel) + n_bytes;
        mailbox + self.transport_bytes.load(Ordering::Acquire) <= self.limit_bytes
    }

    fn release_mailbox(&self, n_bytes: usize) {
        self.mailbox_bytes.fetch_sub(n_bytes, Ordering::AcqRel);
    }

    pub(crate) fn add_transport(&self, n_bytes: usize) {
        self.transport_bytes.fetch_add(n_bytes, Ordering::AcqRel);
    }

    pub(crate) fn release_transport(&self, n_bytes: usize) {
        self.transport_bytes.fetch_sub(n_bytes, Ordering::AcqRel);
    }

    fn over_limit(&self) -> bool {
        self.mailbox_bytes.load(Ordering::Acquire) + self.transport_bytes.load(Ordering::Acquire)
            > self.limit_bytes
    }
}

/// The connection actor; see the module header.
pub(crate) struct Connection {
    sid: Arc<str>,
    /// Config, namespace handlers and the sid registry this session is listed in.
    shared: Arc<Shared>,
    link: Arc<ConnectionLink>,
    transport: Transport,
    /// The kept headers of the opening request, for `on_connect`.
    handshake: Option<super::namespace::HandshakeHeaders>,
    /// Sockets connected to namespaces; rarely more than one, so a `Vec`.
    sockets: Vec<Attached>,
    /// The next ping, or (while `awaiting_pong`) the deadline for its pong.
    ping_timer: Option<SpawnHandle>,
    awaiting_pong: bool,
    /// Set once when the session is being closed; also why, for `on_disconnect`.
    close_reason: Option<DisconnectReason>,
}

/// How packets currently reach the client.
pub(crate) enum Transport {
    Polling(Polling),
    WebSocket(WsWriter),
}

/// Long-polling state. The outbox holds packets already joined with the record
/// separator, so a GET answers with one `take`.
#[derive(Default)]
pub(crate) struct Polling {
    outbox: String,
    /// The one outstanding GET, answered when packets arrive.
    pending: Option<oneshot::Sender<String>>,
    /// A websocket that sent or may send `2probe`; it becomes the transport on `5`.
    probe: Option<WsWriter>,
}

/// One socket connected to one namespace on this connection.
struct Attached {
    socket: SocketRef,
    handler: Arc<dyn NamespaceHandler>,
}

/// Where a text packet came from: decides what `2probe` and `5` mean.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Via {
    Polling,
    Probe,
    WebSocket,
}

/// A polling GET (sent by the polling handler). Ready answers at once; Wait
/// resolves when packets arrive (at the latest the next ping).
#[derive(Message)]
#[rtype(result = "Result<PollReply, EngineError>")]
pub(crate) struct Poll;

pub(crate) enum PollReply {
    Ready(String),
    Wait(oneshot::Receiver<String>),
}

/// The body of a polling POST, not yet split into packets.
#[derive(Message)]
#[rtype(result = "Result<(), EngineError>")]
pub(crate) struct PostPackets {
    pub body: String,
}

/// A websocket opened with this sid to try the upgrade. The reply is the
/// session's byte counters, which the websocket body stream must share.
#[derive(Message)]
#[rtype(result = "Result<Arc<ConnectionLink>, EngineError>")]
pub(crate) struct AttachProbe {
    pub tx: super::frame_channel::Sender,
}

/// One complete text message read from this connection's websocket.
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct WsText {
    pub text: String,
}

/// The websocket reader ended: the peer closed, or broke the protocol.
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct WsClosed {
    pub reason: DisconnectReason,
}

/// An encoded packet from a `SocketRef` or `AckSender`, counted in `mailbox_bytes`.
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct Outgoing {
    pub socket: SocketRef,
    pub packet: String,
}

/// `SocketRef::disconnect`: leave the namespace from the server side.
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct DisconnectSocket {
    pub socket: SocketRef,
}

/// Close the whole session (e.g. an oversized POST seen by the HTTP handler).
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct CloseSession {
    pub reason: DisconnectReason,
}

impl Connection {
    pub(crate) fn new(
        sid: Arc<str>,
        shared: Arc<Shared>,
        link: Arc<ConnectionLink>,
        transport: Transport,
    ) -> Connection {
        Connection {
            sid,
            shared,
            link,
            transport,
            handshake: None,
            sockets: Vec::new(),
            ping_timer: None,
            awaiting_pong: false,
            close_reason: None,
        }
    }

    /// Keeps the headers of the opening request for the namespace handlers.
    pub(crate) fn with_handshake(
        mut self,
        handshake: Option<super::namespace::HandshakeHeaders>,
    ) -> Connection {
        self.handshake = handshake;
        self
    }

    pub(crate) fn polling() -> Transport {
        Transport::Polling(Polling::default())
    }

    fn close(&mut self, reason: DisconnectReason, ctx: &mut Context<Self>) {
        if self.close_reason.is_some() {
            return;
        }
        log::debug!("engine.io session {} closing: {reason}", self.sid);
        self.close_reason = Some(reason);
        ctx.stop();
    }

    fn schedule_ping(&mut self, ctx: &mut Context<Self>) {
        let interval = self.shared.config.ping_interval;
        self.ping_timer = Some(ctx.run_later(interval, |act, ctx| {
            act.write(PING, ctx);
            act.awaiting_pong = true;
            let timeout = act.shared.config.ping_timeout;
            act.ping_timer = Some(ctx.run_later(timeout, |act, ctx| {
                act.close(DisconnectReason::PingTimeout, ctx);
            }));
        }));
    }

    fn on_pong(&mut self, ctx: &mut Context<Self>) {
        if !self.awaiting_pong {
            return;
        }
        self.awaiting_pong = false;
        if let Some(timer) = self.ping_timer.take() {
            ctx.cancel_future(timer);
        }
        self.schedule_ping(ctx);
    }

    /// Writes one server packet to the active transport (counted in
    /// `transport_bytes`), dropping the connection if the backlog is over the limit.
    fn write(&mut self, packet: &str, ctx: &mut Context<Self>) {
        match &mut self.transport {
            Transport::Polling(polling) => {
                let mut n_bytes = packet.len();
                if !polling.outbox.is_empty() {
                    polling.outbox.push(RECORD_SEPARATOR);
                    n_bytes += RECORD_SEPARATOR.len_utf8();
                }
                polling.outbox.push_str(packet);
                self.link.add_transport(n_bytes);
                self.flush_poll();
            }
            Transport::WebSocket(writer) => writer.send_text(packet),
        }
        if self.link.over_limit() {
            self.close(DisconnectReason::SlowClient, ctx);
        }
    }

    /// Answers the pending GET with the outbox, if both exist.
    fn flush_poll(&mut self) {
        let Transport::Polling(polling) = &mut self.transport else {
            return;
        };
        if polling.outbox.is_empty() {
            return;
        }
        let Some(pending) = polling.pending.take() else {
            return;
        };
        let body = std::mem::take(&mut polling.outbox);
        let n_bytes = body.len();
        match pending.send(body) {
            Ok(()) => self.link.release_transport(n_bytes),
            // The HTTP client went away; keep the packets for its next GET.
            Err(body) => polling.outbox = body,
        }
    }

    /// Handles one Engine.IO text packet from any transport.
    fn on_text(&mut self, text: &str, via: Via, ctx: &mut Context<Self>) {
        let packet = match EnginePacket::parse(text) {
            Ok(packet) => packet,
            Err(_) => return self.close(DisconnectReason::ParseError, ctx),
        };
        match packet {
            EnginePacket::Close => self.close(DisconnectReason::ClientClosed, ctx),
            EnginePacket::Ping(data) if via == Via::Probe => {
                if data != "probe" {
                    return;
                }
                let Transport::Polling(polling) = &mut self.transport else {
                    return;
                };
                if let Some(probe) = polling.probe.as_mut() {
                    probe.send_text(PONG_PROBE);
                }
                // A noop finishes the pending GET so the client can pause polling.
                if polling.pending.is_some() {
                    self.write(NOOP, ctx);
                }
            }
            // v4 clients do not ping, but answering costs nothing.
            EnginePacket::Ping(data) => self.write(&format!("3{data}"), ctx),
            EnginePacket::Pong(_) if via != Via::Probe => self.on_pong(ctx),
            EnginePacket::Message(payload) if via != Via::Probe => {
                self.on_socket_message(payload, ctx)
            }
            EnginePacket::Upgrade if via == Via::Probe => self.complete_upgrade(),
            EnginePacket::Binary => {
                log::debug!("engine.io session {}: binary message ignored", self.sid);
            }
            EnginePacket::Pong(_)
            | EnginePacket::Message(_)
            | EnginePacket::Upgrade
            | EnginePacket::Noop => {}
        }
    }

    /// `5` on the probe: the websocket becomes the transport; what the outbox
    /// still holds goes out on it, in order.
    fn complete_upgrade(&mut self) {
        let Transport::Polling(polling) = &mut self.transport else {
            return;
        };
        let Some(mut writer) = polling.probe.take() else {
            return;
        };
        if let Some(pending) = polling.pending.take() {
            // Nothing should be pending (the client paused polling); end it cleanly.
            let _ = pending.send(NOOP.to_owned());
        }
        let outbox = std::mem::take(&mut polling.outbox);
        self.link.release_transport(outbox.len());
        for packet in outbox.split(RECORD_SEPARATOR).filter(|p| !p.is_empty()) {
            writer.send_text(packet);
        }
        log::debug!("engine.io session {} upgraded to websocket", self.sid);
        self.transport = Transport::WebSocket(writer);
    }

    fn find_socket(&self, namespace: &str) -> Option<usize> {
        self.sockets
            .iter()
            .position(|attached| attached.socket.namespace() == namespace)
    }

    /// Handles the Socket.IO packet inside an Engine.IO message.
    fn on_socket_message(&mut self, payload: &str, ctx: &mut Context<Self>) {
        let packet = match SocketPacket::parse(payload) {
            Ok(packet) => packet,
            Err(_) => return self.close(DisconnectReason::ParseError, ctx),
        };
        match packet.kind {
            SocketPacketKind::Connect => self.connect_namespace(&packet, ctx),
            SocketPacketKind::Disconnect => {
                if let Some(idx) = self.find_socket(packet.namespace) {
                    let attached = self.sockets.remove(idx);
                    attached.socket.mark_disconnected();
                    attached
                        .handler
                        .on_disconnect(attached.socket, DisconnectReason::ClientDisconnect);
                }
            }
            SocketPacketKind::Event => self.on_event(&packet, ctx),
            // The server never emits with an ack, so a client ACK answers nothing.
            SocketPacketKind::Ack | SocketPacketKind::ConnectError => {}
            SocketPacketKind::BinaryEvent | SocketPacketKind::BinaryAck => {
                log::debug!("engine.io session {}: binary packet ignored", self.sid);
            }
        }
    }

    fn connect_namespace(&mut self, packet: &SocketPacket<'_>, ctx: &mut Context<Self>) {
        let namespace = packet.namespace;
        if self.find_socket(namespace).is_some() {
            // Already connected: the reference server ignores a repeated CONNECT.
            return;
        }
        let Some(handler) = self.shared.namespaces.get(namespace).cloned() else {
            let reply = encode_message(
                SocketPacketKind::ConnectError,
                namespace,
                None,
                INVALID_NAMESPACE,
            );
            return self.write(&reply, ctx);
        };
        let auth = if packet.data.trim().is_empty() {
            None
        } else {
            match serde_json::from_str::<Value>(packet.data) {
                Ok(auth) => Some(auth),
                Err(_) => return self.close(DisconnectReason::ParseError, ctx),
            }
        };
        let socket = SocketRef::new(
            sid::new_id(),
            Arc::from(namespace),
            ctx.address(),
            self.link.clone(),
            self.handshake.clone(),
        );
        match handler.on_connect(socket.clone(), auth) {
            Ok(()) => {
                let reply = serde_json::json!({ "sid": socket.id() }).to_string();
                let reply = encode_message(SocketPacketKind::Connect, namespace, None, &reply);
                self.write(&reply, ctx);
                self.sockets.push(Attached { socket, handler });
            }
            Err(data) => {
                socket.mark_disconnected();
                let reply = encode_message(
                    SocketPacketKind::ConnectError,
                    namespace,
                    None,
                    &data.to_string(),
                );
                self.write(&reply, ctx);
            }
        }
    }

    fn on_event(&mut self, packet: &SocketPacket<'_>, ctx: &mut Context<Self>) {
        let Some(idx) = self.find_socket(packet.namespace) else {
            // Events for a namespace the client has not joined are dropped.
            return;
        };
        // Checked before parsing: the parser recurses and stops at 128 levels
        // without saying where. The argument array itself does not count.
        let too_deep = super::depth::too_deep(
            packet.data.as_bytes(),
            self.shared.config.max_event_depth + 1,
        );
        if let Some(found) = too_deep {
            let attached = &self.sockets[idx];
            let socket = attached.socket.clone();
            let ack = packet
                .ack_id
                .map(|ack_id| AckSender::new(socket.clone(), ack_id));
            // `[1].x`: argument 1 of the packet is argument 0 of the event.
            let path = match found.strip_prefix("[") {
                Some(rest) => match rest.split_once(']') {
                    Some((index, tail)) => match index.parse::<usize>() {
                        Ok(index) if index > 0 => format!("[{}]{tail}", index - 1),
                        _ => found.clone(),
                    },
                    None => found.clone(),
                },
                None => found.clone(),
            };
            attached.handler.on_too_deep(socket, path, ack);
            return;
        }
        let mut args = match serde_json::from_str::<Value>(packet.data) {
            Ok(Value::Array(args)) if matches!(args.first(), Some(Value::String(_))) => args,
            _ => return self.close(DisconnectReason::ParseError, ctx),
        };
        let event = match args.remove(0) {
            Value::String(event) => event,
            // Checked by the match above.
            _ => return,
        };
        let attached = &self.sockets[idx];
        let socket = attached.socket.clone();
        let handler = attached.handler.clone();
        let ack = packet
            .ack_id
            .map(|ack_id| AckSender::new(socket.clone(), ack_id));
        handler.on_event(socket, event, args, ack);
    }
}

impl Actor for Connection {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        self.schedule_ping(ctx);
    }

    fn stopped(&mut self, _ctx: &mut Context<Self>) {
        let reason = self
            .close_reason
            .unwrap_or(DisconnectReason::TransportClose);
        for attached in self.sockets.drain(..) {
            attached.socket.mark_disconnected();
            attached.handler.on_disconnect(attached.socket, reason);
        }
        match &mut self.transport {
            Transport::Polling(polling) => {
                if let Some(pending) = polling.pending.take() {
                    let _ = pending.send(CLOSE.to_owned());
                }
                if let Some(probe) = polling.probe.as_mut() {
                    probe.close();
                }
            }
            Transport::WebSocket(writer) => writer.close(),
        }
        self.shared.unregister(&self.sid);
    }
}

impl Handler<Poll> for Connection {
    type Result = Result<PollReply, EngineError>;

    fn handle(&mut self, _msg: Poll, ctx: &mut Context<Self>) -> Self::Result {
        let Transport::Polling(polling) = &mut self.transport else {
            return Err(EngineError::BadRequest);
        };
        if polling.pending.as_ref().is_some_and(|p| !p.is_closed()) {
            // Engine.IO allows one outstanding GET; overlap closes the session.
            self.close(DisconnectReason::TransportError, ctx);
            return Err(EngineError::BadRequest);
        }
        if !polling.outbox.is_empty() {
            let body = std::mem::take(&mut polling.outbox);
            self.link.release_transport(body.len());
            return Ok(PollReply::Ready(body));
        }
        if polling.probe.is_some() {
            // Upgrading: do not hold the poll, or the client waits a ping interval.
            return Ok(PollReply::Ready(NOOP.to_owned()));
        }
        let (tx, rx) = oneshot::channel();
        polling.pending = Some(tx);
        Ok(PollReply::Wait(rx))
    }
}

impl Handler<PostPackets> for Connection {
    type Result = Result<(), EngineError>;

    fn handle(&mut self, msg: PostPackets, ctx: &mut Context<Self>) -> Self::Result {
        for text in msg.body.split(RECORD_SEPARATOR) {
            self.on_text(text, Via::Polling, ctx);
            match self.close_reason {
                None => {}
                // A client's own close packet is a normal end: answer "ok".
                Some(DisconnectReason::ClientClosed) => return Ok(()),
                Some(_) => return Err(EngineError::BadRequest),
            }
        }
        Ok(())
    }
}

impl Handler<AttachProbe> for Connection {
    type Result = Result<Arc<ConnectionLink>, EngineError>;

    fn handle(&mut self, msg: AttachProbe, _ctx: &mut Context<Self>) -> Self::Result {
        match &mut self.transport {
            Transport::Polling(polling) if polling.probe.is_none() => {
                polling.probe = Some(WsWriter::new(msg.tx, self.link.clone()));
                Ok(self.link.clone())
            }
            _ => Err(EngineError::BadRequest),
        }
    }
}

impl Handler<WsText> for Connection {
    type Result = ();

    fn handle(&mut self, msg: WsText, ctx: &mut Context<Self>) {
        let via = match &self.transport {
            Transport::Polling(polling) if polling.probe.is_some() => Via::Probe,
            Transport::Polling(_) => return,
            Transport::WebSocket(_) => Via::WebSocket,
        };
        self.on_text(&msg.text, via, ctx);
    }
}

impl Handler<WsClosed> for Connection {
    type Result = ();

    fn handle(&mut self, msg: WsClosed, ctx: &mut Context<Self>) {
        match &mut self.transport {
            // A failed upgrade: the session goes on polling.
            Transport::Polling(polling) => polling.probe = None,
            Transport::WebSocket(_) => self.close(msg.reason, ctx),
        }
    }
}

impl Handler<Outgoing> for Connection {
    type Result = ();

    fn handle(&mut self, msg: Outgoing, ctx: &mut Context<Self>) {
        self.link.release_mailbox(msg.packet.len());
        if msg.socket.connected() {
            self.write(&msg.packet, ctx);
        }
    }
}

impl Handler<DisconnectSocket> for Connection {
    type Result = ();

    fn handle(&mut self, msg: DisconnectSocket, ctx: &mut Context<Self>) {
        let Some(idx) = self
            .sockets
            .iter()
            .position(|attached| attached.socket.same_socket(&msg.socket))
        else {
            return;
        };
        let attached = self.sockets.remove(idx);
        attached.socket.mark_disconnected();
        let packet = encode_message(
            SocketPacketKind::Disconnect,
            attached.socket.namespace(),
            None,
            "",
        );
        self.write(&packet, ctx);
        attached
            .handler
            .on_disconnect(attached.socket, DisconnectReason::ServerDisconnect);
    }
}

impl Handler<CloseSession> for Connection {
    type Result = ();

    fn handle(&mut self, msg: CloseSession, ctx: &mut Context<Self>) {
        self.close(msg.reason, ctx);
    }
}
