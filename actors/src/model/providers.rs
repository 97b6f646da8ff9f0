//! Provider table: the named providers (`openai`, `anthropic` and any the
//! operator adds, each OpenAI- or Anthropic-compatible with its own base
//! URL, key, headers and CA), the `ModelClient` for a `ModelId`
//! (`<name>:<model>`) wrapped in the retry, and which providers are
//! configured. `builtin:*` is routed by the caller before it gets here.

use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};

use super::anthropic::{self, AnthropicModel};
use super::openai::{self, OpenAiModel};
use super::retry::{RetryPolicy, RetryingModel};
use super::{tls, wire, ModelId, SharedModelClient};

/// The provider name no operator may take: `builtin:echo` needs no network.
pub const BUILTIN: &str = "builtin";

/// Which wire format a provider speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProviderKind {
    /// OpenAI Chat Completions: OpenAI, vLLM, Ollama, llama.cpp, OpenRouter, gateways.
    OpenAi,
    /// Anthropic Messages.
    Anthropic,
}

impl ProviderKind {
    pub const ALL: [ProviderKind; 2] = [ProviderKind::OpenAi, ProviderKind::Anthropic];

    pub fn parse(text: &str) -> Option<ProviderKind> {
        ProviderKind::ALL
            .into_iter()
            .find(|kind| kind.as_str().eq_ignore_ascii_case(text.trim()))
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::OpenAi => "openai",
            ProviderKind::Anthropic => "anthropic",
        }
    }

    pub fn default_base_url(self) -> &'static str {
        match self {
            ProviderKind::OpenAi => openai::DEFAULT_BASE_URL,
            ProviderKind::Anthropic => anthropic::DEFAULT_BASE_URL,
        }
    }
}

/// One provider as the operator configured it. Keys and header values are
/// secrets: `Debug` prints `[REDACTED]` for them.
#[derive(Clone, Debug)]
pub struct ProviderConfig {
    /// Lowercase; the part of a model id before the `:`.
    pub name: String,
    pub kind: ProviderKind,
    /// The API root; `None` is the kind's public API.
    pub base_url: Option<String>,
    pub api_key: Option<SecretString>,
    /// Sent with every request to this provider (a gateway's routing or auth).
    pub headers: Vec<(String, SecretString)>,
    /// PEM CA certificates trusted for this provider besides the system's
    /// and the bundled roots.
    pub ca_file: Option<PathBuf>,
}

impl ProviderConfig {
    pub fn new(name: impl Into<String>, kind: ProviderKind) -> ProviderConfig {
        ProviderConfig {
            name: name.into(),
            kind,
            base_url: None,
            api_key: None,
            headers: Vec::new(),
            ca_file: None,
        }
    }

    /// Whether requests can be sent: a key, or for an OpenAI-compatible
    /// provider its own base URL (local servers need no key). Empty strings
    /// count as unset: `OPENAI_API_KEY=` in a `.env` means none.
    pub fn has_credentials(&self) -> bool {
        let set = |value: Option<&str>| value.is_some_and(|value| !value.trim().is_empty());
        let key = set(self.api_key.as_ref().map(|key| key.expose_secret()));
        match self.kind {
            ProviderKind::OpenAi => key || set(self.base_url.as_deref()),
            ProviderKind::Anthropic => key,
        }
    }

    pub fn effective_base_url(&self) -> String {
        self.base_url
            .clone()
            .unwrap_or_else(|| self.kind.default_base_url().to_string())
    }
}

/// Everything the providers are built from.
#[derive(Clone, Debug)]
pub struct ProviderSettings {
    /// In the order `/api/models` lists them; names are unique.
    pub providers: Vec<ProviderConfig>,
    /// Longest silence from a provider: before its response headers and between chunks.
    pub request_timeout: Duration,
    pub retry: RetryPolicy,
    /// Largest SSE event or line a provider may send (`LLM__MAX_EVENT_BYTES`).
    pub max_event_bytes: usize,
}

