//! The session actor, the one owner of a session: a shell that carries out
//! the pure core's (`core.rs`) `Plan`s. Writes hold the mailbox (`ctx.wait`)
//! and their outcome is the next `Input`: memory changes after the store did.

mod accepting;
mod admin;
mod core;
mod idempotency;
mod idle;
mod inbox;
#[cfg(test)]
mod model_test;
mod rules;
mod screenshot;
#[cfg(test)]
mod test_support;
mod turns;

use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use futures_util::future::BoxFuture;
use futures_util::FutureExt;
use tokio::sync::oneshot;

use self::core::{decide, Chat, Input, Io, Life, Out, Plan, State};
pub(super) use self::core::{ReplyTo, Request};
use self::turns::{Start, TurnEnded};
use super::deps::SessionDeps;
use super::error::SessionError;
use super::grace::Grace;
use super::registry::{IdleCheck, SessionRegistry};
use super::requests::*;
use super::Caller;
use crate::ids::SessionId;
use crate::store::{StoreResult, WriteOutcome};
use crate::turn::{TurnInput, TurnLimits, TurnPlan};

/// How long an actor about to stop lingers, to answer what is queued.
const LINGER: Duration = Duration::from_millis(100);

pub struct SessionActor {
    state: State,
    registry: Arc<SessionRegistry>,
    last_activity: Instant,
    idle_check: Arc<IdleCheck>,
    grace: Option<Grace>,
}

impl SessionActor {
    pub fn new(
        id: SessionId,
        deps: Arc<SessionDeps>,
        registry: Arc<SessionRegistry>,
        idle_check: Arc<IdleCheck>,
    ) -> SessionActor {
        SessionActor {
            state: State::new(id, deps),
            registry,
            last_activity: Instant::now(),
            idle_check,
            grace: None,
        }
    }
}

impl Actor for SessionActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        self.perform(Io::Load(Box::new(core::InFlight::Nothing)), ctx);
    }

    fn stopped(&mut self, ctx: &mut Context<Self>) {
        self.registry.remove(&self.state.id, &ctx.address());
        // The memory store may compact the messages it kept as they were.
        self.state.deps.store.settle(&self.state.id);
    }
}

/// A request other than a message, made around its reply end.
pub struct Ask<T> {
    caller: Caller,
    request: Box<dyn FnOnce(ReplyTo<T>) -> Request + Send>,
}

impl<T> Ask<T> {
    pub(in crate::session) fn new(
        caller: &Caller,
        request: impl FnOnce(ReplyTo<T>) -> Request + Send + 'static,
    ) -> Ask<T> {
        let (caller, request) = (caller.clone(), Box::new(request));
        Ask { caller, request }
    }
}

impl<T: Send + 'static> actix::Message for Ask<T> {
    type Result = Result<T, SessionError>;
}

impl<T: Send + 'static> Handler<Ask<T>> for SessionActor {
    type Result = Response<Result<T, SessionError>>;

    fn handle(&mut self, ask: Ask<T>, ctx: &mut Context<Self>) -> Self::Result {
        let (reply, answered) = reply_channel();
        let request = (ask.request)(reply);
        if request.is_activity() {
            self.last_activity = Instant::now();
        }
        self.run(Input::Request(ask.caller, request), ctx);
        answered.response()
    }
}

impl Handler<SendMessage> for SessionActor {
    type Result = Response<Result<TurnAccepted, SessionError>>;

    fn handle(&mut self, message: SendMessage, ctx: &mut Context<Self>) -> Self::Result {
        self.last_activity = Instant::now();
        let taken = message.slot.lock().ok().and_then(|mut slot| slot.take());
        let Some((request, sink)) = taken else {
            let twice = SessionError::Internal("a message was delivered twice".into());
            return Response::reply(Err(twice));
        };
        let (reply, answered) = reply_channel();
        let caller = message.caller;
        self.run(
            Input::Chat(Box::new(Chat {
                request,
                sink,
                caller,
                reply,
            })),
            ctx,
        );
        answered.response()
    }
}

/// An input decided after the write that holds the mailbox.
#[derive(Message)]
#[rtype(result = "()")]
struct Later(Input);

impl Handler<Later> for SessionActor {
    type Result = ();

    fn handle(&mut self, later: Later, ctx: &mut Context<Self>) {
        self.run(later.0, ctx);
    }
}

