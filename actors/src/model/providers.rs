//! Provider table: builds the network `ModelClient` for a `ModelId`
//! (`openai:*`, `anthropic:*`) from `ProviderSettings`, wrapped in the
//! single retry, and reports which providers are configured. `builtin:*` is
//! routed by the caller before it gets here.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};

use super::anthropic::{self, AnthropicModel};
use super::openai::{self, OpenAiModel};
use super::retry::{RetryingModel, DEFAULT_RETRY_BACKOFF};
use super::{wire, ModelId, SharedModelClient};

/// Credentials and endpoints read from the environment
/// (`OPENAI_API_KEY`, `OPENAI_BASE_URL`, `ANTHROPIC_API_KEY`, `ANTHROPIC_BASE_URL`).
/// The keys are secrets: `Debug` prints `[REDACTED]` for them, so a log of
/// the settings cannot leak one.
#[derive(Clone, Debug)]
pub struct ProviderSettings {
    pub openai_api_key: Option<SecretString>,
    /// A compatible server's API root (e.g. `http://127.0.0.1:8000/v1`); `None` is OpenAI's.
    pub openai_base_url: Option<String>,
    pub anthropic_api_key: Option<SecretString>,
    pub anthropic_base_url: Option<String>,
    /// Longest silence from a provider: before its response headers and between chunks.
    pub request_timeout: Duration,
    /// Pause before the one retry of a request that failed before any output.
    pub retry_backoff: Duration,
}

impl Default for ProviderSettings {
    fn default() -> ProviderSettings {
        ProviderSettings {
            openai_api_key: None,
            openai_base_url: None,
            anthropic_api_key: None,
            anthropic_base_url: None,
            request_timeout: wire::DEFAULT_IDLE_TIMEOUT,
            retry_backoff: DEFAULT_RETRY_BACKOFF,
        }
    }
}

/// One provider as `/health` and startup logs describe it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProviderInfo {
    pub name: &'static str,
    /// Whether requests can be sent: a key, or for `openai` a custom base URL
    /// (local servers need no key).
    pub has_credentials: bool,
    pub base_url: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProviderLookupError {
    /// No adapter for this provider name.
    Unknown(String),
    /// The provider exists but has no key (or, for `openai`, no base URL).
    NotConfigured(String),
}

impl fmt::Display for ProviderLookupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProviderLookupError::Unknown(provider) => {
                write!(f, "unknown model provider `{provider}`")
            }
            ProviderLookupError::NotConfigured(provider) => {
                write!(
                    f,
                    "model provider `{provider}` has no credentials configured"
                )
            }
        }
    }
}

impl std::error::Error for ProviderLookupError {}

/// Built once at startup; `client_for` is cheap (clients share one pool).
pub struct ModelProviders {
    settings: ProviderSettings,
    /// One connection pool for every provider request of the process.
    http_client: reqwest::Client,
}

impl ModelProviders {
    pub fn new(settings: ProviderSettings) -> ModelProviders {
        ModelProviders {
            settings,
            http_client: wire::build_http_client(),
        }
    }

    pub fn settings(&self) -> &ProviderSettings {
        &self.settings
    }

    /// The retrying client for `id`; `id.name` is sent as the provider's model name.
    pub fn client_for(&self, id: &ModelId) -> Result<SharedModelClient, ProviderLookupError> {
        let provider = id.provider();
        if provider != "openai" && provider != "anthropic" {
            return Err(ProviderLookupError::Unknown(provider.to_string()));
        }
        if !self.has_credentials(provider) {
            return Err(ProviderLookupError::NotConfigured(provider.to_string()));
        }
        let settings = &self.settings;
        let backoff = settings.retry_backoff;
        let client: SharedModelClient = if provider == "openai" {
            let model = OpenAiModel::new(
                self.http_client.clone(),
                settings.openai_base_url.clone(),
                settings.openai_api_key.clone(),
                id.name().to_string(),
            )
            .with_idle_timeout(settings.request_timeout);
            Arc::new(RetryingModel::new(Arc::new(model), backoff))
        } else {
            let model = AnthropicModel::new(
                self.http_client.clone(),
                settings.anthropic_base_url.clone(),
                settings.anthropic_api_key.clone(),
                id.name().to_string(),
            )
            .with_idle_timeout(settings.request_timeout);
            Arc::new(RetryingModel::new(Arc::new(model), backoff))
        };
        Ok(client)
    }

    /// Both network providers, configured or not, in a fixed order.
    pub fn configured(&self) -> Vec<ProviderInfo> {
        let settings = &self.settings;
        vec![
            ProviderInfo {
                name: "openai",
                has_credentials: self.has_credentials("openai"),
                base_url: settings
                    .openai_base_url
                    .clone()
                    .unwrap_or_else(|| openai::DEFAULT_BASE_URL.to_string()),
            },
            ProviderInfo {
                name: "anthropic",
                has_credentials: self.has_credentials("anthropic"),
                base_url: settings
                    .anthropic_base_url
                    .clone()
                    .unwrap_or_else(|| anthropic::DEFAULT_BASE_URL.to_string()),
            },
        ]
    }

    /// Empty strings count as unset: `OPENAI_API_KEY=` in a `.env` means none.
    pub fn has_credentials(&self, provider: &str) -> bool {
        let set = |value: Option<&str>| value.is_some_and(|value| !value.trim().is_empty());
        let key = |key: &Option<SecretString>| set(key.as_ref().map(|key| key.expose_secret()));
        let settings = &self.settings;
        match provider {
            "openai" => key(&settings.openai_api_key) || set(settings.openai_base_url.as_deref()),
            "anthropic" => key(&settings.anthropic_api_key),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn providers(settings: ProviderSettings) -> ModelProviders {
        ModelProviders::new(settings)
    }

    #[test]
    fn debug_never_prints_an_api_key() {
        let settings = ProviderSettings {
            openai_api_key: Some("sk-secret-openai".into()),
            anthropic_api_key: Some("sk-ant-secret".into()),
            ..ProviderSettings::default()
        };
        let http_client = reqwest::Client::new();
        let openai = OpenAiModel::new(
            http_client.clone(),
            None,
            settings.openai_api_key.clone(),
            "gpt",
        );
        let anthropic = AnthropicModel::new(
            http_client,
            None,
            settings.anthropic_api_key.clone(),
            "claude",
        );
        for printed in [
            format!("{settings:?}"),
            format!("{openai:?}"),
            format!("{anthropic:?}"),
        ] {
            assert!(!printed.contains("secret"), "{printed}");
            assert!(printed.contains("REDACTED"), "{printed}");
        }
    }

    #[test]
    fn openai_base_url_alone_counts_as_configured() {
        let with_url = providers(ProviderSettings {
            openai_base_url: Some("http://127.0.0.1:8000/v1".into()),
            ..ProviderSettings::default()
        });
        assert!(with_url.has_credentials("openai"));
        assert!(!with_url.has_credentials("anthropic"));
        assert!(with_url
            .client_for(&ModelId::parse("openai:local").unwrap())
            .is_ok());
    }

    #[test]
    fn lookup_errors_name_unknown_and_unconfigured_providers() {
        let none = providers(ProviderSettings {
            anthropic_api_key: Some(" ".into()),
            ..ProviderSettings::default()
        });
        let lookup = |id: &str| none.client_for(&ModelId::parse(id).unwrap()).err();
        assert_eq!(
            lookup("builtin:echo"),
            Some(ProviderLookupError::Unknown("builtin".into()))
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
}
