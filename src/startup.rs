//! Build, then run: `Application::build(settings)` wires the runtime and binds
//! the listener (port 0 allowed, for tests); `run_until_stopped` serves.

use std::net::TcpListener;
use std::sync::Arc;

use actix_web::dev::Server;
use actix_web::{web, App, HttpResponse, HttpServer};
use actors::model::catalog::StandardCatalog;
use actors::model::providers::{ModelProviders, ProviderSettings};
use actors::prompt::system::system_prompt;
use actors::session::{Runtime, SessionConfig, SessionDeps};
use actors::store::memory::MemoryStore;
use actors::store::SharedStore;
use actors::tools::ToolRegistry;
use serde::Serialize;

use crate::errors::ApiError;
use crate::settings::Settings;

/// What `/api/models` and `/health` say about models.
#[derive(Clone, Debug, Serialize)]
pub struct ModelsInfo {
    pub default_model: String,
    pub fallback: bool,
    pub providers: Vec<serde_json::Value>,
}

pub struct Application {
    port: u16,
    server: Server,
}

#[derive(Debug)]
pub struct StartupError(pub String);

impl std::fmt::Display for StartupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for StartupError {}

impl Application {
    pub async fn build(settings: Settings) -> Result<Application, StartupError> {
        let store: SharedStore = Arc::new(MemoryStore::new());
        let runtime = build_runtime(&settings, store);
        let models = ModelsInfo {
            default_model: settings.primary_model.to_string(),
            fallback: settings.model_fallback,
            providers: vec![
                serde_json::json!({"name": "builtin", "has_credentials": true, "models": ["builtin:echo"]}),
            ],
        };
        if settings.model_fallback {
            log::info!("no provider key configured: starting on builtin:echo");
        }
        let listener =
            TcpListener::bind((settings.host.as_str(), settings.port)).map_err(|error| {
                StartupError(format!(
                    "cannot listen on {}:{}: {error}",
                    settings.host, settings.port
                ))
            })?;
        let port = listener
            .local_addr()
            .map_err(|error| StartupError(error.to_string()))?
            .port();
        log::info!(
            "assistant-runtime listening on {}:{port} (model {}, store {})",
            settings.host,
            settings.primary_model,
            runtime.deps().store.kind()
        );
        let max_body = settings.max_body_bytes;
        let runtime = web::Data::new(runtime);
        let models = web::Data::new(models);
        let mut server = HttpServer::new(move || {
            App::new()
                .app_data(runtime.clone())
                .app_data(models.clone())
                .app_data(web::PayloadConfig::new(max_body))
                .wrap(crate::errors::json_error_pages(max_body))
                .app_data(
                    web::QueryConfig::default().error_handler(|error, _request| {
                        actix_web::Error::from(ApiError::from(actors::contract::ValidationError {
                            path: "query".into(),
                            message: error.to_string(),
                        }))
                    }),
                )
                .configure(crate::routes::configure)
                .default_service(web::to(|| async {
                    HttpResponse::NotFound()
                        .json(serde_json::json!({"error": "no such route", "type": "not_found"}))
                }))
        })
        .listen(listener)
        .map_err(|error| StartupError(error.to_string()))?;
        if settings.workers > 0 {
            server = server.workers(settings.workers);
        }
        Ok(Application {
            port,
            server: server.run(),
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub async fn run_until_stopped(self) -> std::io::Result<()> {
        self.server.await
    }
}

pub fn build_runtime(settings: &Settings, store: SharedStore) -> Runtime {
    let tools = ToolRegistry {
        host_tools: settings.host_tools.clone(),
        page_scopes: settings.page_scopes.clone(),
        invalidations: settings.invalidations.clone(),
    };
    let deps = SessionDeps {
        store,
        models: Arc::new(catalog(settings)),
        invalidations: Arc::new(settings.invalidations.clone()),
        tools,
        config: SessionConfig {
            default_model: settings.primary_model.clone(),
            system_prompt: system_prompt(settings.system_prompt.as_deref()),
            max_turns: settings.max_turns,
            thinking_budget: settings.thinking_budget,
            budget: settings.budget,
            idle_timeout: settings.session_idle,
        },
    };
    Runtime::new(deps)
}

fn model_providers(settings: &Settings) -> ModelProviders {
    ModelProviders::new(ProviderSettings {
        openai_api_key: settings.providers.openai_api_key.clone(),
        openai_base_url: settings.providers.openai_base_url.clone(),
        anthropic_api_key: settings.providers.anthropic_api_key.clone(),
        anthropic_base_url: settings.providers.anthropic_base_url.clone(),
        request_timeout: settings.request_timeout,
        retry_backoff: settings.retry_backoff,
    })
}

fn catalog(settings: &Settings) -> StandardCatalog {
    let providers = model_providers(settings);
    StandardCatalog::with_providers(move |id| {
        providers.client_for(id).map_err(|error| error.to_string())
    })
}