impl SessionActor {
    fn run(&mut self, input: Input, ctx: &mut Context<Self>) {
        let plan = decide(&mut self.state, input);
        self.carry_out(plan, ctx);
    }

    fn carry_out(&mut self, mut plan: Plan, ctx: &mut Context<Self>) {
        for out in plan.out.drain(..) {
            match out {
                Out::Answer(answer) => answer.send(),
                Out::Event(sink, event) => sink.send(event),
            }
        }
        self.state.spare_out = plan.out;
        let (state, deps) = (&self.state, &self.state.deps);
        if let Some(end) = plan.trace {
            let (trace, outcome, error_type) = (*end.trace, end.outcome, end.error_type);
            crate::trace::finish(
                &deps.config.traces,
                &deps.store,
                &state.id,
                trace,
                outcome,
                error_type,
            );
        }
        if let (true, core::Phase::Running(live)) = (plan.cancel, &state.phase) {
            live.cancel.cancel();
        }
        if let Some(start) = plan.start {
            self.spawn_turn(start, ctx);
        }
        if let Some(io) = plan.io {
            self.perform(io, ctx);
        }
        if plan.run_waiting {
            self.run_after_write(Input::RunWaiting, ctx);
        }
        if let Some(life) = plan.life {
            self.live(life, ctx);
        }
    }

    /// Decides `input` now, or after the write holding the mailbox and what it
    /// goes on with (not `ctx.wait`: waits run newest first; two turns could start).
    fn run_after_write(&mut self, input: Input, ctx: &mut Context<Self>) {
        match ctx.waiting() {
            true => ctx.address().do_send(Later(input)),
            false => self.run(input, ctx),
        }
    }

    fn live(&mut self, life: Life, ctx: &mut Context<Self>) {
        match life {
            Life::Settled => self.hibernate_if_configured(ctx),
            Life::Stop => ctx.stop(),
            Life::StopIfAbsent => {
                // Not at once: a first message may be queued behind the read.
                ctx.run_later(LINGER, |actor, ctx| {
                    if actor.state.is_absent() && !ctx.waiting() {
                        ctx.stop();
                    }
                });
            }
            Life::LoadFailed => {
                // The next request starts an actor that tries the store again.
                self.registry.remove(&self.state.id, &ctx.address());
                ctx.run_later(LINGER, |_actor, ctx| ctx.stop());
            }
        }
    }

    /// Runs a store operation with the mailbox held; its outcome is the next input.
    fn perform(&mut self, io: Io, ctx: &mut Context<Self>) {
        let store = &self.state.deps.store;
        match io {
            Io::Write(writing) => {
                let write = &writing.write;
                // The inbox items its turn opens with leave the inbox in this
                // same write (`inbox.rs`); none is `save_messages`.
                let taken: Vec<String> = (write.taken.iter()).map(|item| item.id.clone()).collect();
                let messages = write.messages.as_deref();
                match store.write(write.version, &write.record, messages, &taken) {
                    WriteOutcome::Now(written) => self.run(Input::Written(written, writing), ctx),
                    WriteOutcome::Later(future) => {
                        self.then(future, ctx, move |written| Input::Written(written, writing))
                    }
                }
            }
            Io::Load(in_flight) => {
                let future = store.load(&self.state.id);
                self.then(future, ctx, move |loaded| Input::Loaded(loaded, in_flight));
            }
            Io::Delete(reply, existed) => {
                let future = store.delete(&self.state.id);
                self.then(future, ctx, move |deleted| {
                    Input::Deleted(deleted, reply, existed)
                });
            }
        }
    }

