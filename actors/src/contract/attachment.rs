//! Attachments: content a host sends with a message or inside its
//! host_context (host-contract.md, "Attachments"). Parsed once at the door into
//! `Attachment`; the turn decides where each one goes (native content for
//! references, `look_at_screen` for screenshots).

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::error::ValidationError;
use super::keys::Fields;

/// The most characters a `data_uri` or `text` may carry.
pub const MAX_ATTACHMENT_CONTENT_CHARS: usize = 12_000_000;
/// The longest `name`.
pub const MAX_ATTACHMENT_NAME_CHARS: usize = 128;
/// The longest `description`.
pub const MAX_ATTACHMENT_DESCRIPTION_CHARS: usize = 512;
/// The longest `media_type`.
pub const MAX_MEDIA_TYPE_CHARS: usize = 64;
/// The longest `url`.
pub const MAX_URL_CHARS: usize = 2048;

/// One attachment in its canonical (stored) form.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Attachment {
    #[serde(default)]
    pub kind: AttachmentKind,
    #[serde(default)]
    pub purpose: AttachmentPurpose,
    /// The content; serialised as the one wire field it came from.
    #[serde(flatten)]
    pub source: AttachmentSource,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttachmentKind {
    #[default]
    Image,
    Document,
    Text,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttachmentPurpose {
    /// Goes into the model's message as native content, and is stored with it.
    #[default]
    Reference,
    /// An inline image the model sees only through `look_at_screen`; not stored.
    Screenshot,
}

/// Exactly one of the three content fields. A data URI or text may hold up
/// to `MAX_ATTACHMENT_CONTENT_CHARS`, so it is shared (`Arc<str>`): the
/// request's list, its host_context and the session's screenshot hold one
/// copy between them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttachmentSource {
    /// `data:<media type>[;base64],<data>`.
    DataUri(Arc<str>),
    /// `http://` or `https://`.
    Url(String),
    Text(Arc<str>),
}

const FIELDS: &[&str] = &[
    "kind",
    "purpose",
    "data_uri",
    "url",
    "text",
    "name",
    "description",
    "media_type",
];

const KINDS: &[(&str, AttachmentKind)] = &[
    ("image", AttachmentKind::Image),
    ("document", AttachmentKind::Document),
    ("text", AttachmentKind::Text),
];

const PURPOSES: &[(&str, AttachmentPurpose)] = &[
    ("reference", AttachmentPurpose::Reference),
    ("screenshot", AttachmentPurpose::Screenshot),
];

impl Attachment {
    /// Validates one wire attachment at `path` (e.g. `attachments[0]`).
    pub fn parse(value: &Value, path: &str) -> Result<Attachment, ValidationError> {
        let fields = Fields::read(value, path, FIELDS)?;
        fields.reject_null(&["kind", "purpose"])?;
        let kind = fields.one_of("kind", KINDS)?.unwrap_or_default();
        let purpose = fields.one_of("purpose", PURPOSES)?.unwrap_or_default();
        let source = parse_source(&fields)?;
        check_kind_matches_source(&fields, kind, &source)?;
        let attachment = Attachment {
            kind,
            purpose,
            source,
            name: fields.string_max("name", MAX_ATTACHMENT_NAME_CHARS)?,
            description: fields.string_max("description", MAX_ATTACHMENT_DESCRIPTION_CHARS)?,
            media_type: fields.string_max("media_type", MAX_MEDIA_TYPE_CHARS)?,
        };
        if attachment.purpose == AttachmentPurpose::Screenshot && !attachment.is_image_data() {
            return Err(fields.error(
                "purpose",
                "a screenshot needs kind image and a data_uri of an image (data:image/...)",
            ));
        }
        Ok(attachment)
    }

    /// A legacy `images[i]` or `screenshot` value, checked at `path`.
    pub(crate) fn parse_legacy_screenshot(
        value: &Value,
        path: &str,
    ) -> Result<Attachment, ValidationError> {
        let Some(data_uri) = value.as_str() else {
            return Err(ValidationError::new(path, "expected a string"));
        };
        if !data_uri.starts_with("data:image/") || !data_uri.contains(',') {
            return Err(ValidationError::new(
                path,
                "expected an image data URI (data:image/...,...)",
            ));
        }
        check_content_chars(data_uri, path)?;
        Ok(Attachment::screenshot(data_uri.into()))
    }

    /// A screenshot attachment of an image data URI, unchecked.
    pub fn screenshot(data_uri: Arc<str>) -> Attachment {
        Attachment {
            kind: AttachmentKind::Image,
            purpose: AttachmentPurpose::Screenshot,
            source: AttachmentSource::DataUri(data_uri),
            name: None,
            description: None,
            media_type: None,
        }
    }

    /// Canonical snake_case JSON, present fields only.
    pub fn to_value(&self) -> Value {
        // Cannot fail: every key is a string and every value plain JSON.
        serde_json::to_value(self).expect("an attachment always serialises")
    }

    fn is_image_data(&self) -> bool {
        let AttachmentSource::DataUri(data_uri) = &self.source else {
            return false;
        };
        self.kind == AttachmentKind::Image && data_uri.starts_with("data:image/")
    }
}

