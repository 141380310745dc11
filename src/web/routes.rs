//! The one route table: registration and the authorization test both read it.

use actix_web::body::BoxBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::Method;
use actix_web::middleware::{Next, from_fn};
use actix_web::{Error, Route, web};

use super::{WebError, handlers};

/// Who may call a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Anyone, signed in or not.
    Public,
    /// A signed-in, active user; objects are scoped to their owner.
    User,
    /// A signed-in admin.
    Admin,
}

/// A route's method, path pattern and access level.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteSpec {
    /// HTTP method.
    pub method: Method,
    /// actix path pattern.
    pub path: &'static str,
    /// Who may call it.
    pub access: Access,
}

/// A route as registered: its spec and handler.
pub struct RouteEntry {
    /// What the authorization test checks.
    pub spec: RouteSpec,
    /// The handler.
    pub route: Route,
}

fn entry(method: Method, path: &'static str, access: Access, route: Route) -> RouteEntry {
    RouteEntry { spec: RouteSpec { method, path, access }, route }
}

/// Every route Arbor serves.
pub fn table() -> Vec<RouteEntry> {
    use Access::*;
    use handlers::{
        account, activity, admin, agent, api, assets, auth, events, files, health, home, invitations,
        key_models, links, memory, oidc, prompts, scim, search, sessions, settings, shares, transfer,
        workspaces,
    };
    vec![
        entry(Method::GET, "/", Public, web::get().to(home::index)),
        entry(Method::GET, "/healthz", Public, web::get().to(health::healthz)),
        entry(Method::GET, "/readyz", Public, web::get().to(health::readyz)),
        // A scraper's token is checked by the extractor; off unless configured.
        entry(Method::GET, "/metrics", Public, web::get().to(health::metrics)),
        entry(Method::GET, "/static/{path:.*}", Public, web::get().to(assets::serve)),
        entry(Method::GET, "/login", Public, web::get().to(auth::login_form)),
        // The API authenticates by token inside the handler; cookies are not accepted there.
        // The sessions API: tokens of scope `sessions` or `full`, checked by `ApiCaller`.
        entry(Method::GET, "/v1/workspaces", Public, web::get().to(api::sessions::workspaces)),
        entry(Method::POST, "/v1/workspaces", Public, web::post().to(api::sessions::create_workspace)),
        entry(
            Method::GET,
            "/v1/workspaces/{id}/sessions",
            Public,
            web::get().to(api::sessions::workspace_sessions),
        ),
        entry(
            Method::POST,
            "/v1/workspaces/{id}/sessions",
            Public,
            web::post().to(api::sessions::create_session),
        ),
        entry(Method::GET, "/v1/sessions/{id}", Public, web::get().to(api::sessions::session)),
        entry(Method::PATCH, "/v1/sessions/{id}", Public, web::patch().to(api::sessions::update_session)),
        entry(Method::DELETE, "/v1/sessions/{id}", Public, web::delete().to(api::sessions::delete_session)),
        entry(Method::GET, "/v1/sessions/{id}/events", Public, web::get().to(api::session_events::events)),
        entry(Method::GET, "/v1/sessions/{id}/ws", Public, web::get().to(api::session_ws::connect)),
        entry(Method::GET, "/v1/sessions/{id}/activity", Public, web::get().to(api::sessions::activity)),
        entry(Method::POST, "/v1/sessions/{id}/messages", Public, web::post().to(api::sessions::send)),
        entry(
            Method::GET,
            "/v1/sessions/{id}/messages/{message_id}/children",
            Public,
            web::get().to(api::sessions::children),
        ),
        entry(
            Method::POST,
            "/v1/sessions/{id}/messages/{message_id}/select",
            Public,
            web::post().to(api::sessions::select),
        ),
        entry(
            Method::POST,
            "/v1/sessions/{id}/messages/{message_id}/edit",
            Public,
            web::post().to(api::sessions::edit),
        ),
        entry(
            Method::POST,
            "/v1/sessions/{id}/messages/{message_id}/regenerate",
            Public,
            web::post().to(api::sessions::regenerate),
        ),
        entry(
            Method::POST,
            "/v1/sessions/{id}/messages/{message_id}/continue",
            Public,
            web::post().to(api::sessions::resume),
        ),
        entry(Method::POST, "/v1/sessions/{id}/stop", Public, web::post().to(api::sessions::stop)),
        entry(
            Method::POST,
            "/v1/sessions/{id}/tool-calls/{call_id}/decision",
            Public,
            web::post().to(api::sessions::decide),
        ),
        entry(Method::GET, "/v1/models", Public, web::get().to(api::models)),
        entry(Method::POST, "/v1/chat/completions", Public, web::post().to(api::chat_completions)),
        entry(Method::POST, "/v1/embeddings", Public, web::post().to(api::embeddings)),
        entry(Method::POST, "/v1/responses", Public, web::post().to(api::create_response)),
        entry(Method::GET, "/v1/responses/{id}", Public, web::get().to(api::get_response)),
        entry(Method::DELETE, "/v1/responses/{id}", Public, web::delete().to(api::delete_response)),
        entry(Method::POST, "/v1/messages", Public, web::post().to(api::messages)),
        entry(Method::POST, "/v1/messages/count_tokens", Public, web::post().to(api::count_tokens)),
        entry(Method::GET, "/v1/openapi.json", Public, web::get().to(api::openapi)),
        // Directory provisioning authenticates by a SCIM token inside the handler.
        entry(Method::GET, "/scim/v2/ServiceProviderConfig", Public, web::get().to(scim::config)),
        entry(Method::GET, "/scim/v2/ResourceTypes", Public, web::get().to(scim::resource_types)),
        entry(Method::GET, "/scim/v2/ResourceTypes/{name}", Public, web::get().to(scim::resource_type)),
        entry(Method::GET, "/scim/v2/Schemas", Public, web::get().to(scim::schemas)),
        entry(Method::GET, "/scim/v2/Schemas/{id}", Public, web::get().to(scim::schema)),
        entry(Method::GET, "/scim/v2/Users", Public, web::get().to(scim::list_users)),
        entry(Method::POST, "/scim/v2/Users", Public, web::post().to(scim::create_user)),
        entry(Method::GET, "/scim/v2/Users/{id}", Public, web::get().to(scim::get_user)),
        entry(Method::PUT, "/scim/v2/Users/{id}", Public, web::put().to(scim::replace_user)),
        entry(Method::PATCH, "/scim/v2/Users/{id}", Public, web::patch().to(scim::patch_user)),
        entry(Method::DELETE, "/scim/v2/Users/{id}", Public, web::delete().to(scim::delete_user)),
        entry(Method::GET, "/scim/v2/Groups", Public, web::get().to(scim::list_groups)),
        entry(Method::POST, "/scim/v2/Groups", Public, web::post().to(scim::create_group)),
        entry(Method::GET, "/scim/v2/Groups/{id}", Public, web::get().to(scim::get_group)),
        entry(Method::PUT, "/scim/v2/Groups/{id}", Public, web::put().to(scim::replace_group)),
        entry(Method::PATCH, "/scim/v2/Groups/{id}", Public, web::patch().to(scim::patch_group)),
        entry(Method::DELETE, "/scim/v2/Groups/{id}", Public, web::delete().to(scim::delete_group)),
        entry(Method::GET, "/v1beta/models", Public, web::get().to(api::gemini_models)),
        entry(Method::GET, "/v1beta/models/{target:.*}", Public, web::get().to(api::gemini_model)),
        entry(Method::POST, "/v1beta/models/{target:.*}", Public, web::post().to(api::gemini_post)),
        entry(Method::POST, "/login", Public, web::post().to(auth::login)),
        entry(Method::POST, "/logout", Public, web::post().to(auth::logout)),
        entry(Method::GET, "/signup", Public, web::get().to(auth::signup_form)),
        entry(Method::POST, "/signup", Public, web::post().to(auth::signup)),
        entry(Method::GET, "/setup/{token}", Public, web::get().to(auth::setup)),
        entry(Method::POST, "/auth/oidc/start", Public, web::post().to(oidc::start)),
        entry(Method::GET, "/auth/oidc/callback", Public, web::get().to(oidc::callback)),
        entry(Method::GET, "/invite/{token}", Public, web::get().to(invitations::show)),
        // A link opens for signed-in people, or for anyone when it is public (checked inside).
        entry(Method::GET, "/l/{token}", Public, web::get().to(links::show)),
        entry(Method::GET, "/l/{token}/files/{hash}", Public, web::get().to(links::file)),
        entry(Method::POST, "/l/{token}/continue", User, web::post().to(links::continue_here)),
        entry(Method::POST, "/invite/{token}", Public, web::post().to(invitations::accept)),
        entry(Method::GET, "/admin/invitations", Admin, web::get().to(invitations::list)),
        entry(Method::POST, "/admin/invitations", Admin, web::post().to(invitations::create)),
        entry(Method::GET, "/admin", Admin, web::get().to(admin::index)),
        entry(Method::GET, "/admin/users", Admin, web::get().to(admin::users)),
        entry(Method::POST, "/admin/users/{id}/status", Admin, web::post().to(admin::set_status)),
        entry(Method::POST, "/admin/users/{id}/role", Admin, web::post().to(admin::set_role)),
        entry(Method::GET, "/admin/users/{id}/delete", Admin, web::get().to(admin::confirm_delete_user)),
        entry(Method::POST, "/admin/users/{id}/delete", Admin, web::post().to(admin::delete_user)),
        // A POST: the export is recorded in the audit log (a GET never writes).
        entry(Method::POST, "/admin/users/{id}/export", Admin, web::post().to(transfer::export_member)),
        entry(Method::GET, "/admin/directory", Admin, web::get().to(admin::directory)),
        entry(Method::POST, "/admin/directory/tokens", Admin, web::post().to(admin::create_scim_token)),
        entry(
            Method::POST,
            "/admin/directory/tokens/{id}/revoke",
            Admin,
            web::post().to(admin::revoke_scim_token),
        ),
        entry(Method::GET, "/admin/links", Admin, web::get().to(admin::links)),
        entry(Method::POST, "/admin/links/{id}/delete", Admin, web::post().to(admin::revoke_link)),
        entry(Method::GET, "/admin/groups", Admin, web::get().to(admin::groups)),
        entry(Method::POST, "/admin/groups", Admin, web::post().to(admin::create_group)),
        entry(Method::GET, "/admin/groups/{id}", Admin, web::get().to(admin::group)),
        entry(Method::POST, "/admin/groups/{id}/rename", Admin, web::post().to(admin::rename_group)),
        entry(Method::POST, "/admin/groups/{id}/grants", Admin, web::post().to(admin::set_group_grants)),
        entry(Method::POST, "/admin/groups/{id}/delete", Admin, web::post().to(admin::delete_group)),
        entry(Method::POST, "/admin/groups/{id}/members", Admin, web::post().to(admin::add_group_member)),
        entry(
            Method::POST,
            "/admin/groups/{id}/members/{user}/remove",
            Admin,
            web::post().to(admin::remove_group_member),
        ),
        entry(Method::GET, "/admin/providers", Admin, web::get().to(admin::providers)),
        entry(Method::POST, "/admin/providers", Admin, web::post().to(admin::create_provider)),
        entry(Method::GET, "/admin/providers/{id}", Admin, web::get().to(admin::provider)),
        entry(Method::POST, "/admin/providers/{id}", Admin, web::post().to(admin::update_provider)),
        entry(Method::POST, "/admin/providers/{id}/delete", Admin, web::post().to(admin::delete_provider)),
        entry(Method::POST, "/admin/providers/{id}/test", Admin, web::post().to(admin::test_provider)),
        entry(Method::POST, "/admin/providers/{id}/models", Admin, web::post().to(admin::set_model_override)),
        entry(Method::POST, "/admin/providers/{id}/keys", Admin, web::post().to(admin::add_key)),
        entry(
            Method::POST,
            "/admin/providers/{id}/keys/{key_id}/delete",
            Admin,
            web::post().to(admin::delete_key),
        ),
        entry(Method::GET, "/admin/quotas", Admin, web::get().to(admin::quotas_show)),
        entry(Method::POST, "/admin/quotas", Admin, web::post().to(admin::quotas_save)),
        entry(Method::GET, "/admin/usage", Admin, web::get().to(admin::usage_show)),
        entry(Method::GET, "/admin/usage.csv", Admin, web::get().to(admin::usage_csv)),
        entry(Method::GET, "/admin/audit", Admin, web::get().to(admin::audit_show)),
        entry(Method::GET, "/admin/mcp", Admin, web::get().to(admin::mcp_show)),
        entry(Method::POST, "/admin/mcp", Admin, web::post().to(admin::mcp_create)),
        entry(Method::POST, "/admin/mcp/{id}", Admin, web::post().to(admin::mcp_update)),
        entry(Method::POST, "/admin/mcp/{id}/delete", Admin, web::post().to(admin::mcp_delete)),
        entry(Method::GET, "/admin/host-folders", Admin, web::get().to(admin::host_folders)),
        entry(Method::POST, "/admin/host-folders", Admin, web::post().to(admin::allow_host_folder)),
        entry(
            Method::POST,
            "/admin/host-folders/{id}/delete",
            Admin,
            web::post().to(admin::remove_host_folder),
        ),
        entry(Method::GET, "/settings", User, web::get().to(settings::show)),
        entry(Method::POST, "/settings/keys", User, web::post().to(settings::add_key)),
        entry(Method::POST, "/settings/keys/{id}", User, web::post().to(settings::replace_key)),
        entry(Method::POST, "/settings/keys/{id}/delete", User, web::post().to(settings::delete_key)),
        entry(Method::POST, "/settings/keys/{id}/test", User, web::post().to(settings::test_key)),
        entry(Method::GET, "/settings/keys/{id}/models", User, web::get().to(key_models::show)),
        entry(Method::POST, "/settings/keys/{id}/models", User, web::post().to(key_models::set)),
        entry(Method::POST, "/settings/model", User, web::post().to(settings::set_model)),
        entry(Method::GET, "/settings/tokens", User, web::get().to(settings::tokens)),
        entry(Method::POST, "/settings/tokens", User, web::post().to(settings::create_token)),
        entry(Method::POST, "/settings/tokens/{id}/revoke", User, web::post().to(settings::revoke_token)),
        entry(Method::GET, "/settings/aliases", User, web::get().to(settings::aliases_show)),
        entry(Method::POST, "/settings/aliases", User, web::post().to(settings::set_alias)),
        entry(Method::POST, "/settings/aliases/{alias}/delete", User, web::post().to(settings::delete_alias)),
        entry(Method::GET, "/settings/approvals", User, web::get().to(agent::approvals)),
        entry(Method::GET, "/search", User, web::get().to(search::search)),
        entry(Method::POST, "/uploads", User, web::post().to(files::upload)),
        entry(Method::POST, "/uploads/{id}/delete", User, web::post().to(files::discard)),
        entry(Method::GET, "/blobs/{hash}", User, web::get().to(files::serve)),
        entry(Method::GET, "/settings/mcp", User, web::get().to(settings::mcp_show)),
        entry(Method::GET, "/settings/memory", User, web::get().to(memory::show)),
        entry(Method::POST, "/settings/memory", User, web::post().to(memory::save)),
        entry(Method::POST, "/settings/mcp", User, web::post().to(settings::mcp_add)),
        entry(Method::POST, "/settings/mcp/{id}/delete", User, web::post().to(settings::mcp_remove)),
        entry(Method::POST, "/settings/mcp/{id}/share", User, web::post().to(settings::mcp_share)),
        entry(Method::POST, "/settings/mcp/{id}/workspace", User, web::post().to(settings::mcp_workspace)),
        entry(Method::GET, "/settings/prompts", User, web::get().to(prompts::show)),
        entry(Method::POST, "/settings/prompts", User, web::post().to(prompts::create)),
        entry(Method::POST, "/settings/prompts/{id}/delete", User, web::post().to(prompts::delete)),
        entry(Method::POST, "/settings/prompts/{id}/share", User, web::post().to(prompts::share)),
        entry(Method::POST, "/settings/approvals/{id}/delete", User, web::post().to(agent::revoke)),
        entry(Method::GET, "/account/sessions", User, web::get().to(account::sessions)),
        entry(Method::POST, "/account/sessions/{id}/revoke", User, web::post().to(account::revoke)),
        entry(Method::GET, "/account/password", User, web::get().to(account::password_form)),
        entry(Method::POST, "/account/password", User, web::post().to(account::change_password)),
        entry(Method::POST, "/admin/models/refresh", Admin, web::post().to(sessions::refresh_models)),
        entry(Method::POST, "/sessions", User, web::post().to(sessions::create)),
        entry(Method::GET, "/s/{session_id}", User, web::get().to(sessions::show)),
        entry(Method::GET, "/s/{session_id}/events", User, web::get().to(events::session_events)),
        entry(Method::POST, "/s/{session_id}/messages", User, web::post().to(sessions::send)),
        entry(Method::POST, "/s/{session_id}/stop", User, web::post().to(sessions::stop)),
        entry(Method::GET, "/s/{session_id}/tool-calls/{call_id}", User, web::get().to(agent::show)),
        entry(Method::GET, "/s/{session_id}/pending-watch", User, web::get().to(agent::pending_watch)),
        entry(
            Method::POST,
            "/s/{session_id}/tool-calls/{call_id}/decision",
            User,
            web::post().to(agent::decide),
        ),
        entry(
            Method::POST,
            "/s/{session_id}/tool-calls/{call_id}/resume",
            User,
            web::post().to(agent::resume),
        ),
        entry(Method::POST, "/s/{session_id}/files", User, web::post().to(agent::choose_file)),
        entry(
            Method::POST,
            "/s/{session_id}/messages/{message_id}/continue",
            User,
            web::post().to(sessions::resume),
        ),
        entry(
            Method::POST,
            "/s/{session_id}/messages/{message_id}/retry",
            User,
            web::post().to(sessions::retry),
        ),
        entry(
            Method::GET,
            "/s/{session_id}/messages/{message_id}/branch",
            User,
            web::get().to(sessions::branch),
        ),
        entry(
            Method::POST,
            "/s/{session_id}/messages/{message_id}/edit",
            User,
            web::post().to(sessions::edit),
        ),
        entry(
            Method::POST,
            "/s/{session_id}/messages/{message_id}/select",
            User,
            web::post().to(sessions::select),
        ),
        entry(
            Method::POST,
            "/s/{session_id}/messages/{message_id}/rewind",
            User,
            web::post().to(sessions::rewind),
        ),
        entry(
            Method::POST,
            "/s/{session_id}/messages/{message_id}/open",
            User,
            web::post().to(sessions::open_message),
        ),
        entry(
            Method::POST,
            "/s/{session_id}/messages/{message_id}/delete",
            User,
            web::post().to(sessions::delete_message),
        ),
        entry(Method::GET, "/s/{session_id}/older", User, web::get().to(sessions::older)),
        entry(Method::GET, "/s/{session_id}/tree", User, web::get().to(sessions::tree)),
        entry(Method::GET, "/s/{session_id}/activity", User, web::get().to(activity::panel)),
        entry(Method::GET, "/s/{session_id}/activity.jsonl", User, web::get().to(activity::download)),
        entry(Method::POST, "/s/{session_id}/settings", User, web::post().to(sessions::save_settings)),
        entry(Method::POST, "/s/{session_id}/prompt-preview", User, web::post().to(sessions::prompt_preview)),
        entry(Method::POST, "/s/{session_id}/rename", User, web::post().to(workspaces::rename_session)),
        entry(Method::POST, "/s/{session_id}/archive", User, web::post().to(workspaces::archive_session)),
        entry(Method::POST, "/s/{session_id}/delete", User, web::post().to(workspaces::delete_session)),
        entry(Method::GET, "/sidebar", User, web::get().to(workspaces::sidebar)),
        entry(Method::POST, "/settings/theme", User, web::post().to(settings::set_theme)),
        entry(Method::POST, "/workspaces", User, web::post().to(workspaces::create)),
        entry(Method::GET, "/w/{workspace_id}", User, web::get().to(workspaces::show)),
        entry(Method::POST, "/w/{workspace_id}", User, web::post().to(workspaces::save)),
        entry(Method::POST, "/w/{workspace_id}/delete", User, web::post().to(workspaces::delete)),
        entry(Method::POST, "/w/{workspace_id}/key", User, web::post().to(workspaces::attach_key)),
        entry(Method::GET, "/w/{workspace_id}/sessions", User, web::get().to(workspaces::sessions_page)),
        entry(Method::POST, "/w/{workspace_id}/shares", User, web::post().to(shares::create)),
        entry(
            Method::POST,
            "/s/{session_id}/messages/{message_id}/share",
            User,
            web::post().to(links::create),
        ),
        entry(Method::GET, "/settings/links", User, web::get().to(links::mine)),
        entry(Method::GET, "/settings/transfer", User, web::get().to(transfer::show)),
        entry(Method::GET, "/settings/export", User, web::get().to(transfer::export_everything)),
        entry(Method::POST, "/settings/imports", User, web::post().to(transfer::import)),
        entry(Method::GET, "/settings/imports/{id}", User, web::get().to(transfer::import_status)),
        entry(Method::GET, "/w/{workspace_id}/export", User, web::get().to(transfer::export_workspace)),
        entry(Method::GET, "/s/{session_id}/export", User, web::get().to(transfer::export_session)),
        entry(Method::POST, "/settings/links/{id}/delete", User, web::post().to(links::revoke_mine)),
        entry(Method::POST, "/w/{workspace_id}/shares/{share_id}", User, web::post().to(shares::change)),
        entry(
            Method::POST,
            "/w/{workspace_id}/shares/{share_id}/delete",
            User,
            web::post().to(shares::revoke),
        ),
    ]
}

