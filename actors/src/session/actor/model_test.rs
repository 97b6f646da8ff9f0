//! A model-based test of the session protocol. Random histories of requests
//! (messages, continuations right, duplicate, late, queued and mismatched,
//! successful or failed; batches of host calls; steering; cancel; repair;
//! delete; join; a restart of a process; a third writer that makes every
//! resident copy stale) run against two processes (two `Runtime`s) over one
//! versioned memory store. A reference model of the contract's rules says
//! what each request must be answered, and after every step the store is
//! checked against it:
//!
//! - at most one call is pending, and it is the model's, with the model's
//!   queue in order (queued calls are handed over in order);
//! - no result is applied twice (the stored output is the first accepted one);
//! - every acknowledged message and accepted result is on the stored path;
//! - each 409 of a continuation names the right status;
//! - a deleted session stays deleted (a late turn never brings it back).
//!
//! proptest shrinks a failing history to a minimal one. `cargo test` runs
//! `MODEL_CASES` histories (default 48); the long run is
//! `MODEL_CASES=10000 cargo test -p assistant-actors --release model_histories`.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::{stream, StreamExt};
use proptest::prelude::*;
use serde_json::{json, Value};
use tokio::sync::Notify;

use crate::budget::AttachmentBudget;
use crate::contract::ChatRequest;
use crate::events::{EventSink, EventStream, TurnEvent, TurnStatus};
use crate::history::HistoryConfig;
use crate::ids::SessionId;
use crate::model::catalog::ModelCatalog;
use crate::model::{
    ModelClient, ModelEvent, ModelId, ModelRequest, ModelStream, SharedModelClient,
};
use crate::prompt::profile::Profile;
use crate::prompt::system::system_prompt;
use crate::session::{AcceptedAs, Caller, Runtime, SessionConfig, SessionDeps, SessionError};
use crate::store::memory::MemoryStore;
use crate::store::{Store, Written};
use crate::tools::ToolRegistry;

/// How long a step may wait for an answer or a turn's end: past it, the
/// history fails as a hang.
const PATIENCE: Duration = Duration::from_secs(3);

const SESSION: &str = "s";

/// One step of a history. Steps are abstract: each is read against the
/// model's state when it runs (which call "the right one" is), so every
/// subsequence of a history is a history, and shrinking stays meaningful.
#[derive(Clone, Debug)]
pub(crate) enum Step {
    /// A new message to process `p`; its turn answers as `turn` says.
    Message {
        p: usize,
        turn: Turn,
    },
    /// Ends the live (held) turn with text.
    Release,
    /// A host's result, for the call `which` picks, to process `p`.
    Continue {
        p: usize,
        which: Which,
        failed: bool,
    },
    Steer {
        p: usize,
    },
    Cancel {
        p: usize,
    },
    Repair {
        p: usize,
    },
    Delete {
        p: usize,
    },
    Join {
        p: usize,
    },
    /// Process `p` restarts (its resident copy is gone; the next request loads).
    Restart {
        p: usize,
    },
    /// A third writer rewrites the session row as it is: every resident copy is stale.
    Touch,
}

#[derive(Clone, Copy, Debug)]
pub(crate) enum Turn {
    Text,
    /// This many host calls in one response: the first pending, the rest queued.
    Calls(usize),
    /// The model holds its answer until `Release`: the turn stays live.
    Held,
}

#[derive(Clone, Copy, Debug)]
pub(crate) enum Which {
    Right,
    Duplicate,
    Late,
    Queued,
    Mismatched,
}

