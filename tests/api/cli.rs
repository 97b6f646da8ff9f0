//! The command line as a newcomer meets it: help and version whatever the
//! environment holds, per-command help, `--port=N`, unknown flags and commands
//! named, bad settings named, `.env` comments, and `doctor`'s verdicts.
//! Each test runs the real binary in a scratch folder with a clean environment.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

const BINARY: &str = env!("CARGO_BIN_EXE_assistant-runtime");
/// How long a server process may take to come up.
const STARTUP_DEADLINE: Duration = Duration::from_secs(30);

/// A scratch folder (no `config/`, no `.env` unless a test writes one).
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Scratch {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "ar_cli_{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("create a scratch folder");
        Scratch(dir)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn command(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut command = Command::new(BINARY);
    command
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .current_dir(dir);
    for (key, value) in env {
        command.env(key, value);
    }
    command
}

/// Runs the binary to completion: (exit code, stdout, stderr).
fn run(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let scratch = Scratch::new();
    run_in(scratch.path(), args, env)
}

fn run_in(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let Output {
        status,
        stdout,
        stderr,
    } = command(dir, args, env)
        .stdin(Stdio::null())
        .output()
        .expect("run the binary");
    (
        status.code().unwrap_or(-1),
        String::from_utf8_lossy(&stdout).into_owned(),
        String::from_utf8_lossy(&stderr).into_owned(),
    )
}

/// Settings that would stop a server; help must not care.
const HOSTILE_ENV: &[(&str, &str)] = &[
    ("SERVER__PORT", "seventy"),
    ("SERVER__WORKERS", "0"),
    ("ASSISTANT__NOT_A_SETTING", "1"),
];

#[test]
fn help_in_every_spelling_works_whatever_the_environment_holds() {
    for args in [&["--help"][..], &["-h"], &["help"]] {
        let (code, stdout, stderr) = run(args, HOSTILE_ENV);
        assert_eq!(code, 0, "{args:?}: {stderr}");
        for word in ["serve", "migrate", "doctor", "chat", "--port", "--host"] {
            assert!(stdout.contains(word), "{args:?} lacks {word}: {stdout}");
        }
    }
}

#[test]
fn version_in_both_spellings() {
    for flag in ["--version", "-V"] {
        let (code, stdout, _) = run(&[flag], HOSTILE_ENV);
        assert_eq!(code, 0);
        assert_eq!(
            stdout.trim(),
            format!("assistant-runtime {}", env!("CARGO_PKG_VERSION"))
        );
    }
}

#[test]
fn each_command_has_its_own_help() {
    for (args, expected) in [
        (&["serve", "--help"][..], "--port <PORT>"),
        (&["help", "serve"], "--port <PORT>"),
        (&["migrate", "--help"], "migrations"),
        (&["doctor", "-h"], "secrets masked"),
        (&["chat", "--help"], "--session <SESSION>"),
    ] {
        let (code, stdout, stderr) = run(args, HOSTILE_ENV);
        assert_eq!(code, 0, "{args:?}: {stderr}");
        assert!(stdout.contains(expected), "{args:?}: {stdout}");
    }
}

#[test]
fn unknown_flags_commands_and_bad_ports_are_named() {
    for (args, named) in [
        (&["--bogus"][..], "--bogus"),
        (&["serve", "--colour", "red"], "--colour"),
        (&["frobnicate"], "frobnicate"),
        (&["--port=70000"], "--port"),
        (&["serve", "--port=-1"], "--port"),
        (&["--port", "seven"], "--port"),
    ] {
        let (code, _, stderr) = run(args, &[]);
        assert_eq!(code, 2, "{args:?}");
        assert!(stderr.contains(named), "{args:?}: {stderr}");
    }
}

#[test]
fn a_bad_setting_stops_serve_naming_it() {
    for (key, value) in [
        ("SERVER__PORT", "70000"),
        ("SERVER__WORKERS", "0"),
        ("OPENAI_BASE_URL", "localhost:8000/v1"),
        ("ASSISTANT__MAX_TURN", "3"),
    ] {
        let (code, _, stderr) = run(&["serve"], &[(key, value)]);
        assert_eq!(code, 2, "{key}={value}");
        assert!(stderr.contains(key), "{key}={value}: {stderr}");
    }
}

#[test]
fn a_default_model_without_its_key_fails_startup_only_when_required() {
    let (code, _, stderr) = run(
        &["serve"],
        &[
            ("LLM__PRIMARY_MODEL", "openai:gpt-4o"),
            ("LLM__REQUIRE_USABLE", "true"),
        ],
    );
    assert_eq!(code, 2);
    assert!(stderr.contains("LLM__PRIMARY_MODEL"), "{stderr}");
    assert!(stderr.contains("OPENAI_API_KEY"), "{stderr}");
}

#[actix_web::test]
async fn port_flag_with_equals_serves_there_and_warns_about_an_unusable_model() {
    let (health, log) = serve_once(&[
        ("LLM__PRIMARY_MODEL", "openai:gpt-4o"),
        ("RUST_LOG", "warn"),
    ])
    .await;
    // A named model without its key starts (unhealthy), with a warning.
    assert_eq!(health, 503);
    assert!(
        log.contains("openai:gpt-4o needs OPENAI_API_KEY"),
        "no warning in the log: {log}"
    );
}

/// Point 9: a variable that is a near miss of a setting (a typo, or what
/// other tools call it) is named at startup with the setting meant, and
/// stops startup with `LLM__REQUIRE_USABLE=true`.
#[actix_web::test]
async fn point_9_near_miss_settings_are_warned_naming_the_setting_meant() {
    let near_misses = [
        ("SERVER_PORT", "SERVER__PORT"),
        ("SEVRER__PORT", "SERVER__PORT"),
        ("OPENAI_API_BASE", "OPENAI_BASE_URL"),
        ("OPENAI_BASE", "OPENAI_BASE_URL"),
        ("ANTHROPIC_API_URL", "ANTHROPIC_BASE_URL"),
    ];
    let mut env: Vec<(&str, &str)> = near_misses.iter().map(|(key, _)| (*key, "9")).collect();
    env.push(("RUST_LOG", "warn"));
    let (health, log) = serve_once(&env).await;
    assert_eq!(health, 200, "{log}");
    for (key, meant) in near_misses {
        assert!(
            log.contains(&format!("{key} is not a setting; did you mean {meant}?")),
            "{key}: {log}"
        );
    }
    for (key, meant) in near_misses {
        let (code, _, stderr) = run(&["serve"], &[(key, "9"), ("LLM__REQUIRE_USABLE", "true")]);
        assert_eq!(code, 2, "{key}");
        assert!(
            stderr.contains(key) && stderr.contains(meant),
            "{key}: {stderr}"
        );
    }
    // A typo under an owned prefix was already an error; it now says which setting.
    let (code, _, stderr) = run(&["serve"], &[("ASSISTANT__MAX_TURN", "3")]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("did you mean ASSISTANT__MAX_TURNS?"),
        "{stderr}"
    );
}

/// Point 11: the documented default (echo) is said at INFO, not warned,
/// and the playground's and the API docs' addresses are printed.
#[actix_web::test]
async fn point_11_startup_says_where_the_playground_is_and_the_echo_default_is_no_warning() {
    let (health, log) = serve_once(&[("RUST_LOG", "info")]).await;
    assert_eq!(health, 200, "{log}");
    let echo = log
        .lines()
        .find(|line| line.contains("starting on builtin:echo"))
        .unwrap_or_else(|| panic!("no echo line: {log}"));
    assert!(echo.contains("INFO"), "{echo}");
    assert!(log.contains("playground http://127.0.0.1:"), "{log}");
    assert!(log.contains("/docs"), "{log}");
}

/// Starts `serve` on a free port (given as `--port=N`) with `env`, asks
/// `/health` once it answers, stops it: the status and the server's log.
async fn serve_once(env: &[(&str, &str)]) -> (u16, String) {
    let scratch = Scratch::new();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port();
    let log = scratch.path().join("server.log");
    let mut child = command(scratch.path(), &[&format!("--port={port}")], env)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log file"))
        .spawn()
        .expect("start the server");
    let client = crate::helpers::http_client();
    let deadline = Instant::now() + STARTUP_DEADLINE;
    let health = loop {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("server exited with {status}");
        }
        if let Ok(response) = client
            .get(format!("http://127.0.0.1:{port}/health"))
            .send()
            .await
        {
            break response;
        }
        assert!(Instant::now() < deadline, "server did not come up");
        actix_web::rt::time::sleep(Duration::from_millis(50)).await;
    };
    let status = health.status().as_u16();
    let _ = child.kill();
    let _ = child.wait();
    (status, std::fs::read_to_string(&log).unwrap_or_default())
}

