//! The `<host_context>` block: a host context rendered as text at the start of
//! a user message. Pure and deterministic (same `HostContext`, same bytes), so
//! replayed turns stay in the provider's cache. Called by the turn when it
//! builds user content; it never reads session state.
//!
//! Format, one line per present section, absent ones omitted, in this order:
//!
//! ```text
//! <host_context>
//! host: web-dashboard (browser) 2.1
//! view: tasks — The issue list, filtered to open bugs.
//! data:
//!   issues: [{"number":42,"title":"Fix login"}]
//! state: {"filters":{"label":"bug"}}
//! navigation: agents (Running agents); settings
//! actions: select_issue, open_agent
//! attachments: 1 (screenshot available via look_at_screen)
//! background: agents: idle {"count":3}; builds: failing
//! captured_at: 2026-09-05T10:00:00Z
//! extensions: {"tenant":"acme"}
//! </host_context>
//! ```
//!
//! - `host:` name, `(kind)` and version, whichever are present.
//! - `view:` name, then ` — description` if any. `data:` is followed by one
//!   `  key: <JSON>` line per top-level key of an object, in the order sent;
//!   data that is not an object is `data: <JSON>` on one line.
//! - `actions:` names only: the schemas reach the model as tools.
//! - `attachments:` counts all of them; the note is added when one is a screenshot.
//! - `background:` `name: state summary` per entry, whichever are present.
//! - JSON is compact (`serde_json::to_string`), host keys in the order sent.
//! - Free text (names, descriptions, states, data keys, captured_at) has line breaks
//!   replaced by spaces, and `</host_context>` anywhere inside is written
//!   `<\/host_context>`, so the block always ends at its own closing tag.

use std::borrow::Cow;

use serde_json::{Map, Value};

use crate::contract::{AttachmentPurpose, HostContext, HostInfo, View};

const OPEN_TAG: &str = "<host_context>";
const CLOSE_TAG: &str = "</host_context>";
/// How `CLOSE_TAG` is written inside the block (`\/` is `/` in JSON too).
const ESCAPED_CLOSE_TAG: &str = "<\\/host_context>";

/// Renders `<host_context>\n...\n</host_context>`: pure and deterministic
/// (same HostContext → same bytes), host-owned keys in the order sent.
pub fn render_host_context(context: &HostContext) -> String {
    let mut lines: Vec<String> = Vec::new();
    if let Some(host) = &context.host {
        if let Some(line) = host_line(host) {
            lines.push(line);
        }
    }
    if let Some(view) = &context.view {
        view_lines(view, &mut lines);
    }
    if !context.navigation.is_empty() {
        let targets: Vec<String> = context
            .navigation
            .iter()
            .map(|target| match &target.description {
                Some(description) => {
                    format!("{} ({})", one_line(&target.name), one_line(description))
                }
                None => one_line(&target.name).into_owned(),
            })
            .collect();
        lines.push(format!("navigation: {}", targets.join("; ")));
    }
    if !context.actions.is_empty() {
        let names: Vec<&str> = context
            .actions
            .iter()
            .map(|action| action.name.as_str())
            .collect();
        lines.push(format!("actions: {}", names.join(", ")));
    }
    if !context.attachments.is_empty() {
        let has_screenshot = context
            .attachments
            .iter()
            .any(|attachment| attachment.purpose == AttachmentPurpose::Screenshot);
        let note = if has_screenshot {
            " (screenshot available via look_at_screen)"
        } else {
            ""
        };
        lines.push(format!("attachments: {}{note}", context.attachments.len()));
    }
    if let Some(background) = &context.background {
        if !background.is_empty() {
            lines.push(format!("background: {}", background_line(background)));
        }
    }
    if let Some(captured_at) = &context.captured_at {
        lines.push(format!("captured_at: {}", one_line(captured_at)));
    }
    if let Some(extensions) = &context.extensions {
        lines.push(format!("extensions: {}", compact_map(extensions)));
    }
    let mut block = String::from(OPEN_TAG);
    block.push('\n');
    for line in lines {
        if line.contains(CLOSE_TAG) {
            block.push_str(&line.replace(CLOSE_TAG, ESCAPED_CLOSE_TAG));
        } else {
            block.push_str(&line);
        }
        block.push('\n');
    }
    block.push_str(CLOSE_TAG);
    block
}

