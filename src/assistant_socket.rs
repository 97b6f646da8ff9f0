//! The `/assistant` Socket.IO namespace: `assistant_join_session`,
//! `assistant_message` and `assistant_cancel` in; `assistant:*` events out, to
//! the requesting socket, in order. It parses, forwards to the `Runtime`, and
//! relays what comes back; a disconnect never stops a turn.
//!
//! A joined socket is a member of the session's room (`actors::session::Rooms`):
//! it also gets the events of turns others started (another socket, HTTP,
//! AG-UI, a background turn), emitted straight from the turn under the
//! connection's outgoing limit, from the moment it joined. A socket stays in
//! every room it joined (as the Python original's `enter_room`), up to
//! `MAX_ROOMS_PER_SOCKET` (the oldest is left past it), until it disconnects
//! or sends `assistant_leave_session`.
//!
//! Who the client is is settled once, at connect (docs/access.md); every
//! event then acts as that caller.
//!
//! Each client event gets a request id (the socket's events carry no headers),
//! logged with the event and echoed as `request_id` in its ack and in the
//! `assistant:status` and `assistant:error` events it causes, so a host can
//! match its logs to ours. Deltas and `final_response` stay exactly the
//! shapes HTTP answers (the transports must not drift).

use std::sync::{Arc, Mutex};

use actors::contract::{CancelRequest, ChatRequest, JoinRequest};
use actors::error_type::ErrorType;
use actors::events::{EventSink, TurnEvent};
use actors::ids::SessionId;
use actors::session::{Caller, MemberId, Removal, RoomMember, Runtime, SessionError};
use serde_json::{json, Value};

use crate::access::limits::Limits;
use crate::access::Access;
use crate::errors::socket_error;
use crate::observability::{turn_failure, Metrics, RequestId, Transport, TurnObserver};
use crate::socketio::{AckSender, DisconnectReason, NamespaceHandler, SocketRef};

pub const NAMESPACE: &str = "/assistant";

/// Rooms one socket may be in; joining one more leaves the oldest.
pub const MAX_ROOMS_PER_SOCKET: usize = 16;

/// What a socket keeps from connect to disconnect.
struct SocketState {
    caller: Caller,
    /// This socket as a room member, skipped in the fan-out of its own turns.
    member_id: MemberId,
    /// The sessions whose rooms it is in, oldest first.
    joined: Mutex<Vec<SessionId>>,
}

/// A socket in a session's room: each event emitted at once, under the
/// connection's outgoing limit (past it the connection is closed as too slow,
/// and `emit` refuses).
struct SocketMember {
    socket: SocketRef,
}

impl RoomMember for SocketMember {
    fn deliver(&self, session_id: &SessionId, event: &TurnEvent) -> bool {
        self.socket.emit(
            &format!("assistant:{}", event.name()),
            event.payload_for(session_id.as_str()),
        )
    }

    fn removed(&self, session_id: &SessionId, why: Removal) {
        let message = match why {
            Removal::OwnerChanged => "the session was handed to another owner; you left its room",
            Removal::Deleted => "the session was deleted; you left its room",
        };
        self.socket.emit(
            "assistant:error",
            json!({"type": ErrorType::Forbidden, "message": message, "session_id": session_id.as_str()}),
        );
    }
}

pub struct AssistantNamespace {
    runtime: Runtime,
    metrics: Arc<Metrics>,
    access: Arc<Access>,
    limits: Arc<Limits>,
}

impl AssistantNamespace {
    pub fn new(
        runtime: Runtime,
        metrics: Arc<Metrics>,
        access: Arc<Access>,
        limits: Arc<Limits>,
    ) -> AssistantNamespace {
        AssistantNamespace {
            runtime,
            metrics,
            access,
            limits,
        }
    }
}

/// What every handler of one client event needs.
struct EventContext {
    runtime: Runtime,
    metrics: Arc<Metrics>,
    limits: Arc<Limits>,
    caller: Caller,
    member_id: MemberId,
    socket: SocketRef,
    ack: Option<AckSender>,
    request_id: RequestId,
}