#[test]
fn a_trailing_comment_in_dot_env_is_not_part_of_the_value() {
    let scratch = Scratch::new();
    std::fs::write(
        scratch.path().join(".env"),
        "LLM__PRIMARY_MODEL=builtin:echo   # offline, for a first run\nSERVER__PORT=7345 # local\n",
    )
    .expect("write .env");
    let (code, stdout, stderr) = run_in(scratch.path(), &["doctor"], &[]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("builtin:echo"), "{stdout}");
    assert!(stdout.contains("7345"), "{stdout}");
    assert!(!stdout.contains("# offline"), "{stdout}");
}

#[test]
fn doctor_passes_on_the_defaults() {
    let (code, stdout, stderr) = run(&["doctor"], &[]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("settings in effect"), "{stdout}");
    assert!(stdout.contains("builtin:echo"), "{stdout}");
    assert!(stdout.contains("in memory"), "{stdout}");
}

#[test]
fn doctor_masks_secrets_and_fails_on_an_unreachable_provider() {
    let secret = "sk-test-0123456789abcdefWXYZ";
    let (code, stdout, _) = run(
        &["doctor"],
        &[
            ("OPENAI_API_KEY", secret),
            // Port 1 on loopback: nothing listens, the connection is refused.
            ("OPENAI_BASE_URL", "http://127.0.0.1:1/v1"),
            (
                "DATABASE_URL",
                "postgres://postgres:hunter2@127.0.0.1:5432/postgres",
            ),
        ],
    );
    assert_eq!(code, 1, "{stdout}");
    assert!(!stdout.contains("0123456789abcdef"), "{stdout}");
    assert!(!stdout.contains("hunter2"), "{stdout}");
    assert!(stdout.contains("set (…WXYZ)"), "{stdout}");
    assert!(stdout.contains("FAIL openai"), "{stdout}");
    assert!(stdout.contains("unreachable"), "{stdout}");
}

