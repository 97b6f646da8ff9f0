//! The stock Socket.IO clients (python-socketio, socket.io-client), installed
//! once (`tests/clients/install.sh`), driving the whole server through
//! scenario scripts that print JSON.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use serde_json::Value;

/// Which stock client runs a probe.
#[derive(Debug, Clone, Copy)]
pub enum Client {
    Python,
    Node,
}

pub fn clients_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/clients")
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

/// Runs `sio_scenario.{py,mjs}` against the whole server at `url` (`mode` is
/// `default` (polling, then the upgrade), `websocket` or `polling` (never upgrades)) and parses the JSON document it prints: the
/// `assistant:*` events in arrival order, the acks and the final transport.
pub async fn run_scenario(client: Client, url: String, mode: &str, scenario: Value) -> Value {
    let mode = mode.to_owned();
    actix_web::rt::task::spawn_blocking(move || {
        ensure_clients_installed();
        let dir = clients_dir();
        let mut command = match client {
            Client::Python => {
                let mut command = Command::new(dir.join(".venv/bin/python"));
                command.arg(dir.join("sio_scenario.py"));
                command
            }
            Client::Node => {
                let mut command = Command::new("node");
                command.arg(dir.join("sio_scenario.mjs"));
                command
            }
        };
        let output = command
            .args([url, mode, scenario.to_string()])
            .output()
            .expect("run scenario client");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        let last_line = stdout.lines().last().unwrap_or("");
        serde_json::from_str(last_line).unwrap_or_else(|error| {
            panic!(
                "{client:?} scenario printed no JSON ({error}):\nstdout:\n{stdout}\nstderr:\n{stderr}"
            )
        })
    })
    .await
    .expect("scenario thread")
}
