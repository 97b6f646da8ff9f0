//! The takeover server: an actix-web `App` served through `actix_http`'s
//! `HttpService` with [`serve_upgrade`] as its upgrade service, so that an
//! accepted websocket leaves the HTTP/1 dispatcher and runs on the socket.

use std::net::SocketAddr;
use std::time::Duration;

use actix_http::body::MessageBody;
use actix_http::{HttpService, KeepAlive, Response};
use actix_service::boxed::rc_service;
use actix_service::{fn_factory, fn_service, map_config, IntoServiceFactory, ServiceFactory};
use actix_service::{ServiceExt, ServiceFactoryExt};
use actix_web::dev::{AppConfig, ServiceRequest, ServiceResponse};
use actix_web::rt::net::TcpStream;
use actix_web::App;

use crate::websocket::{serve_upgrade, AppService};

/// What `actix_web::HttpServer` would serve on one listener (same timeouts,
/// same `AppConfig`), plus an upgrade service: a request with `Connection:
/// upgrade` takes the connection from the h1 dispatcher, so an accepted
/// websocket runs on the socket without the dispatcher's 16 KiB of buffers
/// (see [`serve_upgrade`]). The server binary serves its app with it, and
/// the protocol tests serve theirs the same way.
pub fn http_service<F, T, B>(
    make_app: F,
    addr: SocketAddr,
    header_timeout: Duration,
) -> impl ServiceFactory<
    TcpStream,
    Config = (),
    Response = (),
    Error = actix_http::error::DispatchError,
    InitError = (),
>
where
    F: Fn() -> App<T> + Clone + 'static,
    T: ServiceFactory<
            ServiceRequest,
            Config = (),
            Response = ServiceResponse<B>,
            Error = actix_web::Error,
            InitError = (),
        > + 'static,
    B: MessageBody + 'static,
{
    // The AppConfig HttpServer builds for a listener. Its constructor is
    // pub(crate); `__priv_test_new` is the only other one and is semver-exempt,
    // hence actix-web's minor-version pin in the workspace Cargo.toml.
    let app_config = AppConfig::__priv_test_new(false, addr.to_string(), addr);
    let upgrade = {
        let make_app = make_app.clone();
        let app_config = app_config.clone();
        fn_factory(move || {
            let factory = make_app().into_factory();
            let app_config = app_config.clone();
            async move {
                let app = factory.new_service(app_config).await?;
                let app: AppService = rc_service(app.map(|response: ServiceResponse<B>| {
                    Response::from(response.map_into_boxed_body())
                }));
                Ok::<_, ()>(fn_service(move |(req, framed)| {
                    serve_upgrade(app.clone(), req, framed)
                }))
            }
        })
    };
    let app = make_app()
        .into_factory()
        .map_err(|error: actix_web::Error| error.error_response());
    HttpService::build()
        .keep_alive(KeepAlive::default())
        .client_request_timeout(header_timeout)
        .client_disconnect_timeout(Duration::from_secs(1))
        .h1_allow_half_closed(true)
        // Without it a websocket's second small frame (the first delta after
        // `turn_started`) waits for the client's delayed ACK: ~40 ms a turn.
        // HTTP answers are one write each and lose nothing by it.
        .tcp_nodelay(true)
        .local_addr(addr)
        .upgrade(upgrade)
        .finish(map_config(app, move |()| app_config.clone()))
        .tcp()
}
