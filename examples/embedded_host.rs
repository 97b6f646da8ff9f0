//! A Rust host's own runtime binary, built with the embedding API
//! (`assistant_runtime::embed::AssistantDefinition`): one backend tool that
//! reads per-turn deps, an authenticate hook, a profile and usage limits.
//! Settings come from `config/`, `.env` and the environment as for
//! `assistant-runtime`; `--port` and `--host` as for `serve`. The hook
//! applies without any `ACCESS__*` setting: a request needs the demo token.
//! Run: `cargo run --example embedded_host`, then
//! `curl -s localhost:7100/api/chat -H 'authorization: Bearer demo-token'
//! -H 'content-type: application/json' -d
//! '{"id":"m1","session_id":"s1","content":"call order_status {\"order_id\":\"A-17\"}"}'`.

use std::process::ExitCode;

use actors::prompt::profile::Profile;
use actors::tools::{Tool, ToolContext, ToolError, ToolFuture};
use actors::turn::Budget;
use assistant_runtime::embed::{AssistantDefinition, Principal, Refusal};
use serde_json::{json, Value};

/// What the host hands each turn's tools: here its shop and the session.
struct ShopDeps {
    shop: String,
    session_id: String,
}

/// Looks up an order in the host's own system (a fixed answer here).
struct OrderStatus;

impl Tool for OrderStatus {
    fn name(&self) -> &str {
        "order_status"
    }

    fn description(&self) -> &str {
        "Look up the status of an order by its id."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {"order_id": {"type": "string", "minLength": 1}},
            "required": ["order_id"],
            "additionalProperties": false
        })
    }

    fn invalidates(&self) -> Vec<String> {
        vec!["orders".to_string()]
    }

    fn call(&self, arguments: Value, context: ToolContext) -> ToolFuture {
        let order_id = arguments["order_id"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let deps = context
            .deps::<ShopDeps>()
            .map(|deps| (deps.shop.clone(), deps.session_id.clone()));
        Box::pin(async move {
            let Some((shop, session_id)) = deps else {
                return Err(ToolError::new("no_deps", "the shop is not configured"));
            };
            if order_id == "missing" {
                return Err(ToolError::new("not_found", "no such order"));
            }
            Ok(
                json!({"order_id": order_id, "status": "shipped", "shop": shop, "session_id": session_id}),
            )
        })
    }
}

#[actix_web::main]
async fn main() -> ExitCode {
    let definition = AssistantDefinition::new()
        .tool(OrderStatus)
        .deps(|session_id| ShopDeps {
            shop: "Demo Shop".to_string(),
            session_id: session_id.to_string(),
        })
        .profile(Profile::from_parts(
            "embedded_host",
            &[
                ("persona.md", "You are the Demo Shop assistant."),
                ("domain.md", "Orders have ids like A-17."),
            ],
        ))
        .max_turns(4)
        .budget(Budget {
            tool_calls: Some(8),
            ..Budget::default()
        })
        .authenticate(|credentials| match credentials.header("authorization") {
            Some("Bearer demo-token") => Ok(Principal {
                id: "demo-user".to_string(),
            }),
            _ => Err(Refusal {
                message: "a valid bearer token is required".to_string(),
            }),
        });
    match definition.serve().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("embedded_host: {error}");
            ExitCode::from(1)
        }
    }
}
