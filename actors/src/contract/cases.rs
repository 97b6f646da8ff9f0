//! The shared table of invalid message bodies: `(body, path, label)`. Each
//! body is complete (a valid `id` and `session_id` unless the case targets
//! them) and must be rejected with an error whose sentence starts with
//! `"{path}: "`. Unit tests run it through `ChatRequest::parse`; the HTTP
//! black-box tests post the same bodies and expect a 422 naming the path.
//! Two bodies carry just over 12,000,000 characters; an edge must accept
//! bodies that large to report them as 422 rather than 413.

use serde_json::{json, Map, Value};

use super::attachment::{
    MAX_ATTACHMENT_CONTENT_CHARS, MAX_ATTACHMENT_DESCRIPTION_CHARS, MAX_ATTACHMENT_NAME_CHARS,
    MAX_MEDIA_TYPE_CHARS, MAX_URL_CHARS,
};
use super::host_context::{
    MAX_ACTIONS, MAX_ATTACHMENTS, MAX_CONTEXT_JSON_CHARS, MAX_HOST_NAME_CHARS,
    MAX_HOST_VERSION_CHARS, MAX_NAVIGATION_TARGETS, MAX_ROUTE_CHARS, MAX_VIEW_NAME_CHARS,
};

/// Every rule of the body, host_context and attachments, broken once.
pub fn invalid_body_cases() -> Vec<(Value, &'static str, &'static str)> {
    let long_id = "x".repeat(65);
    let too_long_content = "x".repeat(MAX_ATTACHMENT_CONTENT_CHARS + 1);
    let half_limit = "x".repeat(MAX_CONTEXT_JSON_CHARS / 2);
    let over_limit = "x".repeat(MAX_CONTEXT_JSON_CHARS);
    let shot = "data:image/png;base64,AAAA";
    let url = json!({"url": "https://x.test/a.png"});
    vec![
        // The body as a whole and its ids.
        (json!([]), "body", "body_is_an_array"),
        (json!("hello"), "body", "body_is_a_string"),
        (json!({"session_id": "s-table"}), "id", "id_missing"),
        (json!({"id": "", "session_id": "s-table"}), "id", "id_empty"),
        (
            json!({"id": long_id, "session_id": "s-table"}),
            "id",
            "id_too_long",
        ),
        (
            json!({"id": 42, "session_id": "s-table"}),
            "id",
            "id_not_a_string",
        ),
        (
            json!({"id": null, "session_id": "s-table"}),
            "id",
            "id_null",
        ),
        (json!({"id": "m-table"}), "session_id", "session_id_missing"),
        (
            json!({"id": "m-table", "session_id": ""}),
            "session_id",
            "session_id_empty",
        ),
        (
            json!({"id": "m-table", "session_id": long_id}),
            "session_id",
            "session_id_too_long",
        ),
        (
            json!({"id": "m-table", "session_id": 7}),
            "session_id",
            "session_id_not_a_string",
        ),
        (
            json!({"id": "m-table", "sessionId": "s-table", "session_id": "s-table"}),
            "session_id",
            "session_id_given_as_both_spellings",
        ),
        (
            body(json!({"colour": "red"})),
            "colour",
            "unknown_top_level_field",
        ),
        (
            body(json!({"Session_Id": "x"})),
            "Session_Id",
            "top_level_key_in_another_case",
        ),
        (
            body(json!({"content": 5})),
            "content",
            "content_not_a_string",
        ),
        (
            body(json!({"parent_id": ""})),
            "parent_id",
            "parent_id_empty",
        ),
        (
            body(json!({"parentId": long_id})),
            "parent_id",
            "parent_id_too_long",
        ),
        (
            body(json!({"parent_id": ["m"]})),
            "parent_id",
            "parent_id_not_a_string",
        ),
        (
            body(json!({"message_type": "urgent"})),
            "message_type",
            "message_type_unknown",
        ),
        (
            body(json!({"messageType": 1})),
            "message_type",
            "message_type_not_a_string",
        ),
        (
            body(json!({"output_mode": "voice"})),
            "output_mode",
            "output_mode_unknown",
        ),
        (
            body(json!({"outputMode": "text", "output_mode": "text"})),
            "output_mode",
            "output_mode_given_as_both_spellings",
        ),
        // Continuations.
        (
            body(json!({"tool_result": {"ok": true}})),
            "tool_result",
            "tool_result_without_tool_call_id",
        ),
        (
            body(json!({"toolResult": null})),
            "tool_result",
            "null_tool_result_without_tool_call_id",
        ),
        (
            body(json!({"tool_outcome": "failed"})),
            "tool_outcome",
            "tool_outcome_without_tool_call_id",
        ),
        (
            body(json!({"tool_call_id": "c1", "tool_result": 1, "tool_outcome": "maybe"})),
            "tool_outcome",
            "tool_outcome_unknown",
        ),
        (
            body(json!({"tool_call_id": ""})),
            "tool_call_id",
            "tool_call_id_empty",
        ),
        (
            body(json!({"toolCallId": long_id})),
            "tool_call_id",
            "tool_call_id_too_long",
        ),
        (
            body(json!({"tool_call_id": 3})),
            "tool_call_id",
            "tool_call_id_not_a_string",
        ),
        // Config.
        (
            body(json!({"config": []})),
            "config",
            "config_not_an_object",
        ),
        (
            body(json!({"config": {"model": "builtin:echo"}})),
            "config.model",
            "config_unknown_field",
        ),
        (
            body(json!({"config": {"default_model": "gpt-4o"}})),
            "config.default_model",
            "default_model_without_provider",
        ),
        (
            body(json!({"config": {"defaultModel": ":echo"}})),
            "config.default_model",
            "default_model_empty_provider",
        ),
        (
            body(json!({"config": {"default_model": 4}})),
            "config.default_model",
            "default_model_not_a_string",
        ),
        (
            body(json!({"config": {"thinking_budget": -1}})),
            "config.thinking_budget",
            "thinking_budget_negative",
        ),
        (
            body(json!({"config": {"thinkingBudget": 1.5}})),
            "config.thinking_budget",
            "thinking_budget_fractional",
        ),
        (
            body(json!({"config": {"thinking_budget": "1000"}})),
            "config.thinking_budget",
            "thinking_budget_a_string",
        ),
        (
            body(json!({"config": {"thinking_budget": 5_000_000_000u64}})),
            "config.thinking_budget",
            "thinking_budget_beyond_u32",
        ),
        (
            body(json!({"config": {"temperature": 2.5}})),
            "config.temperature",
            "temperature_above_two",
        ),
        (
            body(json!({"config": {"temperature": -0.1}})),
            "config.temperature",
            "temperature_negative",
        ),
        (
            body(json!({"config": {"temperature": "hot"}})),
            "config.temperature",
            "temperature_a_string",
        ),
        (
            body(json!({"config": {"max_turns": 0}})),
            "config.max_turns",
            "max_turns_zero",
        ),
        (
            body(json!({"config": {"maxTurns": 101}})),
            "config.max_turns",
            "max_turns_above_100",
        ),
        (
            body(json!({"config": {"max_turns": 2.5}})),
            "config.max_turns",
            "max_turns_fractional",
        ),
        (
            body(json!({"config": {"maxTurns": 3, "max_turns": 3}})),
            "config.max_turns",
            "max_turns_given_as_both_spellings",
        ),
        // Message-level attachments and the legacy fields.
        (
            body(json!({"attachments": {}})),
            "attachments",
            "attachments_not_an_array",
        ),
        (
            body(json!({"attachments": vec![url.clone(); MAX_ATTACHMENTS + 1]})),
            "attachments",
            "seventeen_attachments",
        ),
        (
            body(json!({"attachments": ["x"]})),
            "attachments[0]",
            "attachment_not_an_object",
        ),
        (
            body(json!({"attachments": [{"url": "https://x.test/a", "size": 3}]})),
            "attachments[0].size",
            "attachment_unknown_field",
        ),
        (
            body(json!({"attachments": [{"kind": "image"}]})),
            "attachments[0]",
            "attachment_without_content",
        ),
        (
            body(json!({"attachments": [{"data_uri": shot, "url": "https://x.test/a"}]})),
            "attachments[0]",
            "attachment_with_data_uri_and_url",
        ),
        (
            body(
                json!({"attachments": [{"data_uri": shot, "url": "https://x.test/a", "text": "t"}]}),
            ),
            "attachments[0]",
            "attachment_with_all_three_contents",
        ),
        (
            body(json!({"attachments": [{"dataUri": shot, "data_uri": shot}]})),
            "attachments[0].data_uri",
            "attachment_data_uri_given_as_both_spellings",
        ),
        (
            body(json!({"attachments": [{"data_uri": "image/png;base64,AAAA"}]})),
            "attachments[0].data_uri",
            "attachment_data_uri_without_scheme",
        ),
        (
            body(json!({"attachments": [{"data_uri": "data:image/png;base64"}]})),
            "attachments[0].data_uri",
            "attachment_data_uri_without_comma",
        ),
        (
            body(json!({"attachments": [url.clone(), {"url": "ftp://x.test/a"}]})),
            "attachments[1].url",
            "attachment_url_not_http",
        ),
        (
            body(json!({"attachments": [{"url": 5}]})),
            "attachments[0].url",
            "attachment_url_not_a_string",
        ),
        (
            body(json!({"attachments": [{"kind": "video", "url": "https://x.test/a"}]})),
            "attachments[0].kind",
            "attachment_kind_unknown",
        ),
        (
            body(json!({"attachments": [{"purpose": "decoration", "url": "https://x.test/a"}]})),
            "attachments[0].purpose",
            "attachment_purpose_unknown",
        ),
        (
            body(
                json!({"attachments": [{"purpose": "screenshot", "url": "https://x.test/a.png"}]}),
            ),
            "attachments[0].purpose",
            "screenshot_from_a_url",
        ),
        (
            body(
                json!({"attachments": [{"purpose": "screenshot", "data_uri": "data:application/pdf;base64,AA"}]}),
            ),
            "attachments[0].purpose",
            "screenshot_of_a_pdf",
        ),
        (
            body(
                json!({"attachments": [{"purpose": "screenshot", "kind": "document", "data_uri": shot}]}),
            ),
            "attachments[0].purpose",
            "screenshot_of_kind_document",
        ),
        (
            body(json!({"attachments": [{"url": "https://x.test/a", "name": 1}]})),
            "attachments[0].name",
            "attachment_name_not_a_string",
        ),
        (
            body(json!({"attachments": [{"url": "https://x.test/a", "mediaType": ["image/png"]}]})),
            "attachments[0].media_type",
            "attachment_media_type_not_a_string",
        ),
        (
            body(
                json!({"attachments": [{"data_uri": format!("data:,{}", &too_long_content[6..])}]}),
            ),
            "attachments[0].data_uri",
            "attachment_data_uri_over_twelve_million_characters",
        ),
        (
            body(json!({"attachments": [{"kind": "text", "text": too_long_content}]})),
            "attachments[0].text",
            "attachment_text_over_twelve_million_characters",
        ),
        (
            body(json!({"images": "data:image/png;base64,AA"})),
            "images",
            "images_not_an_array",
        ),
        (
            body(json!({"images": [1]})),
            "images[0]",
            "image_not_a_string",
        ),
        (
            body(json!({"images": [shot, "https://x.test/a.png"]})),
            "images[1]",
            "image_not_a_data_uri",
        ),
        (
            body(json!({"images": ["data:application/pdf;base64,AA"]})),
            "images[0]",
            "image_data_uri_not_an_image",
        ),
        (
            body(json!({"images": vec![shot; MAX_ATTACHMENTS + 1]})),
            "images",
            "seventeen_images",
        ),
        (
            body(json!({"screenshot": 5})),
            "screenshot",
            "screenshot_not_a_string",
        ),
        (
            body(json!({"screenshot": "AAAA"})),
            "screenshot",
            "screenshot_not_a_data_uri",
        ),
        // host_context as a whole.
        (
            body(json!({"host_context": "tasks"})),
            "host_context",
            "host_context_not_an_object",
        ),
        (
            body(json!({"hostContext": {}, "host_context": {}})),
            "host_context",
            "host_context_given_as_both_spellings",
        ),
        (
            ctx(json!({"version": 2})),
            "host_context.version",
            "version_two",
        ),
        (
            ctx(json!({"version": 0})),
            "host_context.version",
            "version_zero",
        ),
        (
            ctx(json!({"version": "1"})),
            "host_context.version",
            "version_a_string",
        ),
        (
            ctx(json!({"version": 1.5})),
            "host_context.version",
            "version_fractional",
        ),
        (
            ctx(json!({"colour": "red"})),
            "host_context.colour",
            "host_context_unknown_field",
        ),
        (
            ctx(json!({"Version": 1})),
            "host_context.Version",
            "host_context_key_in_another_case",
        ),
        // host.
        (
            ctx(json!({"host": "web"})),
            "host_context.host",
            "host_not_an_object",
        ),
        (
            ctx(json!({"host": {"os": "linux"}})),
            "host_context.host.os",
            "host_unknown_field",
        ),
        (
            ctx(json!({"host": {"kind": "watch"}})),
            "host_context.host.kind",
            "host_kind_unknown",
        ),
        (
            ctx(json!({"host": {"kind": "Browser"}})),
            "host_context.host.kind",
            "host_kind_capitalised",
        ),
        (
            ctx(json!({"host": {"name": 1}})),
            "host_context.host.name",
            "host_name_not_a_string",
        ),
        (
            ctx(json!({"host": {"version": 2.1}})),
            "host_context.host.version",
            "host_version_not_a_string",
        ),
        // view.
        (
            ctx(json!({"view": {"name": "a"}, "page": {"name": "b"}})),
            "host_context.view",
            "view_and_page_both_given",
        ),
        (
            ctx(json!({"view": []})),
            "host_context.view",
            "view_not_an_object",
        ),
        (
            ctx(json!({"view": {"name": "v", "colour": "red"}})),
            "host_context.view.colour",
            "view_unknown_field",
        ),
        (
            ctx(json!({"page": {"name": "v", "colour": "red"}})),
            "host_context.view.colour",
            "page_unknown_field",
        ),
        (
            ctx(json!({"view": {"description": "d"}})),
            "host_context.view.name",
            "view_name_missing",
        ),
        (
            ctx(json!({"view": {"name": ""}})),
            "host_context.view.name",
            "view_name_empty",
        ),
        (
            ctx(json!({"view": {"name": 3}})),
            "host_context.view.name",
            "view_name_not_a_string",
        ),
        (
            ctx(json!({"view": {"name": "v", "description": {}}})),
            "host_context.view.description",
            "view_description_not_a_string",
        ),
        // navigation.
        (
            ctx(json!({"navigation": {"name": "a"}})),
            "host_context.navigation",
            "navigation_not_an_array",
        ),
        (
            ctx(json!({"navigation": vec![json!({"name": "a"}); MAX_NAVIGATION_TARGETS + 1]})),
            "host_context.navigation",
            "fifty_one_navigation_targets",
        ),
        (
            ctx(json!({"navigation": [{"description": "d"}]})),
            "host_context.navigation[0].name",
            "navigation_target_without_name",
        ),
        (
            ctx(json!({"navigation": [{"name": "a"}, {"name": "b", "url": "/b"}]})),
            "host_context.navigation[1].url",
            "navigation_target_unknown_field",
        ),
        (
            ctx(json!({"navigation": [{"name": "a", "description": 1}]})),
            "host_context.navigation[0].description",
            "navigation_description_not_a_string",
        ),
        // actions.
        (
            ctx(json!({"actions": action("a")})),
            "host_context.actions",
            "actions_not_an_array",
        ),
        (
            ctx(
                json!({"actions": (0..=MAX_ACTIONS).map(|i| action(&format!("a{i}"))).collect::<Vec<_>>()}),
            ),
            "host_context.actions",
            "thirty_three_actions",
        ),
        (
            ctx(json!({"actions": [action("select issue")]})),
            "host_context.actions[0].name",
            "action_name_with_a_space",
        ),
        (
            ctx(json!({"actions": [action("ns.select")]})),
            "host_context.actions[0].name",
            "action_name_with_a_dot",
        ),
        (
            ctx(json!({"actions": [action(&"a".repeat(65))]})),
            "host_context.actions[0].name",
            "action_name_too_long",
        ),
        (
            ctx(json!({"actions": [action("")]})),
            "host_context.actions[0].name",
            "action_name_empty",
        ),
        (
            ctx(json!({"actions": [{"description": "d", "parameters": {"type": "object"}}]})),
            "host_context.actions[0].name",
            "action_name_missing",
        ),
        (
            ctx(json!({"actions": [action("select"), action("select")]})),
            "host_context.actions[1].name",
            "action_name_duplicated",
        ),
        (
            ctx(json!({"actions": [{"name": "a", "parameters": {"type": "object"}}]})),
            "host_context.actions[0].description",
            "action_description_missing",
        ),
        (
            ctx(
                json!({"actions": [{"name": "a", "description": "", "parameters": {"type": "object"}}]}),
            ),
            "host_context.actions[0].description",
            "action_description_empty",
        ),
        (
            ctx(json!({"actions": [{"name": "a", "description": "d", "parameters": null}]})),
            "host_context.actions[0].parameters",
            "action_parameters_null",
        ),
        (
            ctx(json!({"actions": [{"name": "a", "description": "d", "parameters": "object"}]})),
            "host_context.actions[0].parameters",
            "action_parameters_not_an_object",
        ),
        (
            ctx(
                json!({"actions": [action("a"), {"name": "b", "description": "d", "parameters": {"type": "array"}}]}),
            ),
            "host_context.actions[1].parameters",
            "action_parameters_of_type_array",
        ),
        (
            ctx(
                json!({"actions": [{"name": "a", "description": "d", "parameters": {"properties": {}}}]}),
            ),
            "host_context.actions[0].parameters",
            "action_parameters_without_type",
        ),
        (
            ctx(
                json!({"actions": [{"name": "a", "description": "d", "parameters": {"type": "object", "required": "x"}}]}),
            ),
            "host_context.actions[0].parameters",
            "action_parameters_not_a_valid_schema",
        ),
        (
            ctx(
                json!({"actions": [{"name": "a", "description": "d", "parameters": {"type": "object"}, "handler": "x"}]}),
            ),
            "host_context.actions[0].handler",
            "action_unknown_field",
        ),
        // attachments inside the context.
        (
            ctx(json!({"attachments": vec![url.clone(); MAX_ATTACHMENTS + 1]})),
            "host_context.attachments",
            "seventeen_context_attachments",
        ),
        (
            ctx(json!({"attachments": [{"url": "https://x.test/a", "text": "t"}]})),
            "host_context.attachments[0]",
            "context_attachment_with_two_contents",
        ),
        (
            ctx(
                json!({"attachments": [url.clone(), {"url": "https://x.test/a", "mediaTypes": "x"}]}),
            ),
            "host_context.attachments[1].mediaTypes",
            "context_attachment_unknown_field",
        ),
        // background, captured_at, extensions.
        (
            ctx(json!({"background": ["agents"]})),
            "host_context.background",
            "background_not_an_object",
        ),
        (
            ctx(json!({"background": {"agents": "idle"}})),
            "host_context.background.agents",
            "background_entry_not_an_object",
        ),
        (
            ctx(json!({"background": {"agents": {"status": "idle"}}})),
            "host_context.background.agents.status",
            "background_entry_unknown_field",
        ),
        (
            ctx(json!({"background": {"agents": {"state": 3}}})),
            "host_context.background.agents.state",
            "background_state_not_a_string",
        ),
        (
            ctx(json!({"captured_at": 1_700_000_000})),
            "host_context.captured_at",
            "captured_at_not_a_string",
        ),
        (
            ctx(json!({"capturedAt": "t", "captured_at": "t"})),
            "host_context.captured_at",
            "captured_at_given_as_both_spellings",
        ),
        (
            ctx(json!({"extensions": "acme"})),
            "host_context.extensions",
            "extensions_not_an_object",
        ),
        // The 32,000-character budget of view.data + view.state + extensions.
        (
            ctx(json!({"view": {"name": "v", "data": {"blob": over_limit}}})),
            "host_context",
            "view_data_over_the_json_limit",
        ),
        (
            ctx(
                json!({"view": {"name": "v", "state": {"blob": half_limit}}, "extensions": {"blob": half_limit}}),
            ),
            "host_context",
            "view_state_and_extensions_together_over_the_json_limit",
        ),
    ]
    .into_iter()
    .chain(source_of_truth_cases())
    .collect()
}

