//! AG-UI `RunAgentInput` → the message bodies of the core. `RunInput::parse`
//! reads the AG-UI JSON; `RunInput::requests` builds one wire body per step
//! and passes each through `ChatRequest::parse`, so validation is exactly
//! that of HTTP and Socket.IO, with error paths renamed to the AG-UI fields.
//!
//! Mapping decisions (where neither AG-UI nor our spec says):
//! - `threadId` is the session id; `runId` only labels the run's events.
//! - Only the tail after the last `assistant` message is read: its `tool`
//!   messages answer pending host actions, its last `user` message is the new
//!   message (its `id` the message id). Everything earlier is ignored: the
//!   server's tree is the conversation. A run with nothing in that tail
//!   asks for the history instead (`history`).
//! - `tools` become `host_context.actions` (after any actions `state` carries);
//!   a tool without `parameters` gets an empty object schema.
//! - `context[i]` becomes `host_context.background.<description>` with
//!   `{"summary": value}`; an empty or repeated description is `context_<i>`.
//! - `state` is the host context when it carries `version` (which must be
//!   1, as on every door) or has only host context fields (`view`,
//!   `actions`, ...; `version` then reads as 1); any other non-empty state
//!   goes to `host_context.extensions.state`.
//! - A run's host context replaces the session's, so its actions are always
//!   this run's, never a previous run's; a run with nothing to say sends
//!   none when the session has none either (no empty block for the model).
//! - `forwardedProps.config` is the per-request config; other props are ignored.
//! - A tool message's `content` is its result, parsed as JSON when it parses;
//!   `error` set means `tool_outcome: "failed"` with the error as the result
//!   (parsed as JSON when it parses; `{"error", "output"}` when content
//!   came too).
//! - User `image`/`document` parts (AG-UI 1.0 `source`) and legacy `binary`
//!   parts become reference attachments; audio and video are refused.

use actors::contract::{ChatRequest, HostContext, ValidationError};
use serde_json::{json, Map, Value};

/// One AG-UI run, read but not yet checked against the contract.
#[derive(Clone, Debug, PartialEq)]
pub struct RunInput {
    pub thread_id: String,
    pub run_id: String,
    /// Tool messages of the tail, in the order sent.
    pub tool_messages: Vec<ToolMessage>,
    pub user_message: Option<UserMessage>,
    /// The host context every step of this run carries.
    host_context: Value,
    /// How to name contract paths of `host_context` in AG-UI terms.
    context_renames: Vec<(String, String)>,
    config: Option<Value>,
}

/// A `tool` message: the host's result for one call.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolMessage {
    /// Position in `messages`, for error paths.
    index: usize,
    pub id: String,
    pub tool_call_id: String,
    pub result: Value,
    pub failed: bool,
}

/// The new `user` message of the run.
#[derive(Clone, Debug, PartialEq)]
pub struct UserMessage {
    index: usize,
    pub id: String,
    pub text: String,
    /// Contract attachments, with the AG-UI path each came from.
    attachments: Vec<(Value, String)>,
}

impl RunInput {
    pub fn parse(value: &Value) -> Result<RunInput, ValidationError> {
        let Some(input) = value.as_object() else {
            return Err(ValidationError::new("body", "expected a JSON object"));
        };
        let thread_id = required_string(input, "threadId")?;
        let run_id = match input.get("runId") {
            None | Some(Value::Null) => format!("run-{}", actors::conversation::now_millis()),
            Some(_) => required_string(input, "runId")?,
        };
        let Some(messages) = input.get("messages").and_then(Value::as_array) else {
            return Err(ValidationError::new(
                "messages",
                "expected an array of messages",
            ));
        };
        let mut roles = Vec::with_capacity(messages.len());
        for (i, message) in messages.iter().enumerate() {
            let role = message.get("role").and_then(Value::as_str);
            let Some(role) = role else {
                return Err(ValidationError::new(
                    format!("messages[{i}].role"),
                    "expected a string",
                ));
            };
            roles.push(role);
        }
        let tail_start = roles
            .iter()
            .rposition(|role| *role == "assistant")
            .map_or(0, |i| i + 1);
        let mut tool_messages = Vec::new();
        let mut user_message = None;
        for (i, message) in messages.iter().enumerate().skip(tail_start) {
            match roles[i] {
                "tool" => tool_messages.push(parse_tool_message(message, i)?),
                "user" => user_message = Some(parse_user_message(message, i)?),
                _ => {}
            }
        }
        let (host_context, context_renames) = build_host_context(input)?;
        let config = match input.get("forwardedProps") {
            None | Some(Value::Null) => None,
            Some(Value::Object(props)) => props.get("config").cloned(),
            Some(_) => return Err(ValidationError::new("forwardedProps", "expected an object")),
        };
        Ok(RunInput {
            thread_id,
            run_id,
            tool_messages,
            user_message,
            host_context,
            context_renames,
            config,
        })
    }

