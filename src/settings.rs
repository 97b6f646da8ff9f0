//! Settings: `config/default.env`, then `.env`, then the process environment,
//! later sources winning; keys nested with `__` (`SERVER__PORT`). Env files are
//! read by dotenvy (quotes, `export`, trailing ` # comments`). Parsing is a
//! pure function of the merged map, and a bad value stops startup with an
//! error naming the setting.

pub mod near_miss;

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

use crate::access::config::{AccessSettings, ACCESS_KEYS};
use crate::deployment::{DeploymentSettings, DEPLOYMENT_KEYS};

/// Prefixes the runtime owns: an unknown key under one of them is a typo.
const OWNED_PREFIXES: [&str; 10] = [
    "SERVER__",
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

const KNOWN_KEYS: &[&str] = &[
    "SERVER__HOST",
    "SERVER__PORT",
    "SERVER__WORKERS",
    "SERVER__MAX_BODY_BYTES",
    "SERVER__HEADER_TIMEOUT_SECONDS",
    "SERVER__BODY_TIMEOUT_SECONDS",
    "LLM__PRIMARY_MODEL",
    "LLM__REQUEST_TIMEOUT_SECONDS",
    "LLM__RETRY_BACKOFF_MS",
    "LLM__RETRY_MAX_WAIT_SECONDS",
    "LLM__MAX_EVENT_BYTES",
    "LLM__SUMMARIZATION_MODEL",
    "LLM__WORKING_MEMORY_MODEL",
    "LLM__REQUIRE_USABLE",
    "TOOLS__HOST_TOOLS",
    "TOOLS__HOST_TOOLS_PATH",
    "TOOLS__PAGE_SCOPES",
    "TOOLS__INVALIDATIONS",
    "ASSISTANT__MAX_TURNS",
    "ASSISTANT__THINKING_BUDGET",
    "ASSISTANT__SYSTEM_PROMPT",
    "ASSISTANT__PROFILE",
    "ASSISTANT__BUDGET__TOOL_CALLS",
    "ASSISTANT__BUDGET__INPUT_TOKENS",
    "ASSISTANT__BUDGET__OUTPUT_TOKENS",
    "ASSISTANT__BUDGET__TOTAL_TOKENS",
    "ASSISTANT__SESSION_IDLE_SECONDS",
    "ASSISTANT__SESSION_TTL_HOURS",
    "ASSISTANT__ENABLE_WORKING_MEMORY",
    "HISTORY__COMPACTION_ENABLED",
    "HISTORY__TOKEN_BUDGET",
    "HISTORY__RETAIN_RECENT",
    "HISTORY__PROTECT_RECENT_TOOL_RESULTS",
    "HISTORY__MESSAGE_TRUNCATION_LIMIT",
    "HISTORY__MAX_MEMORY_ENTRIES",
    "ASSISTANT__REQUEST_MODELS",
    "ASSISTANT__TURNS_PER_MINUTE",
    "ASSISTANT__LIVE_SESSIONS_PER_PRINCIPAL",
    "ASSISTANT__MAX_MEMORY_SESSIONS",
    "DATABASE__URL",
    "DATABASE__REQUIRED",
    "DATABASE__POOL_SIZE",
    "SOCKETIO__PING_INTERVAL_MS",
    "SOCKETIO__PING_TIMEOUT_MS",
    "SOCKETIO__MAX_PAYLOAD",
    "MCP__CALL_TIMEOUT_SECONDS",
    "SOCKETIO__MAX_SESSIONS_PER_IP",
    "ASSISTANT__ATTACHMENT_BUDGET__SESSION_BYTES",
    "ASSISTANT__ATTACHMENT_BUDGET__PROCESS_BYTES",
];

/// Settings read outside the owned prefixes.
const OUTSIDE_KEYS: &[&str] = &[
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "DATABASE_URL",
    "MCP_CONFIG_PATH",
];

/// Every setting's name, for the near-miss check.
fn every_key() -> Vec<&'static str> {
    KNOWN_KEYS
        .iter()
        .chain(ACCESS_KEYS)
        .chain(DEPLOYMENT_KEYS)
        .chain(OUTSIDE_KEYS)
        .copied()
        .collect()
}

