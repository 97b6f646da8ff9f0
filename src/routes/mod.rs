//! The HTTP routes of runtime.md section 1. Handlers parse, make one call on
//! the `Runtime`, and write back what it answers.

mod chat;
mod health;
mod idempotency;
pub mod openapi;
mod sessions;

use actix_web::web;

/// Every HTTP route (method, path in OpenAPI form) that `configure`, the
/// playground and the docs page register; Socket.IO's `/socket.io/` is the
/// transport's own. `tests/api/openapi.rs` checks the OpenAPI document lists
/// exactly these and that each one is served.
pub const ROUTE_TABLE: &[(&str, &str)] = &[
    ("get", "/"),
    ("get", "/health"),
    ("get", "/livez"),
    ("get", "/readyz"),
    ("get", "/metrics"),
    ("get", "/openapi.json"),
    ("get", "/docs"),
    ("post", "/api/chat"),
    ("post", "/api/chat/{session_id}/cancel"),
    ("post", "/api/agui"),
    ("get", "/api/sessions"),
    ("get", "/api/sessions/{session_id}"),
    ("delete", "/api/sessions/{session_id}"),
    ("get", "/api/sessions/{session_id}/messages"),
    ("get", "/api/sessions/{session_id}/tree"),
    ("get", "/api/sessions/{session_id}/traces"),
    ("post", "/api/sessions/{session_id}/repair"),
    ("get", "/api/debug/tools"),
    ("get", "/api/debug/prompt"),
    ("get", "/api/models"),
];

/// One resource per path, so a known path with the wrong method answers 405
/// (a `Resource` refuses unmatched methods) instead of falling through to the
/// app's 404; `errors::json_error_page` gives that 405 its JSON body. No two
/// paths overlap, so the order is free: the router tries them in turn, and
/// the message routes, which carry nearly every request, come first.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/api/chat").post(chat::post_chat))
        .service(web::resource("/api/agui").post(crate::agui::post_agui))
        .service(web::resource("/health").get(health::health))
        .service(web::resource("/livez").get(health::livez))
        .service(web::resource("/readyz").get(health::readyz))
        .service(web::resource("/metrics").get(health::metrics))
        .service(web::resource("/openapi.json").get(openapi::openapi))
        .service(web::resource("/api/chat/{session_id}/cancel").post(chat::cancel))
        .service(web::resource("/api/sessions").get(sessions::list))
        .service(
            web::resource("/api/sessions/{session_id}")
                .get(sessions::info)
                .delete(sessions::delete),
        )
        .service(web::resource("/api/sessions/{session_id}/messages").get(sessions::messages))
        .service(web::resource("/api/sessions/{session_id}/tree").get(sessions::tree))
        .service(web::resource("/api/sessions/{session_id}/traces").get(sessions::traces))
        .service(web::resource("/api/sessions/{session_id}/repair").post(sessions::repair))
        .service(web::resource("/api/debug/tools").get(health::debug_tools))
        .service(web::resource("/api/debug/prompt").get(health::debug_prompt))
        .service(web::resource("/api/models").get(health::models))
        .configure(crate::playground::configure)
        .configure(crate::api_docs::configure);
}
