//! Test doubles for the actor's unit tests: a scripted `ModelClient` and a
//! `Runtime` over the memory store, driven through the handle the transports
//! use, so each test goes through the mailbox as a real request does.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::{stream, StreamExt};
use serde_json::Value;
use tokio::sync::Notify;

use crate::budget::AttachmentBudget;
use crate::contract::ChatRequest;
use crate::events::{EventSink, EventStream, FinalResponse, TurnEvent, TurnStatus};
use crate::history::HistoryConfig;
use crate::model::catalog::ModelCatalog;
use crate::model::{
    ModelClient, ModelEvent, ModelId, ModelRequest, ModelStream, SharedModelClient,
};
use crate::prompt::profile::Profile;
use crate::prompt::system::system_prompt;
use crate::session::{Caller, Runtime, SessionConfig, SessionDeps, SessionError, TurnAccepted};
use crate::store::memory::MemoryStore;
use crate::tools::ToolRegistry;

/// How long a test waits for an event or a condition before it fails
/// (instead of hanging).
const PATIENCE: Duration = Duration::from_secs(10);

/// One model response of the script, given to the requests in order.
pub(super) enum Reply {
    /// These events, then the end of the response.
    Events(Vec<ModelEvent>),
    /// These events once `gate` is notified: the turn is live until then.
    After(Arc<Notify>, Vec<ModelEvent>),
}

/// A `ModelClient` that answers from a script; past its end it never
/// answers (the turn stays live until it is cancelled).
#[derive(Default)]
pub(super) struct ScriptedModel {
    replies: Mutex<VecDeque<Reply>>,
    /// Every request a turn made, to check what the model read.
    pub(super) requests: Mutex<Vec<ModelRequest>>,
}

impl ScriptedModel {
    pub(super) fn new(replies: Vec<Reply>) -> Arc<ScriptedModel> {
        Arc::new(ScriptedModel {
            replies: Mutex::new(replies.into()),
            requests: Mutex::default(),
        })
    }

    pub(super) fn n_requests(&self) -> usize {
        self.requests.lock().map_or(0, |requests| requests.len())
    }
}

impl ModelClient for ScriptedModel {
    fn stream(&self, request: ModelRequest) -> ModelStream {
        if let Ok(mut requests) = self.requests.lock() {
            requests.push(request);
        }
        let reply = self
            .replies
            .lock()
            .ok()
            .and_then(|mut replies| replies.pop_front());
        match reply {
            Some(Reply::Events(events)) => stream::iter(events.into_iter().map(Ok)).boxed(),
            Some(Reply::After(gate, events)) => stream::once(async move {
                gate.notified().await;
                stream::iter(events.into_iter().map(Ok))
            })
            .flatten()
            .boxed(),
            None => stream::pending().boxed(),
        }
    }
}

struct OneModel(SharedModelClient);

impl ModelCatalog for OneModel {
    fn client_for(&self, _id: &ModelId) -> Result<SharedModelClient, String> {
        Ok(self.0.clone())
    }
}

/// A runtime over the memory store whose every model is `model`, with at most
/// `max_turns` model requests per turn.
pub(super) fn runtime(model: Arc<ScriptedModel>, max_turns: u32) -> Runtime {
    runtime_on(Arc::new(MemoryStore::new()), model, max_turns)
}

/// `runtime` over `store`: runtimes sharing one store are processes sharing
/// one database.
pub(super) fn runtime_on(
    store: Arc<MemoryStore>,
    model: Arc<ScriptedModel>,
    max_turns: u32,
) -> Runtime {
    Runtime::new(deps_on(store, model, max_turns))
}

/// What `runtime_on` runs its sessions with.
pub(super) fn deps_on(
    store: Arc<MemoryStore>,
    model: Arc<ScriptedModel>,
    max_turns: u32,
) -> SessionDeps {
    SessionDeps {
        inbox: Arc::new(crate::store::Inbox::new(
            store.clone(),
            crate::store::InboxBounds::default(),
        )),
        store,
        models: Arc::new(OneModel(model)),
        tools: ToolRegistry::default(),
        invalidations: Arc::new(HashMap::new()),
        config: SessionConfig {
            default_model: ModelId::new("test", "scripted"),
            system_prompt: system_prompt(None).into(),
            profile: Profile::builtin(),
            max_turns,
            thinking_budget: None,
            budget: Default::default(),
            idle_timeout: Duration::from_secs(600),
            history: HistoryConfig::default(),
            request_models: Vec::new(),
            attachment_budget: AttachmentBudget::new(64 << 20, 1 << 30),
            traces: Default::default(),
        },
    }
}

