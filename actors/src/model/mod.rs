//! Model adapters: one provider-neutral request/stream interface (`ModelClient`)
//! and its implementations. The turn engine builds a `ModelRequest` from the
//! session's path and reads back a stream of `ModelEvent`s; adapters translate
//! to and from each provider's wire format and nothing else: they never see
//! sessions, host contexts or tool registries.

pub mod anthropic;
pub mod catalog;
pub mod echo;
pub mod estimate;
pub mod openai;
pub mod pricing;
pub mod providers;
pub mod retry;
pub mod sse;
pub mod tls;
mod transcript;
mod wire;

pub use transcript::{HistoryChunks, Transcript, TranscriptChunk};
pub use wire::{build_http_client, CONNECT_TIMEOUT, DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_EVENT_BYTES};

use std::fmt;
use std::sync::Arc;

use futures_util::stream::BoxStream;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error_type::ErrorType;

/// `provider:name`, e.g. `openai:gpt-4o-mini`, `anthropic:claude-sonnet-4-5`, `builtin:echo`.
/// One shared string: a turn copies its model id several times (the plan,
/// the live turn, each model request), and each copy is a count, not an
/// allocation.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ModelId {
    full: Arc<str>,
    /// Where the `:` is.
    colon: usize,
}

impl ModelId {
    /// `provider:name` from its halves, as given.
    pub fn new(provider: &str, name: &str) -> ModelId {
        ModelId {
            full: format!("{provider}:{name}").into(),
            colon: provider.len(),
        }
    }

    /// Parses `provider:name`; both halves must be non-empty.
    pub fn parse(value: &str) -> Option<ModelId> {
        let (provider, name) = value.split_once(':')?;
        if provider.is_empty() || name.is_empty() {
            return None;
        }
        Some(ModelId {
            full: value.into(),
            colon: provider.len(),
        })
    }

    pub fn provider(&self) -> &str {
        &self.full[..self.colon]
    }

    /// The provider's own name for the model.
    pub fn name(&self) -> &str {
        &self.full[self.colon + 1..]
    }

    /// `provider:name`.
    pub fn as_str(&self) -> &str {
        &self.full
    }

    /// `provider:name`, shared: what a stored message keeps of its model.
    pub fn shared_text(&self) -> Arc<str> {
        self.full.clone()
    }
}

impl fmt::Display for ModelId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.full)
    }
}

/// Everything one model request needs. Built fresh for every request of a
/// turn from stored messages, so the same history gives the same bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelRequest {
    pub model: ModelId,
    /// Stable for a session: changes only when configuration changes.
    pub system: Arc<str>,
    pub messages: Transcript,
    pub tools: Vec<ToolSpec>,
    pub settings: ModelSettings,
    /// What the request is for. Every provider sends it alike; the offline
    /// echo model answers the runtime's own auxiliary requests in kind.
    pub purpose: Purpose,
}

/// Why a model is asked: a turn's reply, or the runtime's own work on a long
/// conversation's history (a summary of its earlier part, its working
/// memory). Said as data so that a model adapter needs to know nothing of
/// the history module's prompts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Purpose {
    /// A turn: the conversation itself.
    #[default]
    Turn,
    /// A summary of the conversation's earlier part.
    Summary,
    /// The conversation's working memory, updated.
    Memory,
}

