//! `assistant-runtime doctor`: the settings in effect (secrets masked), each
//! model provider's reachability and key, and the database with its migration
//! state. Every check is a line `ok`, `warn` or `FAIL`; any `FAIL` exits 1.

use std::time::Duration;

use actors::model::providers::{ModelProviders, ProviderConfig, ProviderKind};
use actors::store::postgres::PgStore;
use secrecy::{ExposeSecret, SecretString};

use crate::settings::Settings;

/// How long one provider or database check may take.
const CHECK_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Ok,
    Warn,
    Fail,
}

impl Verdict {
    fn label(self) -> &'static str {
        match self {
            Verdict::Ok => "ok",
            Verdict::Warn => "warn",
            Verdict::Fail => "FAIL",
        }
    }
}

/// One line of the report.
#[derive(Clone, Debug)]
pub struct Check {
    pub verdict: Verdict,
    pub subject: String,
    pub detail: String,
}

impl Check {
    fn new(verdict: Verdict, subject: impl Into<String>, detail: impl Into<String>) -> Check {
        Check {
            verdict,
            subject: subject.into(),
            detail: detail.into(),
        }
    }
}

/// Prints the report and returns whether nothing failed.
pub async fn run(settings: &Settings) -> bool {
    println!("settings in effect:");
    for (key, value) in settings_in_effect(settings) {
        println!("  {key:<28} {value}");
    }
    let mut checks = vec![model_check(settings)];
    checks.extend(provider_checks(settings).await);
    checks.push(database_check(settings).await);
    println!("checks:");
    for check in &checks {
        println!(
            "  {:<4} {:<10} {}",
            check.verdict.label(),
            check.subject,
            check.detail
        );
    }
    let healthy = checks.iter().all(|check| check.verdict != Verdict::Fail);
    println!(
        "{}",
        if healthy {
            "doctor: the runtime can answer turns"
        } else {
            "doctor: fix the FAIL lines above"
        }
    );
    healthy
}

/// The settings a newcomer asks about, with keys and passwords masked.
pub fn settings_in_effect(settings: &Settings) -> Vec<(&'static str, String)> {
    let set = |value: &Option<SecretString>| match value {
        Some(secret) => mask(secret.expose_secret()),
        None => "(not set)".to_string(),
    };
    let plain = |value: &Option<String>| value.clone().unwrap_or_else(|| "(not set)".into());
    let unset = ProviderConfig::new("", ProviderKind::OpenAi);
    let provider = |name: &str| {
        settings
            .providers
            .iter()
            .find(|provider| provider.name == name)
            .unwrap_or(&unset)
    };
    vec![
        ("SERVER__HOST", settings.host.clone()),
        ("SERVER__PORT", settings.port.to_string()),
        (
            "SERVER__WORKERS",
            settings
                .workers
                .map(|workers| workers.to_string())
                .unwrap_or_else(|| "(one per core)".into()),
        ),
        (
            "LLM__PRIMARY_MODEL",
            format!(
                "{}{}",
                settings.primary_model,
                if settings.model_fallback {
                    " (no provider key: fallback)"
                } else {
                    ""
                }
            ),
        ),
        ("OPENAI_API_KEY", set(&provider("openai").api_key)),
        ("OPENAI_BASE_URL", plain(&provider("openai").base_url)),
        ("ANTHROPIC_API_KEY", set(&provider("anthropic").api_key)),
        ("ANTHROPIC_BASE_URL", plain(&provider("anthropic").base_url)),
        ("LLM__PROVIDERS", providers_in_effect(&settings.providers)),
        (
            "DATABASE_URL",
            settings
                .database_url
                .as_ref()
                .map(|url| mask_url_password(url.expose_secret()))
                .unwrap_or_else(|| "(not set: in memory)".into()),
        ),
        ("ASSISTANT__MAX_TURNS", settings.max_turns.to_string()),
    ]
}