fn step() -> impl Strategy<Value = Step> {
    let p = 0..2usize;
    let turn = prop_oneof![
        3 => Just(Turn::Text),
        3 => (1..4usize).prop_map(Turn::Calls),
        2 => Just(Turn::Held),
    ];
    let which = prop_oneof![
        4 => Just(Which::Right),
        1 => Just(Which::Duplicate),
        1 => Just(Which::Late),
        1 => Just(Which::Queued),
        1 => Just(Which::Mismatched),
    ];
    prop_oneof![
        6 => (p.clone(), turn).prop_map(|(p, turn)| Step::Message { p, turn }),
        2 => Just(Step::Release),
        8 => (p.clone(), which, proptest::bool::weighted(0.2))
            .prop_map(|(p, which, failed)| Step::Continue { p, which, failed }),
        2 => p.clone().prop_map(|p| Step::Steer { p }),
        1 => p.clone().prop_map(|p| Step::Cancel { p }),
        1 => p.clone().prop_map(|p| Step::Repair { p }),
        1 => p.clone().prop_map(|p| Step::Delete { p }),
        1 => p.clone().prop_map(|p| Step::Join { p }),
        1 => p.prop_map(|p| Step::Restart { p }),
        2 => Just(Step::Touch),
    ]
}

// ---- the model client ------------------------------------------------------

/// What the next model request answers.
enum Answer {
    Calls(Vec<String>),
    Held(Arc<Notify>),
}

/// Answers each request from a queue of planned answers, text past its end
/// (a resumed turn, a turn taking steering).
#[derive(Default)]
struct PlannedModel {
    next: Mutex<VecDeque<Answer>>,
}

impl PlannedModel {
    fn plan(&self, answer: Answer) {
        if let Ok(mut next) = self.next.lock() {
            next.push_back(answer);
        }
    }
}

impl ModelClient for PlannedModel {
    fn stream(&self, _request: ModelRequest) -> ModelStream {
        let answer = self.next.lock().ok().and_then(|mut next| next.pop_front());
        match answer {
            None => stream::iter([Ok(ModelEvent::TextDelta("ok".into()))]).boxed(),
            Some(Answer::Calls(ids)) => stream::iter(ids.into_iter().map(|id| {
                Ok(ModelEvent::ToolCall {
                    id,
                    name: "select_issue".into(),
                    arguments: "{}".into(),
                })
            }))
            .boxed(),
            Some(Answer::Held(gate)) => stream::once(async move {
                gate.notified().await;
                Ok(ModelEvent::TextDelta("late".into()))
            })
            .boxed(),
        }
    }
}

struct OneModel(SharedModelClient);

impl ModelCatalog for OneModel {
    fn client_for(&self, _id: &ModelId) -> Result<SharedModelClient, String> {
        Ok(self.0.clone())
    }
}

fn process(store: &Arc<MemoryStore>, model: &Arc<PlannedModel>) -> Runtime {
    Runtime::new(SessionDeps {
        inbox: Arc::new(crate::store::Inbox::new(
            store.clone(),
            crate::store::InboxBounds::default(),
        )),
        store: store.clone(),
        models: Arc::new(OneModel(model.clone())),
        tools: ToolRegistry::default(),
        invalidations: Arc::new(HashMap::new()),
        config: SessionConfig {
            default_model: ModelId::new("test", "planned"),
            system_prompt: system_prompt(None).into(),
            profile: Profile::builtin(),
            max_turns: 10,
            thinking_budget: None,
            budget: Default::default(),
            idle_timeout: Duration::from_secs(600),
            history: HistoryConfig::default(),
            request_models: Vec::new(),
            attachment_budget: AttachmentBudget::new(64 << 20, 1 << 30),
            traces: Default::default(),
        },
    })
}

// ---- the reference model ---------------------------------------------------

#[derive(Clone, Debug, PartialEq)]
enum Call {
    Pending,
    Queued,
    /// Answered, with the payload number and the status word it reports.
    Answered(u64, &'static str),
    Superseded,
    Unknown,
}

/// The turn held at the model, and the process running it.
struct Held {
    p: usize,
    gate: Arc<Notify>,
    events: EventStream,
}

#[derive(Default)]
struct Model {
    exists: bool,
    /// Messages acknowledged as a turn, in this life of the session.
    acked: Vec<String>,
    /// The pending call, then the queued ones in order.
    pending: VecDeque<String>,
    calls: HashMap<String, Call>,
    /// Every call id ever made, in order (for a late call after a delete).
    made: Vec<String>,
}

impl Model {
    fn supersede_pending(&mut self) {
        for id in self.pending.drain(..) {
            self.calls.insert(id, Call::Superseded);
        }
    }