#[derive(Clone, Debug)]
pub struct Settings {
    /// Variables that look like a misspelt or borrowed setting name
    /// (`SERVER_PORT`, `OPENAI_API_BASE`): warned about at startup, a
    /// startup error with `LLM__REQUIRE_USABLE=true`.
    pub near_misses: Vec<near_miss::NearMiss>,
    pub host: String,
    pub port: u16,
    /// HTTP worker threads; `None` means one per core.
    pub workers: Option<NonZeroUsize>,
    pub max_body_bytes: usize,
    /// How long a client may take to send a request's head (slowloris).
    pub header_timeout: Duration,
    /// How long a client may take to send a request's whole body.
    pub body_timeout: Duration,
    pub primary_model: ModelId,
    /// Whether the primary model was chosen because no provider key was set.
    pub model_fallback: bool,
    /// `openai`, `anthropic` and the `LLM__PROVIDERS__<NAME>__*` ones.
    pub providers: Vec<ProviderConfig>,
    pub request_timeout: Duration,
    /// `LLM__RETRY_BACKOFF_MS`, `LLM__RETRY_MAX_WAIT_SECONDS`.
    pub retry: RetryPolicy,
    /// `LLM__MAX_EVENT_BYTES`: the largest SSE event a provider may send.
    pub max_event_bytes: usize,
    pub host_tools: Vec<HostToolConfig>,
    pub page_scopes: HashMap<String, Vec<String>>,
    pub invalidations: HashMap<String, Vec<String>>,
    pub max_turns: u32,
    pub thinking_budget: Option<u32>,
    pub system_prompt: Option<String>,
    /// `ASSISTANT__PROFILE`, read at startup; `None` is the builtin profile.
    pub profile: Option<Profile>,
    pub budget: Budget,
    pub session_idle: Duration,
    pub session_ttl_hours: Option<u64>,
    /// A secret: it may hold the database password.
    pub database_url: Option<SecretString>,
    pub database_required: bool,
    pub database_pool_size: usize,
    /// `ACCESS__*`: identity mode and CORS.
    pub access: AccessSettings,
    /// Models a request's `config.default_model` may name besides the
    /// configured default (`ASSISTANT__REQUEST_MODELS`).
    pub request_models: Vec<ModelId>,
    /// Turns one principal may start per minute; 0: no cap.
    pub turns_per_minute: u32,
    /// Sessions one principal may have running a turn at once; 0: no cap.
    pub live_sessions_per_principal: u32,
    /// Sessions the in-memory store holds at most; 0: no bound.
    pub max_memory_sessions: usize,
    pub ping_interval: Duration,
    pub ping_timeout: Duration,
    pub max_payload: usize,
    /// Compaction and working memory (`HISTORY__*` and friends).
    pub history: HistoryConfig,
    /// MCP servers from `MCP_CONFIG_PATH` (default `mcp_servers.json`).
    pub mcp_servers: Vec<McpServerConfig>,
    /// `MCP__CALL_TIMEOUT_SECONDS`: the longest an MCP call (or connect) may take.
    pub mcp_call_timeout: Duration,
    /// Engine.IO sessions one peer address may hold at once; 0: no cap.
    pub max_sessions_per_ip: usize,
    /// Attachment bytes in flight at once, per session and per process.
    pub attachment_budget: actors::session::AttachmentBudget,
    /// Proxies, the metrics token and the database schema (`deployment`).
    pub deployment: DeploymentSettings,
}

/// A setting that could not be used, with its name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SettingsError {
    pub key: String,
    pub message: String,
}

impl fmt::Display for SettingsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "setting {}: {}", self.key, self.message)
    }
}

