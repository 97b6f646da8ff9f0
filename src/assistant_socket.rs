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
                reply_error(&socket, ack, &error, None);
            }
        }
    }
}

/// Emits `assistant:error` (and answers the ack) for a request error. It names
/// the session whenever the request got far enough to say which one.
fn reply_error(
    socket: &SocketRef,
    ack: Option<AckSender>,
    error: &SessionError,
    session_id: Option<&str>,
) {
    let mut payload = socket_error(error);
    if let (Some(session_id), Value::Object(fields)) = (session_id, &mut payload) {
        fields.insert("session_id".to_string(), json!(session_id));
    }
    socket.emit("assistant:error", payload.clone());
    if let Some(ack) = ack {
        ack.send(vec![json!({"ok": false, "error": payload})]);
    }
}

/// The `session_id` a message that failed validation said it was for, if it
/// said one as a string: the client's own words, echoed so that a client with
/// several sessions on one socket can tell which one the error is about.
fn sent_session_id(payload: &Value) -> Option<&str> {
    ["session_id", "sessionId"]
        .iter()
        .find_map(|key| payload.get(*key).and_then(Value::as_str))
}

async fn send_message(runtime: Runtime, socket: SocketRef, payload: Value, ack: Option<AckSender>) {
    let request = match ChatRequest::parse(&payload) {
        Ok(request) => request,
        Err(error) => {
            let session_id = sent_session_id(&payload);
            return reply_error(&socket, ack, &error.into(), session_id);
        }
    };
    let session_id = request.session_id.to_string();
    let (sink, mut events) = EventSink::new(true);
    let accepted = match runtime.send_message(request, sink).await {
        Ok(accepted) => accepted,
        Err(error) => return reply_error(&socket, ack, &error, Some(&session_id)),
    };
    if let Some(ack) = ack {
        ack.send(vec![json!({"ok": true, "accepted_as": accepted.accepted_as, "message_id": accepted.message_id})]);
    }
    // Relays until the turn says it is complete. A steering message's events
    // go to the live turn's sink, so its own channel closes at once.
    while let Some(event) = events.recv().await {
        let completed = event.is_completed_status();
        socket.emit(
            &format!("assistant:{}", event.name()),
            event.payload_for(&session_id),
        );
        if completed {
            break;
        }
    }
}

async fn join(runtime: Runtime, socket: SocketRef, payload: Value, ack: Option<AckSender>) {
    let join = match JoinRequest::parse(&payload) {
        Ok(join) => join,
        Err(error) => return reply_error(&socket, ack, &error.into(), None),
    };
    match runtime.join(&join.session_id, join.host_context).await {
        Ok(()) => {
            if let Some(ack) = ack {
                ack.send(vec![json!({"ok": true, "session_id": join.session_id})]);
            }
        }
        Err(error) => reply_error(&socket, ack, &error, Some(join.session_id.as_str())),
    }
}

async fn cancel(runtime: Runtime, socket: SocketRef, payload: Value, ack: Option<AckSender>) {
    let cancel = match CancelRequest::parse(&payload) {
        Ok(cancel) => cancel,
        Err(error) => return reply_error(&socket, ack, &error.into(), None),
    };
    match runtime.cancel(&cancel.session_id).await {
        Ok(cancel_requested) => {
            if let Some(ack) = ack {
                ack.send(vec![
                    json!({"ok": true, "cancel_requested": cancel_requested}),
                ]);
            }
        }
        Err(error) => reply_error(&socket, ack, &error, Some(cancel.session_id.as_str())),
    }
}