impl ModelRequest {
    /// The input tokens this request is estimated to cost (`estimate`): the
    /// system prompt and the transcript, each stored chunk measured once.
    pub fn estimated_input_tokens(&self) -> u64 {
        estimate::estimate_text(&self.system) + self.messages.estimated_tokens()
    }
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct ModelSettings {
    pub temperature: Option<f64>,
    /// Tokens the model may spend thinking; `None` or 0 disables thinking.
    pub thinking_budget: Option<u32>,
    pub max_output_tokens: Option<u32>,
}

/// A tool offered to the model: name, description and a JSON schema (type object).
#[derive(Clone, Debug, PartialEq)]
pub struct ToolSpec {
    /// As the turn's `OfferedTool`: borrowed for the built-in tools.
    pub name: std::borrow::Cow<'static, str>,
    pub description: std::borrow::Cow<'static, str>,
    pub parameters: Arc<Value>,
}

/// One entry of the provider-neutral transcript.
#[derive(Clone, Debug, PartialEq)]
pub enum ChatItem {
    /// A user turn: the `<host_context>` block (as text), the user's text,
    /// reference attachments, a continuation's trailing context, steering text.
    User(Vec<ContentPart>),
    /// One model response, in the order the model produced it.
    Assistant(Vec<AssistantPart>),
    /// The result of one tool call, answering an `AssistantPart::ToolCall` by id.
    ToolResult(ToolResultItem),
}

#[derive(Clone, Debug, PartialEq)]
pub struct ToolResultItem {
    pub call_id: String,
    pub tool_name: String,
    /// Usually one text part (the JSON result as text); `look_at_screen` adds an image.
    pub content: Vec<ContentPart>,
    pub is_error: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub enum AssistantPart {
    Thinking {
        text: String,
        /// Provider signature that must be replayed with the thinking (Anthropic).
        signature: Option<String>,
    },
    Text(String),
    ToolCall {
        id: String,
        name: String,
        /// The arguments as the model sent them (normally a JSON object).
        arguments: Value,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub enum ContentPart {
    Text(String),
    Image(MediaSource),
    Document {
        source: MediaSource,
        name: Option<String>,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub enum MediaSource {
    /// Base64 data with its media type, from a `data:` URI.
    Base64 {
        media_type: String,
        data: String,
    },
    Url(String),
}

impl MediaSource {
    /// Splits `data:<media_type>;base64,<data>`; `None` if it is not that shape.
    pub fn from_data_uri(uri: &str) -> Option<MediaSource> {
        let rest = uri.strip_prefix("data:")?;
        let (meta, data) = rest.split_once(',')?;
        let media_type = meta.strip_suffix(";base64")?;
        Some(MediaSource::Base64 {
            media_type: media_type.to_string(),
            data: data.to_string(),
        })
    }

    pub fn to_data_uri(&self) -> String {
        match self {
            MediaSource::Base64 { media_type, data } => format!("data:{media_type};base64,{data}"),
            MediaSource::Url(url) => url.clone(),
        }
    }
}

/// What a model stream yields, in order. Text and thinking arrive as deltas;
/// a tool call arrives whole once its arguments are complete.
#[derive(Clone, Debug, PartialEq)]
pub enum ModelEvent {
    ThinkingDelta(String),
    /// Signature closing the current thinking block (Anthropic).
    ThinkingSignature(String),
    TextDelta(String),
    ToolCall {
        id: String,
        name: String,
        /// Raw argument text; the turn engine parses and schema-checks it.
        arguments: String,
    },
    /// Token counts for this request; may arrive once, at the end.
    Usage(TokenUsage),
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    #[serde(default)]
    pub cache_read_tokens: u64,
    #[serde(default)]
    pub cache_write_tokens: u64,
}

/// Why a provider request failed, in the runtime's `error_type` words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModelErrorKind {
    RateLimit,
    ProviderAuth,
    ProviderClientError,
    ProviderError,
    Timeout,
    ConnectionError,
}

impl ModelErrorKind {
    /// The turn's `error_type` for this failure.
    pub fn error_type(self) -> ErrorType {
        match self {
            ModelErrorKind::RateLimit => ErrorType::RateLimit,
            ModelErrorKind::ProviderAuth => ErrorType::ProviderAuth,
            ModelErrorKind::ProviderClientError => ErrorType::ProviderClientError,
            ModelErrorKind::ProviderError => ErrorType::ProviderError,
            ModelErrorKind::Timeout => ErrorType::Timeout,
            ModelErrorKind::ConnectionError => ErrorType::ConnectionError,
        }
    }

    pub fn as_str(self) -> &'static str {
        self.error_type().as_str()
    }

    /// Whether the same request may succeed if sent again later.
    pub fn retry_allowed(self) -> bool {
        matches!(
            self,
            ModelErrorKind::RateLimit
                | ModelErrorKind::ProviderError
                | ModelErrorKind::Timeout
                | ModelErrorKind::ConnectionError
        )
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct ModelError {
    pub kind: ModelErrorKind,
    pub message: String,
    /// Whether `RetryingModel` may send the request again, decided where
    /// the failure was seen (only the transport knows what reached the provider).
    pub resend: Resend,
}

/// Whether sending the same request again is safe and may succeed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Resend {
    /// The provider may have started work (a response began, or it went
    /// silent), or it will refuse again (4xx other than 429).
    #[default]
    Never,
    /// Safe, after an exponential backoff: the connection failed before any
    /// byte of a response, or the provider answered 429 or 5xx before
    /// streaming began, without saying when to come back.
    Backoff,
    /// Safe, after the wait the provider named (`retry-after`, `retry-after-ms`).
    After(std::time::Duration),
}

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind.as_str(), self.message)
    }
}

impl std::error::Error for ModelError {}

pub type ModelStream = BoxStream<'static, Result<ModelEvent, ModelError>>;

/// A model provider. `stream` starts one request; dropping the stream cancels it.
pub trait ModelClient: Send + Sync {
    fn stream(&self, request: ModelRequest) -> ModelStream;
}

pub type SharedModelClient = Arc<dyn ModelClient>;

#[cfg(test)]
mod model_id_tests {
    use super::ModelId;

    #[test]
    fn a_model_id_reads_back_its_halves_whichever_way_it_was_made() {
        let parsed = ModelId::parse("openai:gpt-4o-mini:2024").expect("valid");
        assert_eq!(parsed.provider(), "openai");
        assert_eq!(parsed.name(), "gpt-4o-mini:2024");
        assert_eq!(parsed.as_str(), "openai:gpt-4o-mini:2024");
        assert_eq!(parsed.to_string(), "openai:gpt-4o-mini:2024");
        assert_eq!(ModelId::new("openai", "gpt-4o-mini:2024"), parsed);
        for invalid in ["openai", ":gpt", "openai:", ""] {
            assert_eq!(ModelId::parse(invalid), None, "{invalid:?}");
        }
    }
}
