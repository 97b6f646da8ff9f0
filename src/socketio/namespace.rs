//! What a namespace handler sees: the [`NamespaceHandler`] trait it implements,
//! the [`SocketRef`] handle to one client in one namespace, [`AckSender`] and
//! [`DisconnectReason`]. Handles only queue packets on the connection actor;
//! they never touch a transport themselves.

use std::any::Any;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use actix_web::http::header::{HeaderName, HeaderValue};

use actix::Addr;
use serde_json::Value;

use super::connection::{Connection, ConnectionLink, DisconnectSocket, Outgoing};
use super::socket_packet::{encode_message, SocketPacketKind};

/// The application side of one namespace (e.g. `/assistant`).
///
/// Every method runs on the connection's actor, in packet order, so it must not
/// block: hand real work to another actor or task and answer later through the
/// `SocketRef` / `AckSender` (both are `Send`).
pub trait NamespaceHandler: Send + Sync + 'static {
    /// A client connected to this namespace; `auth` is the CONNECT payload.
    /// `Err(data)` answers CONNECT_ERROR with that data (conventionally
    /// `{"message": "..."}`) and the socket is not connected.
    fn on_connect(&self, socket: SocketRef, auth: Option<Value>) -> Result<(), Value> {
        let _ = (socket, auth);
        Ok(())
    }

    /// An EVENT packet: `args` are the arguments after the event name; `ack` is
    /// `Some` when the client asked for an acknowledgement.
    fn on_event(&self, socket: SocketRef, event: String, args: Vec<Value>, ack: Option<AckSender>);

    /// An EVENT packet with an argument nested deeper than
    /// `SocketIoConfig::max_event_depth`; the arguments are never parsed.
    /// `path` starts at the argument: `[0].a.b`.
    fn on_too_deep(&self, socket: SocketRef, path: String, ack: Option<AckSender>) {
        let _ = (socket, path, ack);
    }

    /// The socket left the namespace; called once per connected socket.
    fn on_disconnect(&self, socket: SocketRef, reason: DisconnectReason) {
        let _ = (socket, reason);
    }
}

/// Why a socket left its namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DisconnectReason {
    /// The client sent DISCONNECT for this namespace.
    ClientDisconnect,
    /// The client closed the whole Engine.IO session (close packet).
    ClientClosed,
    /// The server called [`SocketRef::disconnect`].
    ServerDisconnect,
    /// The websocket or HTTP connection went away.
    TransportClose,
    /// The transport broke the protocol (overlapping polls, websocket errors).
    TransportError,
    /// The client did not answer a ping within pingInterval + pingTimeout.
    PingTimeout,
    /// The client sent a packet that is not Engine.IO v4 / Socket.IO v5.
    ParseError,
    /// The client sent a packet or body over `max_payload`.
    PayloadTooLarge,
    /// The client read too slowly and its outgoing queue passed the limit.
    SlowClient,
}

impl fmt::Display for DisconnectReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DisconnectReason::ClientDisconnect => "client namespace disconnect",
            DisconnectReason::ClientClosed => "client closed the connection",
            DisconnectReason::ServerDisconnect => "server namespace disconnect",
            DisconnectReason::TransportClose => "transport close",
            DisconnectReason::TransportError => "transport error",
            DisconnectReason::PingTimeout => "ping timeout",
            DisconnectReason::ParseError => "parse error",
            DisconnectReason::PayloadTooLarge => "payload too large",
            DisconnectReason::SlowClient => "outgoing queue overflow",
        })
    }
}

/// One client connected to one namespace. `Send + Sync`; cloning is one `Arc`
/// increment, so handlers may keep it (e.g. in a session's subscriber list).
#[derive(Clone)]
pub struct SocketRef {
    inner: Arc<SocketInner>,
}

/// The headers of a connection's opening request that the config asked to keep.
pub type HandshakeHeaders = Arc<[(HeaderName, HeaderValue)]>;

/// Shared by all clones of one `SocketRef`.
struct SocketInner {
    /// The Socket.IO socket id sent in the CONNECT reply (not the Engine.IO sid).
    id: String,
    namespace: Arc<str>,
    /// The connection actor that owns the transport; packets are queued here.
    connection: Addr<Connection>,
    /// Byte counters of the connection, to refuse emits to a stalled client.
    link: Arc<ConnectionLink>,
    /// Cleared when the socket leaves the namespace, so stale handles stop
    /// emitting even though the connection itself may live on.
    connected: AtomicBool,
    /// `SocketIoConfig::handshake_headers` of the opening request.
    handshake: Option<HandshakeHeaders>,
    /// What the handler attached at connect (e.g. who the client is).
    data: OnceLock<Box<dyn Any + Send + Sync>>,
}

