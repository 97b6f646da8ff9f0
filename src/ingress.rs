//! Other systems reach a session: a message handed in by another agent, a
//! bot, a scheduler (`POST /api/assistant/inject`, `POST /api/inbox`) or the
//! runtime's own heartbeat is delivered the way a person's steering would
//! be. Into the live turn when one is live (`"delivery": "queued"`),
//! otherwise as a turn of its own run in the background (`"promoted"`),
//! whose events go to the session's room. With no session to go to, it
//! waits in the inbox (`actors::store::inbox`) and is drained into the next
//! turn that starts.

use std::time::Duration;

use actors::contract::{ChatRequest, MessageType, OutputMode};
use actors::conversation::now_millis;
use actors::events::EventSink;
use actors::ids::{MessageId, SessionId};
use actors::session::{AcceptedAs, Caller, Runtime, SessionError};
use actors::store::inbox::{envelope, InboxItem, InboxRefusal, Severity};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::observability::RequestId;
use crate::settings::HeartbeatSettings;

/// The longest `from` and `via` (an agent's or a channel's name).
pub const MAX_NAME_CHARS: usize = 128;
/// The longest message text.
pub const MAX_MESSAGE_CHARS: usize = 32_000;
/// The most bytes of an inbox item's `context`, as compact JSON.
pub const MAX_CONTEXT_BYTES: usize = 16 * 1024;

/// One message from another system.
#[derive(Clone, Debug)]
pub struct Note {
    pub from: String,
    pub via: String,
    pub message: String,
    pub severity: Severity,
    /// The session named; `None`: the most recently active one.
    pub session_id: Option<SessionId>,
    /// An inbox post's own context, kept with the item.
    pub context: Option<Map<String, Value>>,
}

/// What happened to a note: the original's answer shapes.
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Delivery {
    /// Into a session: `delivery` is `queued` (steering into its live turn)
    /// or `promoted` (a turn of its own).
    Delivered {
        session_id: String,
        delivery: &'static str,
    },
    /// Into the inbox: no session to go to (or the named one cannot take
    /// steering now), drained into the next turn that starts.
    Queued {
        inbox_id: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        session_id: Option<String>,
    },
    /// The heartbeat's answer when there is no session: never queued.
    Skipped { reason: &'static str },
}

/// Delivers `note` as `caller` into its session, the most recently active
/// one, or else the inbox (`queue_when_unrouted`; the heartbeat does not).
/// `owned` is the per-owner door: the session must exist and be the
/// caller's (403 otherwise), and nothing is queued for later.
pub async fn deliver(
    runtime: &Runtime,
    caller: &Caller,
    note: Note,
    queue_when_unrouted: bool,
) -> Result<Delivery, SessionError> {
    let target = match &note.session_id {
        Some(id) => match runtime.session(caller, id).await {
            Ok(_) => Some(id.clone()),
            Err(SessionError::NotFound(_)) => None,
            Err(error) => return Err(error),
        },
        None => runtime.deps().store.most_recent().await?,
    };
    let Some(target) = target else {
        if !queue_when_unrouted {
            return Ok(Delivery::Skipped {
                reason: "no_active_session",
            });
        }
        return queue(runtime, note).await;
    };
    match steer(runtime, caller, &target, &note).await {
        Ok(delivery) => Ok(Delivery::Delivered {
            session_id: target.to_string(),
            delivery,
        }),
        // The session cannot take steering now (no conversation yet, a
        // silent decision live, its steering queue full): it waits for the
        // session's next turn.
        Err(SessionError::Conflict(why)) if queue_when_unrouted => {
            log::info!("ingress into session {target} queued: {why}");
            let note = Note {
                session_id: Some(target),
                ..note
            };
            queue(runtime, note).await
        }
        Err(error) => Err(error),
    }
}

/// Delivers into an existing session of the caller's own (the per-owner
/// door, `POST /api/sessions/{id}/inject`): steering or a turn of its own,
/// never the inbox. The session's actor checks the owner (403).
pub async fn deliver_owned(
    runtime: &Runtime,
    caller: &Caller,
    session: &SessionId,
    note: &Note,
) -> Result<Delivery, SessionError> {
    runtime.session(caller, session).await?;
    let delivery = steer(runtime, caller, session, note).await?;
    Ok(Delivery::Delivered {
        session_id: session.to_string(),
        delivery,
    })
}

/// Sends the note's envelope as steering: taken by the live turn
/// (`queued`), or a turn of its own (`promoted`) whose events reach the
/// session's room; this request reads none of them.
async fn steer(
    runtime: &Runtime,
    caller: &Caller,
    session: &SessionId,
    note: &Note,
) -> Result<&'static str, SessionError> {
    let request = ChatRequest {
        id: MessageId::new(format!("inject-{}", RequestId::generate().as_str())),
        session_id: session.clone(),
        content: envelope(&note.via, &note.from, &note.message),
        parent_id: None,
        message_type: MessageType::Steering,
        output_mode: OutputMode::Text,
        attachments: Vec::new(),
        host_context: None,
        config: Default::default(),
        continuation: None,
        idempotency: None,
    };
    // Nobody reads this sink: the turn's events go to the session's room.
    let (sink, _unread) = EventSink::final_only();
    let accepted = runtime.send_message(caller, request, sink).await?;
    Ok(match accepted.accepted_as {
        AcceptedAs::Steering => "queued",
        AcceptedAs::Turn => "promoted",
    })
}