impl Default for ProviderSettings {
    /// `openai` and `anthropic` at their public APIs, without keys.
    fn default() -> ProviderSettings {
        ProviderSettings {
            providers: ProviderKind::ALL
                .into_iter()
                .map(|kind| ProviderConfig::new(kind.as_str(), kind))
                .collect(),
            request_timeout: wire::DEFAULT_IDLE_TIMEOUT,
            retry: RetryPolicy::default(),
            max_event_bytes: wire::DEFAULT_MAX_EVENT_BYTES,
        }
    }
}

impl ProviderSettings {
    pub fn get(&self, name: &str) -> Option<&ProviderConfig> {
        self.providers.iter().find(|provider| provider.name == name)
    }

    pub fn get_mut(&mut self, name: &str) -> Option<&mut ProviderConfig> {
        self.providers
            .iter_mut()
            .find(|provider| provider.name == name)
    }

    /// Every provider name a model id may use, `builtin` first.
    pub fn known_names(&self) -> Vec<&str> {
        std::iter::once(BUILTIN)
            .chain(self.providers.iter().map(|provider| provider.name.as_str()))
            .collect()
    }

    /// Every network provider, configured or not, in order.
    pub fn configured(&self) -> Vec<ProviderInfo> {
        self.providers
            .iter()
            .map(|provider| ProviderInfo {
                name: provider.name.clone(),
                kind: provider.kind,
                has_credentials: provider.has_credentials(),
                base_url: provider.effective_base_url(),
            })
            .collect()
    }

    pub fn has_credentials(&self, provider: &str) -> bool {
        self.get(provider)
            .is_some_and(ProviderConfig::has_credentials)
    }
}

/// One provider as `/health`, `/api/models`, doctor and startup logs describe it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProviderInfo {
    pub name: String,
    pub kind: ProviderKind,
    pub has_credentials: bool,
    pub base_url: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProviderLookupError {
    /// No provider of this name; `known` lists those there are.
    Unknown {
        provider: String,
        known: Vec<String>,
    },
    /// The provider exists but has no key (or, OpenAI-compatible, no base URL).
    NotConfigured(String),
    /// The provider's HTTP client could not be built (its CA file).
    Unusable { provider: String, reason: String },
}

impl fmt::Display for ProviderLookupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProviderLookupError::Unknown { provider, known } => {
                write!(
                    f,
                    "unknown model provider `{provider}` (known: {})",
                    known.join(", ")
                )
            }
            ProviderLookupError::NotConfigured(provider) => {
                write!(
                    f,
                    "model provider `{provider}` has no credentials configured"
                )
            }
            ProviderLookupError::Unusable { provider, reason } => {
                write!(f, "model provider `{provider}` cannot be used: {reason}")
            }
        }
    }
}

impl std::error::Error for ProviderLookupError {}

/// Built once at startup; `client_for` is cheap (clients share pools).
pub struct ModelProviders {
    settings: ProviderSettings,
    /// Each provider's HTTP client: the shared pool, or one of its own when
    /// it has a CA file or headers; or why it could not be built.
    clients: HashMap<String, Result<reqwest::Client, String>>,
}

impl ModelProviders {
    pub fn new(settings: ProviderSettings) -> ModelProviders {
        let shared = wire::build_http_client();
        let clients = settings
            .providers
            .iter()
            .map(|provider| {
                let client = if provider.ca_file.is_none() && provider.headers.is_empty() {
                    Ok(shared.clone())
                } else {
                    own_client(provider)
                };
                if let Err(reason) = &client {
                    log::error!(
                        "model provider `{}` cannot be used: {reason}",
                        provider.name
                    );
                }
                (provider.name.clone(), client)
            })
            .collect();
        ModelProviders { settings, clients }
    }

    pub fn settings(&self) -> &ProviderSettings {
        &self.settings
    }