    /// Nothing new after the last assistant message (a reloaded page's
    /// empty list, or a list the server already has): the run asks for the
    /// thread's history, answered with `MESSAGES_SNAPSHOT`.
    pub fn wants_history(&self) -> bool {
        self.tool_messages.is_empty() && self.user_message.is_none()
    }

    /// The message bodies of this run, in the order they go to the session:
    /// the tool results first (reordered to the session's `pending` order:
    /// the pending call, then its queue), then the new user message. Tool
    /// messages for calls that are not pending are dropped (the server already
    /// has them) unless none is pending, so the core can say why.
    /// `replaces_context`: the session holds a host context this run's must
    /// replace even when it is empty.
    pub fn requests(
        &self,
        pending: &[String],
        replaces_context: bool,
    ) -> Result<Vec<ChatRequest>, ValidationError> {
        let mut answering: Vec<&ToolMessage> = pending
            .iter()
            .filter_map(|call_id| {
                self.tool_messages
                    .iter()
                    .find(|message| &message.tool_call_id == call_id)
            })
            .collect();
        if answering.is_empty() && self.user_message.is_none() {
            answering.extend(self.tool_messages.first());
        }
        let mut requests = Vec::with_capacity(answering.len() + 1);
        for message in answering {
            let mut body = self.base_body(&message.id, replaces_context);
            body["tool_call_id"] = json!(message.tool_call_id);
            body["tool_result"] = message.result.clone();
            if message.failed {
                body["tool_outcome"] = json!("failed");
            }
            let message_path = format!("messages[{}]", message.index);
            let renames = vec![
                ("id".to_string(), format!("{message_path}.id")),
                (
                    "tool_call_id".to_string(),
                    format!("{message_path}.toolCallId"),
                ),
                ("tool_result".to_string(), format!("{message_path}.content")),
            ];
            requests.push(self.parse_body(&body, &renames)?);
        }
        if let Some(user) = &self.user_message {
            let mut body = self.base_body(&user.id, replaces_context);
            body["content"] = json!(user.text);
            let message_path = format!("messages[{}]", user.index);
            let mut renames = vec![
                ("id".to_string(), format!("{message_path}.id")),
                ("content".to_string(), format!("{message_path}.content")),
            ];
            if !user.attachments.is_empty() {
                let attachments: Vec<Value> = user
                    .attachments
                    .iter()
                    .map(|(attachment, _)| attachment.clone())
                    .collect();
                body["attachments"] = Value::Array(attachments);
                for (j, (_, from)) in user.attachments.iter().enumerate() {
                    renames.push((format!("attachments[{j}]"), from.clone()));
                }
                renames.push(("attachments".to_string(), format!("{message_path}.content")));
            }
            requests.push(self.parse_body(&body, &renames)?);
        }
        Ok(requests)
    }

    fn base_body(&self, id: &str, replaces_context: bool) -> Value {
        let mut body = json!({"id": id, "session_id": self.thread_id, "content": ""});
        let bare = self.host_context == json!({"version": 1});
        if replaces_context || !bare {
            body["host_context"] = self.host_context.clone();
        }
        if let Some(config) = &self.config {
            body["config"] = config.clone();
        }
        body
    }

