//! The model catalog: from a `ModelId` to a client. `builtin:echo` is served
//! here; network providers come from `ModelProviders` when configured.

use std::sync::Arc;

use super::echo::EchoModel;
use super::{ModelId, SharedModelClient};

pub trait ModelCatalog: Send + Sync {
    /// The client for `id`, or why there is none (unknown provider, no credentials).
    fn client_for(&self, id: &ModelId) -> Result<SharedModelClient, String>;
}

/// How a catalog finds the client of a network provider's model.
type ProviderLookup = Box<dyn Fn(&ModelId) -> Result<SharedModelClient, String> + Send + Sync>;

/// Routes `builtin:*` to the built-in models and everything else to `providers`.
pub struct StandardCatalog {
    echo: SharedModelClient,
    providers: Option<ProviderLookup>,
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
        if id.provider == "builtin" {
            return match id.name.as_str() {
                "echo" => Ok(self.echo.clone()),
                other => Err(format!(
                    "unknown builtin model {other:?}; the builtin provider has \"echo\""
                )),
            };
        }
        match &self.providers {
            Some(providers) => providers(id),
            None => Err(format!("provider {:?} is not configured", id.provider)),
        }
    }
}
