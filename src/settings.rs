//! Settings: `config/default.env`, then `.env`, then the process environment,
//! later sources winning; keys nested with `__` (`SERVER__PORT`). Env files are
//! read by dotenvy (quotes, `export`, trailing ` # comments`). Parsing is a
//! pure function of the merged map, and a bad value stops startup with an
//! error naming the setting.

pub mod declare;
pub mod near_miss;

pub use crate::settings_error::SettingsError;

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::num::NonZeroUsize;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use actors::history::{HistoryConfig, WorkingMemoryConfig};
use actors::model::providers::{ProviderConfig, ProviderKind, ProviderSettings};
use actors::model::retry::RetryPolicy;
use actors::model::ModelId;
use actors::prompt::profile::Profile;
use actors::tools::HostToolConfig;
use actors::turn::Budget;
use secrecy::SecretString;

use crate::mcp::McpServerConfig;
use serde_json::Value;

use crate::access_settings::AccessSettings;
use crate::deployment::DeploymentSettings;

use declare::{declare_settings, Setting};

/// Prefixes the runtime owns: an unknown key under one of them is a typo.
const OWNED_PREFIXES: [&str; 12] = [
    "SERVER__",
    "TRACES__",
    "HEARTBEAT__",
    "HISTORY__",
    "LLM__",
    "TOOLS__",
    "ASSISTANT__",
    "DATABASE__",
    "ACCESS__",
    "SOCKETIO__",
    "MCP__",
    "METRICS__",
];

/// The README's settings table ends with these: read before `Settings`.
pub const ALSO_DOCUMENTED: &[Setting] = &[Setting {
    key: "RUST_LOG",
    default: "`info`",
    doc: "log filter",
}];

/// Every setting's name, for the unknown-key and near-miss checks.
fn every_key() -> Vec<&'static str> {
    SETTINGS
        .iter()
        .filter(|setting| setting.is_name())
        .map(|setting| setting.key)
        .collect()
}

