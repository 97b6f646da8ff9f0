//! What `/api/models` and `/health` say about models: a fact of startup,
//! made from the settings, that the routes serve.

use serde::Serialize;

use crate::settings::Settings;

/// What `/api/models` and `/health` say about models. Built once at startup
/// from the settings; it names endpoints but never carries a key.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct ModelsInfo {
    pub default_model: String,
    /// True when no provider key was set and the runtime chose `builtin:echo`.
    pub fallback: bool,
    pub providers: Vec<ProviderEntry>,
}

/// One provider of `/api/models`.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct ProviderEntry {
    /// What model ids name before the `:` (`builtin`, `openai`, `anthropic`,
    /// or an `LLM__PROVIDERS__<NAME>` one, lowercased).
    pub name: String,
    /// The wire format: `openai` or `anthropic` (`None` for `builtin`).
    pub kind: Option<&'static str>,
    /// Whether requests can be sent (a key, or for an OpenAI-compatible
    /// provider its own base URL).
    pub has_credentials: bool,
    /// `None` for `builtin`, which needs no network.
    pub base_url: Option<String>,
    /// Model ids known to work here: `builtin:echo`, and the default model
    /// under its provider. Any `provider:name` the provider serves works too.
    pub models: Vec<String>,
}

impl ModelsInfo {
    pub(crate) fn from_settings(settings: &Settings) -> ModelsInfo {
        let default_model = settings.primary_model.to_string();
        let mut providers = vec![ProviderEntry {
            name: "builtin".to_string(),
            kind: None,
            has_credentials: true,
            base_url: None,
            models: vec!["builtin:echo".to_string()],
        }];
        for info in settings.provider_settings().configured() {
            let models = if settings.primary_model.provider() == info.name {
                vec![default_model.clone()]
            } else {
                Vec::new()
            };
            providers.push(ProviderEntry {
                kind: Some(info.kind.as_str()),
                name: info.name,
                has_credentials: info.has_credentials,
                base_url: Some(info.base_url),
                models,
            });
        }
        ModelsInfo {
            default_model,
            fallback: settings.model_fallback,
            providers,
        }
    }
}
