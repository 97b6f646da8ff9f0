//! Build, then run: `Application::build(settings)` wires the runtime and binds
//! the listener (port 0 allowed, for tests); `run_until_stopped` serves.

use crate::access::cors::CorsPolicy;
use crate::access::limits::Limits;
use crate::access::Access;
use std::sync::Arc;
use std::time::Duration;

use std::net::ToSocketAddrs;

use actix_web::dev::Server;
use actix_web::{web, App};
use actors::model::catalog::StandardCatalog;
use actors::model::providers::ModelProviders;
use actors::session::{Runtime, SessionConfig, SessionDeps};
use actors::store::memory::MemoryStore;
use actors::store::postgres::{DatabaseCause, DatabaseError, PgStore};
use actors::store::SharedStore;
use actors::tools::ToolRegistry;
use secrecy::ExposeSecret;

use tokio::net::TcpSocket;

use crate::assistant_socket::{AssistantNamespace, NAMESPACE};
use crate::extensions::Extensions;
use crate::models_info::ModelsInfo;
use crate::mount::Assistant;
use crate::observability::timed_store::TimedStore;
use crate::observability::Metrics;
use crate::settings::Settings;
use crate::socketio::{http_service, ClientAddress, SocketIo, SocketIoConfig};

/// `trusted_local` makes every caller an admin: say so loudly when the
/// server listens beyond loopback without a token.
fn warn_if_exposed(settings: &Settings) {
    let open = matches!(
        settings.access.mode,
        crate::access_settings::AccessMode::TrustedLocal { token: None }
    );
    let loopback = matches!(
        settings.host.as_str(),
        "127.0.0.1" | "localhost" | "::1" | "[::1]"
    );
    if open && !loopback {
        log::warn!(
            "ACCESS__MODE=trusted_local without ACCESS__LOCAL_TOKEN on {}: every caller is an admin; set ACCESS__LOCAL_TOKEN or ACCESS__MODE=header/jwt",
            settings.host
        );
    }
}

/// Pending connections the kernel may queue before the server accepts them.
const LISTEN_BACKLOG: u32 = 4096;

pub struct Application {
    port: u16,
    server: Server,
}

#[derive(Debug)]
pub struct StartupError(pub String);

impl std::fmt::Display for StartupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for StartupError {}

impl Application {
    pub async fn build(settings: Settings) -> Result<Application, StartupError> {
        Application::build_extended(settings, Extensions::default()).await
    }

    /// `build` with a Rust host's additions (`embed::AssistantDefinition`).
    pub(crate) async fn build_extended(
        settings: Settings,
        extensions: Extensions,
    ) -> Result<Application, StartupError> {
        match &settings.database_url {
            None => {
                let memory = Arc::new(match settings.max_memory_sessions {
                    0 => MemoryStore::new(),
                    max => MemoryStore::bounded(max),
                });
                Application::build_inner(settings, memory.clone(), Some(memory), extensions).await
            }
            Some(url) => {
                let store = Arc::new(open_postgres(&settings, url.expose_secret()).await?);
                Application::build_inner(settings, store, None, extensions).await
            }
        }
    }

    /// `build` with a store made by the caller (tests wrap one to inject faults).
    pub async fn build_with_store(
        settings: Settings,
        store: SharedStore,
    ) -> Result<Application, StartupError> {
        Application::build_inner(settings, store, None, Extensions::default()).await
    }

    async fn build_inner(
        settings: Settings,
        store: SharedStore,
        memory: Option<Arc<MemoryStore>>,
        extensions: Extensions,
    ) -> Result<Application, StartupError> {
        let (assistant, store_kind) =
            Application::assemble(&settings, store, memory, extensions).await?;
        Application::serve(&settings, assistant, store_kind)
    }

    /// The assistant a Rust host mounts (`embed::AssistantDefinition::assistant`).
    pub(crate) async fn assemble_for_host(
        settings: Settings,
        extensions: Extensions,
    ) -> Result<Assistant, StartupError> {
        let (store, memory): (SharedStore, _) = match &settings.database_url {
            None => {
                let memory = Arc::new(match settings.max_memory_sessions {
                    0 => MemoryStore::new(),
                    max => MemoryStore::bounded(max),
                });
                (memory.clone(), Some(memory))
            }
            Some(url) => (
                Arc::new(open_postgres(&settings, url.expose_secret()).await?),
                None,
            ),
        };
        let (assistant, _) = Application::assemble(&settings, store, memory, extensions).await?;
        Ok(assistant)
    }

