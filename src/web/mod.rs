//! The HTTP layer: routes, extractors, middleware, error mapping and rendering. No SQL here.

pub mod api_caller;
pub mod assets;
pub mod charts;
pub mod client;
pub mod csrf;
pub mod error;
pub mod escape;
pub mod extractors;
pub mod form;
pub mod handlers;
pub mod link_view;
pub mod markdown;
pub mod middleware;
pub mod render;
pub mod routes;
pub mod session_page;
pub mod session_view;
pub mod sign_in;
pub mod sse;

pub use error::WebError;

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceFactory, ServiceRequest, ServiceResponse};
use actix_web::middleware::{ErrorHandlers, from_fn};
use actix_web::{App, web};

use crate::state::AppState;

/// The application: state, middleware, the route table and the friendly 404.
pub fn build_app(
    state: web::Data<AppState>,
) -> App<
    impl ServiceFactory<
        ServiceRequest,
        Config = (),
        Response = ServiceResponse<impl MessageBody>,
        Error = actix_web::Error,
        InitError = (),
    >,
> {
    let https = state.config.is_https();
    let body_limit = state.config.server.max_body_bytes;
    App::new()
        .app_data(state)
        .app_data(web::PayloadConfig::new(body_limit))
        .app_data(web::FormConfig::default().limit(body_limit))
        .app_data(web::JsonConfig::default().limit(body_limit))
        // Innermost first: CSRF refusals become error pages, which get security headers and are logged.
        .wrap(from_fn(middleware::refuse_nul))
        .wrap(from_fn(csrf::csrf_guard))
        .wrap(ErrorHandlers::new().default_handler(error::render_error_page))
        .wrap(middleware::security_headers(https))
        .wrap(from_fn(middleware::request_context))
        .configure(routes::configure)
        .default_service(web::to(not_found))
}

/// No route matched: a JSON error in the API's dialect under `/v1` and `/v1beta`, else the
/// HTML "not found" page.
async fn not_found(req: actix_web::HttpRequest) -> Result<actix_web::HttpResponse, WebError> {
    if handlers::api::is_api_path(req.path()) {
        return Ok(handlers::api::no_route(req).await);
    }
    Err(WebError::NotFound)
}
