//! What the container files promise, checked without Docker (no daemon in
//! CI): `assistant-runtime healthcheck` answers for a ready, a not-ready and
//! an absent server; the compose file publishes on loopback with a
//! healthcheck, a restart policy and an `env_file`; the Dockerfile cooks the
//! dependencies before it copies the sources.

use std::path::Path;
use std::process::Command;

use crate::process::{free_port, scratch_dir, ServerProcess};

/// `healthcheck` run against `port`, its exit code and stderr.
fn healthcheck(port: u16) -> (Option<i32>, String) {
    let dir = scratch_dir("ar_healthcheck");
    let output = Command::new(env!("CARGO_BIN_EXE_assistant-runtime"))
        .arg("healthcheck")
        .env_clear()
        .env("SERVER__PORT", port.to_string())
        .env("RUST_LOG", "warn")
        .current_dir(&dir)
        .output()
        .expect("run healthcheck");
    let _ = std::fs::remove_dir_all(&dir);
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).to_string(),
    )
}

#[actix_web::test]
async fn healthcheck_exits_0_only_when_the_local_runtime_is_ready() {
    let ready = ServerProcess::runtime(&[]).await;
    assert_eq!(healthcheck(ready.app.port).0, Some(0));

    // A model without its key: the process answers, /readyz says 503.
    let not_ready = ServerProcess::runtime(&[("LLM__PRIMARY_MODEL", "openai:gpt-4o")]).await;
    let (code, stderr) = healthcheck(not_ready.app.port);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("503"), "{stderr}");

    let (code, stderr) = healthcheck(free_port());
    assert_eq!(code, Some(1), "{stderr}");
}

fn repository_file(name: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(name)).expect(name)
}

#[test]
fn compose_publishes_on_loopback_with_healthcheck_restart_and_env_file() {
    let compose = repository_file("compose.yaml");
    assert!(compose.contains("\"127.0.0.1:7100:7100\""), "{compose}");
    assert!(!compose.contains("\"7100:7100\""), "{compose}");
    assert!(compose.contains("test: [\"CMD\", \"assistant-runtime\", \"healthcheck\"]"));
    assert!(compose.contains("restart: unless-stopped"));
    assert!(compose.contains("env_file:"));
}

#[test]
fn the_dockerfile_cooks_dependencies_before_copying_the_sources() {
    let dockerfile = repository_file("Dockerfile");
    let cook = dockerfile
        .find("cargo chef cook")
        .expect("a cargo chef cook step");
    let build_stage = dockerfile
        .find("FROM chef AS build")
        .expect("the build stage");
    let sources = dockerfile[build_stage..]
        .find("COPY . .")
        .map(|offset| build_stage + offset)
        .expect("the sources are copied in the build stage");
    assert!(cook < sources, "the dependency layer must come first");
    assert!(dockerfile.contains("CMD [\"assistant-runtime\", \"healthcheck\"]"));
}