    fn delete(&mut self) {
        *self = Model {
            made: std::mem::take(&mut self.made),
            ..Model::default()
        };
    }

    /// The call a continuation of kind `which` is for.
    fn pick(&self, which: Which, k: u64) -> String {
        let find = |wanted: &dyn Fn(&Call) -> bool| {
            self.made
                .iter()
                .rev()
                .find(|id| self.calls.get(*id).is_some_and(wanted))
                .cloned()
        };
        let picked = match which {
            Which::Right => self.pending.front().cloned(),
            Which::Queued => self.pending.get(1).cloned(),
            Which::Duplicate => find(&|call| matches!(call, Call::Answered(..))),
            Which::Late => find(&|call| matches!(call, Call::Superseded | Call::Unknown))
                .or_else(|| self.made.last().cloned()),
            Which::Mismatched => None,
        };
        picked.unwrap_or_else(|| format!("nope{k}"))
    }

    /// What the 409 for a continuation of `id` must say, or `None` if it is accepted.
    fn refusal(&self, id: &str) -> Option<String> {
        if !self.exists {
            return Some("does not exist".into());
        }
        if self.pending.front().is_some_and(|first| first == id) {
            return None;
        }
        Some(match self.calls.get(id) {
            Some(Call::Queued) => "is queued behind".into(),
            Some(Call::Answered(_, word)) => format!("already recorded (status: {word})"),
            Some(Call::Superseded) => "was superseded".into(),
            Some(Call::Unknown) => "already recorded (status: unknown)".into(),
            _ => "is not pending".into(),
        })
    }
}

// ---- running a history -----------------------------------------------------

struct World {
    store: Arc<MemoryStore>,
    model: Arc<PlannedModel>,
    processes: [Runtime; 2],
    state: Model,
    held: Option<Held>,
}

type Checked = Result<(), String>;

fn user() -> Caller {
    Caller::new("tester", false)
}

fn admin() -> Caller {
    Caller::new("tester", true)
}

fn id() -> SessionId {
    SessionId::new(SESSION)
}

async fn patiently<T>(
    what: &str,
    future: impl std::future::Future<Output = T>,
) -> Result<T, String> {
    tokio::time::timeout(PATIENCE, future)
        .await
        .map_err(|_| format!("{what}: no answer within {PATIENCE:?} (a hang)"))
}

/// The events of one turn, through its `status: completed`.
async fn completed(events: &mut EventStream) -> Result<Vec<TurnEvent>, String> {
    let mut seen = Vec::new();
    loop {
        let event = patiently("a turn's end", events.recv())
            .await?
            .ok_or_else(|| format!("the stream ended before completed: {seen:?}"))?;
        let done =
            matches!(&event, TurnEvent::Status(status) if status.status == TurnStatus::Completed);
        seen.push(event);
        if done {
            return Ok(seen);
        }
    }
}

fn context() -> Value {
    json!({"version": 1, "actions": [{"name": "select_issue",
        "description": "Select an issue.",
        "parameters": {"type": "object", "properties": {"id": {"type": "number"}}}}]})
}

impl World {
    fn new() -> World {
        let store = Arc::new(MemoryStore::new());
        let model = Arc::new(PlannedModel::default());
        let processes = [process(&store, &model), process(&store, &model)];
        World {
            store,
            model,
            processes,
            state: Model::default(),
            held: None,
        }
    }