pub(super) fn caller() -> Caller {
    Caller::new("tester", false)
}

pub(super) fn text(text: &str) -> ModelEvent {
    ModelEvent::TextDelta(text.to_string())
}

pub(super) fn call(id: &str, name: &str, arguments: &str) -> ModelEvent {
    ModelEvent::ToolCall {
        id: id.to_string(),
        name: name.to_string(),
        arguments: arguments.to_string(),
    }
}

/// A host context declaring the one host action `select_issue`.
pub(super) fn context_with_action() -> Value {
    serde_json::json!({"version": 1, "actions": [{"name": "select_issue",
        "description": "Select an issue.",
        "parameters": {"type": "object", "properties": {"id": {"type": "number"}}}}]})
}

/// Sends a message body as the transports do; its turn's events come on the stream.
pub(super) async fn send(
    runtime: &Runtime,
    body: Value,
) -> (Result<TurnAccepted, SessionError>, EventStream) {
    let request = ChatRequest::parse(&body).expect("a valid body");
    let (sink, events) = EventSink::new(true);
    (runtime.send_message(&caller(), request, sink).await, events)
}

/// The events of one turn, through its `status: completed`.
pub(super) async fn until_completed(events: &mut EventStream) -> Vec<TurnEvent> {
    let mut seen = Vec::new();
    loop {
        let event = tokio::time::timeout(PATIENCE, events.recv())
            .await
            .unwrap_or_else(|_| panic!("no status: completed; events so far: {seen:?}"))
            .unwrap_or_else(|| panic!("the stream ended; events so far: {seen:?}"));
        let completed =
            matches!(&event, TurnEvent::Status(status) if status.status == TurnStatus::Completed);
        seen.push(event);
        if completed {
            return seen;
        }
    }
}

pub(super) fn final_response(events: &[TurnEvent]) -> &FinalResponse {
    for event in events {
        if let TurnEvent::FinalResponse(response) = event {
            return response;
        }
    }
    panic!("no final response in {events:?}");
}

/// A turn (message `m1` of session `s1`) with steering `st1` sent while its
/// first model request is live.
pub(super) struct SteeredTurn {
    pub(super) runtime: Runtime,
    pub(super) model: Arc<ScriptedModel>,
    /// The turn's events (and those of a turn promoted from the steering).
    pub(super) events: EventStream,
    /// How the steering was answered.
    pub(super) accepted: Result<TurnAccepted, SessionError>,
}

/// Starts a turn whose first model request answers "first" only once the
/// steering was sent, and whose next answers "second"; at most `max_turns`
/// model requests per turn.
pub(super) async fn steer_a_live_turn(max_turns: u32, steering: &str) -> SteeredTurn {
    let gate = Arc::new(Notify::new());
    let model = ScriptedModel::new(vec![
        Reply::After(gate.clone(), vec![text("first")]),
        Reply::Events(vec![text("second")]),
    ]);
    let runtime = runtime(model.clone(), max_turns);
    let message = serde_json::json!({"id": "m1", "session_id": "s1", "content": "hi"});
    let (_, events) = send(&runtime, message).await;
    wait_for_requests(&model, 1).await;
    let steering = serde_json::json!({"id": "st1", "session_id": "s1", "content": steering,
                                      "message_type": "steering"});
    let (accepted, _) = send(&runtime, steering).await;
    gate.notify_one();
    SteeredTurn {
        runtime,
        model,
        events,
        accepted,
    }
}

/// Waits until the model has been asked `n` times.
pub(super) async fn wait_for_requests(model: &ScriptedModel, n: usize) {
    let waited = tokio::time::timeout(PATIENCE, async {
        while model.n_requests() < n {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    })
    .await;
    assert!(
        waited.is_ok(),
        "the model was asked {} times, not {n}",
        model.n_requests()
    );
}

/// Runs `test` inside an actix system, as the server does.
pub(super) fn run<F: std::future::Future<Output = ()>>(test: F) {
    actix::System::new().block_on(test);
}
