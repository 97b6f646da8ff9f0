//! A standalone echo server on the Socket.IO transport, for trying clients by
//! hand and measuring per-connection memory: `cargo run -p assistant-socketio --example
//! socketio_echo -- 127.0.0.1:7101`. Namespace `/echo` emits every event back
//! under the same name and acknowledges with the event's arguments.

use actix_web::{App, HttpServer};
use assistant_socketio::{AckSender, NamespaceHandler, SocketIo, SocketIoConfig, SocketRef};
use serde_json::Value;

/// Where to listen when no address is given.
const DEFAULT_ADDR: &str = "127.0.0.1:7101";

struct Echo;

impl NamespaceHandler for Echo {
    fn on_event(&self, socket: SocketRef, event: String, args: Vec<Value>, ack: Option<AckSender>) {
        socket.emit(&event, args.first().cloned().unwrap_or(Value::Null));
        if let Some(ack) = ack {
            ack.send(args);
        }
    }
}

#[actix_web::main]
async fn main() -> std::io::Result<()> {
    env_logger::init();
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| DEFAULT_ADDR.to_owned());
    let io = SocketIo::new(SocketIoConfig::default()).namespace("/echo", Echo);
    HttpServer::new(move || {
        let io = io.clone();
        App::new().configure(move |cfg| io.configure(cfg))
    })
    .bind(addr)?
    .run()
    .await
}
