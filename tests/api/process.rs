//! Server processes for tests that need more than one process or another
//! binary: a command with a clean environment, run in a scratch folder,
//! waited on until `/health` answers, killed and cleaned up on drop.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::helpers::TestApp;

/// The runtime's own binary.
pub const SERVER_BINARY: &str = env!("CARGO_BIN_EXE_assistant-runtime");
/// How long a process may take to answer `/health`.
const STARTUP_DEADLINE: Duration = Duration::from_secs(60);

/// A folder no other test or run uses.
pub fn scratch_dir(prefix: &str) -> PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_nanos())
        .unwrap_or(0);
    let dir = std::env::temp_dir().join(format!(
        "{prefix}_{}_{nanos}_{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).expect("create a scratch folder");
    dir
}

/// A port nothing listens on now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port()
}

/// A running process serving HTTP, killed on drop, its folder removed.
pub struct ServerProcess {
    child: Child,
    pub app: TestApp,
    dir: PathBuf,
    log: PathBuf,
}

impl ServerProcess {
    /// Runs `binary` with only `PATH`, `RUST_LOG=warn`, `SERVER__PORT` and
    /// `env`, in a fresh folder (so no `config/` or `.env` leaks in).
    pub async fn start(binary: &Path, env: &[(&str, &str)]) -> ServerProcess {
        ServerProcess::start_with(binary, false, env).await
    }

    /// `start`, with the port given as `--port` instead of `SERVER__PORT`
    /// when `port_flag`.
    pub async fn start_with(binary: &Path, port_flag: bool, env: &[(&str, &str)]) -> ServerProcess {
        let port = free_port();
        let dir = scratch_dir("ar_process");
        let log = dir.join("server.log");
        let mut command = Command::new(binary);
        command
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("RUST_LOG", "warn")
            .current_dir(&dir)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log file"));
        if port_flag {
            command.arg(format!("--port={port}"));
        } else {
            command.env("SERVER__PORT", port.to_string());
        }
        for (key, value) in env {
            command.env(key, value);
        }
        let child = command.spawn().expect("start the server process");
        let mut server = ServerProcess {
            child,
            app: TestApp {
                address: format!("http://127.0.0.1:{port}"),
                port,
                client: crate::helpers::http_client(),
            },
            dir,
            log,
        };
        let deadline = Instant::now() + STARTUP_DEADLINE;
        loop {
            if let Ok(Some(status)) = server.child.try_wait() {
                panic!("server exited with {status}: {}", server.log_text());
            }
            let health = server
                .app
                .client
                .get(format!("{}/health", server.app.address))
                .send()
                .await;
            if health.is_ok() {
                return server;
            }
            assert!(
                Instant::now() < deadline,
                "server did not come up: {}",
                server.log_text()
            );
            actix_web::rt::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The runtime's own binary (`SERVER_BINARY`) with `env`.
    pub async fn runtime(env: &[(&str, &str)]) -> ServerProcess {
        ServerProcess::start(Path::new(SERVER_BINARY), env).await
    }

    /// The process id, e.g. to read `/proc/<pid>/status`.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGKILL (what `Child::kill` sends): no shutdown code runs, as in a crash.
    pub fn crash(mut self) {
        self.child.kill().expect("kill the server");
        self.child.wait().expect("reap the server");
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A binary of `examples/` (or an `[[example]]` of the test suite), built
/// here with cargo first, so a test never runs a stale one (a no-op when
/// `cargo test --all-targets` just built it).
pub fn example_binary(name: &str) -> PathBuf {
    let test_binary = std::env::current_exe().expect("the test binary's path");
    // target/debug/deps/api-<hash> → target/debug/examples/<name>
    let examples = test_binary
        .parent()
        .and_then(Path::parent)
        .expect("target/debug")
        .join("examples");
    let binary = examples.join(name);
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let mut command = Command::new(cargo);
    command
        .args(["build", "--example", name])
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    if examples
        .parent()
        .is_some_and(|profile| profile.ends_with("release"))
    {
        command.arg("--release");
    }
    let status = command.status().expect("run cargo build");
    assert!(status.success(), "cargo build --example {name} failed");
    assert!(binary.exists(), "{} was not built", binary.display());
    binary
}
