//! Providers as operators run them: named providers side by side, a private
//! CA per provider, the provider's `retry-after` and its cap, the bound on
//! one SSE event (with the server process's memory read from /proc), and the
//! dependency tree the lock file pins.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use assistant_runtime::settings::Settings;
use serde_json::json;
use tokio_rustls::rustls;

use crate::fake_provider::{FakeProvider, Script};
use crate::helpers::spawn_app_with;
use crate::process::{scratch_dir, ServerProcess};

fn say(session: &str, content: &str) -> serde_json::Value {
    json!({"id": "m1", "session_id": session, "content": content})
}

#[actix_web::test]
async fn an_openai_and_an_anthropic_provider_answer_their_own_model_ids_in_one_server() {
    let local = FakeProvider::start();
    let gateway = FakeProvider::start();
    let local_url = local.base_url_openai();
    let gateway_url = gateway.base_url_anthropic();
    assert_ne!(local_url, gateway_url);
    let app = spawn_app_with(&[
        ("LLM__PROVIDERS__LOCAL__KIND", "openai"),
        ("LLM__PROVIDERS__LOCAL__BASE_URL", &local_url),
        ("LLM__PROVIDERS__Gateway__KIND", "anthropic"),
        ("LLM__PROVIDERS__Gateway__BASE_URL", &gateway_url),
        ("LLM__PROVIDERS__Gateway__API_KEY", "gw-key"),
        ("LLM__PROVIDERS__Gateway__HEADERS", r#"{"x-route": "eu"}"#),
        ("LLM__PRIMARY_MODEL", "local:qwen"),
        ("ASSISTANT__REQUEST_MODELS", "gateway:claude-x"),
    ])
    .await;
    local.push(Script::openai_text(&["from ", "local"]));
    gateway.push(Script::anthropic_text(&["from ", "gateway"]));

    let (status, body) = app.post_chat(&say("on-local", "hi")).await;
    assert_eq!(
        (status.as_u16(), &body["content"]),
        (200, &json!("from local")),
        "{body}"
    );
    let mut request = say("on-gateway", "hi");
    request["config"] = json!({"default_model": "gateway:claude-x"});
    let (status, body) = app.post_chat(&request).await;
    assert_eq!(
        (status.as_u16(), &body["content"]),
        (200, &json!("from gateway")),
        "{body}"
    );

    let to_local = local.requests();
    let to_gateway = gateway.requests();
    assert_eq!((to_local.len(), to_gateway.len()), (1, 1));
    assert_eq!(to_local[0].path, "/chat/completions");
    assert_eq!(to_local[0].body["model"], "qwen");
    assert_eq!(to_gateway[0].path, "/v1/messages");
    assert_eq!(to_gateway[0].body["model"], "claude-x");
    assert_eq!(to_gateway[0].header("x-api-key"), Some("gw-key"));
    assert_eq!(to_gateway[0].header("x-route"), Some("eu"));

    let (_, models) = app.get("/api/models").await;
    let listed: Vec<(String, String)> = models["providers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|provider| {
            (
                provider["name"].as_str().unwrap().to_string(),
                provider["kind"].as_str().unwrap_or("-").to_string(),
            )
        })
        .collect();
    let expected = [
        ("builtin", "-"),
        ("openai", "openai"),
        ("anthropic", "anthropic"),
        ("gateway", "anthropic"),
        ("local", "openai"),
    ];
    assert_eq!(
        listed,
        expected.map(|(name, kind)| (name.to_string(), kind.to_string()))
    );
    assert!(!models.to_string().contains("gw-key"), "no key is shown");
    let (_, health) = app.get("/health").await;
    let names: Vec<&str> = health["components"]["model"]["providers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|provider| provider["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["builtin", "openai", "anthropic", "gateway", "local"]
    );
}

#[test]
fn a_model_id_of_an_unknown_provider_is_refused_at_startup_with_the_known_ones() {
    for key in [
        "LLM__PRIMARY_MODEL",
        "LLM__SUMMARIZATION_MODEL",
        "ASSISTANT__REQUEST_MODELS",
    ] {
        let values: BTreeMap<String, String> = [
            ("LLM__PROVIDERS__LOCAL__KIND", "openai"),
            (
                "LLM__PROVIDERS__LOCAL__BASE_URL",
                "http://127.0.0.1:11434/v1",
            ),
            (key, "vlm:qwen"),
        ]
        .into_iter()
        .map(|(key, value)| (key.to_string(), value.to_string()))
        .collect();
        let error = Settings::from_map(&values).expect_err(key);
        assert_eq!(error.key, key);
        assert!(
            error
                .message
                .contains("known: builtin, openai, anthropic, local"),
            "{error}"
        );
    }
}