    fn parse_body(
        &self,
        body: &Value,
        renames: &[(String, String)],
    ) -> Result<ChatRequest, ValidationError> {
        ChatRequest::parse(body).map_err(|mut error| {
            let own = renames
                .iter()
                .chain(self.context_renames.iter())
                .map(|(from, to)| (from.as_str(), to.as_str()));
            let all = own.chain(FIXED_RENAMES.iter().copied());
            for (from, to) in all {
                if let Some(rest) = strip_path_prefix(&error.path, from) {
                    error.path = format!("{to}{rest}");
                    break;
                }
            }
            error
        })
    }
}

/// Contract paths that always name the same AG-UI field.
const FIXED_RENAMES: &[(&str, &str)] = &[
    ("session_id", "threadId"),
    ("config", "forwardedProps.config"),
    ("host_context.background", "context"),
    ("host_context.extensions.state", "state"),
    ("host_context.actions", "tools"),
    ("host_context", "state"),
];

/// What follows `prefix` in `path` when `path` is `prefix` or a field or
/// index below it (`tools` matches `tools[0]` and `tools.x`, not `toolsx`).
fn strip_path_prefix<'a>(path: &'a str, prefix: &str) -> Option<&'a str> {
    let rest = path.strip_prefix(prefix)?;
    (rest.is_empty() || rest.starts_with('.') || rest.starts_with('[')).then_some(rest)
}

fn required_string(input: &Map<String, Value>, key: &str) -> Result<String, ValidationError> {
    match input.get(key) {
        Some(Value::String(value)) => Ok(value.clone()),
        None | Some(Value::Null) => Err(ValidationError::new(key, "is required")),
        Some(_) => Err(ValidationError::new(key, "expected a string")),
    }
}

fn message_id(message: &Value, path: &str) -> Result<String, ValidationError> {
    match message.get("id") {
        Some(Value::String(id)) => Ok(id.clone()),
        _ => Err(ValidationError::new(
            format!("{path}.id"),
            "expected a string",
        )),
    }
}

fn parse_tool_message(message: &Value, index: usize) -> Result<ToolMessage, ValidationError> {
    let path = format!("messages[{index}]");
    let id = message_id(message, &path)?;
    let Some(tool_call_id) = message.get("toolCallId").and_then(Value::as_str) else {
        return Err(ValidationError::new(
            format!("{path}.toolCallId"),
            "expected a string",
        ));
    };
    let text = content_text(message.get("content"), &format!("{path}.content"))?;
    // The content is JSON text inside a string: the body's depth check never saw it.
    actors::contract::depth::check_text(text.as_bytes(), &format!("{path}.content"))?;
    let output = serde_json::from_str::<Value>(&text).unwrap_or(Value::String(text.clone()));
    let (result, failed) = match message.get("error") {
        None | Some(Value::Null) => (output, false),
        // An error that is JSON text is the result as JSON, as content is.
        Some(Value::String(error)) if text.is_empty() => (
            serde_json::from_str::<Value>(error).unwrap_or_else(|_| json!(error)),
            true,
        ),
        Some(Value::String(error)) => (json!({"error": error, "output": output}), true),
        Some(_) => {
            return Err(ValidationError::new(
                format!("{path}.error"),
                "expected a string",
            ))
        }
    };
    Ok(ToolMessage {
        index,
        id,
        tool_call_id: tool_call_id.to_string(),
        result,
        failed,
    })
}

