//! `config/nginx-sticky.conf` under Debian's nginx (installed by `.ci/run`),
//! started on loopback with its own folder: three runtime processes on one
//! PostgreSQL database behind it, HTTP turns routed by `?session_id=` and by
//! path, and the stock Socket.IO clients (python-socketio, socket.io-client)
//! passing the session in the connect `query`, on polling and on websocket.
//! nginx's access log records which process served each request, so the
//! test shows every request of a session reached one process. Also: forged
//! identity headers cleared, a 20 MB body passed, Socket.IO clients without a
//! session id kept on one process per connection (the playground in
//! chromium too), and the per-IP cap counting clients behind nginx apart.
//! Each of these fails against the config as it was before it said so.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::helpers::tasks_context;
use crate::postgres::{server_on, TestDb};
use crate::process::{free_port, ServerProcess};
use crate::socketio_helpers::{run_scenario, Client};

const STARTUP_DEADLINE: Duration = Duration::from_secs(20);

/// nginx on a folder of its own, stopped (SIGKILL) and removed on drop.
struct Nginx {
    child: Child,
    dir: PathBuf,
    port: u16,
}

fn nginx_binary() -> PathBuf {
    ["/usr/sbin/nginx", "/usr/bin/nginx"]
        .iter()
        .map(PathBuf::from)
        .find(|path| path.exists())
        .unwrap_or_else(|| {
            panic!("nginx is not installed: `apt-get install -y nginx` (.ci/run installs it)")
        })
}

/// The repository's config with its ports replaced by the test's.
fn sticky_config(listen: u16, upstreams: &[u16]) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/nginx-sticky.conf");
    let mut config = std::fs::read_to_string(&path).expect("config/nginx-sticky.conf");
    let mut replace = |from: &str, to: String| {
        assert!(config.contains(from), "{from:?} is no longer in the config");
        config = config.replace(from, &to);
    };
    replace("listen 7100;", format!("listen 127.0.0.1:{listen};"));
    for (index, port) in upstreams.iter().enumerate() {
        replace(
            &format!("server 127.0.0.1:{} ", 7101 + index),
            format!("server 127.0.0.1:{port} "),
        );
    }
    config
}

