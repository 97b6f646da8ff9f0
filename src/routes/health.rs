//! `GET /health`, `/livez`, `/readyz`, `/metrics`, `GET /api/models`,
//! `GET /api/debug/tools` and `GET /api/debug/prompt`.

use actix_web::{web, HttpRequest, HttpResponse};
use actors::session::{Runtime, SessionError};
use serde::Serialize;
use serde_json::json;
use utoipa::ToSchema;

use crate::access::{Access, Authenticated};
use crate::errors::ApiError;
use crate::models_info::ModelsInfo;
use crate::observability::metrics::Snapshot;
use crate::observability::Metrics;

/// Liveness: the process answers HTTP. Never depends on the store or a
/// model, so an orchestrator does not restart a runtime that is only waiting
/// for its database.
/// `/livez`'s answer.
#[derive(Serialize, ToSchema)]
pub struct Liveness {
    /// Always `alive`.
    pub status: &'static str,
}

/// `/readyz`'s answer.
#[derive(Serialize, ToSchema)]
pub struct Readiness {
    /// `ready` or `not_ready`.
    pub status: &'static str,
    /// What is missing when not ready: `store`, `model`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<&'static str>,
    /// Why each missing part is missing, and the fix when one is known
    /// (a database to `createdb`, a provider key to set).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
}

/// `/health`'s answer.
#[derive(Serialize, ToSchema)]
pub struct HealthReport {
    pub healthy: bool,
    /// Always `assistant-runtime`.
    pub runtime: &'static str,
    pub version: &'static str,
    pub components: HealthComponents,
}

#[derive(Serialize, ToSchema)]
pub struct HealthComponents {
    pub store: StoreHealth,
    pub model: ModelHealth,
    pub sessions: SessionsHealth,
    /// MCP servers as connected at startup: `{"healthy", "servers"}`.
    #[schema(value_type = Object)]
    pub mcp: serde_json::Value,
}

#[derive(Serialize, ToSchema)]
pub struct StoreHealth {
    /// `memory` or `postgres`.
    pub kind: &'static str,
    pub healthy: bool,
    /// Why the store cannot be used, and the fix when one is known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

#[derive(Serialize, ToSchema)]
pub struct ModelHealth {
    pub default_model: String,
    pub healthy: bool,
    pub fallback_to_echo: bool,
    /// Why the model is unhealthy, or that the runtime fell back to echo.
    pub detail: Option<String>,
    /// Every provider model ids may name (`GET /api/models` adds base URLs).
    pub providers: Vec<ProviderHealth>,
}

#[derive(Serialize, ToSchema)]
pub struct ProviderHealth {
    pub name: String,
    /// `openai` or `anthropic`; null for `builtin`.
    pub kind: Option<&'static str>,
    /// Whether requests can be sent (a key, or for an OpenAI-compatible
    /// provider its own base URL).
    pub has_credentials: bool,
}

#[derive(Serialize, ToSchema)]
pub struct SessionsHealth {
    /// Session actors in memory now.
    pub live: usize,
}

#[utoipa::path(get, path = "/health", tag = "operations",
    responses((status = 200, description = "Healthy", body = HealthReport),
        (status = 503, description = "A turn cannot be answered now", body = HealthReport)))]
pub async fn health(runtime: web::Data<Runtime>, models: web::Data<ModelsInfo>) -> HttpResponse {
    let health = runtime.health().await;
    let body = HealthReport {
        healthy: health.healthy,
        runtime: "assistant-runtime",
        version: env!("CARGO_PKG_VERSION"),
        components: HealthComponents {
            store: StoreHealth {
                kind: health.store,
                healthy: health.store_reachable,
                detail: health.store_problem.clone(),
            },
            model: ModelHealth {
                default_model: health.default_model.clone(),
                healthy: health.model_usable,
                fallback_to_echo: models.fallback,
                detail: model_detail(&health.model_problem, models.fallback),
                providers: models
                    .providers
                    .iter()
                    .map(|provider| ProviderHealth {
                        name: provider.name.clone(),
                        kind: provider.kind,
                        has_credentials: provider.has_credentials,
                    })
                    .collect(),
            },
            sessions: SessionsHealth {
                live: health.live_sessions,
            },
            mcp: mcp_component(runtime.tools().mcp_servers.as_slice()),
        },
    };
    if health.healthy {
        HttpResponse::Ok().json(body)
    } else {
        HttpResponse::ServiceUnavailable().json(body)
    }
}

/// Liveness: the process answers HTTP. Never depends on the store or a
/// model, so an orchestrator does not restart a runtime that is only waiting
/// for its database.
#[utoipa::path(get, path = "/livez", tag = "operations",
    responses((status = 200, description = "The process answers", body = Liveness)))]
pub async fn livez() -> HttpResponse {
    HttpResponse::Ok().json(Liveness { status: "alive" })
}