declare_settings! {
    #[derive(Clone, Debug)]
    pub struct Settings reads (values, get) {
        pub host: String {
            "SERVER__HOST" = "`127.0.0.1`": "listen address";
        } = get("SERVER__HOST").unwrap_or("127.0.0.1").to_string();
        pub port: u16 {
            "SERVER__PORT" = "7100": "listen port, 1..65535 (0: any free port)";
        } = port(get("SERVER__PORT"))?;
        /// HTTP worker threads; `None` means one per core.
        pub workers: Option<NonZeroUsize> {
            "SERVER__WORKERS" = "cores": "HTTP worker threads, at least 1";
        } = optional(get("SERVER__WORKERS"), "SERVER__WORKERS")?
            .map(|workers: usize| {
                NonZeroUsize::new(workers).ok_or_else(|| {
                    bad("SERVER__WORKERS", "must be at least 1 (unset: one per core)")
                })
            })
            .transpose()?;
        pub max_body_bytes: usize {
            "SERVER__MAX_BODY_BYTES" = "64 MiB": "largest request body (attachments may be 12,000,000 characters)";
        } = number(get("SERVER__MAX_BODY_BYTES"), "SERVER__MAX_BODY_BYTES", 64 * 1024 * 1024)?;
        /// How long a client may take to send a request's head (slowloris).
        pub header_timeout: Duration {
            "SERVER__HEADER_TIMEOUT_SECONDS" = "5": "time to send a request's head";
        } = Duration::from_secs(positive(
            get("SERVER__HEADER_TIMEOUT_SECONDS"),
            "SERVER__HEADER_TIMEOUT_SECONDS",
            5,
        )?);
        /// How long a client may take to send a request's whole body.
        pub body_timeout: Duration {
            "SERVER__BODY_TIMEOUT_SECONDS" = "30": "time to send a request's whole body (then 408)";
        } = Duration::from_secs(positive(
            get("SERVER__BODY_TIMEOUT_SECONDS"),
            "SERVER__BODY_TIMEOUT_SECONDS",
            30,
        )?);
        /// `openai`, `anthropic` and the `LLM__PROVIDERS__<NAME>__*` ones.
        pub providers: Vec<ProviderConfig> {
            "OPENAI_API_KEY" = "": "OpenAI or any compatible server (vLLM, llama.cpp, Ollama)";
            "OPENAI_BASE_URL" = "": "the OpenAI-compatible server's API root; `http(s)://host...`";
            "ANTHROPIC_API_KEY" = "": "Anthropic";
            "ANTHROPIC_BASE_URL" = "": "Anthropic's API root; `http(s)://host...`";
            "LLM__PROVIDERS__<NAME>__*" = "": "named providers: `KIND`, `BASE_URL`, `API_KEY`, `HEADERS`, `CA_FILE` (see Named providers)";
        } = crate::provider_settings::read(values)?;
        /// A default model whose provider has no key, or a near-miss
        /// variable name, stops startup instead of a warning.
        pub require_usable: bool {
            "LLM__REQUIRE_USABLE" = "false": "a default model whose provider has no key, or a near-miss variable name, stops startup (otherwise a warning, and `/health` 503 for the model)";
        } = boolean(get("LLM__REQUIRE_USABLE"), "LLM__REQUIRE_USABLE")?;
        /// Variables that look like a misspelt or borrowed setting name
        /// (`SERVER_PORT`, `OPENAI_API_BASE`): warned about at startup, a
        /// startup error with `LLM__REQUIRE_USABLE=true`.
        pub near_misses: Vec<near_miss::NearMiss> {} = {
            let near_misses = near_miss::near_misses(values, &every_key());
            if let (true, Some(near_miss)) = (require_usable, near_misses.first()) {
                return Err(bad(
                    &near_miss.key,
                    format!("{} (LLM__REQUIRE_USABLE is true)", near_miss.sentence()),
                ));
            }
            near_misses
        };
        pub primary_model: ModelId {
            "LLM__PRIMARY_MODEL" = "see below": "default model, `provider:name`";
        } = {
            let model = match get("LLM__PRIMARY_MODEL") {
                Some(text) => primary_model(text, "LLM__PRIMARY_MODEL", &providers)?,
                None => default_model(&providers).0,
            };
            if let (true, Some(problem)) = (require_usable, unusable_model(&model, &providers)) {
                return Err(bad(
                    "LLM__PRIMARY_MODEL",
                    format!("{problem} (LLM__REQUIRE_USABLE is true)"),
                ));
            }
            model
        };
        /// Whether the primary model was chosen because no provider key was set.
        pub model_fallback: bool {} =
            get("LLM__PRIMARY_MODEL").is_none() && default_model(&providers).1;
        pub request_timeout: Duration {
            "LLM__REQUEST_TIMEOUT_SECONDS" = "120": "longest silence from a provider";
        } = Duration::from_secs(number(
            get("LLM__REQUEST_TIMEOUT_SECONDS"),
            "LLM__REQUEST_TIMEOUT_SECONDS",
            120,
        )?);
        pub retry: RetryPolicy {
            "LLM__RETRY_BACKOFF_MS" = "500": "ceiling of the first jittered backoff before a retry (doubles per retry; see Retries)";
            "LLM__RETRY_MAX_WAIT_SECONDS" = "30": "longest wait for a provider's `retry-after` (or a backoff); a longer one fails the turn at once";
        } = retry_policy(&get)?;
        /// The largest SSE event a provider may send.
        pub max_event_bytes: usize {
            "LLM__MAX_EVENT_BYTES" = "8 MiB": "largest SSE event or line a provider may send; more fails the turn as `provider_error`";
        } = positive(
            get("LLM__MAX_EVENT_BYTES"),
            "LLM__MAX_EVENT_BYTES",
            actors::model::DEFAULT_MAX_EVENT_BYTES,
        )?;
        /// Models a request's `config.default_model` may name besides the
        /// configured default.
        pub request_models: Vec<ModelId> {
            "ASSISTANT__REQUEST_MODELS" = "none": "models a request's `config.default_model` may name besides the default";
        } = request_models(get("ASSISTANT__REQUEST_MODELS"), &providers)?;
        pub host_tools: Vec<HostToolConfig> {
            "TOOLS__HOST_TOOLS" = "": "`{\"name\": {\"description\", \"parameters\"}}`: host tools every turn";
            "TOOLS__HOST_TOOLS_PATH" = "": "a JSON file of the same shape";
        } = host_tools(get("TOOLS__HOST_TOOLS"), get("TOOLS__HOST_TOOLS_PATH"))?;
        pub page_scopes: HashMap<String, Vec<String>> {
            "TOOLS__PAGE_SCOPES" = "": "`{\"view name\": [\"backend tool\", ...]}`; unlisted views get every backend tool";
        } = json_setting(get("TOOLS__PAGE_SCOPES"), "TOOLS__PAGE_SCOPES")?;
        pub invalidations: HashMap<String, Vec<String>> {
            "TOOLS__INVALIDATIONS" = "": "`{\"tool\": [\"what it invalidates\"]}`, echoed in `tool_result.invalidates`";
        } = json_setting(get("TOOLS__INVALIDATIONS"), "TOOLS__INVALIDATIONS")?;
        pub max_turns: u32 {
            "ASSISTANT__MAX_TURNS" = "10": "model requests per turn (a request may lower it)";
        } = positive(get("ASSISTANT__MAX_TURNS"), "ASSISTANT__MAX_TURNS", 10)?;
        pub thinking_budget: Option<u32> {
            "ASSISTANT__THINKING_BUDGET" = "none": "ceiling on thinking tokens";
        } = optional(get("ASSISTANT__THINKING_BUDGET"), "ASSISTANT__THINKING_BUDGET")?;
        pub system_prompt: Option<String> {
            "ASSISTANT__SYSTEM_PROMPT" = "built in": "replaces the system prompt (not with `ASSISTANT__PROFILE`)";
        } = get("ASSISTANT__SYSTEM_PROMPT").map(str::to_string);
        /// Read at startup; `None` is the builtin profile.
        pub profile: Option<Profile> {
            "ASSISTANT__PROFILE" = "builtin neutral profile": "a directory of markdown parts composed into the system prompt (see Profiles)";
        } = profile(get("ASSISTANT__PROFILE"), system_prompt.as_deref())?;
        pub budget: Budget {
            "ASSISTANT__BUDGET__TOOL_CALLS" = "none": "per-turn ceiling on tool calls";
            "ASSISTANT__BUDGET__INPUT_TOKENS" = "none": "per-turn ceiling on input tokens";
            "ASSISTANT__BUDGET__OUTPUT_TOKENS" = "none": "per-turn ceiling on output tokens";
            "ASSISTANT__BUDGET__TOTAL_TOKENS" = "none": "per-turn ceiling on input and output tokens";
        } = Budget {
            tool_calls: optional(get("ASSISTANT__BUDGET__TOOL_CALLS"), "ASSISTANT__BUDGET__TOOL_CALLS")?,
            input_tokens: optional(get("ASSISTANT__BUDGET__INPUT_TOKENS"), "ASSISTANT__BUDGET__INPUT_TOKENS")?,
            output_tokens: optional(get("ASSISTANT__BUDGET__OUTPUT_TOKENS"), "ASSISTANT__BUDGET__OUTPUT_TOKENS")?,
            total_tokens: optional(get("ASSISTANT__BUDGET__TOTAL_TOKENS"), "ASSISTANT__BUDGET__TOTAL_TOKENS")?,
        };
        pub session_idle: Duration {
            "ASSISTANT__SESSION_IDLE_SECONDS" = "0 in memory, 300 with a database": "an idle session actor stops and reloads from the store on its next message (0: a session of one exchange right after its turn, or 100 ms after it while fewer than 256 such sessions are in memory; one waiting for a host result or past its first exchange 500 ms after its last request, so the conversation's next request finds it in memory; one of more than 16 messages 5 seconds, since its reload decodes every message; a session waiting for a host result with a screenshot keeps its actor 5 minutes, since screenshots are never stored)";
        } = Duration::from_secs(number(
            get("ASSISTANT__SESSION_IDLE_SECONDS"),
            "ASSISTANT__SESSION_IDLE_SECONDS",
            default_idle_seconds(get("DATABASE_URL").or_else(|| get("DATABASE__URL"))),
        )?);
        pub session_ttl_hours: Option<u64> {
            "ASSISTANT__SESSION_TTL_HOURS" = "none": "delete sessions not updated for this long";
        } = optional(get("ASSISTANT__SESSION_TTL_HOURS"), "ASSISTANT__SESSION_TTL_HOURS")?;
        /// Compaction and working memory.
        pub history: HistoryConfig {
            "HISTORY__COMPACTION_ENABLED" = "true": "fold old exchanges into a summary when the path exceeds the budget";
            "HISTORY__TOKEN_BUDGET" = "100000": "tokens the replayed path may reach (5,000..500,000; provider-reported count, estimate as a floor: docs/history.md)";
            "HISTORY__RETAIN_RECENT" = "5": "exchanges always replayed verbatim (1..50)";
            "HISTORY__PROTECT_RECENT_TOOL_RESULTS" = "3": "the exchanges holding this many newest tool results stay verbatim too";
            "HISTORY__MESSAGE_TRUNCATION_LIMIT" = "1000": "characters of each message the summarizer reads";
            "LLM__SUMMARIZATION_MODEL" = "the turn's model": "model that writes summaries";
            "ASSISTANT__ENABLE_WORKING_MEMORY" = "false": "extract durable facts after each turn; **off by default because it doubles the model calls** (one extra call per completed turn)";
            "LLM__WORKING_MEMORY_MODEL" = "the turn's model": "model that updates working memory";
            "HISTORY__MAX_MEMORY_ENTRIES" = "15": "working-memory entries kept (the newest)";
        } = history(&get, &providers)?;
        /// Attachment bytes in flight at once, per session and per process.
        pub attachment_budget: actors::budget::AttachmentBudget {
            "ASSISTANT__ATTACHMENT_BUDGET__SESSION_BYTES" = "64 MiB": "attachment bytes of one session's running turns (then 413)";
            "ASSISTANT__ATTACHMENT_BUDGET__PROCESS_BYTES" = "1 GiB": "attachment bytes of all running turns (then 413)";
        } = actors::budget::AttachmentBudget::new(
            positive(
                get("ASSISTANT__ATTACHMENT_BUDGET__SESSION_BYTES"),
                "ASSISTANT__ATTACHMENT_BUDGET__SESSION_BYTES",
                64 * 1024 * 1024,
            )?,
            positive(
                get("ASSISTANT__ATTACHMENT_BUDGET__PROCESS_BYTES"),
                "ASSISTANT__ATTACHMENT_BUDGET__PROCESS_BYTES",
                1024 * 1024 * 1024,
            )?,
        );
        /// `TRACES__ENABLED`: store each turn's trace with its session.
        pub traces_enabled: bool {
            "TRACES__ENABLED" = "false": "store each turn's trace with its session (`GET /api/sessions/{id}/traces`); off by default: a trace per turn costs memory per session and a database write per turn";
        } = boolean(get("TRACES__ENABLED"), "TRACES__ENABLED")?;
        /// `TRACES__MAX_PER_SESSION`, `TRACES__MAX_BYTES_PER_SESSION`.
        pub trace_bounds: actors::store::TraceBounds {
            "TRACES__MAX_PER_SESSION" = "50": "traces kept per session; past it the oldest go first";
            "TRACES__MAX_BYTES_PER_SESSION" = "524288": "bytes of a session's traces (events and user messages); past it the oldest go first";
        } = actors::store::TraceBounds {
            max_traces: positive(get("TRACES__MAX_PER_SESSION"), "TRACES__MAX_PER_SESSION", 50)?,
            max_bytes: positive(
                get("TRACES__MAX_BYTES_PER_SESSION"),
                "TRACES__MAX_BYTES_PER_SESSION",
                512 * 1024,
            )?,
        };
        /// `HEARTBEAT__*`: a check-in message injected every interval.
        pub heartbeat: HeartbeatSettings {
            "HEARTBEAT__ENABLED" = "false": "inject a check-in message into the most recently active session every interval (each one runs a turn: a model call); never queued when there is no session";
            "HEARTBEAT__INTERVAL_SECONDS" = "300": "seconds between check-ins (and before the first); at least 30";
            "HEARTBEAT__MESSAGE" = "`[via:heartbeat]`": "the check-in message, delivered as `[via:heartbeat from:<from>] <message>`";
            "HEARTBEAT__FROM" = "`heartbeat`": "the sender in the check-in's envelope";
        } = heartbeat_settings(&get)?;
        /// `OTEL_EXPORTER_OTLP_ENDPOINT`: export turn spans over OTLP/HTTP to
        /// `<endpoint>/v1/traces`; unset, nothing is exported.
        pub otlp_endpoint: Option<String> {
            "OTEL_EXPORTER_OTLP_ENDPOINT" = "none": "export turn spans over OTLP/HTTP protobuf to `<endpoint>/v1/traces` (see Observability)";
        } = otlp_endpoint(get("OTEL_EXPORTER_OTLP_ENDPOINT"))?;
        /// `OTEL_SERVICE_NAME`, the exported `service.name`.
        pub otel_service_name: String {
            "OTEL_SERVICE_NAME" = "`assistant-runtime`": "the exported `service.name`";
        } = get("OTEL_SERVICE_NAME").unwrap_or("assistant-runtime").to_string();
        /// A secret: it may hold the database password.
        pub database_url: Option<SecretString> {
            "DATABASE_URL" = "": "PostgreSQL; unset means in memory";
            "DATABASE__URL" = "": "the same, when `DATABASE_URL` is unset";
        } = get("DATABASE_URL")
            .or_else(|| get("DATABASE__URL"))
            .map(SecretString::from);
        pub database_required: bool {
            "DATABASE__REQUIRED" = "false": "fail startup when PostgreSQL is unreachable";
        } = boolean(get("DATABASE__REQUIRED"), "DATABASE__REQUIRED")?;
        pub database_pool_size: usize {
            "DATABASE__POOL_SIZE" = "16": "connections";
        } = positive(get("DATABASE__POOL_SIZE"), "DATABASE__POOL_SIZE", 16)?;
        /// Proxies, the metrics token and the database schema (`deployment`).
        pub deployment: DeploymentSettings {
            "DATABASE__SCHEMA" = "`assistant_runtime`": "the schema of the runtime's tables (lower-case letters, digits, `_`); created by the migrations. A database of the layout before it (tables in `public`) is moved into it on the first start";
            "SERVER__TRUSTED_PROXIES" = "none": "CIDRs (comma-separated) of proxies whose `X-Forwarded-For` (else `Forwarded`) is believed: the rightmost hop that is not a trusted proxy is the client, for the per-IP cap and the access log. From any other peer the headers change nothing";
            "METRICS__TOKEN" = "none": "a bearer token that may read `/metrics` besides an admin";
            "METRICS__STORED_SESSIONS_INTERVAL_SECONDS" = "30": "how often `assistant_stored_sessions` is recounted (never per scrape)";
        } = DeploymentSettings::from_map(values)?;
        /// `ACCESS__*`: identity mode and CORS.
        pub access: AccessSettings {
            "ACCESS__MODE" = "`trusted_local` (`host` for an embedding host with an `authenticate` hook)": "who the caller is: `trusted_local` (the local operator, an admin), `header` (set by an authenticating proxy), `jwt` (verified here), `host` (a Rust host's `authenticate` hook, embedding API); see [docs/access.md](docs/access.md)";
            "ACCESS__LOCAL_TOKEN" = "none": "`trusted_local`: required as `Authorization: Bearer` / socket `auth.token`";
            "ACCESS__PRINCIPAL_HEADER" = "`X-Assistant-Principal`": "`header` mode: the principal";
            "ACCESS__ROLES_HEADER" = "`X-Assistant-Roles`": "`header` mode: the principal's comma-separated roles (`admin` administers)";
            "ACCESS__JWT_SECRET" = "": "`jwt` mode: an HS256 secret (or `ACCESS__JWT_PUBLIC_KEYS_PATH`)";
            "ACCESS__JWT_PUBLIC_KEYS_PATH" = "": "`jwt` mode: a JWKS file (RS256, ES256, EdDSA)";
            "ACCESS__JWT_ISSUER" = "none": "`jwt` mode: the `iss` a token must carry (as a string)";
            "ACCESS__JWT_AUDIENCE" = "none": "`jwt` mode: the `aud` a token must carry (as a string)";
            "ACCESS__JWT_ROLES_CLAIM" = "`roles`": "`jwt` mode: the claim holding roles";
            "ACCESS__CORS_ORIGINS" = "none": "exact browser origins (`scheme://host[:port]`), comma-separated; `*`: any origin, without credentials. For HTTP, AG-UI and Socket.IO";
            "ACCESS__CORS_ORIGIN_REGEX" = "localhost, 127.0.0.1, [::1], any port": "origins matching it are allowed too; empty: none";
        } = AccessSettings::from_map(values)?;
        /// Turns one principal may start per minute; 0: no cap.
        pub turns_per_minute: u32 {
            "ASSISTANT__TURNS_PER_MINUTE" = "60": "per principal (admins exempt); over it: 429 + `Retry-After`; 0: no cap";
        } = number(get("ASSISTANT__TURNS_PER_MINUTE"), "ASSISTANT__TURNS_PER_MINUTE", 60)?;
        /// Sessions one principal may have running a turn at once; 0: no cap.
        pub live_sessions_per_principal: u32 {
            "ASSISTANT__LIVE_SESSIONS_PER_PRINCIPAL" = "8": "sessions with a request in flight, per principal (admins exempt); 0: no cap";
        } = number(
            get("ASSISTANT__LIVE_SESSIONS_PER_PRINCIPAL"),
            "ASSISTANT__LIVE_SESSIONS_PER_PRINCIPAL",
            8,
        )?;
        /// Sessions the in-memory store holds at most; 0: no bound.
        pub max_memory_sessions: usize {
            "ASSISTANT__MAX_MEMORY_SESSIONS" = "100000": "in-memory store bound; the least recently written idle session is evicted; 0: none";
        } = number(
            get("ASSISTANT__MAX_MEMORY_SESSIONS"),
            "ASSISTANT__MAX_MEMORY_SESSIONS",
            100_000,
        )?;
        pub ping_interval: Duration {
            "SOCKETIO__PING_INTERVAL_MS" = "25000": "Engine.IO handshake `pingInterval`";
        } = Duration::from_millis(positive(
            get("SOCKETIO__PING_INTERVAL_MS"),
            "SOCKETIO__PING_INTERVAL_MS",
            25_000,
        )?);
        pub ping_timeout: Duration {
            "SOCKETIO__PING_TIMEOUT_MS" = "20000": "Engine.IO handshake `pingTimeout`";
        } = Duration::from_millis(positive(
            get("SOCKETIO__PING_TIMEOUT_MS"),
            "SOCKETIO__PING_TIMEOUT_MS",
            20_000,
        )?);
        pub max_payload: usize {
            "SOCKETIO__MAX_PAYLOAD" = "1000000": "Engine.IO handshake `maxPayload`";
        } = positive(get("SOCKETIO__MAX_PAYLOAD"), "SOCKETIO__MAX_PAYLOAD", 1_000_000)?;
        /// Engine.IO sessions one peer address may hold at once; 0: no cap.
        pub max_sessions_per_ip: usize {
            "SOCKETIO__MAX_SESSIONS_PER_IP" = "1000": "Engine.IO sessions one client address may hold (then 429); 0: no cap. Behind a proxy, set `SERVER__TRUSTED_PROXIES`, or all clients share its address";
        } = number(
            get("SOCKETIO__MAX_SESSIONS_PER_IP"),
            "SOCKETIO__MAX_SESSIONS_PER_IP",
            1_000,
        )?;
        /// MCP servers from `MCP_CONFIG_PATH` (default `mcp_servers.json`).
        pub mcp_servers: Vec<McpServerConfig> {
            "MCP_CONFIG_PATH" = "`mcp_servers.json` (may be missing)": "MCP servers, see MCP tools; a path set explicitly must exist";
        } = mcp_servers(get("MCP_CONFIG_PATH"))?;
        /// The longest an MCP call (or connect) may take.
        pub mcp_call_timeout: Duration {
            "MCP__CALL_TIMEOUT_SECONDS" = "30": "longest an MCP call (or connect) may take";
        } = Duration::from_secs(positive(
            get("MCP__CALL_TIMEOUT_SECONDS"),
            "MCP__CALL_TIMEOUT_SECONDS",
            30,
        )?);
    }
}