async fn queue(runtime: &Runtime, note: Note) -> Result<Delivery, SessionError> {
    let mut context = note.context.unwrap_or_default();
    context.insert("via".into(), Value::String(note.via.clone()));
    context.insert("injected".into(), Value::Bool(true));
    if let Some(id) = &note.session_id {
        context.insert("session_id".into(), Value::String(id.to_string()));
    }
    let item = InboxItem {
        id: RequestId::generate().as_str().to_string(),
        from_agent: note.from,
        via: note.via,
        message: note.message,
        severity: note.severity,
        context: Some(Value::Object(context)),
        session_id: note.session_id.clone(),
        surfaced: false,
        created_at: now_millis(),
    };
    match runtime.deps().inbox.add(item).await {
        Ok(inbox_id) => Ok(Delivery::Queued {
            inbox_id,
            session_id: note.session_id.map(|id| id.to_string()),
        }),
        Err(InboxRefusal::Full(why)) => Err(SessionError::TooLarge(why)),
        Err(InboxRefusal::Store(error)) => Err(error.into()),
    }
}

/// A shorter interval, for the heartbeat's test only: read in debug builds
/// only, never from the settings (a release binary ignores it).
const TEST_INTERVAL_VARIABLE: &str = "ASSISTANT_RUNTIME_TEST_HEARTBEAT_MS";

/// The interval the heartbeat runs at: the setting's, or in a debug build
/// the test override's.
fn effective_interval(settings: &HeartbeatSettings) -> Duration {
    if cfg!(debug_assertions) {
        if let Some(ms) = std::env::var(TEST_INTERVAL_VARIABLE)
            .ok()
            .and_then(|text| text.parse::<u64>().ok())
        {
            return Duration::from_millis(ms.max(1));
        }
    }
    settings.interval
}

/// Starts the heartbeat when enabled: after each interval, the check-in
/// message goes to the most recently active session as the local operator
/// (never into the inbox: a check-in is only meaningful now). Call from
/// inside the actix system.
pub fn start_heartbeat(runtime: Runtime, settings: &HeartbeatSettings) {
    if !settings.enabled {
        return;
    }
    let interval = effective_interval(settings);
    let settings = settings.clone();
    log::info!("heartbeat every {interval:?}");
    actix::spawn(async move {
        loop {
            tokio::time::sleep(interval).await;
            let note = Note {
                from: settings.from.clone(),
                via: "heartbeat".into(),
                message: settings.message.clone(),
                severity: Severity::Info,
                session_id: None,
                context: None,
            };
            match deliver(&runtime, &Caller::operator(), note, false).await {
                Ok(delivery) => log::debug!("heartbeat: {delivery:?}"),
                Err(error) => log::warn!("heartbeat failed: {error}"),
            }
        }
    });
}
