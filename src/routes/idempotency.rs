//! The `Idempotency-Key` request header of `POST /api/chat` (the IETF
//! httpapi draft): read here, and turned into the digests the session keeps
//! on the message (`IdempotencyMark`). SHA-256, a fixed hash: the digests
//! are stored, and must read the same in every process and every release.

use actix_web::http::header::HeaderName;
use actix_web::HttpRequest;
use actors::contract::ValidationError;
use actors::conversation::IdempotencyMark;
use sha2::{Digest, Sha256};

pub const HEADER: &str = "Idempotency-Key";
/// The same name, made once: looked up by a `&str`, a header name not among
/// the standard ones is parsed and copied into a new allocation on every
/// request, though almost none carries it.
const HEADER_NAME: HeaderName = HeaderName::from_static("idempotency-key");
/// The longest key taken (the draft leaves it to the server; a UUID is 36).
const MAX_KEY_CHARS: usize = 255;

/// The request's key, if it sends one: the draft's sf-string
/// (`"8e03978e-…"`), or the same text unquoted, as many clients send it.
pub fn key(http: &HttpRequest) -> Result<Option<String>, ValidationError> {
    let mut values = http.headers().get_all(&HEADER_NAME);
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(invalid("is sent more than once; send one key"));
    }
    let text = value
        .to_str()
        .map_err(|_| invalid("must be printable ASCII"))?
        .trim();
    let key = match text.strip_prefix('"') {
        Some(quoted) => unquote(quoted)?,
        None => text.to_string(),
    };
    if key.is_empty() || key.len() > MAX_KEY_CHARS {
        return Err(invalid(&format!(
            "must have 1 to {MAX_KEY_CHARS} characters"
        )));
    }
    if !key.bytes().all(|byte| (0x20..0x7f).contains(&byte)) {
        return Err(invalid("must be printable ASCII"));
    }
    Ok(Some(key))
}

/// The inside of an sf-string after its opening quote: `\"` and `\\` are
/// the only escapes, and the closing quote ends the value.
fn unquote(quoted: &str) -> Result<String, ValidationError> {
    let mut key = String::with_capacity(quoted.len());
    let mut chars = quoted.chars();
    while let Some(char) = chars.next() {
        match char {
            '"' if chars.as_str().is_empty() => return Ok(key),
            '"' => return Err(invalid("has text after its closing quote")),
            '\\' => match chars.next() {
                Some(escaped @ ('"' | '\\')) => key.push(escaped),
                _ => return Err(invalid("has an escape other than \\\" or \\\\")),
            },
            other => key.push(other),
        }
    }
    Err(invalid("has no closing quote"))
}

fn invalid(why: &str) -> ValidationError {
    ValidationError {
        path: HEADER.into(),
        message: format!("the {HEADER} header {why}"),
    }
}

/// The mark of a request sent with `key` by `principal`: the key scoped to the
/// principal (another caller's same key is another key), and the request as
/// sent (query string and body bytes), so a resend must repeat it exactly.
pub fn mark(principal: &str, key: &str, query: &str, body: &[u8]) -> IdempotencyMark {
    IdempotencyMark {
        key: digest(&[principal.as_bytes(), key.as_bytes()]),
        body: digest(&[query.as_bytes(), body]),
    }
}

/// SHA-256 of the parts, each preceded by its length so no two splits of
/// the same bytes collide, in lowercase hex.
fn digest(parts: &[&[u8]]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update((part.len() as u64).to_le_bytes());
        hasher.update(part);
    }
    hasher
        .finalize()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(values: &[&str]) -> HttpRequest {
        let mut test = actix_web::test::TestRequest::default();
        for value in values {
            test = test.append_header((HEADER, *value));
        }
        test.to_http_request()
    }

    #[test]
    fn the_name_looked_up_is_the_header_named() {
        assert_eq!(HeaderName::try_from(HEADER).unwrap(), HEADER_NAME);
    }

    #[test]
    fn a_key_is_an_sf_string_or_its_bare_text() {
        assert_eq!(key(&request(&[])).unwrap(), None);
        assert_eq!(key(&request(&["\"a-1\""])).unwrap().as_deref(), Some("a-1"));
        assert_eq!(key(&request(&["a-1"])).unwrap().as_deref(), Some("a-1"));
        assert_eq!(
            key(&request(&[r#""say \"hi\"""#])).unwrap().as_deref(),
            Some("say \"hi\"")
        );
    }

    #[test]
    fn a_malformed_key_names_the_header() {
        let long = "k".repeat(MAX_KEY_CHARS + 1);
        for values in [
            vec!["\"\""],
            vec!["\"open"],
            vec!["\"a\"b"],
            vec![long.as_str()],
            vec!["a", "b"],
        ] {
            let error = key(&request(&values)).expect_err("refused");
            assert_eq!(error.path, HEADER, "{values:?}");
        }
    }

    #[test]
    fn the_key_is_scoped_to_the_principal_and_the_body_to_its_bytes() {
        let first = mark("alice", "k", "", b"{}");
        assert_eq!(first, mark("alice", "k", "", b"{}"));
        assert_ne!(first.key, mark("bob", "k", "", b"{}").key);
        assert_ne!(first.body, mark("alice", "k", "", b"{ }").body);
        assert_ne!(first.body, mark("alice", "k", "session_id=s", b"{}").body);
        // Fixed across processes and releases: the digests are stored.
        assert_eq!(
            first.key,
            "cf318f046bf872be331a7d8e6601bdf4d09f6f89043114582076e898873c16c5"
        );
        assert_eq!(
            first.body,
            "d34d0feea31457a5633bae0a62fbf315182980f49571ed760d41eb1bdb95df87"
        );
    }
}
