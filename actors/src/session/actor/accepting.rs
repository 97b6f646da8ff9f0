//! Accepting chat requests (core): a new message, steering, and a host's
//! result for the pending call (`apply_result`).

use std::sync::Arc;

use super::core::{Chat, InFlight, Phase, Plan, State, Waiting, Write, MAX_QUEUED_STEERING};
use super::idempotency::{reply_id, Earlier};
use super::rules::{pending_for, record_result};
use super::screenshot::strip_screenshots;
use super::turns::Outcome;
use crate::contract::{
    Attachment, AttachmentPurpose, AttachmentSource, ChatRequest, HostContext, MessageType,
    OutputMode,
};
use crate::conversation::{
    now_millis, CallStatus, Message as StoredMessage, NoteOrigin, PendingAction, Role,
    SessionRecord, StoredContext,
};
use crate::events::{Decision, ToolResultEvent, TurnEvent};
use crate::ids::MessageId;
use crate::prompt::host_block::render_host_context;
use crate::session::requests::{AcceptedAs, TurnAccepted};
use crate::session::{SessionError, SessionResult};
use crate::turn::{push_note, NotQueued, SteeringNote};

const MAX_TITLE_CHARS: usize = 80;

pub(super) fn accepted(message_id: &MessageId) -> TurnAccepted {
    TurnAccepted {
        accepted_as: AcceptedAs::Turn,
        message_id: Some(message_id.clone()),
    }
}

impl State {
    /// A new message's turn has a screenshot only if the message brings one.
    pub(super) fn reset_screenshot(&mut self, request: &ChatRequest) {
        self.screenshot = None;
        self.take_screenshot(request);
    }

    /// For `look_at_screen`.
    fn take_screenshot(&mut self, request: &ChatRequest) {
        let newest = (request.attachments.iter().rev()).find_map(|attachment| {
            let screenshot = attachment.purpose == AttachmentPurpose::Screenshot;
            match &attachment.source {
                AttachmentSource::DataUri(uri) if screenshot => Some(uri.clone()),
                _ => None,
            }
        });
        self.screenshot = newest.or(self.screenshot.take());
    }

    /// The context kept after this request: the kept one if repeated (JSON and
    /// block already made), else the request's own without attachments.
    fn kept_context(&self, request: &mut ChatRequest) -> Option<Arc<StoredContext>> {
        let context = request.host_context.as_mut()?;
        match &self.record.host_context {
            Some(kept) if context.repeats(kept.context()) => Some(Arc::clone(kept)),
            _ => Some(shared_context(context)),
        }
    }

    /// The `<host_context>` block: a kept context renders once for all its
    /// turns; a request's context with attachments (counted) on its own.
    fn host_block(&self, request: &ChatRequest, kept: Option<&StoredContext>) -> Option<Arc<str>> {
        let kept = match (&request.host_context, kept) {
            (Some(context), Some(kept)) if context.attachments.is_empty() => kept,
            (Some(context), _) => return Some(render_host_context(context).into()),
            (None, _) => self.record.host_context.as_deref()?,
        };
        Some(kept.rendered().clone())
    }
}

/// A context as kept: without its attachments (their message's), set aside
/// while it is copied, so megabytes are never copied only to be dropped.
fn shared_context(context: &mut HostContext) -> Arc<StoredContext> {
    let attachments = std::mem::take(&mut context.attachments);
    let kept = StoredContext::new(context.clone());
    context.attachments = attachments;
    Arc::new(kept)
}

pub(super) fn reference_attachments(request: &ChatRequest) -> Vec<Attachment> {
    (request.attachments.iter())
        .filter(|attachment| attachment.purpose == AttachmentPurpose::Reference)
        .cloned()
        .collect()
}

