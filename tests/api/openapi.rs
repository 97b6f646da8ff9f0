//! The OpenAPI document is generated (utoipa) and must describe exactly the
//! route table: the same (method, path) pairs, each one actually served, each
//! with its request and response schemas. `/docs` serves the vendored
//! Swagger UI, rendered offline in chromium.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

use assistant_runtime::routes::route_table;
use serde_json::{json, Value};

use crate::helpers::spawn_app;
use crate::socketio_helpers::ensure_clients_installed;

const METHODS: [&str; 5] = ["get", "post", "put", "patch", "delete"];

fn documented(document: &Value) -> BTreeSet<(String, String)> {
    let paths = document["paths"].as_object().expect("paths");
    paths
        .iter()
        .flat_map(|(path, item)| {
            METHODS
                .iter()
                .filter(|method| item.get(**method).is_some())
                .map(move |method| (method.to_string(), path.clone()))
        })
        .collect()
}

#[actix_web::test]
async fn the_documents_paths_equal_the_route_table_and_each_is_served() {
    let app = spawn_app().await;
    let (status, document) = app.get("/openapi.json").await;
    assert_eq!(status, 200);
    assert!(document["openapi"]
        .as_str()
        .unwrap_or("")
        .starts_with("3.1"));
    let table: BTreeSet<(String, String)> = route_table().into_iter().collect();
    assert_eq!(documented(&document), table);

    // The table is what the server serves: no route in it falls through to
    // the app's "no such route", and none refuses its own method.
    for (method, path) in route_table() {
        let url = format!("{}{}", app.address, path.replace("{session_id}", "nosuch"));
        let request = match method.as_str() {
            "get" => app.client.get(&url),
            "post" => app.client.post(&url).json(&json!({})),
            "delete" => app.client.delete(&url),
            "patch" => app.client.patch(&url).json(&json!({"owner_id": null})),
            other => panic!("unexpected method {other}"),
        };
        let response = request.send().await.expect("request");
        let status = response.status().as_u16();
        let body = response.text().await.unwrap_or_default();
        assert_ne!(status, 405, "{method} {path}");
        assert!(
            !(status == 404 && body.contains("no such route")),
            "{method} {path} is not served"
        );
    }
}

#[actix_web::test]
async fn every_operation_has_response_schemas_from_the_types() {
    let app = spawn_app().await;
    let (_, document) = app.get("/openapi.json").await;
    for (method, path) in documented(&document) {
        let operation = &document["paths"][&path][&method];
        let responses = operation["responses"].as_object().expect("responses");
        for (status, response) in responses {
            assert!(
                response["content"]
                    .as_object()
                    .is_some_and(|content| !content.is_empty()),
                "{method} {path} {status} has no content schema"
            );
        }
    }
    let chat = &document["paths"]["/api/chat"]["post"];
    assert_eq!(
        chat["requestBody"]["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/MessageBody"
    );
    assert_eq!(
        chat["responses"]["200"]["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/FinalResponse"
    );
    assert_eq!(
        chat["responses"]["422"]["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/ErrorBody"
    );
    let schemas = &document["components"]["schemas"];
    for (schema, field) in [
        ("FinalResponse", "pending_tool_call"),
        ("PendingToolCall", "queued"),
        ("Usage", "cost_usd"),
        ("SessionInfo", "pending_action"),
        ("PendingAction", "output_mode"),
        ("SessionSummary", "message_count"),
        ("MessageBody", "host_context"),
        ("HealthReport", "components"),
        ("ModelsInfo", "providers"),
        ("ErrorBody", "type"),
    ] {
        assert!(
            schemas[schema]["properties"].get(field).is_some(),
            "{schema}.{field} missing: {}",
            schemas[schema]
        );
    }
}

#[actix_web::test]
async fn the_docs_page_renders_offline_in_chromium() {
    let app = spawn_app().await;
    let (status, html) = app.get_text("/docs").await;
    assert_eq!(status, 200);
    assert!(html.contains("/docs/swagger-ui-bundle.js"), "{html}");
    let url = format!("{}/docs", app.address);
    let output = actix_web::rt::task::spawn_blocking(move || {
        ensure_clients_installed();
        let script =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/clients/browser/docs.mjs");
        Command::new("node")
            .arg(script)
            .arg(url)
            .output()
            .expect("run node")
    })
    .await
    .expect("browser thread");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let result: Value = serde_json::from_str(stdout.lines().last().unwrap_or(""))
        .unwrap_or_else(|error| panic!("no JSON ({error}):\n{stdout}\n{stderr}"));
    assert_eq!(result["error"], Value::Null, "{result}");
    assert_eq!(
        result["operations"].as_u64(),
        Some(route_table().len() as u64),
        "{result}"
    );
    assert_eq!(result["console_errors"], json!([]), "{result}");
}

/// Point 11: the document says how callers authenticate, and every `/api/`
/// operation lists the refusals access control can answer.
#[actix_web::test]
async fn point_11_the_document_has_security_schemes_and_access_refusals() {
    let app = spawn_app().await;
    let (_, document) = app.get("/openapi.json").await;
    let schemes = &document["components"]["securitySchemes"];
    assert_eq!(schemes["bearer"]["scheme"], "bearer", "{schemes}");
    assert_eq!(schemes["principalHeader"]["in"], "header", "{schemes}");
    for (method, path) in documented(&document) {
        if !path.starts_with("/api/") {
            continue;
        }
        let operation = &document["paths"][&path][&method];
        assert!(operation["security"].is_array(), "{method} {path}");
        for status in ["401", "403"] {
            assert!(
                operation["responses"].get(status).is_some(),
                "{method} {path} lacks {status}"
            );
        }
        if method == "post" {
            assert!(
                operation["responses"].get("415").is_some(),
                "{method} {path}"
            );
        }
    }
    for path in ["/api/chat", "/api/agui"] {
        assert!(
            document["paths"][path]["post"]["responses"]
                .get("429")
                .is_some(),
            "{path}"
        );
    }
}
