//! `GET /health`, `GET /api/models`, `GET /api/debug/tools` and
//! `GET /api/debug/prompt`.

use actix_web::{web, HttpResponse};
use actors::session::Runtime;
use serde_json::json;

use crate::startup::ModelsInfo;

pub async fn health(runtime: web::Data<Runtime>, models: web::Data<ModelsInfo>) -> HttpResponse {
    let health = runtime.health().await;
    let body = json!({
        "healthy": health.healthy,
        "runtime": "assistant-runtime",
        "version": env!("CARGO_PKG_VERSION"),
        "components": {
            "store": {"kind": health.store, "healthy": health.store_reachable},
            "model": {
                "default_model": health.default_model,
                "healthy": health.model_usable,
                "fallback_to_echo": models.fallback,
                "detail": model_detail(&health.model_problem, models.fallback),
            },
            "sessions": {"live": health.live_sessions},
            "mcp": mcp_component(runtime.tools().mcp_servers.as_slice()),
        },
    });
    if health.healthy {
        HttpResponse::Ok().json(body)
    } else {
        HttpResponse::ServiceUnavailable().json(body)
    }
}

pub async fn models(models: web::Data<ModelsInfo>) -> HttpResponse {
    HttpResponse::Ok().json(models.as_ref())
}

pub async fn debug_tools(runtime: web::Data<Runtime>) -> HttpResponse {
    HttpResponse::Ok().json(runtime.tools().describe())
}

/// The composed system prompt and the profile parts it came from, in order.
pub async fn debug_prompt(runtime: web::Data<Runtime>) -> HttpResponse {
    let config = &runtime.deps().config;
    HttpResponse::Ok().json(json!({
        "profile": config.profile.source,
        "parts": config.profile.parts().iter().map(|part| part.name.as_str()).collect::<Vec<_>>(),
        "system_prompt": config.system_prompt,
        "bytes": config.system_prompt.len(),
    }))
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