/// `HEARTBEAT__*`: a check-in message injected every interval (off by default).
#[derive(Clone, Debug, PartialEq)]
pub struct HeartbeatSettings {
    pub enabled: bool,
    pub interval: Duration,
    pub message: String,
    pub from: String,
}

/// The shortest interval the settings accept: every beat runs a turn.
pub const MIN_HEARTBEAT_SECONDS: u64 = 30;

/// `HEARTBEAT__*`, the interval at least `MIN_HEARTBEAT_SECONDS`.
fn heartbeat_settings<'a>(
    get: &impl Fn(&str) -> Option<&'a str>,
) -> Result<HeartbeatSettings, SettingsError> {
    let seconds: u64 = number(
        get("HEARTBEAT__INTERVAL_SECONDS"),
        "HEARTBEAT__INTERVAL_SECONDS",
        300,
    )?;
    if seconds < MIN_HEARTBEAT_SECONDS {
        return Err(bad(
            "HEARTBEAT__INTERVAL_SECONDS",
            format!("at least {MIN_HEARTBEAT_SECONDS} (each check-in runs a turn), got {seconds}"),
        ));
    }
    let text = |key: &str, default: &str| -> Result<String, SettingsError> {
        match get(key) {
            None => Ok(default.to_string()),
            Some(text) if text.chars().count() > 1024 => Err(bad(key, "too long")),
            Some(text) => Ok(text.to_string()),
        }
    };
    Ok(HeartbeatSettings {
        enabled: boolean(get("HEARTBEAT__ENABLED"), "HEARTBEAT__ENABLED")?,
        interval: Duration::from_secs(seconds),
        message: text("HEARTBEAT__MESSAGE", "[via:heartbeat]")?,
        from: text("HEARTBEAT__FROM", "heartbeat")?,
    })
}