/// Every provider as `name (kind, base URL, key, headers, CA file)`, keys masked.
fn providers_in_effect(providers: &[ProviderConfig]) -> String {
    providers
        .iter()
        .map(|provider| {
            let mut parts = vec![
                provider.kind.as_str().to_string(),
                provider.effective_base_url(),
                match &provider.api_key {
                    Some(key) => format!("key {}", mask(key.expose_secret())),
                    None => "no key".to_string(),
                },
            ];
            if !provider.headers.is_empty() {
                let names: Vec<&str> = provider
                    .headers
                    .iter()
                    .map(|(name, _)| name.as_str())
                    .collect();
                parts.push(format!("headers {}", names.join(" ")));
            }
            if let Some(path) = &provider.ca_file {
                parts.push(format!("CA {}", path.display()));
            }
            format!("{} ({})", provider.name, parts.join(", "))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// A secret as `set (…wxyz)` for keys long enough that four characters reveal
/// nothing useful, else only `set`.
pub fn mask(secret: &str) -> String {
    let chars: Vec<char> = secret.chars().collect();
    if chars.len() >= 16 {
        let tail: String = chars[chars.len() - 4..].iter().collect();
        format!("set (…{tail})")
    } else {
        "set".to_string()
    }
}

/// `postgres://user:secret@host/db` → `postgres://user:***@host/db`.
pub fn mask_url_password(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut parsed) if parsed.password().is_some() => {
            let _ = parsed.set_password(Some("***"));
            parsed.to_string()
        }
        Ok(_) => url.to_string(),
        Err(_) => "(unparsable URL)".to_string(),
    }
}

fn model_check(settings: &Settings) -> Check {
    match (settings.model_problem(), settings.model_fallback) {
        (Some(problem), _) => Check::new(Verdict::Fail, "model", problem),
        (None, true) => Check::new(
            Verdict::Warn,
            "model",
            "no provider key set: running on builtin:echo (offline, for trying the protocol)",
        ),
        (None, false) => Check::new(
            Verdict::Ok,
            "model",
            format!("default {}", settings.primary_model),
        ),
    }
}

/// Each provider that has credentials (or is the default model's) is asked
/// for its model list, through the client turns use (its CA file and
/// headers): any answer proves reachability, 401/403 a refused key.
async fn provider_checks(settings: &Settings) -> Vec<Check> {
    let providers = ModelProviders::new(settings.provider_settings());
    let mut checks = Vec::new();
    for provider in &settings.providers {
        let name = provider.name.as_str();
        let is_default = settings.primary_model.provider() == name;
        if !provider.has_credentials() && !is_default {
            checks.push(Check::new(Verdict::Ok, name, "not configured (no key)"));
            continue;
        }
        if !provider.has_credentials() {
            // model_check already failed this; no request can succeed.
            continue;
        }
        let wanted = is_default.then(|| settings.primary_model.name());
        let check = match providers.http_client(name) {
            Ok(client) => probe_provider(client, provider, wanted).await,
            Err(error) => Check::new(Verdict::Fail, name, error.to_string()),
        };
        checks.push(check);
    }
    checks
}

async fn probe_provider(
    client: &reqwest::Client,
    provider: &ProviderConfig,
    wanted: Option<&str>,
) -> Check {
    let name = provider.name.as_str();
    let base_url = provider.effective_base_url();
    let base = base_url.trim_end_matches('/');
    let mut request = match provider.kind {
        // The largest page: the whole list in one answer.
        ProviderKind::Anthropic => client
            .get(format!("{base}/v1/models?limit=1000"))
            .header("anthropic-version", "2023-06-01"),
        ProviderKind::OpenAi => client.get(format!("{base}/models")),
    };
    if let Some(key) = &provider.api_key {
        request = match provider.kind {
            ProviderKind::Anthropic => request.header("x-api-key", key.expose_secret()),
            ProviderKind::OpenAi => request.bearer_auth(key.expose_secret()),
        };
    }
    let has_key = provider.api_key.is_some();
    match request.timeout(CHECK_TIMEOUT).send().await {
        Ok(response) if response.status().is_success() => {
            let reached = format!(
                "{base} reachable, {}",
                if has_key {
                    "key accepted"
                } else {
                    "no key needed"
                }
            );
            let listed = response.json::<serde_json::Value>().await.ok();
            match (wanted, listed.as_ref().and_then(listed_ids)) {
                (Some(model), Some(ids)) => match model_listed(model, &ids) {
                    Ok(()) => Check::new(Verdict::Ok, name, format!("{reached}, lists {model}")),
                    Err(why) => Check::new(Verdict::Fail, name, format!("{reached}, but {why}")),
                },
                _ => Check::new(Verdict::Ok, name, reached),
            }
        }
        Ok(response) if matches!(response.status().as_u16(), 401 | 403) => Check::new(
            Verdict::Fail,
            name,
            format!(
                "{base} refused the key (HTTP {})",
                response.status().as_u16()
            ),
        ),
        Ok(response) => Check::new(
            Verdict::Warn,
            name,
            format!(
                "{base} reachable, but its model list answered HTTP {}",
                response.status().as_u16()
            ),
        ),
        Err(error) => Check::new(
            Verdict::Fail,
            name,
            format!("{base} unreachable: {}", root_cause(&error)),
        ),
    }
}

/// The ids of a model list (`{"data": [{"id"}]}`, both providers' shape).
fn listed_ids(list: &serde_json::Value) -> Option<Vec<String>> {
    let ids: Vec<String> = list["data"]
        .as_array()?
        .iter()
        .filter_map(|model| model["id"].as_str().map(str::to_string))
        .collect();
    (!ids.is_empty()).then_some(ids)
}

/// Whether the provider lists `model`, as itself or as the alias of a dated
/// id (`claude-sonnet-4-5` for `claude-sonnet-4-5-20250929`); if not, why,
/// naming the closest listed id.
fn model_listed(model: &str, ids: &[String]) -> Result<(), String> {
    let alias_of = |id: &str| {
        id.strip_prefix(model)
            .and_then(|rest| rest.strip_prefix('-'))
            .is_some_and(is_date)
    };
    if ids.iter().any(|id| id == model || alias_of(id)) {
        return Ok(());
    }
    let closest = ids
        .iter()
        .min_by_key(|id| crate::settings::near_miss::edit_distance(model, id));
    Err(match closest {
        Some(id) => format!(
            "it does not list the default model {model:?} (LLM__PRIMARY_MODEL; closest: {id:?}, of {} listed)",
            ids.len()
        ),
        None => format!("it does not list the default model {model:?} (LLM__PRIMARY_MODEL)"),
    })
}

/// A model id's date suffix: `20250929` or `2024-08-06`.
fn is_date(text: &str) -> bool {
    let digits = text.chars().filter(char::is_ascii_digit).count();
    let shape_ok = match text.len() {
        8 => digits == 8,
        10 => digits == 8 && text.as_bytes()[4] == b'-' && text.as_bytes()[7] == b'-',
        _ => false,
    };
    shape_ok
}

/// The innermost error, which names the actual cause (refused, DNS, TLS).
fn root_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = error;
    while let Some(source) = cause.source() {
        cause = source;
    }
    cause.to_string()
}

