//! The `Runtime` handle: what every transport calls. One async method per
//! request, one message to the session's actor (found by the registry).

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::actor::{Ask, ReplyTo, Request};
use super::caller::Caller;
use super::deps::SessionDeps;
use super::error::{SessionError, SessionResult};
use super::registry::SessionRegistry;
use super::requests::*;
use super::rooms::{MemberId, Removal, RoomMember, Rooms, MAX_MEMBERS_PER_ROOM};
use crate::contract::{ChatRequest, HostContext};
use crate::conversation::Message as StoredMessage;
use crate::events::EventSink;
use crate::ids::{MessageId, SessionId};
use crate::store::{SessionSummary, StoreError, StoredTrace};
use crate::tools::ToolRegistry;

/// Fresh actors a message may be handed to when each one stopped before
/// handling it. Safe: an unhandled message had no effect.
const MAX_SEND_ATTEMPTS: usize = 5;

/// Makes a request around its reply end, once per attempt.
trait Make<T>: FnOnce(ReplyTo<T>) -> Request + Clone + Send + 'static {}
impl<T, F: FnOnce(ReplyTo<T>) -> Request + Clone + Send + 'static> Make<T> for F {}

/// How often idle actors are asked to stop, at most.
const IDLE_SWEEP_PERIOD: Duration = Duration::from_secs(5);

#[derive(Clone, Debug, Serialize)]
pub struct RuntimeHealth {
    pub healthy: bool,
    pub store: &'static str,
    pub store_reachable: bool,
    pub store_problem: Option<String>,
    pub default_model: String,
    pub model_usable: bool,
    pub model_problem: Option<String>,
    pub live_sessions: usize,
}

#[derive(Clone)]
pub struct Runtime {
    registry: Arc<SessionRegistry>,
    deps: Arc<SessionDeps>,
    rooms: Arc<Rooms>,
}

impl Runtime {
    pub fn new(deps: SessionDeps) -> Runtime {
        Runtime {
            registry: Arc::new(SessionRegistry::default()),
            deps: Arc::new(deps),
            rooms: Arc::new(Rooms::default()),
        }
    }

    /// One task for all sessions, not a timer per actor. Call from inside
    /// the actix system.
    pub fn start_idle_sweeper(&self) {
        let registry = Arc::downgrade(&self.registry);
        let idle_timeout = self.deps.config.idle_timeout;
        let period = IDLE_SWEEP_PERIOD.min(idle_timeout.max(Duration::from_millis(200)));
        actix::spawn(async move {
            let mut ticks = tokio::time::interval(period);
            loop {
                ticks.tick().await;
                let Some(registry) = registry.upgrade() else {
                    return;
                };
                for addr in registry.due_for_idle_check(Instant::now()) {
                    addr.do_send(CheckIdle);
                }
            }
        });
    }

