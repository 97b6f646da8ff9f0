//! The playground at `GET /`: a static page (HTML, CSS, JS) embedded in the
//! binary, so it needs no files and no build step at run time. It talks to
//! the server like any host would: Socket.IO `/assistant` for turns, the
//! session routes for browsing.
//!
//! `assets/assistant-client.js` is the TypeScript client of
//! `clients/typescript` bundled with `socket.io-client` (both MIT) by esbuild
//! (`npm run build` there writes it; commit it when it changes). The page's
//! own `app.js` only draws what the client reports.

use actix_web::http::header::{CacheControl, CacheDirective, ContentType};
use actix_web::{web, HttpResponse};

use crate::mount_prefix::MountPrefix;

const INDEX_HTML: &str = include_str!("assets/index.html");
const APP_JS: &str = include_str!("assets/app.js");
const STYLE_CSS: &str = include_str!("assets/style.css");
const CLIENT_JS: &str = include_str!("assets/assistant-client.js");

/// The playground's assets; its page, `GET /`, is a route of `routes!`.
pub fn configure_assets(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/playground/app.js").get(app_js))
        .service(web::resource("/playground/style.css").get(style_css))
        .service(web::resource("/playground/assistant-client.js").get(client_js));
}

#[utoipa::path(get, path = "/", tag = "docs",
    responses((status = 200, description = "The playground (HTML)", content_type = "text/html", body = String)))]
pub async fn index(prefix: Option<web::Data<MountPrefix>>) -> HttpResponse {
    let page = match prefix.as_ref().map(|prefix| prefix.as_str()) {
        None | Some("") => INDEX_HTML.into(),
        Some(prefix) => mounted_page(prefix),
    };
    HttpResponse::Ok()
        .content_type(ContentType::html())
        .insert_header(CacheControl(vec![CacheDirective::NoCache]))
        .body(page)
}

/// The page of an assistant mounted under `prefix`: its assets, the docs
/// link and, through `window.ASSISTANT_PREFIX`, its script's requests and
/// Socket.IO path all under the prefix.
fn mounted_page(prefix: &str) -> String {
    let quoted = serde_json::to_string(prefix).unwrap_or_else(|_| "\"\"".into());
    INDEX_HTML
        .replace("=\"/playground/", &format!("=\"{prefix}/playground/"))
        .replace("href=\"/docs\"", &format!("href=\"{prefix}/docs\""))
        .replace(
            "window.ASSISTANT_PREFIX = \"\";",
            &format!("window.ASSISTANT_PREFIX = {quoted};"),
        )
}

fn javascript(body: &'static str) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/javascript; charset=utf-8")
        .insert_header(CacheControl(vec![CacheDirective::NoCache]))
        .body(body)
}

async fn app_js() -> HttpResponse {
    javascript(APP_JS)
}

async fn client_js() -> HttpResponse {
    javascript(CLIENT_JS)
}

async fn style_css() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/css; charset=utf-8")
        .insert_header(CacheControl(vec![CacheDirective::NoCache]))
        .body(STYLE_CSS)
}
