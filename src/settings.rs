//! Settings: `config/default.env`, then `.env`, then the process environment,
//! later sources winning; keys nested with `__` (`SERVER__PORT`). Parsing is a
//! pure function of the merged map, and a bad value stops startup with an
//! error naming the setting.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::Path;
use std::time::Duration;

use actors::model::ModelId;
use actors::tools::HostToolConfig;
use actors::turn::Budget;
use serde_json::Value;

/// Prefixes the runtime owns: an unknown key under one of them is a typo.
const OWNED_PREFIXES: [&str; 7] = [
    "SERVER__",
    "LLM__",
    "TOOLS__",
    "ASSISTANT__",
    "DATABASE__",
    "ACCESS__",
    "SOCKETIO__",
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
    "TOOLS__HOST_TOOLS",
    "TOOLS__HOST_TOOLS_PATH",
    "TOOLS__PAGE_SCOPES",
    "TOOLS__INVALIDATIONS",
    "ASSISTANT__MAX_TURNS",
    "ASSISTANT__THINKING_BUDGET",
    "ASSISTANT__SYSTEM_PROMPT",
    "ASSISTANT__BUDGET__TOOL_CALLS",
    "ASSISTANT__BUDGET__INPUT_TOKENS",
    "ASSISTANT__BUDGET__OUTPUT_TOKENS",
    "ASSISTANT__BUDGET__TOTAL_TOKENS",
    "ASSISTANT__SESSION_IDLE_SECONDS",
    "ASSISTANT__SESSION_TTL_HOURS",
    "DATABASE__URL",
    "DATABASE__REQUIRED",
    "DATABASE__POOL_SIZE",
    "ACCESS__CORS_ORIGINS",
    "SOCKETIO__PING_INTERVAL_MS",
    "SOCKETIO__PING_TIMEOUT_MS",
    "SOCKETIO__MAX_PAYLOAD",
    "SOCKETIO__MAX_SESSIONS_PER_IP",
    "ASSISTANT__ATTACHMENT_BUDGET__SESSION_BYTES",
    "ASSISTANT__ATTACHMENT_BUDGET__PROCESS_BYTES",
];

#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    pub host: String,
    pub port: u16,
    /// HTTP worker threads; 0 means one per core.
    pub workers: usize,
    pub max_body_bytes: usize,
    /// How long a client may take to send a request's head (slowloris).
    pub header_timeout: Duration,
    /// How long a client may take to send a request's whole body.
    pub body_timeout: Duration,
    pub primary_model: ModelId,
    /// Whether the primary model was chosen because no provider key was set.
    pub model_fallback: bool,
    pub providers: ProviderKeys,
    pub request_timeout: Duration,
    pub retry_backoff: Duration,
    pub host_tools: Vec<HostToolConfig>,
    pub page_scopes: HashMap<String, Vec<String>>,
    pub invalidations: HashMap<String, Vec<String>>,
    pub max_turns: u32,
    pub thinking_budget: Option<u32>,
    pub system_prompt: Option<String>,
    pub budget: Budget,
    pub session_idle: Duration,
    pub session_ttl_hours: Option<u64>,
    pub database_url: Option<String>,
    pub database_required: bool,
    pub database_pool_size: usize,
    pub cors_origins: Vec<String>,
    pub ping_interval: Duration,
    pub ping_timeout: Duration,
    pub max_payload: usize,
    /// Engine.IO sessions one peer address may hold at once; 0: no cap.
    pub max_sessions_per_ip: usize,
    /// Attachment bytes in flight at once, per session and per process.
    pub attachment_budget: actors::session::AttachmentBudget,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProviderKeys {
    pub openai_api_key: Option<String>,
    pub openai_base_url: Option<String>,
    pub anthropic_api_key: Option<String>,
    pub anthropic_base_url: Option<String>,
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

/// Reads `KEY=VALUE` lines (`#` comments, optional quotes, optional `export`).
pub fn parse_env_file(text: &str) -> BTreeMap<String, String> {
    let mut values = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line);
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let value = value.trim();
        let value = value
            .strip_prefix('"')
            .and_then(|inner| inner.strip_suffix('"'))
            .or_else(|| {
                value
                    .strip_prefix('\'')
                    .and_then(|inner| inner.strip_suffix('\''))
            })
            .unwrap_or(value);
        values.insert(key.trim().to_string(), value.to_string());
    }
    values
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
                merged.extend(parse_env_file(&text));
            }
        }
        merged.extend(std::env::vars());
        Settings::from_map(&merged)
    }

    pub fn from_map(values: &BTreeMap<String, String>) -> Result<Settings, SettingsError> {
        for key in values.keys() {
            let owned = OWNED_PREFIXES.iter().any(|prefix| key.starts_with(prefix));
            if owned && !KNOWN_KEYS.contains(&key.as_str()) {
                return Err(bad(
                    key,
                    "unknown setting (check the spelling; see README, Configuration)",
                ));
            }
        }
        let get = |key: &str| {
            values
                .get(key)
                .map(|value| value.trim())
                .filter(|value| !value.is_empty())
        };
        let providers = ProviderKeys {
            openai_api_key: get("OPENAI_API_KEY").map(str::to_string),
            openai_base_url: get("OPENAI_BASE_URL").map(str::to_string),
            anthropic_api_key: get("ANTHROPIC_API_KEY").map(str::to_string),
            anthropic_base_url: get("ANTHROPIC_BASE_URL").map(str::to_string),
        };
        let (primary_model, model_fallback) = match get("LLM__PRIMARY_MODEL") {
            Some(text) => (primary_model(text)?, false),
            None => default_model(&providers),
        };
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
            host: get("SERVER__HOST").unwrap_or("127.0.0.1").to_string(),
            port: number(get("SERVER__PORT"), "SERVER__PORT", 7100)?,
            workers: number(get("SERVER__WORKERS"), "SERVER__WORKERS", 0)?,
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
            retry_backoff: Duration::from_millis(number(
                get("LLM__RETRY_BACKOFF_MS"),
                "LLM__RETRY_BACKOFF_MS",
                500,
            )?),
            host_tools,
            page_scopes: json_setting(get("TOOLS__PAGE_SCOPES"), "TOOLS__PAGE_SCOPES")?,
            invalidations: json_setting(get("TOOLS__INVALIDATIONS"), "TOOLS__INVALIDATIONS")?,
            max_turns: positive(get("ASSISTANT__MAX_TURNS"), "ASSISTANT__MAX_TURNS", 10)?,
            thinking_budget: optional(
                get("ASSISTANT__THINKING_BUDGET"),
                "ASSISTANT__THINKING_BUDGET",
            )?,
            system_prompt: get("ASSISTANT__SYSTEM_PROMPT").map(str::to_string),
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
                .map(str::to_string),
            database_required: boolean(get("DATABASE__REQUIRED"), "DATABASE__REQUIRED")?,
            database_pool_size: positive(get("DATABASE__POOL_SIZE"), "DATABASE__POOL_SIZE", 16)?,
            cors_origins: get("ACCESS__CORS_ORIGINS")
                .map(|text| {
                    text.split(',')
                        .map(|origin| origin.trim().to_string())
                        .filter(|origin| !origin.is_empty())
                        .collect()
                })
                .unwrap_or_default(),
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
        })
    }
}