/// The limits and rules of the Python original's `host_context.py`: lengths,
/// types, nulls where it has a default but no "none", and the pairing of
/// kind `text` with `text` content.
fn source_of_truth_cases() -> Vec<(Value, &'static str, &'static str)> {
    let host = |extra: Value| {
        let mut host = json!({"name": "web", "kind": "browser"});
        if let (Some(host), Value::Object(extra)) = (host.as_object_mut(), extra) {
            host.extend(extra);
        }
        ctx(json!({"host": host}))
    };
    let view = |extra: Value| {
        let mut view = json!({"name": "tasks"});
        if let (Some(view), Value::Object(extra)) = (view.as_object_mut(), extra) {
            view.extend(extra);
        }
        ctx(json!({"view": view}))
    };
    let target = |target: Value| ctx(json!({"navigation": [{"name": "home"}, target]}));
    let long_url = format!("https://x.test/{}", "a".repeat(MAX_URL_CHARS));
    let mut cases = vec![
        (
            host(json!({"name": null})),
            "host_context.host.name",
            "host_name_null",
        ),
        (
            host(json!({"name": ""})),
            "host_context.host.name",
            "host_name_empty",
        ),
        (
            ctx(json!({"host": {"kind": "browser", "version": "2"}})),
            "host_context.host.name",
            "host_name_missing",
        ),
        (
            host(json!({"name": "n".repeat(MAX_HOST_NAME_CHARS + 1)})),
            "host_context.host.name",
            "host_name_over_64_characters",
        ),
        (
            host(json!({"name": "é".repeat(MAX_HOST_NAME_CHARS + 1)})),
            "host_context.host.name",
            "host_name_over_64_multibyte_characters",
        ),
        (
            host(json!({"version": "v".repeat(MAX_HOST_VERSION_CHARS + 1)})),
            "host_context.host.version",
            "host_version_over_32_characters",
        ),
        (
            host(json!({"kind": null})),
            "host_context.host.kind",
            "host_kind_null",
        ),
        (
            view(json!({"name": "v".repeat(MAX_VIEW_NAME_CHARS + 1)})),
            "host_context.view.name",
            "view_name_over_128_characters",
        ),
        (
            view(json!({"name": null})),
            "host_context.view.name",
            "view_name_null",
        ),
        (
            view(json!({"data": [1, 2]})),
            "host_context.view.data",
            "view_data_a_list",
        ),
        (
            view(json!({"data": "rows"})),
            "host_context.view.data",
            "view_data_a_string",
        ),
        (
            view(json!({"data": 3})),
            "host_context.view.data",
            "view_data_a_number",
        ),
        (
            view(json!({"data": null})),
            "host_context.view.data",
            "view_data_null",
        ),
        (
            view(json!({"state": ["a"]})),
            "host_context.view.state",
            "view_state_a_list",
        ),
        (
            view(json!({"state": "editing"})),
            "host_context.view.state",
            "view_state_a_string",
        ),
        (
            view(json!({"state": 1.5})),
            "host_context.view.state",
            "view_state_a_number",
        ),
        (
            view(json!({"state": null})),
            "host_context.view.state",
            "view_state_null",
        ),
        (
            view(json!({"description": null})),
            "host_context.view.description",
            "view_description_null",
        ),
        (
            target(json!({"name": "n".repeat(MAX_VIEW_NAME_CHARS + 1)})),
            "host_context.navigation[1].name",
            "navigation_name_over_128_characters",
        ),
        (
            target(json!({"name": ""})),
            "host_context.navigation[1].name",
            "navigation_name_empty",
        ),
        (
            target(json!({"name": "n", "route": "/".repeat(MAX_ROUTE_CHARS + 1)})),
            "host_context.navigation[1].route",
            "navigation_route_over_512_characters",
        ),
        (
            target(json!({"name": "n", "route": 7})),
            "host_context.navigation[1].route",
            "navigation_route_not_a_string",
        ),
        (
            target(json!({"name": "n", "description": null})),
            "host_context.navigation[1].description",
            "navigation_description_null",
        ),
        (
            ctx(json!({"actions": [{"name": "a", "description": null}]})),
            "host_context.actions[0].description",
            "action_description_null",
        ),
        (
            ctx(json!({"captured_at": "yesterday"})),
            "host_context.captured_at",
            "captured_at_not_a_datetime",
        ),
        (
            ctx(json!({"capturedAt": "2026-02-30T10:00:00Z"})),
            "host_context.captured_at",
            "captured_at_not_a_real_date",
        ),
        (
            ctx(json!({"captured_at": "1700000000"})),
            "host_context.captured_at",
            "captured_at_unix_time_string",
        ),
        (
            ctx(json!({"version": null})),
            "host_context.version",
            "version_null",
        ),
        (
            ctx(json!({"navigation": null})),
            "host_context.navigation",
            "navigation_null",
        ),
        (
            ctx(json!({"actions": null})),
            "host_context.actions",
            "actions_null",
        ),
        (
            ctx(json!({"attachments": null})),
            "host_context.attachments",
            "context_attachments_null",
        ),
        (
            ctx(json!({"background": null})),
            "host_context.background",
            "background_null",
        ),
        (
            ctx(json!({"extensions": null})),
            "host_context.extensions",
            "extensions_null",
        ),
    ];
    // Every attachment rule, once on the message and once inside host_context.
    let attachment_rules: Vec<(Value, &'static str, &'static str)> = vec![
        (
            json!({"url": "https://x.test/a.png", "name": "n".repeat(MAX_ATTACHMENT_NAME_CHARS + 1)}),
            "name",
            "name_over_128_characters",
        ),
        (
            json!({"url": "https://x.test/a.png", "description": "d".repeat(MAX_ATTACHMENT_DESCRIPTION_CHARS + 1)}),
            "description",
            "description_over_512_characters",
        ),
        (
            json!({"url": "https://x.test/a.png", "media_type": "m".repeat(MAX_MEDIA_TYPE_CHARS + 1)}),
            "media_type",
            "media_type_over_64_characters",
        ),
        (json!({"url": long_url}), "url", "url_over_2048_characters"),
        (
            json!({"kind": "text", "url": "https://x.test/a.txt"}),
            "kind",
            "kind_text_with_a_url",
        ),
        (
            json!({"kind": "text", "data_uri": "data:text/plain,hi"}),
            "kind",
            "kind_text_with_a_data_uri",
        ),
        (
            json!({"kind": "image", "text": "hi"}),
            "text",
            "text_with_kind_image",
        ),
        (
            json!({"kind": "document", "text": "hi"}),
            "text",
            "text_with_kind_document",
        ),
        (json!({"text": "hi"}), "text", "text_without_a_kind"),
        (
            json!({"kind": null, "url": "https://x.test/a.png"}),
            "kind",
            "kind_null",
        ),
        (
            json!({"purpose": null, "url": "https://x.test/a.png"}),
            "purpose",
            "purpose_null",
        ),
    ];
    for (attachment, field, rule) in attachment_rules {
        let on_message = format!("attachments[0].{field}");
        let in_context = format!("host_context.attachments[0].{field}");
        cases.push((
            body(json!({"attachments": [attachment.clone()]})),
            leak(on_message),
            leak(format!("attachment_{rule}")),
        ));
        cases.push((
            ctx(json!({"attachments": [attachment]})),
            leak(in_context),
            leak(format!("context_attachment_{rule}")),
        ));
    }
    cases
}

/// A generated path or label as the table's `&'static str`. The table is
/// built a handful of times per test run, so the few leaked bytes do not add up.
fn leak(text: String) -> &'static str {
    Box::leak(text.into_boxed_str())
}

/// A body with valid ids plus the fields of `extra`.
fn body(extra: Value) -> Value {
    let mut fields = Map::new();
    fields.insert("id".into(), json!("m-table"));
    fields.insert("session_id".into(), json!("s-table"));
    if let Value::Object(extra) = extra {
        fields.extend(extra);
    }
    Value::Object(fields)
}

/// A body carrying `context` as its host_context.
fn ctx(context: Value) -> Value {
    body(json!({"host_context": context}))
}

/// A valid action (for the name cases, a possibly invalid name).
fn action(name: &str) -> Value {
    json!({"name": name, "description": "Does a thing.", "parameters": {"type": "object", "properties": {}}})
}