#[test]
fn doctor_fails_on_a_default_model_without_its_key() {
    let (code, stdout, _) = run(&["doctor"], &[("LLM__PRIMARY_MODEL", "anthropic:claude")]);
    assert_eq!(code, 1, "{stdout}");
    assert!(stdout.contains("ANTHROPIC_API_KEY"), "{stdout}");
}

#[test]
fn doctor_reports_the_database_and_its_migrations() {
    // The shared test server's maintenance database: reachable; whether its
    // migrations are applied depends on nothing this test controls, so only
    // the reachability and the wording are checked.
    let (_, stdout, _) = run(
        &["doctor"],
        &[(
            "DATABASE_URL",
            "postgres://postgres@127.0.0.1:5432/postgres",
        )],
    );
    assert!(
        stdout.contains("reachable, migrations"),
        "no migration state: {stdout}"
    );
    let missing = "postgres://postgres@127.0.0.1:5432/ar_cli_no_such_database";
    let (code, stdout, _) = run(&["doctor"], &[("DATABASE_URL", missing)]);
    assert_eq!(code, 1, "{stdout}");
    assert!(stdout.contains("database_missing"), "{stdout}");
}

#[actix_web::test]
async fn chat_streams_turns_and_asks_for_each_host_actions_result() {
    use std::io::Write;

    let app = crate::helpers::spawn_app().await;
    let scratch = Scratch::new();
    let context = scratch.path().join("context.json");
    std::fs::write(&context, crate::helpers::tasks_context().to_string()).expect("context file");
    let url = app.address.clone();
    let context_arg = context.display().to_string();
    let dir = scratch.path().to_path_buf();
    let output = actix_web::rt::task::spawn_blocking(move || {
        let mut child = command(
            &dir,
            &[
                "chat",
                "--url",
                &url,
                "--session",
                "cli-chat",
                "--context",
                &context_arg,
            ],
            &[],
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start chat");
        let input = "think weighing it\nsay hello from the terminal\n\
                     call select_issue {\"number\": 42}\n{\"selected\": 42}\n\
                     call select_issue {\"number\": 7}\n! {\"reason\": \"no such issue\"}\n/quit\n";
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input.as_bytes())
            .expect("write stdin");
        child.wait_with_output().expect("chat ends")
    })
    .await
    .expect("chat thread");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}{stderr}");
    for expected in [
        "(thinking: weighing it)",
        "assistant> hello from the terminal",
        "host action select_issue({\"number\":42})",
        "Tool results: select_issue → {\"selected\":42}",
        "host action select_issue({\"number\":7})",
    ] {
        assert!(stdout.contains(expected), "missing {expected:?}:\n{stdout}");
    }
    // The server recorded the first result as a success, the second as a failure.
    let tree = app.tree("cli-chat").await;
    let outcomes: Vec<Value> = tree
        .as_array()
        .expect("messages")
        .iter()
        .flat_map(|message| message["segments"].as_array().cloned().unwrap_or_default())
        .filter(|segment| segment["kind"] == "tool_group")
        .flat_map(|segment| segment["tools"].as_array().cloned().unwrap_or_default())
        .map(|tool| tool["outcome"].clone())
        .collect();
    assert_eq!(outcomes, [json!("success"), json!("failed")], "{tree}");
}

/// Point 8: `doctor` fetches the provider's model list and fails a default
/// model it does not list, naming the closest; a listed one passes.
#[actix_web::test]
async fn point_8_doctor_fails_a_misspelt_model_missing_from_the_fetched_list() {
    let fake = crate::fake_provider::FakeProvider::start();
    let base_url = fake.base_url_openai();
    let doctor = |model: &'static str| {
        let base_url = base_url.clone();
        actix_web::rt::task::spawn_blocking(move || {
            run(
                &["doctor"],
                &[
                    ("LLM__PRIMARY_MODEL", model),
                    ("OPENAI_API_KEY", "sk-test"),
                    ("OPENAI_BASE_URL", &base_url),
                ],
            )
        })
    };
    let (code, stdout, _) = doctor("openai:fake-modle").await.expect("doctor");
    assert_eq!(code, 1, "{stdout}");
    assert!(stdout.contains("FAIL openai"), "{stdout}");
    assert!(stdout.contains("\"fake-modle\""), "{stdout}");
    assert!(stdout.contains("closest: \"fake-model\""), "{stdout}");
    let (code, stdout, _) = doctor("openai:fake-model").await.expect("doctor");
    assert_eq!(code, 0, "{stdout}");
    assert!(stdout.contains("lists fake-model"), "{stdout}");
}