    /// Builds the assistant (store wrapping, MCP servers, runtime, access,
    /// Socket.IO) from the settings and a host's additions, without serving it.
    pub(crate) async fn assemble(
        settings: &Settings,
        store: SharedStore,
        memory: Option<Arc<MemoryStore>>,
        mut extensions: Extensions,
    ) -> Result<(Assistant, &'static str), StartupError> {
        if let Some(hours) = settings.session_ttl_hours {
            spawn_session_purge(store.clone(), Duration::from_secs(hours * 3600));
        }
        // MCP servers connect before serving; one that fails is reported, not fatal.
        let reserved: Vec<String> = actors::tools::BackendTool::ALL
            .iter()
            .map(|tool| tool.name().to_string())
            .chain(settings.host_tools.iter().map(|tool| tool.name.clone()))
            .chain(extensions.tools.iter().map(|tool| tool.name().to_string()))
            .collect();
        let mcp =
            crate::mcp::connect_all(&settings.mcp_servers, settings.mcp_call_timeout, &reserved)
                .await;
        extensions.tools.extend(mcp.tools);
        extensions.mcp_servers = mcp.servers;
        let metrics = Arc::new(Metrics::default());
        spawn_stored_session_count(
            store.clone(),
            metrics.clone(),
            settings.deployment.stored_sessions_interval,
        );
        let store = TimedStore::wrap(store, metrics.clone());
        let runtime = build_runtime_with(settings, store, &extensions);
        if let Some(memory) = memory {
            // The bounded memory store never evicts a session whose actor is live.
            let live = runtime.liveness();
            memory.set_evictable(move |id| !live(id));
        }
        let models = ModelsInfo::from_settings(settings);
        for near_miss in &settings.near_misses {
            log::warn!(
                "{} (LLM__REQUIRE_USABLE=true makes this a startup error)",
                near_miss.sentence()
            );
        }
        if settings.model_fallback {
            // The documented default, not a fault: said, not warned.
            log::info!(
                "no provider key configured (OPENAI_API_KEY, ANTHROPIC_API_KEY): starting on builtin:echo"
            );
        }
        if let Some(problem) = settings.model_problem() {
            log::warn!("{problem}: turns on it will fail (LLM__REQUIRE_USABLE=true makes this a startup error)");
        }
        let store_kind = runtime.deps().store.kind();
        runtime.start_idle_sweeper();
        // Items a database holds waiting (posted before a restart) are
        // drained here like new ones.
        match runtime.deps().inbox.load().await {
            Ok(0) => {}
            Ok(n) => log::info!("inbox: {n} item(s) waiting for the next turn"),
            Err(error) => log::warn!("inbox: waiting items not loaded ({error})"),
        }
        crate::ingress::start_heartbeat(runtime.clone(), &settings.heartbeat);
        let max_body = settings.max_body_bytes;
        let access = Arc::new(
            Access::new(&settings.access, extensions.authenticate.clone())
                .map_err(StartupError)?
                .with_metrics_token(settings.deployment.metrics_token.clone()),
        );
        warn_if_exposed(settings);
        let cors = Arc::new(CorsPolicy::new(&settings.access.cors).map_err(StartupError)?);
        let limits = Limits::new(
            settings.turns_per_minute,
            settings.live_sessions_per_principal,
        );
        let socket_io = SocketIo::new(SocketIoConfig {
            ping_interval: settings.ping_interval,
            ping_timeout: settings.ping_timeout,
            max_payload: settings.max_payload,
            handshake_headers: access.handshake_headers(),
            origin_policy: Some(cors.socket_policy()),
            cors_credentials: cors.credentials(),
            max_sessions_per_ip: settings.max_sessions_per_ip,
            body_timeout: settings.body_timeout,
            max_event_depth: actors::contract::MAX_JSON_DEPTH,
            client_address: Some(ClientAddress(Arc::new(crate::access::proxies::client_ip))),
            ..SocketIoConfig::default()
        })
        .namespace(
            NAMESPACE,
            AssistantNamespace::new(
                runtime.clone(),
                metrics.clone(),
                access.clone(),
                limits.clone(),
            ),
        );
        let assistant = Assistant {
            runtime: web::Data::new(runtime),
            models: web::Data::new(models),
            metrics: web::Data::from(metrics),
            access: web::Data::from(access),
            limits: web::Data::from(limits),
            body_limits: web::Data::new(crate::body::BodyLimits {
                max_bytes: max_body,
                timeout: settings.body_timeout,
            }),
            trusted_proxies: web::Data::new(settings.deployment.trusted_proxies.clone()),
            cors,
            socket_io,
            max_body,
        };
        Ok((assistant, store_kind))
    }

