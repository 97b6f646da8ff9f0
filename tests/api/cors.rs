//! CORS on every door from one setting, seen by a real browser: headless
//! Debian chromium (playwright-core) loads a page from another origin that
//! calls `POST /api/chat` with fetch, `/api/agui` with the stock
//! `@ag-ui/client`, and Socket.IO (polling) with socket.io-client. Allowed,
//! each works; refused, each fails in the browser and nothing is stored. A
//! cross-site `text/plain` POST never runs a turn.

use std::process::Command;

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::helpers::{spawn_app_with, TestApp};
use crate::socketio_helpers::{clients_dir, ensure_clients_installed};

/// Runs `browser/cors_probe.mjs` against the app and parses what the page saw.
async fn browse(app: &TestApp, prefix: &str) -> Value {
    let url = app.address.clone();
    let prefix = prefix.to_string();
    actix_web::rt::task::spawn_blocking(move || {
        ensure_clients_installed();
        let output = Command::new("node")
            .arg(clients_dir().join("browser/cors_probe.mjs"))
            .args([url, prefix])
            .output()
            .expect("run the browser probe");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let last_line = stdout.lines().last().unwrap_or("");
        serde_json::from_str(last_line).unwrap_or_else(|error| {
            panic!(
                "the probe printed no JSON ({error}):\n{stdout}\n{}",
                String::from_utf8_lossy(&output.stderr)
            )
        })
    })
    .await
    .expect("probe thread")
}

fn assert_allowed(page: &Value) {
    assert_eq!(page["chat"]["ok"], true, "{page}");
    assert_eq!(page["chat"]["status"], 200, "{page}");
    assert_eq!(page["chat"]["content"], "Echo: hello from a page", "{page}");
    assert_eq!(page["agui"]["ok"], true, "{page}");
    let types = page["agui"]["types"].to_string();
    assert!(
        types.contains("RUN_STARTED") && types.contains("RUN_FINISHED"),
        "{page}"
    );
    assert_eq!(page["socket"]["ok"], true, "{page}");
    assert_eq!(page["socket"]["transport"], "polling", "{page}");
    assert_eq!(
        page["socket"]["content"], "Echo: hello over Socket.IO",
        "{page}"
    );
}

async fn stored_sessions(app: &TestApp) -> Vec<String> {
    let (status, list) = app.get("/api/sessions").await;
    assert_eq!(status, StatusCode::OK);
    let mut ids: Vec<String> = list
        .as_array()
        .expect("a list")
        .iter()
        .filter_map(|row| row["session_id"].as_str().map(str::to_string))
        .collect();
    ids.sort();
    ids
}

#[actix_web::test]
async fn a_page_on_an_allowed_origin_reaches_chat_agui_and_socketio() {
    // The default regex allows loopback pages on any port.
    let app = spawn_app_with(&[]).await;
    let page = browse(&app, "allowed").await;
    assert_allowed(&page);
    assert_eq!(
        stored_sessions(&app).await,
        vec!["allowed-agui", "allowed-chat", "allowed-socket"],
        "the text/plain POST ran nothing"
    );
}

#[actix_web::test]
async fn a_page_on_a_refused_origin_reaches_nothing_and_stores_nothing() {
    let app = spawn_app_with(&[
        ("ACCESS__CORS_ORIGINS", "https://app.example.com"),
        ("ACCESS__CORS_ORIGIN_REGEX", ""),
    ])
    .await;
    let page = browse(&app, "refused").await;
    for door in ["chat", "agui", "socket"] {
        assert_eq!(page[door]["ok"], false, "{door}: {page}");
    }
    assert!(stored_sessions(&app).await.is_empty(), "{page}");
}

#[actix_web::test]
async fn a_star_allows_any_origin_without_credentials() {
    let app = spawn_app_with(&[
        ("ACCESS__CORS_ORIGINS", "*"),
        ("ACCESS__CORS_ORIGIN_REGEX", ""),
    ])
    .await;
    let page = browse(&app, "star").await;
    assert_allowed(&page);
    let preflight = preflight(&app, "/api/chat", "https://anywhere.example").await;
    assert_eq!(
        preflight
            .headers()
            .get("access-control-allow-origin")
            .map(|v| v.as_bytes()),
        Some(&b"*"[..])
    );
    assert!(preflight
        .headers()
        .get("access-control-allow-credentials")
        .is_none());
}

async fn preflight(app: &TestApp, path: &str, origin: &str) -> reqwest::Response {
    app.client
        .request(reqwest::Method::OPTIONS, format!("{}{path}", app.address))
        .header("Origin", origin)
        .header("Access-Control-Request-Method", "POST")
        .header(
            "Access-Control-Request-Headers",
            "content-type, authorization",
        )
        .send()
        .await
        .expect("preflight sent")
}

