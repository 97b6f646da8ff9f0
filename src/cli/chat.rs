//! `assistant-runtime chat`: a terminal conversation with a running server.
//! It speaks HTTP to `POST /api/agui`, whose Server-Sent Events stream the
//! turn (text, thinking, tool calls) as it happens; when the turn hands over a
//! host action, it shows the call and asks for the result (JSON, asked again
//! until it parses; a line starting with `!` reports a failure).
//! `--context FILE` sends a `host_context` (with its `actions`) on every run,
//! checked at start by the same validator the server runs.
//!
//! Input is read on its own thread (`terminal`), never on the runtime's: a
//! blocked runtime could not see the server close an idle connection, and
//! the next request went out on the dead one.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use actors::contract::HostContext;
use clap::Args;
use futures_util::StreamExt;
use serde_json::{json, Value};

use crate::cli::terminal::Terminal;
use crate::observability::RequestId;

/// Connections idle longer than this are not reused: the server closes
/// its idle keep-alive connections after 5 s, and a request sent on one it
/// is closing fails. (A failed send is retried once as well.)
const POOL_IDLE: Duration = Duration::from_secs(3);

/// The environment variable `--token` defaults to: the server's own setting.
const TOKEN_VARIABLE: &str = "ACCESS__LOCAL_TOKEN";

#[derive(Clone, Debug, Args)]
pub struct ChatArgs {
    /// The server to talk to (`http://` is assumed when no scheme is given).
    #[arg(long, value_name = "URL", default_value = "http://127.0.0.1:7100")]
    pub url: String,
    /// The session to continue or start [default: a new one]
    #[arg(long, value_name = "SESSION")]
    pub session: Option<String>,
    /// A host_context JSON file sent with every message (its actions become host actions).
    #[arg(long, value_name = "FILE")]
    pub context: Option<PathBuf>,
    /// The server's ACCESS__LOCAL_TOKEN, sent as `Authorization: Bearer`
    /// [default: the environment's ACCESS__LOCAL_TOKEN]
    #[arg(long, value_name = "TOKEN")]
    pub token: Option<String>,
}

/// A host action the turn handed over.
#[derive(Clone, Debug, Default)]
struct Call {
    name: String,
    arguments: String,
}

/// What one run ended with.
#[derive(Debug, Default)]
struct RunEnd {
    /// Call ids waiting for the host, the one to answer first at the front.
    pending: Vec<String>,
    calls: HashMap<String, Call>,
}

/// The server and how to reach it.
struct Server {
    client: reqwest::Client,
    base: String,
    token: Option<String>,
}

/// Runs the conversation until end of input or `/quit`; the exit status.
pub async fn run(args: ChatArgs) -> Result<(), String> {
    let context = match &args.context {
        None => json!({}),
        Some(path) => read_context(path)?,
    };
    let token = args
        .token
        .clone()
        .or_else(|| std::env::var(TOKEN_VARIABLE).ok())
        .filter(|token| !token.trim().is_empty());
    let server = Server {
        client: reqwest::Client::builder()
            .pool_idle_timeout(POOL_IDLE)
            .build()
            .map_err(|error| format!("cannot make an HTTP client: {error}"))?,
        base: base_url(&args.url)?,
        token,
    };
    let model = server.check().await?;
    let session = args
        .session
        .clone()
        .unwrap_or_else(|| format!("cli-{}", &RequestId::generate().as_str()[..12]));
    println!(
        "session {session} on {} ({model}); end with /quit or Ctrl-D, a line ending in \\ \
         continues, \"\"\" starts and ends a block",
        server.base
    );
    let mut terminal = Terminal::spawn();
    loop {
        let Some(line) = terminal.read_entry("you> ").await else {
            return Ok(());
        };
        if line.trim() == "/quit" {
            return Ok(());
        }
        if line.trim().is_empty() {
            continue;
        }
        let message = json!({"id": new_id("u"), "role": "user", "content": line});
        let mut end = server.send_run(&session, &context, message).await?;
        // Answer host actions one at a time until the turn no longer waits.
        while let Some(call_id) = end.pending.first().cloned() {
            let call = end.calls.get(&call_id).cloned().unwrap_or_default();
            println!(
                "\nhost action {}({}) [{call_id}]",
                call.name, call.arguments
            );
            let Some(message) = ask_result(&mut terminal, &call_id).await else {
                return Ok(());
            };
            end = server.send_run(&session, &context, message).await?;
        }
    }
}

