//! `POST /api/agui`: parses a `RunAgentInput`, hands its steps to the
//! `Runtime` one after another, and writes the streamed turn back as SSE.
//! Request errors (422, 409) are JSON replies before any stream; once the
//! stream is open, failures are `RUN_ERROR`. Dropping the stream (the client
//! hung up) cancels the live turn; the core saves its partial work.

use std::collections::{HashSet, VecDeque};

use actix_web::{web, HttpRequest, HttpResponse};
use actors::contract::ChatRequest;
use actors::error_type::ErrorType;
use actors::events::{EventSink, EventStream, TurnEvent};
use actors::ids::{is_valid_id, SessionId};
use actors::session::{Runtime, SessionError};
use futures_util::stream;
use serde_json::Value;

use super::events::{sse_frame, EventMapper};
use super::history::snapshot_messages;
use super::input::RunInput;
use crate::access::limits::{Limits, LiveGuard};
use crate::access::{require_json, Authenticated, AGUI_CONTENT_TYPE};
use crate::body::{parse_off_worker, read_body, BodyLimits};
use crate::errors::{parse_json, ApiError};
use crate::observability::access_log::{self, note_session};
use crate::observability::{turn_failure, Metrics, RequestId, Transport, TurnObserver};
use actors::session::Caller;

#[utoipa::path(post, path = "/api/agui", tag = "agui",
    request_body(content = Object, description = "AG-UI RunAgentInput (threadId is the session id)"),
    responses(
        (status = 200, description = "Server-Sent Events: AG-UI events, `data: <json>` frames", content_type = "text/event-stream", body = String),
        (status = 409, description = "session_error", body = crate::errors::ErrorBody),
        (status = 422, description = "validation, naming AG-UI fields", body = crate::errors::ErrorBody),
        (status = 503, description = "Database unreachable", body = crate::errors::ErrorBody)))]
pub async fn post_agui(
    req: HttpRequest,
    Authenticated(caller): Authenticated,
    runtime: web::Data<Runtime>,
    limits: web::Data<Limits>,
    metrics: web::Data<Metrics>,
    body_limits: web::Data<BodyLimits>,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    require_json(&req, Some(AGUI_CONTENT_TYPE))?;
    let body = read_body(payload, &body_limits).await?;
    let input = parse_off_worker(body, |body| Ok(RunInput::parse(&parse_json(body)?)?)).await?;
    note_session(&req, &input.thread_id);
    if input.wants_history() {
        return history_reply(&runtime, &caller, &input).await;
    }
    let (pending, has_context) = session_view(&runtime, &caller, &input.thread_id).await?;
    let mut requests: VecDeque<ChatRequest> = input.requests(&pending, has_context)?.into();
    let answered: HashSet<String> = requests
        .iter()
        .filter_map(|request| request.continuation.as_ref())
        .map(|continuation| continuation.tool_call_id.to_string())
        .collect();
    // All results but the last only hand over the next queued call; the
    // last one (or the user message) is the turn this run streams.
    let n_continuations = requests
        .iter()
        .filter(|request| request.continuation.is_some())
        .count();
    let Some(session_id) = requests.front().map(|request| request.session_id.clone()) else {
        return Err(SessionError::Internal("an AG-UI run with no step".into()).into());
    };
    let live = limits.into_inner().admit(&caller, &session_id)?;
    for _ in 1..n_continuations {
        if let Some(request) = requests.pop_front() {
            hand_over(&runtime, &caller, request).await?;
        }
    }
    let Some(first) = requests.pop_front() else {
        return Err(SessionError::Internal("an AG-UI run with no step".into()).into());
    };
    let mut mapper = EventMapper::new(&input.thread_id, &input.run_id, answered);
    let resumed = first.continuation.is_some();
    let session_id = first.session_id.clone();
    let (sink, events) = EventSink::new(true);
    let observer = TurnObserver::start(Transport::Agui);
    let accepted = runtime.send_message(&caller, first, sink).await?;
    let assistant_id = accepted
        .message_id
        .map(|id| id.to_string())
        .unwrap_or_default();
    mapper.begin_turn(&assistant_id, resumed);
    let run = RunStream {
        runtime: runtime.get_ref().clone(),
        metrics: metrics.into_inner(),
        observer,
        request_id: access_log::request_id(&req),
        caller: caller.clone(),
        _live: live,
        queue: VecDeque::from([mapper.run_started()]),
        mapper,
        events,
        remaining: requests,
        done: false,
        cancel_on_drop: CancelOnDrop {
            runtime: runtime.get_ref().clone(),
            caller,
            session_id,
            armed: true,
        },
    };
    let body = stream::unfold(run, |mut run| async move {
        loop {
            if let Some(event) = run.queue.pop_front() {
                return Some((Ok::<_, actix_web::Error>(sse_frame(&event)), run));
            }
            if run.done {
                return None;
            }
            run.advance().await;
        }
    });
    Ok(HttpResponse::Ok()
        .content_type("text/event-stream")
        .insert_header(("Cache-Control", "no-cache"))
        .insert_header(("X-Accel-Buffering", "no"))
        .streaming(body))
}

