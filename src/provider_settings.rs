//! The model providers from the settings map: `OPENAI_*` and `ANTHROPIC_*`
//! are the providers `openai` and `anthropic`; `LLM__PROVIDERS__<NAME>__*`
//! adds any number more (or overrides a field of those two). `<NAME>` is
//! read lowercased and is what model ids use before the `:`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use actors::model::providers::{ProviderConfig, ProviderKind, BUILTIN};
use secrecy::SecretString;
use serde_json::Value;

use crate::settings_error::SettingsError;

pub const PREFIX: &str = "LLM__PROVIDERS__";

/// The fields of one named provider, as they follow `<NAME>__`.
pub const FIELDS: [&str; 5] = ["KIND", "BASE_URL", "API_KEY", "HEADERS", "CA_FILE"];

/// Whether `key` belongs to the provider family; its fields are checked by
/// `read`, which names the unknown ones.
pub fn is_provider_key(key: &str) -> bool {
    key.starts_with(PREFIX)
}

fn bad(key: &str, message: impl Into<String>) -> SettingsError {
    SettingsError {
        key: key.to_string(),
        message: message.into(),
    }
}

/// `openai` and `anthropic` first (configured or not), then the named
/// providers in name order.
pub fn read(values: &BTreeMap<String, String>) -> Result<Vec<ProviderConfig>, SettingsError> {
    let get = |key: &str| {
        values
            .get(key)
            .map(|value| value.trim())
            .filter(|value| !value.is_empty())
    };
    let mut openai = ProviderConfig::new("openai", ProviderKind::OpenAi);
    openai.api_key = get("OPENAI_API_KEY").map(SecretString::from);
    openai.base_url = base_url(get("OPENAI_BASE_URL"), "OPENAI_BASE_URL")?;
    let mut anthropic = ProviderConfig::new("anthropic", ProviderKind::Anthropic);
    anthropic.api_key = get("ANTHROPIC_API_KEY").map(SecretString::from);
    anthropic.base_url = base_url(get("ANTHROPIC_BASE_URL"), "ANTHROPIC_BASE_URL")?;
    let mut providers = vec![openai, anthropic];

    for (name, fields) in named(values)? {
        let key = |field: &str| format!("{PREFIX}{}__{field}", name.to_uppercase());
        let value = |field: &str| fields.get(field).copied();
        let existing = providers.iter().position(|provider| provider.name == name);
        let kind = match (value("KIND"), existing) {
            (Some(text), _) => ProviderKind::parse(text).ok_or_else(|| {
                bad(
                    &key("KIND"),
                    format!("expected openai or anthropic, got {text:?}"),
                )
            })?,
            (None, Some(index)) => providers[index].kind,
            (None, None) => {
                return Err(bad(
                    &key("KIND"),
                    format!("provider `{name}` needs a kind: openai or anthropic"),
                ))
            }
        };
        let mut provider = match existing {
            Some(index) => providers.remove(index),
            None => ProviderConfig::new(name.clone(), kind),
        };
        provider.kind = kind;
        if let Some(url) = base_url(value("BASE_URL"), &key("BASE_URL"))? {
            provider.base_url = Some(url);
        }
        if let Some(api_key) = value("API_KEY") {
            provider.api_key = Some(SecretString::from(api_key));
        }
        if let Some(text) = value("HEADERS") {
            provider.headers = headers(text, &key("HEADERS"))?;
        }
        if let Some(path) = value("CA_FILE") {
            let path = PathBuf::from(path);
            // Read now, so a wrong path stops startup instead of failing turns.
            actors::model::tls::read_ca_file(&path).map_err(|error| bad(&key("CA_FILE"), error))?;
            provider.ca_file = Some(path);
        }
        let at = existing.unwrap_or(providers.len());
        providers.insert(at, provider);
    }
    Ok(providers)
}

/// The `LLM__PROVIDERS__*` keys grouped by lowercased name, each field
/// checked; empty values count as unset.
fn named(
    values: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, BTreeMap<&'static str, &str>>, SettingsError> {
    let mut named: BTreeMap<String, BTreeMap<&'static str, &str>> = BTreeMap::new();
    for (key, value) in values {
        let Some(rest) = key.strip_prefix(PREFIX) else {
            continue;
        };
        let Some((name, field)) = rest.rsplit_once("__") else {
            return Err(bad(
                key,
                format!(
                    "expected {PREFIX}<NAME>__<FIELD> with FIELD one of {}",
                    FIELDS.join(", ")
                ),
            ));
        };
        let Some(field) = FIELDS.iter().copied().find(|known| *known == field) else {
            return Err(bad(
                key,
                format!(
                    "unknown provider field {field:?}; known: {}",
                    FIELDS.join(", ")
                ),
            ));
        };
        let name = name.to_lowercase();
        let valid = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !valid {
            return Err(bad(
                key,
                "a provider name is letters, digits, `_` and `-` (it prefixes model ids)",
            ));
        }
        if name == BUILTIN {
            return Err(bad(key, "`builtin` is the runtime's own provider"));
        }
        let entry = named.entry(name).or_default();
        let value = value.trim();
        if !value.is_empty() {
            entry.insert(field, value);
        }
    }
    Ok(named)
}

/// A provider base URL must be an absolute `http` or `https` URL.
pub fn base_url(value: Option<&str>, key: &str) -> Result<Option<String>, SettingsError> {
    let Some(text) = value else {
        return Ok(None);
    };
    let url = reqwest::Url::parse(text)
        .map_err(|error| bad(key, format!("not a URL ({error}): {text:?}")))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(bad(
            key,
            format!("expected an http:// or https:// URL with a host, got {text:?}"),
        ));
    }
    Ok(Some(text.to_string()))
}