    async fn send(
        &self,
        p: usize,
        body: Value,
    ) -> Result<
        (
            Result<crate::session::TurnAccepted, SessionError>,
            EventStream,
        ),
        String,
    > {
        let request = ChatRequest::parse(&body).map_err(|error| format!("{error:?}"))?;
        let (sink, events) = EventSink::new(true);
        let caller = user();
        let sent = self.processes[p].send_message(&caller, request, sink);
        Ok((patiently("a message", sent).await?, events))
    }

    async fn step(&mut self, k: u64, step: &Step) -> Checked {
        match *step {
            Step::Message { p, turn } => self.message(k, p, turn).await,
            Step::Release => self.release().await,
            Step::Continue { p, which, failed } => self.continuation(k, p, which, failed).await,
            Step::Steer { p } => self.steer(k, p).await,
            Step::Cancel { p } => self.cancel(p).await,
            Step::Repair { p } => self.repair(p).await,
            Step::Delete { p } => self.delete(p).await,
            Step::Join { p } => self.join(p).await,
            Step::Restart { p } => {
                if self.held.as_ref().is_none_or(|held| held.p != p) {
                    self.processes[p] = process(&self.store, &self.model);
                }
                Ok(())
            }
            Step::Touch => self.touch().await,
        }
    }

    /// Ends the held turn if `cancelled` by this step (it ran on `p`).
    async fn held_ends_on(&mut self, p: usize) -> Checked {
        if let Some(mut held) = self.held.take_if(|held| held.p == p) {
            completed(&mut held.events).await?;
        }
        Ok(())
    }

    async fn message(&mut self, k: u64, p: usize, turn: Turn) -> Checked {
        let turn = match turn {
            Turn::Held if self.held.is_some() => Turn::Text,
            turn => turn,
        };
        let calls: Vec<String> = match turn {
            Turn::Calls(n) => (0..n).map(|i| format!("c{k}_{i}")).collect(),
            _ => Vec::new(),
        };
        let gate = Arc::new(Notify::new());
        match turn {
            Turn::Text => {}
            Turn::Calls(_) => self.model.plan(Answer::Calls(calls.clone())),
            Turn::Held => self.model.plan(Answer::Held(gate.clone())),
        }
        let body = json!({"id": format!("m{k}"), "session_id": SESSION, "content": "hi",
                          "host_context": context()});
        let (accepted, mut events) = self.send(p, body).await?;
        let accepted = accepted.map_err(|error| format!("message m{k} refused: {error:?}"))?;
        if accepted.accepted_as != AcceptedAs::Turn {
            return Err(format!(
                "message m{k} accepted as {:?}",
                accepted.accepted_as
            ));
        }
        // A message cancels its own process's live turn (and waits for it).
        self.held_ends_on(p).await?;
        self.state.exists = true;
        self.state.supersede_pending();
        self.state.acked.push(format!("m{k}"));
        if let Turn::Held = turn {
            self.held = Some(Held { p, gate, events });
            return Ok(());
        }
        completed(&mut events).await?;
        for (i, call) in calls.iter().enumerate() {
            let state = if i == 0 { Call::Pending } else { Call::Queued };
            self.state.calls.insert(call.clone(), state);
            self.state.made.push(call.clone());
            self.state.pending.push_back(call.clone());
        }
        Ok(())
    }

    async fn release(&mut self) -> Checked {
        if let Some(mut held) = self.held.take() {
            held.gate.notify_one();
            completed(&mut held.events).await?;
        }
        Ok(())
    }

