//! The `ACCESS__*` settings as typed values: who a caller is (`ACCESS__MODE`)
//! and which browser origins may call (`ACCESS__CORS_*`). Parsed once at
//! startup; a bad value names its setting and stops startup.

use std::collections::BTreeMap;
use std::path::PathBuf;

use regex::Regex;
use secrecy::SecretString;

use crate::settings_error::SettingsError;

/// The default `ACCESS__CORS_ORIGIN_REGEX`: pages served from this machine.
pub const DEFAULT_ORIGIN_REGEX: &str = r"^https?://(localhost|127\.0\.0\.1|\[::1\])(:[0-9]{1,5})?$";
pub const DEFAULT_PRINCIPAL_HEADER: &str = "X-Assistant-Principal";
pub const DEFAULT_ROLES_HEADER: &str = "X-Assistant-Roles";
pub const DEFAULT_ROLES_CLAIM: &str = "roles";

/// How the runtime learns who the caller is. The token and the JWT secret
/// are `SecretString`s: `Debug` of the settings prints `[REDACTED]`.
#[derive(Clone, Debug)]
pub enum AccessMode {
    /// Every caller is the local operator, an admin. With a token, it must
    /// come as `Authorization: Bearer` (HTTP, AG-UI) or `auth.token` (socket).
    TrustedLocal { token: Option<SecretString> },
    /// A reverse proxy authenticated the caller and names it in a header.
    Header {
        principal_header: String,
        roles_header: String,
    },
    /// A bearer JWT verified here, with no network call.
    Jwt(JwtSettings),
    /// A Rust host's own `authenticate` hook decides (`embed::AssistantDefinition`).
    Host,
}

#[derive(Clone, Debug)]
pub struct JwtSettings {
    pub keys: JwtKeys,
    pub issuer: Option<String>,
    pub audience: Option<String>,
    /// The claim holding the roles (a list of strings, or one string of
    /// comma- or space-separated roles).
    pub roles_claim: String,
}

#[derive(Clone, Debug)]
pub enum JwtKeys {
    /// `ACCESS__JWT_SECRET`: HS256.
    Secret(SecretString),
    /// `ACCESS__JWT_PUBLIC_KEYS_PATH`: a JWKS file (RS256, ES256, EdDSA).
    Jwks(PathBuf),
}

/// Which browser origins may call, from `ACCESS__CORS_ORIGINS` and
/// `ACCESS__CORS_ORIGIN_REGEX`.
#[derive(Clone, Debug, PartialEq)]
pub struct CorsSettings {
    /// `*` was listed: any origin, without credentials.
    pub any_origin: bool,
    /// Exact origins (`scheme://host[:port]`).
    pub origins: Vec<String>,
    /// Also allowed: origins matching this (checked to compile); `None` when
    /// the setting is present and empty.
    pub origin_regex: Option<String>,
}

#[derive(Clone, Debug)]
pub struct AccessSettings {
    pub mode: AccessMode,
    /// Whether `ACCESS__MODE` was set, rather than `mode` being the default:
    /// an embedding host's `authenticate` hook gives way only to a mode the
    /// operator chose.
    pub mode_chosen: bool,
    pub cors: CorsSettings,
}

fn bad(key: &str, message: impl Into<String>) -> SettingsError {
    SettingsError {
        key: key.to_string(),
        message: message.into(),
    }
}

impl AccessSettings {
    pub fn from_map(values: &BTreeMap<String, String>) -> Result<AccessSettings, SettingsError> {
        let get = |key: &str| {
            values
                .get(key)
                .map(|value| value.trim())
                .filter(|value| !value.is_empty())
                .map(str::to_string)
        };
        let mode = match get("ACCESS__MODE").as_deref() {
            None | Some("trusted_local") => AccessMode::TrustedLocal {
                token: get("ACCESS__LOCAL_TOKEN").map(SecretString::from),
            },
            Some("header") => AccessMode::Header {
                principal_header: header_name(
                    "ACCESS__PRINCIPAL_HEADER",
                    get("ACCESS__PRINCIPAL_HEADER"),
                    DEFAULT_PRINCIPAL_HEADER,
                )?,
                roles_header: header_name(
                    "ACCESS__ROLES_HEADER",
                    get("ACCESS__ROLES_HEADER"),
                    DEFAULT_ROLES_HEADER,
                )?,
            },
            Some("jwt") => AccessMode::Jwt(JwtSettings {
                keys: match (
                    get("ACCESS__JWT_SECRET"),
                    get("ACCESS__JWT_PUBLIC_KEYS_PATH"),
                ) {
                    (Some(secret), None) => JwtKeys::Secret(secret.into()),
                    (None, Some(path)) => JwtKeys::Jwks(PathBuf::from(path)),
                    (Some(_), Some(_)) => {
                        return Err(bad(
                            "ACCESS__JWT_SECRET",
                            "set ACCESS__JWT_SECRET or ACCESS__JWT_PUBLIC_KEYS_PATH, not both",
                        ))
                    }
                    (None, None) => {
                        return Err(bad(
                            "ACCESS__MODE",
                            "jwt needs ACCESS__JWT_SECRET (HS256) or ACCESS__JWT_PUBLIC_KEYS_PATH (a JWKS file)",
                        ))
                    }
                },
                issuer: get("ACCESS__JWT_ISSUER"),
                audience: get("ACCESS__JWT_AUDIENCE"),
                roles_claim: get("ACCESS__JWT_ROLES_CLAIM")
                    .unwrap_or_else(|| DEFAULT_ROLES_CLAIM.to_string()),
            }),
            Some("host") => AccessMode::Host,
            Some(other) => {
                return Err(bad(
                    "ACCESS__MODE",
                    format!("unknown mode {other:?}; use trusted_local, header, jwt or host"),
                ))
            }
        };
        Ok(AccessSettings {
            mode,
            mode_chosen: get("ACCESS__MODE").is_some(),
            cors: cors_settings(values)?,
        })
    }
}