impl NamespaceHandler for AssistantNamespace {
    /// A refused client gets CONNECT_ERROR `{"message", "type":
    /// "unauthorized"}` and no socket.
    fn on_connect(&self, socket: SocketRef, auth: Option<Value>) -> Result<(), Value> {
        let caller = self
            .access
            .socket_caller(|name| socket.handshake_header(name).cloned(), auth.as_ref())
            .map_err(
                |why| json!({"message": format!("unauthorized: {why}"), "type": ErrorType::Unauthorized}),
            )?;
        socket.set_data(SocketState {
            caller,
            member_id: MemberId::next(),
            joined: Mutex::new(Vec::new()),
        });
        self.metrics.socket_connected();
        Ok(())
    }

    fn on_disconnect(&self, socket: SocketRef, _reason: DisconnectReason) {
        if let Some(state) = socket.data::<SocketState>() {
            let joined = std::mem::take(&mut *lock(&state.joined));
            for session_id in joined {
                self.runtime.rooms().leave(&session_id, state.member_id);
            }
        }
        self.metrics.socket_disconnected();
    }

    fn on_event(&self, socket: SocketRef, event: String, args: Vec<Value>, ack: Option<AckSender>) {
        let payload = args.into_iter().next().unwrap_or(Value::Null);
        let request_id = RequestId::generate();
        log::info!(
            "socket {} {event} session={} request_id={request_id}",
            socket.id(),
            sent_session_id(&payload).unwrap_or("-"),
        );
        // on_connect always attaches a caller; a socket without one is refused.
        let Some(state) = socket.data::<SocketState>() else {
            let error = SessionError::Forbidden("the connection is not authenticated".into());
            return reply_error(&socket, ack, &error);
        };
        let context = EventContext {
            runtime: self.runtime.clone(),
            metrics: self.metrics.clone(),
            limits: self.limits.clone(),
            caller: state.caller.clone(),
            member_id: state.member_id,
            socket,
            ack,
            request_id,
        };
        match event.as_str() {
            "assistant_message" => {
                actix::spawn(send_message(context, payload));
            }
            "assistant_join_session" => {
                actix::spawn(join(context, payload));
            }
            "assistant_cancel" => {
                actix::spawn(cancel(context, payload));
            }
            "assistant_leave_session" => leave(context, payload),
            other => {
                let error = SessionError::validation("event", format!("unknown event {other:?}"));
                context.reply_error(&error, None);
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

/// `assistant:error` (and the ack) for an event refused before it has an
/// `EventContext`: no caller, or nested too deep to parse.
fn reply_error(socket: &SocketRef, ack: Option<AckSender>, error: &SessionError) {
    let payload = socket_error(error);
    socket.emit("assistant:error", payload.clone());
    if let Some(ack) = ack {
        ack.send(vec![json!({"ok": false, "error": payload})]);
    }
}

impl EventContext {
    /// `payload` with this request's id added (object payloads only).
    fn tagged(&self, mut payload: Value) -> Value {
        if let Value::Object(fields) = &mut payload {
            fields.insert("request_id".into(), json!(self.request_id.as_str()));
        }
        payload
    }

    /// Status and error events carry the request id; the turn's content
    /// events keep the shapes shared with HTTP and AG-UI.
    fn emit(&self, event: &str, payload: Value) {
        let payload = match event {
            "assistant:status" | "assistant:error" => self.tagged(payload),
            _ => payload,
        };
        self.socket.emit(event, payload);
    }

    /// Notes a room joined; past `MAX_ROOMS_PER_SOCKET`, the oldest is left.
    fn remember_room(&self, session_id: SessionId) {
        let Some(state) = self.socket.data::<SocketState>() else {
            return;
        };
        let left = {
            let mut joined = lock(&state.joined);
            joined.retain(|known| *known != session_id);
            joined.push(session_id);
            let n_over = joined.len().saturating_sub(MAX_ROOMS_PER_SOCKET);
            joined.drain(..n_over).collect::<Vec<_>>()
        };
        for session_id in left {
            self.runtime.rooms().leave(&session_id, self.member_id);
        }
    }

    fn ack(&mut self, payload: Value) {
        if let Some(ack) = self.ack.take() {
            ack.send(vec![self.tagged(payload)]);
        }
    }

    /// Emits `assistant:error` (and answers the ack) for a request error. It
    /// names the session whenever the request got far enough to say which one.
    fn reply_error(mut self, error: &SessionError, session_id: Option<&str>) {
        let mut payload = socket_error(error);
        if let (Some(session_id), Value::Object(fields)) = (session_id, &mut payload) {
            fields.insert("session_id".to_string(), json!(session_id));
        }
        self.emit("assistant:error", payload.clone());
        self.ack(json!({"ok": false, "error": payload}));
    }
}

/// The `session_id` a message said it was for, if it said one as a string:
/// the client's own words, echoed on a validation error so that a client with
/// several sessions on one socket can tell which one the error is about.
fn sent_session_id(payload: &Value) -> Option<&str> {
    ["session_id", "sessionId"]
        .iter()
        .find_map(|key| payload.get(*key).and_then(Value::as_str))
}

async fn send_message(mut context: EventContext, payload: Value) {
    let request = match ChatRequest::parse(&payload) {
        Ok(request) => request,
        Err(error) => return context.reply_error(&error.into(), sent_session_id(&payload)),
    };
    let session_id = request.session_id.to_string();
    let _live = match context.limits.admit(&context.caller, &request.session_id) {
        Ok(live) => live,
        Err(error) => return context.reply_error(&error, Some(&session_id)),
    };
    let (sink, mut events) = EventSink::new(true);
    let mut observer = TurnObserver::start(Transport::SocketIo);
    let accepted = match context
        .runtime
        .send_message_from(&context.caller, request, sink, Some(context.member_id))
        .await
    {
        Ok(accepted) => accepted,
        Err(error) => return context.reply_error(&error, Some(&session_id)),
    };
    context.ack(
        json!({"ok": true, "accepted_as": accepted.accepted_as, "message_id": accepted.message_id}),
    );
    // Relays until the turn says it is complete. A steering message's events
    // go to the live turn's sink, so its own channel closes at once.
    while let Some(event) = events.recv().await {
        observer.observe(&context.metrics, &event);
        if let TurnEvent::FinalResponse(final_response) = &event {
            turn_failure::log_if_failed(Some(&context.request_id), final_response);
        }
        let completed = event.is_completed_status();
        context.emit(
            &format!("assistant:{}", event.name()),
            event.payload_for(&session_id),
        );
        if completed {
            break;
        }
    }
}

async fn join(mut context: EventContext, payload: Value) {
    let join = match JoinRequest::parse(&payload) {
        Ok(join) => join,
        Err(error) => return context.reply_error(&error.into(), None),
    };
    let session_id = join.session_id.to_string();
    let member = Arc::new(SocketMember {
        socket: context.socket.clone(),
    });
    let joined = context
        .runtime
        .join_room(
            &context.caller,
            &join.session_id,
            join.host_context,
            context.member_id,
            member,
        )
        .await;
    match joined {
        // Disconnected while the actor decided: on_disconnect has run already.
        Ok(()) if !context.socket.connected() => {
            context
                .runtime
                .rooms()
                .leave(&join.session_id, context.member_id);
        }
        Ok(()) => {
            context.remember_room(join.session_id);
            context.ack(json!({"ok": true, "session_id": session_id}))
        }
        Err(error) => context.reply_error(&error, Some(&session_id)),
    }
}

/// `assistant_leave_session` `{session_id}`: out of the session's room (a
/// socket not in it is answered `ok` all the same).
fn leave(mut context: EventContext, payload: Value) {
    let leave = match CancelRequest::parse(&payload) {
        Ok(leave) => leave,
        Err(error) => return context.reply_error(&error.into(), None),
    };
    if let Some(state) = context.socket.data::<SocketState>() {
        lock(&state.joined).retain(|joined| *joined != leave.session_id);
    }
    context
        .runtime
        .rooms()
        .leave(&leave.session_id, context.member_id);
    context.ack(json!({"ok": true, "session_id": leave.session_id.as_str()}));
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Only list operations run under it; a poisoned one still holds a usable list.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

async fn cancel(mut context: EventContext, payload: Value) {
    let cancel = match CancelRequest::parse(&payload) {
        Ok(cancel) => cancel,
        Err(error) => return context.reply_error(&error.into(), None),
    };
    let session_id = cancel.session_id.to_string();
    match context
        .runtime
        .cancel(&context.caller, &cancel.session_id)
        .await
    {
        Ok(cancel_requested) => {
            context.ack(json!({"ok": true, "cancel_requested": cancel_requested}))
        }
        Err(error) => context.reply_error(&error, Some(&session_id)),
    }
}