    /// The HTTP client requests to `provider` go through (its trust and headers).
    pub fn http_client(&self, provider: &str) -> Result<&reqwest::Client, ProviderLookupError> {
        match self.clients.get(provider) {
            Some(Ok(client)) => Ok(client),
            Some(Err(reason)) => Err(ProviderLookupError::Unusable {
                provider: provider.to_string(),
                reason: reason.clone(),
            }),
            None => Err(self.unknown(provider)),
        }
    }

    /// The retrying client for `id`; `id.name` is sent as the provider's model name.
    pub fn client_for(&self, id: &ModelId) -> Result<SharedModelClient, ProviderLookupError> {
        let name = id.provider();
        let provider = self.settings.get(name).ok_or_else(|| self.unknown(name))?;
        if !provider.has_credentials() {
            return Err(ProviderLookupError::NotConfigured(name.to_string()));
        }
        let http_client = self.http_client(name)?.clone();
        let settings = &self.settings;
        let client: SharedModelClient = match provider.kind {
            ProviderKind::OpenAi => {
                let model = OpenAiModel::new(
                    http_client,
                    provider.base_url.clone(),
                    provider.api_key.clone(),
                    id.name().to_string(),
                )
                .with_idle_timeout(settings.request_timeout)
                .with_max_event_bytes(settings.max_event_bytes)
                .with_label(&provider.name);
                Arc::new(RetryingModel::new(Arc::new(model), settings.retry))
            }
            ProviderKind::Anthropic => {
                let model = AnthropicModel::new(
                    http_client,
                    provider.base_url.clone(),
                    provider.api_key.clone(),
                    id.name().to_string(),
                )
                .with_idle_timeout(settings.request_timeout)
                .with_max_event_bytes(settings.max_event_bytes)
                .with_label(&provider.name);
                Arc::new(RetryingModel::new(Arc::new(model), settings.retry))
            }
        };
        Ok(client)
    }

    /// Every network provider, configured or not, in order.
    pub fn configured(&self) -> Vec<ProviderInfo> {
        self.settings.configured()
    }

    pub fn has_credentials(&self, provider: &str) -> bool {
        self.settings.has_credentials(provider)
    }

    fn unknown(&self, provider: &str) -> ProviderLookupError {
        ProviderLookupError::Unknown {
            provider: provider.to_string(),
            known: self
                .settings
                .known_names()
                .into_iter()
                .map(str::to_string)
                .collect(),
        }
    }
}

