//! Assistant profiles (`ASSISTANT__PROFILE`): the composed system prompt is
//! byte-identical across processes with the same profile, a different
//! profile changes the system prompt and nothing else in the provider
//! request, and `GET /api/debug/prompt` shows what was composed.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::fake_provider::{FakeProvider, Script};
use crate::helpers::{spawn_app, tasks_context};
use crate::process::{scratch_dir, ServerProcess, SERVER_BINARY};

fn write_profile(parts: &[(&str, &str)]) -> PathBuf {
    let dir = scratch_dir("ar_profile");
    for (name, text) in parts {
        std::fs::write(dir.join(name), text).expect("write a profile part");
    }
    dir
}

async fn start(fake: &FakeProvider, profile: &Path) -> ServerProcess {
    let base_url = fake.base_url_openai();
    let profile = profile.display().to_string();
    ServerProcess::start(
        Path::new(SERVER_BINARY),
        &[
            ("LLM__PRIMARY_MODEL", "openai:gpt-test"),
            ("OPENAI_BASE_URL", &base_url),
            ("OPENAI_API_KEY", "sk-test"),
            ("ASSISTANT__PROFILE", &profile),
        ],
    )
    .await
}

/// One turn on a fresh process; returns what `/api/debug/prompt` said.
async fn one_turn(fake: &FakeProvider, profile: &Path) -> Value {
    let server = start(fake, profile).await;
    fake.push(Script::openai_text(&["Hello."]));
    let (status, reply) = server
        .app
        .say("profiled", "m1", "hi", Some(tasks_context()))
        .await;
    assert_eq!(status, 200, "{reply}: {}", server.log_text());
    let (status, prompt) = server.app.get("/api/debug/prompt").await;
    assert_eq!(status, 200, "{prompt}");
    prompt
}

#[actix_web::test]
async fn same_profile_gives_byte_identical_prompts_and_another_changes_only_the_system_prompt() {
    let fake = FakeProvider::start();
    let support = write_profile(&[
        ("domain.md", "You know the issue tracker.\n"),
        ("persona.md", "You are Ada, a support assistant.\r\n"),
        ("communication.md", "Answer in short sentences."),
        ("extra.md", "Never guess issue numbers."),
    ]);
    let sales = write_profile(&[("persona.md", "You are Bo, a sales assistant.")]);

    let first = one_turn(&fake, &support).await;
    let second = one_turn(&fake, &support).await;
    let other = one_turn(&fake, &sales).await;

    let expected = "You are Ada, a support assistant.\n\nAnswer in short sentences.\n\n\
You know the issue tracker.\n\nNever guess issue numbers.";
    assert_eq!(first["system_prompt"], expected);
    assert_eq!(
        first["parts"],
        serde_json::json!(["persona.md", "communication.md", "domain.md", "extra.md"])
    );
    assert_eq!(first, second);
    assert_eq!(other["system_prompt"], "You are Bo, a sales assistant.");

    let requests = fake.requests();
    assert_eq!(requests.len(), 3);
    // `preserve_order` keeps the body's key order, so this is the request's text.
    let text: Vec<String> = requests
        .iter()
        .map(|request| serde_json::to_string(&request.body).expect("serialise"))
        .collect();
    assert_eq!(
        text[0], text[1],
        "same profile: identical provider requests"
    );
    let system = |body: &Value| body["messages"][0].clone();
    assert_eq!(system(&requests[0].body)["role"], "system");
    assert_eq!(system(&requests[0].body)["content"], expected);
    assert_eq!(
        system(&requests[2].body)["content"],
        "You are Bo, a sales assistant."
    );
    let without_system = |body: &Value| {
        let mut body = body.clone();
        body["messages"].as_array_mut().expect("messages").remove(0);
        body
    };
    assert_eq!(
        without_system(&requests[0].body),
        without_system(&requests[2].body),
        "a different profile changes only the system prompt"
    );
    std::fs::remove_dir_all(support).ok();
    std::fs::remove_dir_all(sales).ok();
}

#[actix_web::test]
async fn the_builtin_profile_is_the_default_and_shown_by_debug_prompt() {
    let app = spawn_app().await;
    let (status, prompt) = app.get("/api/debug/prompt").await;
    assert_eq!(status, 200, "{prompt}");
    assert_eq!(prompt["profile"], "builtin");
    assert_eq!(prompt["parts"], serde_json::json!(["persona.md"]));
    let text = prompt["system_prompt"].as_str().expect("text");
    assert!(text.starts_with("You are an assistant embedded in a host application."));
    assert_eq!(prompt["bytes"], text.len());
}

#[test]
fn a_bad_profile_stops_startup_naming_the_setting() {
    let empty = scratch_dir("ar_profile_empty");
    let mut values = std::collections::BTreeMap::new();
    values.insert(
        "ASSISTANT__PROFILE".to_string(),
        empty.display().to_string(),
    );
    let error = assistant_runtime::settings::Settings::from_map(&values).unwrap_err();
    assert_eq!(error.key, "ASSISTANT__PROFILE");
    values.insert("ASSISTANT__SYSTEM_PROMPT".to_string(), "Hi.".to_string());
    let error = assistant_runtime::settings::Settings::from_map(&values).unwrap_err();
    assert!(error.message.contains("not both"), "{error}");
    std::fs::remove_dir_all(empty).ok();
}