impl std::error::Error for SettingsError {}

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
            values
                .get(key)
                .map(|value| value.trim())
                .filter(|value| !value.is_empty())
        };
        let require_usable = boolean(get("LLM__REQUIRE_USABLE"), "LLM__REQUIRE_USABLE")?;
        let near_misses = near_miss::near_misses(values, &every_key);
        if let (true, Some(near_miss)) = (require_usable, near_misses.first()) {
            return Err(bad(
                &near_miss.key,
                format!("{} (LLM__REQUIRE_USABLE is true)", near_miss.sentence()),
            ));
        }
        let providers = crate::provider_settings::read(values)?;
        let (primary_model, model_fallback) = match get("LLM__PRIMARY_MODEL") {
            Some(text) => (
                primary_model(text, "LLM__PRIMARY_MODEL", &providers)?,
                false,
            ),
            None => default_model(&providers),
        };
        if let Some(problem) = unusable_model(&primary_model, &providers) {
            if require_usable {
                return Err(bad(
                    "LLM__PRIMARY_MODEL",
                    format!("{problem} (LLM__REQUIRE_USABLE is true)"),
                ));
            }
        }
        let request_models = request_models(get("ASSISTANT__REQUEST_MODELS"), &providers)?;
        let history = history(&get, &providers)?;
        let mut host_tools = match get("TOOLS__HOST_TOOLS") {
            Some(text) => parse_host_tools("TOOLS__HOST_TOOLS", text)?,
            None => Vec::new(),
        };
        if let Some(path) = get("TOOLS__HOST_TOOLS_PATH") {
            let text = std::fs::read_to_string(path).map_err(|error| {
                bad(
                    "TOOLS__HOST_TOOLS_PATH",
                    format!("cannot read {path}: {error}"),
                )
            })?;
            host_tools.extend(parse_host_tools("TOOLS__HOST_TOOLS_PATH", &text)?);
        }
        Ok(Settings {
            near_misses,
            host: get("SERVER__HOST").unwrap_or("127.0.0.1").to_string(),
            port: port(get("SERVER__PORT"))?,
            workers: optional(get("SERVER__WORKERS"), "SERVER__WORKERS")?
                .map(|workers: usize| {
                    NonZeroUsize::new(workers).ok_or_else(|| {
                        bad(
                            "SERVER__WORKERS",
                            "must be at least 1 (unset: one per core)",
                        )
                    })
                })
                .transpose()?,
            max_body_bytes: number(
                get("SERVER__MAX_BODY_BYTES"),
                "SERVER__MAX_BODY_BYTES",
                64 * 1024 * 1024,
            )?,
            header_timeout: Duration::from_secs(positive(
                get("SERVER__HEADER_TIMEOUT_SECONDS"),
                "SERVER__HEADER_TIMEOUT_SECONDS",
                5,
            )?),
            body_timeout: Duration::from_secs(positive(
                get("SERVER__BODY_TIMEOUT_SECONDS"),
                "SERVER__BODY_TIMEOUT_SECONDS",
                30,
            )?),
            primary_model,
            model_fallback,
            providers,
            request_timeout: Duration::from_secs(number(
                get("LLM__REQUEST_TIMEOUT_SECONDS"),
                "LLM__REQUEST_TIMEOUT_SECONDS",
                120,
            )?),
            retry: retry_policy(&get)?,
            max_event_bytes: positive(
                get("LLM__MAX_EVENT_BYTES"),
                "LLM__MAX_EVENT_BYTES",
                actors::model::DEFAULT_MAX_EVENT_BYTES,
            )?,
            host_tools,
            page_scopes: json_setting(get("TOOLS__PAGE_SCOPES"), "TOOLS__PAGE_SCOPES")?,
            invalidations: json_setting(get("TOOLS__INVALIDATIONS"), "TOOLS__INVALIDATIONS")?,
            max_turns: positive(get("ASSISTANT__MAX_TURNS"), "ASSISTANT__MAX_TURNS", 10)?,
            thinking_budget: optional(
                get("ASSISTANT__THINKING_BUDGET"),
                "ASSISTANT__THINKING_BUDGET",
            )?,
            system_prompt: get("ASSISTANT__SYSTEM_PROMPT").map(str::to_string),
            profile: profile(get("ASSISTANT__PROFILE"), get("ASSISTANT__SYSTEM_PROMPT"))?,
            budget: Budget {
                tool_calls: optional(
                    get("ASSISTANT__BUDGET__TOOL_CALLS"),
                    "ASSISTANT__BUDGET__TOOL_CALLS",
                )?,
                input_tokens: optional(
                    get("ASSISTANT__BUDGET__INPUT_TOKENS"),
                    "ASSISTANT__BUDGET__INPUT_TOKENS",
                )?,
                output_tokens: optional(
                    get("ASSISTANT__BUDGET__OUTPUT_TOKENS"),
                    "ASSISTANT__BUDGET__OUTPUT_TOKENS",
                )?,
                total_tokens: optional(
                    get("ASSISTANT__BUDGET__TOTAL_TOKENS"),
                    "ASSISTANT__BUDGET__TOTAL_TOKENS",
                )?,
            },
            session_idle: Duration::from_secs(number(
                get("ASSISTANT__SESSION_IDLE_SECONDS"),
                "ASSISTANT__SESSION_IDLE_SECONDS",
                default_idle_seconds(get("DATABASE_URL").or_else(|| get("DATABASE__URL"))),
            )?),
            session_ttl_hours: optional(
                get("ASSISTANT__SESSION_TTL_HOURS"),
                "ASSISTANT__SESSION_TTL_HOURS",
            )?,
            database_url: get("DATABASE_URL")
                .or_else(|| get("DATABASE__URL"))
                .map(SecretString::from),
            database_required: boolean(get("DATABASE__REQUIRED"), "DATABASE__REQUIRED")?,
            database_pool_size: positive(get("DATABASE__POOL_SIZE"), "DATABASE__POOL_SIZE", 16)?,
            access: AccessSettings::from_map(values)?,
            request_models,
            turns_per_minute: number(
                get("ASSISTANT__TURNS_PER_MINUTE"),
                "ASSISTANT__TURNS_PER_MINUTE",
                60,
            )?,
            live_sessions_per_principal: number(
                get("ASSISTANT__LIVE_SESSIONS_PER_PRINCIPAL"),
                "ASSISTANT__LIVE_SESSIONS_PER_PRINCIPAL",
                8,
            )?,
            max_memory_sessions: number(
                get("ASSISTANT__MAX_MEMORY_SESSIONS"),
                "ASSISTANT__MAX_MEMORY_SESSIONS",
                100_000,
            )?,
            ping_interval: Duration::from_millis(positive(
                get("SOCKETIO__PING_INTERVAL_MS"),
                "SOCKETIO__PING_INTERVAL_MS",
                25_000,
            )?),
            ping_timeout: Duration::from_millis(positive(
                get("SOCKETIO__PING_TIMEOUT_MS"),
                "SOCKETIO__PING_TIMEOUT_MS",
                20_000,
            )?),
            max_payload: positive(
                get("SOCKETIO__MAX_PAYLOAD"),
                "SOCKETIO__MAX_PAYLOAD",
                1_000_000,
            )?,
            history,
            mcp_servers: mcp_servers(get("MCP_CONFIG_PATH"))?,
            mcp_call_timeout: Duration::from_secs(positive(
                get("MCP__CALL_TIMEOUT_SECONDS"),
                "MCP__CALL_TIMEOUT_SECONDS",
                30,
            )?),
            max_sessions_per_ip: number(
                get("SOCKETIO__MAX_SESSIONS_PER_IP"),
                "SOCKETIO__MAX_SESSIONS_PER_IP",
                1_000,
            )?,
            attachment_budget: actors::session::AttachmentBudget::new(
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
            ),
            deployment: DeploymentSettings::from_map(values)?,
        })
    }
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