/// `LLM__PRIMARY_MODEL`: `provider:name` with a provider the runtime has.
/// Credentials are not checked here: a named model whose provider has no key
/// starts the runtime unhealthy (`/health` 503) rather than silently on echo.
fn primary_model(text: &str) -> Result<ModelId, SettingsError> {
    let key = "LLM__PRIMARY_MODEL";
    let model = ModelId::parse(text)
        .ok_or_else(|| bad(key, "expected provider:name, e.g. openai:gpt-4o-mini"))?;
    match (model.provider.as_str(), model.name.as_str()) {
        ("openai" | "anthropic", _) | ("builtin", "echo") => Ok(model),
        ("builtin", _) => Err(bad(key, "the builtin provider has only builtin:echo")),
        (provider, _) => Err(bad(
            key,
            format!("unknown provider {provider:?}; use openai, anthropic or builtin"),
        )),
    }
}

/// How long an idle session actor stays in memory by default. In memory, a
/// reload is a deserialisation of bytes the same process holds (microseconds),
/// so a session hibernates as soon as its turn ends and costs only its compact
/// stored form; with Postgres a reload is a round trip, so actors stay five
/// minutes.
fn default_idle_seconds(database_url: Option<&str>) -> u64 {
    match database_url {
        None => 0,
        Some(_) => 300,
    }
}

/// With no key at all the runtime starts on `builtin:echo` (and says so).
fn default_model(providers: &ProviderKeys) -> (ModelId, bool) {
    let chosen = if providers.anthropic_api_key.is_some() {
        "anthropic:claude-sonnet-4-5"
    } else if providers.openai_api_key.is_some() {
        "openai:gpt-4o-mini"
    } else {
        return (
            ModelId {
                provider: "builtin".into(),
                name: "echo".into(),
            },
            true,
        );
    };
    (
        ModelId::parse(chosen).unwrap_or(ModelId {
            provider: "builtin".into(),
            name: "echo".into(),
        }),
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
        if !actors::contract::is_valid_action_name(&name) {
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
            parameters,
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
    fn env_files_accept_comments_quotes_and_export() {
        let parsed = parse_env_file("# c\nexport A=1\nB=\"two\"\nC='3'\n");
        assert_eq!(parsed.get("A").map(String::as_str), Some("1"));
        assert_eq!(parsed.get("B").map(String::as_str), Some("two"));
        assert_eq!(parsed.get("C").map(String::as_str), Some("3"));
    }
}