fn bad(key: &str, message: impl Into<String>) -> SettingsError {
    SettingsError {
        key: key.to_string(),
        message: message.into(),
    }
}

/// Reads an env file with dotenvy: `#` comment lines and trailing comments,
/// quotes, `export`, `${VAR}` substitution. A line it cannot read is an error
/// (the caller names the file), never a silently wrong value.
pub fn parse_env_file(text: &str) -> Result<BTreeMap<String, String>, String> {
    let mut values = BTreeMap::new();
    for item in dotenvy::from_read_iter(text.as_bytes()) {
        let (key, value) = item.map_err(|error| error.to_string())?;
        values.insert(key, value);
    }
    Ok(values)
}

impl Settings {
    /// Merges `config/default.env`, `.env` and the environment, then parses.
    pub fn load(config_dir: &Path) -> Result<Settings, SettingsError> {
        let mut merged = BTreeMap::new();
        for file in [
            config_dir.join("default.env"),
            Path::new(".env").to_path_buf(),
        ] {
            if let Ok(text) = std::fs::read_to_string(&file) {
                let values = parse_env_file(&text).map_err(|error| SettingsError {
                    key: file.display().to_string(),
                    message: error,
                })?;
                merged.extend(values);
            }
        }
        merged.extend(std::env::vars());
        Settings::from_map(&merged)
    }

    pub fn from_map(values: &BTreeMap<String, String>) -> Result<Settings, SettingsError> {
        let every_key = every_key();
        for key in values.keys() {
            let owned = OWNED_PREFIXES.iter().any(|prefix| key.starts_with(prefix));
            let known =
                every_key.contains(&key.as_str()) || crate::provider_settings::is_provider_key(key);
            if owned && !known {
                let hint = match near_miss::meant(key, &every_key) {
                    Some(meant) => format!("did you mean {meant}? "),
                    None => "check the spelling; ".to_string(),
                };
                return Err(bad(
                    key,
                    format!("unknown setting ({hint}see README, Configuration)"),
                ));
            }
        }
        let get = |key: &str| {
            debug_assert!(
                every_key.contains(&key),
                "{key} is read but not declared in Settings"
            );
            values
                .get(key)
                .map(|value| value.trim())
                .filter(|value| !value.is_empty())
        };
        Settings::read(values, &get)
    }
}

/// `TOOLS__HOST_TOOLS`, then those of `TOOLS__HOST_TOOLS_PATH`.
fn host_tools(
    inline: Option<&str>,
    path: Option<&str>,
) -> Result<Vec<HostToolConfig>, SettingsError> {
    let mut host_tools = match inline {
        Some(text) => parse_host_tools("TOOLS__HOST_TOOLS", text)?,
        None => Vec::new(),
    };
    if let Some(path) = path {
        let text = std::fs::read_to_string(path).map_err(|error| {
            bad(
                "TOOLS__HOST_TOOLS_PATH",
                format!("cannot read {path}: {error}"),
            )
        })?;
        host_tools.extend(parse_host_tools("TOOLS__HOST_TOOLS_PATH", &text)?);
    }
    Ok(host_tools)
}

