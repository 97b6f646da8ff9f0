//! The message body of `POST /api/chat` and Socket.IO `assistant_message`
//! (runtime.md, "The message body"). `ChatRequest::parse` turns the JSON into
//! a request the session can act on; it checks shape only, never session
//! state (duplicate ids, pending calls: those are the session's).

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;

use super::attachment::Attachment;
use super::error::ValidationError;
use super::host_context::{HostContext, MAX_ATTACHMENTS};
use super::keys::{index_path, quoted, Fields};
use crate::ids::{is_valid_id, MessageId, SessionId, ToolCallId, MAX_ID_CHARS};
use crate::model::ModelId;

/// The path of an error about the body as a whole (it is not an object).
pub const BODY_PATH: &str = "body";
/// The largest `config.max_turns`.
pub const MAX_TURNS_LIMIT: u32 = 100;
/// The largest `config.temperature`.
pub const MAX_TEMPERATURE: f64 = 2.0;

/// What an `Idempotency-Key` leaves on the message it sent: digests only, so
/// neither the key nor the principal is shown with the conversation.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct IdempotencyMark {
    /// The key, scoped to its principal (a digest of both): another caller's
    /// identical key is another key.
    pub key: String,
    /// A digest of the request as sent (its body and query string).
    pub body: String,
}

/// One parsed message body.
#[derive(Clone, Debug, PartialEq)]
pub struct ChatRequest {
    /// The client's id for this message.
    pub id: MessageId,
    pub session_id: SessionId,
    /// The text; may be empty (a continuation, a host_tools receipt).
    pub content: String,
    /// Branch from this message; `None` continues from the active leaf.
    pub parent_id: Option<MessageId>,
    pub message_type: MessageType,
    pub output_mode: OutputMode,
    /// message-level attachments first, then legacy `images` and `screenshot`
    /// folded in as screenshot attachments, then host_context.attachments;
    /// exact duplicates dropped (keep first).
    pub attachments: Vec<Attachment>,
    pub host_context: Option<HostContext>,
    pub config: RequestConfig,
    /// Present when the body answers a pending host action.
    pub continuation: Option<Continuation>,
    /// Set by the edge from an `Idempotency-Key` header, never from the body.
    pub idempotency: Option<Box<IdempotencyMark>>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MessageType {
    #[default]
    Standard,
    Steering,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutputMode {
    #[default]
    Text,
    /// Silent host decisions (host-contract.md).
    HostTools,
}

/// Per-request overrides; budgets can only be lowered (the session enforces that).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RequestConfig {
    /// `provider:name`, already checked by `ModelId::parse`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_budget: Option<u32>,
    /// 0.0 ..= 2.0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// 1 ..= 100.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<u32>,
}

/// The host's answer to a pending host action.
#[derive(Clone, Debug, PartialEq)]
pub struct Continuation {
    pub tool_call_id: ToolCallId,
    /// Any JSON, null included; a missing `tool_result` reads as null.
    pub result: Value,
    pub outcome: ToolOutcome,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolOutcome {
    #[default]
    Success,
    Failed,
}

const FIELDS: &[&str] = &[
    "id",
    "session_id",
    "content",
    "parent_id",
    "message_type",
    "output_mode",
    "attachments",
    "images",
    "screenshot",
    "host_context",
    "config",
    "tool_call_id",
    "tool_result",
    "tool_outcome",
];
const CONFIG_FIELDS: &[&str] = &[
    "default_model",
    "thinking_budget",
    "temperature",
    "max_turns",
];

const MESSAGE_TYPES: &[(&str, MessageType)] = &[
    ("standard", MessageType::Standard),
    ("steering", MessageType::Steering),
];
const OUTPUT_MODES: &[(&str, OutputMode)] = &[
    ("text", OutputMode::Text),
    ("host_tools", OutputMode::HostTools),
];
const TOOL_OUTCOMES: &[(&str, ToolOutcome)] = &[
    ("success", ToolOutcome::Success),
    ("failed", ToolOutcome::Failed),
];

impl ChatRequest {
    /// Validates a message body; field paths are bare at the top level
    /// (`session_id`), and `body` when the value is not an object.
    pub fn parse(value: &Value) -> Result<ChatRequest, ValidationError> {
        if !value.is_object() {
            return Err(ValidationError::new(BODY_PATH, "expected a JSON object"));
        }
        super::depth::check_value(value, "")?;
        let fields = Fields::read(value, "", FIELDS)?;
        let id = MessageId::new(required_id(&fields, "id")?);
        let session_id = SessionId::new(required_id(&fields, "session_id")?);
        let content = fields.string("content")?.unwrap_or_default();
        let parent_id = optional_id(&fields, "parent_id")?.map(MessageId::new);
        let message_type = fields
            .one_of("message_type", MESSAGE_TYPES)?
            .unwrap_or_default();
        let output_mode = fields
            .one_of("output_mode", OUTPUT_MODES)?
            .unwrap_or_default();
        let host_context = match fields.value("host_context") {
            Some(context) => Some(HostContext::parse(context, &fields.path("host_context"))?),
            None => None,
        };
        let attachments = parse_attachments(&fields, host_context.as_ref())?;
        let config = match fields.value("config") {
            Some(config) => parse_config(config, &fields.path("config"))?,
            None => RequestConfig::default(),
        };
        let continuation = parse_continuation(&fields)?;
        Ok(ChatRequest {
            id,
            session_id,
            content,
            parent_id,
            message_type,
            output_mode,
            attachments,
            host_context,
            config,
            continuation,
            idempotency: None,
        })
    }
}

/// The bodies most messages are: `id`, `session_id`, `content` (which may
/// be left out), and a `host_context` or a continuation's `tool_call_id`
/// and `tool_result`; no other key, none null, none in camelCase.
#[derive(Default)]
struct PlainBody<'a> {
    id: Option<Cow<'a, str>>,
    session_id: Option<Cow<'a, str>>,
    content: Option<Cow<'a, str>>,
    host_context: Option<&'a RawValue>,
    tool_call_id: Option<Cow<'a, str>>,
    tool_result: Option<&'a RawValue>,
}

/// Reads a `PlainBody`, giving up at the first key that is not one of its
/// own (or repeats one) with an error that formats nothing: serde's derived
/// "unknown field" error spelled out every expected field first.
struct PlainVisitor;

impl<'de> serde::de::Visitor<'de> for PlainVisitor {
    type Value = PlainBody<'de>;

    fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
        formatter.write_str("a message body")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(
        self,
        mut map: A,
    ) -> Result<PlainBody<'de>, A::Error> {
        use serde::de::Error;
        fn once<T, E: Error>(slot: &mut Option<T>, value: T) -> Result<(), E> {
            match slot.replace(value) {
                None => Ok(()),
                Some(_) => Err(E::custom("")),
            }
        }
        let mut body = PlainBody::default();
        while let Some(key) = map.next_key::<&'de str>()? {
            match key {
                "id" => once(&mut body.id, map.next_value::<Text<'de>>()?.0)?,
                "session_id" => once(&mut body.session_id, map.next_value::<Text<'de>>()?.0)?,
                "content" => once(&mut body.content, map.next_value::<Text<'de>>()?.0)?,
                "tool_call_id" => once(&mut body.tool_call_id, map.next_value::<Text<'de>>()?.0)?,
                "host_context" => once(&mut body.host_context, map.next_value()?)?,
                "tool_result" => once(&mut body.tool_result, map.next_value()?)?,
                _ => return Err(A::Error::custom("")),
            }
        }
        Ok(body)
    }
}

/// A JSON string, borrowed from the body unless it holds escapes.
struct Text<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Text<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TextVisitor;
        impl<'de> serde::de::Visitor<'de> for TextVisitor {
            type Value = Text<'de>;

            fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
                formatter.write_str("a string")
            }

            fn visit_borrowed_str<E>(self, text: &'de str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Borrowed(text)))
            }

            fn visit_str<E>(self, text: &str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(text.to_owned())))
            }

            fn visit_string<E>(self, text: String) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(text)))
            }
        }
        deserializer.deserialize_str(TextVisitor)
    }
}

