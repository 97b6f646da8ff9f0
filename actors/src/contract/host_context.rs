//! `host_context`: what an application tells the runtime about itself for a
//! turn (host-contract.md). `HostContext::parse` is the only way in from the
//! wire; the stored, canonical form is `to_value` (snake_case). Keys inside
//! view.data, view.state, background, extensions and action parameters are
//! the host's own and are passed through untouched, in the order sent.

use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::attachment::Attachment;
use super::error::ValidationError;
use super::keys::{child_path, index_path, quoted, Fields};
use super::timestamp::is_iso_8601;
use crate::bounded_cache::BoundedCache;

/// At most this many `navigation` targets per context.
pub const MAX_NAVIGATION_TARGETS: usize = 50;
/// At most this many `actions` per context.
pub const MAX_ACTIONS: usize = 32;
/// At most this many attachments per context, and per message.
pub const MAX_ATTACHMENTS: usize = 16;
/// view.data + view.state + extensions, serialised as compact JSON, together.
pub const MAX_CONTEXT_JSON_CHARS: usize = 32_000;
/// The longest `host.name`.
pub const MAX_HOST_NAME_CHARS: usize = 64;
/// The longest `host.version`.
pub const MAX_HOST_VERSION_CHARS: usize = 32;
/// The longest `view.name` and `navigation[].name`.
pub const MAX_VIEW_NAME_CHARS: usize = 128;
/// The longest `navigation[].route`.
pub const MAX_ROUTE_CHARS: usize = 512;

/// A validated host context.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HostContext {
    /// Always `SUPPORTED_VERSION` once parsed.
    #[serde(default = "supported_version")]
    pub version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<HostInfo>,
    /// What is on screen; a service or worker may have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub view: Option<View>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub navigation: Vec<NavigationTarget>,
    /// Host tools for the turns that carry this context; names are unique.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub actions: Vec<HostAction>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<Attachment>,
    /// Host name → `{"state"?: string, "summary"?: any}`, in the order sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub background: Option<Map<String, Value>>,
    /// Shown to the model as given; never interpreted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub captured_at: Option<String>,
    /// Opaque host data, shown to the model as JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extensions: Option<Map<String, Value>>,
}

/// Descriptive metadata about the host; rendered, never trusted.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HostInfo {
    /// 1 to 64 characters, required once parsed; an `Option` only so that
    /// contexts stored before the rule still load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<HostKind>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HostKind {
    Browser,
    Mobile,
    Desktop,
    Terminal,
    Service,
    Other,
}

impl HostKind {
    /// The wire word: `browser`, `mobile`, ...
    pub fn as_str(self) -> &'static str {
        match self {
            HostKind::Browser => "browser",
            HostKind::Mobile => "mobile",
            HostKind::Desktop => "desktop",
            HostKind::Terminal => "terminal",
            HostKind::Service => "service",
            HostKind::Other => "other",
        }
    }
}

/// What is on screen.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct View {
    /// Non-empty; also selects the page's tool scope.
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Curated content, a host-owned JSON object; rendered as key-value pairs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    /// Selection, filters, workflow state; a host-owned JSON object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<Value>,
}

/// A place the host can go.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NavigationTarget {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// A host-side locator (URL, screen id), at most 512 characters; kept
    /// for the host, never rendered for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route: Option<String>,
}

/// An action the host performs when the model calls it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HostAction {
    /// `^[A-Za-z0-9_-]{1,64}$`.
    pub name: String,
    /// Non-empty.
    pub description: String,
    /// A JSON schema of type object that `schema::check_schema` accepts;
    /// host-owned keys. Absent on the wire, it is
    /// `{"type": "object", "properties": {}}`. Shared: every turn's
    /// tool set offers it.
    pub parameters: Arc<Value>,
}

const FIELDS: &[&str] = &[
    "version",
    "host",
    "view",
    "navigation",
    "actions",
    "attachments",
    "background",
    "captured_at",
    "extensions",
];
const ALIASES: &[(&str, &str)] = &[("page", "view")];
const HOST_FIELDS: &[&str] = &["name", "kind", "version"];
const VIEW_FIELDS: &[&str] = &["name", "description", "data", "state"];
const NAVIGATION_FIELDS: &[&str] = &["name", "description", "route"];
const ACTION_FIELDS: &[&str] = &["name", "description", "parameters"];
const BACKGROUND_FIELDS: &[&str] = &["state", "summary"];

