//! The playground at `GET /`, end to end in headless Debian chromium driven by
//! playwright-core (`tests/clients/browser/playground.mjs`): a 422 shown
//! inline and the message marked refused, streaming, host actions answered
//! both ways, a turn that opens with a host call in its own box, a silent decision,
//! steering and cancel, the session tree. The screenshot is kept at
//! `target/test-artifacts/playground.png`.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

use crate::helpers::{spawn_app, spawn_app_with};
use crate::socketio_helpers::ensure_clients_installed;

#[actix_web::test]
async fn the_playground_and_its_vendored_bundle_are_served_from_the_binary() {
    let app = spawn_app().await;
    let (status, html) = app.get_text("/").await;
    assert_eq!(status, 200);
    assert!(html.contains("assistant-runtime playground"), "{html}");
    assert!(html.contains("/playground/assistant-client.js"));
    for (path, expected) in [
        ("/playground/app.js", "AssistantClient"),
        ("/playground/style.css", "grid-template-columns"),
        (
            "/playground/assistant-client.js",
            "@assistant-runtime/client",
        ),
    ] {
        let (status, body) = app.get_text(path).await;
        assert_eq!(status, 200, "{path}");
        assert!(body.contains(expected), "{path}");
    }
}

/// Runs `tests/clients/browser/playground.mjs` against the app and returns
/// the names of its steps (each checked ok) and its JSON result.
async fn run_in_chromium(url: String, name: &str, token: Option<&str>) -> (Vec<String>, Value) {
    let artifacts = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/test-artifacts");
    std::fs::create_dir_all(&artifacts).expect("artifact folder");
    let screenshot = artifacts.join(name);
    let _ = std::fs::remove_file(&screenshot);
    let shot = screenshot.clone();
    let token = token.map(str::to_string);
    let output = actix_web::rt::task::spawn_blocking(move || {
        ensure_clients_installed();
        let script =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/clients/browser/playground.mjs");
        Command::new("node")
            .arg(script)
            .arg(url)
            .arg(shot)
            .args(token)
            .output()
            .expect("run node")
    })
    .await
    .expect("browser thread");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let result: Value = serde_json::from_str(stdout.lines().last().unwrap_or(""))
        .unwrap_or_else(|error| panic!("no JSON ({error}):\n{stdout}\n{stderr}"));
    assert_eq!(result["error"], Value::Null, "{result:#}");
    let names = result["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .inspect(|step| assert_eq!(step["ok"], true, "{step}"))
        .filter_map(|step| step["name"].as_str().map(str::to_string))
        .collect();
    let png = std::fs::read(&screenshot).expect("the screenshot was saved");
    assert!(png.starts_with(b"\x89PNG"), "not a PNG");
    (names, result)
}

#[actix_web::test]
async fn a_developer_uses_the_playground_in_chromium() {
    let app = spawn_app().await;
    let (names, result) =
        run_in_chromium(format!("{}/", app.address), "playground.png", None).await;
    assert_eq!(
        names,
        [
            "connects",
            "shows a 422 path inline",
            "streams thinking and text",
            "answers a host action with success",
            "answers a host action with failure",
            "draws a turn that opens with a host call in its own box",
            "runs a silent decision",
            "steers and cancels a live turn",
            "browses sessions and a tree",
        ]
    );
    assert_eq!(result["console_errors"], serde_json::json!([]), "{result}");
}

/// With `ACCESS__LOCAL_TOKEN` set, the page connects once the token is
/// typed, and keeps it in the tab (sessionStorage) across a reload.
#[actix_web::test]
async fn the_playground_takes_the_local_token() {
    let app = spawn_app_with(&[("ACCESS__LOCAL_TOKEN", "playground-secret")]).await;
    let (names, _) = run_in_chromium(
        format!("{}/", app.address),
        "playground-token.png",
        Some("playground-secret"),
    )
    .await;
    assert_eq!(
        names,
        [
            "is refused without the token",
            "connects with the token",
            "keeps the token in the tab across a reload",
            "streams a turn and lists sessions with the token",
        ]
    );
}