/// `--url` with `http://` added when it has no scheme, checked to be a URL.
fn base_url(url: &str) -> Result<String, String> {
    let url = url.trim();
    let full = if url.contains("://") {
        url.to_string()
    } else {
        format!("http://{url}")
    };
    match reqwest::Url::parse(&full) {
        Ok(parsed) if matches!(parsed.scheme(), "http" | "https") && parsed.host().is_some() => {
            Ok(full.trim_end_matches('/').to_string())
        }
        Ok(_) => Err(format!(
            "--url {url:?}: expected http://HOST:PORT or https://HOST:PORT"
        )),
        Err(error) => Err(format!("--url {url:?}: not a URL ({error})")),
    }
}

/// The `--context` file, checked as the server checks a `host_context`
/// (a missing `version` reads as 1 there too), sent as the AG-UI `state`.
fn read_context(path: &Path) -> Result<Value, String> {
    let shown = path.display();
    let text =
        std::fs::read_to_string(path).map_err(|error| format!("--context {shown}: {error}"))?;
    let mut value: Value = serde_json::from_str(&text)
        .map_err(|error| format!("--context {shown}: invalid JSON: {error}"))?;
    HostContext::parse(&value, "host_context")
        .map_err(|error| format!("--context {shown}: {error}"))?;
    if let Value::Object(fields) = &mut value {
        fields.entry("version").or_insert(json!(1));
    }
    Ok(value)
}

/// Asks for a host action's result until it is JSON (or empty, or a `!`
/// failure); `None` at end of input.
async fn ask_result(terminal: &mut Terminal, call_id: &str) -> Option<Value> {
    loop {
        let answer = terminal
            .read_entry("result JSON (empty: {\"ok\": true}; '!' first: failed)> ")
            .await?;
        match tool_message(call_id, &answer) {
            Ok(message) => return Some(message),
            Err(why) => println!("  not sent: {why}; type the result again"),
        }
    }
}

fn new_id(prefix: &str) -> String {
    format!("{prefix}-{}", &RequestId::generate().as_str()[..16])
}

/// The AG-UI tool message answering `call_id`, or why the answer is not
/// one. `!text` is a failure whose `error` is the text (the server reads it
/// as JSON when it is JSON); otherwise the answer must be JSON.
fn tool_message(call_id: &str, answer: &str) -> Result<Value, String> {
    let answer = answer.trim();
    let id = new_id("t");
    if let Some(failure) = answer.strip_prefix('!') {
        let failure = match failure.trim() {
            "" => "failed",
            text => text,
        };
        return Ok(
            json!({"id": id, "role": "tool", "toolCallId": call_id, "content": "", "error": failure}),
        );
    }
    let content = if answer.is_empty() {
        "{\"ok\": true}".to_string()
    } else {
        serde_json::from_str::<Value>(answer)
            .map_err(|error| format!("not valid JSON ({error}); quote text as \"text\""))?;
        answer.to_string()
    };
    Ok(json!({"id": id, "role": "tool", "toolCallId": call_id, "content": content}))
}

impl Server {
    fn post(&self, path: &str) -> reqwest::RequestBuilder {
        self.authorized(self.client.post(format!("{}{path}", self.base)))
    }

    fn authorized(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    }

    /// Asks the server for its default model: a wrong address or token is
    /// said at start, not at the first message.
    async fn check(&self) -> Result<String, String> {
        let url = format!("{}/api/models", self.base);
        let response = self
            .authorized(self.client.get(&url))
            .send()
            .await
            .map_err(|error| {
                format!(
                    "cannot reach {}: {} (is the server running there? see --url)",
                    self.base,
                    error_chain(&error)
                )
            })?;
        match response.status().as_u16() {
            200 => {}
            401 => {
                let how = if self.token.is_some() {
                    "the token was refused"
                } else {
                    "the server needs a token"
                };
                return Err(format!(
                    "{}: {how}; pass --token or set {TOKEN_VARIABLE}",
                    self.base
                ));
            }
            status => {
                return Err(format!(
                    "{url} answered {status}: is this an assistant-runtime server?"
                ))
            }
        }
        let models: Value = response.json().await.map_err(|_| {
            format!("{url} did not answer JSON: is this an assistant-runtime server?")
        })?;
        Ok(models["default_model"]
            .as_str()
            .unwrap_or("model unknown")
            .to_string())
    }