const HOST_KINDS: &[(&str, HostKind)] = &[
    ("browser", HostKind::Browser),
    ("mobile", HostKind::Mobile),
    ("desktop", HostKind::Desktop),
    ("terminal", HostKind::Terminal),
    ("service", HostKind::Service),
    ("other", HostKind::Other),
];

impl HostContext {
    pub const SUPPORTED_VERSION: u32 = 1;

    /// Whether `key` names a field of the wire form (either spelling, or an alias).
    pub fn is_field(key: &str) -> bool {
        FIELDS
            .iter()
            .chain(ALIASES.iter().map(|(alias, _)| alias))
            .any(|field| *field == key || crate::contract::keys::is_camel_of(key, field))
    }

    /// Validates the wire form (camelCase or snake_case keys) at `path`
    /// (normally "host_context"). A missing `version` reads as 1: clients
    /// "should send" it, and version 1 is the only one there is.
    ///
    /// A context without attachments is validated once while it stays in
    /// the process's cache of contexts, keyed by its compact JSON (keys in
    /// the order sent): hosts send the same context with message after
    /// message. Attachments (screenshots of megabytes, new each time) are
    /// never cached, nor is a context that is refused.
    pub fn parse(value: &Value, path: &str) -> Result<HostContext, ValidationError> {
        if value
            .get("attachments")
            .is_some_and(|attachments| !attachments.is_null())
        {
            return HostContext::parse_uncached(value, path);
        }
        // Serialising a `Value` cannot fail (its keys are strings); if it
        // ever did, the context is validated uncached.
        let Ok(key) = serde_json::to_string(value) else {
            return HostContext::parse_uncached(value, path);
        };
        // A typed copy of JSON (strings, maps, vectors) holds about three
        // times its text; the cache adds the key's own bytes.
        let weight = 3 * key.len();
        let parsed = context_cache().get_or_make(key, || {
            HostContext::parse_uncached(value, path).map(|context| (context, weight))
        })?;
        Ok(HostContext::clone(&parsed))
    }

    /// The context a body carried as this JSON text, validated as `parse`
    /// does; `None` when it is not valid (the caller then reads the body
    /// with `parse`, which names what is wrong). A context without
    /// attachments is kept in a cache keyed by its exact text: a host sends
    /// the same bytes with message after message, and a hit skips building
    /// the `Value` as well (most of a host action round trip's parsing).
    pub(crate) fn from_text(text: &str) -> Option<HostContext> {
        // Attachments (screenshots of megabytes, new each time) are never
        // kept, so their text is not worth hashing to look it up.
        let cacheable = !text.contains("\"attachments\"");
        if cacheable {
            if let Some(parsed) = text_cache().get(text) {
                return Some(HostContext::clone(&parsed));
            }
        }
        let value: Value = serde_json::from_str(text).ok()?;
        let context = HostContext::parse_uncached(&value, "host_context").ok()?;
        if cacheable && context.attachments.is_empty() {
            let weight = 3 * text.len();
            text_cache().insert(text.to_string(), Arc::new(context.clone()), weight);
        }
        Some(context)
    }

    fn parse_uncached(value: &Value, path: &str) -> Result<HostContext, ValidationError> {
        let fields = Fields::read_with_aliases(value, path, FIELDS, ALIASES)?;
        // Fields with a default but no "none" in the source of truth.
        fields.reject_null(&[
            "version",
            "navigation",
            "actions",
            "attachments",
            "background",
            "extensions",
        ])?;
        let version = parse_version(&fields)?;
        let host = match fields.value("host") {
            Some(host) => Some(parse_host(host, &fields.path("host"))?),
            None => None,
        };
        let view = match fields.value("view") {
            Some(view) => Some(parse_view(view, &fields.path("view"))?),
            None => None,
        };
        let navigation_path = fields.path("navigation");
        let navigation = fields
            .array("navigation", MAX_NAVIGATION_TARGETS)?
            .iter()
            .enumerate()
            .map(|(i, target)| parse_navigation(target, &index_path(&navigation_path, i)))
            .collect::<Result<Vec<_>, _>>()?;
        let actions = parse_actions(&fields)?;
        let attachments_path = fields.path("attachments");
        let attachments = fields
            .array("attachments", MAX_ATTACHMENTS)?
            .iter()
            .enumerate()
            .map(|(i, attachment)| Attachment::parse(attachment, &index_path(&attachments_path, i)))
            .collect::<Result<Vec<_>, _>>()?;
        let background = match fields.object("background")? {
            Some(background) => Some(parse_background(background, &fields.path("background"))?),
            None => None,
        };
        let captured_at = parse_captured_at(&fields)?;
        let extensions = fields.object("extensions")?.cloned();
        let context = HostContext {
            version,
            host,
            view,
            navigation,
            actions,
            attachments,
            background,
            captured_at,
            extensions,
        };
        context.check_json_size(path)?;
        Ok(context)
    }