/// `HISTORY__*`, `LLM__SUMMARIZATION_MODEL`, `ASSISTANT__ENABLE_WORKING_MEMORY`
/// and `LLM__WORKING_MEMORY_MODEL`, with the Python original's defaults and ranges.
fn history<'a>(
    get: &impl Fn(&str) -> Option<&'a str>,
    providers: &[ProviderConfig],
) -> Result<HistoryConfig, SettingsError> {
    let defaults = HistoryConfig::default();
    let model = |key: &str| -> Result<Option<ModelId>, SettingsError> {
        get(key)
            // Same rules as the primary model, named by this key.
            .map(|text| primary_model(text, key, providers))
            .transpose()
    };
    let working_memory = if boolean(
        get("ASSISTANT__ENABLE_WORKING_MEMORY"),
        "ASSISTANT__ENABLE_WORKING_MEMORY",
    )? {
        Some(WorkingMemoryConfig {
            model: model("LLM__WORKING_MEMORY_MODEL")?,
            max_entries: positive(
                get("HISTORY__MAX_MEMORY_ENTRIES"),
                "HISTORY__MAX_MEMORY_ENTRIES",
                15,
            )?,
        })
    } else {
        model("LLM__WORKING_MEMORY_MODEL")?;
        positive::<usize>(
            get("HISTORY__MAX_MEMORY_ENTRIES"),
            "HISTORY__MAX_MEMORY_ENTRIES",
            15,
        )?;
        None
    };
    Ok(HistoryConfig {
        compaction_enabled: match get("HISTORY__COMPACTION_ENABLED") {
            None => defaults.compaction_enabled,
            value => boolean(value, "HISTORY__COMPACTION_ENABLED")?,
        },
        token_budget: in_range(
            get("HISTORY__TOKEN_BUDGET"),
            "HISTORY__TOKEN_BUDGET",
            defaults.token_budget,
            5_000..=500_000,
        )?,
        retain_recent: in_range(
            get("HISTORY__RETAIN_RECENT"),
            "HISTORY__RETAIN_RECENT",
            defaults.retain_recent,
            1..=50,
        )?,
        protect_recent_tool_results: number(
            get("HISTORY__PROTECT_RECENT_TOOL_RESULTS"),
            "HISTORY__PROTECT_RECENT_TOOL_RESULTS",
            defaults.protect_recent_tool_results,
        )?,
        message_truncation_limit: positive(
            get("HISTORY__MESSAGE_TRUNCATION_LIMIT"),
            "HISTORY__MESSAGE_TRUNCATION_LIMIT",
            defaults.message_truncation_limit,
        )?,
        summarization_model: model("LLM__SUMMARIZATION_MODEL")?,
        working_memory,
    })
}

fn in_range<T: std::str::FromStr + PartialOrd + fmt::Display>(
    value: Option<&str>,
    key: &str,
    default: T,
    range: std::ops::RangeInclusive<T>,
) -> Result<T, SettingsError> {
    let parsed = number(value, key, default)?;
    if !range.contains(&parsed) {
        return Err(bad(
            key,
            format!(
                "must be between {} and {}, got {parsed}",
                range.start(),
                range.end()
            ),
        ));
    }
    Ok(parsed)
}

impl Settings {
    /// What the model providers are built from.
    pub fn provider_settings(&self) -> ProviderSettings {
        ProviderSettings {
            providers: self.providers.clone(),
            request_timeout: self.request_timeout,
            retry: self.retry,
            max_event_bytes: self.max_event_bytes,
        }
    }

    /// Why the default model cannot answer a turn (its provider has no key),
    /// or `None` when it can. A startup warning, or an error with
    /// `LLM__REQUIRE_USABLE=true`.
    pub fn model_problem(&self) -> Option<String> {
        unusable_model(&self.primary_model, &self.providers)
    }
}

/// The providers' `has_credentials` rule: an Anthropic-compatible provider
/// needs a key; an OpenAI-compatible one a key or a base URL (local
/// compatible servers need no key).
fn unusable_model(model: &ModelId, providers: &[ProviderConfig]) -> Option<String> {
    let provider = providers
        .iter()
        .find(|provider| provider.name == model.provider())?;
    if provider.has_credentials() {
        return None;
    }
    let missing = match (provider.name.as_str(), provider.kind) {
        ("openai", _) => "OPENAI_API_KEY (or OPENAI_BASE_URL for a compatible server)".to_string(),
        ("anthropic", _) => "ANTHROPIC_API_KEY".to_string(),
        (name, ProviderKind::OpenAi) => {
            let prefix = format!(
                "{}{}__",
                crate::provider_settings::PREFIX,
                name.to_uppercase()
            );
            format!("{prefix}API_KEY (or {prefix}BASE_URL)")
        }
        (name, ProviderKind::Anthropic) => format!(
            "{}{}__API_KEY",
            crate::provider_settings::PREFIX,
            name.to_uppercase()
        ),
    };
    Some(format!(
        "the default model {model} needs {missing}, which is not set"
    ))
}

/// `LLM__RETRY_*` over the one default the library uses too.
fn retry_policy<'a>(get: &impl Fn(&str) -> Option<&'a str>) -> Result<RetryPolicy, SettingsError> {
    let defaults = RetryPolicy::default();
    Ok(RetryPolicy {
        base_backoff: Duration::from_millis(number(
            get("LLM__RETRY_BACKOFF_MS"),
            "LLM__RETRY_BACKOFF_MS",
            u64::try_from(defaults.base_backoff.as_millis()).unwrap_or(u64::MAX),
        )?),
        max_wait: Duration::from_secs(number(
            get("LLM__RETRY_MAX_WAIT_SECONDS"),
            "LLM__RETRY_MAX_WAIT_SECONDS",
            defaults.max_wait.as_secs(),
        )?),
        ..defaults
    })
}

/// `SERVER__PORT`: 1..65535, or 0 for a free port the system picks (tests).
fn port(value: Option<&str>) -> Result<u16, SettingsError> {
    let key = "SERVER__PORT";
    match value {
        None => Ok(7100),
        Some(text) => text.parse::<u16>().map_err(|_| {
            bad(
                key,
                format!("expected a port number from 1 to 65535 (0: any free port), got {text:?}"),
            )
        }),
    }
}

/// `ASSISTANT__REQUEST_MODELS`: comma-separated `provider:name` ids.
fn request_models(
    value: Option<&str>,
    providers: &[ProviderConfig],
) -> Result<Vec<ModelId>, SettingsError> {
    let key = "ASSISTANT__REQUEST_MODELS";
    value
        .unwrap_or("")
        .split(',')
        .map(str::trim)
        .filter(|id| !id.is_empty())
        .map(|id| {
            primary_model(id, key, providers)
                .map_err(|error| bad(key, format!("{id:?}: {}", error.message)))
        })
        .collect()
}

/// `MCP_CONFIG_PATH`, default `mcp_servers.json` in the working directory.
/// The default file may be missing (no servers); a path given explicitly must
/// exist, so a typo is not silently "no tools".
fn mcp_servers(path: Option<&str>) -> Result<Vec<McpServerConfig>, SettingsError> {
    let key = "MCP_CONFIG_PATH";
    let (path, explicit) = match path {
        Some(path) => (path, true),
        None => ("mcp_servers.json", false),
    };
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound && !explicit => {
            return Ok(Vec::new())
        }
        Err(error) => return Err(bad(key, format!("cannot read {path}: {error}"))),
    };
    crate::mcp::config::parse(&text).map_err(|message| bad(key, format!("{path}: {message}")))
}

