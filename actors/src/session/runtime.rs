//! The `Runtime` handle: what every transport calls. One async method per
//! request; it finds the session actor through the registry, sends it one
//! message, and turns a dead mailbox into `SessionError::ActorUnavailable`.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::{Addr, Handler, MailboxError};
use serde::Serialize;

use super::actor::{ask, SessionActor};
use super::caller::Caller;
use super::deps::SessionDeps;
use super::error::SessionError;
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
/// handling it (reads of a not-yet-existing session stop their actor, and a
/// burst of them can race a first message more than once). Safe to repeat:
/// an unhandled message had no effect.
const MAX_SEND_ATTEMPTS: usize = 5;

/// How often idle actors are asked to stop, at most.
const IDLE_SWEEP_PERIOD: Duration = Duration::from_secs(5);

#[derive(Clone, Debug, Serialize)]
pub struct RuntimeHealth {
    pub healthy: bool,
    pub store: &'static str,
    pub store_reachable: bool,
    /// Why the store cannot be used, with the fix when one is known.
    pub store_problem: Option<String>,
    pub default_model: String,
    pub model_usable: bool,
    /// Why the default model cannot be used, when it cannot.
    pub model_problem: Option<String>,
    pub live_sessions: usize,
}

#[derive(Clone)]
pub struct Runtime {
    registry: Arc<SessionRegistry>,
    deps: Arc<SessionDeps>,
    /// Who follows each session's turns besides the requester (`rooms`).
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