    /// Serves `assistant` as the whole server on the settings' address.
    fn serve(
        settings: &Settings,
        assistant: Assistant,
        store_kind: &str,
    ) -> Result<Application, StartupError> {
        let header_timeout = settings.header_timeout;
        let make_app = move || {
            let routes = assistant.clone();
            App::new()
                .configure(move |cfg| routes.register(cfg))
                // Socket.IO answers CORS itself (same policy); everything
                // else goes through actix-cors.
                .wrap(assistant.cors.middleware(&crate::socketio::PATHS))
                // Wrapped last, so outermost: JSON error pages (a refused
                // origin's 400 included), then the access log, which sees
                // the final status.
                .wrap(crate::edge::Edge {
                    max_body: assistant.max_body,
                })
                .default_service(web::to(crate::mount::not_found))
        };
        let listeners = bind_listeners(&settings.host, settings.port).map_err(|error| {
            StartupError(format!(
                "cannot listen on {}:{}: {error}",
                settings.host, settings.port
            ))
        })?;
        let port = listeners
            .first()
            .and_then(|listener| listener.local_addr().ok())
            .map(|addr| addr.port())
            .unwrap_or(settings.port);
        let mut builder = actix_server::Server::build().backlog(LISTEN_BACKLOG);
        if let Some(workers) = settings.workers {
            builder = builder.workers(workers.get());
        }
        for listener in listeners {
            let addr = listener.local_addr().map_err(|error| {
                StartupError(format!("cannot read the listening address: {error}"))
            })?;
            let make_app = make_app.clone();
            builder = builder
                .listen(format!("assistant-runtime-{addr}"), listener, move || {
                    http_service(make_app.clone(), addr, header_timeout)
                })
                .map_err(|error| StartupError(format!("cannot listen on {addr}: {error}")))?;
        }
        log::info!(
            "assistant-runtime listening on {}:{port} (model {}, store {store_kind})",
            settings.host,
            settings.primary_model,
        );
        let page = page_address(&settings.host, port);
        log::info!("playground {page}/ · API docs {page}/docs");
        Ok(Application {
            port,
            server: builder.run(),
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub async fn run_until_stopped(self) -> std::io::Result<()> {
        self.server.await
    }
}

/// Listeners on every address `host` resolves to (like `HttpServer::bind`:
/// an error only if none works), with `SO_REUSEADDR` and a backlog of
/// `LISTEN_BACKLOG`.
fn bind_listeners(host: &str, port: u16) -> std::io::Result<Vec<std::net::TcpListener>> {
    let mut listeners = Vec::new();
    let mut last_error = None;
    for addr in (host, port).to_socket_addrs()? {
        let bound = (|| {
            let socket = if addr.is_ipv4() {
                TcpSocket::new_v4()?
            } else {
                TcpSocket::new_v6()?
            };
            socket.set_reuseaddr(true)?;
            socket.bind(addr)?;
            socket.listen(LISTEN_BACKLOG)?.into_std()
        })();
        match bound {
            Ok(listener) => listeners.push(listener),
            Err(error) => last_error = Some(error),
        }
    }
    match (listeners.is_empty(), last_error) {
        (false, _) => Ok(listeners),
        (true, Some(error)) => Err(error),
        (true, None) => Err(std::io::Error::other("the host resolves to no address")),
    }
}

/// How often sessions past `ASSISTANT__SESSION_TTL_HOURS` are deleted (and once at startup).
const SESSION_PURGE_INTERVAL: Duration = Duration::from_secs(600);

/// Opens the Postgres store and migrates it. With `DATABASE__REQUIRED=true` a
/// database that cannot be used stops startup, the message naming the cause
/// (`unreachable`, `auth_refused`, `database_missing`, `migration_failed`);
/// otherwise the runtime starts anyway, `/health` says 503, and the first
/// request that reaches the database applies the migrations.
pub async fn open_postgres(settings: &Settings, url: &str) -> Result<PgStore, StartupError> {
    let store = PgStore::in_schema(
        url,
        settings.database_pool_size,
        &settings.deployment.database_schema,
    )
    .map_err(|error| StartupError(format!("setting DATABASE_URL: {error}")))?;
    match store.migrate().await {
        Ok(applied) if applied.is_empty() => log::info!("database schema is up to date"),
        Ok(applied) => log::info!("database: applied migrations {applied:?}"),
        // Waiting does not fix a database this binary may not serve.
        Err(error) if error.cause == DatabaseCause::SchemaRefused => {
            return Err(StartupError(format!(
                "refusing the database: {error}"
            )))
        }
        Err(error) if settings.database_required => {
            return Err(StartupError(format!(
                "DATABASE__REQUIRED is true and the database cannot be used: {error}"
            )))
        }
        Err(error) => log::warn!(
            "starting without the database ({error}); requests that need it answer 503 until it is reachable"
        ),
    }
    Ok(store)
}

/// Runs `assistant-runtime migrate`: applies the migrations and returns what it did.
pub async fn migrate_only(settings: &Settings) -> Result<Vec<i32>, StartupError> {
    let Some(url) = &settings.database_url else {
        return Err(StartupError(
            "migrate needs DATABASE_URL (or DATABASE__URL)".into(),
        ));
    };
    let store = PgStore::in_schema(url.expose_secret(), 1, &settings.deployment.database_schema)
        .map_err(|error| StartupError(format!("setting DATABASE_URL: {error}")))?;
    store.migrate().await.map_err(|error: DatabaseError| {
        StartupError(format!("cannot migrate the database: {error}"))
    })
}

/// Deletes expired sessions now and every `SESSION_PURGE_INTERVAL`, for as
/// long as the server runs. A failed round is logged and retried next time.
/// Keeps `assistant_stored_sessions` current on a timer, so a scrape (which
/// anyone allowed may send at any rate) never runs `count(*)` itself.
fn spawn_stored_session_count(store: SharedStore, metrics: Arc<Metrics>, every: Duration) {
    actix_web::rt::spawn(async move {
        let mut interval = actix_web::rt::time::interval(every);
        loop {
            interval.tick().await;
            metrics.set_stored_sessions(store.count().await.ok());
        }
    });
}

fn spawn_session_purge(store: SharedStore, ttl: Duration) {
    actix_web::rt::spawn(async move {
        let mut interval = actix_web::rt::time::interval(SESSION_PURGE_INTERVAL);
        loop {
            interval.tick().await;
            match store.purge_expired(ttl).await {
                Ok(0) => {}
                Ok(n_deleted) => log::info!("deleted {n_deleted} sessions idle for over {ttl:?}"),
                Err(error) => log::warn!("session purge failed: {error}"),
            }
        }
    });
}

pub fn build_runtime(settings: &Settings, store: SharedStore) -> Runtime {
    build_runtime_with(settings, store, &Extensions::default())
}

/// `build_runtime` plus MCP tools and a Rust host's tools, deps, profile and limits.
pub(crate) fn build_runtime_with(
    settings: &Settings,
    store: SharedStore,
    extensions: &Extensions,
) -> Runtime {
    let tools = ToolRegistry {
        host_tools: settings.host_tools.clone(),
        page_scopes: settings.page_scopes.clone(),
        invalidations: settings.invalidations.clone(),
        custom_tools: extensions.tools.clone(),
        mcp_servers: extensions.mcp_servers.clone(),
        deps_factory: extensions.deps.clone(),
    };
    let profile = extensions.profile(settings);
    let deps = SessionDeps {
        inbox: Arc::new(actors::store::Inbox::new(
            store.clone(),
            actors::store::InboxBounds::default(),
        )),
        store,
        models: Arc::new(catalog(settings)),
        invalidations: Arc::new(settings.invalidations.clone()),
        tools,
        config: SessionConfig {
            default_model: settings.primary_model.clone(),
            system_prompt: profile.compose().into(),
            profile,
            max_turns: extensions.max_turns(settings),
            thinking_budget: settings.thinking_budget,
            budget: extensions.budget(settings),
            idle_timeout: settings.session_idle,
            history: settings.history.clone(),
            request_models: settings.request_models.clone(),
            attachment_budget: settings.attachment_budget.clone(),
            traces: actors::trace::TraceConfig {
                store: settings.traces_enabled,
                bounds: settings.trace_bounds,
                observer: crate::observability::otel::observer(settings),
            },
        },
    };
    Runtime::new(deps)
}

fn model_providers(settings: &Settings) -> ModelProviders {
    ModelProviders::new(settings.provider_settings())
}

fn catalog(settings: &Settings) -> StandardCatalog {
    let providers = model_providers(settings);
    StandardCatalog::with_providers(move |id| {
        providers.client_for(id).map_err(|error| error.to_string())
    })
}

/// Where a browser on this machine finds the server: a wildcard listening
/// address is reached through loopback.
fn page_address(host: &str, port: u16) -> String {
    let host = match host {
        "0.0.0.0" | "::" | "[::]" => "127.0.0.1",
        host if host.contains(':') && !host.starts_with('[') => {
            return format!("http://[{host}]:{port}")
        }
        host => host,
    };
    format!("http://{host}:{port}")
}
