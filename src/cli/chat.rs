//! `assistant-runtime chat`: a terminal conversation with a running server.
//! It speaks HTTP to `POST /api/agui`, whose Server-Sent Events stream the
//! turn (text, thinking, tool calls) as it happens; when the turn hands over a
//! host action, it shows the call and asks for the result (JSON; a line
//! starting with `!` reports a failure). `--context FILE` sends a
//! `host_context` (with its `actions`) on every run.

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::path::PathBuf;

use clap::Args;
use futures_util::StreamExt;
use serde_json::{json, Value};

use crate::observability::RequestId;

#[derive(Clone, Debug, Args)]
pub struct ChatArgs {
    /// The server to talk to.
    #[arg(long, value_name = "URL", default_value = "http://127.0.0.1:7100")]
    pub url: String,
    /// The session to continue or start [default: a new one]
    #[arg(long, value_name = "SESSION")]
    pub session: Option<String>,
    /// A host_context JSON file sent with every message (its actions become host actions).
    #[arg(long, value_name = "FILE")]
    pub context: Option<PathBuf>,
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

/// Runs the conversation until end of input or `/quit`; the exit status.
pub async fn run(args: ChatArgs) -> Result<(), String> {
    let context = match &args.context {
        None => json!({}),
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|error| format!("--context {}: {error}", path.display()))?;
            serde_json::from_str(&text)
                .map_err(|error| format!("--context {}: invalid JSON: {error}", path.display()))?
        }
    };
    let session = args
        .session
        .clone()
        .unwrap_or_else(|| format!("cli-{}", &RequestId::generate().as_str()[..12]));
    let url = format!("{}/api/agui", args.url.trim_end_matches('/'));
    let client = reqwest::Client::new();
    println!(
        "session {session} on {} (end with /quit or Ctrl-D)",
        args.url
    );
    let stdin = std::io::stdin();
    let mut lines = stdin.lock().lines();
    loop {
        let Some(line) = prompt(&mut lines, "you> ") else {
            return Ok(());
        };
        if line.trim() == "/quit" {
            return Ok(());
        }
        if line.trim().is_empty() {
            continue;
        }
        let message = json!({"id": new_id("u"), "role": "user", "content": line});
        let mut end = send_run(&client, &url, &session, &context, message).await?;
        // Answer host actions one at a time until the turn no longer waits.
        while let Some(call_id) = end.pending.first().cloned() {
            let call = end.calls.get(&call_id).cloned().unwrap_or_default();
            println!(
                "\nhost action {}({}) [{call_id}]",
                call.name, call.arguments
            );
            let Some(answer) = prompt(
                &mut lines,
                "result JSON (empty: {\"ok\": true}; '!' first: failed)> ",
            ) else {
                return Ok(());
            };
            let message = tool_message(&call_id, &answer);
            end = send_run(&client, &url, &session, &context, message).await?;
        }
    }
}

fn prompt(lines: &mut impl Iterator<Item = std::io::Result<String>>, text: &str) -> Option<String> {
    print!("{text}");
    let _ = std::io::stdout().flush();
    lines.next().and_then(Result::ok)
}

fn new_id(prefix: &str) -> String {
    format!("{prefix}-{}", &RequestId::generate().as_str()[..16])
}

/// The AG-UI tool message answering `call_id`: `!text` is a failure.
fn tool_message(call_id: &str, answer: &str) -> Value {
    let answer = answer.trim();
    let (failed, text) = match answer.strip_prefix('!') {
        Some(rest) => (true, rest.trim()),
        None => (false, answer),
    };
    let content = if text.is_empty() {
        if failed {
            "\"failed\"".to_string()
        } else {
            "{\"ok\": true}".to_string()
        }
    } else {
        text.to_string()
    };
    let mut message =
        json!({"id": new_id("t"), "role": "tool", "toolCallId": call_id, "content": content});
    if failed {
        message["error"] = json!(content);
    }
    message
}

/// Sends one run and prints its stream as it comes.
async fn send_run(
    client: &reqwest::Client,
    url: &str,
    session: &str,
    context: &Value,
    message: Value,
) -> Result<RunEnd, String> {
    let body = json!({
        "threadId": session, "runId": new_id("run"), "messages": [message],
        "tools": [], "context": [], "state": context, "forwardedProps": {},
    });
    let response = client
        .post(url)
        .json(&body)
        .send()
        .await
        .map_err(|error| format!("cannot reach {url}: {error}"))?;
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
        let ok = tool_message("c1", "");
        assert_eq!(ok["content"], "{\"ok\": true}");
        assert!(ok.get("error").is_none());
        let failed = tool_message("c1", "! {\"reason\": \"gone\"}");
        assert_eq!(failed["content"], "{\"reason\": \"gone\"}");
        assert_eq!(failed["error"], "{\"reason\": \"gone\"}");
    }
}
