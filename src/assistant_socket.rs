//! The `/assistant` Socket.IO namespace: `assistant_join_session`,
//! `assistant_message` and `assistant_cancel` in; `assistant:*` events out, to
//! the requesting socket, in order. It parses, forwards to the `Runtime`, and
//! relays what comes back; a disconnect never stops a turn.

use actors::contract::{CancelRequest, ChatRequest, JoinRequest};
use actors::events::EventSink;
use actors::session::{Caller, Runtime, SessionError};
use serde_json::{json, Value};
use std::sync::Arc;

use crate::access::limits::Limits;
use crate::access::Access;
use crate::errors::socket_error;
use crate::socketio::{AckSender, NamespaceHandler, SocketRef};

pub const NAMESPACE: &str = "/assistant";

pub struct AssistantNamespace {
    runtime: Runtime,
    access: Arc<Access>,
    limits: Arc<Limits>,
}

impl AssistantNamespace {
    pub fn new(runtime: Runtime, access: Arc<Access>, limits: Arc<Limits>) -> AssistantNamespace {
        AssistantNamespace {
            runtime,
            access,
            limits,
        }
    }
}

impl NamespaceHandler for AssistantNamespace {
    /// Who the client is is settled once, at connect: the `auth` payload's
    /// token or the opening request's headers. A refused client gets
    /// CONNECT_ERROR `{"message", "type": "unauthorized"}` and no socket.
    fn on_connect(&self, socket: SocketRef, auth: Option<Value>) -> Result<(), Value> {
        let caller = self
            .access
            .socket_caller(|name| socket.handshake_header(name).cloned(), auth.as_ref())
            .map_err(
                |why| json!({"message": format!("unauthorized: {why}"), "type": "unauthorized"}),
            )?;
        socket.set_data(caller);
        Ok(())
    }

    fn on_event(&self, socket: SocketRef, event: String, args: Vec<Value>, ack: Option<AckSender>) {
        let payload = args.into_iter().next().unwrap_or(Value::Null);
        let runtime = self.runtime.clone();
        let Some(caller) = socket.data::<Caller>().cloned() else {
            // on_connect always attaches a caller; a socket without one is refused.
            let error = SessionError::Forbidden("the connection is not authenticated".into());
            return reply_error(&socket, ack, &error);
        };
        match event.as_str() {
            "assistant_message" => {
                let limits = self.limits.clone();
                actix::spawn(send_message(runtime, limits, caller, socket, payload, ack));
            }
            "assistant_join_session" => {
                actix::spawn(join(runtime, caller, socket, payload, ack));
            }
            "assistant_cancel" => {
                actix::spawn(cancel(runtime, caller, socket, payload, ack));
            }
            other => {
                let error = SessionError::validation("event", format!("unknown event {other:?}"));
                reply_error(&socket, ack, &error);
            }
        }
    }
}

fn reply_error(socket: &SocketRef, ack: Option<AckSender>, error: &SessionError) {
    let payload = socket_error(error);
    socket.emit("assistant:error", payload.clone());
    if let Some(ack) = ack {
        ack.send(vec![json!({"ok": false, "error": payload})]);
    }
}

async fn send_message(
    runtime: Runtime,
    limits: Arc<Limits>,
    caller: Caller,
    socket: SocketRef,
    payload: Value,
    ack: Option<AckSender>,
) {
    let request = match ChatRequest::parse(&payload) {
        Ok(request) => request,
        Err(error) => return reply_error(&socket, ack, &error.into()),
    };
    let _live = match limits.admit(&caller, &request.session_id) {
        Ok(live) => live,
        Err(error) => return reply_error(&socket, ack, &error),
    };
    let (sink, mut events) = EventSink::new(true);
    let accepted = match runtime.send_message(&caller, request, sink).await {
        Ok(accepted) => accepted,
        Err(error) => return reply_error(&socket, ack, &error),
    };
    if let Some(ack) = ack {
        ack.send(vec![json!({"ok": true, "accepted_as": accepted.accepted_as, "message_id": accepted.message_id})]);
    }
    // Relays until the turn says it is complete. A steering message's events
    // go to the live turn's sink, so its own channel closes at once.
    while let Some(event) = events.recv().await {
        let completed = event.is_completed_status();
        socket.emit(&format!("assistant:{}", event.name()), event.payload());
        if completed {
            break;
        }
    }
}

async fn join(
    runtime: Runtime,
    caller: Caller,
    socket: SocketRef,
    payload: Value,
    ack: Option<AckSender>,
) {
    let join = match JoinRequest::parse(&payload) {
        Ok(join) => join,
        Err(error) => return reply_error(&socket, ack, &error.into()),
    };
    match runtime
        .join(&caller, &join.session_id, join.host_context)
        .await
    {
        Ok(()) => {
            if let Some(ack) = ack {
                ack.send(vec![json!({"ok": true, "session_id": join.session_id})]);
            }
        }
        Err(error) => reply_error(&socket, ack, &error),
    }
}

async fn cancel(
    runtime: Runtime,
    caller: Caller,
    socket: SocketRef,
    payload: Value,
    ack: Option<AckSender>,
) {
    let cancel = match CancelRequest::parse(&payload) {
        Ok(cancel) => cancel,
        Err(error) => return reply_error(&socket, ack, &error.into()),
    };
    match runtime.cancel(&caller, &cancel.session_id).await {
        Ok(cancel_requested) => {
            if let Some(ack) = ack {
                ack.send(vec![
                    json!({"ok": true, "cancel_requested": cancel_requested}),
                ]);
            }
        }
        Err(error) => reply_error(&socket, ack, &error),
    }
}
