//! The embedding API: `examples/embedded_host.rs` is built and run as its own
//! process and driven over HTTP (its tool with per-turn deps, its profile);
//! `AssistantDefinition` in process (limits are the stricter of both, and
//! `ACCESS__MODE=host` asks its authenticate hook).

use std::collections::BTreeMap;
use std::path::Path;

use actors::tools::{Tool, ToolContext, ToolFuture};
use assistant_runtime::embed::{AssistantDefinition, Credentials};
use assistant_runtime::settings::Settings;
use serde_json::{json, Value};

use crate::helpers::TestApp;
use crate::process::{example_binary, ServerProcess};

/// Every tool record of the session's active path.
async fn tool_records(app: &TestApp, session_id: &str) -> Vec<Value> {
    let (status, messages) = app
        .get(&format!("/api/sessions/{session_id}/messages"))
        .await;
    assert_eq!(status, 200, "{messages}");
    messages
        .as_array()
        .or_else(|| messages["messages"].as_array())
        .expect("messages")
        .iter()
        .flat_map(|message| message["segments"].as_array().cloned().unwrap_or_default())
        .filter(|segment| segment["kind"] == "tool_group")
        .flat_map(|segment| segment["tools"].as_array().cloned().unwrap_or_default())
        .collect()
}

#[actix_web::test]
async fn the_embedded_host_example_serves_its_tool_deps_and_profile() {
    let binary = example_binary("embedded_host");
    let server = ServerProcess::start(Path::new(&binary), &[]).await;
    let app = &with_bearer(&server.app, Some("demo-token"));

    let (status, tools) = app.get("/api/debug/tools").await;
    assert_eq!(status, 200);
    assert_eq!(tools["custom_tools"][0]["name"], "order_status");
    assert_eq!(tools["custom_tools"][0]["category"], "backend");
    // The hook's principals are not admins: the prompt is the operator's.
    let (status, _) = app.get("/api/debug/prompt").await;
    assert_eq!(status, 403);

    let (status, reply) = app
        .say(
            "shop-1",
            "m1",
            "call order_status {\"order_id\": \"A-17\"}",
            None,
        )
        .await;
    assert_eq!(status, 200, "{reply}: {}", server.log_text());
    let record = tool_records(app, "shop-1").await.pop().expect("a record");
    assert_eq!(record["category"], "backend");
    assert_eq!(
        record["output"],
        json!({"order_id": "A-17", "status": "shipped", "shop": "Demo Shop", "session_id": "shop-1", "success": true})
    );

    let (status, reply) = app
        .say(
            "shop-1",
            "m2",
            "call order_status {\"order_id\": \"missing\"}",
            None,
        )
        .await;
    assert_eq!(status, 200, "{reply}");
    let record = tool_records(app, "shop-1").await.pop().expect("a record");
    assert_eq!(
        record["output"],
        json!({"success": false, "error": "no such order", "error_code": "not_found"})
    );
    let (status, reply) = app.say("shop-1", "m3", "call order_status {}", None).await;
    assert_eq!(status, 200, "{reply}");
    let record = tool_records(app, "shop-1").await.pop().expect("a record");
    assert_eq!(record["output"]["error_code"], "invalid_arguments");
}

/// `app` as a client sending `Authorization: Bearer <token>` (none: no header).
fn with_bearer(app: &TestApp, token: Option<&str>) -> TestApp {
    let mut headers = reqwest::header::HeaderMap::new();
    if let Some(token) = token {
        headers.insert(
            "authorization",
            format!("Bearer {token}").parse().expect("header value"),
        );
    }
    TestApp {
        address: app.address.clone(),
        port: app.port,
        client: reqwest::Client::builder()
            .default_headers(headers)
            .build()
            .expect("client"),
    }
}

/// Run as its header comment says (`--port`, no `ACCESS__*` setting), the
/// example's hook decides: no token or a wrong one is 401 on every route,
/// the prompt included; its token is 200.
#[actix_web::test]
async fn the_embedded_host_example_applies_its_hook_without_access_mode() {
    let binary = example_binary("embedded_host");
    let server = ServerProcess::start_with(Path::new(&binary), true, &[]).await;
    for token in [None, Some("nope")] {
        let app = with_bearer(&server.app, token);
        let (status, refused) = app.say("auth-1", "m1", "hi", None).await;
        assert_eq!(status, 401, "{token:?}: {refused}");
        assert!(
            refused["error"]
                .as_str()
                .is_some_and(|error| error.contains("a valid bearer token is required")),
            "{refused}"
        );
        assert_eq!(app.get("/api/debug/prompt").await.0, 401, "{token:?}");
    }
    let app = with_bearer(&server.app, Some("demo-token"));
    let (status, reply) = app.say("auth-1", "m1", "hi", None).await;
    assert_eq!(status, 200, "{reply}");
}

/// A mode the operator sets on purpose would turn the hook off: startup
/// stops naming both the setting and the hook. `ACCESS__MODE=host` is fine.
#[test]
fn an_operator_mode_that_would_turn_off_the_hook_stops_startup_naming_both() {
    let hooked = || {
        AssistantDefinition::new().authenticate(|_| {
            Err(assistant_runtime::embed::Refusal {
                message: "no".into(),
            })
        })
    };
    for mode in ["trusted_local", "header"] {
        let started = actix_web::rt::System::new()
            .block_on(hooked().build(settings(&[("ACCESS__MODE", mode)])));
        let error = started.err().expect("refused").to_string();
        assert!(error.contains(&format!("ACCESS__MODE={mode}")), "{error}");
        assert!(
            error.contains("AssistantDefinition::authenticate"),
            "{error}"
        );
    }
    let started = actix_web::rt::System::new()
        .block_on(hooked().build(settings(&[("ACCESS__MODE", "host")])));
    assert!(started.is_ok());
}

