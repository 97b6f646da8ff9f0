//! `builtin:echo`: a deterministic, offline model that speaks through the same
//! `ModelClient` stream as the network providers, so every path of a turn
//! (deltas, thinking, backend and host tool calls, slow replies, provider
//! errors) can be driven without an API key.
//!
//! It reads the newest user text of the request, one command per line:
//! - `say <text>`: reply with that text; `think <text>`: think it first;
//! - `call <tool> <json>`: call a tool (several lines, several calls in one response);
//! - `hold`: call the `hold` decision tool;
//! - `slow <ms>`: wait that long before each delta (for cancellation);
//! - `fail <error_type>`: fail the request as a provider would (`rate_limit`, `timeout`, ...);
//! - `panic`: panic inside the model stream (proves a panic is one failed turn, nothing more).
//!
//! Any other text is echoed back as `Echo: <text>`. After tool results it
//! answers `Tool results: <name> → <output>; ...` instead of reading commands.
//!
//! Asked for a summary or a memory update (`ModelRequest::purpose`), it is a
//! deterministic summarizer (a count of the user messages folded so far and the start of
//! the newest) and memory extractor (every `remember <fact>` line of the
//! user's text, added to the current list).

use std::time::Duration;

use futures_util::stream::{self, StreamExt};

use super::{
    ChatItem, ContentPart, ModelClient, ModelError, ModelErrorKind, ModelEvent, ModelRequest,
    ModelStream, Purpose, Resend, TokenUsage, Transcript,
};
use crate::error_type::ErrorType;
use crate::text::join;

/// The longest `slow` a request may ask for, so a typo cannot stall a turn for hours.
const MAX_DELAY: Duration = Duration::from_secs(10);

#[derive(Clone, Debug, Default)]
pub struct EchoModel;

/// One step of a scripted reply.
#[derive(Clone, Debug, PartialEq)]
enum Step {
    Event(ModelEvent),
    Fail(ModelError),
    Panic,
}

impl ModelClient for EchoModel {
    fn stream(&self, request: ModelRequest) -> ModelStream {
        let (steps, delay) = plan_reply(&request);
        let input_tokens = request.estimated_input_tokens();
        let output_chars: usize = steps
            .iter()
            .map(|step| match step {
                Step::Event(ModelEvent::TextDelta(text))
                | Step::Event(ModelEvent::ThinkingDelta(text)) => text.len(),
                Step::Event(ModelEvent::ToolCall {
                    arguments, name, ..
                }) => arguments.len() + name.len(),
                _ => 0,
            })
            .sum();
        let usage = Step::Event(ModelEvent::Usage(TokenUsage {
            input_tokens,
            output_tokens: (output_chars as u64).div_ceil(4),
            ..TokenUsage::default()
        }));
        let failed = steps.iter().any(|step| matches!(step, Step::Fail(_)));
        // Chained, not pushed: the steps were allocated at their size.
        let steps = steps.into_iter().chain((!failed).then_some(usage));
        if delay.is_zero() {
            // Ready at once, as a provider's buffered events are: no
            // future per step.
            return stream::iter(steps.map(Step::into_event)).boxed();
        }
        stream::iter(steps)
            .then(move |step| async move {
                tokio::time::sleep(delay).await;
                step.into_event()
            })
            .boxed()
    }
}

impl Step {
    /// What the stream yields for this step, when it is polled.
    fn into_event(self) -> Result<ModelEvent, ModelError> {
        match self {
            Step::Event(event) => Ok(event),
            Step::Fail(error) => Err(error),
            Step::Panic => panic!("the echo model was asked to panic"),
        }
    }
}