/// `ASSISTANT__PROFILE`: a directory of markdown parts, read now so a bad
/// one stops startup. It and `ASSISTANT__SYSTEM_PROMPT` both say what the
/// whole system prompt is, so setting both is refused rather than one
/// silently winning.
fn profile(
    dir: Option<&str>,
    system_prompt: Option<&str>,
) -> Result<Option<Profile>, SettingsError> {
    let key = "ASSISTANT__PROFILE";
    let Some(dir) = dir else { return Ok(None) };
    if system_prompt.is_some() {
        return Err(bad(
            key,
            "set either ASSISTANT__PROFILE or ASSISTANT__SYSTEM_PROMPT, not both",
        ));
    }
    Profile::load(Path::new(dir))
        .map(Some)
        .map_err(|message| bad(key, message))
}

impl Settings {
    /// The profile the system prompt is composed from: `ASSISTANT__PROFILE`,
    /// else `ASSISTANT__SYSTEM_PROMPT` as a one-part profile, else the builtin one.
    pub fn effective_profile(&self) -> Profile {
        match (&self.profile, &self.system_prompt) {
            (Some(profile), _) => profile.clone(),
            (None, Some(text)) => Profile::from_text("ASSISTANT__SYSTEM_PROMPT", text),
            (None, None) => Profile::builtin(),
        }
    }
}

/// `LLM__PRIMARY_MODEL`: `provider:name` with a provider the runtime has.
/// Credentials are not checked here: a named model whose provider has no key
/// starts the runtime unhealthy (`/health` 503) rather than silently on echo.
/// A model id setting (`key`): `<provider>:<model>` with a provider that exists.
fn primary_model(
    text: &str,
    key: &str,
    providers: &[ProviderConfig],
) -> Result<ModelId, SettingsError> {
    let model = ModelId::parse(text)
        .ok_or_else(|| bad(key, "expected provider:name, e.g. openai:gpt-4o-mini"))?;
    let known = |name: &str| providers.iter().any(|provider| provider.name == name);
    match (model.provider(), model.name()) {
        ("builtin", "echo") => Ok(model),
        ("builtin", _) => Err(bad(key, "the builtin provider has only builtin:echo")),
        (provider, _) if known(provider) => Ok(model),
        (provider, _) => {
            let names: Vec<&str> = std::iter::once("builtin")
                .chain(providers.iter().map(|provider| provider.name.as_str()))
                .collect();
            Err(bad(
                key,
                format!(
                    "unknown provider {provider:?}; known: {} (add one with LLM__PROVIDERS__<NAME>__KIND)",
                    names.join(", ")
                ),
            ))
        }
    }
}

/// How long an idle session actor stays in memory by default. In memory, a
/// reload is a deserialisation of bytes the same process holds (microseconds),
/// so a session hibernates after its turn ends (a few sessions of one exchange
/// 100 ms later, `session::grace`; in a conversation, half a second later;
/// past 16 messages five seconds: `SHORT_WINDOW`, `HOT_WINDOW`)
/// and then costs only its compact stored form; with Postgres a reload is a
/// round trip, so actors stay five minutes.
fn default_idle_seconds(database_url: Option<&str>) -> u64 {
    match database_url {
        None => 0,
        Some(_) => 300,
    }
}

/// With no key at all the runtime starts on `builtin:echo` (and says so).
fn default_model(providers: &[ProviderConfig]) -> (ModelId, bool) {
    let has_key = |name: &str| {
        providers
            .iter()
            .any(|provider| provider.name == name && provider.api_key.is_some())
    };
    let chosen = if has_key("anthropic") {
        "anthropic:claude-sonnet-4-5"
    } else if has_key("openai") {
        "openai:gpt-4o-mini"
    } else {
        return (ModelId::new("builtin", "echo"), true);
    };
    (
        ModelId::parse(chosen).unwrap_or(ModelId::new("builtin", "echo")),
        false,
    )
}

fn number<T: std::str::FromStr>(
    value: Option<&str>,
    key: &str,
    default: T,
) -> Result<T, SettingsError> {
    match value {
        None => Ok(default),
        Some(text) => text.parse().map_err(|_| {
            bad(
                key,
                format!("expected a non-negative whole number, got {text:?}"),
            )
        }),
    }
}

fn positive<T: std::str::FromStr + PartialOrd + Default>(
    value: Option<&str>,
    key: &str,
    default: T,
) -> Result<T, SettingsError> {
    let parsed = number(value, key, default)?;
    if parsed <= T::default() {
        return Err(bad(key, "must be greater than zero"));
    }
    Ok(parsed)
}

fn optional<T: std::str::FromStr>(
    value: Option<&str>,
    key: &str,
) -> Result<Option<T>, SettingsError> {
    value
        .map(|text| {
            text.parse().map_err(|_| {
                bad(
                    key,
                    format!("expected a non-negative whole number, got {text:?}"),
                )
            })
        })
        .transpose()
}

/// `OTEL_EXPORTER_OTLP_ENDPOINT`: an `http` or `https` URL, kept without a trailing `/`.
fn otlp_endpoint(value: Option<&str>) -> Result<Option<String>, SettingsError> {
    let Some(text) = value else {
        return Ok(None);
    };
    let parsed = reqwest::Url::parse(text).map_err(|error| {
        bad(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            format!("not a URL ({error}): {text:?}"),
        )
    })?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(bad(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            format!("expected an http or https URL, got {text:?}"),
        ));
    }
    Ok(Some(text.trim_end_matches('/').to_string()))
}

fn boolean(value: Option<&str>, key: &str) -> Result<bool, SettingsError> {
    match value.map(str::to_ascii_lowercase).as_deref() {
        None => Ok(false),
        Some("1" | "true" | "yes" | "on") => Ok(true),
        Some("0" | "false" | "no" | "off") => Ok(false),
        Some(other) => Err(bad(key, format!("expected true or false, got {other:?}"))),
    }
}

fn json_setting(
    value: Option<&str>,
    key: &str,
) -> Result<HashMap<String, Vec<String>>, SettingsError> {
    match value {
        None => Ok(HashMap::new()),
        Some(text) => serde_json::from_str(text).map_err(|error| {
            bad(
                key,
                format!("expected a JSON object of string lists: {error}"),
            )
        }),
    }
}

