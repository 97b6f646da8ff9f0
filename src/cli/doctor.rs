//! `assistant-runtime doctor`: the settings in effect (secrets masked), each
//! model provider's reachability and key, and the database with its migration
//! state. Every check is a line `ok`, `warn` or `FAIL`; any `FAIL` exits 1.

use std::time::Duration;

use actors::model::providers::ModelProviders;
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
        ("OPENAI_API_KEY", set(&settings.providers.openai_api_key)),
        (
            "OPENAI_BASE_URL",
            plain(&settings.providers.openai_base_url),
        ),
        (
            "ANTHROPIC_API_KEY",
            set(&settings.providers.anthropic_api_key),
        ),
        (
            "ANTHROPIC_BASE_URL",
            plain(&settings.providers.anthropic_base_url),
        ),
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
/// for its model list: any answer proves reachability, 401/403 a refused key.
async fn provider_checks(settings: &Settings) -> Vec<Check> {
    let providers = ModelProviders::new(settings.provider_settings());
    let client = match reqwest::Client::builder().timeout(CHECK_TIMEOUT).build() {
        Ok(client) => client,
        Err(error) => {
            return vec![Check::new(
                Verdict::Fail,
                "providers",
                format!("cannot build an HTTP client: {error}"),
            )]
        }
    };
    let mut checks = Vec::new();
    for info in providers.configured() {
        let is_default = settings.primary_model.provider() == info.name;
        if !info.has_credentials && !is_default {
            checks.push(Check::new(
                Verdict::Ok,
                info.name,
                "not configured (no key)",
            ));
            continue;
        }
        if !info.has_credentials {
            // model_check already failed this; no request can succeed.
            continue;
        }
        checks.push(probe_provider(&client, settings, info.name, &info.base_url).await);
    }
    checks
}

async fn probe_provider(
    client: &reqwest::Client,
    settings: &Settings,
    name: &str,
    base_url: &str,
) -> Check {
    let base = base_url.trim_end_matches('/');
    let request = if name == "anthropic" {
        let mut request = client
            .get(format!("{base}/v1/models"))
            .header("anthropic-version", "2023-06-01");
        if let Some(key) = &settings.providers.anthropic_api_key {
            request = request.header("x-api-key", key.expose_secret());
        }
        request
    } else {
        let mut request = client.get(format!("{base}/models"));
        if let Some(key) = &settings.providers.openai_api_key {
            request = request.bearer_auth(key.expose_secret());
        }
        request
    };
    let has_key = match name {
        "anthropic" => settings.providers.anthropic_api_key.is_some(),
        _ => settings.providers.openai_api_key.is_some(),
    };
    match request.send().await {
        Ok(response) if response.status().is_success() => Check::new(
            Verdict::Ok,
            name,
            format!(
                "{base} reachable, {}",
                if has_key {
                    "key accepted"
                } else {
                    "no key needed"
                }
            ),
        ),
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
