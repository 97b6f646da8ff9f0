//! What every session actor shares, and the choice of a turn's model
//! (`plan_model`). The actor and the `Runtime` use it; it uses neither.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use super::error::SessionError;
use crate::contract::RequestConfig;
use crate::model::catalog::{ModelCatalog, UnconfiguredModel};
use crate::model::{ModelId, SharedModelClient};
use crate::store::SharedStore;
use crate::tools::ToolRegistry;
use crate::turn::Budget;

#[derive(Clone, Debug)]
pub struct SessionConfig {
    pub default_model: ModelId,
    /// The composed `profile`, computed once: the same bytes every turn.
    pub system_prompt: Arc<str>,
    /// What the system prompt was composed from (`GET /api/debug/prompt`).
    pub profile: crate::prompt::profile::Profile,
    /// Model requests per turn (`ASSISTANT__MAX_TURNS`); requests may only lower it.
    pub max_turns: u32,
    /// Ceiling on thinking tokens and their default; `None` leaves thinking
    /// off unless a request asks (`turn::thinking_budget`).
    pub thinking_budget: Option<u32>,
    pub budget: Budget,
    pub idle_timeout: Duration,
    pub history: crate::history::HistoryConfig,
    /// Models a request may name besides `default_model`: any model a key
    /// reaches costs money (`ASSISTANT__REQUEST_MODELS`).
    pub request_models: Vec<ModelId>,
    pub attachment_budget: crate::budget::AttachmentBudget,
    /// Per-turn traces: stored (`TRACES__*`), exported (OpenTelemetry), or neither.
    pub traces: crate::trace::TraceConfig,
}

pub struct SessionDeps {
    pub store: SharedStore,
    pub models: Arc<dyn ModelCatalog>,
    pub tools: ToolRegistry,
    pub invalidations: Arc<HashMap<String, Vec<String>>>,
    pub config: SessionConfig,
    /// Notes from other systems waiting for the next turn (`store::inbox`).
    pub inbox: Arc<crate::store::Inbox>,
}

impl SessionDeps {
    /// The model a request runs on. One it names but this deployment cannot
    /// serve is a 422; an unusable configured default (no key; `/health` says
    /// so) fails the turn as `provider_auth`: the host sent nothing wrong.
    pub fn plan_model(
        &self,
        config: &RequestConfig,
    ) -> Result<(ModelId, SharedModelClient), SessionError> {
        let Some(asked) = &config.default_model else {
            let model_id = self.config.default_model.clone();
            let client = self.models.client_for(&model_id).unwrap_or_else(|reason| {
                Arc::new(UnconfiguredModel::new(format!(
                    "the default model {model_id} cannot be used: {reason}"
                )))
            });
            return Ok((model_id, client));
        };
        let model_id = ModelId::parse(asked).ok_or_else(|| {
            SessionError::validation("config.default_model", "expected provider:name")
        })?;
        let client = self
            .models
            .client_for(&model_id)
            .map_err(|reason| SessionError::validation("config.default_model", reason))?;
        let allowed =
            model_id == self.config.default_model || self.config.request_models.contains(&model_id);
        if !allowed {
            return Err(SessionError::validation(
                "config.default_model",
                format!(
                    "{model_id} is not a model requests may choose here; the operator lists them in ASSISTANT__REQUEST_MODELS"
                ),
            ));
        }
        Ok((model_id, client))
    }
}