/// A run that asks for the thread's history: `RUN_STARTED`,
/// `MESSAGES_SNAPSHOT` of the stored path (empty for a thread not stored
/// yet), `RUN_FINISHED`. No turn runs and nothing is stored.
async fn history_reply(
    runtime: &Runtime,
    caller: &Caller,
    input: &RunInput,
) -> Result<HttpResponse, ApiError> {
    if !is_valid_id(&input.thread_id) {
        return Err(ApiError::from(actors::contract::ValidationError::new(
            "threadId",
            "expected 1 to 64 characters",
        )));
    }
    let session_id = SessionId::new(&input.thread_id);
    let path = match runtime.messages(caller, &session_id, None).await {
        Ok(path) => path,
        Err(SessionError::NotFound(_)) => Vec::new(),
        Err(error) => return Err(error.into()),
    };
    let mapper = EventMapper::new(&input.thread_id, &input.run_id, HashSet::new());
    let events = [
        mapper.run_started(),
        serde_json::json!({"type": "MESSAGES_SNAPSHOT", "messages": snapshot_messages(&path)}),
        mapper.run_finished(),
    ];
    let body: Vec<u8> = events
        .iter()
        .flat_map(|event| sse_frame(event).to_vec())
        .collect();
    Ok(HttpResponse::Ok()
        .content_type("text/event-stream")
        .insert_header(("Cache-Control", "no-cache"))
        .body(body))
}

/// The session's pending call and its queue, in the order they must be
/// answered, and whether it holds a host context.
async fn session_view(
    runtime: &Runtime,
    caller: &Caller,
    thread_id: &str,
) -> Result<(Vec<String>, bool), ApiError> {
    if !is_valid_id(thread_id) {
        // `requests` names the bad threadId.
        return Ok((Vec::new(), false));
    }
    match runtime.session(caller, &SessionId::new(thread_id)).await {
        Ok(info) => {
            let pending = info
                .pending_action
                .map(|pending| {
                    let mut ids = vec![pending.tool_call_id.to_string()];
                    ids.extend(pending.queued.iter().map(|id| id.to_string()));
                    ids
                })
                .unwrap_or_default();
            Ok((pending, info.host_context.is_some()))
        }
        Err(SessionError::NotFound(_)) => Ok((Vec::new(), false)),
        // A thread that is not stored yet is refused to a non-admin (so a
        // refusal never tells whether someone else's exists); the run itself
        // creates it, and the actor refuses it then if it is someone else's.
        Err(SessionError::Forbidden(_)) => Ok((Vec::new(), false)),
        Err(error) => Err(error.into()),
    }
}

