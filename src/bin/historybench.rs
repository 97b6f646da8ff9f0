//! Request-size benchmark for long conversations (docs/history.md).
//!
//! `historybench [--turns 500] [--chars 1000] [--budget 100000] [--no-compaction]`
//! runs one session of that many turns through the session actors in this
//! process, on `builtin:echo` (which echoes each message, so every exchange
//! adds about twice `--chars` bytes), and records each model request as the
//! OpenAI wire body it would be. It prints the body size every 50 turns, the
//! largest, and the summarizer calls made. With compaction the size stays
//! under the budget whatever the length; without it, it grows with every turn.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use actors::contract::ChatRequest;
use actors::events::EventSink;
use actors::history::{HistoryConfig, SUMMARIZER_INSTRUCTIONS};
use actors::model::catalog::ModelCatalog;
use actors::model::echo::EchoModel;
use actors::model::openai::OpenAiModel;
use actors::model::{ModelClient, ModelId, ModelRequest, ModelStream, SharedModelClient};
use actors::prompt::profile::Profile;
use actors::prompt::system::system_prompt;
use actors::session::{Caller, Runtime, SessionConfig, SessionDeps};
use actors::store::memory::MemoryStore;
use actors::tools::ToolRegistry;
use serde_json::json;

struct Options {
    turns: usize,
    chars: usize,
    budget: u64,
    compaction: bool,
}

fn parse_options() -> Result<Options, String> {
    let mut options = Options {
        turns: 500,
        chars: 1_000,
        budget: 100_000,
        compaction: true,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--turns" => options.turns = value()?.parse().map_err(|_| "--turns: a number")?,
            "--chars" => options.chars = value()?.parse().map_err(|_| "--chars: a number")?,
            "--budget" => options.budget = value()?.parse().map_err(|_| "--budget: a number")?,
            "--no-compaction" => options.compaction = false,
            other => return Err(format!("unknown option {other}")),
        }
    }
    Ok(options)
}

/// Sizes of the turn requests (OpenAI wire bytes) and the summarizer calls seen.
#[derive(Default)]
struct Recorded {
    turn_request_bytes: Vec<usize>,
    summaries: usize,
}

/// `builtin:echo` that records each request it is sent.
struct RecordingEcho {
    wire: OpenAiModel,
    recorded: Arc<Mutex<Recorded>>,
}

impl ModelClient for RecordingEcho {
    fn stream(&self, request: ModelRequest) -> ModelStream {
        if let Ok(mut recorded) = self.recorded.lock() {
            if *request.system == *SUMMARIZER_INSTRUCTIONS {
                recorded.summaries += 1;
            } else {
                let body = self.wire.request_body(&request).to_string();
                recorded.turn_request_bytes.push(body.len());
            }
        }
        EchoModel.stream(request)
    }
}

struct Catalog(SharedModelClient);

impl ModelCatalog for Catalog {
    fn client_for(&self, _id: &ModelId) -> Result<SharedModelClient, String> {
        Ok(self.0.clone())
    }
}

fn main() {
    let options = match parse_options() {
        Ok(options) => options,
        Err(problem) => {
            eprintln!("historybench: {problem}");
            std::process::exit(2);
        }
    };
    actix::System::new().block_on(run(options));
}

async fn run(options: Options) {
    let recorded = Arc::new(Mutex::new(Recorded::default()));
    let echo = RecordingEcho {
        wire: OpenAiModel::new(actors::model::build_http_client(), None, None, "echo"),
        recorded: recorded.clone(),
    };
    let store: actors::store::SharedStore = Arc::new(MemoryStore::new());
    let runtime = Runtime::new(SessionDeps {
        inbox: Arc::new(actors::store::Inbox::new(
            store.clone(),
            actors::store::InboxBounds::default(),
        )),
        store,
        models: Arc::new(Catalog(Arc::new(echo))),
        tools: ToolRegistry {
            host_tools: Vec::new(),
            page_scopes: HashMap::new(),
            invalidations: HashMap::new(),
            custom_tools: Vec::new(),
            mcp_servers: Vec::new(),
            deps_factory: None,
        },
        invalidations: Arc::new(HashMap::new()),
        config: SessionConfig {
            default_model: ModelId::new("builtin", "echo"),
            system_prompt: system_prompt(None).into(),
            profile: Profile::builtin(),
            max_turns: 10,
            thinking_budget: None,
            budget: Default::default(),
            idle_timeout: std::time::Duration::from_secs(600),
            request_models: Vec::new(),
            attachment_budget: actors::budget::AttachmentBudget::new(64 << 20, 1 << 30),
            traces: Default::default(),
            history: HistoryConfig {
                compaction_enabled: options.compaction,
                token_budget: options.budget,
                ..HistoryConfig::default()
            },
        },
    });
    let filler = "lorem ipsum ".repeat(options.chars / 12 + 1);
    println!("turn  request_bytes");
    for turn in 1..=options.turns {
        let content = format!("message {turn}: {}", &filler[..options.chars]);
        let body = json!({"id": format!("m{turn}"), "session_id": "bench", "content": content});
        let request = match ChatRequest::parse(&body) {
            Ok(request) => request,
            Err(problem) => panic!("a valid body: {problem:?}"),
        };
        let (sink, mut events) = EventSink::new(false);
        if let Err(problem) = runtime
            .send_message(&Caller::operator(), request, sink)
            .await
        {
            panic!("turn {turn}: {problem:?}");
        }
        while let Some(event) = events.recv().await {
            if event.is_completed_status() {
                break;
            }
        }
        if turn == 1 || turn % 50 == 0 {
            let bytes = recorded
                .lock()
                .map(|recorded| recorded.turn_request_bytes.last().copied().unwrap_or(0))
                .unwrap_or(0);
            println!("{turn:>4}  {bytes:>13}");
        }
    }
    let (largest, summaries) = match recorded.lock() {
        Ok(recorded) => (
            recorded
                .turn_request_bytes
                .iter()
                .max()
                .copied()
                .unwrap_or(0),
            recorded.summaries,
        ),
        Err(_) => (0, 0),
    };
    println!(
        "turns {}, compaction {}, budget {} tokens: largest request {largest} bytes, {summaries} summarizer calls",
        options.turns,
        if options.compaction { "on" } else { "off" },
        options.budget,
    );
}
