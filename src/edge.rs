//! The outermost middleware: what every HTTP reply passes through on its way
//! out. Actix's own error replies become JSON (`errors::json_error_page`),
//! then the access log writes its line, counts the request and echoes its
//! id (`observability::access_log`), so the line and the metrics see the
//! final status. One layer with a future of its own, not two actix
//! middlewares: `middleware::from_fn` boxed two futures a request and
//! `ErrorHandlers` cloned three `Rc`s and hashed the status of every reply.

use std::future::{ready, Future, Ready};
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use actix_web::body::EitherBody;
use actix_web::dev::{forward_ready, Service, ServiceRequest, ServiceResponse, Transform};
use actix_web::Error;

use crate::errors::json_error_page;
use crate::observability::access_log::AccessLine;

/// See the module doc. `max_body` is named in the JSON of a 413.
pub struct Edge {
    pub max_body: usize,
}

impl<S, B> Transform<S, ServiceRequest> for Edge
where
    S: Service<ServiceRequest, Response = ServiceResponse<B>, Error = Error>,
{
    type Response = ServiceResponse<EitherBody<B>>;
    type Error = Error;
    type Transform = EdgeService<S>;
    type InitError = ();
    type Future = Ready<Result<EdgeService<S>, ()>>;

    fn new_transform(&self, service: S) -> Self::Future {
        ready(Ok(EdgeService {
            service,
            max_body: self.max_body,
        }))
    }
}

pub struct EdgeService<S> {
    service: S,
    max_body: usize,
}

impl<S, B> Service<ServiceRequest> for EdgeService<S>
where
    S: Service<ServiceRequest, Response = ServiceResponse<B>, Error = Error>,
{
    type Response = ServiceResponse<EitherBody<B>>;
    type Error = Error;
    type Future = EdgeFuture<S::Future>;

    forward_ready!(service);

    fn call(&self, request: ServiceRequest) -> Self::Future {
        let line = AccessLine::begin(&request);
        EdgeFuture {
            inner: self.service.call(request),
            line: Some(line),
            max_body: self.max_body,
        }
    }
}

pin_project_lite::pin_project! {
    pub struct EdgeFuture<F> {
        #[pin]
        inner: F,
        // Taken when the reply is ready.
        line: Option<AccessLine>,
        max_body: usize,
    }
}

impl<F, B> Future for EdgeFuture<F>
where
    F: Future<Output = Result<ServiceResponse<B>, Error>>,
{
    type Output = Result<ServiceResponse<EitherBody<B>>, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let result = ready!(this.inner.poll(cx));
        let max_body = *this.max_body;
        // An error the service returned instead of a reply passes on, as it
        // did through actix's `ErrorHandlers`: actix answers it from its
        // `ResponseError` (the handlers' own errors reply in JSON).
        let result = result.map(|response| {
            let status = response.status();
            if status.is_client_error() || status.is_server_error() {
                json_error_page(response, max_body)
            } else {
                response.map_into_left_body()
            }
        });
        let line = this
            .line
            .take()
            .expect("EdgeFuture polled after it was ready");
        Poll::Ready(line.finish(result))
    }
}