async fn database_check(settings: &Settings) -> Check {
    let Some(url) = &settings.database_url else {
        return Check::new(
            Verdict::Ok,
            "database",
            "none: sessions live in memory (set DATABASE_URL for PostgreSQL)",
        );
    };
    let store =
        match PgStore::in_schema(url.expose_secret(), 1, &settings.deployment.database_schema) {
            Ok(store) => store,
            Err(error) => return Check::new(Verdict::Fail, "database", error),
        };
    match tokio::time::timeout(CHECK_TIMEOUT * 2, store.migration_status()).await {
        Err(_) => Check::new(Verdict::Fail, "database", "no answer in time"),
        Ok(Err(error)) => Check::new(Verdict::Fail, "database", error.to_string()),
        Ok(Ok(status)) if status.pending.is_empty() => Check::new(
            Verdict::Ok,
            "database",
            format!("reachable, migrations applied {:?}", status.applied),
        ),
        Ok(Ok(status)) => Check::new(
            Verdict::Warn,
            "database",
            format!(
                "reachable, migrations pending {:?} (serve or migrate applies them)",
                status.pending
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_is_listed_by_its_id_or_as_the_alias_of_a_dated_id() {
        let ids: Vec<String> = ["gpt-4o-mini", "claude-sonnet-4-5-20250929"]
            .iter()
            .map(|id| id.to_string())
            .collect();
        assert!(model_listed("gpt-4o-mini", &ids).is_ok());
        assert!(model_listed("claude-sonnet-4-5", &ids).is_ok());
        let why = model_listed("gpt-4o-minni", &ids).unwrap_err();
        assert!(why.contains("closest: \"gpt-4o-mini\""), "{why}");
        assert!(model_listed("claude-sonnet-4", &ids).is_err());
    }

    #[test]
    fn secrets_are_masked() {
        assert_eq!(mask("short"), "set");
        assert_eq!(mask("sk-0123456789abcdefWXYZ"), "set (…WXYZ)");
        assert_eq!(
            mask_url_password("postgres://app:hunter2@db:5432/assistant"),
            "postgres://app:***@db:5432/assistant"
        );
        assert_eq!(
            mask_url_password("postgres://postgres@127.0.0.1/x"),
            "postgres://postgres@127.0.0.1/x"
        );
    }
}