fn header_name(key: &str, value: Option<String>, default: &str) -> Result<String, SettingsError> {
    let name = value.unwrap_or_else(|| default.to_string());
    actix_web::http::header::HeaderName::from_bytes(name.as_bytes())
        .map_err(|_| bad(key, format!("{name:?} is not a valid header name")))?;
    Ok(name)
}

fn cors_settings(values: &BTreeMap<String, String>) -> Result<CorsSettings, SettingsError> {
    let key = "ACCESS__CORS_ORIGINS";
    let mut any_origin = false;
    let mut origins = Vec::new();
    for origin in values
        .get(key)
        .map(String::as_str)
        .unwrap_or("")
        .split(',')
        .map(str::trim)
        .filter(|origin| !origin.is_empty())
    {
        if origin == "*" {
            any_origin = true;
            continue;
        }
        check_origin(origin).map_err(|why| bad(key, format!("{origin:?}: {why}")))?;
        origins.push(origin.to_string());
    }
    let regex_key = "ACCESS__CORS_ORIGIN_REGEX";
    let origin_regex = match values.get(regex_key).map(|value| value.trim()) {
        None => Some(DEFAULT_ORIGIN_REGEX.to_string()),
        Some("") => None,
        Some(pattern) => {
            Regex::new(pattern)
                .map_err(|error| bad(regex_key, format!("invalid regex: {error}")))?;
            Some(pattern.to_string())
        }
    };
    Ok(CorsSettings {
        any_origin,
        origins,
        origin_regex,
    })
}

/// An origin is exactly what a browser sends: `scheme://host[:port]`, no path.
fn check_origin(origin: &str) -> Result<(), &'static str> {
    let Some((scheme, rest)) = origin.split_once("://") else {
        return Err("an origin needs a scheme, e.g. http://localhost:8080");
    };
    if scheme.is_empty()
        || !scheme
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+')
    {
        return Err("the scheme is not valid");
    }
    if rest.is_empty() || rest.contains('/') {
        return Err("an origin is scheme://host[:port], without a path or trailing slash");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(pairs: &[(&str, &str)]) -> Result<AccessSettings, SettingsError> {
        let map = pairs
            .iter()
            .map(|(key, value)| (key.to_string(), value.to_string()))
            .collect();
        AccessSettings::from_map(&map)
    }

    #[test]
    fn default_is_trusted_local_with_loopback_origins() {
        let access = parse(&[]).expect("defaults parse");
        assert!(matches!(
            access.mode,
            AccessMode::TrustedLocal { token: None }
        ));
        assert_eq!(
            access.cors.origin_regex.as_deref(),
            Some(DEFAULT_ORIGIN_REGEX)
        );
        assert!(!access.cors.any_origin);
    }

    #[test]
    fn an_origin_without_a_scheme_or_a_bad_regex_is_named() {
        let error = parse(&[("ACCESS__CORS_ORIGINS", "localhost:8080")]).unwrap_err();
        assert_eq!(error.key, "ACCESS__CORS_ORIGINS");
        assert!(error.message.contains("scheme"), "{error}");
        let error = parse(&[("ACCESS__CORS_ORIGINS", "https://a.example/")]).unwrap_err();
        assert_eq!(error.key, "ACCESS__CORS_ORIGINS");
        let error = parse(&[("ACCESS__CORS_ORIGIN_REGEX", "(")]).unwrap_err();
        assert_eq!(error.key, "ACCESS__CORS_ORIGIN_REGEX");
    }

    #[test]
    fn a_star_means_any_origin_and_an_empty_regex_none() {
        let access = parse(&[
            ("ACCESS__CORS_ORIGINS", "*, https://app.example"),
            ("ACCESS__CORS_ORIGIN_REGEX", ""),
        ])
        .expect("parses");
        assert!(access.cors.any_origin);
        assert_eq!(access.cors.origins, vec!["https://app.example".to_string()]);
        assert_eq!(access.cors.origin_regex, None);
    }

    #[test]
    fn modes_are_named_and_jwt_needs_a_key() {
        assert!(matches!(
            parse(&[("ACCESS__MODE", "header")]).map(|access| access.mode),
            Ok(AccessMode::Header { .. })
        ));
        assert_eq!(
            parse(&[("ACCESS__MODE", "jwt")]).unwrap_err().key,
            "ACCESS__MODE"
        );
        assert_eq!(
            parse(&[("ACCESS__MODE", "oauth")]).unwrap_err().key,
            "ACCESS__MODE"
        );
        assert!(matches!(
            parse(&[("ACCESS__MODE", "jwt"), ("ACCESS__JWT_SECRET", "s")]).map(|a| a.mode),
            Ok(AccessMode::Jwt(_))
        ));
    }
}
