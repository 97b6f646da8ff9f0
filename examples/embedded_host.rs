//! A Rust host's own runtime binary, built with the embedding API
//! (`assistant_runtime::embed::AssistantDefinition`): one typed tool that
//! reads per-turn deps (`State`), an authenticate hook, a profile and usage limits.
//! Settings come from `config/`, `.env` and the environment as for
//! `assistant-runtime`; `--port` and `--host` as for `serve`. The hook
//! applies without any `ACCESS__*` setting: a request needs the demo token.
//! Run: `cargo run --example embedded_host`, then
//! `curl -s localhost:7100/api/chat -H 'authorization: Bearer demo-token'
//! -H 'content-type: application/json' -d
//! '{"id":"m1","session_id":"s1","content":"call order_status {\"order_id\":\"A-17\"}"}'`.

use std::process::ExitCode;

use actors::prompt::profile::Profile;
use actors::tools::ToolError;
use actors::turn::Budget;
use assistant_runtime::embed::{AssistantDefinition, Principal, Refusal, State, TypedTool};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What the host hands each turn's tools: here its shop and the session.
struct ShopDeps {
    shop: String,
    session_id: String,
}

/// The tool's arguments; the model sees the schema derived from them.
#[derive(Deserialize, JsonSchema)]
struct OrderStatusArgs {
    /// The order's id, e.g. A-17.
    #[schemars(length(min = 1))]
    order_id: String,
}

#[derive(Serialize)]
struct OrderStatus {
    order_id: String,
    status: &'static str,
    shop: String,
    session_id: String,
}

/// Why a lookup failed; becomes the result's `error` and `error_code`.
#[derive(Debug, thiserror::Error)]
enum OrderError {
    #[error("no such order")]
    NotFound,
}

impl From<OrderError> for ToolError {
    fn from(error: OrderError) -> ToolError {
        let code = match error {
            OrderError::NotFound => "not_found",
        };
        ToolError::new(code, error.to_string())
    }
}

/// Looks up an order in the host's own system (a fixed answer here).
async fn order_status(
    args: OrderStatusArgs,
    deps: State<ShopDeps>,
) -> Result<OrderStatus, OrderError> {
    if args.order_id == "missing" {
        return Err(OrderError::NotFound);
    }
    Ok(OrderStatus {
        order_id: args.order_id,
        status: "shipped",
        shop: deps.shop.clone(),
        session_id: deps.session_id.clone(),
    })
}

#[actix_web::main]
async fn main() -> ExitCode {
    let definition = AssistantDefinition::new()
        .tool(
            TypedTool::new(
                "order_status",
                "Look up the status of an order by its id.",
                order_status,
            )
            .invalidates(["orders"]),
        )
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
