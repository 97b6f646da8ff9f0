//! The `/assistant` Socket.IO namespace: `assistant_join_session`,
//! `assistant_message` and `assistant_cancel` in; `assistant:*` events out, to
//! the requesting socket, in order. It parses, forwards to the `Runtime`, and
//! relays what comes back; a disconnect never stops a turn.

use actors::contract::{CancelRequest, ChatRequest, JoinRequest};
use actors::events::EventSink;
use actors::session::{Runtime, SessionError};
use serde_json::{json, Value};

use crate::errors::socket_error;
use crate::socketio::{AckSender, NamespaceHandler, SocketRef};

pub const NAMESPACE: &str = "/assistant";

pub struct AssistantNamespace {
    runtime: Runtime,
}

impl AssistantNamespace {
    pub fn new(runtime: Runtime) -> AssistantNamespace {
        AssistantNamespace { runtime }
    }
}

impl NamespaceHandler for AssistantNamespace {
    fn on_event(&self, socket: SocketRef, event: String, args: Vec<Value>, ack: Option<AckSender>) {
        let payload = args.into_iter().next().unwrap_or(Value::Null);
        let runtime = self.runtime.clone();
        match event.as_str() {
            "assistant_message" => {
                actix::spawn(send_message(runtime, socket, payload, ack));
            }
            "assistant_join_session" => {
                actix::spawn(join(runtime, socket, payload, ack));
            }
            "assistant_cancel" => {
                actix::spawn(cancel(runtime, socket, payload, ack));
            }
            other => {
                let error = SessionError::validation("event", format!("unknown event {other:?}"));
                reply_error(&socket, ack, &error);
            }
        }
    }

    /// `[0].host_context.x` is the payload's `host_context.x`.
    fn on_too_deep(&self, socket: SocketRef, path: String, ack: Option<AckSender>) {
        let path = match path.strip_prefix("[0]") {
            Some("") => "body".to_string(),
            Some(rest) => rest.trim_start_matches('.').to_string(),
            None => path,
        };
        let max = actors::contract::MAX_JSON_DEPTH;
        let error = SessionError::validation(
            &path,
            format!("nested more than {max} arrays/objects deep; that is the limit"),
        );
        reply_error(&socket, ack, &error);
    }
}

fn reply_error(socket: &SocketRef, ack: Option<AckSender>, error: &SessionError) {
    let payload = socket_error(error);
    socket.emit("assistant:error", payload.clone());
    if let Some(ack) = ack {
        ack.send(vec![json!({"ok": false, "error": payload})]);
    }
}

async fn send_message(runtime: Runtime, socket: SocketRef, payload: Value, ack: Option<AckSender>) {
    let request = match ChatRequest::parse(&payload) {
        Ok(request) => request,
        Err(error) => return reply_error(&socket, ack, &error.into()),
    };
    let (sink, mut events) = EventSink::new(true);
    let accepted = match runtime.send_message(request, sink).await {
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

async fn join(runtime: Runtime, socket: SocketRef, payload: Value, ack: Option<AckSender>) {
    let join = match JoinRequest::parse(&payload) {
        Ok(join) => join,
        Err(error) => return reply_error(&socket, ack, &error.into()),
    };
    match runtime.join(&join.session_id, join.host_context).await {
        Ok(()) => {
            if let Some(ack) = ack {
                ack.send(vec![json!({"ok": true, "session_id": join.session_id})]);
            }
        }
        Err(error) => reply_error(&socket, ack, &error),
    }
}

async fn cancel(runtime: Runtime, socket: SocketRef, payload: Value, ack: Option<AckSender>) {
    let cancel = match CancelRequest::parse(&payload) {
        Ok(cancel) => cancel,
        Err(error) => return reply_error(&socket, ack, &error.into()),
    };
    match runtime.cancel(&cancel.session_id).await {
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