/// `{"name": {"description", "parameters"}}`, each checked like a host action.
fn parse_host_tools(key: &str, text: &str) -> Result<Vec<HostToolConfig>, SettingsError> {
    let value: Value =
        serde_json::from_str(text).map_err(|error| bad(key, format!("invalid JSON: {error}")))?;
    let Value::Object(tools) = value else {
        return Err(bad(key, "expected a JSON object of tools by name"));
    };
    let mut parsed = Vec::with_capacity(tools.len());
    for (name, tool) in tools {
        if !actors::tool_name::is_valid(&name) {
            return Err(bad(
                key,
                format!("tool name {name:?} must match ^[A-Za-z0-9_-]{{1,64}}$"),
            ));
        }
        let description = tool
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let parameters = tool
            .get("parameters")
            .cloned()
            .unwrap_or_else(|| serde_json::json!({"type": "object", "properties": {}}));
        if parameters.get("type").and_then(Value::as_str) != Some("object") {
            return Err(bad(
                key,
                format!("tool {name:?}: parameters must be a JSON schema of type object"),
            ));
        }
        if let Err(problem) = actors::tools::check_schema(&parameters) {
            return Err(bad(
                key,
                format!("tool {name:?}: parameters are not a usable JSON schema: {problem}"),
            ));
        }
        parsed.push(HostToolConfig {
            name,
            description,
            parameters: Arc::new(parameters),
        });
    }
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(pairs: &[(&str, &str)]) -> Result<Settings, SettingsError> {
        Settings::from_map(
            &pairs
                .iter()
                .map(|(key, value)| (key.to_string(), value.to_string()))
                .collect(),
        )
    }

    /// README.md's settings table is the declaration's: between the
    /// marker comment and the first line after the table. With
    /// `UPDATE_README=1` the test writes it instead.
    #[test]
    fn the_readme_table_is_the_declaration() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md");
        let readme = std::fs::read_to_string(&path).expect("README.md");
        let marker = "<!-- The settings table is written from src/settings.rs";
        let start = readme
            .find(marker)
            .expect("the settings marker in README.md");
        let start = start + readme[start..].find('\n').expect("marker line") + 1;
        let length = readme[start..]
            .lines()
            .take_while(|line| line.starts_with('|'))
            .map(|line| line.len() + 1)
            .sum::<usize>();
        let all: Vec<Setting> = SETTINGS.iter().chain(ALSO_DOCUMENTED).copied().collect();
        let table = declare::readme_table(&all);
        if std::env::var_os("UPDATE_README").is_some() {
            let updated = format!("{}{table}{}", &readme[..start], &readme[start + length..]);
            std::fs::write(&path, updated).expect("write README.md");
            return;
        }
        assert_eq!(
            readme[start..start + length],
            table,
            "README.md's settings table differs from the declaration \
             (UPDATE_README=1 cargo test --lib the_readme_table_is_the_declaration rewrites it)"
        );
    }

    #[test]
    fn every_declared_name_is_known_and_its_blank_value_is_the_default() {
        let names = every_key();
        assert!(names.len() >= 70, "{names:?}");
        for name in &names {
            assert!(
                OWNED_PREFIXES.iter().any(|prefix| name.starts_with(prefix))
                    || !name.contains("__"),
                "{name}"
            );
            // A blank value reads as unset, so every setting parses.
            settings(&[(name, "")]).unwrap_or_else(|error| panic!("{name}: {error}"));
        }
        let mut unique = names.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), names.len(), "a setting is declared twice");
    }

    #[test]
    fn defaults_are_loopback_7100_on_echo() {
        let settings = settings(&[]).unwrap();
        assert_eq!((settings.host.as_str(), settings.port), ("127.0.0.1", 7100));
        assert_eq!(settings.primary_model.to_string(), "builtin:echo");
        assert!(settings.model_fallback);
    }

    #[test]
    fn sessions_hibernate_after_each_turn_in_memory_and_after_five_minutes_with_a_database() {
        assert_eq!(settings(&[]).unwrap().session_idle, Duration::ZERO);
        let with_database = settings(&[("DATABASE_URL", "postgres://127.0.0.1/x")]).unwrap();
        assert_eq!(with_database.session_idle, Duration::from_secs(300));
        let chosen = settings(&[("ASSISTANT__SESSION_IDLE_SECONDS", "30")]).unwrap();
        assert_eq!(chosen.session_idle, Duration::from_secs(30));
    }

    #[test]
    fn debug_never_prints_a_key_token_or_password() {
        let keys = [
            ("OPENAI_API_KEY", "sk-secret-openai-0123456789"),
            ("ANTHROPIC_API_KEY", "sk-ant-secret-0123456789"),
            ("ACCESS__LOCAL_TOKEN", "local-secret-token"),
            ("DATABASE_URL", "postgres://app:db-secret@127.0.0.1/app"),
        ];
        let jwt = settings(&[
            ("ACCESS__MODE", "jwt"),
            ("ACCESS__JWT_SECRET", "jwt-secret"),
        ])
        .unwrap();
        let settings = settings(&keys).unwrap();
        for printed in [
            format!("{settings:?}"),
            format!("{:?}", settings.providers),
            format!("{:?}", settings.provider_settings()),
            format!("{jwt:?}"),
        ] {
            assert!(!printed.contains("secret"), "{printed}");
            assert!(printed.contains("REDACTED"), "{printed}");
        }
    }

    #[test]
    fn a_bad_setting_is_named() {
        assert_eq!(
            settings(&[("SERVER__PORT", "seventy")]).unwrap_err().key,
            "SERVER__PORT"
        );
        assert_eq!(
            settings(&[("ASSISTANT__MAX_TURN", "3")]).unwrap_err().key,
            "ASSISTANT__MAX_TURN"
        );
        assert_eq!(
            settings(&[("TOOLS__HOST_TOOLS", "[1]")]).unwrap_err().key,
            "TOOLS__HOST_TOOLS"
        );
        for model in ["gpt-4o", "mistral:large", "builtin:parrot"] {
            assert_eq!(
                settings(&[("LLM__PRIMARY_MODEL", model)]).unwrap_err().key,
                "LLM__PRIMARY_MODEL",
                "{model}"
            );
        }
        assert_eq!(
            settings(&[("DATABASE__REQUIRED", "maybe")])
                .unwrap_err()
                .key,
            "DATABASE__REQUIRED"
        );
    }

    #[test]
    fn trace_settings_default_to_off_and_name_bad_values() {
        let defaults = settings(&[]).unwrap();
        assert!(!defaults.traces_enabled);
        assert_eq!(defaults.trace_bounds, actors::store::TraceBounds::default());
        assert_eq!(defaults.otlp_endpoint, None);
        let on = settings(&[
            ("TRACES__ENABLED", "true"),
            ("TRACES__MAX_PER_SESSION", "3"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/"),
        ])
        .unwrap();
        assert!(on.traces_enabled);
        assert_eq!(on.trace_bounds.max_traces, 3);
        assert_eq!(on.otlp_endpoint.as_deref(), Some("http://collector:4318"));
        for (key, value) in [
            ("TRACES__ENABLED", "sometimes"),
            ("TRACES__MAX_PER_SESSION", "0"),
            ("TRACES__MAX_BYTES_PER_SESSION", "-1"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "not a url"),
        ] {
            assert_eq!(settings(&[(key, value)]).unwrap_err().key, key, "{value}");
        }
    }

    #[test]
    fn heartbeat_settings_default_to_off_and_refuse_short_intervals() {
        let defaults = settings(&[]).unwrap().heartbeat;
        assert!(!defaults.enabled);
        assert_eq!(defaults.interval, Duration::from_secs(300));
        assert_eq!(
            (defaults.message.as_str(), defaults.from.as_str()),
            ("[via:heartbeat]", "heartbeat")
        );
        let on = settings(&[
            ("HEARTBEAT__ENABLED", "true"),
            ("HEARTBEAT__INTERVAL_SECONDS", "30"),
            ("HEARTBEAT__MESSAGE", "anything new?"),
            ("HEARTBEAT__FROM", "cron"),
        ])
        .unwrap()
        .heartbeat;
        assert!(on.enabled);
        assert_eq!(on.interval, Duration::from_secs(30));
        assert_eq!(
            (on.message.as_str(), on.from.as_str()),
            ("anything new?", "cron")
        );
        for (key, value) in [
            ("HEARTBEAT__ENABLED", "sometimes"),
            ("HEARTBEAT__INTERVAL_SECONDS", "29"),
            ("HEARTBEAT__INTERVAL_SECONDS", "soon"),
        ] {
            assert_eq!(settings(&[(key, value)]).unwrap_err().key, key, "{value}");
        }
    }

    #[test]
    fn history_settings_default_to_the_python_original_and_name_bad_values() {
        let history = settings(&[]).unwrap().history;
        assert_eq!(history, HistoryConfig::default());
        assert!(history.compaction_enabled && history.working_memory.is_none());
        assert_eq!((history.token_budget, history.retain_recent), (100_000, 5));
        let on = settings(&[
            ("ASSISTANT__ENABLE_WORKING_MEMORY", "true"),
            ("LLM__WORKING_MEMORY_MODEL", "builtin:echo"),
            ("HISTORY__COMPACTION_ENABLED", "false"),
        ])
        .unwrap()
        .history;
        assert!(!on.compaction_enabled);
        assert_eq!(on.working_memory.unwrap().max_entries, 15);
        for (key, value) in [
            ("HISTORY__TOKEN_BUDGET", "4999"),
            ("HISTORY__TOKEN_BUDGET", "500001"),
            ("HISTORY__RETAIN_RECENT", "0"),
            ("HISTORY__RETAIN_RECENT", "51"),
            ("HISTORY__PROTECT_RECENT_TOOL_RESULTS", "-1"),
            ("HISTORY__MESSAGE_TRUNCATION_LIMIT", "0"),
            ("HISTORY__MAX_MEMORY_ENTRIES", "none"),
            ("HISTORY__COMPACTION_ENABLED", "sometimes"),
            ("ASSISTANT__ENABLE_WORKING_MEMORY", "2"),
            ("LLM__SUMMARIZATION_MODEL", "gpt-4o"),
            ("LLM__WORKING_MEMORY_MODEL", "builtin:parrot"),
            ("HISTORY__TOKEN_BUDGETS", "9000"),
        ] {
            assert_eq!(
                settings(&[(key, value)]).unwrap_err().key,
                key,
                "{key}={value}"
            );
        }
    }

    #[test]
    fn env_files_accept_comments_quotes_and_export() {
        let parsed = parse_env_file("# c\nexport A=1\nB=\"two\"\nC='3'\n").unwrap();
        assert_eq!(parsed.get("A").map(String::as_str), Some("1"));
        assert_eq!(parsed.get("B").map(String::as_str), Some("two"));
        assert_eq!(parsed.get("C").map(String::as_str), Some("3"));
    }

    #[test]
    fn a_trailing_comment_in_an_env_file_is_not_part_of_the_value() {
        let parsed =
            parse_env_file("OPENAI_BASE_URL=http://127.0.0.1:8000/v1   # a local vLLM\n").unwrap();
        assert_eq!(
            parsed.get("OPENAI_BASE_URL").map(String::as_str),
            Some("http://127.0.0.1:8000/v1")
        );
        let quoted = parse_env_file("A=\"x # kept\"\n").unwrap();
        assert_eq!(quoted.get("A").map(String::as_str), Some("x # kept"));
    }

    #[test]
    fn ports_workers_and_base_urls_are_checked_and_named() {
        let error = settings(&[("SERVER__PORT", "70000")]).unwrap_err();
        assert_eq!(error.key, "SERVER__PORT");
        assert!(error.message.contains("1 to 65535"), "{error}");
        assert_eq!(settings(&[("SERVER__PORT", "8080")]).unwrap().port, 8080);
        assert_eq!(
            settings(&[("SERVER__WORKERS", "0")]).unwrap_err().key,
            "SERVER__WORKERS"
        );
        assert_eq!(
            settings(&[("SERVER__WORKERS", "3")]).unwrap().workers,
            NonZeroUsize::new(3)
        );
        assert_eq!(settings(&[]).unwrap().workers, None);
        for (key, url) in [
            ("OPENAI_BASE_URL", "localhost:8000/v1"),
            ("OPENAI_BASE_URL", "ftp://example.com"),
            ("ANTHROPIC_BASE_URL", "not a url"),
        ] {
            assert_eq!(settings(&[(key, url)]).unwrap_err().key, key, "{url}");
        }
    }

    #[test]
    fn a_default_model_without_its_key_warns_or_with_require_usable_fails() {
        let named = settings(&[("LLM__PRIMARY_MODEL", "openai:gpt-4o")]).unwrap();
        let problem = named.model_problem().expect("no key is a problem");
        assert!(problem.contains("OPENAI_API_KEY"), "{problem}");
        let required = settings(&[
            ("LLM__PRIMARY_MODEL", "anthropic:claude-sonnet-4-5"),
            ("LLM__REQUIRE_USABLE", "true"),
        ])
        .unwrap_err();
        assert_eq!(required.key, "LLM__PRIMARY_MODEL");
        assert!(required.message.contains("ANTHROPIC_API_KEY"), "{required}");
        let local = settings(&[
            ("LLM__PRIMARY_MODEL", "openai:llama3"),
            ("OPENAI_BASE_URL", "http://127.0.0.1:11434/v1"),
            ("LLM__REQUIRE_USABLE", "true"),
        ])
        .unwrap();
        assert_eq!(local.model_problem(), None);
        assert_eq!(settings(&[]).unwrap().model_problem(), None);
    }
}

