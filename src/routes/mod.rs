//! The HTTP routes of runtime.md section 1. Handlers parse, make one call on
//! the `Runtime`, and write back what it answers.
//!
//! A route is declared once, by its handler's `#[utoipa::path]` (method,
//! path, parameters, responses), and listed once, in `routes!`. From that
//! list come both the OpenAPI document's paths and the registration: each
//! path of the document becomes one actix resource whose methods are the
//! handlers the document names for it (by operation id, the handler's
//! name). So the served routes, [`route_table`] and `/openapi.json` cannot
//! differ.

mod chat;
mod health;
mod idempotency;
mod ingress;
pub mod openapi;
mod owner;
mod sessions;

use actix_web::http::Method;
use actix_web::{web, Route};
use utoipa::openapi::path::{Operation, PathItem};
use utoipa::OpenApi;

use crate::{agui, api_docs, playground};

/// Lists the handlers that are routes: their `#[utoipa::path]` become
/// `RoutePaths`'s paths, and `handler` finds each by its operation id.
macro_rules! routes {
    ($($module:ident :: $handler:ident),* $(,)?) => {
        /// Every route's path item, from the handlers' `#[utoipa::path]`.
        #[derive(OpenApi)]
        #[openapi(paths($($module::$handler),*))]
        pub(crate) struct RoutePaths;

        /// The handler whose operation id is `operation_id`, as what
        /// completes a route of its method.
        fn handler(operation_id: &str) -> Option<fn(Route) -> Route> {
            match operation_id {
                $(stringify!($handler) => Some(|route| route.to($module::$handler)),)*
                _ => None,
            }
        }
    };
}

// The message routes, which carry nearly every request, come first: the
// router tries resources in this order (no two paths overlap, so the order
// is otherwise free).
routes![
    chat::post_chat,
    agui::post_agui,
    chat::cancel,
    playground::index,
    health::health,
    health::livez,
    health::readyz,
    health::metrics,
    openapi::openapi,
    api_docs::docs,
    sessions::list,
    sessions::info,
    sessions::delete,
    sessions::messages,
    sessions::tree,
    sessions::traces,
    sessions::repair,
    owner::set_owner,
    ingress::inject_owned,
    ingress::inject,
    ingress::post_inbox,
    ingress::list_inbox,
    ingress::mark_surfaced,
    health::debug_tools,
    health::debug_prompt,
    health::models,
];

/// The operations of a path item, with their methods.
fn operations(item: &PathItem) -> impl Iterator<Item = (Method, &Operation)> {
    [
        (Method::GET, &item.get),
        (Method::POST, &item.post),
        (Method::PUT, &item.put),
        (Method::PATCH, &item.patch),
        (Method::DELETE, &item.delete),
        (Method::HEAD, &item.head),
        (Method::OPTIONS, &item.options),
    ]
    .into_iter()
    .filter_map(|(method, operation)| Some((method, operation.as_ref()?)))
}

/// Every documented route as (method, path), lower-case methods and paths
/// in OpenAPI form, in the order they are registered. The static assets of
/// the playground and the docs page are not routes of the API; Socket.IO's
/// `/socket.io/` is the transport's own.
pub fn route_table() -> Vec<(String, String)> {
    RoutePaths::openapi()
        .paths
        .paths
        .iter()
        .flat_map(|(path, item)| {
            operations(item).map(move |(method, _)| (method.as_str().to_lowercase(), path.clone()))
        })
        .collect()
}

/// One resource per path, so a known path with the wrong method answers
/// 405 (a `Resource` refuses unmatched methods) instead of falling through
/// to the app's 404; `errors::json_error_page` gives that 405 its JSON body.
pub fn configure(cfg: &mut web::ServiceConfig) {
    for (path, item) in RoutePaths::openapi().paths.paths {
        let mut resource = web::resource(path.as_str());
        for (method, operation) in operations(&item) {
            let id = operation.operation_id.as_deref().unwrap_or_default();
            // `routes!` lists each handler it names: a miss is a handler
            // whose operation id was renamed, caught by the unit test below.
            let Some(complete) = handler(id) else {
                panic!("{method} {path}: no handler for operation {id:?}");
            };
            resource = resource.route(complete(web::route().method(method)));
        }
        cfg.service(resource);
    }
    cfg.app_data(web::Data::new(
        openapi::Document::new(RoutePaths::openapi()),
    ));
    cfg.configure(playground::configure_assets)
        .configure(api_docs::configure_assets);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_documented_operation_has_its_handler_once() {
        let table = route_table();
        let mut ids = Vec::new();
        for (_, item) in RoutePaths::openapi().paths.paths {
            for (method, operation) in operations(&item) {
                let id = operation.operation_id.clone().unwrap_or_default();
                assert!(handler(&id).is_some(), "{method}: {id}");
                ids.push(id);
            }
        }
        let count = ids.len();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), count, "two routes share an operation id");
        assert_eq!(ids.len(), table.len());
        assert!(table.contains(&("delete".into(), "/api/sessions/{session_id}".into())));
    }
}