/// A TLS front for a fake provider: a CA and a certificate for 127.0.0.1
/// made here, TLS terminated and the bytes passed to the plain fake.
struct TlsFront {
    address: SocketAddr,
    ca_pem: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl TlsFront {
    fn start(target: SocketAddr) -> TlsFront {
        use rcgen::{
            BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
            KeyPair, KeyUsagePurpose,
        };
        actors::model::tls::install_crypto_provider();
        let ca_key = KeyPair::generate().unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "assistant-runtime test CA");
        ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca_cert = ca_params.self_signed(&ca_key).unwrap();
        let issuer = Issuer::new(ca_params, ca_key);
        let leaf_key = KeyPair::generate().unwrap();
        let mut leaf_params = CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
        leaf_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let leaf = leaf_params.signed_by(&leaf_key, &issuer).unwrap();
        let config = rustls::ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(
                vec![leaf.der().clone()],
                rustls::pki_types::PrivateKeyDer::Pkcs8(leaf_key.serialize_der().into()),
            )
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let address = listener.local_addr().unwrap();
        let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                loop {
                    let accepted = tokio::select! {
                        _ = &mut stopped => return,
                        accepted = listener.accept() => accepted,
                    };
                    let Ok((tcp, _)) = accepted else { continue };
                    let acceptor = acceptor.clone();
                    tokio::spawn(async move {
                        let Ok(mut tls) = acceptor.accept(tcp).await else {
                            return;
                        };
                        if let Ok(mut upstream) = tokio::net::TcpStream::connect(target).await {
                            let _ = tokio::io::copy_bidirectional(&mut tls, &mut upstream).await;
                        }
                    });
                }
            });
        });
        TlsFront {
            address,
            ca_pem: ca_cert.pem(),
            stop: Some(stop),
        }
    }
}

impl Drop for TlsFront {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

fn address_of(base_url: &str) -> SocketAddr {
    base_url.trim_start_matches("http://").parse().unwrap()
}

#[actix_web::test]
async fn a_provider_behind_https_with_a_private_ca_is_reached_through_its_ca_file() {
    let fake = FakeProvider::start();
    let front = TlsFront::start(address_of(&fake.base_url_openai()));
    let dir = scratch_dir("ar_private_ca");
    let ca_file = dir.join("ca.pem");
    std::fs::write(&ca_file, &front.ca_pem).unwrap();
    let https_url = format!("https://{}", front.address);
    let app = spawn_app_with(&[
        ("LLM__PROVIDERS__PRIVATE__KIND", "openai"),
        ("LLM__PROVIDERS__PRIVATE__BASE_URL", &https_url),
        (
            "LLM__PROVIDERS__PRIVATE__CA_FILE",
            ca_file.to_str().unwrap(),
        ),
        // The same endpoint without the CA: the system's and bundled roots
        // do not vouch for it.
        ("LLM__PROVIDERS__UNTRUSTED__KIND", "openai"),
        ("LLM__PROVIDERS__UNTRUSTED__BASE_URL", &https_url),
        ("LLM__PRIMARY_MODEL", "private:m"),
        ("ASSISTANT__REQUEST_MODELS", "untrusted:m"),
        ("LLM__RETRY_BACKOFF_MS", "10"),
    ])
    .await;
    fake.push(Script::openai_text(&["over ", "TLS"]));
    let (status, body) = app.post_chat(&say("private", "hi")).await;
    assert_eq!(
        (status.as_u16(), &body["content"]),
        (200, &json!("over TLS")),
        "{body}"
    );
    assert_eq!(fake.requests().len(), 1);

    let mut request = say("untrusted", "hi");
    request["config"] = json!({"default_model": "untrusted:m"});
    let (status, body) = app.post_chat(&request).await;
    assert_eq!(
        (status.as_u16(), &body["type"]),
        (500, &json!("connection_error")),
        "{body}"
    );
    assert_eq!(fake.requests().len(), 1, "no request got through untrusted");
    let _ = std::fs::remove_dir_all(dir);
}

#[actix_web::test]
async fn retry_after_is_honoured_and_a_wait_over_the_cap_fails_at_once_as_rate_limit() {
    let fake = FakeProvider::start();
    let url = fake.base_url_openai();
    let app = spawn_app_with(&[
        ("LLM__PRIMARY_MODEL", "openai:gpt-test"),
        ("OPENAI_BASE_URL", &url),
        ("LLM__RETRY_MAX_WAIT_SECONDS", "2"),
    ])
    .await;
    fake.push(Script::status_with_headers(
        429,
        "slow down",
        &[("retry-after", "1")],
    ));
    fake.push(Script::openai_text(&["after ", "waiting"]));
    let (status, body) = app.post_chat(&say("patient", "hi")).await;
    assert_eq!(
        (status.as_u16(), &body["content"]),
        (200, &json!("after waiting")),
        "{body}"
    );
    let requests = fake.requests();
    assert_eq!(requests.len(), 2);
    let waited = requests[1].at - requests[0].at;
    assert!(waited >= Duration::from_secs(1), "retried after {waited:?}");

    fake.push(Script::status_with_headers(
        429,
        "come back in an hour",
        &[("retry-after", "3600")],
    ));
    let (status, body) = app.post_chat(&say("impatient", "hi")).await;
    assert_eq!(
        (status.as_u16(), &body["type"]),
        (500, &json!("rate_limit")),
        "{body}"
    );
    let message = body["error_message"].as_str().unwrap_or_default();
    assert!(message.contains("3600 s"), "{body}");
    assert!(message.contains("LLM__RETRY_MAX_WAIT_SECONDS"), "{body}");
    assert_eq!(fake.requests().len(), 3, "the hour is not waited for");
}

/// A `/proc/<pid>/status` field in bytes (`VmRSS`, `VmHWM`).
fn proc_status_bytes(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find(|line| line.starts_with(&format!("{field}:")))
        .unwrap_or_else(|| panic!("{field} in /proc/{pid}/status"));
    let kib: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|value| value.parse().ok())
        .unwrap();
    kib * 1024
}