/// Sends a result that only hands over the next queued call, and waits for
/// that hand-over to finish before the next step is sent.
async fn hand_over(
    runtime: &Runtime,
    caller: &Caller,
    request: ChatRequest,
) -> Result<(), ApiError> {
    let (sink, mut events) = EventSink::new(false);
    runtime.send_message(caller, request, sink).await?;
    while let Some(event) = events.recv().await {
        if event.is_completed_status() {
            break;
        }
    }
    Ok(())
}

/// The state of one run's SSE body.
struct RunStream {
    runtime: Runtime,
    metrics: std::sync::Arc<Metrics>,
    /// Times the turn being streamed.
    observer: TurnObserver,
    /// Named in the log line of a failed turn.
    request_id: Option<RequestId>,
    caller: Caller,
    /// Keeps the session live for the caller's limit until the run ends.
    _live: LiveGuard,
    mapper: EventMapper,
    /// The events of the turn being streamed.
    events: EventStream,
    /// Steps after this turn (a new user message after host results).
    remaining: VecDeque<ChatRequest>,
    /// AG-UI events ready to be written.
    queue: VecDeque<Value>,
    /// The run's last event is queued; nothing follows it.
    done: bool,
    cancel_on_drop: CancelOnDrop,
}

impl RunStream {
    /// Reads one turn event and queues what it becomes.
    async fn advance(&mut self) {
        let Some(event) = self.events.recv().await else {
            self.queue.extend(self.mapper.end_turn());
            let error = if self.events.overflowed() {
                // The client read too slowly; the turn ran on and is saved.
                self.mapper.run_error(
                    "this client fell too far behind the stream; read the outcome from GET /api/sessions/{id}/messages",
                    ErrorType::SlowReader.as_str(),
                )
            } else {
                self.mapper.run_error(
                    "the turn ended without a final response",
                    ErrorType::Internal.as_str(),
                )
            };
            self.finish(error);
            return;
        };
        self.observer.observe(&self.metrics, &event);
        let TurnEvent::FinalResponse(final_response) = event else {
            self.queue.extend(self.mapper.map(&event));
            return;
        };
        self.queue.extend(self.mapper.end_turn());
        turn_failure::log_if_failed(self.request_id.as_ref(), &final_response);
        let next = match final_response.error_type {
            None => self.remaining.pop_front(),
            Some(_) => None,
        };
        let Some(next) = next else {
            let end = self.mapper.run_end(&final_response);
            self.finish(end);
            return;
        };
        let resumed = next.continuation.is_some();
        let (sink, events) = EventSink::new(true);
        self.observer = TurnObserver::start(Transport::Agui);
        match self.runtime.send_message(&self.caller, next, sink).await {
            Ok(accepted) => {
                let assistant_id = accepted
                    .message_id
                    .map(|id| id.to_string())
                    .unwrap_or_default();
                self.mapper.begin_turn(&assistant_id, resumed);
                self.events = events;
            }
            Err(error) => {
                let code = error.error_type().as_str();
                let error = self.mapper.run_error(&error.to_string(), code);
                self.finish(error);
            }
        }
    }

    fn finish(&mut self, last: Value) {
        self.queue.push_back(last);
        self.done = true;
        self.cancel_on_drop.armed = false;
    }
}

/// Cancels the session's live turn when the body is dropped before the run
/// ended: the client went away, so nobody reads the rest.
struct CancelOnDrop {
    runtime: Runtime,
    caller: Caller,
    session_id: SessionId,
    armed: bool,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let runtime = self.runtime.clone();
        let caller = self.caller.clone();
        let session_id = self.session_id.clone();
        log::info!("session {session_id}: AG-UI client went away; cancelling its turn");
        // Bodies are dropped on the worker that served them, inside its local set.
        actix_web::rt::spawn(async move {
            let _ = runtime.cancel(&caller, &session_id).await;
        });
    }
}