/// Settings given in code, for a Rust host (`embed`): typed setters for
/// the common ones, [`SettingsBuilder::set`] for any other setting by its
/// documented name (docs/configuration.md), then [`SettingsBuilder::build`],
/// which checks them as startup does. It reads no file and no environment
/// variable unless the host asks with [`SettingsBuilder::from_env`].
///
/// ```
/// use assistant_runtime::settings::SettingsBuilder;
///
/// let settings = SettingsBuilder::new()
///     .model("builtin:echo")
///     .max_turns(4)
///     .set("ASSISTANT__SESSION_IDLE_SECONDS", "600")
///     .build()
///     .expect("valid settings");
/// assert_eq!(settings.max_turns, 4);
/// ```
#[derive(Clone, Debug, Default)]
pub struct SettingsBuilder {
    values: BTreeMap<String, String>,
}

impl SettingsBuilder {
    /// The documented defaults (in-memory store, `builtin:echo` without a
    /// provider key, loopback on port 7100).
    pub fn new() -> SettingsBuilder {
        SettingsBuilder::default()
            .set("SERVER__HOST", "127.0.0.1")
            .set("SERVER__PORT", "7100")
            .set("ASSISTANT__MAX_TURNS", "10")
    }

    /// The defaults overlaid with this process's environment variables,
    /// when the host wants operators to configure the assistant that way.
    pub fn from_env() -> SettingsBuilder {
        let mut builder = SettingsBuilder::new();
        builder.values.extend(std::env::vars());
        builder
    }

    /// Any setting by its environment name, e.g. `ACCESS__CORS__ORIGINS`.
    pub fn set(mut self, key: impl Into<String>, value: impl Into<String>) -> SettingsBuilder {
        self.values.insert(key.into(), value.into());
        self
    }

    /// The default model, `provider:name` (`LLM__PRIMARY_MODEL`).
    pub fn model(self, model: &str) -> SettingsBuilder {
        self.set("LLM__PRIMARY_MODEL", model)
    }

    /// Model requests per turn (`ASSISTANT__MAX_TURNS`).
    pub fn max_turns(self, max_turns: u32) -> SettingsBuilder {
        self.set("ASSISTANT__MAX_TURNS", max_turns.to_string())
    }

    /// A Postgres store instead of the in-memory one (`DATABASE_URL`).
    pub fn database_url(self, url: &str) -> SettingsBuilder {
        self.set("DATABASE_URL", url)
    }

    /// Checks and parses the settings; the error names the setting.
    pub fn build(&self) -> Result<Settings, SettingsError> {
        Settings::from_map(&self.values)
    }
}
