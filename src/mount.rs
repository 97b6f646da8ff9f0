//! The assembled assistant, ready to serve: its shared state (runtime,
//! access, limits, metrics, Socket.IO sessions) and the routes over it.
//! The standalone server (`startup`) serves it as a whole `App`; a Rust
//! host mounts it under a prefix of its own `App` with [`Assistant::scope`].
//! Both get the same routes, middleware (CORS, the JSON error edge with the
//! access log) and limits.

use std::sync::Arc;

use actix_web::dev::HttpServiceFactory;
use actix_web::{web, HttpResponse};
use actors::session::Runtime;

use crate::access::cors::CorsPolicy;
use crate::access::limits::Limits;
use crate::access::proxies::TrustedProxies;
use crate::access::Access;
use crate::body::BodyLimits;
use crate::errors::ApiError;
use crate::models_info::ModelsInfo;
pub use crate::mount_prefix::MountPrefix;
use crate::observability::Metrics;
use crate::socketio::SocketIo;

/// An assistant built from its settings and a host's definition
/// ([`crate::embed::AssistantDefinition::build`]), to mount in an actix-web
/// `App`. Cheap to clone: clones share the runtime, the sessions and the
/// Socket.IO connections, so build it once and clone it into each worker's
/// `App` factory.
///
/// ```no_run
/// # use assistant_runtime::embed::{Assistant, AssistantDefinition};
/// # use assistant_runtime::settings::SettingsBuilder;
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let settings = SettingsBuilder::new().model("builtin:echo").build()?;
/// let assistant: Assistant = AssistantDefinition::new().assistant(settings).await?;
/// actix_web::HttpServer::new(move || {
///     actix_web::App::new().service(assistant.scope("/assistant"))
/// })
/// .bind(("127.0.0.1", 7100))?
/// .run()
/// .await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Assistant {
    pub(crate) runtime: web::Data<Runtime>,
    pub(crate) models: web::Data<ModelsInfo>,
    pub(crate) metrics: web::Data<Metrics>,
    pub(crate) access: web::Data<Access>,
    pub(crate) limits: web::Data<Limits>,
    pub(crate) body_limits: web::Data<BodyLimits>,
    pub(crate) trusted_proxies: web::Data<TrustedProxies>,
    pub(crate) cors: Arc<CorsPolicy>,
    pub(crate) socket_io: SocketIo,
    pub(crate) max_body: usize,
}

impl std::fmt::Debug for Assistant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Assistant")
            .field("default_model", &self.models.default_model)
            .finish_non_exhaustive()
    }
}

impl Assistant {
    /// The assistant under `prefix` (e.g. `"/assistant"`, no trailing
    /// slash) of a host's `App`: `App::new().service(assistant.scope("/assistant"))`.
    /// It brings the HTTP API, AG-UI, Socket.IO (at `{prefix}/socket.io/`),
    /// the playground (`{prefix}/`), `{prefix}/openapi.json` and
    /// `{prefix}/docs`, with its own CORS policy, access log and JSON
    /// errors; the host's middleware wraps it like any other route.
    /// Websockets run in the host's HTTP dispatcher (see ARCHITECTURE.md
    /// for what that costs per socket against the standalone server).
    pub fn scope(&self, prefix: &str) -> impl HttpServiceFactory + 'static {
        let prefix = prefix.trim_end_matches('/');
        let this = self.clone();
        let mounted = MountPrefix(prefix.to_string());
        web::scope(prefix)
            .app_data(web::Data::new(mounted))
            .configure(move |cfg| this.register(cfg))
            .wrap(self.cors.middleware(&crate::socketio::PATHS))
            .wrap(crate::edge::Edge {
                max_body: self.max_body,
            })
            .default_service(web::to(not_found))
    }

    /// The shared state and every route, relative to where they are mounted.
    pub(crate) fn register(&self, cfg: &mut web::ServiceConfig) {
        cfg.app_data(self.runtime.clone())
            .app_data(self.models.clone())
            .app_data(self.metrics.clone())
            .app_data(self.access.clone())
            .app_data(self.limits.clone())
            .app_data(self.trusted_proxies.clone())
            .app_data(self.body_limits.clone())
            .app_data(web::PayloadConfig::new(self.max_body))
            .app_data(
                web::QueryConfig::default().error_handler(|error, _request| {
                    actix_web::Error::from(ApiError::from(actors::contract::ValidationError {
                        path: "query".into(),
                        message: error.to_string(),
                    }))
                }),
            );
        self.socket_io.configure(cfg);
        crate::routes::configure(cfg);
    }
}

pub(crate) async fn not_found() -> HttpResponse {
    HttpResponse::NotFound().json(crate::errors::no_such_route())
}