impl ChatRequest {
    /// `parse` for the bodies most messages are (see `PlainBody`), read
    /// straight from their text: building a `serde_json::Value` first (a
    /// map per object, each key hashed) cost more than the rest of a turn's
    /// parsing, and a repeated host context is found by its text
    /// (`HostContext::from_text`). `None` for any other body, valid
    /// or not; `parse` then reads it and names what is wrong. Whatever this
    /// accepts, `parse` accepts as the same request (unit test
    /// `a_plain_body_reads_as_parse_reads_it`). Boxed, and written in place
    /// into its box: the request is 760 bytes, and moves to its turn.
    pub fn parse_plain(body: &[u8]) -> Option<Box<ChatRequest>> {
        use serde::Deserializer as _;
        // Too deep: `parse` names where. (Counting brackets clears most bodies.)
        super::depth::check_text(body, "").ok()?;
        let mut deserializer = serde_json::Deserializer::from_slice(body);
        let plain = deserializer.deserialize_map(PlainVisitor).ok()?;
        deserializer.end().ok()?;
        let (Some(id), Some(session_id)) = (plain.id, plain.session_id) else {
            return None;
        };
        if !is_valid_id(&id) || !is_valid_id(&session_id) {
            return None;
        }
        let host_context = match plain.host_context {
            None => None,
            // Null reads as absent there; rare enough to leave to `parse`.
            Some(raw) if raw.get() == "null" => return None,
            Some(raw) => Some(HostContext::from_text(raw.get())?),
        };
        let continuation = match (plain.tool_call_id, plain.tool_result) {
            (None, None) => None,
            (None, Some(_)) => return None,
            (Some(tool_call_id), result) => {
                if !is_valid_id(&tool_call_id) {
                    return None;
                }
                Some(Continuation {
                    tool_call_id: ToolCallId::new(&*tool_call_id),
                    result: match result {
                        Some(raw) => serde_json::from_str(raw.get()).ok()?,
                        None => Value::Null,
                    },
                    outcome: ToolOutcome::default(),
                })
            }
        };
        let request = Box::new_uninit();
        Some(Box::write(
            request,
            ChatRequest {
                id: MessageId::new(&*id),
                session_id: SessionId::new(&*session_id),
                content: plain.content.map(Cow::into_owned).unwrap_or_default(),
                parent_id: None,
                message_type: MessageType::default(),
                output_mode: OutputMode::default(),
                attachments: host_context
                    .as_ref()
                    .map(|context| without_duplicates(context.attachments.clone()))
                    .unwrap_or_default(),
                host_context,
                config: RequestConfig::default(),
                continuation,
                idempotency: None,
            },
        ))
    }
}

/// A required client-chosen id of 1..=64 characters.
pub(crate) fn required_id(fields: &Fields<'_>, name: &str) -> Result<String, ValidationError> {
    match optional_id(fields, name)? {
        Some(id) => Ok(id),
        None => Err(fields.error(name, "is required")),
    }
}

fn optional_id(fields: &Fields<'_>, name: &str) -> Result<Option<String>, ValidationError> {
    let Some(id) = fields.str(name)? else {
        return Ok(None);
    };
    if !is_valid_id(id) {
        return Err(fields.error(name, format!("must be 1 to {MAX_ID_CHARS} characters")));
    }
    Ok(Some(id.to_string()))
}

/// message attachments, then legacy images and screenshot, then the context's; duplicates dropped.
fn parse_attachments(
    fields: &Fields<'_>,
    host_context: Option<&HostContext>,
) -> Result<Vec<Attachment>, ValidationError> {
    let mut attachments = Vec::new();
    let attachments_path = fields.path("attachments");
    for (i, value) in fields
        .array("attachments", MAX_ATTACHMENTS)?
        .iter()
        .enumerate()
    {
        attachments.push(Attachment::parse(value, &index_path(&attachments_path, i))?);
    }
    let images_path = fields.path("images");
    for (i, value) in fields.array("images", MAX_ATTACHMENTS)?.iter().enumerate() {
        attachments.push(Attachment::parse_legacy_screenshot(
            value,
            &index_path(&images_path, i),
        )?);
    }
    if let Some(screenshot) = fields.value("screenshot") {
        attachments.push(Attachment::parse_legacy_screenshot(
            screenshot,
            &fields.path("screenshot"),
        )?);
    }
    if let Some(context) = host_context {
        attachments.extend(context.attachments.iter().cloned());
    }
    Ok(without_duplicates(attachments))
}

/// `attachments` with exact duplicates dropped, the first kept.
fn without_duplicates(attachments: Vec<Attachment>) -> Vec<Attachment> {
    let mut unique: Vec<Attachment> = Vec::with_capacity(attachments.len());
    for attachment in attachments {
        if !unique.contains(&attachment) {
            unique.push(attachment);
        }
    }
    unique
}

