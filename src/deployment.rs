//! The settings of running behind a proxy, in a container and beside other
//! applications: which peers may forward a client's address
//! (`SERVER__TRUSTED_PROXIES`), who may scrape `/metrics` besides an admin
//! (`METRICS__TOKEN`), and the PostgreSQL schema the tables live in
//! (`DATABASE__SCHEMA`). Parsed with the rest by `Settings::from_map`.

use std::collections::BTreeMap;

use std::time::Duration;

use secrecy::SecretString;

use crate::access::proxies::TrustedProxies;
use crate::settings_error::SettingsError;

pub use actors::store::postgres::DEFAULT_SCHEMA;

#[derive(Clone, Debug)]
pub struct DeploymentSettings {
    /// Peers whose `X-Forwarded-For` / `Forwarded` is believed; none by default.
    pub trusted_proxies: TrustedProxies,
    /// A bearer token that may read `/metrics` without being an admin.
    pub metrics_token: Option<SecretString>,
    /// A plain lower-case identifier, so it needs no quoting anywhere.
    pub database_schema: String,
    /// How often `assistant_stored_sessions` is recounted (a `count(*)` of
    /// the sessions table), never per scrape.
    pub stored_sessions_interval: Duration,
}

/// `METRICS__STORED_SESSIONS_INTERVAL_SECONDS` unless set.
const STORED_SESSIONS_INTERVAL_SECONDS: u64 = 30;

impl DeploymentSettings {
    pub fn from_map(
        values: &BTreeMap<String, String>,
    ) -> Result<DeploymentSettings, SettingsError> {
        let get = |key: &str| {
            values
                .get(key)
                .map(|value| value.trim())
                .filter(|value| !value.is_empty())
        };
        let trusted_proxies = TrustedProxies::parse(get("SERVER__TRUSTED_PROXIES").unwrap_or(""))
            .map_err(|message| SettingsError {
            key: "SERVER__TRUSTED_PROXIES".into(),
            message,
        })?;
        let database_schema = get("DATABASE__SCHEMA").unwrap_or(DEFAULT_SCHEMA);
        if !actors::store::migrations::valid_schema_name(database_schema) {
            return Err(SettingsError {
                key: "DATABASE__SCHEMA".into(),
                message: format!(
                    "{database_schema:?}: expected lower-case letters, digits and _, not starting with a digit, at most 63"
                ),
            });
        }
        let key = "METRICS__STORED_SESSIONS_INTERVAL_SECONDS";
        let interval_seconds = match get(key) {
            None => STORED_SESSIONS_INTERVAL_SECONDS,
            Some(text) => match text.parse::<u64>() {
                Ok(seconds) if seconds > 0 => seconds,
                _ => {
                    return Err(SettingsError {
                        key: key.into(),
                        message: format!("{text:?}: expected whole seconds, at least 1"),
                    })
                }
            },
        };
        Ok(DeploymentSettings {
            stored_sessions_interval: Duration::from_secs(interval_seconds),
            trusted_proxies,
            metrics_token: get("METRICS__TOKEN").map(SecretString::from),
            database_schema: database_schema.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(pairs: &[(&str, &str)]) -> Result<DeploymentSettings, SettingsError> {
        let map = pairs
            .iter()
            .map(|(key, value)| (key.to_string(), value.to_string()))
            .collect();
        DeploymentSettings::from_map(&map)
    }

    #[test]
    fn defaults_trust_no_proxy_and_use_the_own_schema() {
        let settings = parse(&[]).unwrap();
        assert!(settings.trusted_proxies.is_empty());
        assert!(settings.metrics_token.is_none());
        assert_eq!(settings.database_schema, "assistant_runtime");
    }

    #[test]
    fn bad_values_are_named() {
        let error = parse(&[("SERVER__TRUSTED_PROXIES", "10.0.0.0/99")]).unwrap_err();
        assert_eq!(error.key, "SERVER__TRUSTED_PROXIES");
        for interval in ["0", "soon", "-1"] {
            let error =
                parse(&[("METRICS__STORED_SESSIONS_INTERVAL_SECONDS", interval)]).unwrap_err();
            assert_eq!(error.key, "METRICS__STORED_SESSIONS_INTERVAL_SECONDS");
        }
        for schema in ["Public", "1abc", "a-b", "a;drop", &"x".repeat(64)] {
            let error = parse(&[("DATABASE__SCHEMA", schema)]).unwrap_err();
            assert_eq!(error.key, "DATABASE__SCHEMA", "{schema}");
        }
        assert_eq!(
            parse(&[("DATABASE__SCHEMA", "tenant_7")])
                .unwrap()
                .database_schema,
            "tenant_7"
        );
    }
}
