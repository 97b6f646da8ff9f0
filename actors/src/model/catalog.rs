//! The model catalog: from a `ModelId` to a client. `builtin:echo` is served
//! here; network providers come from `ModelProviders` when configured.

use std::sync::Arc;

use futures_util::stream::{self, StreamExt};

use super::echo::EchoModel;
use super::{
    ModelClient, ModelError, ModelErrorKind, ModelId, ModelRequest, ModelStream, Resend,
    SharedModelClient,
};

pub trait ModelCatalog: Send + Sync {
    /// The client for `id`, or why there is none (unknown provider, no credentials).
    fn client_for(&self, id: &ModelId) -> Result<SharedModelClient, String>;
}

/// Finds a network provider's client for a model id.
type ProviderLookup = dyn Fn(&ModelId) -> Result<SharedModelClient, String> + Send + Sync;

/// Routes `builtin:*` to the built-in models and everything else to `providers`.
pub struct StandardCatalog {
    echo: SharedModelClient,
    providers: Option<Box<ProviderLookup>>,
}

impl StandardCatalog {
    pub fn builtin_only() -> StandardCatalog {
        StandardCatalog {
            echo: Arc::new(EchoModel),
            providers: None,
        }
    }

    pub fn with_providers(
        providers: impl Fn(&ModelId) -> Result<SharedModelClient, String> + Send + Sync + 'static,
    ) -> StandardCatalog {
        StandardCatalog {
            echo: Arc::new(EchoModel),
            providers: Some(Box::new(providers)),
        }
    }
}

impl ModelCatalog for StandardCatalog {
    fn client_for(&self, id: &ModelId) -> Result<SharedModelClient, String> {
        if id.provider() == "builtin" {
            return match id.name() {
                "echo" => Ok(self.echo.clone()),
                other => Err(format!(
                    "unknown builtin model {other:?}; the builtin provider has \"echo\""
                )),
            };
        }
        match &self.providers {
            Some(providers) => providers(id),
            None => Err(format!("provider {:?} is not configured", id.provider())),
        }
    }
}

/// Stands in for a configured default model whose provider has no
/// credentials: every request fails as `provider_auth`, so a turn on it ends
/// like any rejected request (saved, with a clean final event) instead of
/// refusing the message for a field the host never sent.
pub struct UnconfiguredModel {
    /// Why the catalog had no client, e.g. the provider has no key.
    reason: String,
}

impl UnconfiguredModel {
    pub fn new(reason: impl Into<String>) -> UnconfiguredModel {
        UnconfiguredModel {
            reason: reason.into(),
        }
    }
}

impl ModelClient for UnconfiguredModel {
    fn stream(&self, _request: ModelRequest) -> ModelStream {
        let error = ModelError {
            kind: ModelErrorKind::ProviderAuth,
            resend: Resend::Never,
            message: self.reason.clone(),
        };
        stream::once(async move { Err(error) }).boxed()
    }
}