impl State {
    pub(super) fn accept(&mut self, waiting: Waiting, plan: &mut Plan) {
        if let Err(error) = self.authorize_write(&waiting.caller) {
            return plan.answer(waiting.reply, Err(error));
        }
        match (&waiting.request.continuation, waiting.request.message_type) {
            (Some(_), _) => self.accept_continuation(waiting, plan),
            (None, MessageType::Steering) => self.accept_steering(waiting, plan),
            (None, MessageType::Standard) => self.accept_message(waiting, plan),
        }
    }

    fn check_new_message(&self, request: &ChatRequest) -> SessionResult<()> {
        let session = self.id.as_str();
        let parent = (request.parent_id.as_ref()).map(|id| (id.as_str(), self.tree.get(id)));
        let conflict = match parent {
            _ if self.tree.contains(&request.id) => {
                let id = request.id.as_str();
                format!("message id {id:?} already exists in session {session:?}")
            }
            Some((parent, None)) => {
                format!("parent_id {parent:?} is not a message of session {session:?}")
            }
            Some((parent, Some(message))) if message.role == Role::Summary => format!(
                "parent_id {parent:?} is a summary node; continue from a message of the conversation"
            ),
            _ => {
                let declares_hold = request.output_mode == OutputMode::HostTools
                    && self.current_context(request).is_some_and(|context| {
                        (context.actions.iter()).any(|action| action.name == crate::tools::HOLD_TOOL)
                    });
                if declares_hold {
                    return Err(SessionError::validation(
                        "host_context.actions",
                        "\"hold\" is reserved with output_mode host_tools; give the action another name",
                    ));
                }
                return self.deps.plan_model(&request.config).map(drop);
            }
        };
        Err(SessionError::Conflict(conflict))
    }

    /// An ordinary message: cancels a live turn (and waits for it), supersedes
    /// a pending call, stores the user message and starts a turn.
    fn accept_message(&mut self, waiting: Waiting, plan: &mut Plan) {
        let mark = waiting.request.idempotency.as_deref();
        match mark.map_or(Earlier::None, |mark| self.earlier(mark)) {
            Earlier::None => {
                if let Err(error) = self.check_new_message(&waiting.request) {
                    return self.refuse(waiting, error, plan);
                }
            }
            Earlier::Refused(error) => return plan.answer(waiting.reply, Err(error)),
            Earlier::Answered(reply_id) => return self.answer_again(*waiting, &reply_id, plan),
            Earlier::Unanswered(user) if !self.is_running() => {
                return self.answer_unanswered(waiting, user, plan);
            }
            // Another message's turn is live: cancelled as for any new
            // message, and this one decided again once it ended.
            Earlier::Unanswered(_) => {}
        }
        if self.cancel_live(plan) {
            return self.waiting.push_back(waiting);
        }
        self.store_message(waiting, plan);
    }

    /// Stores the user message (superseding a pending call); its turn starts
    /// on commit. Stale: decided again on the reloaded copy.
    fn store_message(&mut self, mut waiting: Waiting, plan: &mut Plan) {
        let mut changed = super::core::Messages::new();
        if let Phase::AwaitingHost(pending) = &self.phase {
            if let Some(assistant) = self.tree.get(&pending.assistant_message_id) {
                let mut assistant = assistant.clone();
                assistant.interrupt_unresolved(CallStatus::Superseded);
                changed.push(Arc::new(assistant));
            }
        }
        let kept = self.kept_context(&mut waiting.request);
        let request = &waiting.request;
        self.reset_screenshot(request);
        let user = self.user_message(request, kept.as_deref());
        let record = self.record_after(request, kept, &user.id);
        changed.push(Arc::new(user));
        let mut write = self.write(record, Some(changed));
        write.taken = self.reserve_inbox(request);
        plan.write(write, InFlight::Chat(waiting));
    }

