//! `config/nginx-sticky.conf` under Debian's nginx (installed by `.ci/run`),
//! started on loopback with its own folder: three runtime processes on one
//! PostgreSQL database behind it, HTTP turns routed by `?session_id=` and by
//! path, and the stock Socket.IO clients (python-socketio, socket.io-client)
//! passing the session in the connect `query`, on polling and on websocket.
//! nginx's access log records which process served each request, so the
//! test shows every request of a session reached one process.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::helpers::tasks_context;
use crate::postgres::{server_on, TestDb};
use crate::process::free_port;
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