#[actix_web::test]
async fn an_endless_line_fails_the_turn_as_provider_error_within_the_memory_bound() {
    // Large against the fixed cost of a failing turn on top of the parser's
    // buffer (hyper's read buffer of up to 400 KiB, the turn's records:
    // about 1.1 MB in a debug build), small against the 64 MiB line.
    const MAX_EVENT_BYTES: u64 = 4 * 1024 * 1024;
    let fake = FakeProvider::start();
    let url = fake.base_url_openai();
    let limit = MAX_EVENT_BYTES.to_string();
    let server = ServerProcess::runtime(&[
        ("LLM__PRIMARY_MODEL", "openai:gpt-test"),
        ("OPENAI_BASE_URL", &url),
        ("LLM__MAX_EVENT_BYTES", &limit),
        ("SERVER__WORKERS", "1"),
    ])
    .await;
    let app = &server.app;
    // A normal turn first, so pools and buffers of a turn already exist.
    let (status, body) = app.post_chat(&say("warm", "hi")).await;
    assert_eq!(status.as_u16(), 200, "{body}");
    let pid = server.pid();
    // Resets VmHWM to the current RSS, so the peak measured is this turn's.
    let peak_reset = std::fs::write(format!("/proc/{pid}/clear_refs"), "5").is_ok();
    let before = proc_status_bytes(pid, "VmRSS");

    fake.push(Script::EndlessLine(64 * 1024 * 1024));
    let (status, body) = app.post_chat(&say("endless", "hi")).await;
    assert_eq!(
        (status.as_u16(), &body["type"]),
        (500, &json!("provider_error")),
        "{body}"
    );
    assert!(
        body["error_message"]
            .as_str()
            .unwrap_or_default()
            .contains("LLM__MAX_EVENT_BYTES"),
        "the error says why: {body}"
    );
    let field = if peak_reset { "VmHWM" } else { "VmRSS" };
    let after = proc_status_bytes(pid, field);
    let growth = after.saturating_sub(before);
    eprintln!("{field} grew by {growth} bytes over the 64 MiB line, limit {MAX_EVENT_BYTES}");
    assert!(
        growth < 2 * MAX_EVENT_BYTES,
        "{field} grew by {growth} bytes, from {before}"
    );
    // The server still answers.
    let (status, _) = app.post_chat(&say("after", "hi")).await;
    assert_eq!(status.as_u16(), 200);
}

#[test]
fn the_lock_file_holds_one_reqwest_and_no_deprecated_or_compression_crates() {
    let lock = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.lock"))
        .expect("Cargo.lock");
    let count = |name: &str| {
        lock.lines()
            .filter(|line| *line == format!("name = \"{name}\""))
            .count()
    };
    assert_eq!(count("reqwest"), 1);
    for absent in ["actix-web-actors", "brotli", "zstd-sys", "aws-lc-sys"] {
        assert_eq!(count(absent), 0, "{absent} is in Cargo.lock");
    }
}
