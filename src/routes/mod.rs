//! The HTTP routes of runtime.md section 1. Handlers parse, make one call on
//! the `Runtime`, and write back what it answers.

mod chat;
mod health;
mod openapi;
mod sessions;

use actix_web::web;

/// One resource per path, so a known path with the wrong method answers 405
/// (a `Resource` refuses unmatched methods) instead of falling through to the
/// app's 404; `errors::json_error_pages` gives that 405 its JSON body.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/health").get(health::health))
        .service(web::resource("/openapi.json").get(openapi::openapi))
        .service(web::resource("/api/chat").post(chat::post_chat))
        .service(web::resource("/api/agui").post(crate::agui::post_agui))
        .service(web::resource("/api/chat/{session_id}/cancel").post(chat::cancel))
        .service(web::resource("/api/sessions").get(sessions::list))
        .service(
            web::resource("/api/sessions/{session_id}")
                .get(sessions::info)
                .delete(sessions::delete),
        )
        .service(web::resource("/api/sessions/{session_id}/messages").get(sessions::messages))
        .service(web::resource("/api/sessions/{session_id}/tree").get(sessions::tree))
        .service(web::resource("/api/sessions/{session_id}/repair").post(sessions::repair))
        .service(web::resource("/api/debug/tools").get(health::debug_tools))
        .service(web::resource("/api/debug/prompt").get(health::debug_prompt))
        .service(web::resource("/api/models").get(health::models));
}