#[actix_web::test]
async fn preflights_answer_every_route_from_the_one_setting() {
    let app = spawn_app_with(&[
        ("ACCESS__CORS_ORIGINS", "https://app.example.com"),
        (
            "ACCESS__CORS_ORIGIN_REGEX",
            r"^https://[a-z]+\.preview\.example$",
        ),
    ])
    .await;
    for path in [
        "/api/chat",
        "/api/agui",
        "/api/sessions/x",
        "/api/chat/x/cancel",
    ] {
        for origin in ["https://app.example.com", "https://pr.preview.example"] {
            let response = preflight(&app, path, origin).await;
            assert!(response.status().is_success(), "{path} {origin}");
            assert_eq!(
                response
                    .headers()
                    .get("access-control-allow-origin")
                    .map(|v| v.to_str().unwrap_or("").to_string()),
                Some(origin.to_string()),
                "{path}"
            );
            assert_eq!(
                response
                    .headers()
                    .get("access-control-allow-credentials")
                    .map(|v| v.as_bytes().to_vec()),
                Some(b"true".to_vec())
            );
        }
        let refused = preflight(&app, path, "http://localhost:3000").await;
        assert!(refused
            .headers()
            .get("access-control-allow-origin")
            .is_none());
    }
    // Socket.IO polling, same policy.
    let engine = |origin: &'static str| {
        app.client
            .get(format!(
                "{}/socket.io/?EIO=4&transport=polling",
                app.address
            ))
            .header("Origin", origin)
            .send()
    };
    let allowed = engine("https://app.example.com").await.expect("sent");
    assert_eq!(allowed.status(), StatusCode::OK);
    let refused = engine("http://localhost:3000").await.expect("sent");
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);
    // A refused origin's simple request runs nothing.
    let response = app
        .client
        .post(format!("{}/api/chat", app.address))
        .header("Origin", "http://evil.example")
        .json(&json!({"id": "m1", "session_id": "evil", "content": "hi"}))
        .send()
        .await
        .expect("sent");
    assert!(response
        .headers()
        .get("access-control-allow-origin")
        .is_none());
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let body: Value = response.json().await.expect("a JSON error");
    assert_eq!(body["type"], "origin_refused", "{body}");
    assert!(stored_sessions(&app).await.is_empty());
}

/// A request without `Origin` (a server, a CLI) skips actix-cors: no CORS
/// headers, only the `Vary` that keeps a cache from serving its answer to a
/// page. The same request from an allowed page gets the full answer.
#[actix_web::test]
async fn only_a_request_with_an_origin_gets_cors_headers() {
    let app = spawn_app_with(&[("ACCESS__CORS_ORIGINS", "https://app.example.com")]).await;
    let chat = |origin: Option<&'static str>, id: &'static str| {
        let request = app
            .client
            .post(format!("{}/api/chat", app.address))
            .json(&json!({"id": id, "session_id": "gate", "content": "hi"}));
        match origin {
            Some(origin) => request.header("Origin", origin),
            None => request,
        }
        .send()
    };
    let header = |response: &reqwest::Response, name: &str| {
        response
            .headers()
            .get(name)
            .map(|value| value.to_str().unwrap_or("").to_string())
    };
    let vary = Some("Origin, Access-Control-Request-Method, Access-Control-Request-Headers".into());

    let plain = chat(None, "m1").await.expect("sent");
    assert_eq!(plain.status(), StatusCode::OK);
    assert_eq!(header(&plain, "vary"), vary);
    let cors_headers: Vec<_> = plain
        .headers()
        .keys()
        .filter(|name| name.as_str().starts_with("access-control-"))
        .collect();
    assert!(cors_headers.is_empty(), "{cors_headers:?}");

    let page = chat(Some("https://app.example.com"), "m2")
        .await
        .expect("sent");
    assert_eq!(page.status(), StatusCode::OK);
    assert_eq!(header(&page, "vary"), vary);
    assert_eq!(
        header(&page, "access-control-allow-origin").as_deref(),
        Some("https://app.example.com")
    );
    assert_eq!(
        header(&page, "access-control-allow-credentials").as_deref(),
        Some("true")
    );
    assert_eq!(
        header(&page, "access-control-expose-headers").as_deref(),
        Some("retry-after")
    );

    // The gate wraps the whole app: an unknown path answers a page too...
    let unknown = app
        .client
        .get(format!("{}/no/such/route", app.address))
        .header("Origin", "https://app.example.com")
        .send()
        .await
        .expect("sent");
    assert_eq!(unknown.status(), StatusCode::NOT_FOUND);
    assert_eq!(
        header(&unknown, "access-control-allow-origin").as_deref(),
        Some("https://app.example.com")
    );
    // ...while Socket.IO, which applies the policy itself, passes untouched.
    let engine = app
        .client
        .get(format!(
            "{}/socket.io/?EIO=4&transport=polling",
            app.address
        ))
        .send()
        .await
        .expect("sent");
    assert_eq!(engine.status(), StatusCode::OK);
    assert_eq!(header(&engine, "vary"), None);
}

#[test]
fn an_origin_without_a_scheme_or_a_bad_regex_stops_startup() {
    use assistant_runtime::settings::Settings;
    for (key, value) in [
        ("ACCESS__CORS_ORIGINS", "localhost:8080"),
        ("ACCESS__CORS_ORIGIN_REGEX", "(unclosed"),
    ] {
        let values = [(key.to_string(), value.to_string())].into_iter().collect();
        let error = Settings::from_map(&values).expect_err("refused");
        assert_eq!(error.key, key);
    }
}