    /// Canonical snake_case JSON (what is stored); `parse(&ctx.to_value(), ..)`
    /// round-trips to an equal value.
    pub fn to_value(&self) -> Value {
        // Cannot fail: every key is a string and every value plain JSON.
        serde_json::to_value(self).expect("a host context always serialises")
    }

    /// Whether this is `kept` again, its attachments aside, with every
    /// host-owned key in the same order: then a session may go on using
    /// its copy of `kept` (its JSON and block made once) for this one. Hosts
    /// send their context with every message, and it changes far less often.
    /// (`PartialEq` ignores the order of a JSON object's keys, which the
    /// block and the stored JSON keep.)
    pub fn repeats(&self, kept: &HostContext) -> bool {
        let HostContext {
            version,
            host,
            view,
            navigation,
            actions,
            attachments: _,
            background,
            captured_at,
            extensions,
        } = self;
        *version == kept.version
            && *host == kept.host
            && same_option(view.as_ref(), kept.view.as_ref(), same_view)
            && *navigation == kept.navigation
            && actions.len() == kept.actions.len()
            && actions.iter().zip(&kept.actions).all(same_action)
            && same_option(background.as_ref(), kept.background.as_ref(), same_map)
            && *captured_at == kept.captured_at
            && same_option(extensions.as_ref(), kept.extensions.as_ref(), same_map)
    }

    /// The action named `name`, if this context declares one.
    pub fn action(&self, name: &str) -> Option<&HostAction> {
        self.actions.iter().find(|action| action.name == name)
    }

    fn check_json_size(&self, path: &str) -> Result<(), ValidationError> {
        let view = self.view.as_ref();
        let mut counter = CharCounter::default();
        for part in [
            view.and_then(|view| view.data.as_ref()),
            view.and_then(|view| view.state.as_ref()),
        ]
        .into_iter()
        .flatten()
        {
            let _ = serde_json::to_writer(&mut counter, part);
        }
        if let Some(extensions) = &self.extensions {
            let _ = serde_json::to_writer(&mut counter, extensions);
        }
        let n_chars = counter.chars;
        if n_chars > MAX_CONTEXT_JSON_CHARS {
            return Err(ValidationError::new(
                path,
                format!(
                    "view.data, view.state and extensions are {n_chars} characters of JSON together; the limit is {MAX_CONTEXT_JSON_CHARS}"
                ),
            ));
        }
        Ok(())
    }
}

/// Validated contexts kept at most, and their total weight (about four
/// times their JSON bytes).
const MAX_CACHED_CONTEXTS: usize = 1_024;
const MAX_CONTEXT_CACHE_WEIGHT: usize = 32 << 20;

/// The process's validated contexts.
fn context_cache() -> &'static BoundedCache<HostContext> {
    static CACHE: OnceLock<BoundedCache<HostContext>> = OnceLock::new();
    CACHE.get_or_init(|| BoundedCache::new(MAX_CACHED_CONTEXTS, MAX_CONTEXT_CACHE_WEIGHT))
}

/// Validated contexts by the JSON text they came in (`from_text`),
/// bounded as `context_cache`.
fn text_cache() -> &'static BoundedCache<HostContext> {
    static CACHE: OnceLock<BoundedCache<HostContext>> = OnceLock::new();
    CACHE.get_or_init(|| BoundedCache::new(MAX_CACHED_CONTEXTS, MAX_CONTEXT_CACHE_WEIGHT))
}

fn same_option<T>(a: Option<&T>, b: Option<&T>, same: impl Fn(&T, &T) -> bool) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => same(a, b),
        (a, b) => a.is_none() && b.is_none(),
    }
}