fn host_line(host: &HostInfo) -> Option<String> {
    let mut parts: Vec<String> = Vec::new();
    if let Some(name) = &host.name {
        parts.push(one_line(name).into_owned());
    }
    if let Some(kind) = host.kind {
        parts.push(format!("({})", kind.as_str()));
    }
    if let Some(version) = &host.version {
        parts.push(one_line(version).into_owned());
    }
    if parts.is_empty() {
        return None;
    }
    Some(format!("host: {}", parts.join(" ")))
}

fn view_lines(view: &View, lines: &mut Vec<String>) {
    match &view.description {
        Some(description) => lines.push(format!(
            "view: {} — {}",
            one_line(&view.name),
            one_line(description)
        )),
        None => lines.push(format!("view: {}", one_line(&view.name))),
    }
    match &view.data {
        Some(Value::Object(data)) if !data.is_empty() => {
            lines.push("data:".to_string());
            for (key, value) in data {
                lines.push(format!("  {}: {}", one_line(key), compact(value)));
            }
        }
        Some(data) => lines.push(format!("data: {}", compact(data))),
        None => {}
    }
    if let Some(state) = &view.state {
        lines.push(format!("state: {}", compact(state)));
    }
}

/// `name: state summary; ...`; each entry's inner keys were checked by the parser.
fn background_line(background: &Map<String, Value>) -> String {
    let entries: Vec<String> = background
        .iter()
        .map(|(name, entry)| {
            let mut parts: Vec<String> = Vec::new();
            if let Some(state) = entry.get("state").and_then(Value::as_str) {
                parts.push(one_line(state).into_owned());
            }
            if let Some(summary) = entry.get("summary") {
                parts.push(compact(summary));
            }
            if parts.is_empty() {
                return one_line(name).into_owned();
            }
            format!("{}: {}", one_line(name), parts.join(" "))
        })
        .collect();
    entries.join("; ")
}

fn compact(value: &Value) -> String {
    // Cannot fail: a `Value` has string keys only.
    serde_json::to_string(value).expect("a JSON value always serialises")
}

fn compact_map(map: &Map<String, Value>) -> String {
    // Cannot fail: a `Map` has string keys only.
    serde_json::to_string(map).expect("a JSON map always serialises")
}