impl SocketRef {
    pub(crate) fn new(
        id: String,
        namespace: Arc<str>,
        connection: Addr<Connection>,
        link: Arc<ConnectionLink>,
        handshake: Option<HandshakeHeaders>,
    ) -> SocketRef {
        SocketRef {
            inner: Arc::new(SocketInner {
                id,
                namespace,
                connection,
                link,
                connected: AtomicBool::new(true),
                handshake,
                data: OnceLock::new(),
            }),
        }
    }

    /// A header of the connection's opening request, if the config kept it.
    pub fn handshake_header(&self, name: &HeaderName) -> Option<&HeaderValue> {
        self.inner
            .handshake
            .as_deref()?
            .iter()
            .find(|(kept, _)| kept == name)
            .map(|(_, value)| value)
    }

    /// Attaches the handler's data to the socket, once (later calls are ignored).
    pub fn set_data<T: Any + Send + Sync>(&self, data: T) {
        let _ = self.inner.data.set(Box::new(data));
    }

    /// The data attached by `set_data`, if it is a `T`.
    pub fn data<T: Any + Send + Sync>(&self) -> Option<&T> {
        self.inner.data.get()?.downcast_ref()
    }

    /// The socket id (as the client sees it in `socket.id`).
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// The namespace this socket is connected to, e.g. `/assistant`.
    pub fn namespace(&self) -> &str {
        &self.inner.namespace
    }

    /// Whether the socket is still connected to its namespace.
    pub fn connected(&self) -> bool {
        self.inner.connected.load(Ordering::Acquire) && self.inner.connection.connected()
    }

    /// Queues an EVENT `[event, data]` to this socket; events to one socket
    /// arrive in the order emitted. Never blocks. Returns false if the socket is
    /// gone or its outgoing queue is over the limit (the connection is then
    /// dropped as too slow).
    pub fn emit(&self, event: &str, data: Value) -> bool {
        let json = match serde_json::to_string(&(event, &data)) {
            Ok(json) => json,
            // Serializing a `Value` only fails for non-string map keys, which a
            // `Value` cannot hold; refuse rather than panic all the same.
            Err(_) => return false,
        };
        self.send_encoded(encode_message(
            SocketPacketKind::Event,
            self.namespace(),
            None,
            &json,
        ))
    }

    /// Leaves the namespace from the server side: the client gets DISCONNECT and
    /// the handler's `on_disconnect` runs with [`DisconnectReason::ServerDisconnect`].
    pub fn disconnect(&self) {
        self.inner.connection.do_send(DisconnectSocket {
            socket: self.clone(),
        });
    }

    pub(crate) fn mark_disconnected(&self) {
        self.inner.connected.store(false, Ordering::Release);
    }

    /// Whether two handles are the same socket (not just the same namespace).
    pub(crate) fn same_socket(&self, other: &SocketRef) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Queues an already encoded Engine.IO message packet.
    fn send_encoded(&self, packet: String) -> bool {
        if !self.connected() {
            return false;
        }
        let accepted = self.inner.link.reserve_mailbox(packet.len());
        self.inner.connection.do_send(Outgoing {
            socket: self.clone(),
            packet,
        });
        accepted
    }
}

impl fmt::Debug for SocketRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SocketRef")
            .field("id", &self.inner.id)
            .field("namespace", &self.inner.namespace)
            .finish()
    }
}

/// Answers one client EVENT that asked for an acknowledgement. Dropping it
/// without `send` leaves the client's callback unanswered (its own timeout).
#[derive(Debug)]
pub struct AckSender {
    socket: SocketRef,
    ack_id: u64,
}

impl AckSender {
    pub(crate) fn new(socket: SocketRef, ack_id: u64) -> AckSender {
        AckSender { socket, ack_id }
    }

    /// Sends the ACK; `data` become the arguments of the client's callback.
    pub fn send(self, data: Vec<Value>) {
        let json = Value::Array(data).to_string();
        self.socket.send_encoded(encode_message(
            SocketPacketKind::Ack,
            self.socket.namespace(),
            Some(self.ack_id),
            &json,
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn handles_can_cross_threads() {
        assert_send_sync::<SocketRef>();
        assert_send_sync::<AckSender>();
    }
}
