//! `GET /docs`: Swagger UI over `/openapi.json`, served from the binary so it
//! works offline. `assets/swagger-ui-bundle.js` and `assets/swagger-ui.css`
//! are copied verbatim from the npm package `swagger-ui-dist` (5.x;
//! Apache-2.0, `assets/LICENSE` and `assets/NOTICE` beside them). To update:
//! `npm install swagger-ui-dist` anywhere and copy the two files again.

use actix_web::http::header::{CacheControl, CacheDirective, ContentType};
use actix_web::{web, HttpResponse};

use crate::mount_prefix::MountPrefix;

const BUNDLE_JS: &str = include_str!("assets/swagger-ui-bundle.js");
const STYLE_CSS: &str = include_str!("assets/swagger-ui.css");

/// The page: the vendored UI pointed at this server's document.
const PAGE: &str = r##"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>assistant-runtime API</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/docs/swagger-ui.css">
</head>
<body>
<div id="swagger-ui"></div>
<script src="/docs/swagger-ui-bundle.js"></script>
<script>
window.ui = SwaggerUIBundle({ url: "/openapi.json", dom_id: "#swagger-ui", deepLinking: true });
</script>
</body>
</html>
"##;

/// The docs page's assets; the page, `GET /docs`, is a route of `routes!`.
pub fn configure_assets(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/docs/swagger-ui-bundle.js").get(bundle_js))
        .service(web::resource("/docs/swagger-ui.css").get(style_css));
}

#[utoipa::path(get, path = "/docs", tag = "docs",
    responses((status = 200, description = "Swagger UI over /openapi.json (HTML)", content_type = "text/html", body = String)))]
pub async fn docs(prefix: Option<web::Data<MountPrefix>>) -> HttpResponse {
    let page = match prefix.as_ref().map(|prefix| prefix.as_str()) {
        None | Some("") => PAGE.into(),
        // Mounted under a prefix: the assets and the document are there too.
        Some(prefix) => PAGE
            .replace("\"/docs/", &format!("\"{prefix}/docs/"))
            .replace("\"/openapi.json\"", &format!("\"{prefix}/openapi.json\"")),
    };
    HttpResponse::Ok()
        .content_type(ContentType::html())
        .body(page)
}

/// The bundle changes only with the binary: clients may keep it a day.
fn cached(content_type: &'static str, body: &'static str) -> HttpResponse {
    HttpResponse::Ok()
        .content_type(content_type)
        .insert_header(CacheControl(vec![CacheDirective::MaxAge(86_400)]))
        .body(body)
}

async fn bundle_js() -> HttpResponse {
    cached("text/javascript; charset=utf-8", BUNDLE_JS)
}

async fn style_css() -> HttpResponse {
    cached("text/css; charset=utf-8", STYLE_CSS)
}