    pub(super) fn message_stored(&mut self, waiting: Chat, write: Write, plan: &mut Plan) {
        for message in write.messages.unwrap_or_default() {
            self.tree.upsert(message);
        }
        self.record = write.record;
        self.phase = Phase::Idle;
        self.inbox_taken(&waiting.request, &write.taken);
        let user_id = waiting.request.id.clone();
        let reply = reply_id(&user_id);
        let assistant = StoredMessage::empty(reply, Some(user_id), Role::Assistant, now_millis());
        self.start_turn(waiting, assistant, None, plan);
        self.deliver_drained(write.taken, plan);
    }

    /// Under the active leaf unless the request names a parent.
    fn user_message(&self, request: &ChatRequest, kept: Option<&StoredContext>) -> StoredMessage {
        let parent_id = (request.parent_id.clone()).or_else(|| self.record.active_leaf.clone());
        let history = &self.deps.config.history;
        let memory_block = (request.output_mode == OutputMode::Text)
            .then(|| crate::history::memory_block_for(history, &self.tree, parent_id.as_ref()))
            .flatten();
        let mut user =
            StoredMessage::empty(request.id.clone(), parent_id, Role::User, now_millis());
        user.content = request.content.clone();
        user.host_block = self.host_block(request, kept);
        user.attachments = reference_attachments(request);
        user.memory_block = memory_block;
        user.idempotency = request.idempotency.clone();
        user
    }

    /// The row once `user` is stored (a first message gives the title).
    fn record_after(
        &self,
        request: &ChatRequest,
        kept: Option<Arc<StoredContext>>,
        user: &MessageId,
    ) -> SessionRecord {
        let mut record = self.record.clone();
        record.active_leaf = Some(user.clone());
        record.turn_number += 1;
        record.host_context = kept.or(record.host_context.take());
        if record.title.is_none() && !request.content.is_empty() {
            let title: String = request.content.chars().take(MAX_TITLE_CHARS).collect();
            record.title = Some(title.into());
        }
        record.pending_action = None;
        record
    }

    /// Steering joins the live turn, or becomes an ordinary turn when none is live.
    fn accept_steering(&mut self, waiting: Waiting, plan: &mut Plan) {
        let Some(waiting) = self.steer(waiting, plan) else {
            return;
        };
        if self.tree.is_empty() {
            let error = SessionError::Conflict(format!(
                "steering needs a conversation; session {:?} has none yet",
                self.id.as_str()
            ));
            return self.refuse(waiting, error, plan);
        }
        // Still steering: decided again after a reload, it is checked again.
        self.accept_message(waiting, plan);
    }

    /// Delivers steering into the live turn, or gives it back when none takes it.
    fn steer(&mut self, waiting: Waiting, plan: &mut Plan) -> Option<Waiting> {
        let refused = match &self.phase {
            _ if waiting.request.output_mode == OutputMode::HostTools => SessionError::validation(
                "message_type",
                "steering is not supported with output_mode host_tools",
            ),
            Phase::Running(live) if live.output_mode == OutputMode::HostTools => {
                SessionError::Conflict(
                    "the live turn is a silent decision; steering is not supported".into(),
                )
            }
            Phase::Running(live) if !live.cancelling => {
                let request = &waiting.request;
                let note = SteeringNote {
                    id: request.id.clone(),
                    text: request.content.clone(),
                    attachments: reference_attachments(request),
                };
                match live.steering.try_send(note) {
                    Ok(()) => {
                        self.take_screenshot(&waiting.request);
                        let steering = TurnAccepted { accepted_as: AcceptedAs::Steering, message_id: None };
                        plan.answer(waiting.reply, Ok(steering));
                        return None;
                    }
                    Err(NotQueued::Full(_)) => SessionError::Conflict(format!(
                        "the live turn already has {MAX_QUEUED_STEERING} steering messages waiting; send more once it has taken them"
                    )),
                    // The turn is ending: the message becomes a turn of its own.
                    Err(NotQueued::Closed(_)) => return Some(waiting),
                }
            }
            _ => return Some(waiting),
        };
        plan.answer(waiting.reply, Err(refused));
        None
    }