fn same_view(a: &View, b: &View) -> bool {
    let View {
        name,
        description,
        data,
        state,
    } = a;
    *name == b.name
        && *description == b.description
        && same_option(data.as_ref(), b.data.as_ref(), same_json)
        && same_option(state.as_ref(), b.state.as_ref(), same_json)
}

fn same_action((a, b): (&HostAction, &HostAction)) -> bool {
    let HostAction {
        name,
        description,
        parameters,
    } = a;
    *name == b.name && *description == b.description && same_json(parameters, &b.parameters)
}

/// JSON equality that also asks for the keys of each object in the same
/// order. Recursion is bounded: a parsed context is at most 64 levels deep.
fn same_json(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => same_map(a, b),
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(a, b)| same_json(a, b))
        }
        (a, b) => a == b,
    }
}

fn same_map(a: &Map<String, Value>, b: &Map<String, Value>) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|((key_a, a), (key_b, b))| key_a == key_b && same_json(a, b))
}

/// Counts the characters of the JSON written into it, without keeping it:
/// the size check measures a context it never copies.
#[derive(Default)]
struct CharCounter {
    chars: usize,
}

impl std::io::Write for CharCounter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        // serde_json writes whole UTF-8 sequences; a character is a byte
        // that does not continue one.
        self.chars += bytes.iter().filter(|&&b| b & 0xC0 != 0x80).count();
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn supported_version() -> u32 {
    HostContext::SUPPORTED_VERSION
}

fn parse_version(fields: &Fields<'_>) -> Result<u32, ValidationError> {
    let Some(version) = fields.value("version") else {
        return Ok(HostContext::SUPPORTED_VERSION);
    };
    let supported = HostContext::SUPPORTED_VERSION;
    match version.as_u64() {
        Some(number) if number == u64::from(supported) => Ok(supported),
        Some(number) => Err(fields.error(
            "version",
            format!("unsupported version {number}; this runtime speaks version {supported}"),
        )),
        None => Err(fields.error(
            "version",
            format!("expected an integer; this runtime speaks version {supported}"),
        )),
    }
}

/// A datetime in the source of truth: an ISO 8601 date or date-time, kept as sent.
fn parse_captured_at(fields: &Fields<'_>) -> Result<Option<String>, ValidationError> {
    let Some(captured_at) = fields.str("captured_at")? else {
        return Ok(None);
    };
    if !is_iso_8601(captured_at) {
        return Err(fields.error(
            "captured_at",
            format!(
                "{} is not an ISO 8601 date or date-time (e.g. 2026-09-05T10:00:00Z)",
                quoted(captured_at)
            ),
        ));
    }
    Ok(Some(captured_at.to_string()))
}

fn parse_host(value: &Value, path: &str) -> Result<HostInfo, ValidationError> {
    let fields = Fields::read(value, path, HOST_FIELDS)?;
    fields.reject_null(&["kind"])?;
    let kind = fields.one_of("kind", HOST_KINDS)?;
    let version = fields.string_max("version", MAX_HOST_VERSION_CHARS)?;
    let name = fields.required_non_empty_str("name")?;
    fields.check_max_chars("name", name, MAX_HOST_NAME_CHARS)?;
    Ok(HostInfo {
        name: Some(name.to_string()),
        kind,
        version,
    })
}

fn parse_view(value: &Value, path: &str) -> Result<View, ValidationError> {
    let fields = Fields::read(value, path, VIEW_FIELDS)?;
    fields.reject_null(&["description", "data", "state"])?;
    let name = fields.required_non_empty_str("name")?;
    fields.check_max_chars("name", name, MAX_VIEW_NAME_CHARS)?;
    Ok(View {
        name: name.to_string(),
        description: fields.string("description")?,
        data: fields.object("data")?.cloned().map(Value::Object),
        state: fields.object("state")?.cloned().map(Value::Object),
    })
}

fn parse_navigation(value: &Value, path: &str) -> Result<NavigationTarget, ValidationError> {
    let fields = Fields::read(value, path, NAVIGATION_FIELDS)?;
    fields.reject_null(&["description"])?;
    let name = fields.required_non_empty_str("name")?;
    fields.check_max_chars("name", name, MAX_VIEW_NAME_CHARS)?;
    Ok(NavigationTarget {
        name: name.to_string(),
        description: fields.string("description")?,
        route: fields.string_max("route", MAX_ROUTE_CHARS)?,
    })
}