    async fn continuation(&mut self, k: u64, p: usize, which: Which, failed: bool) -> Checked {
        if self.held.as_ref().is_some_and(|held| held.p == p) {
            // It would wait behind the live turn; not a step of its own.
            return Ok(());
        }
        let call = self.state.pick(which, k);
        let outcome = if failed { "failed" } else { "success" };
        let body = json!({"id": format!("m{k}"), "session_id": SESSION, "tool_call_id": call,
                          "tool_result": {"n": k}, "tool_outcome": outcome});
        let (accepted, mut events) = self.send(p, body).await?;
        match (self.state.refusal(&call), accepted) {
            (None, Ok(_)) => {
                completed(&mut events).await?;
                let word = if failed { "failed" } else { "completed" };
                self.state.calls.insert(call, Call::Answered(k, word));
                self.state.pending.pop_front();
                if let Some(next) = self.state.pending.front() {
                    self.state.calls.insert(next.clone(), Call::Pending);
                }
                Ok(())
            }
            (Some(why), Err(SessionError::Conflict(said))) if said.contains(&why) => Ok(()),
            (expected, got) => Err(format!(
                "the result for {call} expected {}, got {got:?}",
                expected.map_or("acceptance".into(), |why| format!("a 409 saying {why:?}"))
            )),
        }
    }

    async fn steer(&mut self, k: u64, p: usize) -> Checked {
        let live_here = self.held.as_ref().is_some_and(|held| held.p == p);
        let body = json!({"id": format!("m{k}"), "session_id": SESSION, "content": "also",
                          "message_type": "steering"});
        let (accepted, mut events) = self.send(p, body).await?;
        match accepted {
            Ok(accepted) if live_here && accepted.accepted_as == AcceptedAs::Steering => Ok(()),
            Ok(accepted)
                if !live_here
                    && !self.state.acked.is_empty()
                    && accepted.accepted_as == AcceptedAs::Turn =>
            {
                completed(&mut events).await?;
                self.state.supersede_pending();
                self.state.acked.push(format!("m{k}"));
                Ok(())
            }
            Err(SessionError::Conflict(why))
                if !live_here
                    && self.state.acked.is_empty()
                    && why.contains("needs a conversation") =>
            {
                Ok(())
            }
            other => Err(format!("steering m{k} (live here: {live_here}): {other:?}")),
        }
    }

    async fn cancel(&mut self, p: usize) -> Checked {
        let live_here = self.held.as_ref().is_some_and(|held| held.p == p);
        let cancelled = patiently("cancel", self.processes[p].cancel(&user(), &id())).await?;
        match cancelled {
            Ok(true) if live_here => self.held_ends_on(p).await,
            Ok(false) | Err(SessionError::Forbidden(_)) if !live_here => Ok(()),
            other => Err(format!("cancel (live here: {live_here}): {other:?}")),
        }
    }

    async fn repair(&mut self, p: usize) -> Checked {
        let live_here = self.held.as_ref().is_some_and(|held| held.p == p);
        let repaired = patiently("repair", self.processes[p].repair(&admin(), &id())).await?;
        match repaired {
            Err(SessionError::Conflict(why)) if live_here && why.contains("turn is running") => {
                Ok(())
            }
            Ok(info) if !live_here && self.state.exists && info.pending_action.is_none() => {
                for id in self.state.pending.drain(..) {
                    self.state.calls.insert(id, Call::Unknown);
                }
                Ok(())
            }
            Err(SessionError::NotFound(_)) if !live_here => Ok(()),
            other => Err(format!("repair (live here: {live_here}): {other:?}")),
        }
    }

    async fn delete(&mut self, p: usize) -> Checked {
        let deleted = patiently("delete", self.processes[p].delete(&admin(), &id())).await?;
        match deleted {
            Ok(found) if found || !self.state.exists => {
                self.held_ends_on(p).await?;
                self.state.delete();
                Ok(())
            }
            other => Err(format!("delete (exists: {}): {other:?}", self.state.exists)),
        }
    }

    async fn join(&mut self, p: usize) -> Checked {
        // With a context, so the join writes: a join without one is
        // answered from the resident copy, which may be stale.
        let body = json!({"id": "j", "session_id": SESSION, "host_context": context()});
        let request = ChatRequest::parse(&body).map_err(|error| format!("{error:?}"))?;
        let (caller, session) = (user(), id());
        let joined = self.processes[p].join(&caller, &session, request.host_context);
        patiently("join", joined)
            .await?
            .map_err(|error| format!("join: {error:?}"))?;
        self.state.exists = true;
        Ok(())
    }

