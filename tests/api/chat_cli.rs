//! `assistant-runtime chat` as a user drives it: under a pseudo-terminal
//! (`script` allocates one) across an idle pause longer than the server's
//! keep-alive, with a token, with an answer that is not JSON, a multi-line
//! message, a context without `version`, and a URL without scheme.

use std::io::{Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::helpers::{spawn_app, spawn_app_with, tasks_context, TestApp};

const BINARY: &str = env!("CARGO_BIN_EXE_assistant-runtime");
/// How long one answer may take to show before the test gives up.
const ANSWER_DEADLINE: Duration = Duration::from_secs(30);
/// Longer than the server's keep-alive (5 s): the connection the first
/// message used is closed by the time the second is sent.
const IDLE_PAUSE: Duration = Duration::from_secs(7);

/// A running `chat`: its input, and everything it printed so far.
struct Chat {
    child: Child,
    stdin: ChildStdin,
    output: Arc<Mutex<String>>,
}

impl Chat {
    /// `chat ARGS` with `env`, under a pseudo-terminal when `terminal`.
    fn start(args: &[&str], env: &[(&str, &str)], terminal: bool) -> Chat {
        let mut command = if terminal {
            // `script` runs the command on a new pseudo-terminal and relays
            // our pipe to it, as a terminal emulator would relay keys.
            let line = std::iter::once(BINARY)
                .chain(std::iter::once("chat"))
                .chain(args.iter().copied())
                .map(shell_quote)
                .collect::<Vec<_>>()
                .join(" ");
            let mut command = Command::new("script");
            command.args(["-q", "-f", "-e", "-c", &line, "/dev/null"]);
            command
        } else {
            let mut command = Command::new(BINARY);
            command.arg("chat").args(args);
            command
        };
        command
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("TERM", "dumb");
        for (key, value) in env {
            command.env(key, value);
        }
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start chat");
        let stdin = child.stdin.take().expect("stdin");
        let output = Arc::new(Mutex::new(String::new()));
        for mut stream in [
            Box::new(child.stdout.take().expect("stdout")) as Box<dyn Read + Send>,
            Box::new(child.stderr.take().expect("stderr")),
        ] {
            let output = Arc::clone(&output);
            std::thread::spawn(move || {
                let mut buffer = [0u8; 4096];
                while let Ok(n) = stream.read(&mut buffer) {
                    if n == 0 {
                        break;
                    }
                    let text = String::from_utf8_lossy(&buffer[..n]);
                    output.lock().expect("output").push_str(&text);
                }
            });
        }
        Chat {
            child,
            stdin,
            output,
        }
    }

    fn type_line(&mut self, line: &str) {
        self.stdin
            .write_all(format!("{line}\n").as_bytes())
            .expect("type a line");
        self.stdin.flush().expect("flush");
    }

    fn text(&self) -> String {
        self.output.lock().expect("output").clone()
    }

    /// Waits until the output shows `expected` `times` times.
    async fn wait_for(&self, expected: &str, times: usize) {
        let deadline = Instant::now() + ANSWER_DEADLINE;
        while self.text().matches(expected).count() < times {
            assert!(
                Instant::now() < deadline,
                "no {expected:?} (x{times}) in:\n{}",
                self.text()
            );
            actix_web::rt::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Ends with `/quit` and returns the exit code and the whole output.
    async fn quit(mut self) -> (i32, String) {
        self.type_line("/quit");
        self.wait_exit().await
    }

    async fn wait_exit(mut self) -> (i32, String) {
        let deadline = Instant::now() + ANSWER_DEADLINE;
        loop {
            if let Some(status) = self.child.try_wait().expect("chat status") {
                // Let the reader threads take the last bytes.
                actix_web::rt::time::sleep(Duration::from_millis(100)).await;
                return (status.code().unwrap_or(-1), self.text());
            }
            assert!(
                Instant::now() < deadline,
                "chat did not end:\n{}",
                self.text()
            );
            actix_web::rt::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Chat {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn shell_quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', "'\\''"))
}

/// The session's tool records, in order.
async fn tool_records(app: &TestApp, session_id: &str) -> Vec<Value> {
    let tree = app.tree(session_id).await;
    tree.as_array()
        .expect("messages")
        .iter()
        .flat_map(|message| message["segments"].as_array().cloned().unwrap_or_default())
        .filter(|segment| segment["kind"] == "tool_group")
        .flat_map(|segment| segment["tools"].as_array().cloned().unwrap_or_default())
        .collect()
}

fn context_file(context: &Value) -> tempfile_path::Path {
    tempfile_path::Path::write(&context.to_string())
}

/// A file in the temporary folder, removed when dropped.
mod tempfile_path {
    use std::sync::atomic::{AtomicU64, Ordering};

    pub struct Path(pub std::path::PathBuf);

    impl Path {
        pub fn write(text: &str) -> Path {
            static NEXT: AtomicU64 = AtomicU64::new(0);
            let path = std::env::temp_dir().join(format!(
                "ar_chat_{}_{}.json",
                std::process::id(),
                NEXT.fetch_add(1, Ordering::Relaxed)
            ));
            std::fs::write(&path, text).expect("write a file");
            Path(path)
        }

        pub fn arg(&self) -> String {
            self.0.display().to_string()
        }
    }

    impl Drop for Path {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
}

#[actix_web::test]
async fn chat_under_a_terminal_answers_after_seven_idle_seconds() {
    let app = spawn_app().await;
    let mut chat = Chat::start(&["--url", &app.address], &[], true);
    chat.wait_for("you> ", 1).await;
    chat.type_line("say one");
    chat.wait_for("assistant> one", 1).await;
    // The pause the issue asks for: past the server's 5 s keep-alive.
    actix_web::rt::time::sleep(IDLE_PAUSE).await;
    chat.type_line("say three");
    chat.wait_for("assistant> three", 1).await;
    let (code, output) = chat.quit().await;
    assert_eq!(code, 0, "{output}");
    assert!(!output.contains("cannot reach"), "{output}");
}

#[actix_web::test]
async fn chat_takes_the_token_from_its_flag_or_the_environment() {
    let app = spawn_app_with(&[("ACCESS__LOCAL_TOKEN", "s3cret-token")]).await;
    // Without it: said at start, naming both ways to give it.
    let (code, output) = Chat::start(&["--url", &app.address], &[], false)
        .wait_exit()
        .await;
    assert_eq!(code, 1, "{output}");
    assert!(output.contains("--token"), "{output}");
    assert!(output.contains("ACCESS__LOCAL_TOKEN"), "{output}");
    // A wrong one is refused as such.
    let (code, output) = Chat::start(&["--url", &app.address, "--token", "nope"], &[], false)
        .wait_exit()
        .await;
    assert_eq!(code, 1, "{output}");
    assert!(output.contains("the token was refused"), "{output}");
    for (args, env) in [
        (vec!["--token", "s3cret-token"], vec![]),
        (vec![], vec![("ACCESS__LOCAL_TOKEN", "s3cret-token")]),
    ] {
        let mut all = vec!["--url", app.address.as_str()];
        all.extend(args);
        let mut chat = Chat::start(&all, &env, false);
        chat.type_line("say with a token");
        chat.wait_for("assistant> with a token", 1).await;
        let (code, output) = chat.quit().await;
        assert_eq!(code, 0, "{output}");
    }
}

#[actix_web::test]
async fn chat_asks_again_for_an_answer_that_is_not_json_and_sends_failures_once_encoded() {
    let app = spawn_app().await;
    let context = context_file(&tasks_context());
    let mut chat = Chat::start(
        &[
            "--url",
            &app.address,
            "--session",
            "cli-json",
            "--context",
            &context.arg(),
        ],
        &[],
        false,
    );
    chat.type_line("call select_issue {\"number\": 42}");
    chat.wait_for("result JSON", 1).await;
    chat.type_line("{selected: 42}");
    chat.wait_for("not valid JSON", 1).await;
    chat.wait_for("result JSON", 2).await;
    chat.type_line("{\"selected\": 42}");
    chat.wait_for("you> ", 2).await;
    chat.type_line("call select_issue {\"number\": 7}");
    chat.wait_for("result JSON", 3).await;
    chat.type_line("! {\"reason\": \"no such issue\"}");
    chat.wait_for("you> ", 3).await;
    let (code, output) = chat.quit().await;
    assert_eq!(code, 0, "{output}");
    let records = tool_records(&app, "cli-json").await;
    assert_eq!(records.len(), 2, "one record per call: {records:?}");
    assert_eq!(records[0]["outcome"], "success");
    assert_eq!(records[0]["output"], json!({"selected": 42}));
    assert_eq!(records[1]["outcome"], "failed");
    // The failure's JSON is JSON, not a string holding JSON text.
    assert_eq!(
        records[1]["output"]["reason"], "no such issue",
        "{records:?}"
    );
}

#[actix_web::test]
async fn chat_sends_a_multi_line_message_as_one() {
    let app = spawn_app().await;
    let mut chat = Chat::start(
        &["--url", &app.address, "--session", "cli-lines"],
        &[],
        false,
    );
    chat.type_line("first line\\");
    chat.type_line("second line");
    chat.wait_for("you> ", 2).await;
    chat.type_line("\"\"\"");
    chat.type_line("pasted");
    chat.type_line("block");
    chat.type_line("\"\"\"");
    chat.wait_for("you> ", 3).await;
    let (code, output) = chat.quit().await;
    assert_eq!(code, 0, "{output}");
    let tree = app.tree("cli-lines").await;
    let contents: Vec<&str> = tree
        .as_array()
        .expect("messages")
        .iter()
        .filter(|message| message["role"] == "user")
        .filter_map(|message| message["content"].as_str())
        .collect();
    assert_eq!(
        contents,
        ["first line\nsecond line", "pasted\nblock"],
        "{tree}"
    );
}

/// Point 4: a context without `version` keeps its actions in `chat` (and
/// on AG-UI), as `POST /api/chat` accepts it; a context the server would
/// refuse is refused at start, naming the field.
#[actix_web::test]
async fn point_4_a_context_without_version_keeps_its_actions_in_chat() {
    let app = spawn_app().await;
    let mut context = tasks_context();
    context.as_object_mut().expect("object").remove("version");
    let file = context_file(&context);
    let mut chat = Chat::start(
        &["--url", &app.address, "--context", &file.arg()],
        &[],
        false,
    );
    chat.type_line("call select_issue {\"number\": 42}");
    chat.wait_for("host action select_issue", 1).await;
    chat.type_line("{}");
    chat.wait_for("you> ", 2).await;
    let (code, output) = chat.quit().await;
    assert_eq!(code, 0, "{output}");
    assert!(!output.contains("unknown tool"), "{output}");

    let bad = context_file(&json!({"version": 2, "view": {"name": "tasks"}}));
    let (code, output) = Chat::start(
        &["--url", &app.address, "--context", &bad.arg()],
        &[],
        false,
    )
    .wait_exit()
    .await;
    assert_eq!(code, 1, "{output}");
    assert!(output.contains("host_context.version"), "{output}");
}

#[actix_web::test]
async fn chat_adds_the_scheme_and_names_a_wrong_address_at_start() {
    let app = spawn_app().await;
    let bare = app.address.trim_start_matches("http://").to_string();
    let mut chat = Chat::start(&["--url", &bare], &[], false);
    chat.type_line("say no scheme");
    chat.wait_for("assistant> no scheme", 1).await;
    let (code, output) = chat.quit().await;
    assert_eq!(code, 0, "{output}");
    // Port 1 on loopback: nothing listens; said before any message is typed.
    let (code, output) = Chat::start(&["--url", "127.0.0.1:1"], &[], false)
        .wait_exit()
        .await;
    assert_eq!(code, 1, "{output}");
    assert!(
        output.contains("cannot reach http://127.0.0.1:1"),
        "{output}"
    );
    assert!(output.contains("refused"), "{output}");
}