/// The one content field, checked for shape and size.
fn parse_source(fields: &Fields<'_>) -> Result<AttachmentSource, ValidationError> {
    let data_uri = fields.str("data_uri")?;
    let url = fields.str("url")?;
    let text = fields.str("text")?;
    let n_given = [data_uri.is_some(), url.is_some(), text.is_some()]
        .iter()
        .filter(|given| **given)
        .count();
    if n_given != 1 {
        return Err(ValidationError::new(
            fields.own_path(),
            format!("needs exactly one of data_uri, url or text, got {n_given}"),
        ));
    }
    if let Some(data_uri) = data_uri {
        if !data_uri.starts_with("data:") || !data_uri.contains(',') {
            return Err(fields.error("data_uri", "expected a data URI (data:<media type>,<data>)"));
        }
        check_content_chars(data_uri, &fields.path("data_uri"))?;
        return Ok(AttachmentSource::DataUri(data_uri.into()));
    }
    if let Some(url) = url {
        fields.check_max_chars("url", url, MAX_URL_CHARS)?;
        if !url.starts_with("http://") && !url.starts_with("https://") {
            return Err(fields.error("url", "expected an http:// or https:// URL"));
        }
        return Ok(AttachmentSource::Url(url.to_string()));
    }
    let text = text.unwrap_or_default();
    check_content_chars(text, &fields.path("text"))?;
    Ok(AttachmentSource::Text(text.into()))
}

/// `text` content goes with kind `text` and kind `text` with `text` content,
/// both ways: a text attachment has no URL or data URI to fetch, and text
/// under kind `image` (the default) or `document` is not what it claims.
fn check_kind_matches_source(
    fields: &Fields<'_>,
    kind: AttachmentKind,
    source: &AttachmentSource,
) -> Result<(), ValidationError> {
    match (kind, source) {
        (AttachmentKind::Text, AttachmentSource::Text(_)) => Ok(()),
        (AttachmentKind::Text, _) => Err(fields.error(
            "kind",
            "kind 'text' needs its content in 'text', not in 'url' or 'data_uri'",
        )),
        (_, AttachmentSource::Text(_)) => Err(fields.error(
            "text",
            "text content needs kind 'text' (the default kind is 'image')",
        )),
        _ => Ok(()),
    }
}

fn check_content_chars(content: &str, path: &str) -> Result<(), ValidationError> {
    // Byte length bounds the character count, so most content skips the count.
    if content.len() > MAX_ATTACHMENT_CONTENT_CHARS
        && content.chars().count() > MAX_ATTACHMENT_CONTENT_CHARS
    {
        return Err(ValidationError::new(
            path,
            format!("at most {MAX_ATTACHMENT_CONTENT_CHARS} characters are allowed"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn kind_and_purpose_default_to_image_reference() {
        let attachment = Attachment::parse(&json!({"url": "https://x.test/a.png"}), "a").unwrap();
        assert_eq!(attachment.kind, AttachmentKind::Image);
        assert_eq!(attachment.purpose, AttachmentPurpose::Reference);
        assert_eq!(
            attachment.source,
            AttachmentSource::Url("https://x.test/a.png".into())
        );
    }

    #[test]
    fn camel_case_media_type_and_data_uri_are_normalised() {
        let wire = json!({"kind": "document", "dataUri": "data:application/pdf;base64,AA", "mediaType": "application/pdf"});
        let attachment = Attachment::parse(&wire, "a").unwrap();
        assert_eq!(
            attachment.to_value(),
            json!({"kind": "document", "purpose": "reference", "data_uri": "data:application/pdf;base64,AA", "media_type": "application/pdf"})
        );
    }

    #[test]
    fn to_value_emits_contract_order_and_present_fields_only() {
        let wire =
            json!({"description": "the receipt", "name": "photo", "text": "hello", "kind": "text"});
        let attachment = Attachment::parse(&wire, "a").unwrap();
        let keys: Vec<String> = attachment
            .to_value()
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        assert_eq!(keys, ["kind", "purpose", "text", "name", "description"]);
    }

    #[test]
    fn to_value_parses_back_to_an_equal_attachment() {
        let attachment = Attachment::screenshot("data:image/png;base64,AAAA".into());
        assert_eq!(
            Attachment::parse(&attachment.to_value(), "a").unwrap(),
            attachment
        );
        let stored: Attachment = serde_json::from_value(attachment.to_value()).unwrap();
        assert_eq!(stored, attachment);
    }

    #[test]
    fn text_of_exactly_the_limit_is_accepted() {
        let text = "x".repeat(MAX_ATTACHMENT_CONTENT_CHARS);
        assert!(Attachment::parse(&json!({"kind": "text", "text": text}), "a").is_ok());
    }

    #[test]
    fn legacy_screenshot_must_be_an_image_data_uri() {
        assert!(Attachment::parse_legacy_screenshot(
            &json!("data:image/png;base64,AA"),
            "images[0]"
        )
        .is_ok());
        let err = Attachment::parse_legacy_screenshot(&json!("https://x.test/a.png"), "images[0]")
            .unwrap_err();
        assert_eq!(err.path, "images[0]");
    }
}