struct Ping;

impl Tool for Ping {
    fn name(&self) -> &str {
        "ping"
    }
    fn description(&self) -> &str {
        "Answers pong."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {}})
    }
    fn call(&self, _arguments: Value, context: ToolContext) -> ToolFuture {
        let count = context.deps::<u32>().copied();
        Box::pin(async move { Ok(json!(format!("pong {count:?}"))) })
    }
}

fn settings(values: &[(&str, &str)]) -> Settings {
    let mut map = BTreeMap::new();
    map.insert("SERVER__PORT".to_string(), "0".to_string());
    for (key, value) in values {
        map.insert(key.to_string(), value.to_string());
    }
    Settings::from_map(&map).expect("valid settings")
}

#[actix_web::test]
async fn a_definition_builds_in_process_and_a_scalar_result_is_wrapped() {
    let application = AssistantDefinition::new()
        .tool(Ping)
        .deps(|_session_id| 7u32)
        .build(settings(&[]))
        .await
        .expect("builds");
    let port = application.port();
    actix_web::rt::spawn(application.run_until_stopped());
    let app = TestApp {
        address: format!("http://127.0.0.1:{port}"),
        port,
        client: crate::helpers::http_client(),
    };
    let (status, reply) = app.say("ping", "m1", "call ping {}", None).await;
    assert_eq!(status, 200, "{reply}");
    let record = tool_records(&app, "ping").await.pop().expect("a record");
    assert_eq!(
        record["output"],
        json!({"success": true, "result": "pong Some(7)"})
    );
}

#[test]
fn the_authenticate_hook_is_kept_for_access_control() {
    let definition = AssistantDefinition::new().authenticate(|credentials| {
        credentials
            .header("Authorization")
            .map(|_| assistant_runtime::embed::Principal { id: "u".into() })
            .ok_or(assistant_runtime::embed::Refusal {
                message: "no".into(),
            })
    });
    let hook = definition.authenticate_hook().expect("a hook");
    let with_header = Credentials {
        headers: vec![("authorization".into(), "Bearer x".into())],
        socket_auth: None,
    };
    assert_eq!(hook(&with_header).expect("accepted").id, "u");
    assert!(hook(&Credentials::default()).is_err());
}

struct Named(&'static str);

impl Tool for Named {
    fn name(&self) -> &str {
        self.0
    }
    fn description(&self) -> &str {
        "A tool."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object"})
    }
    fn call(&self, _arguments: Value, _context: ToolContext) -> ToolFuture {
        Box::pin(async { Ok(Value::Null) })
    }
}

#[actix_web::test]
async fn a_tool_named_like_a_builtin_or_twice_stops_startup() {
    for (tools, expected) in [
        (vec!["get_time"], "get_time"),
        (vec!["lookup", "lookup"], "lookup"),
        (vec!["bad name"], "bad name"),
    ] {
        let mut definition = AssistantDefinition::new();
        for name in tools {
            definition = definition.tool(Named(name));
        }
        let error = match definition.build(settings(&[])).await {
            Ok(_) => panic!("{expected} should be refused"),
            Err(error) => error.to_string(),
        };
        assert!(error.contains(expected), "{error}");
    }
}

/// `ACCESS__MODE=host`: the host's hook names the caller of every HTTP
/// request; a refusal is a 401 with its sentence, and ownership follows the
/// principal it names.
#[actix_web::test]
async fn access_mode_host_asks_the_hosts_authenticate_hook() {
    let application = AssistantDefinition::new()
        .authenticate(|credentials| {
            credentials
                .header("x-app-user")
                .map(|user| assistant_runtime::embed::Principal { id: user.into() })
                .ok_or(assistant_runtime::embed::Refusal {
                    message: "sign in to the app first".into(),
                })
        })
        .build(settings(&[("ACCESS__MODE", "host")]))
        .await
        .expect("builds");
    let port = application.port();
    actix_web::rt::spawn(application.run_until_stopped());
    let as_user = |user: Option<&str>| {
        let mut headers = reqwest::header::HeaderMap::new();
        if let Some(user) = user {
            headers.insert("x-app-user", user.parse().expect("header value"));
        }
        TestApp {
            address: format!("http://127.0.0.1:{port}"),
            port,
            client: crate::helpers::http_client_builder()
                .default_headers(headers)
                .build()
                .expect("client"),
        }
    };
    let (status, refused) = as_user(None).say("h1", "m1", "hi", None).await;
    assert_eq!(status, 401, "{refused}");
    assert!(
        refused["error"]
            .as_str()
            .is_some_and(|error| error.contains("sign in to the app first")),
        "{refused}"
    );
    let alice = as_user(Some("alice"));
    let (status, reply) = alice.say("h1", "m1", "hi", None).await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(alice.get("/api/sessions/h1").await.0, 200);
    let (status, other) = as_user(Some("bob")).get("/api/sessions/h1").await;
    assert_eq!(status, 403, "{other}");
}

#[test]
fn access_mode_host_without_a_hook_stops_startup() {
    let started = actix_web::rt::System::new()
        .block_on(AssistantDefinition::new().build(settings(&[("ACCESS__MODE", "host")])));
    let error = started.err().expect("refused").to_string();
    assert!(error.contains("ACCESS__MODE=host"), "{error}");
}