    /// A host's result for a call: applied if the call is pending, waiting
    /// behind a live turn, refused (409) otherwise.
    fn accept_continuation(&mut self, waiting: Waiting, plan: &mut Plan) {
        if self.is_running() && self.is_stored() {
            // A continuation never cancels: it waits for the live turn to end.
            return self.waiting.push_back(waiting);
        }
        let Some(continuation) = &waiting.request.continuation else {
            let error = SessionError::Internal("not a continuation".into());
            return plan.answer(waiting.reply, Err(error));
        };
        match self.result_target(&continuation.tool_call_id) {
            Ok(pending) => self.apply_result(waiting, pending, plan),
            Err(error) => self.refuse(waiting, error, plan),
        }
    }
}

// ---- applying a host's result ---------------------------------------------

/// A result recorded on its call (the reply and the row are in its write).
pub(super) struct AppliedResult {
    pending: Arc<PendingAction>,
    /// Sent once stored; the note when the model resumes.
    event: TurnEvent,
    note: Option<TurnEvent>,
    screenshot: Option<Arc<str>>,
}

impl State {
    /// Records a host's result for the pending call, conditional on this copy's
    /// version: of two processes accepting one result, one commits, one gets 409.
    fn apply_result(&mut self, mut waiting: Waiting, pending: Arc<PendingAction>, plan: &mut Plan) {
        let kept = self.kept_context(&mut waiting.request);
        let request = &waiting.request;
        let (Some(assistant), Some(continuation)) = (
            self.tree.get(&pending.assistant_message_id),
            request.continuation.as_ref(),
        ) else {
            let error = SessionError::Internal(format!(
                "pending call {:?} points at a missing message",
                pending.tool_call_id.as_str()
            ));
            return plan.answer(waiting.reply, Err(error));
        };
        let mut assistant = assistant.clone();
        let mut screenshot = None;
        let output = strip_screenshots(&continuation.result, &mut screenshot);
        let tool_name = record_result(&mut assistant, &pending, &output, continuation.outcome);
        let next = pending.queued.split_first().and_then(|(next_id, queued)| {
            pending_for(&assistant, next_id, queued.to_vec(), pending.output_mode)
        });
        let resumes_model = next.is_none() && pending.output_mode == OutputMode::Text;
        let block = resumes_model.then(|| self.host_block(request, kept.as_deref()));
        let note = block.flatten().map(|text| {
            let (origin, attachments) = (NoteOrigin::HostContext, reference_attachments(request));
            push_note(&mut assistant, origin, None, text.to_string(), attachments)
        });
        let mut record = self.stored_record();
        record.host_context = kept.or(record.host_context.take());
        record.pending_action = next;
        let write = self.write(record, Some(smallvec::smallvec![Arc::new(assistant)]));
        let event = TurnEvent::ToolResult(ToolResultEvent {
            message_id: pending.assistant_message_id.clone(),
            tool_name,
            output,
            call_id: pending.tool_call_id.to_string(),
            duration_ms: 0,
            invalidates: (self.deps.tools.invalidations.get(&pending.tool_name)).cloned(),
        });
        let applied = AppliedResult {
            pending,
            event,
            note,
            screenshot: screenshot.map(Arc::from),
        };
        plan.write(write, InFlight::Result(waiting, applied));
    }