/// `…__HEADERS`: a JSON object of header names to string values.
fn headers(text: &str, key: &str) -> Result<Vec<(String, SecretString)>, SettingsError> {
    let expected = "expected a JSON object of header names to strings, e.g. {\"x-route\": \"eu\"}";
    let object = match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(object)) => object,
        _ => return Err(bad(key, expected)),
    };
    object
        .into_iter()
        .map(|(name, value)| {
            let Value::String(value) = value else {
                return Err(bad(key, format!("header {name:?}: {expected}")));
            };
            if reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_err() {
                return Err(bad(key, format!("{name:?} is not a valid header name")));
            }
            if reqwest::header::HeaderValue::from_str(&value).is_err() {
                return Err(bad(
                    key,
                    format!("the value of header {name:?} is not a valid header value"),
                ));
            }
            Ok((name, SecretString::from(value)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use secrecy::ExposeSecret;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(key, value)| (key.to_string(), value.to_string()))
            .collect()
    }

    #[test]
    fn legacy_variables_are_the_openai_and_anthropic_providers() {
        let providers = read(&map(&[
            ("OPENAI_BASE_URL", "http://127.0.0.1:11434/v1"),
            ("ANTHROPIC_API_KEY", "sk-ant"),
        ]))
        .unwrap();
        let names: Vec<&str> = providers.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["openai", "anthropic"]);
        assert!(providers.iter().all(ProviderConfig::has_credentials));
    }

    #[test]
    fn named_providers_are_read_lowercased_with_all_fields() {
        let providers = read(&map(&[
            ("LLM__PROVIDERS__VLLM__KIND", "openai"),
            ("LLM__PROVIDERS__VLLM__BASE_URL", "http://127.0.0.1:8000/v1"),
            ("LLM__PROVIDERS__GATEWAY__KIND", "Anthropic"),
            ("LLM__PROVIDERS__GATEWAY__API_KEY", "gw-key"),
            ("LLM__PROVIDERS__GATEWAY__HEADERS", r#"{"x-route": "eu"}"#),
            (
                "LLM__PROVIDERS__OPENAI__BASE_URL",
                "https://proxy.example/v1",
            ),
        ]))
        .unwrap();
        let names: Vec<&str> = providers.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["openai", "anthropic", "gateway", "vllm"]);
        assert_eq!(
            providers[0].base_url.as_deref(),
            Some("https://proxy.example/v1")
        );
        let gateway = &providers[2];
        assert_eq!(gateway.kind, ProviderKind::Anthropic);
        assert_eq!(gateway.headers[0].0, "x-route");
        assert_eq!(gateway.headers[0].1.expose_secret(), "eu");
        assert_eq!(providers[3].kind, ProviderKind::OpenAi);
    }

    #[test]
    fn bad_provider_settings_name_their_key() {
        /// The settings, the key the error names, a phrase of its message.
        type Case = (
            &'static [(&'static str, &'static str)],
            &'static str,
            &'static str,
        );
        let cases: &[Case] = &[
            (
                &[("LLM__PROVIDERS__VLLM__BASE_URL", "http://h/v1")],
                "LLM__PROVIDERS__VLLM__KIND",
                "needs a kind",
            ),
            (
                &[("LLM__PROVIDERS__VLLM__KIND", "gemini")],
                "LLM__PROVIDERS__VLLM__KIND",
                "openai or anthropic",
            ),
            (
                &[("LLM__PROVIDERS__VLLM__BASEURL", "x")],
                "LLM__PROVIDERS__VLLM__BASEURL",
                "KIND, BASE_URL, API_KEY, HEADERS, CA_FILE",
            ),
            (
                &[("LLM__PROVIDERS__VLLM", "x")],
                "LLM__PROVIDERS__VLLM",
                "<NAME>__<FIELD>",
            ),
            (
                &[("LLM__PROVIDERS__BUILTIN__KIND", "openai")],
                "LLM__PROVIDERS__BUILTIN__KIND",
                "builtin",
            ),
            (
                &[("LLM__PROVIDERS__A.B__KIND", "openai")],
                "LLM__PROVIDERS__A.B__KIND",
                "letters, digits",
            ),
            (
                &[
                    ("LLM__PROVIDERS__GW__KIND", "openai"),
                    ("LLM__PROVIDERS__GW__HEADERS", "[1]"),
                ],
                "LLM__PROVIDERS__GW__HEADERS",
                "JSON object",
            ),
            (
                &[
                    ("LLM__PROVIDERS__GW__KIND", "openai"),
                    ("LLM__PROVIDERS__GW__HEADERS", r#"{"bad name": "x"}"#),
                ],
                "LLM__PROVIDERS__GW__HEADERS",
                "not a valid header name",
            ),
            (
                &[
                    ("LLM__PROVIDERS__GW__KIND", "openai"),
                    ("LLM__PROVIDERS__GW__BASE_URL", "localhost:8000"),
                ],
                "LLM__PROVIDERS__GW__BASE_URL",
                "http",
            ),
            (
                &[
                    ("LLM__PROVIDERS__GW__KIND", "openai"),
                    ("LLM__PROVIDERS__GW__CA_FILE", "/nonexistent/ca.pem"),
                ],
                "LLM__PROVIDERS__GW__CA_FILE",
                "cannot read /nonexistent/ca.pem",
            ),
        ];
        for (pairs, key, needle) in cases {
            let error = read(&map(pairs)).expect_err(key);
            assert_eq!(error.key, *key, "{error}");
            assert!(error.message.contains(needle), "{error}");
        }
    }
}
