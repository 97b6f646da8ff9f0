//! The HTTP routes of runtime.md section 1. Handlers parse, make one call on
//! the `Runtime`, and write back what it answers.

mod chat;
mod health;
mod openapi;
mod sessions;

use actix_web::web;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/health", web::get().to(health::health))
        .route("/openapi.json", web::get().to(openapi::openapi))
        .route("/api/chat", web::post().to(chat::post_chat))
        .route("/api/agui", web::post().to(crate::agui::post_agui))
        .route(
            "/api/chat/{session_id}/cancel",
            web::post().to(chat::cancel),
        )
        .route("/api/sessions", web::get().to(sessions::list))
        .route("/api/sessions/{session_id}", web::get().to(sessions::info))
        .route(
            "/api/sessions/{session_id}",
            web::delete().to(sessions::delete),
        )
        .route(
            "/api/sessions/{session_id}/messages",
            web::get().to(sessions::messages),
        )
        .route(
            "/api/sessions/{session_id}/tree",
            web::get().to(sessions::tree),
        )
        .route(
            "/api/sessions/{session_id}/repair",
            web::post().to(sessions::repair),
        )
        .route("/api/debug/tools", web::get().to(health::debug_tools))
        .route("/api/models", web::get().to(health::models));
}