fn parse_config(value: &Value, path: &str) -> Result<RequestConfig, ValidationError> {
    let fields = Fields::read(value, path, CONFIG_FIELDS)?;
    let default_model = fields.string("default_model")?;
    if let Some(model) = &default_model {
        if ModelId::parse(model).is_none() {
            return Err(fields.error(
                "default_model",
                format!("{} is not of the form provider:name", quoted(model)),
            ));
        }
    }
    let thinking_budget = fields.u32("thinking_budget")?;
    let temperature = fields.f64("temperature")?;
    if let Some(temperature) = temperature {
        if !(0.0..=MAX_TEMPERATURE).contains(&temperature) {
            return Err(fields.error(
                "temperature",
                format!("must be between 0 and {MAX_TEMPERATURE}"),
            ));
        }
    }
    let max_turns = fields.u32("max_turns")?;
    if let Some(max_turns) = max_turns {
        if !(1..=MAX_TURNS_LIMIT).contains(&max_turns) {
            return Err(fields.error(
                "max_turns",
                format!("must be between 1 and {MAX_TURNS_LIMIT}"),
            ));
        }
    }
    Ok(RequestConfig {
        default_model,
        thinking_budget,
        temperature,
        max_turns,
    })
}

fn parse_continuation(fields: &Fields<'_>) -> Result<Option<Continuation>, ValidationError> {
    let outcome = fields.one_of("tool_outcome", TOOL_OUTCOMES)?;
    let Some(tool_call_id) = optional_id(fields, "tool_call_id")? else {
        // `raw`: a tool_result of null still needs a tool_call_id.
        if fields.raw("tool_result").is_some() {
            return Err(fields.error("tool_result", "is only allowed with tool_call_id"));
        }
        if outcome.is_some() {
            return Err(fields.error("tool_outcome", "is only allowed with tool_call_id"));
        }
        return Ok(None);
    };
    Ok(Some(Continuation {
        tool_call_id: ToolCallId::new(tool_call_id),
        result: fields.raw("tool_result").cloned().unwrap_or(Value::Null),
        outcome: outcome.unwrap_or_default(),
    }))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::contract::attachment::{AttachmentPurpose, AttachmentSource};
    use crate::contract::cases::invalid_body_cases;

    /// Asserts that `body` is rejected and the error sentence starts with `path`.
    fn check(body: &Value, path: &str, label: &str) {
        match ChatRequest::parse(body) {
            Ok(_) => panic!("{label}: accepted, expected an error at {path}"),
            Err(err) => {
                let sentence = err.to_string();
                assert!(
                    sentence.starts_with(&format!("{path}: ")),
                    "{label}: error {sentence:?} does not name {path}"
                );
            }
        }
    }

    #[test]
    fn every_invalid_case_is_rejected_at_its_path() {
        let cases = invalid_body_cases();
        assert!(cases.len() >= 70, "only {} cases", cases.len());
        for (body, path, label) in &cases {
            check(body, path, label);
        }
    }

    #[test]
    fn invalid_case_labels_are_unique() {
        let cases = invalid_body_cases();
        let mut labels: Vec<&str> = cases.iter().map(|(_, _, label)| *label).collect();
        labels.sort_unstable();
        labels.dedup();
        assert_eq!(labels.len(), cases.len());
    }

    /// A host context of every kind of part: keys in a host's own order,
    /// nested data, an action with a schema.
    const CONTEXT: &str = r#"{"version":1,"host":{"name":"bench","kind":"browser"},"view":{"name":"tasks","data":{"z":1,"a":[{"b":null}]}},"actions":[{"name":"select_issue","description":"Select an issue.","parameters":{"type":"object","properties":{"number":{"type":"integer"}},"required":["number"]}}]}"#;

    /// `parse_plain` takes only bodies `parse` accepts, as the same
    /// request, and leaves everything else (every invalid case among it) to
    /// `parse`.
    #[test]
    fn a_plain_body_reads_as_parse_reads_it() {
        let id_64 = "é".repeat(64);
        let plain = [
            r#"{"id":"m1","session_id":"s1","content":"hello"}"#.to_string(),
            r#"{"content":"hi","session_id":"s1","id":"m1"}"#.to_string(),
            r#" {"id":"m1","session_id":"s1"} "#.to_string(),
            r#"{"id":"m\"1","session_id":"s\u00e91","content":"line\nnext \ud83d\ude00"}"#
                .to_string(),
            format!(r#"{{"id":"{id_64}","session_id":"{id_64}","content":""}}"#),
            format!(r#"{{"id":"m1","session_id":"s1","content":"hi","host_context":{CONTEXT}}}"#),
            format!(r#"{{"host_context":{CONTEXT},"id":"m1","session_id":"s1"}}"#),
            r#"{"id":"m2","session_id":"s1","tool_call_id":"c1","tool_result":{"selected":[42]}}"#
                .to_string(),
            r#"{"id":"m2","session_id":"s1","content":"","tool_call_id":"c1","tool_result":null}"#
                .to_string(),
            r#"{"id":"m2","session_id":"s1","tool_call_id":"c1"}"#.to_string(),
            r#"{"id":"m1","session_id":"s1","host_context":{"attachments":[{"kind":"text","text":"note"},{"url":"https://x.test/r.png"},{"kind":"text","text":"note"}]}}"#
                .to_string(),
        ];
        for body in &plain {
            let fast = ChatRequest::parse_plain(body.as_bytes());
            let value: Value = serde_json::from_str(body).unwrap();
            let parsed = ChatRequest::parse(&value).unwrap();
            assert_eq!(fast, Some(Box::new(parsed)), "{body}");
        }
        let id_65 = "x".repeat(65);
        let not_plain = [
            r#"["m1","s1","hello"]"#.to_string(),
            r#"{"id":"m1","sessionId":"s1"}"#.to_string(),
            r#"{"id":"m1","session_id":"s1","content":null}"#.to_string(),
            r#"{"id":"m1","session_id":"s1","id":"m2"}"#.to_string(),
            r#"{"id":"m1","session_id":"s1","parent_id":"m0"}"#.to_string(),
            r#"{"id":1,"session_id":"s1"}"#.to_string(),
            r#"{"id":"m1","session_id":"s1"} x"#.to_string(),
            r#"{"\u0069d":"m1","session_id":"s1"}"#.to_string(),
            r#"{"id":"m1","content":"no session"}"#.to_string(),
            r#"{"id":"m1","session_id":"s1","host_context":null}"#.to_string(),
            r#"{"id":"m1","session_id":"s1","hostContext":{"version":1}}"#.to_string(),
            r#"{"id":"m1","session_id":"s1","host_context":{"version":2}}"#.to_string(),
            r#"{"id":"m1","session_id":"s1","host_context":{"version":1},"host_context":{"version":1}}"#
                .to_string(),
            r#"{"id":"m1","session_id":"s1","host_context":{"attachments":[{"kind":"image"}]}}"#
                .to_string(),
            r#"{"id":"m2","session_id":"s1","tool_result":{"selected":42}}"#.to_string(),
            r#"{"id":"m2","session_id":"s1","tool_call_id":"","tool_result":1}"#.to_string(),
            r#"{"id":"m2","session_id":"s1","tool_call_id":null}"#.to_string(),
            r#"{"id":"m2","session_id":"s1","tool_call_id":"c1","tool_outcome":"failed"}"#.to_string(),
            format!(
                r#"{{"id":"m2","session_id":"s1","tool_call_id":"c1","tool_result":{}1{}}}"#,
                "[".repeat(70),
                "]".repeat(70)
            ),
            r#"{"id":"","session_id":"s1"}"#.to_string(),
            format!(r#"{{"id":"{id_65}","session_id":"s1"}}"#),
        ];
        let invalid = invalid_body_cases()
            .into_iter()
            .map(|(body, _, _)| body.to_string());
        for body in not_plain.into_iter().chain(invalid) {
            assert_eq!(
                ChatRequest::parse_plain(body.as_bytes()),
                None,
                "{body:.200}"
            );
        }
    }

    #[test]
    fn a_minimal_body_takes_every_default() {
        let request = ChatRequest::parse(&json!({"id": "m1", "session_id": "s1"})).unwrap();
        assert_eq!(request.id.as_str(), "m1");
        assert_eq!(request.session_id.as_str(), "s1");
        assert_eq!(request.content, "");
        assert_eq!(request.parent_id, None);
        assert_eq!(request.message_type, MessageType::Standard);
        assert_eq!(request.output_mode, OutputMode::Text);
        assert!(request.attachments.is_empty());
        assert_eq!(request.host_context, None);
        assert_eq!(request.config, RequestConfig::default());
        assert_eq!(request.continuation, None);
    }

    #[test]
    fn camel_case_keys_are_accepted_everywhere() {
        let body = json!({
            "id": "m1", "sessionId": "s1", "parentId": "m0", "messageType": "steering",
            "outputMode": "host_tools", "content": "hi",
            "config": {"defaultModel": "builtin:echo", "thinkingBudget": 0, "temperature": 0.5, "maxTurns": 3},
            "hostContext": {"capturedAt": "2026-09-05", "view": {"name": "v"}},
            "toolCallId": "c1", "toolResult": {"ok": true}, "toolOutcome": "failed"
        });
        let request = ChatRequest::parse(&body).unwrap();
        assert_eq!(request.parent_id, Some(MessageId::new("m0")));
        assert_eq!(request.message_type, MessageType::Steering);
        assert_eq!(request.output_mode, OutputMode::HostTools);
        assert_eq!(
            request.config,
            RequestConfig {
                default_model: Some("builtin:echo".into()),
                thinking_budget: Some(0),
                temperature: Some(0.5),
                max_turns: Some(3),
            }
        );
        assert_eq!(
            request.host_context.unwrap().captured_at.as_deref(),
            Some("2026-09-05")
        );
        assert_eq!(
            request.continuation,
            Some(Continuation {
                tool_call_id: ToolCallId::new("c1"),
                result: json!({"ok": true}),
                outcome: ToolOutcome::Failed,
            })
        );
    }

    #[test]
    fn a_null_tool_result_is_a_result() {
        let body =
            json!({"id": "m1", "session_id": "s1", "tool_call_id": "c1", "tool_result": null});
        let continuation = ChatRequest::parse(&body).unwrap().continuation.unwrap();
        assert_eq!(continuation.result, Value::Null);
        assert_eq!(continuation.outcome, ToolOutcome::Success);
    }

    #[test]
    fn null_optional_fields_read_as_absent() {
        let body = json!({"id": "m1", "session_id": "s1", "parent_id": null, "host_context": null, "content": null, "config": null});
        let request = ChatRequest::parse(&body).unwrap();
        assert_eq!(request.parent_id, None);
        assert_eq!(request.host_context, None);
    }

    #[test]
    fn attachments_are_merged_in_contract_order_without_duplicates() {
        let shot_a = "data:image/png;base64,AAAA";
        let shot_b = "data:image/png;base64,BBBB";
        let body = json!({
            "id": "m1", "session_id": "s1",
            "attachments": [
                {"url": "https://x.test/r.png"},
                {"purpose": "screenshot", "data_uri": shot_a}
            ],
            "images": [shot_a, shot_b, shot_b],
            "screenshot": shot_b,
            "host_context": {"attachments": [
                {"kind": "text", "text": "note"},
                {"url": "https://x.test/r.png"}
            ]}
        });
        let request = ChatRequest::parse(&body).unwrap();
        let sources: Vec<(AttachmentPurpose, AttachmentSource)> = request
            .attachments
            .iter()
            .map(|a| (a.purpose, a.source.clone()))
            .collect();
        assert_eq!(
            sources,
            [
                (
                    AttachmentPurpose::Reference,
                    AttachmentSource::Url("https://x.test/r.png".into())
                ),
                (
                    AttachmentPurpose::Screenshot,
                    AttachmentSource::DataUri(shot_a.into())
                ),
                (
                    AttachmentPurpose::Screenshot,
                    AttachmentSource::DataUri(shot_b.into())
                ),
                (
                    AttachmentPurpose::Reference,
                    AttachmentSource::Text("note".into())
                ),
            ]
        );
        // The context keeps its own attachments as sent.
        assert_eq!(request.host_context.unwrap().attachments.len(), 2);
    }

    #[test]
    fn ids_of_exactly_64_characters_are_accepted() {
        let id = "x".repeat(MAX_ID_CHARS);
        assert!(ChatRequest::parse(&json!({"id": id, "session_id": id})).is_ok());
    }

    #[test]
    fn config_bounds_are_inclusive() {
        let body =
            json!({"id": "m", "session_id": "s", "config": {"temperature": 2, "max_turns": 100}});
        assert!(ChatRequest::parse(&body).is_ok());
        let body =
            json!({"id": "m", "session_id": "s", "config": {"temperature": 0.0, "max_turns": 1}});
        assert!(ChatRequest::parse(&body).is_ok());
    }

    #[test]
    fn the_spec_host_tools_example_parses() {
        let body = json!({
            "id": "decision-1",
            "session_id": "controller-decision-1",
            "output_mode": "host_tools",
            "content": "Ordered visible conversation through the latest user utterance...",
            "host_context": {
                "actions": [{
                    "name": "set_position",
                    "description": "Set the controlled object's position",
                    "parameters": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"], "additionalProperties": false}
                }],
                "view": {"name": "scene", "data": {"current_x": 0, "revision": 3}}
            }
        });
        let request = ChatRequest::parse(&body).unwrap();
        assert_eq!(request.output_mode, OutputMode::HostTools);
        assert!(request
            .host_context
            .unwrap()
            .action("set_position")
            .is_some());
    }
}
