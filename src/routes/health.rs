//! `GET /health`, `GET /api/models` and `GET /api/debug/tools`.

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
    HttpResponse::Ok()
        .json(json!({"default_model": models.default_model, "providers": models.providers}))
}

pub async fn debug_tools(runtime: web::Data<Runtime>) -> HttpResponse {
    HttpResponse::Ok().json(runtime.tools().describe())
}
