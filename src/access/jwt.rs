//! `ACCESS__MODE=jwt`: verifies a bearer JWT locally (no network call) with
//! `jsonwebtoken`: an HS256 secret or the public keys of a JWKS file
//! (RS256, ES256, EdDSA); `exp`, `nbf`, and the configured issuer and
//! audience are checked. The principal is `sub`; roles come from a claim.

use std::collections::HashSet;

use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{decode, decode_header, Algorithm, DecodingKey, Validation};
use secrecy::ExposeSecret;
use serde_json::Value;

use super::identity::ADMIN_ROLE;
use crate::access_settings::{JwtKeys, JwtSettings};
use actors::session::Caller;

/// Clock skew tolerated on `exp` and `nbf`, in seconds.
const LEEWAY_SECS: u64 = 30;

pub struct JwtVerifier {
    keys: Keys,
    issuer: Option<String>,
    audience: Option<String>,
    roles_claim: String,
}

enum Keys {
    Secret(DecodingKey),
    /// Keys of the JWKS file with their `kid` and the algorithm their type allows.
    Jwks(Vec<(Option<String>, Algorithm, DecodingKey)>),
}

impl JwtVerifier {
    /// Reads the keys; a JWKS file that cannot be read or used stops startup.
    pub fn new(settings: &JwtSettings) -> Result<JwtVerifier, String> {
        let keys = match &settings.keys {
            JwtKeys::Secret(secret) => {
                Keys::Secret(DecodingKey::from_secret(secret.expose_secret().as_bytes()))
            }
            JwtKeys::Jwks(path) => {
                let text = std::fs::read_to_string(path).map_err(|error| {
                    format!(
                        "setting ACCESS__JWT_PUBLIC_KEYS_PATH: cannot read {}: {error}",
                        path.display()
                    )
                })?;
                let set: JwkSet = serde_json::from_str(&text).map_err(|error| {
                    format!("setting ACCESS__JWT_PUBLIC_KEYS_PATH: not a JWKS file: {error}")
                })?;
                let mut keys = Vec::new();
                for jwk in &set.keys {
                    let key = DecodingKey::from_jwk(jwk).map_err(|error| {
                        format!("setting ACCESS__JWT_PUBLIC_KEYS_PATH: unusable key: {error}")
                    })?;
                    let algorithm = match &jwk.algorithm {
                        jsonwebtoken::jwk::AlgorithmParameters::RSA(_) => Algorithm::RS256,
                        jsonwebtoken::jwk::AlgorithmParameters::EllipticCurve(_) => {
                            Algorithm::ES256
                        }
                        jsonwebtoken::jwk::AlgorithmParameters::OctetKeyPair(_) => {
                            Algorithm::EdDSA
                        }
                        jsonwebtoken::jwk::AlgorithmParameters::OctetKey(_) => {
                            return Err("setting ACCESS__JWT_PUBLIC_KEYS_PATH: symmetric keys do not belong in a public key file; use ACCESS__JWT_SECRET".into())
                        }
                    };
                    keys.push((jwk.common.key_id.clone(), algorithm, key));
                }
                if keys.is_empty() {
                    return Err("setting ACCESS__JWT_PUBLIC_KEYS_PATH: the JWKS has no keys".into());
                }
                Keys::Jwks(keys)
            }
        };
        Ok(JwtVerifier {
            keys,
            issuer: settings.issuer.clone(),
            audience: settings.audience.clone(),
            roles_claim: settings.roles_claim.clone(),
        })
    }

    /// The caller a token names, or why it is refused.
    pub fn verify(&self, token: &str) -> Result<Caller, String> {
        let header = decode_header(token).map_err(|error| format!("malformed token: {error}"))?;
        let (algorithm, key) = match &self.keys {
            Keys::Secret(key) => (Algorithm::HS256, key),
            Keys::Jwks(keys) => keys
                .iter()
                .find(|(kid, algorithm, _)| {
                    *algorithm == header.alg
                        && (header.kid.is_none() || kid.is_none() || *kid == header.kid)
                })
                .map(|(_, algorithm, key)| (*algorithm, key))
                .ok_or_else(|| {
                    format!("no key for kid {:?} and alg {:?}", header.kid, header.alg)
                })?,
        };
        let mut validation = Validation::new(algorithm);
        validation.leeway = LEEWAY_SECS;
        validation.validate_nbf = true;
        validation.required_spec_claims = HashSet::from(["exp".to_string(), "sub".to_string()]);
        // A configured issuer or audience is also a required claim:
        // jsonwebtoken checks `iss` and `aud` only when they parse, so a
        // token without them, or with a number or an object there, would
        // otherwise pass (GHSA-h395-gr6q-cpjc). A required claim that does
        // not parse counts as missing. `nbf` that does not parse is refused
        // by jsonwebtoken itself since 10.3 (`validate_nbf`).
        if let Some(issuer) = &self.issuer {
            validation.set_issuer(&[issuer]);
            validation.required_spec_claims.insert("iss".to_string());
        }
        match &self.audience {
            Some(audience) => {
                validation.set_audience(&[audience]);
                validation.required_spec_claims.insert("aud".to_string());
            }
            None => validation.validate_aud = false,
        }
        let data = decode::<Value>(token, key, &validation)
            .map_err(|error| format!("token refused: {error}"))?;
        let claims = data.claims;
        let principal = claims
            .get("sub")
            .and_then(Value::as_str)
            .filter(|sub| !sub.is_empty())
            .ok_or("the token has no sub")?;
        let admin = roles(claims.get(&self.roles_claim)).any(|role| role == ADMIN_ROLE);
        Ok(Caller::new(principal, admin))
    }
}

/// The roles of a claim: a list of strings, or one string of roles
/// separated by commas or spaces.
fn roles(claim: Option<&Value>) -> Box<dyn Iterator<Item = &str> + '_> {
    match claim {
        Some(Value::Array(items)) => Box::new(items.iter().filter_map(Value::as_str)),
        Some(Value::String(text)) => Box::new(
            text.split([',', ' '])
                .map(str::trim)
                .filter(|role| !role.is_empty()),
        ),
        _ => Box::new(std::iter::empty()),
    }
}
