//! `GET /health`, `/livez`, `/readyz`, `/metrics`, `GET /api/models` and
//! `GET /api/debug/tools`.

use actix_web::{web, HttpResponse};
use actors::session::Runtime;
use serde_json::json;

use crate::observability::metrics::Snapshot;
use crate::observability::Metrics;
use crate::startup::ModelsInfo;

/// Liveness: the process answers HTTP. Never depends on the store or a
/// model, so an orchestrator does not restart a runtime that is only waiting
/// for its database.
pub async fn livez() -> HttpResponse {
    HttpResponse::Ok().json(json!({"status": "alive"}))
}

/// Readiness: a turn can be answered now (store reachable, default model
/// usable); 503 otherwise, naming what is missing.
pub async fn readyz(runtime: web::Data<Runtime>) -> HttpResponse {
    let health = runtime.health().await;
    let mut missing = Vec::new();
    if !health.store_reachable {
        missing.push("store");
    }
    if !health.model_usable {
        missing.push("model");
    }
    if missing.is_empty() {
        HttpResponse::Ok().json(json!({"status": "ready"}))
    } else {
        HttpResponse::ServiceUnavailable().json(json!({"status": "not_ready", "missing": missing}))
    }
}

/// Prometheus text format.
pub async fn metrics(runtime: web::Data<Runtime>, metrics: web::Data<Metrics>) -> HttpResponse {
    let health = runtime.health().await;
    let text = metrics.render(Snapshot {
        live_actors: health.live_sessions,
        store_reachable: health.store_reachable,
    });
    HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4; charset=utf-8")
        .body(text)
}

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

pub async fn models(models: web::Data<ModelsInfo>) -> HttpResponse {
    HttpResponse::Ok().json(models.as_ref())
}

pub async fn debug_tools(runtime: web::Data<Runtime>) -> HttpResponse {
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