    /// The model resumes, or the receipt is a turn ended at once (another
    /// call pending, or a silent decision ended).
    pub(super) fn result_applied(
        &mut self,
        mut waiting: Chat,
        applied: AppliedResult,
        write: Write,
        plan: &mut Plan,
    ) {
        self.screenshot = applied.screenshot.or(self.screenshot.take());
        self.take_screenshot(&waiting.request);
        self.record = write.record;
        let next = self.record.pending_action.take();
        let Some(assistant) = write.messages.and_then(|mut messages| messages.pop()) else {
            return;
        };
        self.tree.upsert(assistant.clone());
        let (event, output_mode) = (applied.event, applied.pending.output_mode);
        if next.is_none() && output_mode == OutputMode::Text {
            self.phase = Phase::Idle;
            // The call's own output mode governs the resumed run, whatever the
            // continuation says (host-contract.md: the pending action stores it).
            waiting.request.output_mode = output_mode;
            let assistant = Arc::unwrap_or_clone(assistant);
            let opening = [event].into_iter().chain(applied.note);
            return self.start_turn(waiting, assistant, opening, plan);
        }
        self.phase = Phase::awaiting(next.clone());
        // A receipt of a silent decision publishes no tool preview either.
        let opening = (output_mode == OutputMode::Text).then_some(event);
        let decision = (output_mode == OutputMode::HostTools).then_some(Decision::Completed);
        let outcome = Outcome::decided(next, decision);
        self.end_at_once(waiting, &assistant, output_mode, opening, outcome, plan);
        plan.run_waiting = true;
        plan.life = Some(super::core::Life::Settled);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::test_support::*;
    use crate::events::TurnEvent;
    use crate::ids::SessionId;
    use crate::session::{AcceptedAs, SessionError};

    #[test]
    fn the_kept_context_is_the_requests_without_its_attachments() {
        let mut context = context_with_action();
        context["attachments"] = json!([{"kind": "text", "text": "notes"}]);
        let body = json!({"id": "m1", "session_id": "s1", "host_context": context});
        let request = crate::contract::ChatRequest::parse(&body).expect("a valid body");
        let mut context = request.host_context.clone().expect("a context");
        let kept = super::shared_context(&mut context);
        assert_eq!(
            Some(&context),
            request.host_context.as_ref(),
            "given back whole"
        );
        context.attachments.clear();
        assert_eq!(*kept.context(), context);
    }

    /// A live turn takes at most `MAX_QUEUED_STEERING` steering messages
    /// before its next model request; one more is a conflict, not a queue
    /// that grows without bound.
    #[test]
    fn steering_past_the_queue_bound_is_a_conflict() {
        run(async {
            let model = ScriptedModel::new(vec![]);
            let runtime = runtime(model.clone(), 10);
            let message = json!({"id": "m1", "session_id": "s1", "content": "hi"});
            let (accepted, _events) = send(&runtime, message).await;
            assert!(accepted.is_ok(), "{accepted:?}");
            wait_for_requests(&model, 1).await;
            for n in 0..=super::MAX_QUEUED_STEERING {
                let steering = json!({"id": format!("st{n}"), "session_id": "s1",
                                      "content": "also", "message_type": "steering"});
                let (accepted, _) = send(&runtime, steering).await;
                if n < super::MAX_QUEUED_STEERING {
                    assert!(accepted.is_ok(), "steering {n}: {accepted:?}");
                } else {
                    assert!(
                        matches!(&accepted, Err(SessionError::Conflict(why)) if why.contains("steering messages waiting")),
                        "{accepted:?}"
                    );
                }
            }
        });
    }

    #[test]
    fn a_new_message_runs_a_turn_to_completion() {
        run(async {
            let model = ScriptedModel::new(vec![Reply::Events(vec![text("hel"), text("lo")])]);
            let runtime = runtime(model, 10);
            let (accepted, mut events) = send(
                &runtime,
                json!({"id": "m1", "session_id": "s1", "content": "hi"}),
            )
            .await;
            let accepted = accepted.expect("accepted");
            assert_eq!(accepted.accepted_as, AcceptedAs::Turn);
            assert_eq!(
                accepted.message_id.map(|id| id.to_string()),
                Some("m1:reply".into())
            );
            let turn = until_completed(&mut events).await;
            assert!(matches!(turn.first(), Some(TurnEvent::Status(_))));
            assert_eq!(final_response(&turn).content.as_deref(), Some("hello"));
            let path = runtime
                .messages(&caller(), &SessionId::new("s1"), None)
                .await
                .expect("the path");
            let texts: Vec<String> = path
                .iter()
                .map(|message| format!("{}{}", message.content, message.text()))
                .collect();
            assert_eq!(texts, ["hi", "hello"]);
        });
    }

    #[test]
    fn a_host_action_is_pending_until_its_continuation_resumes_the_turn() {
        run(async {
            let model = ScriptedModel::new(vec![
                Reply::Events(vec![call("c1", "select_issue", r#"{"id": 3}"#)]),
                Reply::Events(vec![text("selected")]),
            ]);
            let runtime = runtime(model.clone(), 10);
            let id = SessionId::new("s1");
            let body = json!({"id": "m1", "session_id": "s1", "content": "pick 3",
                              "host_context": context_with_action()});
            let (accepted, mut events) = send(&runtime, body).await;
            accepted.expect("accepted");
            let turn = until_completed(&mut events).await;
            let pending = final_response(&turn).pending_tool_call.as_ref();
            assert_eq!(pending.map(|call| call.call_id.as_str()), Some("c1"));
            let info = runtime.session(&caller(), &id).await.expect("info");
            assert_eq!(
                info.pending_action
                    .map(|pending| pending.tool_call_id.to_string()),
                Some("c1".into())
            );

            let continuation = json!({"id": "m2", "session_id": "s1", "tool_call_id": "c1",
                                      "tool_result": {"selected": 3}});
            let (accepted, mut events) = send(&runtime, continuation).await;
            accepted.expect("continuation accepted");
            let turn = until_completed(&mut events).await;
            assert!(turn.iter().any(
                |event| matches!(event, TurnEvent::ToolResult(result) if result.call_id == "c1")
            ));
            assert_eq!(final_response(&turn).content.as_deref(), Some("selected"));
            assert_eq!(model.n_requests(), 2);
            let info = runtime.session(&caller(), &id).await.expect("info");
            assert!(info.pending_action.is_none());
        });
    }

    /// The blocks come from the kept context's one rendering, except the
    /// block of a message whose own context has attachments: that one counts
    /// them, and the later note (the kept context has none) does not.
    #[test]
    fn stored_blocks_are_the_rendering_of_the_context_each_turn_saw() {
        run(async {
            let model = ScriptedModel::new(vec![
                Reply::Events(vec![call("c1", "select_issue", r#"{"id": 3}"#)]),
                Reply::Events(vec![text("selected")]),
            ]);
            let runtime = runtime(model, 10);
            let mut context = context_with_action();
            context["attachments"] = json!([{"kind": "text", "text": "notes"}]);
            let body = json!({"id": "m1", "session_id": "s1", "content": "pick 3",
                              "host_context": context});
            let request = crate::contract::ChatRequest::parse(&body).expect("a valid body");
            let with_attachments = request.host_context.clone().expect("a context");
            let mut kept = with_attachments.clone();
            kept.attachments.clear();
            let (accepted, mut events) = send(&runtime, body).await;
            accepted.expect("accepted");
            until_completed(&mut events).await;
            let continuation = json!({"id": "m2", "session_id": "s1", "tool_call_id": "c1",
                                      "tool_result": {"selected": 3}});
            let (accepted, mut events) = send(&runtime, continuation).await;
            accepted.expect("continuation accepted");
            until_completed(&mut events).await;

            let path = runtime
                .messages(&caller(), &SessionId::new("s1"), None)
                .await
                .expect("the path");
            let render = crate::prompt::host_block::render_host_context;
            assert_eq!(
                path[0].host_block.as_deref(),
                Some(render(&with_attachments).as_str())
            );
            assert!(render(&with_attachments).contains("attachments: 1"));
            let note = path[1].segments.iter().find_map(|segment| match segment {
                crate::conversation::Segment::Note { text, .. } => Some(text.as_str()),
                _ => None,
            });
            assert_eq!(note, Some(render(&kept).as_str()));
        });
    }

    /// A repeated context is kept as it was; the same data with its keys
    /// in another order is a new context, whose block shows the new order.
    #[test]
    fn a_context_sent_again_in_another_order_shows_its_own_order() {
        run(async {
            let model = ScriptedModel::new(vec![
                Reply::Events(vec![text("one")]),
                Reply::Events(vec![text("two")]),
                Reply::Events(vec![text("three")]),
            ]);
            let runtime = runtime(model, 10);
            let mut context = context_with_action();
            context["view"] = json!({"name": "tasks", "data": {"a": 1, "b": 2}});
            let mut reordered = context.clone();
            reordered["view"]["data"] = json!({"b": 2, "a": 1});
            for (id, context) in [("m1", &context), ("m2", &context), ("m3", &reordered)] {
                let body = json!({"id": id, "session_id": "s1", "content": "hi",
                                  "host_context": context});
                let (accepted, mut events) = send(&runtime, body).await;
                accepted.expect("accepted");
                until_completed(&mut events).await;
            }
            let path = runtime
                .messages(&caller(), &SessionId::new("s1"), None)
                .await
                .expect("the path");
            let blocks: Vec<&str> = path
                .iter()
                .filter_map(|message| message.host_block.as_deref())
                .collect();
            assert_eq!(blocks.len(), 3);
            assert_eq!(blocks[0], blocks[1]);
            assert!(blocks[1].contains("  a: 1\n  b: 2"), "{}", blocks[1]);
            assert!(blocks[2].contains("  b: 2\n  a: 1"), "{}", blocks[2]);
            let info = runtime
                .session(&caller(), &SessionId::new("s1"))
                .await
                .expect("info");
            let kept = info.host_context.expect("a kept context");
            let keys: Vec<&String> = kept["view"]["data"]
                .as_object()
                .expect("an object")
                .keys()
                .collect();
            assert_eq!(keys, ["b", "a"]);
        });
    }

    #[test]
    fn a_duplicate_continuation_is_a_conflict_reporting_status_completed() {
        run(async {
            let model = ScriptedModel::new(vec![
                Reply::Events(vec![call("c1", "select_issue", "{}")]),
                Reply::Events(vec![text("done")]),
            ]);
            let runtime = runtime(model, 10);
            let body = json!({"id": "m1", "session_id": "s1", "content": "go",
                              "host_context": context_with_action()});
            let (_, mut events) = send(&runtime, body).await;
            until_completed(&mut events).await;
            let continuation = |id: &str| json!({"id": id, "session_id": "s1", "tool_call_id": "c1", "tool_result": "ok"});
            let (accepted, mut events) = send(&runtime, continuation("m2")).await;
            accepted.expect("the first continuation");
            until_completed(&mut events).await;
            let (again, _) = send(&runtime, continuation("m3")).await;
            match again {
                Err(SessionError::Conflict(message)) => {
                    assert!(message.contains("status: completed"), "{message}")
                }
                other => panic!("expected a conflict, got {other:?}"),
            }
        });
    }

    #[test]
    fn steering_joins_the_live_turn_before_its_next_request() {
        run(async {
            let mut steered = steer_a_live_turn(10, "shorter please").await;
            let accepted = steered.accepted.expect("steering");
            assert_eq!(accepted.accepted_as, AcceptedAs::Steering);
            let turn = until_completed(&mut steered.events).await;
            let taken = turn.iter().any(|event| {
                matches!(event, TurnEvent::Note(note) if note.content.as_deref() == Some("shorter please"))
            });
            assert!(taken, "{turn:?}");
            let content = final_response(&turn).content.as_deref();
            assert_eq!(content, Some("first\n\nsecond"));
            assert_eq!(steered.model.n_requests(), 2);
        });
    }
}