    async fn touch(&mut self) -> Checked {
        let loaded = self
            .store
            .load(&id())
            .await
            .map_err(|error| error.to_string())?;
        if let Some(snapshot) = loaded {
            let written = self
                .store
                .save_session(snapshot.version, &snapshot.record)
                .await
                .map_err(|error| error.to_string())?;
            if !matches!(written, Written::Committed(_)) {
                return Err(format!("the third writer's write: {written:?}"));
            }
        }
        Ok(())
    }

    /// The invariants, on what the store holds.
    async fn check(&self) -> Checked {
        let loaded = self
            .store
            .load(&id())
            .await
            .map_err(|error| error.to_string())?;
        let Some(snapshot) = loaded else {
            return match self.state.exists {
                true => Err("the session is gone from the store".into()),
                false => Ok(()),
            };
        };
        if !self.state.exists {
            return Err("a deleted session is stored again".into());
        }
        let stored: Vec<String> = match &snapshot.record.pending_action {
            None => Vec::new(),
            Some(pending) => std::iter::once(&pending.tool_call_id)
                .chain(&pending.queued)
                .map(|id| id.to_string())
                .collect(),
        };
        let expected: Vec<&String> = self.state.pending.iter().collect();
        if stored.iter().collect::<Vec<_>>() != expected {
            return Err(format!(
                "pending and queued: stored {stored:?}, expected {expected:?}"
            ));
        }
        let tree = crate::conversation::MessageTree::from_messages(snapshot.messages);
        let open: Vec<String> = tree
            .all()
            .flat_map(|message| message.tool_records())
            .filter(|tool| !tool.has_result())
            .map(|tool| tool.id.to_string())
            .filter(|id| !stored.contains(id))
            .collect();
        if !open.is_empty() {
            return Err(format!("calls without a result and not pending: {open:?}"));
        }
        self.check_path(&tree.path_to(snapshot.record.active_leaf.as_ref()))
    }

    /// Every acknowledged message and accepted result is on the stored path.
    fn check_path(&self, path: &[&crate::conversation::Message]) -> Checked {
        for acked in &self.state.acked {
            if !path.iter().any(|message| message.id.as_str() == acked) {
                return Err(format!(
                    "acknowledged message {acked} is not on the stored path"
                ));
            }
        }
        for (call, state) in &self.state.calls {
            let Call::Answered(n, word) = state else {
                continue;
            };
            let record = path
                .iter()
                .flat_map(|message| message.tool_records())
                .find(|tool| tool.id.as_str() == call)
                .ok_or_else(|| format!("accepted result of {call} is not on the stored path"))?;
            if record.output != Some(json!({"n": n})) || record.status_word() != *word {
                return Err(format!(
                    "call {call}: stored {:?} ({}), accepted {{\"n\": {n}}} ({word})",
                    record.output,
                    record.status_word()
                ));
            }
        }
        Ok(())
    }
}

/// Runs one history; the first broken rule, with the step it broke at.
pub(crate) fn run_history(steps: &[Step]) -> Checked {
    actix::System::new().block_on(async {
        let mut world = World::new();
        for (k, step) in steps.iter().enumerate() {
            let k = k as u64 + 1;
            world
                .step(k, step)
                .await
                .map_err(|error| format!("step {k} {step:?}: {error}"))?;
            world
                .check()
                .await
                .map_err(|error| format!("after step {k} {step:?}: {error}"))?;
        }
        world.release().await
    })
}

fn cases() -> u32 {
    std::env::var("MODEL_CASES")
        .ok()
        .and_then(|cases| cases.parse().ok())
        .unwrap_or(48)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn model_histories(steps in proptest::collection::vec(step(), 1..40)) {
        let outcome = run_history(&steps);
        prop_assert!(outcome.is_ok(), "{}", outcome.err().unwrap_or_default());
    }
}