    /// Starts the task that asks idle actors to stop (one task for all
    /// sessions, instead of a timer per actor). Call from inside the actix system.
    pub fn start_idle_sweeper(&self) {
        let registry = Arc::downgrade(&self.registry);
        let period = IDLE_SWEEP_PERIOD.min(
            self.deps
                .config
                .idle_timeout
                .max(Duration::from_millis(200)),
        );
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

    /// Whether a session's actor is in memory now, for a store that must not
    /// evict live sessions. Holds the registry weakly.
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

    /// The sessions' rooms (`rooms`): members join through `join_room`.
    pub fn rooms(&self) -> &Arc<Rooms> {
        &self.rooms
    }

    /// Sends to the session's actor, starting it if needed. An actor that
    /// stopped between lookup and send (idle timeout) is replaced once.
    async fn ask<M>(&self, id: &SessionId, make: impl Fn() -> M) -> Result<M::Result, SessionError>
    where
        M: actix::Message + Send + 'static,
        M::Result: Send,
        SessionActor: Handler<M>,
    {
        for _attempt in 0..MAX_SEND_ATTEMPTS {
            let (request, sent_to) = self.registry.send(id, &self.deps, make());
            match request.await {
                Ok(result) => return Ok(result),
                Err(MailboxError::Closed) | Err(MailboxError::Timeout) => {
                    self.registry.forget(id, &sent_to)
                }
            }
        }
        Err(self.why_unavailable("session actor unavailable").await)
    }

    /// `ask` for a request about a session that must already exist: if its
    /// actor kept stopping (a read of an unknown id stops the actor it
    /// started, and a burst of such reads can race each other), the store
    /// decides between "absent" and 503. Absent is a 404 to an admin and a
    /// 403 to anyone else, as the actor answers it (the status never tells
    /// a non-admin whether an id exists).
    async fn ask_existing<M>(
        &self,
        caller: &Caller,
        id: &SessionId,
        make: impl Fn() -> M,
    ) -> Result<M::Result, SessionError>
    where
        M: actix::Message + Send + 'static,
        M::Result: Send,
        SessionActor: Handler<M>,
    {
        match self.ask(id, make).await {
            Err(SessionError::ActorUnavailable(cause)) => match self.deps.store.load(id).await {
                Ok(None) if caller.admin => Err(SessionError::NotFound(id.to_string())),
                Ok(None) => Err(SessionError::forbidden(id)),
                _ => Err(SessionError::ActorUnavailable(cause)),
            },
            other => other,
        }
    }

    /// Why a session's actor could not take a request: most often it stopped
    /// because loading from an unreachable store failed, which the host should
    /// see as the database error it is.
    async fn why_unavailable(&self, cause: &str) -> SessionError {
        match self.deps.store.ping().await {
            Err(error) => error.into(),
            Ok(()) => SessionError::ActorUnavailable(cause.into()),
        }
    }

    fn live(&self, id: &SessionId) -> Option<Addr<SessionActor>> {
        self.registry.get(id)
    }

    /// Hands a message body to its session; its turn's events go to `sink`
    /// and to every member of the session's room.
    pub fn send_message<'a>(
        &'a self,
        caller: &'a Caller,
        request: ChatRequest,
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
        request: ChatRequest,
        sink: EventSink,
        from: Option<MemberId>,
    ) -> impl Future<Output = Result<TurnAccepted, SessionError>> + Send + 'a {
        let id = request.session_id.clone();
        let sink = sink.with_tap(self.rooms.tap(&id, from));
        let budget = &self.deps.config.attachment_budget;
        // The lease is held by the turn's sink, given back when the turn is over.
        // (A match, not `map`: a closure would copy the body once more.)
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
    ) -> Result<(), SessionError> {
        self.ask(id, || ask::join(caller.clone(), host_context.clone()))
            .await?
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
    ) -> Result<(), SessionError> {
        self.join(caller, id, host_context).await?;
        match self.rooms.join(id, member_id, caller.clone(), member) {
            true => Ok(()),
            false => Err(SessionError::validation(
                "session_id",
                format!("the session's room is full ({MAX_MEMBERS_PER_ROOM} members)"),
            )),
        }
    }

    pub async fn cancel(&self, caller: &Caller, id: &SessionId) -> Result<bool, SessionError> {
        let cancel = || ask::cancel(caller.clone());
        // A live turn always has a live actor: for an admin, no actor means
        // nothing to cancel. Anyone else is checked against the stored owner.
        let Some(addr) = self.live(id) else {
            return match caller.admin {
                true => Ok(false),
                false => self.ask(id, cancel).await?,
            };
        };
        match addr.send(cancel()).await {
            Ok(answer) => answer,
            // The actor stopped before it read the request, so nobody checked
            // the caller: a fresh actor decides (and checks the owner).
            Err(_) => self.ask(id, cancel).await?,
        }
    }

    pub async fn session(
        &self,
        caller: &Caller,
        id: &SessionId,
    ) -> Result<SessionInfo, SessionError> {
        self.ask_existing(caller, id, || ask::info(caller.clone()))
            .await?
    }

    pub async fn messages(
        &self,
        caller: &Caller,
        id: &SessionId,
        leaf_id: Option<MessageId>,
    ) -> Result<Vec<StoredMessage>, SessionError> {
        self.ask_existing(caller, id, || ask::path(caller.clone(), leaf_id.clone()))
            .await?
    }

    pub async fn tree(
        &self,
        caller: &Caller,
        id: &SessionId,
    ) -> Result<Vec<StoredMessage>, SessionError> {
        self.ask_existing(caller, id, || ask::tree(caller.clone()))
            .await?
    }

    /// A page of the session's turn traces, oldest first, to whoever may
    /// read the session (checked by its actor, as `session` is).
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

    pub async fn repair(
        &self,
        caller: &Caller,
        id: &SessionId,
    ) -> Result<SessionInfo, SessionError> {
        self.ask_existing(caller, id, || ask::repair(caller.clone()))
            .await?
    }

    /// Deletes through the actor; a session its actor cannot load (stored
    /// data it cannot read back, e.g. nested deeper than serde_json decodes,
    /// written before the depth limit existed) is deleted in the store
    /// directly by an admin, so no stored session is ever beyond removal.
    /// (Its owner cannot be read, so nobody else may.)
    pub async fn delete(&self, caller: &Caller, id: &SessionId) -> Result<bool, SessionError> {
        let deleted = self.delete_session(caller, id).await;
        if let Ok(true) = deleted {
            self.rooms.evict(id, |_| false, Removal::Deleted);
        }
        deleted
    }

    async fn delete_session(&self, caller: &Caller, id: &SessionId) -> Result<bool, SessionError> {
        let delete = || ask::delete(caller.clone());
        match self.ask_existing(caller, id, delete).await {
            Ok(Err(
                cause @ (SessionError::Internal(_) | SessionError::Store(StoreError::Failed(_))),
            ))
            | Err(cause @ SessionError::ActorUnavailable(_))
                if caller.admin =>
            {
                log::warn!("session {id}: deleting in the store directly ({cause})");
                if let Some(addr) = self.live(id) {
                    self.registry.remove(id, &addr);
                }
                Ok(self.deps.store.delete(id).await?)
            }
            Ok(result) => result,
            Err(error) => Err(error),
        }
    }

    /// Hands the session to `owner_id` (none: admins only), through its
    /// actor and the store; admins only (403 for anyone else, 404 for an
    /// absent session). Room members the new owner's session is closed to
    /// are put out and told.
    pub async fn set_owner(
        &self,
        caller: &Caller,
        id: &SessionId,
        owner_id: Option<Arc<str>>,
    ) -> Result<(), SessionError> {
        if !caller.admin {
            return Err(SessionError::forbidden(id));
        }
        self.ask_existing(caller, id, || {
            ask::set_owner(caller.clone(), owner_id.clone())
        })
        .await??;
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
    ) -> Result<Vec<SessionSummary>, SessionError> {
        Ok(self
            .deps
            .store
            .list(caller.list_filter(), limit, offset)
            .await?)
    }

    pub async fn health(&self) -> RuntimeHealth {
        let store_problem = self.deps.store.ping().await.err().map(|error| {
            error
                .remedy()
                .map(|remedy| format!("{}: {remedy}", super::DATABASE_UNREACHABLE))
                .unwrap_or_else(|| super::DATABASE_UNREACHABLE.to_string())
        });
        let store_reachable = store_problem.is_none();
        let model_problem = self
            .deps
            .models
            .client_for(&self.deps.config.default_model)
            .err();
        let model_usable = model_problem.is_none();
        RuntimeHealth {
            healthy: store_reachable && model_usable,
            store: self.deps.store.kind(),
            store_reachable,
            store_problem,
            default_model: self.deps.config.default_model.to_string(),
            model_usable,
            model_problem,
            live_sessions: self.registry.n_live(),
        }
    }

    pub fn tools(&self) -> &ToolRegistry {
        &self.deps.tools
    }
}