fn plan_reply(request: &ModelRequest) -> (Vec<Step>, Duration) {
    let text = latest_user_text(&request.messages);
    if let Some(reply) = auxiliary_reply(request, &text) {
        return (text_deltas(&reply).collect(), Duration::ZERO);
    }
    if let Some(summary) = tool_results_summary(&request.messages) {
        return (text_deltas(&summary).collect(), Duration::ZERO);
    }
    let mut steps = Vec::new();
    let mut delay = Duration::ZERO;
    // "Echo: " and the lines that are not commands, one per line.
    let mut echoed: Option<String> = None;
    for line in text.lines() {
        let line = line.trim();
        let (command, rest) = line.split_once(' ').unwrap_or((line, ""));
        match command {
            "say" => steps.extend(text_deltas(rest)),
            "think" => steps.extend(
                split_deltas(rest).map(|delta| Step::Event(ModelEvent::ThinkingDelta(delta))),
            ),
            "call" => {
                let (name, arguments) = rest.trim().split_once(' ').unwrap_or((rest.trim(), "{}"));
                steps.push(Step::Event(ModelEvent::ToolCall {
                    id: next_call_id(),
                    name: name.to_string(),
                    arguments: arguments.trim().to_string(),
                }));
            }
            "hold" => {
                steps.push(Step::Event(ModelEvent::ToolCall {
                    id: next_call_id(),
                    name: "hold".to_string(),
                    arguments: "{}".to_string(),
                }));
            }
            "slow" => {
                let millis: u64 = rest.trim().parse().unwrap_or(100);
                delay = Duration::from_millis(millis).min(MAX_DELAY);
            }
            "fail" => steps.push(Step::Fail(provider_failure(rest.trim()))),
            "panic" => steps.push(Step::Panic),
            _ if !line.is_empty() => match &mut echoed {
                Some(reply) => {
                    reply.push('\n');
                    reply.push_str(line);
                }
                // Not `format!`: every echoed turn makes one.
                None => echoed = Some(join(["Echo: ", line].into_iter(), "")),
            },
            _ => {}
        }
    }
    if echoed.is_some() || steps.is_empty() {
        let reply = echoed.unwrap_or_else(|| "Echo: ".to_string());
        let reply = reply.trim_end();
        // The reply's deltas, then the other steps: one vector at its size.
        let n_deltas = split_deltas(reply).count();
        let mut reply_steps = Vec::with_capacity(n_deltas + steps.len());
        reply_steps.extend(text_deltas(reply));
        reply_steps.append(&mut steps);
        steps = reply_steps;
    }
    (steps, delay)
}

/// The summary or memory update `request` asks for, when it is one;
/// `input` is its latest user text.
fn auxiliary_reply(request: &ModelRequest, input: &str) -> Option<String> {
    match request.purpose {
        Purpose::Summary => Some(echo_summary(input)),
        Purpose::Memory => Some(echo_memory(input)),
        Purpose::Turn => None,
    }
}

const SUMMARY_COUNT_PREFIX: &str = "Summary (builtin:echo): the user sent ";

/// Bounded whatever the length of the conversation: a running count and the
/// first words of the newest folded user message.
fn echo_summary(input: &str) -> String {
    let earlier: u64 = input
        .lines()
        .find_map(|line| line.strip_prefix(SUMMARY_COUNT_PREFIX))
        .and_then(|rest| rest.split(' ').next())
        .and_then(|count| count.parse().ok())
        .unwrap_or(0);
    let users: Vec<&str> = input
        .lines()
        .filter_map(|line| line.strip_prefix("User: "))
        .collect();
    let newest: String = users
        .last()
        .map(|text| text.chars().take(40).collect())
        .unwrap_or_default();
    format!(
        "{SUMMARY_COUNT_PREFIX}{} messages before these; the newest folded one began {newest:?}.",
        earlier + users.len() as u64
    )
}

/// The current list plus each `remember <fact>` line of the user's text.
fn echo_memory(input: &str) -> String {
    let mut entries: Vec<String> = input
        .split("<current_memory>\n")
        .nth(1)
        .and_then(|rest| rest.split("\n</current_memory>").next())
        .and_then(|list| serde_json::from_str(list).ok())
        .unwrap_or_default();
    let user = input
        .split("<user>\n")
        .nth(1)
        .and_then(|rest| rest.split("\n</user>").next())
        .unwrap_or_default();
    for line in user.lines() {
        if let Some(fact) = line.trim().strip_prefix("remember ") {
            entries.push(fact.trim().to_string());
        }
    }
    serde_json::to_string(&entries).unwrap_or_else(|_| "[]".into())
}

/// Call ids must be unique within a session across branches and restarts of
/// a turn, so they come from a process-wide counter seeded by the clock.
fn next_call_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("call_{:x}{n:04}", crate::clock::now_millis() % 0xffff_ffff)
}

fn provider_failure(kind: &str) -> ModelError {
    let kind = match ErrorType::parse(kind) {
        Some(ErrorType::RateLimit) => ModelErrorKind::RateLimit,
        Some(ErrorType::ProviderAuth) => ModelErrorKind::ProviderAuth,
        Some(ErrorType::ProviderClientError) => ModelErrorKind::ProviderClientError,
        Some(ErrorType::Timeout) => ModelErrorKind::Timeout,
        Some(ErrorType::ConnectionError) => ModelErrorKind::ConnectionError,
        _ => ModelErrorKind::ProviderError,
    };
    ModelError {
        kind,
        resend: Resend::Never,
        message: format!("builtin:echo was asked to fail with {}", kind.as_str()),
    }
}