/// A tool message's content as text: a string, or its text parts joined.
fn content_text(content: Option<&Value>, path: &str) -> Result<String, ValidationError> {
    match content {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(text)) => Ok(text.clone()),
        Some(Value::Array(parts)) => Ok(parts
            .iter()
            .filter(|part| part.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|part| part.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n")),
        Some(_) => Err(ValidationError::new(
            path,
            "expected a string or an array of parts",
        )),
    }
}

fn parse_user_message(message: &Value, index: usize) -> Result<UserMessage, ValidationError> {
    let path = format!("messages[{index}]");
    let id = message_id(message, &path)?;
    let content_path = format!("{path}.content");
    let mut texts = Vec::new();
    let mut attachments = Vec::new();
    match message.get("content") {
        None | Some(Value::Null) => {}
        Some(Value::String(text)) => texts.push(text.clone()),
        Some(Value::Array(parts)) => {
            for (j, part) in parts.iter().enumerate() {
                let part_path = format!("{content_path}[{j}]");
                match part.get("type").and_then(Value::as_str) {
                    Some("text") => match part.get("text") {
                        Some(Value::String(text)) => texts.push(text.clone()),
                        _ => {
                            return Err(ValidationError::new(
                                format!("{part_path}.text"),
                                "expected a string",
                            ))
                        }
                    },
                    Some(kind) => {
                        attachments.push((part_attachment(part, kind, &part_path)?, part_path))
                    }
                    None => {
                        return Err(ValidationError::new(
                            format!("{part_path}.type"),
                            "expected a string",
                        ))
                    }
                }
            }
        }
        Some(_) => {
            return Err(ValidationError::new(
                content_path,
                "expected a string or an array of parts",
            ))
        }
    }
    Ok(UserMessage {
        index,
        id,
        text: texts.join("\n"),
        attachments,
    })
}

/// A media part as a contract attachment (`purpose: "reference"`).
fn part_attachment(part: &Value, kind: &str, path: &str) -> Result<Value, ValidationError> {
    let (mime_type, data, url) = match kind {
        // The pre-1.0 shape: `{type: "binary", mimeType, data | url, filename?}`.
        "binary" => (
            part.get("mimeType").and_then(Value::as_str),
            part.get("data").and_then(Value::as_str),
            part.get("url").and_then(Value::as_str),
        ),
        "image" | "document" => {
            let source = part.get("source");
            let source_type = source
                .and_then(|source| source.get("type"))
                .and_then(Value::as_str);
            let value = source
                .and_then(|source| source.get("value"))
                .and_then(Value::as_str);
            let mime_type = source
                .and_then(|source| source.get("mimeType"))
                .and_then(Value::as_str);
            match source_type {
                Some("data") => (mime_type, value, None),
                Some("url") => (mime_type, None, value),
                _ => {
                    return Err(ValidationError::new(
                        format!("{path}.source"),
                        "expected a source of type data or url",
                    ))
                }
            }
        }
        other => {
            return Err(ValidationError::new(
                format!("{path}.type"),
                format!("{other:?} parts are not supported; send text, image or document"),
            ))
        }
    };
    let is_image = match kind {
        "image" => true,
        "document" => false,
        _ => mime_type.is_some_and(|mime| mime.starts_with("image/")),
    };
    let mut attachment = json!({
        "kind": if is_image { "image" } else { "document" },
        "purpose": "reference",
    });
    if let Some(mime) = mime_type {
        attachment["media_type"] = json!(mime);
    }
    if let Some(name) = part.get("filename").and_then(Value::as_str) {
        attachment["name"] = json!(name);
    }
    match (data, url) {
        (Some(data), _) => {
            let Some(mime) = mime_type else {
                return Err(ValidationError::new(
                    format!("{path}.mimeType"),
                    "is required with inline data",
                ));
            };
            attachment["data_uri"] = json!(format!("data:{mime};base64,{data}"));
        }
        (None, Some(url)) => attachment["url"] = json!(url),
        (None, None) => return Err(ValidationError::new(path, "needs inline data or a url")),
    }
    Ok(attachment)
}

/// Whether a run's `state` is a host context: it carries `version`, or
/// every key of it is a host context field (`view`, `actions`, ...).
/// Anything else is the application's own state.
fn is_host_context(state: &Map<String, Value>) -> bool {
    state.contains_key("version")
        || (!state.is_empty() && state.keys().all(|key| HostContext::is_field(key)))
}

/// The host context of every step of the run, and how its contract paths
/// read in AG-UI terms.
fn build_host_context(
    input: &Map<String, Value>,
) -> Result<(Value, Vec<(String, String)>), ValidationError> {
    let mut context = Map::new();
    let mut renames = Vec::new();
    match input.get("state") {
        Some(Value::Object(state)) if is_host_context(state) => {
            context = state.clone();
        }
        None | Some(Value::Null) => {}
        Some(Value::Object(state)) if state.is_empty() => {}
        Some(state) => {
            context.insert("extensions".into(), json!({"state": state}));
        }
    }
    // A missing version reads as 1, as on every door; a present one is
    // checked by the contract (`state.version`).
    context.entry("version").or_insert(json!(1));
    let tools = match input.get("tools") {
        None | Some(Value::Null) => &Vec::new(),
        Some(Value::Array(tools)) => tools,
        Some(_) => return Err(ValidationError::new("tools", "expected an array of tools")),
    };
    if !tools.is_empty() {
        let mut actions = match context.remove("actions") {
            Some(Value::Array(actions)) => actions,
            None | Some(Value::Null) => Vec::new(),
            Some(_) => return Err(ValidationError::new("state.actions", "expected an array")),
        };
        let n_state_actions = actions.len();
        for i in 0..n_state_actions {
            renames.push((
                format!("host_context.actions[{i}]"),
                format!("state.actions[{i}]"),
            ));
        }
        for (i, tool) in tools.iter().enumerate() {
            let Some(tool) = tool.as_object() else {
                return Err(ValidationError::new(
                    format!("tools[{i}]"),
                    "expected an object",
                ));
            };
            let mut action = Map::new();
            for key in ["name", "description", "parameters"] {
                if let Some(value) = tool.get(key) {
                    action.insert(key.into(), value.clone());
                }
            }
            action
                .entry("parameters")
                .or_insert_with(|| json!({"type": "object", "properties": {}}));
            renames.push((
                format!("host_context.actions[{}]", n_state_actions + i),
                format!("tools[{i}]"),
            ));
            actions.push(Value::Object(action));
        }
        context.insert("actions".into(), Value::Array(actions));
    }
    let entries = match input.get("context") {
        None | Some(Value::Null) => &Vec::new(),
        Some(Value::Array(entries)) => entries,
        Some(_) => return Err(ValidationError::new("context", "expected an array")),
    };
    if !entries.is_empty() {
        let mut background = match context.remove("background") {
            Some(Value::Object(background)) => background,
            _ => Map::new(),
        };
        for (i, entry) in entries.iter().enumerate() {
            let description = entry.get("description").and_then(Value::as_str);
            let Some(value) = entry.get("value").and_then(Value::as_str) else {
                return Err(ValidationError::new(
                    format!("context[{i}].value"),
                    "expected a string",
                ));
            };
            let name = match description {
                Some(name) if !name.is_empty() && !background.contains_key(name) => {
                    name.to_string()
                }
                _ => format!("context_{i}"),
            };
            background.insert(name, json!({"summary": value}));
        }
        context.insert("background".into(), Value::Object(background));
    }
    Ok((Value::Object(context), renames))
}

#[cfg(test)]
mod tests {
    use actors::contract::{AttachmentSource, ToolOutcome};

    use super::*;

    fn run(input: Value) -> RunInput {
        RunInput::parse(&input).expect("valid input")
    }

    #[test]
    fn only_the_last_user_message_after_the_last_assistant_is_new() {
        let input = run(json!({
            "threadId": "t1", "runId": "r1",
            "messages": [
                {"id": "u1", "role": "user", "content": "old"},
                {"id": "a1", "role": "assistant", "content": "hi"},
                {"id": "s1", "role": "system", "content": "ignored"},
                {"id": "u2", "role": "user", "content": "new"}
            ]
        }));
        assert!(input.tool_messages.is_empty());
        let requests = input.requests(&[], false).unwrap();
        assert_eq!(requests.len(), 1);
        assert_eq!(requests[0].id.as_str(), "u2");
        assert_eq!(requests[0].session_id.as_str(), "t1");
        assert_eq!(requests[0].content, "new");
        assert!(requests[0].continuation.is_none());
        assert!(requests[0].host_context.is_none());
        let replacing = input.requests(&[], true).unwrap();
        assert!(replacing[0]
            .host_context
            .as_ref()
            .unwrap()
            .actions
            .is_empty());
    }

    #[test]
    fn tool_messages_follow_the_pending_order() {
        let input = run(json!({
            "threadId": "t1", "runId": "r2",
            "messages": [
                {"id": "a1", "role": "assistant", "toolCalls": []},
                {"id": "m2", "role": "tool", "toolCallId": "c2", "content": "{\"ok\": 2}"},
                {"id": "m1", "role": "tool", "toolCallId": "c1", "content": "done", "error": "boom"}
            ]
        }));
        let requests = input.requests(&["c1".into(), "c2".into()], false).unwrap();
        let continuations: Vec<_> = requests
            .iter()
            .map(|request| request.continuation.clone().unwrap())
            .collect();
        assert_eq!(continuations[0].tool_call_id.as_str(), "c1");
        assert_eq!(continuations[0].outcome, ToolOutcome::Failed);
        assert_eq!(
            continuations[0].result,
            json!({"error": "boom", "output": "done"})
        );
        assert_eq!(continuations[1].tool_call_id.as_str(), "c2");
        assert_eq!(continuations[1].result, json!({"ok": 2}));
        assert_eq!(continuations[1].outcome, ToolOutcome::Success);
    }

    #[test]
    fn a_tool_message_for_no_pending_call_still_reaches_the_core() {
        let input = run(json!({
            "threadId": "t1", "runId": "r",
            "messages": [{"id": "m1", "role": "tool", "toolCallId": "gone", "content": "x"}]
        }));
        let requests = input.requests(&[], false).unwrap();
        assert_eq!(
            requests[0]
                .continuation
                .as_ref()
                .unwrap()
                .tool_call_id
                .as_str(),
            "gone"
        );
    }

    #[test]
    fn tools_context_state_and_config_become_the_host_context_and_config() {
        let input = run(json!({
            "threadId": "t1", "runId": "r",
            "messages": [{"id": "u1", "role": "user", "content": "hi"}],
            "tools": [{"name": "pick", "description": "Pick one.", "parameters": {"type": "object", "properties": {}}}],
            "context": [{"description": "clock", "value": "10:00"}, {"description": "", "value": "x"}],
            "state": {"filter": "open"},
            "forwardedProps": {"config": {"temperature": 0.5}, "other": 1}
        }));
        let request = &input.requests(&[], false).unwrap()[0];
        let context = request.host_context.as_ref().unwrap();
        assert_eq!(context.actions[0].name, "pick");
        let background = context.background.as_ref().unwrap();
        assert_eq!(background["clock"], json!({"summary": "10:00"}));
        assert_eq!(background["context_1"], json!({"summary": "x"}));
        assert_eq!(
            context.extensions.as_ref().unwrap()["state"],
            json!({"filter": "open"})
        );
        assert_eq!(request.config.temperature, Some(0.5));
    }

    #[test]
    fn a_version_1_state_is_the_host_context() {
        let input = run(json!({
            "threadId": "t1", "runId": "r",
            "messages": [{"id": "u1", "role": "user", "content": "hi"}],
            "state": {"version": 1, "view": {"name": "tasks"}}
        }));
        let request = &input.requests(&[], false).unwrap()[0];
        let context = request.host_context.as_ref().unwrap();
        assert_eq!(context.view.as_ref().unwrap().name, "tasks");
        assert!(context.extensions.is_none());
    }

    #[test]
    fn a_state_of_host_context_fields_without_version_is_the_host_context() {
        let input = run(json!({
            "threadId": "t1", "runId": "r",
            "messages": [{"id": "u1", "role": "user", "content": "hi"}],
            "state": {"view": {"name": "tasks"}, "actions": [{"name": "open", "description": "Open."}]}
        }));
        let request = &input.requests(&[], false).unwrap()[0];
        let context = request.host_context.as_ref().unwrap();
        assert_eq!(context.view.as_ref().unwrap().name, "tasks");
        assert_eq!(context.actions[0].name, "open");
        assert!(context.extensions.is_none());
    }

    #[test]
    fn a_state_with_another_version_is_refused_naming_it() {
        let input = run(json!({
            "threadId": "t1", "runId": "r",
            "messages": [{"id": "u1", "role": "user", "content": "hi"}],
            "state": {"version": 2, "view": {"name": "tasks"}}
        }));
        let error = input.requests(&[], false).unwrap_err();
        assert_eq!(error.path, "state.version", "{error}");
    }

    #[test]
    fn a_failure_given_as_json_text_is_stored_as_json() {
        let input = run(json!({
            "threadId": "t1", "runId": "r",
            "messages": [{"id": "t1", "role": "tool", "toolCallId": "c1", "content": "", "error": "{\"reason\": \"gone\"}"}]
        }));
        assert_eq!(input.tool_messages[0].result, json!({"reason": "gone"}));
        assert!(input.tool_messages[0].failed);
    }

    #[test]
    fn media_parts_become_reference_attachments() {
        let input = run(json!({
            "threadId": "t1", "runId": "r",
            "messages": [{"id": "u1", "role": "user", "content": [
                {"type": "text", "text": "look"},
                {"type": "image", "source": {"type": "data", "value": "AAAA", "mimeType": "image/png"}},
                {"type": "binary", "mimeType": "application/pdf", "url": "https://x.test/a.pdf"}
            ]}]
        }));
        let request = &input.requests(&[], false).unwrap()[0];
        assert_eq!(request.content, "look");
        let sources: Vec<_> = request
            .attachments
            .iter()
            .map(|a| a.source.clone())
            .collect();
        assert_eq!(
            sources,
            [
                AttachmentSource::DataUri("data:image/png;base64,AAAA".into()),
                AttachmentSource::Url("https://x.test/a.pdf".into())
            ]
        );
    }

    #[test]
    fn nothing_after_the_last_assistant_message_asks_for_the_history() {
        let stored = json!([{"id": "u1", "role": "user", "content": "hi"},
                            {"id": "u1:reply", "role": "assistant", "content": "hello"}]);
        for messages in [json!([]), stored] {
            let input = run(json!({"threadId": "t", "runId": "r", "messages": messages}));
            assert!(input.wants_history(), "{input:?}");
        }
        let new = run(
            json!({"threadId": "t", "messages": [{"id": "u1", "role": "user", "content": "hi"}]}),
        );
        assert!(!new.wants_history());
    }

    /// Asserts that `input` is refused with an error at `path`.
    fn check(input: Value, path: &str) {
        let error = RunInput::parse(&input)
            .and_then(|run| run.requests(&[], false))
            .expect_err("refused");
        assert_eq!(error.path.split(':').next().unwrap(), path, "{error}");
    }

    #[test]
    fn contract_errors_name_the_agui_field() {
        let user = json!([{"id": "u1", "role": "user", "content": "hi"}]);
        check(json!({"runId": "r", "messages": user}), "threadId");
        check(json!({"threadId": "t", "runId": "r"}), "messages");
        check(json!({"threadId": "t", "messages": "hi"}), "messages");
        check(
            json!({"threadId": "t", "messages": user, "tools": [{"name": "a", "description": "d", "parameters": {"type": "string"}}]}),
            "tools[0].parameters",
        );
        check(
            json!({"threadId": "t", "messages": user, "forwardedProps": {"config": {"temperature": 9}}}),
            "forwardedProps.config.temperature",
        );
        check(json!({"threadId": "", "messages": user}), "threadId");
        check(
            json!({"threadId": "t", "messages": [{"id": "u", "role": "user", "content": [{"type": "audio", "source": {"type": "data", "value": "A", "mimeType": "audio/wav"}}]}]}),
            "messages[0].content[0].type",
        );
    }
}