/// A client of the provider's own: its CA file trusted, its headers sent.
fn own_client(provider: &ProviderConfig) -> Result<reqwest::Client, String> {
    let cas = match &provider.ca_file {
        Some(path) => tls::read_ca_file(path)?,
        None => Vec::new(),
    };
    let mut headers = reqwest::header::HeaderMap::new();
    for (name, value) in &provider.headers {
        let name = reqwest::header::HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("header name {name:?} is not valid"))?;
        let mut value = reqwest::header::HeaderValue::from_str(value.expose_secret())
            .map_err(|_| format!("the value of header {name} is not valid"))?;
        value.set_sensitive(true);
        headers.insert(name, value);
    }
    wire::http_client(&cas, headers)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn providers(settings: ProviderSettings) -> ModelProviders {
        ModelProviders::new(settings)
    }

    fn with(configs: Vec<ProviderConfig>) -> ProviderSettings {
        ProviderSettings {
            providers: configs,
            ..ProviderSettings::default()
        }
    }

    #[test]
    fn debug_never_prints_an_api_key_or_header_value() {
        let mut openai = ProviderConfig::new("openai", ProviderKind::OpenAi);
        openai.api_key = Some("sk-secret-openai".into());
        openai.headers = vec![("x-gateway-token".into(), "secret-header".into())];
        let mut anthropic = ProviderConfig::new("anthropic", ProviderKind::Anthropic);
        anthropic.api_key = Some("sk-ant-secret".into());
        let settings = with(vec![openai.clone(), anthropic.clone()]);
        let http_client = super::wire::build_http_client();
        let openai_model = OpenAiModel::new(http_client.clone(), None, openai.api_key, "gpt");
        let anthropic_model = AnthropicModel::new(http_client, None, anthropic.api_key, "claude");
        for printed in [
            format!("{settings:?}"),
            format!("{openai_model:?}"),
            format!("{anthropic_model:?}"),
        ] {
            assert!(!printed.contains("secret"), "{printed}");
            assert!(printed.contains("REDACTED"), "{printed}");
        }
    }

    #[test]
    fn openai_base_url_alone_counts_as_configured() {
        let mut openai = ProviderConfig::new("openai", ProviderKind::OpenAi);
        openai.base_url = Some("http://127.0.0.1:8000/v1".into());
        let with_url = providers(with(vec![
            openai,
            ProviderConfig::new("anthropic", ProviderKind::Anthropic),
        ]));
        assert!(with_url.has_credentials("openai"));
        assert!(!with_url.has_credentials("anthropic"));
        assert!(with_url
            .client_for(&ModelId::parse("openai:local").unwrap())
            .is_ok());
    }

    #[test]
    fn named_providers_answer_their_own_ids() {
        let mut local = ProviderConfig::new("vllm", ProviderKind::OpenAi);
        local.base_url = Some("http://127.0.0.1:8000/v1".into());
        let mut gateway = ProviderConfig::new("gateway", ProviderKind::Anthropic);
        gateway.api_key = Some("key".into());
        gateway.headers = vec![("x-route".into(), "eu".into())];
        let table = providers(with(vec![local, gateway]));
        assert!(table
            .client_for(&ModelId::parse("vllm:qwen").unwrap())
            .is_ok());
        assert!(table
            .client_for(&ModelId::parse("gateway:claude").unwrap())
            .is_ok());
        let infos = table.configured();
        assert_eq!(infos[0].name, "vllm");
        assert_eq!(infos[1].base_url, "https://api.anthropic.com");
    }

    #[test]
    fn lookup_errors_name_unknown_and_unconfigured_providers() {
        let mut anthropic = ProviderConfig::new("anthropic", ProviderKind::Anthropic);
        anthropic.api_key = Some(" ".into());
        let none = providers(with(vec![
            ProviderConfig::new("openai", ProviderKind::OpenAi),
            anthropic,
        ]));
        let lookup = |id: &str| none.client_for(&ModelId::parse(id).unwrap()).err();
        let unknown = lookup("vllm:qwen").unwrap();
        assert_eq!(
            unknown.to_string(),
            "unknown model provider `vllm` (known: builtin, openai, anthropic)"
        );
        assert_eq!(
            lookup("anthropic:claude"),
            Some(ProviderLookupError::NotConfigured("anthropic".into()))
        );
        let infos = none.configured();
        assert_eq!(infos[0].base_url, "https://api.openai.com/v1");
        assert_eq!(infos[1].base_url, "https://api.anthropic.com");
        assert!(infos.iter().all(|info| !info.has_credentials));
    }

    #[test]
    fn an_unreadable_ca_file_makes_only_its_provider_unusable() {
        let mut private = ProviderConfig::new("private", ProviderKind::OpenAi);
        private.base_url = Some("https://llm.internal/v1".into());
        private.ca_file = Some("/nonexistent/ca.pem".into());
        let mut public = ProviderConfig::new("openai", ProviderKind::OpenAi);
        public.api_key = Some("key".into());
        let table = providers(with(vec![private, public]));
        let error = table
            .client_for(&ModelId::parse("private:m").unwrap())
            .err()
            .unwrap();
        assert!(error.to_string().contains("/nonexistent/ca.pem"), "{error}");
        assert!(table
            .client_for(&ModelId::parse("openai:gpt").unwrap())
            .is_ok());
    }
}