    /// Feeds the outcome of `future` back as an input; at once if it is
    /// ready (the memory store's), not boxed and scheduled for nothing.
    fn then<T: 'static>(
        &mut self,
        mut future: BoxFuture<'static, StoreResult<T>>,
        ctx: &mut Context<Self>,
        input: impl FnOnce(StoreResult<T>) -> Input + 'static,
    ) {
        if let Some(done) = (&mut future).now_or_never() {
            return self.run(input(done), ctx);
        }
        let future = future.into_actor(self);
        ctx.wait(future.map(move |done, actor, ctx| actor.run(input(done), ctx)));
    }

    /// Runs the turn beside the actor with its history jobs; its end is an input.
    fn spawn_turn(&mut self, start: Box<Start>, ctx: &mut Context<Self>) {
        let leaf = start.assistant.parent_id.as_ref();
        // The next turn extends this path rather than walking it again.
        self.state.tree.remember_path(leaf);
        let (state, deps, turn_id) = (&self.state, &self.state.deps, start.turn_id);
        let (request, assistant) = (start.request, start.assistant);
        let leaf = assistant.parent_id.as_ref();
        let (path, history) = crate::history::path_and_transcript(&state.tree, leaf);
        let context = crate::history::TurnContext {
            tree: &state.tree,
            path: &path,
            history: &history,
            system: &deps.config.system_prompt,
            turn_model: &start.model_id,
            silent: request.output_mode == crate::contract::OutputMode::HostTools,
            new_reply: assistant.segments.is_empty(),
        };
        let jobs = crate::history::plan_jobs(&deps.config.history, context, deps.models.as_ref());
        let plan = self.turn_plan(&request, start.model_id, start.model);
        let trace = (deps.config.traces).begin(&request, &plan.model_id, request.output_mode);
        let input = TurnInput {
            trace,
            plan,
            history,
            assistant,
            sink: start.sink,
            cancel: start.cancel,
            steering: start.steering,
        };
        // Ends in the actor's context (after a write that holds it). Boxed:
        // the future is kilobytes, and each adapter would move it. Its room
        // is allocated first, so the future is made in place: `Box::pin`
        // of a made future copies all of it.
        let turn = Box::write(
            Box::new_uninit(),
            crate::history::run_turn_with_history(jobs, input),
        );
        let turn = Box::into_pin(turn);
        let turn = turn.into_actor(self);
        ctx.spawn(turn.map(move |(output, history), actor, ctx| {
            let summary = history.summary.map(Arc::new);
            let ended = Input::TurnEnded(TurnEnded {
                turn_id,
                output,
                summary,
            });
            actor.run_after_write(ended, ctx);
        }));
    }

    fn turn_plan(
        &self,
        request: &crate::contract::ChatRequest,
        model_id: crate::model::ModelId,
        model: crate::model::SharedModelClient,
    ) -> TurnPlan {
        let (state, config) = (&self.state, &self.state.deps.config);
        let output_mode = request.output_mode;
        let context = state.current_context(request);
        let tools = (state.deps.tools).tool_set(context, state.screenshot.is_some(), output_mode);
        let asked = &request.config;
        let max_requests = config.max_turns.min(asked.max_turns.unwrap_or(u32::MAX));
        let thinking_budget =
            crate::turn::thinking_budget(asked.thinking_budget, config.thinking_budget);
        TurnPlan {
            model_id,
            model,
            system: config.system_prompt.clone(),
            tools,
            settings: crate::model::ModelSettings {
                temperature: asked.temperature,
                thinking_budget,
                max_output_tokens: None,
            },
            limits: TurnLimits {
                max_requests,
                budget: config.budget,
            },
            output_mode,
            invalidations: state.deps.invalidations.clone(),
            screenshot: state.screenshot.clone(),
            tool_context: state.deps.tools.tool_context(state.id.as_str()),
        }
    }
}

/// The reply end a request's decision answers and its other end. A reply
/// dropped unanswered means the actor stopped first: nothing was decided,
/// so the caller may send again.
fn reply_channel<T: Send + 'static>() -> (ReplyTo<T>, Answered<T>) {
    let (reply, receiver) = oneshot::channel();
    (reply, Answered(receiver))
}

struct Answered<T>(oneshot::Receiver<Result<T, SessionError>>);

impl<T: Send + 'static> Answered<T> {
    /// The handler's reply: the answer itself when the decision gave it at
    /// once (a read; a message against the memory store), so actix sends it
    /// without spawning a task to carry it, and the caller is woken once,
    /// with its turn's end, rather than polled again first.
    fn response(mut self) -> Response<Result<T, SessionError>> {
        let stopped = || Err(SessionError::ActorUnavailable("session stopped".into()));
        match self.0.try_recv() {
            Ok(answer) => Response::reply(answer),
            Err(oneshot::error::TryRecvError::Closed) => Response::reply(stopped()),
            Err(oneshot::error::TryRecvError::Empty) => {
                Response::fut(async move { self.0.await.unwrap_or_else(|_| stopped()) })
            }
        }
    }
}