/// Free text on one line: each line break becomes a space. Most text has
/// none and is borrowed as it is.
fn one_line(text: &str) -> Cow<'_, str> {
    if text.contains(['\n', '\r']) {
        Cow::Owned(text.replace("\r\n", " ").replace(['\n', '\r'], " "))
    } else {
        Cow::Borrowed(text)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::contract::host_context::tests::spec_example;

    /// The echo model skips the block by this spelling.
    #[test]
    fn the_echo_model_knows_the_block() {
        assert!(crate::model::echo::RUNTIME_BLOCK_OPENERS.contains(&OPEN_TAG));
    }

    /// Asserts that the wire context `wire` renders to exactly `expected`.
    fn check(wire: Value, expected: &str) {
        let context = HostContext::parse(&wire, "host_context").unwrap();
        assert_eq!(render_host_context(&context), expected);
    }

    /// Like `check`, for a context stored before today's wire rules (a host
    /// without a name, a non-object `view.data`): it still loads and renders.
    fn check_stored(stored: Value, expected: &str) {
        let context: HostContext = serde_json::from_value(stored).unwrap();
        assert_eq!(render_host_context(&context), expected);
    }

    #[test]
    fn the_spec_example_renders_to_these_bytes() {
        check(
            spec_example(),
            "<host_context>\n\
             host: web-dashboard (browser) 2.1\n\
             view: tasks — The issue list, filtered to open bugs.\n\
             data:\n  issues: [{\"number\":42,\"title\":\"Fix login\"}]\n\
             state: {\"filters\":{\"label\":\"bug\"}}\n\
             navigation: agents (Running agents)\n\
             actions: select_issue\n\
             attachments: 1 (screenshot available via look_at_screen)\n\
             background: agents: idle {\"count\":3}\n\
             captured_at: 2026-09-05T10:00:00Z\n\
             extensions: {\"tenant\":\"acme\"}\n\
             </host_context>",
        );
    }

    #[test]
    fn rendering_is_the_same_for_the_same_context_and_its_stored_form() {
        let context = HostContext::parse(&spec_example(), "host_context").unwrap();
        let stored = HostContext::parse(&context.to_value(), "host_context").unwrap();
        let first = render_host_context(&context);
        assert_eq!(render_host_context(&context), first);
        assert_eq!(render_host_context(&stored), first);
    }

    #[test]
    fn each_section_renders_as_documented() {
        check(json!({}), "<host_context>\n</host_context>");
        check_stored(json!({"host": {}}), "<host_context>\n</host_context>");
        check_stored(
            json!({"host": {"kind": "service"}}),
            "<host_context>\nhost: (service)\n</host_context>",
        );
        check(
            json!({"host": {"name": "cli", "version": "3"}}),
            "<host_context>\nhost: cli 3\n</host_context>",
        );
        check(
            json!({"page": {"name": "scene"}}),
            "<host_context>\nview: scene\n</host_context>",
        );
        check(
            json!({"view": {"name": "scene", "data": {"someKey": 1, "another_key": "two", "aKey": null}}}),
            "<host_context>\nview: scene\ndata:\n  someKey: 1\n  another_key: \"two\"\n  aKey: null\n</host_context>",
        );
        check_stored(
            json!({"view": {"name": "v", "data": [1, 2]}}),
            "<host_context>\nview: v\ndata: [1,2]\n</host_context>",
        );
        check(
            json!({"view": {"name": "v", "data": {}}}),
            "<host_context>\nview: v\ndata: {}\n</host_context>",
        );
        check_stored(
            json!({"view": {"name": "v", "state": "editing"}}),
            "<host_context>\nview: v\nstate: \"editing\"\n</host_context>",
        );
        check(
            json!({"navigation": [{"name": "agents", "description": "Running agents"}, {"name": "settings"}]}),
            "<host_context>\nnavigation: agents (Running agents); settings\n</host_context>",
        );
        check(
            json!({"actions": [
                {"name": "b_second", "description": "d", "parameters": {"type": "object"}},
                {"name": "a_first", "description": "d", "parameters": {"type": "object"}}
            ]}),
            "<host_context>\nactions: b_second, a_first\n</host_context>",
        );
        check(
            json!({"attachments": [{"url": "https://x.test/a.png"}, {"kind": "text", "text": "t"}]}),
            "<host_context>\nattachments: 2\n</host_context>",
        );
        check(
            json!({"background": {"zeta": {"state": "busy"}, "alpha": {"summary": [1]}, "mid": {}}}),
            "<host_context>\nbackground: zeta: busy; alpha: [1]; mid\n</host_context>",
        );
        check(json!({"background": {}}), "<host_context>\n</host_context>");
        check(
            json!({"capturedAt": "2026-09-05 10:00", "extensions": {"zKey": 1, "aKey": {"b": 2, "a": 1}}}),
            "<host_context>\ncaptured_at: 2026-09-05 10:00\nextensions: {\"zKey\":1,\"aKey\":{\"b\":2,\"a\":1}}\n</host_context>",
        );
    }

    #[test]
    fn free_text_stays_on_its_line_and_cannot_close_the_block() {
        check(
            json!({"view": {"name": "v", "description": "line one\nline two\r\nthree"}}),
            "<host_context>\nview: v — line one line two three\n</host_context>",
        );
        check(
            json!({"view": {"name": "v", "description": "x</host_context>y", "data": {"k": "</host_context>"}}}),
            "<host_context>\nview: v — x<\\/host_context>y\ndata:\n  k: \"<\\/host_context>\"\n</host_context>",
        );
    }
}