/// When the request ends with tool results (and perhaps the host context note
/// that follows them), a summary of those results.
fn tool_results_summary(messages: &Transcript) -> Option<String> {
    let mut tail = messages.iter().rev().peekable();
    if let Some(ChatItem::User(parts)) = tail.peek() {
        if !parts.iter().all(is_host_context_part) {
            return None;
        }
        tail.next();
    }
    let results: Vec<String> = tail
        .map_while(|item| match item {
            ChatItem::ToolResult(result) => Some(format!(
                "{} → {}",
                result.tool_name,
                first_text(&result.content)
            )),
            _ => None,
        })
        .collect();
    if results.is_empty() {
        return None;
    }
    let in_order: Vec<String> = results.into_iter().rev().collect();
    Some(format!("Tool results: {}", in_order.join("; ")))
}

/// How the blocks the runtime writes into a user item open: the host
/// context, the conversation's summary and its working memory (the prompt
/// and history modules hold these spellings to this list in their tests).
pub const RUNTIME_BLOCK_OPENERS: [&str; 3] = [
    "<host_context>",
    "<conversation_summary>",
    "<working_memory>",
];

/// A part the runtime wrote (host context, summary, working memory), not the user.
fn is_host_context_part(part: &ContentPart) -> bool {
    matches!(part, ContentPart::Text(text)
        if RUNTIME_BLOCK_OPENERS.iter().any(|opener| text.starts_with(opener)))
}

fn first_text(parts: &[ContentPart]) -> &str {
    parts
        .iter()
        .find_map(|part| match part {
            ContentPart::Text(text) => Some(text.as_str()),
            _ => None,
        })
        .unwrap_or("")
}

fn latest_user_text(messages: &Transcript) -> String {
    let Some(parts) = messages.iter().rev().find_map(|item| match item {
        ChatItem::User(parts) => Some(parts),
        _ => None,
    }) else {
        return String::new();
    };
    join(
        parts
            .iter()
            .filter(|part| !is_host_context_part(part))
            .filter_map(|part| match part {
                ContentPart::Text(text) => Some(text.as_str()),
                _ => None,
            }),
        "\n",
    )
}

fn text_deltas(text: &str) -> impl Iterator<Item = Step> + '_ {
    split_deltas(text).map(|delta| Step::Event(ModelEvent::TextDelta(delta)))
}

/// Splits after each space so a reply streams in several deltas that join back
/// to exactly the original text.
fn split_deltas(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split_inclusive(' ').map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ModelId, ModelSettings, ToolResultItem};

    fn request(messages: Vec<ChatItem>) -> ModelRequest {
        ModelRequest {
            model: ModelId::parse("builtin:echo").unwrap(),
            system: "system".into(),
            messages: messages.into(),
            tools: vec![],
            settings: ModelSettings::default(),
            purpose: Default::default(),
        }
    }

    fn events(request: ModelRequest) -> Vec<Result<ModelEvent, ModelError>> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        runtime.block_on(EchoModel.stream(request).collect())
    }

    #[test]
    fn plain_text_is_echoed_in_several_deltas() {
        let out = events(request(vec![ChatItem::User(vec![ContentPart::Text(
            "hello there world".into(),
        )])]));
        let text: String = out
            .iter()
            .filter_map(|event| match event {
                Ok(ModelEvent::TextDelta(delta)) => Some(delta.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(text, "Echo: hello there world");
        assert!(out.len() > 3);
    }

    #[test]
    fn call_lines_become_tool_calls_in_one_response() {
        let out = events(request(vec![ChatItem::User(vec![ContentPart::Text(
            "call a {\"x\": 1}\ncall b {}".into(),
        )])]));
        let names: Vec<_> = out
            .iter()
            .filter_map(|event| match event {
                Ok(ModelEvent::ToolCall { name, .. }) => Some(name.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(names, vec!["a", "b"]);
    }

    #[test]
    fn tool_results_are_summarised_instead_of_rerunning_commands() {
        let out = events(request(vec![
            ChatItem::User(vec![ContentPart::Text("call a {}".into())]),
            ChatItem::ToolResult(ToolResultItem {
                call_id: "1".into(),
                tool_name: "a".into(),
                content: vec![ContentPart::Text("{\"ok\":true}".into())],
                is_error: false,
            }),
        ]));
        assert!(!out
            .iter()
            .any(|event| matches!(event, Ok(ModelEvent::ToolCall { .. }))));
    }
}