    /// Sends one run and prints its stream as it comes. A send that failed
    /// before any answer (a connection the server had closed) is sent once
    /// more.
    async fn send_run(
        &self,
        session: &str,
        context: &Value,
        message: Value,
    ) -> Result<RunEnd, String> {
        let body = json!({
            "threadId": session, "runId": new_id("run"), "messages": [message],
            "tools": [], "context": [], "state": context, "forwardedProps": {},
        });
        let response = match self.post("/api/agui").json(&body).send().await {
            Ok(response) => response,
            Err(_) => self
                .post("/api/agui")
                .json(&body)
                .send()
                .await
                .map_err(|error| format!("cannot reach {}: {}", self.base, error_chain(&error)))?,
        };
        if !response.status().is_success() {
            let status = response.status();
            let text = response.text().await.unwrap_or_default();
            println!("server: {status}: {text}");
            return Ok(RunEnd::default());
        }
        let mut end = RunEnd::default();
        let mut buffer = String::new();
        let mut stream = response.bytes_stream();
        print!("assistant> ");
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|error| format!("the stream broke: {error}"))?;
            buffer.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(at) = buffer.find("\n\n") {
                let frame: String = buffer.drain(..at + 2).collect();
                for data in frame.lines().filter_map(|line| line.strip_prefix("data: ")) {
                    if let Ok(event) = serde_json::from_str::<Value>(data) {
                        show(&event, &mut end);
                    }
                }
            }
            let _ = std::io::stdout().flush();
        }
        println!();
        Ok(end)
    }
}

/// An HTTP error with its causes: reqwest's own text ("error sending
/// request") says nothing of why.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// Prints one AG-UI event and remembers what the run ends with.
fn show(event: &Value, end: &mut RunEnd) {
    let text = |key: &str| event[key].as_str().unwrap_or_default().to_string();
    match event["type"].as_str().unwrap_or_default() {
        "TEXT_MESSAGE_CONTENT" => print!("{}", text("delta")),
        "REASONING_MESSAGE_START" => print!("(thinking: "),
        "REASONING_MESSAGE_CONTENT" => print!("{}", text("delta")),
        "REASONING_MESSAGE_END" => print!(") "),
        "TOOL_CALL_START" => {
            end.calls.insert(
                text("toolCallId"),
                Call {
                    name: text("toolCallName"),
                    arguments: String::new(),
                },
            );
        }
        "TOOL_CALL_ARGS" => {
            if let Some(call) = end.calls.get_mut(&text("toolCallId")) {
                call.arguments.push_str(&text("delta"));
            }
        }
        "TOOL_CALL_END" => {
            if let Some(call) = end.calls.get(&text("toolCallId")) {
                print!("\n  [tool {}({})]", call.name, call.arguments);
            }
        }
        "TOOL_CALL_RESULT" => print!("\n  [result {}]\n", text("content")),
        "RUN_ERROR" => print!("\n  [error {}: {}]", text("code"), text("message")),
        "RUN_FINISHED" => {
            end.pending = event["outcome"]["pendingToolCallIds"]
                .as_array()
                .map(|ids| {
                    ids.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default();
            if event["outcome"]["type"] == "cancelled" {
                print!("\n  [cancelled]");
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_json_or_failures() {
        let ok = tool_message("c1", "").unwrap();
        assert_eq!(ok["content"], "{\"ok\": true}");
        assert!(ok.get("error").is_none());
        let failed = tool_message("c1", "! {\"reason\": \"gone\"}").unwrap();
        assert_eq!(failed["content"], "");
        assert_eq!(failed["error"], "{\"reason\": \"gone\"}");
        assert_eq!(tool_message("c1", "!").unwrap()["error"], "failed");
    }

    #[test]
    fn an_answer_that_is_not_json_is_refused_with_the_reason() {
        let why = tool_message("c1", "{selected: 42}").unwrap_err();
        assert!(why.contains("not valid JSON"), "{why}");
        assert_eq!(
            tool_message("c1", "\"text\"").unwrap()["content"],
            "\"text\""
        );
    }

    #[test]
    fn a_url_without_scheme_is_http() {
        assert_eq!(base_url("127.0.0.1:7177").unwrap(), "http://127.0.0.1:7177");
        assert_eq!(
            base_url("https://example.test/").unwrap(),
            "https://example.test"
        );
        assert!(base_url("ftp://example.test")
            .unwrap_err()
            .contains("--url"));
        assert!(base_url("http://").unwrap_err().contains("--url"));
    }
}