impl Nginx {
    fn start(upstreams: &[u16]) -> Nginx {
        let binary = nginx_binary();
        let dir =
            std::env::temp_dir().join(format!("ar_nginx_{}_{}", std::process::id(), free_port()));
        std::fs::create_dir_all(dir.join("logs")).expect("nginx folder");
        let port = free_port();
        std::fs::write(
            dir.join("assistant-runtime.conf"),
            sticky_config(port, upstreams),
        )
        .expect("write the site config");
        // A main config of our own: no system paths, logs in the folder, and
        // an access log naming the routing key and the process that served.
        let main = format!(
            "daemon off;\nworker_processes 2;\npid {dir}/nginx.pid;\n\
             events {{ worker_connections 256; }}\n\
             http {{\n\
               log_format routed '$ar_session_key $upstream_addr $request_uri';\n\
               access_log {dir}/logs/access.log routed;\n\
               client_body_temp_path {dir}/body; proxy_temp_path {dir}/proxy;\n\
               fastcgi_temp_path {dir}/fastcgi; uwsgi_temp_path {dir}/uwsgi; scgi_temp_path {dir}/scgi;\n\
               include {dir}/assistant-runtime.conf;\n\
             }}\n",
            dir = dir.display()
        );
        std::fs::write(dir.join("nginx.conf"), main).expect("write nginx.conf");
        let test = Command::new(&binary)
            .arg("-t")
            .arg("-p")
            .arg(&dir)
            .arg("-e")
            .arg(dir.join("logs/error.log"))
            .arg("-c")
            .arg(dir.join("nginx.conf"))
            .output()
            .expect("run nginx -t");
        assert!(
            test.status.success(),
            "nginx rejects the config: {}",
            String::from_utf8_lossy(&test.stderr)
        );
        let child = Command::new(&binary)
            .arg("-p")
            .arg(&dir)
            .arg("-e")
            .arg(dir.join("logs/error.log"))
            .arg("-c")
            .arg(dir.join("nginx.conf"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start nginx");
        let nginx = Nginx { child, dir, port };
        let deadline = Instant::now() + STARTUP_DEADLINE;
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "nginx did not listen: {}",
                nginx.errors()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        nginx
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn errors(&self) -> String {
        std::fs::read_to_string(self.dir.join("logs/error.log")).unwrap_or_default()
    }

    /// For each routing key, the set of processes that served it.
    fn routes(&self) -> HashMap<String, HashSet<String>> {
        let log = std::fs::read_to_string(self.dir.join("logs/access.log")).unwrap_or_default();
        let mut routes: HashMap<String, HashSet<String>> = HashMap::new();
        for line in log.lines() {
            let mut fields = line.split(' ');
            if let (Some(key), Some(upstream)) = (fields.next(), fields.next()) {
                routes
                    .entry(key.to_string())
                    .or_default()
                    .insert(upstream.to_string());
            }
        }
        routes
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// How long the access log may lag behind the clients.
const LOG_DEADLINE: Duration = Duration::from_secs(10);

/// Every request of each session in `sessions` was served by one process.
/// nginx logs a websocket request when its connection closes, which can be
/// just after the client reported its last event, so a session missing from
/// the log is waited for.
async fn assert_sticky(nginx: &Nginx, sessions: &[String]) {
    let deadline = Instant::now() + LOG_DEADLINE;
    let mut routes = nginx.routes();
    while Instant::now() < deadline && sessions.iter().any(|session| !routes.contains_key(session))
    {
        actix_web::rt::time::sleep(Duration::from_millis(50)).await;
        routes = nginx.routes();
    }
    for session in sessions {
        let served_by = routes
            .get(session)
            .unwrap_or_else(|| panic!("no request of {session} in the access log: {routes:?}"));
        assert_eq!(
            served_by.len(),
            1,
            "session {session} was served by several processes: {served_by:?}"
        );
    }
}

#[actix_web::test]
async fn nginx_routes_each_session_to_one_of_three_processes_over_http_and_socketio() {
    let db = TestDb::create().await;
    let mut processes = Vec::new();
    for _ in 0..3 {
        processes.push(server_on(&db.url).await);
    }
    let ports: Vec<u16> = processes.iter().map(|process| process.app.port).collect();
    let nginx = Nginx::start(&ports);
    let client = crate::helpers::http_client();

    // HTTP: turns routed by ?session_id=, reads routed by the path.
    let http_sessions: Vec<String> = (0..6).map(|index| format!("http{index}")).collect();
    for turn in 0..3 {
        for session in &http_sessions {
            let response = client
                .post(format!("{}/api/chat?session_id={session}", nginx.url()))
                .json(&json!({"id": format!("m{turn}"), "session_id": session, "content": "hello"}))
                .send()
                .await
                .expect("a response through nginx");
            let status = response.status();
            let body: Value = response.json().await.unwrap_or(Value::Null);
            assert_eq!(status, 200, "{session}: {body} {}", nginx.errors());
            assert_eq!(body["turn_number"], turn + 1, "{body}");
        }
    }
    for session in &http_sessions {
        let info: Value = client
            .get(format!("{}/api/sessions/{session}", nginx.url()))
            .send()
            .await
            .expect("a response")
            .json()
            .await
            .expect("JSON");
        assert_eq!(info["turn_number"], 3, "{info}");
    }
    // Ingress for a session reaches the process that owns it, under the
    // same routing: `?session_id=` on the inject URL, the per-owner path.
    for session in &http_sessions {
        for url in [
            format!("{}/api/assistant/inject?session_id={session}", nginx.url()),
            format!("{}/api/sessions/{session}/inject", nginx.url()),
        ] {
            let response = client
                .post(url)
                .json(&json!({"from": "ci", "via": "github", "message": "deployed"}))
                .send()
                .await
                .expect("a response through nginx");
            let status = response.status();
            let body: Value = response.json().await.unwrap_or(Value::Null);
            assert_eq!(status, 201, "{session}: {body} {}", nginx.errors());
            assert_eq!(body["session_id"], session.as_str(), "{body}");
        }
    }

    // Socket.IO: the stock clients pass the session in the connect query.
    let modes = [
        (Client::Python, "default"),
        (Client::Python, "websocket"),
        (Client::Node, "default"),
        (Client::Node, "websocket"),
    ];
    let runs = modes.iter().map(|&(client, mode)| {
        let session = format!("sio-{client:?}-{mode}").to_lowercase();
        let scenario = json!({
            "query": {"session_id": session},
            "steps": [
                {"call": "assistant_join_session",
                 "data": {"session_id": session, "host_context": tasks_context()}},
                {"call": "assistant_message",
                 "data": {"id": "m1", "session_id": session, "content": "hello"}},
                {"wait": "assistant:final_response", "count": 1},
                {"call": "assistant_message",
                 "data": {"id": "m2", "session_id": session, "content": "again"}},
                {"wait": "assistant:final_response", "count": 2},
            ]
        });
        let url = nginx.url();
        async move {
            (
                session,
                mode,
                run_scenario(client, url, mode, scenario).await,
            )
        }
    });
    let runs = futures_util::future::join_all(runs).await;
    let mut sio_sessions = Vec::new();
    for (session, _mode, result) in &runs {
        assert_eq!(
            result["error"],
            Value::Null,
            "{session}: {result:#} {}",
            nginx.errors()
        );
        assert_eq!(result["connected"], true, "{session}");
        assert_eq!(result["transport"], "websocket", "{session}: {result:#}");
        let finals: Vec<&Value> = result["events"]
            .as_array()
            .map(|events| {
                events
                    .iter()
                    .filter(|event| event["event"] == "assistant:final_response")
                    .collect()
            })
            .unwrap_or_default();
        assert_eq!(finals.len(), 2, "{session}: {result:#}");
        assert_eq!(finals[1]["data"]["turn_number"], 2, "{session}: {result:#}");
        sio_sessions.push(session.clone());
    }

    assert_sticky(&nginx, &http_sessions).await;
    assert_sticky(&nginx, &sio_sessions).await;
    // The sessions really were spread: more than one process served some.
    let served: HashSet<String> = nginx
        .routes()
        .into_iter()
        .filter(|(key, _)| http_sessions.contains(key) || sio_sessions.contains(key))
        .flat_map(|(_, upstreams)| upstreams)
        .collect();
    assert!(
        served.len() > 1,
        "every session went to one process: {served:?}"
    );
}

/// Three processes on one database, each with `env` beside `DATABASE_URL`,
/// behind nginx with the shipped config.
async fn three_behind_nginx(db: &TestDb, env: &[(&str, &str)]) -> (Vec<ServerProcess>, Nginx) {
    let mut processes = Vec::new();
    for _ in 0..3 {
        let mut all = vec![("DATABASE_URL", db.url.as_str())];
        all.extend_from_slice(env);
        processes.push(ServerProcess::runtime(&all).await);
    }
    let ports: Vec<u16> = processes.iter().map(|process| process.app.port).collect();
    let nginx = Nginx::start(&ports);
    (processes, nginx)
}

/// A request through nginx, forging the identity headers of header mode.
async fn forged(client: &reqwest::Client, method: reqwest::Method, url: String) -> (u16, String) {
    let response = client
        .request(method, url)
        .header("X-Assistant-Principal", "mallory")
        .header("X-Assistant-Roles", "admin")
        .header("Content-Type", "application/json")
        .body(r#"{"id": "m1", "session_id": "victim", "content": "hello"}"#)
        .send()
        .await
        .expect("a response through nginx");
    let status = response.status().as_u16();
    (status, response.text().await.unwrap_or_default())
}

/// In header mode the shipped config clears the principal and roles headers
/// on every location, so a client that forges them is a caller without
/// credentials: 401 over HTTP and AG-UI, a refused CONNECT on Socket.IO.
/// Sent straight to a process (no proxy) they would work, which shows the
/// refusal comes from the config.
#[actix_web::test]
async fn forged_principal_and_roles_headers_never_pass_nginx() {
    let db = TestDb::create().await;
    let (processes, nginx) = three_behind_nginx(&db, &[("ACCESS__MODE", "header")]).await;
    let client = reqwest::Client::new();
    let base = nginx.url();
    for (method, path) in [
        (reqwest::Method::POST, "/api/chat?session_id=victim"),
        (reqwest::Method::GET, "/api/sessions"),
        (reqwest::Method::GET, "/api/sessions/victim"),
        (reqwest::Method::DELETE, "/api/sessions/victim"),
        (reqwest::Method::POST, "/api/agui"),
        (reqwest::Method::GET, "/metrics"),
    ] {
        let (status, body) = forged(&client, method.clone(), format!("{base}{path}")).await;
        assert_eq!(status, 401, "{method} {path}: {body}");
    }
    let (status, body) = forged(
        &client,
        reqwest::Method::POST,
        format!("{}/api/chat", processes[0].app.address),
    )
    .await;
    assert_eq!(
        status, 200,
        "straight to a process the headers count: {body}"
    );

    let scenario = json!({
        "headers": {"X-Assistant-Principal": "mallory", "X-Assistant-Roles": "admin"},
        "steps": [{"call": "assistant_join_session", "data": {"session_id": "victim"}}]
    });
    for client in [Client::Node, Client::Python] {
        let result = run_scenario(client, base.clone(), "default", scenario.clone()).await;
        assert_eq!(result["connected"], false, "{client:?}: {result:#}");
    }
}

/// Bodies up to the runtime's own limit pass nginx: a 20 MB message (two
/// 10 MB text attachments) is answered 200.
#[actix_web::test]
async fn a_twenty_megabyte_message_passes_nginx() {
    let db = TestDb::create().await;
    let (_processes, nginx) = three_behind_nginx(&db, &[]).await;
    let attachments = json!([
        {"kind": "text", "text": "x".repeat(10_000_000)},
        {"kind": "text", "text": "y".repeat(10_000_000)},
    ]);
    let body =
        json!({"id": "m1", "session_id": "big", "content": "hello", "attachments": attachments})
            .to_string();
    assert!(body.len() > 20_000_000);
    let response = reqwest::Client::new()
        .post(format!("{}/api/chat?session_id=big", nginx.url()))
        .header("Content-Type", "application/json")
        .body(body)
        .send()
        .await
        .expect("a response through nginx");
    let status = response.status();
    let text = response.text().await.unwrap_or_default();
    assert_eq!(status, 200, "{text} {}", nginx.errors());
}

/// Clients that put no `session_id` in their query (the playground's
/// `io("/assistant")`) stay on one process per Engine.IO connection: 20
/// connections of each stock client in each mode connect and complete a
/// streamed turn, none answered "Session ID unknown".
#[actix_web::test]
async fn socketio_clients_without_a_session_id_connect_through_nginx() {
    use futures_util::StreamExt;

    let db = TestDb::create().await;
    let (_processes, nginx) = three_behind_nginx(&db, &[]).await;
    let mut runs = Vec::new();
    for client in [Client::Node, Client::Python] {
        for mode in ["default", "polling"] {
            for index in 0..20 {
                runs.push((client, mode, index));
            }
        }
    }
    let url = nginx.url();
    let results: Vec<(String, &str, Value)> = futures_util::stream::iter(runs)
        .map(|(client, mode, index)| {
            let session = format!("nosid-{client:?}-{mode}-{index}").to_lowercase();
            let scenario = json!({
                "steps": [
                    {"call": "assistant_join_session",
                     "data": {"session_id": session, "host_context": tasks_context()}},
                    {"call": "assistant_message",
                     "data": {"id": "m1", "session_id": session, "content": "hello"}},
                    {"wait": "assistant:final_response", "count": 1},
                ]
            });
            let url = url.clone();
            async move {
                (
                    session,
                    mode,
                    run_scenario(client, url, mode, scenario).await,
                )
            }
        })
        .buffer_unordered(8)
        .collect()
        .await;
    assert_eq!(results.len(), 80);
    for (session, mode, result) in &results {
        assert_eq!(result["error"], Value::Null, "{session}: {result:#}");
        assert_eq!(result["connected"], true, "{session}");
        let expected_transport = if *mode == "polling" {
            "polling"
        } else {
            "websocket"
        };
        assert_eq!(
            result["transport"], expected_transport,
            "{session}: {result:#}"
        );
        let events = result["events"].as_array().cloned().unwrap_or_default();
        assert!(
            events
                .iter()
                .any(|event| event["event"] == "assistant:text_delta"
                    || event["event"] == "assistant:stream_chunk"
                    || event["event"] == "assistant:thinking_delta"),
            "{session}: nothing streamed: {result:#}"
        );
        let finals = events
            .iter()
            .filter(|event| event["event"] == "assistant:final_response")
            .count();
        assert_eq!(finals, 1, "{session}: {result:#}");
    }
}

/// An Engine.IO handshake through `base` from `local` (a loopback address
/// the client binds), with `forwarded` as its X-Forwarded-For if given.
async fn handshake(base: &str, local: &str, forwarded: Option<&str>) -> u16 {
    let client = reqwest::Client::builder()
        .local_address(local.parse::<std::net::IpAddr>().expect("an address"))
        .build()
        .expect("a client");
    let mut request = client.get(format!("{base}/socket.io/?EIO=4&transport=polling"));
    if let Some(forwarded) = forwarded {
        request = request.header("X-Forwarded-For", forwarded);
    }
    request
        .send()
        .await
        .expect("a handshake answer")
        .status()
        .as_u16()
}

/// With SERVER__TRUSTED_PROXIES naming nginx's address, the per-IP cap counts
/// each client behind nginx on its own address; sent straight to a process,
/// a forged X-Forwarded-For changes nothing (the peer is not trusted).
#[actix_web::test]
async fn the_per_ip_cap_counts_clients_behind_nginx_apart() {
    let db = TestDb::create().await;
    let (processes, nginx) = three_behind_nginx(
        &db,
        &[
            ("SERVER__TRUSTED_PROXIES", "127.0.0.1/32"),
            ("SOCKETIO__MAX_SESSIONS_PER_IP", "2"),
        ],
    )
    .await;
    let base = nginx.url();
    for local in ["127.0.0.2", "127.0.0.3", "127.0.0.4"] {
        assert_eq!(handshake(&base, local, None).await, 200, "{local} first");
        assert_eq!(handshake(&base, local, None).await, 200, "{local} second");
        // A client's own X-Forwarded-For is left of nginx's hop: ignored.
        assert_eq!(
            handshake(&base, local, Some("10.9.9.9")).await,
            429,
            "{local} third, with a forged hop"
        );
    }
    let direct = &processes[0].app.address;
    assert_eq!(handshake(direct, "127.0.0.5", Some("10.0.0.1")).await, 200);
    assert_eq!(handshake(direct, "127.0.0.5", Some("10.0.0.2")).await, 200);
    assert_eq!(
        handshake(direct, "127.0.0.5", Some("10.0.0.3")).await,
        429,
        "a forged X-Forwarded-For from an untrusted peer counted as a new client"
    );
}

/// The built-in playground (`io("/assistant")`, no session in the query)
/// connects and runs its turns in headless chromium through nginx.
#[actix_web::test]
async fn the_playground_works_through_nginx() {
    let db = TestDb::create().await;
    let (_processes, nginx) = three_behind_nginx(&db, &[]).await;
    let artifacts = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/test-artifacts");
    std::fs::create_dir_all(&artifacts).expect("artifact folder");
    let screenshot = artifacts.join("playground-nginx.png");
    let url = format!("{}/", nginx.url());
    let output = actix_web::rt::task::spawn_blocking(move || {
        crate::socketio_helpers::ensure_clients_installed();
        let script =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/clients/browser/playground.mjs");
        Command::new("node")
            .arg(script)
            .arg(url)
            .arg(screenshot)
            .output()
            .expect("run node")
    })
    .await
    .expect("browser thread");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let result: Value = serde_json::from_str(stdout.lines().last().unwrap_or(""))
        .unwrap_or_else(|error| panic!("no JSON ({error}):\n{stdout}\n{stderr}"));
    assert_eq!(
        result["error"],
        Value::Null,
        "{result:#} {}",
        nginx.errors()
    );
    let steps = result["steps"].as_array().expect("steps");
    for step in steps {
        assert_eq!(step["ok"], true, "{step} {}", nginx.errors());
    }
    let names: Vec<&str> = steps
        .iter()
        .filter_map(|step| step["name"].as_str())
        .collect();
    assert!(names.contains(&"connects"), "{names:?}");
    assert!(names.contains(&"streams thinking and text"), "{names:?}");
}

/// A request through nginx with an `Idempotency-Key`.
fn keyed_chat(nginx: &Nginx, key: &str, body: &Value) -> reqwest::RequestBuilder {
    let session = body["session_id"].as_str().expect("a session id");
    reqwest::Client::new()
        .post(format!("{}/api/chat?session_id={session}", nginx.url()))
        .header("Content-Type", "application/json")
        .header("Idempotency-Key", format!("\"{key}\""))
        .body(body.to_string())
}

/// The process serving `session` behind nginx, from its access log (nginx
/// writes a request's line after its response, so a busy machine may show
/// the reply before the line: it is waited for).
async fn serving(nginx: &Nginx, processes: &[ServerProcess], session: &str) -> usize {
    let deadline = Instant::now() + LOG_DEADLINE;
    let mut routes = nginx.routes();
    while Instant::now() < deadline && !routes.contains_key(session) {
        actix_web::rt::time::sleep(Duration::from_millis(50)).await;
        routes = nginx.routes();
    }
    let upstream = routes
        .get(session)
        .and_then(|served| served.iter().next())
        .unwrap_or_else(|| panic!("no request of {session} in the access log: {routes:?}"));
    processes
        .iter()
        .position(|process| upstream.ends_with(&format!(":{}", process.app.port)))
        .unwrap_or_else(|| panic!("{upstream} is none of the processes"))
}

/// The process running a turn is killed while its `POST /api/chat` waits:
/// nginx answers 502, and the client cannot tell whether the message was
/// stored. It was; the resend with the same key reaches another process,
/// which runs the turn for the stored message and answers its final
/// response. The conversation holds the message once.
#[actix_web::test]
async fn a_resend_with_its_idempotency_key_gets_the_answer_after_a_kill() {
    let db = TestDb::create().await;
    let (mut processes, nginx) = three_behind_nginx(&db, &[]).await;
    let client = reqwest::Client::new();
    let session = "idem";
    let warm = json!({"id": "m0", "session_id": session, "content": "say ready"});
    let response = keyed_chat(&nginx, "warm", &warm)
        .send()
        .await
        .expect("warm");
    assert_eq!(response.status(), 200);
    let victim = serving(&nginx, &processes, session).await;

    let body = json!({"id": "m1", "session_id": session,
                      "content": "slow 400\nsay one two three four five"});
    let in_flight = actix_web::rt::spawn(keyed_chat(&nginx, "k1", &body).send());
    let messages_url = format!("{}/api/sessions/{session}/messages", nginx.url());
    let deadline = Instant::now() + STARTUP_DEADLINE;
    loop {
        let path: Value = client
            .get(&messages_url)
            .send()
            .await
            .expect("messages")
            .json()
            .await
            .expect("a JSON path");
        if path
            .as_array()
            .is_some_and(|path| path.iter().any(|m| m["id"] == "m1"))
        {
            break;
        }
        assert!(Instant::now() < deadline, "m1 was never stored: {path}");
        actix_web::rt::time::sleep(Duration::from_millis(20)).await;
    }
    processes.remove(victim).crash();
    let cut = in_flight.await.expect("the request task");
    if let Ok(response) = cut {
        assert_eq!(response.status(), 502, "the turn's process was killed");
    }

    let response = keyed_chat(&nginx, "k1", &body)
        .send()
        .await
        .expect("the resend");
    let status = response.status();
    let reply: Value = response.json().await.expect("a JSON reply");
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["content"], "one two three four five", "{reply}");
    assert_eq!(reply["message_id"], "m1:reply");
    // Sent once more, the stored outcome, not a second turn.
    let again: Value = keyed_chat(&nginx, "k1", &body)
        .send()
        .await
        .expect("again")
        .json()
        .await
        .expect("a JSON reply");
    assert_eq!(again, reply);

    let tree: Value = client
        .get(format!("{}/api/sessions/{session}/tree", nginx.url()))
        .send()
        .await
        .expect("the tree")
        .json()
        .await
        .expect("a JSON tree");
    let ids: Vec<&str> = tree
        .as_array()
        .expect("a list")
        .iter()
        .filter_map(|message| message["id"].as_str())
        .collect();
    assert_eq!(ids.iter().filter(|id| **id == "m1").count(), 1, "{ids:?}");
    assert_eq!(
        ids.iter().filter(|id| **id == "m1:reply").count(),
        1,
        "{ids:?}"
    );
}