fn parse_actions(fields: &Fields<'_>) -> Result<Vec<HostAction>, ValidationError> {
    let actions_path = fields.path("actions");
    let mut actions: Vec<HostAction> = Vec::new();
    for (i, value) in fields.array("actions", MAX_ACTIONS)?.iter().enumerate() {
        let action = parse_action(value, &index_path(&actions_path, i))?;
        if actions.iter().any(|earlier| earlier.name == action.name) {
            return Err(ValidationError::new(
                child_path(&index_path(&actions_path, i), "name"),
                format!("duplicate action name {}", quoted(&action.name)),
            ));
        }
        actions.push(action);
    }
    Ok(actions)
}

fn parse_action(value: &Value, path: &str) -> Result<HostAction, ValidationError> {
    let fields = Fields::read(value, path, ACTION_FIELDS)?;
    fields.reject_null(&["parameters"])?;
    let name = fields.required_str("name")?;
    if !crate::tool_name::is_valid(name) {
        return Err(fields.error(
            "name",
            format!("{} must be {}", quoted(name), crate::tool_name::RULE),
        ));
    }
    let description = fields.required_non_empty_str("description")?;
    let parameters = match fields.value("parameters") {
        Some(parameters) => parameters.clone(),
        None => default_parameters(),
    };
    check_parameters(&parameters).map_err(|message| fields.error("parameters", message))?;
    Ok(HostAction {
        name: name.to_string(),
        description: description.to_string(),
        parameters: Arc::new(parameters),
    })
}

/// The parameters of an action declared without any: no arguments.
fn default_parameters() -> Value {
    serde_json::json!({"type": "object", "properties": {}})
}

/// An action's parameters: a JSON schema object of `"type": "object"` that
/// can be checked safely (`schema::check_schema`: bounded, no `$ref` cycle,
/// linear regexes). The source of truth reads a missing `type` as object; here it
/// must be spelled, because providers reject a tool schema without it and the
/// host's schema is passed to them verbatim.
fn check_parameters(parameters: &Value) -> Result<(), String> {
    let Some(schema) = parameters.as_object() else {
        return Err("expected a JSON schema object".to_string());
    };
    if schema.get("type") != Some(&Value::String("object".to_string())) {
        return Err("must be a JSON schema with \"type\": \"object\"".to_string());
    }
    crate::schema::check_schema(parameters)
        .map_err(|problem| format!("not a usable JSON schema: {problem}"))
}

/// `{name: {"state"?, "summary"?}}`: names are the host's, the inner keys the contract's.
fn parse_background(
    background: &Map<String, Value>,
    path: &str,
) -> Result<Map<String, Value>, ValidationError> {
    let mut parsed = Map::with_capacity(background.len());
    for (name, entry) in background {
        let fields = Fields::read(entry, &child_path(path, name), BACKGROUND_FIELDS)?;
        let mut canonical = Map::new();
        if let Some(state) = fields.str("state")? {
            canonical.insert("state".to_string(), Value::String(state.to_string()));
        }
        if let Some(summary) = fields.value("summary") {
            canonical.insert("summary".to_string(), summary.clone());
        }
        parsed.insert(name.clone(), Value::Object(canonical));
    }
    Ok(parsed)
}

