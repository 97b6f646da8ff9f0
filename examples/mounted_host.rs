//! A Rust host's own actix-web app with the assistant mounted under
//! `/assistant`: the host keeps its routes (`GET /orders/{id}`), its
//! middleware (a header on every answer) and its server; the assistant
//! brings its HTTP API, AG-UI, Socket.IO (`/assistant/socket.io/`), the
//! playground (`/assistant/`) and `/assistant/openapi.json`.
//! One typed tool, `order_status`, reads the host's state; an authenticate
//! hook accepts `Authorization: Bearer demo-token`.
//! Settings: the defaults (in-memory store, `builtin:echo`) overlaid with
//! the environment (`DATABASE_URL`, `LLM__PRIMARY_MODEL`, ...).
//! Run: `cargo run --example mounted_host -- --port 7100`, then
//! `curl -s localhost:7100/assistant/api/chat -H 'authorization: Bearer demo-token'
//! -H 'content-type: application/json' -d
//! '{"id":"m1","session_id":"s1","content":"call order_status {\"order_id\":\"A-17\"}"}'`.

use std::collections::HashMap;
use std::process::ExitCode;

use actix_web::middleware::DefaultHeaders;
use actix_web::{web, App, HttpResponse, HttpServer};
use actors::tools::ToolError;
use assistant_runtime::embed::{
    AssistantDefinition, Principal, Refusal, SettingsBuilder, State, TypedTool,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The host's own state: its orders, shared by its routes and the tool.
struct Shop {
    name: String,
    orders: HashMap<String, &'static str>,
}

impl Shop {
    fn demo() -> Shop {
        Shop {
            name: "Demo Shop".to_string(),
            orders: HashMap::from([
                ("A-17".to_string(), "shipped"),
                ("B-2".to_string(), "packing"),
            ]),
        }
    }
}

/// The tool's arguments: the schema the model sees is derived from this.
#[derive(Deserialize, JsonSchema)]
struct OrderStatusArgs {
    /// The order's id, e.g. A-17.
    order_id: String,
}

#[derive(Serialize)]
struct OrderStatus {
    order_id: String,
    status: &'static str,
    shop: String,
}

/// The tool's own error; it becomes the result's `error` / `error_code`.
#[derive(Debug, thiserror::Error)]
enum ShopError {
    #[error("no order {0}")]
    NotFound(String),
}

impl From<ShopError> for ToolError {
    fn from(error: ShopError) -> ToolError {
        match &error {
            ShopError::NotFound(_) => ToolError::new("not_found", error.to_string()),
        }
    }
}

async fn order_status(args: OrderStatusArgs, shop: State<Shop>) -> Result<OrderStatus, ShopError> {
    let status = shop
        .orders
        .get(&args.order_id)
        .ok_or_else(|| ShopError::NotFound(args.order_id.clone()))?;
    Ok(OrderStatus {
        order_id: args.order_id,
        status,
        shop: shop.name.clone(),
    })
}

/// The host's own route, beside the assistant.
async fn get_order(shop: web::Data<Shop>, id: web::Path<String>) -> HttpResponse {
    match shop.orders.get(id.as_str()) {
        Some(status) => {
            HttpResponse::Ok().json(serde_json::json!({"order_id": *id, "status": status}))
        }
        None => HttpResponse::NotFound().json(serde_json::json!({"error": "no such order"})),
    }
}

fn port_from_args() -> Result<u16, String> {
    let mut args = std::env::args().skip(1);
    let mut port = 7100;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--port" => {
                let value = args.next().ok_or("--port needs a value")?;
                port = value
                    .parse()
                    .map_err(|_| format!("--port {value:?}: not a port number"))?;
            }
            other if other.starts_with("--port=") => {
                let value = &other["--port=".len()..];
                port = value
                    .parse()
                    .map_err(|_| format!("--port {value:?}: not a port number"))?;
            }
            other => {
                return Err(format!(
                    "unknown argument {other:?} (usage: mounted_host [--port N])"
                ))
            }
        }
    }
    Ok(port)
}

/// The allocator the `assistant-runtime` binary uses (README, "Use it as a
/// library"): the library leaves that choice to the binary.
#[global_allocator]
static ALLOCATOR: assistant_runtime::allocator::MiMalloc = assistant_runtime::allocator::MiMalloc;

#[actix_web::main]
async fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    let port = match port_from_args() {
        Ok(port) => port,
        Err(error) => {
            eprintln!("mounted_host: {error}");
            return ExitCode::from(2);
        }
    };
    let settings = match SettingsBuilder::from_env().build() {
        Ok(settings) => settings,
        Err(error) => {
            eprintln!("mounted_host: {error}");
            return ExitCode::from(2);
        }
    };
    let assistant = AssistantDefinition::new()
        .state(Shop::demo())
        .tool(TypedTool::new(
            "order_status",
            "Look up the status of an order by its id.",
            order_status,
        ))
        .authenticate(|credentials| match credentials.header("authorization") {
            Some("Bearer demo-token") => Ok(Principal {
                id: "demo-user".to_string(),
            }),
            _ => Err(Refusal {
                message: "a valid bearer token is required".to_string(),
            }),
        })
        .assistant(settings)
        .await;
    let assistant = match assistant {
        Ok(assistant) => assistant,
        Err(error) => {
            eprintln!("mounted_host: {error}");
            return ExitCode::from(1);
        }
    };
    let shop = web::Data::new(Shop::demo());
    let server = HttpServer::new(move || {
        App::new()
            .wrap(DefaultHeaders::new().add(("x-served-by", "mounted-host")))
            .app_data(shop.clone())
            .route("/orders/{id}", web::get().to(get_order))
            .service(assistant.scope("/assistant"))
    })
    .bind(("127.0.0.1", port));
    let server = match server {
        Ok(server) => server,
        Err(error) => {
            eprintln!("mounted_host: cannot listen on 127.0.0.1:{port}: {error}");
            return ExitCode::from(1);
        }
    };
    log::info!("mounted_host listening on http://127.0.0.1:{port} (assistant under /assistant)");
    match server.run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("mounted_host: {error}");
            ExitCode::from(1)
        }
    }
}