/// Readiness: a turn can be answered now (store reachable, default model
/// usable); 503 otherwise, naming what is missing.
#[utoipa::path(get, path = "/readyz", tag = "operations",
    responses((status = 200, description = "Ready", body = Readiness),
        (status = 503, description = "Not ready; `missing` says why", body = Readiness)))]
pub async fn readyz(runtime: web::Data<Runtime>) -> HttpResponse {
    let health = runtime.health().await;
    let mut missing = Vec::new();
    let mut reasons = Vec::new();
    if let Some(problem) = health.store_problem {
        missing.push("store");
        reasons.push(problem);
    }
    if !health.model_usable {
        missing.push("model");
        reasons.extend(health.model_problem);
    }
    if missing.is_empty() {
        HttpResponse::Ok().json(Readiness {
            status: "ready",
            missing,
            reasons,
        })
    } else {
        HttpResponse::ServiceUnavailable().json(Readiness {
            status: "not_ready",
            missing,
            reasons,
        })
    }
}

/// Prometheus text format, for an admin or a `METRICS__TOKEN` bearer
/// (`access::metrics_allowed`): the figures include token counts and costs.
#[utoipa::path(get, path = "/metrics", tag = "operations",
    responses((status = 200, description = "Prometheus text exposition", content_type = "text/plain", body = String),
        (status = 401, description = "No admin credentials and no metrics token", body = crate::errors::ErrorBody),
        (status = 403, description = "A caller who is not an admin", body = crate::errors::ErrorBody)))]
pub async fn metrics(
    request: HttpRequest,
    runtime: web::Data<Runtime>,
    metrics: web::Data<Metrics>,
    access: web::Data<Access>,
) -> Result<HttpResponse, ApiError> {
    access.metrics_allowed(request.headers())?;
    let health = runtime.health().await;
    let text = metrics.render(Snapshot {
        live_actors: health.live_sessions,
        stored_sessions: metrics.stored_sessions(),
        store_reachable: health.store_reachable,
    });
    Ok(HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4; charset=utf-8")
        .body(text))
}

#[utoipa::path(get, path = "/api/models", tag = "operations",
    responses((status = 200, description = "Configured providers and the default model", body = ModelsInfo)))]
/// Any authenticated caller may read the model list and the tools.
pub async fn models(_caller: Authenticated, models: web::Data<ModelsInfo>) -> HttpResponse {
    HttpResponse::Ok().json(models.as_ref())
}

#[utoipa::path(get, path = "/api/debug/tools", tag = "operations",
    responses((status = 200, description = "The tool registry: backend tools, configured host tools, page scopes", body = Object)))]
pub async fn debug_tools(_caller: Authenticated, runtime: web::Data<Runtime>) -> HttpResponse {
    HttpResponse::Ok().json(runtime.tools().describe())
}

/// The composed system prompt and the profile parts it came from, in order.
/// Admins only: the prompt is the operator's configuration.
#[utoipa::path(get, path = "/api/debug/prompt", tag = "operations",
    responses((status = 200, description = "The composed system prompt and its profile parts", body = Object),
        (status = 401, description = "No acceptable credentials", body = crate::errors::ErrorBody),
        (status = 403, description = "Not an admin", body = crate::errors::ErrorBody)))]
pub async fn debug_prompt(
    Authenticated(caller): Authenticated,
    runtime: web::Data<Runtime>,
) -> Result<HttpResponse, ApiError> {
    if !caller.admin {
        return Err(SessionError::Forbidden("the system prompt is for admins".into()).into());
    }
    let config = &runtime.deps().config;
    Ok(HttpResponse::Ok().json(json!({
        "profile": config.profile.source,
        "parts": config.profile.parts().iter().map(|part| part.name.as_str()).collect::<Vec<_>>(),
        "system_prompt": config.system_prompt,
        "bytes": config.system_prompt.len(),
    })))
}

/// MCP servers as connected at startup. A failed server leaves its tools
/// out but every turn can still be answered, so it does not make `/health` 503.
fn mcp_component(servers: &[serde_json::Value]) -> serde_json::Value {
    let connected = |server: &&serde_json::Value| server["connected"] == true;
    json!({
        "healthy": servers.iter().all(|server| connected(&server)),
        "servers": servers,
    })
}

/// One sentence for operators: why the model is unhealthy, or that the
/// runtime fell back to echo; null when a configured model is usable.
fn model_detail(problem: &Option<String>, fallback: bool) -> Option<String> {
    match (problem, fallback) {
        (Some(problem), _) => Some(problem.clone()),
        (None, true) => Some(
            "no provider key configured (OPENAI_API_KEY, ANTHROPIC_API_KEY): running on builtin:echo"
                .to_string(),
        ),
        (None, false) => None,
    }
}