#[cfg(test)]
pub(crate) mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_context_validated_again_is_the_one_validated_first() {
        let mut body = spec_example();
        body["view"]["data"] = json!({"cached": "twice", "n": 2});
        let first = HostContext::parse(&body, "host_context").unwrap();
        let again = HostContext::parse(&body, "host_context").unwrap();
        let uncached = HostContext::parse_uncached(&body, "host_context").unwrap();
        assert_eq!(again, uncached);
        assert_eq!(first, uncached);
        assert!(again.repeats(&uncached), "the same keys in the same order");
    }

    #[test]
    fn a_refused_context_is_refused_again_at_its_own_path() {
        let mut body = spec_example();
        body["view"]["name"] = json!("");
        for path in ["host_context", "[0].host_context"] {
            let error = HostContext::parse(&body, path).unwrap_err();
            assert_eq!(error.path, format!("{path}.view.name"));
        }
    }

    #[test]
    fn a_context_with_attachments_is_validated_each_time() {
        let mut body = spec_example();
        body["attachments"] = json!([{"kind": "text", "text": "notes"}]);
        let context = HostContext::parse(&body, "host_context").unwrap();
        assert_eq!(context.attachments.len(), 1);
        body["attachments"] = json!([{"kind": "text", "text": 3}]);
        assert!(HostContext::parse(&body, "host_context").is_err());
    }

    #[test]
    fn a_context_repeats_another_only_with_the_same_keys_in_the_same_order() {
        let kept = HostContext::parse(&spec_example(), "host_context").unwrap();
        let same = HostContext::parse(&spec_example(), "host_context").unwrap();
        assert!(same.repeats(&kept));

        let mut with_attachment = spec_example();
        with_attachment["attachments"] = json!([{"kind": "text", "text": "notes"}]);
        let with_attachment = HostContext::parse(&with_attachment, "host_context").unwrap();
        assert!(
            with_attachment.repeats(&kept),
            "attachments are the message's"
        );

        let mut reordered = spec_example();
        reordered["view"]["data"] = json!({"b": 2, "a": 1});
        let mut in_order = spec_example();
        in_order["view"]["data"] = json!({"a": 1, "b": 2});
        let reordered = HostContext::parse(&reordered, "host_context").unwrap();
        let in_order = HostContext::parse(&in_order, "host_context").unwrap();
        assert_eq!(reordered, in_order, "PartialEq ignores the order");
        assert!(
            !reordered.repeats(&in_order),
            "the block and the JSON keep it"
        );

        let mut changed = spec_example();
        changed["view"]["state"]["filters"]["label"] = json!("feature");
        let changed = HostContext::parse(&changed, "host_context").unwrap();
        assert!(!changed.repeats(&kept));
        let mut fewer_actions = spec_example();
        fewer_actions["actions"] = json!([]);
        let fewer_actions = HostContext::parse(&fewer_actions, "host_context").unwrap();
        assert!(!fewer_actions.repeats(&kept));
    }

    /// The example context of host-contract.md, shared with the rendering tests.
    pub(crate) fn spec_example() -> Value {
        json!({
            "version": 1,
            "host": {"name": "web-dashboard", "kind": "browser", "version": "2.1"},
            "view": {
                "name": "tasks",
                "description": "The issue list, filtered to open bugs.",
                "data": {"issues": [{"number": 42, "title": "Fix login"}]},
                "state": {"filters": {"label": "bug"}}
            },
            "navigation": [{"name": "agents", "description": "Running agents"}],
            "actions": [{
                "name": "select_issue",
                "description": "Select an issue in the list.",
                "parameters": {"type": "object", "properties": {"number": {"type": "integer"}}, "required": ["number"]}
            }],
            "attachments": [{"kind": "image", "purpose": "screenshot", "data_uri": "data:image/png;base64,AAAA"}],
            "background": {"agents": {"state": "idle", "summary": {"count": 3}}},
            "captured_at": "2026-09-05T10:00:00Z",
            "extensions": {"tenant": "acme"}
        })
    }

    #[test]
    fn the_spec_example_is_its_own_canonical_form() {
        let context = HostContext::parse(&spec_example(), "host_context").unwrap();
        assert_eq!(context.to_value(), spec_example());
    }

    #[test]
    fn to_value_parses_back_to_an_equal_context() {
        let context = HostContext::parse(&spec_example(), "host_context").unwrap();
        assert_eq!(
            HostContext::parse(&context.to_value(), "host_context").unwrap(),
            context
        );
        let stored: HostContext = serde_json::from_value(context.to_value()).unwrap();
        assert_eq!(stored, context);
    }

    #[test]
    fn camel_case_contract_keys_are_normalised_and_page_means_view() {
        let wire = json!({"capturedAt": "2026-09-05T10:00:00Z", "page": {"name": "scene"}});
        let context = HostContext::parse(&wire, "host_context").unwrap();
        assert_eq!(
            context.to_value(),
            json!({"version": 1, "view": {"name": "scene"}, "captured_at": "2026-09-05T10:00:00Z"})
        );
    }

    #[test]
    fn host_owned_keys_keep_their_spelling_and_order() {
        let wire = json!({
            "view": {"name": "v", "data": {"someKey": 1, "another_key": 2, "aKey": 3}, "state": {"zKey": {"innerKey": true}}},
            "extensions": {"tenantId": "acme", "a_b": 1},
            "background": {"agentsPanel": {"state": "idle", "summary": {"runCount": 3}}},
            "actions": [{"name": "a", "description": "d", "parameters": {"type": "object", "properties": {"camelArg": {"type": "string"}}}}]
        });
        let stored = HostContext::parse(&wire, "host_context")
            .unwrap()
            .to_value();
        assert_eq!(
            serde_json::to_string(&stored["view"]["data"]).unwrap(),
            r#"{"someKey":1,"another_key":2,"aKey":3}"#
        );
        assert_eq!(stored["view"]["state"], wire["view"]["state"]);
        assert_eq!(
            serde_json::to_string(&stored["extensions"]).unwrap(),
            r#"{"tenantId":"acme","a_b":1}"#
        );
        assert_eq!(stored["background"], wire["background"]);
        assert_eq!(
            stored["actions"][0]["parameters"],
            wire["actions"][0]["parameters"]
        );
    }

    #[test]
    fn missing_version_reads_as_version_one() {
        let context = HostContext::parse(&json!({}), "host_context").unwrap();
        assert_eq!(context.version, 1);
    }

    #[test]
    fn another_version_names_the_supported_one() {
        let err = HostContext::parse(&json!({"version": 2}), "host_context").unwrap_err();
        assert_eq!(
            err.to_string(),
            "host_context.version: unsupported version 2; this runtime speaks version 1"
        );
    }

    #[test]
    fn context_json_of_exactly_the_limit_is_accepted() {
        // {"k":"…"} is 8 characters around the string.
        let filler = "x".repeat(MAX_CONTEXT_JSON_CHARS - 8);
        let wire = json!({"extensions": {"k": filler}});
        assert!(HostContext::parse(&wire, "host_context").is_ok());
        let filler = "x".repeat(MAX_CONTEXT_JSON_CHARS - 7);
        let wire = json!({"extensions": {"k": filler}});
        assert!(HostContext::parse(&wire, "host_context").is_err());
    }

    #[test]
    fn every_length_limit_of_the_source_of_truth_is_inclusive() {
        // Characters, not bytes: a multibyte name of exactly the limit passes.
        let wire = json!({
            "host": {"name": "é".repeat(MAX_HOST_NAME_CHARS), "version": "v".repeat(MAX_HOST_VERSION_CHARS)},
            "view": {"name": "v".repeat(MAX_VIEW_NAME_CHARS)},
            "navigation": [{"name": "n".repeat(MAX_VIEW_NAME_CHARS), "route": "/".repeat(MAX_ROUTE_CHARS)}],
            "attachments": [{
                "url": format!("https://x.test/{}", "a".repeat(2048 - 15)),
                "name": "n".repeat(128),
                "description": "d".repeat(512),
                "media_type": "m".repeat(64)
            }]
        });
        let context = HostContext::parse(&wire, "host_context").unwrap();
        assert_eq!(
            context.to_value()["navigation"][0]["route"],
            wire["navigation"][0]["route"]
        );
    }

    #[test]
    fn an_action_without_parameters_takes_no_arguments() {
        let wire = json!({"actions": [{"name": "refresh", "description": "Reload the list."}]});
        let context = HostContext::parse(&wire, "host_context").unwrap();
        assert_eq!(
            context.actions[0].parameters,
            Arc::new(json!({"type": "object", "properties": {}}))
        );
    }

    #[test]
    fn optional_strings_of_the_source_of_truth_accept_null() {
        let wire = json!({
            "host": {"name": "cli", "version": null},
            "navigation": [{"name": "home", "route": null}],
            "captured_at": null,
            "attachments": [{"url": "https://x.test/a.png", "name": null, "description": null, "media_type": null}]
        });
        assert!(HostContext::parse(&wire, "host_context").is_ok());
    }

    #[test]
    fn a_context_without_view_is_fine() {
        let wire = json!({"version": 1, "host": {"name": "worker", "kind": "service"}, "extensions": {"a": 1}});
        let context = HostContext::parse(&wire, "host_context").unwrap();
        assert!(context.view.is_none());
        assert_eq!(context.host.unwrap().kind, Some(HostKind::Service));
    }
}
