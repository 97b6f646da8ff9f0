//! `GET /health`, `GET /api/models` and `GET /api/debug/tools`.

use actix_web::{web, HttpResponse};
use actors::session::Runtime;
use serde_json::json;

use crate::access::Authenticated;
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
        },
    });
    if health.healthy {
        HttpResponse::Ok().json(body)
    } else {
        HttpResponse::ServiceUnavailable().json(body)
    }
}

/// Any authenticated caller may read the model list and the tools.
pub async fn models(_caller: Authenticated, models: web::Data<ModelsInfo>) -> HttpResponse {
    HttpResponse::Ok().json(models.as_ref())
}

pub async fn debug_tools(_caller: Authenticated, runtime: web::Data<Runtime>) -> HttpResponse {
    HttpResponse::Ok().json(runtime.tools().describe())
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
