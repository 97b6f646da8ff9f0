//! Test harness: starts the Socket.IO transport on `127.0.0.1:0` with an echo
//! namespace, installs the stock clients once (the workspace's
//! `tests/clients/install.sh`) and runs their probe scripts, returning the JSON
//! each prints.

use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use actix_web::dev::ServerHandle;
use actix_web::{App, HttpServer};
use assistant_socketio::{
    http_service, AckSender, NamespaceHandler, SocketIo, SocketIoConfig, SocketRef,
};
use serde_json::{json, Value};

/// Namespace the echo handler is registered under.
pub const TEST_NAMESPACE: &str = "/test";
/// A second echo namespace, to check multiplexing on one connection.
pub const OTHER_NAMESPACE: &str = "/other";
/// The takeover server's request head deadline (`SERVER__HEADER_TIMEOUT`'s role).
const HEADER_TIMEOUT: Duration = Duration::from_secs(5);

/// Echoes `echo` back as an emit, acknowledges with the arguments it got, and
/// answers `burst {count}` with `count` numbered `burst_item` emits and
/// `flood {count, size}` with `count` strings of `size` bytes.
pub struct EchoHandler;

impl NamespaceHandler for EchoHandler {
    fn on_event(&self, socket: SocketRef, event: String, args: Vec<Value>, ack: Option<AckSender>) {
        let first = args.first().cloned().unwrap_or(Value::Null);
        match event.as_str() {
            "echo" => {
                socket.emit("echo", first);
            }
            "burst" => {
                let count = first.get("count").and_then(Value::as_u64).unwrap_or(0);
                for i in 0..count {
                    socket.emit("burst_item", json!({ "i": i }));
                }
            }
            "flood" => {
                let count = first.get("count").and_then(Value::as_u64).unwrap_or(0);
                let size = first.get("size").and_then(Value::as_u64).unwrap_or(0);
                let chunk = "x".repeat(size as usize);
                for _ in 0..count {
                    socket.emit("flood_item", Value::String(chunk.clone()));
                }
            }
            _ => {}
        }
        if let Some(ack) = ack {
            ack.send(args);
        }
    }
}

/// A running server; stopped when dropped.
pub struct TestServer {
    pub addr: SocketAddr,
    handle: ServerHandle,
}

impl TestServer {
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn engine_url(&self, query: &str) -> String {
        format!("http://{}/socket.io/?{query}", self.addr)
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        let stopping = self.handle.stop(false);
        actix_web::rt::spawn(stopping);
    }
}

/// Which server serves the transport.
#[derive(Debug, Clone, Copy)]
pub enum ServerKind {
    /// `actix_web::HttpServer`: a websocket runs inside the h1 dispatcher.
    HttpServer,
    /// What the server binary runs ([`http_service`] under `actix_server`):
    /// an accepted websocket is taken out of the dispatcher.
    Takeover,
}

/// Starts a server of `kind` with the echo namespace under `config`.
pub fn spawn_server(kind: ServerKind, config: SocketIoConfig) -> TestServer {
    let io = SocketIo::new(config)
        .namespace(TEST_NAMESPACE, EchoHandler)
        .namespace(OTHER_NAMESPACE, EchoHandler);
    let make_app = move || {
        let io = io.clone();
        App::new().configure(move |cfg| io.configure(cfg))
    };
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    let addr = listener.local_addr().expect("bound address");
    let (server, handle) = match kind {
        ServerKind::HttpServer => {
            let server = HttpServer::new(make_app)
                .workers(2)
                .listen(listener)
                .expect("listen on 127.0.0.1")
                .run();
            let handle = server.handle();
            (server, handle)
        }
        ServerKind::Takeover => {
            let server = actix_server::Server::build()
                .workers(2)
                .listen("socketio-test", listener, move || {
                    http_service(make_app.clone(), addr, HEADER_TIMEOUT)
                })
                .expect("listen on 127.0.0.1")
                .run();
            let handle = server.handle();
            (server, handle)
        }
    };
    actix_web::rt::spawn(server);
    TestServer { addr, handle }
}

/// Which stock client runs a probe.
#[derive(Debug, Clone, Copy)]
pub enum Client {
    Python,
    Node,
}

/// The stock clients live with the workspace's black-box tests, which drive
/// them too.
pub fn clients_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/clients")
}

/// Runs `tests/clients/install.sh` once per test binary (it is idempotent and
/// quick when both clients are already installed).
pub fn ensure_clients_installed() {
    static INSTALLED: OnceLock<Result<(), String>> = OnceLock::new();
    let installed = INSTALLED.get_or_init(|| {
        let output = Command::new("bash")
            .arg(clients_dir().join("install.sh"))
            .output()
            .map_err(|error| format!("cannot run install.sh: {error}"))?;
        if output.status.success() {
            Ok(())
        } else {
            Err(format!(
                "tests/clients/install.sh failed:\n{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            ))
        }
    });
    if let Err(message) = installed {
        panic!("{message}");
    }
}

/// Runs a probe script (`mode` is `default` or `websocket`) and parses its JSON.
pub async fn run_probe(
    client: Client,
    url: String,
    namespace: &str,
    mode: &str,
    burst: u32,
) -> Value {
    let namespace = namespace.to_owned();
    let mode = mode.to_owned();
    actix_web::rt::task::spawn_blocking(move || {
        ensure_clients_installed();
        let dir = clients_dir();
        let mut command = match client {
            Client::Python => {
                let mut command = Command::new(dir.join(".venv/bin/python"));
                command.arg(dir.join("sio_probe.py"));
                command
            }
            Client::Node => {
                let mut command = Command::new("node");
                command.arg(dir.join("sio_probe.mjs"));
                command
            }
        };
        let output = command
            .args([url, namespace, mode, burst.to_string()])
            .output()
            .expect("run probe client");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        let last_line = stdout.lines().last().unwrap_or("");
        serde_json::from_str(last_line).unwrap_or_else(|error| {
            panic!(
                "{client:?} probe printed no JSON ({error}):\nstdout:\n{stdout}\nstderr:\n{stderr}"
            )
        })
    })
    .await
    .expect("probe thread")
}

/// reqwest's rustls is built without a crypto provider; ring is the one the
/// workspace names.
pub fn http_client_builder() -> reqwest::ClientBuilder {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
}