    /// Whether a session's actor is in memory, for a store that must not
    /// evict live sessions.
    pub fn liveness(&self) -> impl Fn(&SessionId) -> bool + Send + Sync + 'static {
        let registry = Arc::downgrade(&self.registry);
        move |id| {
            registry
                .upgrade()
                .is_some_and(|registry| registry.get(id).is_some())
        }
    }

    pub fn deps(&self) -> &SessionDeps {
        &self.deps
    }

    pub fn rooms(&self) -> &Arc<Rooms> {
        &self.rooms
    }

    /// An actor that stopped between lookup and send is replaced.
    async fn ask<T: Send + 'static>(
        &self,
        caller: &Caller,
        id: &SessionId,
        make: impl Make<T>,
    ) -> SessionResult<T> {
        for _attempt in 0..MAX_SEND_ATTEMPTS {
            let ask = Ask::new(caller, make.clone());
            let (request, sent_to) = self.registry.send(id, &self.deps, ask);
            match request.await {
                Ok(answer) => return answer,
                Err(_closed_or_timeout) => self.registry.forget(id, &sent_to),
            }
        }
        Err(self.why_unavailable("session actor unavailable").await)
    }

    /// `ask` about a session that must exist: if its actor kept stopping (a
    /// read of an unknown id stops it), the store decides between absent
    /// (as the actor answers it) and 503.
    async fn ask_existing<T: Send + 'static>(
        &self,
        caller: &Caller,
        id: &SessionId,
        make: impl Make<T>,
    ) -> SessionResult<T> {
        match self.ask(caller, id, make).await {
            Err(SessionError::ActorUnavailable(cause)) => match self.deps.store.load(id).await {
                Ok(None) if caller.admin => Err(SessionError::NotFound(id.to_string())),
                Ok(None) => Err(SessionError::forbidden(id)),
                _ => Err(SessionError::ActorUnavailable(cause)),
            },
            other => other,
        }
    }

    /// Most often the actor's load from an unreachable store failed.
    async fn why_unavailable(&self, cause: &str) -> SessionError {
        match self.deps.store.ping().await {
            Err(error) => error.into(),
            Ok(()) => SessionError::ActorUnavailable(cause.into()),
        }
    }

    /// Hands a message body to its session; its turn's events go to `sink`
    /// and to every member of the session's room.
    pub fn send_message<'a>(
        &'a self,
        caller: &'a Caller,
        request: impl Into<Box<ChatRequest>>,
        sink: EventSink,
    ) -> impl Future<Output = Result<TurnAccepted, SessionError>> + Send + 'a {
        self.send_message_from(caller, request, sink, None)
    }

    /// `send_message` from a room's member, which reads its own turn from
    /// `sink` and so is skipped in the room's fan-out. The body goes into its
    /// slot first: the future holds a pointer to it, not its 760 bytes.
    pub fn send_message_from<'a>(
        &'a self,
        caller: &'a Caller,
        request: impl Into<Box<ChatRequest>>,
        sink: EventSink,
        from: Option<MemberId>,
    ) -> impl Future<Output = Result<TurnAccepted, SessionError>> + Send + 'a {
        let request = request.into();
        let id = request.session_id.clone();
        let sink = sink.with_tap(self.rooms.tap(&id, from));
        let budget = &self.deps.config.attachment_budget;
        // The lease is held by the turn's sink, given back when the turn is over.
        let slot = match budget.lease(&id, &request.attachments) {
            Ok(lease) => {
                let sink = match lease {
                    Some(lease) => sink.with_lease(lease),
                    None => sink,
                };
                let body = Some((request, sink));
                Ok(MessageSlot::new(std::sync::Mutex::new(body)))
            }
            Err(error) => Err(error),
        };
        async move { self.hand_over(caller, &id, slot?).await }
    }

    /// Sends the slotted message to the session's actor. A mailbox error with
    /// the body still in its slot means the actor stopped before handling it
    /// (idle, or a read of a new session stopped it): it goes to a fresh one.
    async fn hand_over(
        &self,
        caller: &Caller,
        id: &SessionId,
        slot: MessageSlot,
    ) -> Result<TurnAccepted, SessionError> {
        for _attempt in 0..MAX_SEND_ATTEMPTS {
            let message = SendMessage {
                slot: slot.clone(),
                caller: caller.clone(),
            };
            let (request, sent_to) = self.registry.send(id, &self.deps, message);
            match request.await {
                Ok(result) => return result,
                Err(_) => self.registry.forget(id, &sent_to),
            }
            if !slot.lock().is_ok_and(|slot| slot.is_some()) {
                break;
            }
        }
        Err(self
            .why_unavailable("the session was restarting; send the message again")
            .await)
    }

    pub async fn join(
        &self,
        caller: &Caller,
        id: &SessionId,
        host_context: Option<HostContext>,
    ) -> SessionResult<()> {
        let join = move |reply| Request::Join(host_context.map(Box::new), reply);
        self.ask(caller, id, join).await
    }

    /// `join`, then seats `member` in the session's room from the next event
    /// on (`messages` reads what it missed). Refused like `join`, or when full.
    pub async fn join_room(
        &self,
        caller: &Caller,
        id: &SessionId,
        host_context: Option<HostContext>,
        member_id: MemberId,
        member: Arc<dyn RoomMember>,
    ) -> SessionResult<()> {
        self.join(caller, id, host_context).await?;
        match self.rooms.join(id, member_id, caller.clone(), member) {
            true => Ok(()),
            false => Err(SessionError::validation(
                "session_id",
                format!("the session's room is full ({MAX_MEMBERS_PER_ROOM} members)"),
            )),
        }
    }

    pub async fn cancel(&self, caller: &Caller, id: &SessionId) -> SessionResult<bool> {
        // No actor, no live turn: an admin is told so; anyone else is checked by
        // a fresh actor, as is anyone whose actor stopped before reading this.
        if let Some(addr) = self.registry.get(id) {
            if let Ok(answer) = addr.send(Ask::new(caller, Request::Cancel)).await {
                return answer;
            }
        } else if caller.admin {
            return Ok(false);
        }
        self.ask(caller, id, Request::Cancel).await
    }

    pub async fn session(&self, caller: &Caller, id: &SessionId) -> SessionResult<SessionInfo> {
        self.ask_existing(caller, id, Request::Info).await
    }

    pub async fn messages(
        &self,
        caller: &Caller,
        id: &SessionId,
        leaf_id: Option<MessageId>,
    ) -> SessionResult<Vec<StoredMessage>> {
        let path = move |reply| Request::Path(leaf_id, reply);
        self.ask_existing(caller, id, path).await
    }

    pub async fn tree(&self, caller: &Caller, id: &SessionId) -> SessionResult<Vec<StoredMessage>> {
        self.ask_existing(caller, id, Request::Tree).await
    }

    /// Oldest first, to whoever may read the session.
    pub async fn traces(
        &self,
        caller: &Caller,
        id: &SessionId,
        limit: u32,
        offset: u32,
    ) -> Result<Vec<Arc<StoredTrace>>, SessionError> {
        self.session(caller, id).await?;
        Ok(self.deps.store.traces(id, limit, offset).await?)
    }

    pub async fn repair(&self, caller: &Caller, id: &SessionId) -> SessionResult<SessionInfo> {
        self.ask_existing(caller, id, Request::Repair).await
    }

    /// Through the actor; a session its actor cannot load (e.g. nested too
    /// deep, from before the depth limit) is deleted in the store directly by
    /// an admin (its owner cannot be read), so none is beyond removal.
    pub async fn delete(&self, caller: &Caller, id: &SessionId) -> SessionResult<bool> {
        let deleted = match self.ask_existing(caller, id, Request::Delete).await {
            Err(
                cause @ (SessionError::Internal(_)
                | SessionError::Store(StoreError::Failed(_))
                | SessionError::ActorUnavailable(_)),
            ) if caller.admin => {
                log::warn!("session {id}: deleting in the store directly ({cause})");
                if let Some(addr) = self.registry.get(id) {
                    self.registry.remove(id, &addr);
                }
                self.deps.store.delete(id).await.map_err(SessionError::from)
            }
            other => other,
        };
        if let Ok(true) = deleted {
            self.rooms.evict(id, |_| false, Removal::Deleted);
        }
        deleted
    }

    /// Admins only; `None`: the admins'. Room members the session is now
    /// closed to are put out and told.
    pub async fn set_owner(
        &self,
        caller: &Caller,
        id: &SessionId,
        owner_id: Option<Arc<str>>,
    ) -> SessionResult<()> {
        if !caller.admin {
            return Err(SessionError::forbidden(id));
        }
        let owner = owner_id.clone();
        let set_owner = move |reply| Request::Owner(owner, reply);
        self.ask_existing(caller, id, set_owner).await?;
        self.rooms.evict(
            id,
            |member| member.may_touch(owner_id.as_deref()),
            Removal::OwnerChanged,
        );
        Ok(())
    }

    /// A page of the sessions `caller` may see: an admin's are all of them.
    pub async fn list(
        &self,
        caller: &Caller,
        limit: u32,
        offset: u32,
    ) -> SessionResult<Vec<SessionSummary>> {
        let (store, filter) = (&self.deps.store, caller.list_filter());
        Ok(store.list(filter, limit, offset).await?)
    }

    pub async fn health(&self) -> RuntimeHealth {
        let unreachable = self.deps.store.ping().await.err();
        let store_problem = unreachable.map(|error| match error.remedy() {
            Some(remedy) => format!("{}: {remedy}", super::DATABASE_UNREACHABLE),
            None => super::DATABASE_UNREACHABLE.to_string(),
        });
        let store_reachable = store_problem.is_none();
        let (deps, default_model) = (&self.deps, &self.deps.config.default_model);
        let model_problem = deps.models.client_for(default_model).err();
        let model_usable = model_problem.is_none();
        RuntimeHealth {
            healthy: store_reachable && model_usable,
            store: deps.store.kind(),
            store_reachable,
            store_problem,
            default_model: default_model.to_string(),
            model_usable,
            model_problem,
            live_sessions: self.registry.n_live(),
        }
    }

    pub fn tools(&self) -> &ToolRegistry {
        &self.deps.tools
    }
}