/// The specs alone, for tests and docs.
pub fn specs() -> Vec<RouteSpec> {
    table().into_iter().map(|e| e.spec).collect()
}

/// Registers the table, one resource per path so several methods can share it. Paths that
/// share a prefix ending in a parameter (`/s/{session_id}/…`) are registered under one scope of
/// that prefix: actix compiles a regex for every pattern with a parameter (about 15 KB each,
/// per worker), and under the scope the rest of most paths is plain text
/// (BENCHMARKS.md, "Performance work", step 22).
pub fn configure(cfg: &mut web::ServiceConfig) {
    for mount in plan(by_path(table())) {
        cfg.service(mount);
    }
}

/// One path of the table with its routes: `rest` is what is left of `full` to register
/// below the scopes already made.
struct PathRoutes {
    full: &'static str,
    rest: &'static str,
    routes: Vec<Route>,
}

/// How a path is registered: as a resource, or in a scope of a prefix with others.
enum Mount {
    Resource(PathRoutes),
    Scope(&'static str, Vec<Mount>),
}

impl actix_web::dev::HttpServiceFactory for Mount {
    fn register(self, config: &mut actix_web::dev::AppService) {
        match self {
            Mount::Resource(path) => resource(path).register(config),
            Mount::Scope(prefix, inner) => inner
                .into_iter()
                .fold(web::scope(prefix), |scope, mount| scope.service(mount))
                .register(config),
        }
    }
}

/// The table's routes by path, in the table's order, guarded by their access level.
fn by_path(table: Vec<RouteEntry>) -> Vec<PathRoutes> {
    let mut paths: Vec<PathRoutes> = Vec::new();
    for RouteEntry { spec, route } in table {
        let route = guarded(route, spec.access);
        match paths.iter_mut().find(|p| p.full == spec.path) {
            Some(path) => path.routes.push(route),
            None => paths.push(PathRoutes { full: spec.path, rest: spec.path, routes: vec![route] }),
        }
    }
    paths
}

/// The resources and scopes for these paths, in the order of each one's first path. A scope is
/// made for a prefix that two or more paths share and that no other path here could be routed
/// into: actix sends every request matching a scope's prefix into it, and would not try the
/// services after it.
fn plan(paths: Vec<PathRoutes>) -> Vec<Mount> {
    let mut prefixes: Vec<&'static str> = Vec::new();
    for path in &paths {
        if let Some(prefix) = scope_prefix(path.rest)
            && !prefixes.contains(&prefix)
        {
            prefixes.push(prefix);
        }
    }
    prefixes.retain(|prefix| {
        let members = paths.iter().filter(|p| under(prefix, p.rest).is_some()).count();
        members >= 2 && !paths.iter().any(|p| under(prefix, p.rest).is_none() && could_enter(prefix, p.rest))
    });
    /// A path's place: alone, or among a scope's members.
    enum Place {
        Alone(PathRoutes),
        Scoped(&'static str, Vec<PathRoutes>),
    }
    let mut places = Vec::new();
    for path in paths {
        let Some((prefix, rest)) =
            prefixes.iter().find_map(|prefix| Some((*prefix, under(prefix, path.rest)?)))
        else {
            places.push(Place::Alone(path));
            continue;
        };
        let member = PathRoutes { rest, ..path };
        // The scope stays at its first path's place.
        match places.iter_mut().find(|m| matches!(m, Place::Scoped(p, _) if *p == prefix)) {
            Some(Place::Scoped(_, members)) => members.push(member),
            _ => places.push(Place::Scoped(prefix, vec![member])),
        }
    }
    places
        .into_iter()
        .map(|place| match place {
            Place::Alone(path) => Mount::Resource(path),
            Place::Scoped(prefix, members) => Mount::Scope(prefix, plan(members)),
        })
        .collect()
}

fn resource(path: PathRoutes) -> actix_web::Resource {
    let mut resource = web::resource(path.rest);
    if handlers::api::is_api_path(path.full) {
        resource = resource.default_service(web::to(handlers::api::wrong_method));
    }
    for route in path.routes {
        resource = resource.route(route);
    }
    resource
}

/// The start of `path` up to and including its first segment with a parameter, when more
/// segments follow it: `/s/{session_id}` of `/s/{session_id}/messages`. None when that
/// parameter has its own pattern (`{path:.*}` may span segments).
fn scope_prefix(path: &'static str) -> Option<&'static str> {
    let param = path.find('{')?;
    let end = param + path[param..].find('/')?;
    (!path[param..end].contains(':')).then(|| &path[..end])
}

/// What is left of `path` below `prefix`, when `path` is `prefix` or goes on below it.
fn under(prefix: &str, path: &'static str) -> Option<&'static str> {
    let rest = path.strip_prefix(prefix)?;
    (rest.is_empty() || rest.starts_with('/')).then_some(rest)
}

/// Whether a request for `path` could match a scope of `prefix`: each of the prefix's segments
/// could match the path's segment in its place (text against equal text, a parameter against
/// anything not empty).
fn could_enter(prefix: &str, path: &str) -> bool {
    let mut segments = path.split('/');
    for wanted in prefix.split('/') {
        let Some(segment) = segments.next() else {
            return false;
        };
        if segment.contains(':') {
            // A parameter with its own pattern may take any text, slashes included.
            return true;
        }
        let fits = if wanted.starts_with('{') {
            !segment.is_empty()
        } else {
            segment.starts_with('{') || wanted == segment
        };
        if !fits {
            return false;
        }
    }
    true
}

/// The table's access level, enforced before the handler runs: a route cannot be reached by
/// the wrong caller even if its handler forgot to ask for the right extractor.
pub fn guarded(route: Route, access: Access) -> Route {
    match access {
        Access::Public => route,
        Access::User | Access::Admin => {
            route.wrap(from_fn(move |req: ServiceRequest, next: Next<BoxBody>| enforce(access, req, next)))
        }
    }
}

async fn enforce(
    access: Access,
    req: ServiceRequest,
    next: Next<BoxBody>,
) -> Result<ServiceResponse<BoxBody>, Error> {
    // The lookup is cached on the request, so the handler's extractor does not repeat it.
    let refusal = match super::extractors::resolve(req.request().clone()).await {
        Err(e) => Some(e),
        Ok(None) => Some(WebError::Unauthenticated),
        Ok(Some(auth)) if access == Access::Admin && !auth.actor.is_admin() => {
            Some(WebError::Forbidden("This page is for administrators.".into()))
        }
        Ok(Some(_)) => None,
    };
    match refusal {
        // A response, as a refusing extractor makes: the error pages and sign-in redirect apply.
        Some(e) => Ok(req.error_response(e)),
        None => next.call(req).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scope_prefix_ends_at_the_first_parameter_with_segments_after_it() {
        assert_eq!(scope_prefix("/s/{session_id}/messages"), Some("/s/{session_id}"));
        assert_eq!(scope_prefix("/s/{session_id}/messages/{message_id}/edit"), Some("/s/{session_id}"));
        assert_eq!(scope_prefix("/messages/{message_id}/edit"), Some("/messages/{message_id}"));
        assert_eq!(scope_prefix("/s/{session_id}"), None);
        assert_eq!(scope_prefix("/healthz"), None);
        assert_eq!(scope_prefix("/static/{path:.*}"), None);
        assert_eq!(scope_prefix("/v1beta/models/{target:.*}/x"), None);
        assert_eq!(under("/s/{session_id}", "/s/{session_id}"), Some(""));
        assert_eq!(under("/s/{session_id}", "/s/{session_id}/tree"), Some("/tree"));
        assert_eq!(under("/s/{session_id}", "/s/{session_id}x/tree"), None);
    }

    #[test]
    fn a_path_that_a_scope_could_take_is_seen() {
        assert!(could_enter("/s/{session_id}", "/s/new"));
        assert!(could_enter("/s/{session_id}", "/s/{id}/export"));
        assert!(could_enter("/s/{session_id}", "/{kind}/x"));
        assert!(could_enter("/s/{session_id}", "/{rest:.*}"));
        assert!(!could_enter("/s/{session_id}", "/s"));
        assert!(!could_enter("/s/{session_id}", "/settings/keys"));
        assert!(!could_enter("/admin/users/{id}", "/admin/groups/{id}/rename"));
    }

    fn answering(paths: &[&'static str]) -> Vec<PathRoutes> {
        paths
            .iter()
            .map(|&path| PathRoutes {
                full: path,
                rest: path,
                routes: vec![web::get().to(move |req: actix_web::HttpRequest| async move {
                    format!(
                        "{path} {} {}",
                        req.match_pattern().unwrap_or_default(),
                        req.match_info().segment_count()
                    )
                })],
            })
            .collect()
    }

    async fn answers(paths: &[&'static str], requests: &[&str]) -> Vec<String> {
        let app = actix_web::test::init_service(actix_web::App::new().configure(|cfg| {
            for mount in plan(answering(paths)) {
                cfg.service(mount);
            }
        }))
        .await;
        let mut out = Vec::new();
        for uri in requests {
            let req = actix_web::test::TestRequest::get().uri(uri).to_request();
            let res = actix_web::test::call_service(&app, req).await;
            let status = res.status();
            let body = actix_web::test::read_body(res).await;
            out.push(format!("{} {}", status.as_u16(), String::from_utf8_lossy(&body)));
        }
        out
    }

    #[actix_web::test]
    async fn scoped_paths_reach_their_handlers_with_their_whole_pattern_and_parameters() {
        let paths = [
            "/s/{session_id}",
            "/s/{session_id}/tree",
            "/healthz",
            "/s/{session_id}/messages/{message_id}/edit",
            "/s/{session_id}/messages/{message_id}/open",
            "/static/{path:.*}",
        ];
        let got = answers(
            &paths,
            &[
                "/s/a",
                "/s/a/tree",
                "/s/a/messages/b/edit",
                "/s/a/messages/b/open",
                "/static/x/y.css",
                "/s/a/nothing",
            ],
        )
        .await;
        assert_eq!(
            got,
            [
                "200 /s/{session_id} /s/{session_id} 1",
                "200 /s/{session_id}/tree /s/{session_id}/tree 1",
                "200 /s/{session_id}/messages/{message_id}/edit /s/{session_id}/messages/{message_id}/edit 2",
                "200 /s/{session_id}/messages/{message_id}/open /s/{session_id}/messages/{message_id}/open 2",
                "200 /static/{path:.*} /static/{path:.*} 1",
                "404 ",
            ]
        );
    }

    #[actix_web::test]
    async fn no_scope_is_made_where_it_would_take_another_paths_requests() {
        // `/s/new/tree` is tried first; a scope of `/s/{session_id}` made at the place of that
        // prefix's first path would take its requests and answer 404.
        let paths = ["/s/{session_id}", "/s/new/tree", "/s/{session_id}/tree"];
        assert!(!plan(answering(&paths)).iter().any(|m| matches!(m, Mount::Scope(..))));
        let got = answers(&paths, &["/s/new/tree", "/s/a/tree"]).await;
        assert_eq!(got, ["200 /s/new/tree /s/new/tree 0", "200 /s/{session_id}/tree /s/{session_id}/tree 1"]);
    }

    /// The patterns actix compiles to a regex: the ones with a parameter.
    fn parameter_patterns(mounts: &[Mount]) -> usize {
        mounts
            .iter()
            .map(|m| match m {
                Mount::Resource(path) => usize::from(path.rest.contains('{')),
                Mount::Scope(_, inner) => 1 + parameter_patterns(inner),
            })
            .sum()
    }

    #[test]
    fn the_table_is_registered_in_under_half_as_many_patterns_with_parameters_as_it_has_such_paths() {
        let paths = by_path(table());
        let with_parameters = paths.iter().filter(|p| p.full.contains('{')).count();
        let compiled = parameter_patterns(&plan(paths));
        assert!(with_parameters >= 90, "{with_parameters}");
        assert!(compiled * 2 < with_parameters, "{compiled} of {with_parameters}");
    }

    #[test]
    fn the_openapi_document_lists_exactly_the_v1_routes() {
        let mut documented: Vec<(String, String)> = crate::gateway::openapi::ROUTES
            .iter()
            .map(|(m, p, ..)| (m.to_uppercase(), p.to_string()))
            .collect();
        let mut served: Vec<(String, String)> = specs()
            .into_iter()
            .filter(|s| crate::web::handlers::api::is_api_path(s.path))
            .map(|s| (s.method.to_string(), s.path.to_string()))
            .collect();
        documented.sort();
        served.sort();
        assert_eq!(documented, served);
        let doc = crate::gateway::openapi::document();
        assert_eq!(doc["openapi"], "3.1.0");
        assert!(doc["paths"]["/v1/chat/completions"]["post"]["requestBody"].is_object());
        assert!(doc["paths"]["/v1beta/models/{target}"]["post"]["requestBody"].is_object());
    }
}
