//! Every route in the table, for every kind of caller; and CSRF on every state-changing route.
//! A route without a row here fails `every_route_has_an_authorization_case`.

use actix_web::http::Method;
use arbor::domain::accounts::{Role, UserStatus};
use arbor::web::routes::{Access, specs};
use uuid::Uuid;

use crate::support::{TestApp, TestSession};

/// What each caller gets.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Expect {
    pub(crate) anonymous: u16,
    pub(crate) other_member: u16,
    pub(crate) owner: u16,
    pub(crate) admin: u16,
}

/// How to call a route with the owner's objects, and what each caller gets.
pub(crate) struct Case {
    pub(crate) method: Method,
    pub(crate) pattern: &'static str,
    pub(crate) path: fn(&Ids) -> String,
    pub(crate) body: &'static str,
    pub(crate) expect: Expect,
}

pub(crate) struct Ids {
    session: Uuid,
    /// A stopped answer in the owner's session.
    answer: Uuid,
    /// The user message it answers.
    question: Uuid,
    /// The owner's workspace holding `session`.
    workspace: Uuid,
    /// A workspace and a session of the owner's that the delete rows may remove.
    spare_workspace: Uuid,
    spare_session: Uuid,
    owner_spare_session: String,
    invite_token: String,
    /// An admin-managed provider, a shared key of it, and one the delete row may remove.
    provider: Uuid,
    shared_key: Uuid,
    spare_provider: Uuid,
    /// A member the user rows of the console act on (and finally delete).
    victim: Uuid,
    /// The owner's own provider key.
    own_key: Uuid,
    /// An instance MCP server, and one the delete row may remove.
    mcp: Uuid,
    spare_mcp: Uuid,
    /// The owner's API token.
    token: Uuid,
    /// A tool call proposed in the owner's session (its run is over: deciding it changes nothing).
    call: Uuid,
    /// The owner's "always" rule.
    rule: Uuid,
    /// A host folder allowed for the owner's workspace.
    host_root: Uuid,
    /// The owner's own MCP server.
    own_mcp: Uuid,
    /// The owner's prompt template.
    prompt: Uuid,
    /// An import of the owner's (of an empty export).
    import_job: Uuid,
    /// An upload of the owner's, and the hash of another file the owner keeps.
    upload: Uuid,
    blob: String,
    /// A group (the owner is in it), and one the delete row may remove.
    group: Uuid,
    spare_group: Uuid,
    /// The owner's id (the group's member the remove row takes out).
    owner_id: Uuid,
    /// A share of the spare workspace, with a person who makes no call.
    share: Uuid,
    /// The token of a share link of the owner's session, and two links the revoke rows remove.
    link_token: String,
    spare_link: Uuid,
    admin_link: Uuid,
    /// A SCIM token of the admin's, which the revoke row revokes.
    scim_token: Uuid,
}

const fn all(code: u16) -> Expect {
    Expect { anonymous: code, other_member: code, owner: code, admin: code }
}

/// Pages for the signed-out: anonymous callers get them, signed-in ones are sent on.
const SIGNED_OUT_PAGE: Expect = Expect { anonymous: 200, other_member: 303, owner: 303, admin: 303 };
/// Admin pages: members are forbidden, anonymous callers must sign in.
const ADMIN_ONLY: Expect = Expect { anonymous: 401, other_member: 403, owner: 403, admin: 200 };

/// Signed-out flows that a signed-in caller may not enter.
#[allow(non_snake_case)]
const fn SIGNED_IN_CONFLICT_ELSE(anonymous: u16) -> Expect {
    Expect { anonymous, other_member: 409, owner: 409, admin: 409 }
}

/// The owner's objects: everyone else, admins included, is told they do not exist.
#[allow(non_snake_case)]
const fn OWNER_ONLY(owner: u16) -> Expect {
    Expect { anonymous: 401, other_member: 404, owner, admin: 404 }
}

/// A signed-in user's own page.
const OWN_PAGE: Expect = Expect { anonymous: 401, other_member: 200, owner: 200, admin: 200 };

pub(crate) fn cases() -> Vec<Case> {
    let get = |pattern, path: fn(&Ids) -> String, expect| Case {
        method: Method::GET,
        pattern,
        path,
        body: "",
        expect,
    };
    let post = |pattern, path: fn(&Ids) -> String, body, expect| Case {
        method: Method::POST,
        pattern,
        path,
        body,
        expect,
    };
    vec![
        get("/", |_| "/".into(), all(200)),
        get("/healthz", |_| "/healthz".into(), all(200)),
        get("/readyz", |_| "/readyz".into(), all(200)),
        // Off unless configured (the walk's server has no metrics settings); tests/it/metrics.rs
        // covers the token and the separate address.
        get("/metrics", |_| "/metrics".into(), all(404)),
        get("/static/{path:.*}", |_| "/static/app.css".into(), all(200)),
        get("/login", |_| "/login".into(), SIGNED_OUT_PAGE),
        // The API ignores browser sessions: without a token everyone gets 401.
        get("/v1/models", |_| "/v1/models".into(), all(401)),
        post("/v1/chat/completions", |_| "/v1/chat/completions".into(), "{}", all(401)),
        post("/v1/messages", |_| "/v1/messages".into(), "{}", all(401)),
        post("/v1/messages/count_tokens", |_| "/v1/messages/count_tokens".into(), "{}", all(401)),
        get("/v1/openapi.json", |_| "/v1/openapi.json".into(), all(200)),
        post("/v1/embeddings", |_| "/v1/embeddings".into(), "{}", all(401)),
        post("/v1/responses", |_| "/v1/responses".into(), "{}", all(401)),
        get("/v1/responses/{id}", |_| "/v1/responses/resp_1".into(), all(401)),
        Case {
            method: Method::DELETE,
            pattern: "/v1/responses/{id}",
            path: |_| "/v1/responses/resp_1".into(),
            body: "",
            expect: all(401),
        },
        // The sessions API: tokens only (scopes and other members: tests/it/sessions_api.rs).
        get("/v1/workspaces", |_| "/v1/workspaces".into(), all(401)),
        post("/v1/workspaces", |_| "/v1/workspaces".into(), "{}", all(401)),
        get(
            "/v1/workspaces/{id}/sessions",
            |ids| format!("/v1/workspaces/{}/sessions", ids.workspace),
            all(401),
        ),
        post(
            "/v1/workspaces/{id}/sessions",
            |ids| format!("/v1/workspaces/{}/sessions", ids.workspace),
            "{}",
            all(401),
        ),
        get("/v1/sessions/{id}", |ids| format!("/v1/sessions/{}", ids.session), all(401)),
        Case {
            method: Method::PATCH,
            pattern: "/v1/sessions/{id}",
            path: |ids| format!("/v1/sessions/{}", ids.session),
            body: "{}",
            expect: all(401),
        },
        Case {
            method: Method::DELETE,
            pattern: "/v1/sessions/{id}",
            path: |ids| format!("/v1/sessions/{}", ids.session),
            body: "",
            expect: all(401),
        },
        get("/v1/sessions/{id}/events", |ids| format!("/v1/sessions/{}/events", ids.session), all(401)),
        get("/v1/sessions/{id}/ws", |ids| format!("/v1/sessions/{}/ws", ids.session), all(401)),
        get("/v1/sessions/{id}/activity", |ids| format!("/v1/sessions/{}/activity", ids.session), all(401)),
        post(
            "/v1/sessions/{id}/messages",
            |ids| format!("/v1/sessions/{}/messages", ids.session),
            "{}",
            all(401),
        ),
        get(
            "/v1/sessions/{id}/messages/{message_id}/children",
            |ids| format!("/v1/sessions/{}/messages/{}/children", ids.session, ids.question),
            all(401),
        ),
        post(
            "/v1/sessions/{id}/messages/{message_id}/select",
            |ids| format!("/v1/sessions/{}/messages/{}/select", ids.session, ids.question),
            "",
            all(401),
        ),
        post(
            "/v1/sessions/{id}/messages/{message_id}/edit",
            |ids| format!("/v1/sessions/{}/messages/{}/edit", ids.session, ids.question),
            "{}",
            all(401),
        ),
        post(
            "/v1/sessions/{id}/messages/{message_id}/regenerate",
            |ids| format!("/v1/sessions/{}/messages/{}/regenerate", ids.session, ids.answer),
            "",
            all(401),
        ),
        post(
            "/v1/sessions/{id}/messages/{message_id}/continue",
            |ids| format!("/v1/sessions/{}/messages/{}/continue", ids.session, ids.answer),
            "",
            all(401),
        ),
        post("/v1/sessions/{id}/stop", |ids| format!("/v1/sessions/{}/stop", ids.session), "", all(401)),
        post(
            "/v1/sessions/{id}/tool-calls/{call_id}/decision",
            |ids| format!("/v1/sessions/{}/tool-calls/{}/decision", ids.session, ids.call),
            "{}",
            all(401),
        ),
        get("/v1beta/models", |_| "/v1beta/models".into(), all(401)),
        get("/v1beta/models/{target:.*}", |_| "/v1beta/models/openai/gpt-4o-mini".into(), all(401)),
        post(
            "/v1beta/models/{target:.*}",
            |_| "/v1beta/models/gemini-2.5-flash:generateContent".into(),
            "{}",
            all(401),
        ),
        post("/login", |_| "/login".into(), "email=nobody%40example.com&password=wrong-password", all(401)),
        post("/logout", |_| "/logout".into(), "", all(303)),
        // Self sign-up is off by default, and the setup link is closed once an admin exists.
        get(
            "/signup",
            |_| "/signup".into(),
            Expect { anonymous: 404, other_member: 303, owner: 303, admin: 303 },
        ),
        post(
            "/signup",
            |_| "/signup".into(),
            "email=x%40example.com&display_name=x&password=long-enough-pw",
            all(404),
        ),
        get("/setup/{token}", |_| format!("/setup/{}", "a".repeat(43)), all(404)),
        // The authz app has no provider configured; tests/it/oidc.rs covers these with one.
        post("/auth/oidc/start", |_| "/auth/oidc/start".into(), "next=%2F", all(404)),
        get("/auth/oidc/callback", |_| "/auth/oidc/callback?code=x&state=y".into(), all(404)),
        // An open invitation's link: for the signed-out; signed-in callers are told to sign out.
        get("/invite/{token}", |ids| format!("/invite/{}", ids.invite_token), SIGNED_IN_CONFLICT_ELSE(200)),
        post(
            "/invite/{token}",
            |ids| format!("/invite/{}", ids.invite_token),
            "display_name=x&password=short",
            SIGNED_IN_CONFLICT_ELSE(400),
        ),
        get("/admin/invitations", |_| "/admin/invitations".into(), ADMIN_ONLY),
        post(
            "/admin/invitations",
            |_| "/admin/invitations".into(),
            "email=new%40example.com&role=member",
            ADMIN_ONLY,
        ),
        get(
            "/admin",
            |_| "/admin".into(),
            Expect { anonymous: 401, other_member: 403, owner: 403, admin: 303 },
        ),
        get("/admin/users", |_| "/admin/users?q=example".into(), ADMIN_ONLY),
        post(
            "/admin/users/{id}/status",
            |ids| format!("/admin/users/{}/status", ids.victim),
            "active=1",
            ADMIN_ONLY,
        ),
        post(
            "/admin/users/{id}/role",
            |ids| format!("/admin/users/{}/role", ids.victim),
            "role=member",
            ADMIN_ONLY,
        ),
        post("/admin/users/{id}/export", |ids| format!("/admin/users/{}/export", ids.victim), "", ADMIN_ONLY),
        get("/admin/users/{id}/delete", |ids| format!("/admin/users/{}/delete", ids.victim), ADMIN_ONLY),
        post("/admin/users/{id}/delete", |ids| format!("/admin/users/{}/delete", ids.victim), "", ADMIN_ONLY),
        get("/admin/directory", |_| "/admin/directory".into(), ADMIN_ONLY),
        post("/admin/directory/tokens", |_| "/admin/directory/tokens".into(), "name=authz-idp", ADMIN_ONLY),
        post(
            "/admin/directory/tokens/{id}/revoke",
            |ids| format!("/admin/directory/tokens/{}/revoke", ids.scim_token),
            "",
            ADMIN_ONLY,
        ),
        // Directory provisioning takes only a SCIM token: browser sessions get 401 like nobody.
        get("/scim/v2/ServiceProviderConfig", |_| "/scim/v2/ServiceProviderConfig".into(), all(401)),
        get("/scim/v2/ResourceTypes", |_| "/scim/v2/ResourceTypes".into(), all(401)),
        get("/scim/v2/ResourceTypes/{name}", |_| "/scim/v2/ResourceTypes/User".into(), all(401)),
        get("/scim/v2/Schemas", |_| "/scim/v2/Schemas".into(), all(401)),
        get("/scim/v2/Schemas/{id}", |_| "/scim/v2/Schemas/x".into(), all(401)),
        get("/scim/v2/Users", |_| "/scim/v2/Users".into(), all(401)),
        post("/scim/v2/Users", |_| "/scim/v2/Users".into(), "{}", all(401)),
        get("/scim/v2/Users/{id}", |ids| format!("/scim/v2/Users/{}", ids.victim), all(401)),
        get("/scim/v2/Groups", |_| "/scim/v2/Groups".into(), all(401)),
        post("/scim/v2/Groups", |_| "/scim/v2/Groups".into(), "{}", all(401)),
        get("/scim/v2/Groups/{id}", |ids| format!("/scim/v2/Groups/{}", ids.group), all(401)),
        Case {
            method: Method::PUT,
            pattern: "/scim/v2/Users/{id}",
            path: |ids| format!("/scim/v2/Users/{}", ids.victim),
            body: "{}",
            expect: all(401),
        },
        Case {
            method: Method::PATCH,
            pattern: "/scim/v2/Users/{id}",
            path: |ids| format!("/scim/v2/Users/{}", ids.victim),
            body: "{}",
            expect: all(401),
        },
        Case {
            method: Method::DELETE,
            pattern: "/scim/v2/Users/{id}",
            path: |ids| format!("/scim/v2/Users/{}", ids.victim),
            body: "{}",
            expect: all(401),
        },
        Case {
            method: Method::PUT,
            pattern: "/scim/v2/Groups/{id}",
            path: |ids| format!("/scim/v2/Groups/{}", ids.group),
            body: "{}",
            expect: all(401),
        },
        Case {
            method: Method::PATCH,
            pattern: "/scim/v2/Groups/{id}",
            path: |ids| format!("/scim/v2/Groups/{}", ids.group),
            body: "{}",
            expect: all(401),
        },
        Case {
            method: Method::DELETE,
            pattern: "/scim/v2/Groups/{id}",
            path: |ids| format!("/scim/v2/Groups/{}", ids.group),
            body: "{}",
            expect: all(401),
        },
        get("/admin/links", |_| "/admin/links".into(), ADMIN_ONLY),
        post(
            "/admin/links/{id}/delete",
            |ids| format!("/admin/links/{}/delete", ids.admin_link),
            "",
            ADMIN_ONLY,
        ),
        // Signed-in people of the instance read a link; anyone else is sent to sign in first.
        get(
            "/l/{token}",
            |ids| format!("/l/{}", ids.link_token),
            Expect { anonymous: 303, other_member: 200, owner: 200, admin: 200 },
        ),
        get(
            "/l/{token}/files/{hash}",
            |ids| format!("/l/{}/files/{}", ids.link_token, "0".repeat(64)),
            all(404),
        ),
        post(
            "/l/{token}/continue",
            |ids| format!("/l/{}/continue", ids.link_token),
            "",
            Expect { anonymous: 401, other_member: 303, owner: 303, admin: 303 },
        ),
        post(
            "/s/{session_id}/messages/{message_id}/share",
            |ids| format!("/s/{}/messages/{}/share", ids.session, ids.answer),
            "expires=7",
            OWNER_ONLY(200),
        ),
        get("/settings/links", |_| "/settings/links".into(), OWN_PAGE),
        get("/settings/transfer", |_| "/settings/transfer".into(), OWN_PAGE),
        get("/settings/export", |_| "/settings/export".into(), OWN_PAGE),
        // An empty export: each member's own import starts (202) and makes nothing.
        post(
            "/settings/imports",
            |_| "/settings/imports?name=walk.json".into(),
            r#"{"format":1,"source":"walk","workspaces":[]}"#,
            Expect { anonymous: 401, other_member: 202, owner: 202, admin: 202 },
        ),
        get("/settings/imports/{id}", |ids| format!("/settings/imports/{}", ids.import_job), OWNER_ONLY(200)),
        get("/w/{workspace_id}/export", |ids| format!("/w/{}/export", ids.workspace), OWNER_ONLY(200)),
        get("/s/{session_id}/export", |ids| format!("/s/{}/export", ids.session), OWNER_ONLY(200)),
        post(
            "/settings/links/{id}/delete",
            |ids| format!("/settings/links/{}/delete", ids.spare_link),
            "",
            OWNER_ONLY(200),
        ),
        get("/admin/groups", |_| "/admin/groups".into(), ADMIN_ONLY),
        post("/admin/groups", |_| "/admin/groups".into(), "name=authz-made", ADMIN_ONLY),
        get("/admin/groups/{id}", |ids| format!("/admin/groups/{}", ids.group), ADMIN_ONLY),
        post(
            "/admin/groups/{id}/rename",
            |ids| format!("/admin/groups/{}/rename", ids.group),
            "name=authz-renamed",
            ADMIN_ONLY,
        ),
        post(
            "/admin/groups/{id}/grants",
            |ids| format!("/admin/groups/{}/grants", ids.group),
            "default_role=member&loosest_approval_mode=",
            ADMIN_ONLY,
        ),
        post(
            "/admin/groups/{id}/delete",
            |ids| format!("/admin/groups/{}/delete", ids.spare_group),
            "",
            ADMIN_ONLY,
        ),
        post(
            "/admin/groups/{id}/members",
            |ids| format!("/admin/groups/{}/members", ids.group),
            "email=other%40example.com",
            ADMIN_ONLY,
        ),
        post(
            "/admin/groups/{id}/members/{user}/remove",
            |ids| format!("/admin/groups/{}/members/{}/remove", ids.group, ids.owner_id),
            "",
            ADMIN_ONLY,
        ),
        get("/admin/providers", |_| "/admin/providers".into(), ADMIN_ONLY),
        post(
            "/admin/providers",
            |_| "/admin/providers".into(),
            "name=authz-new&kind=openai",
            Expect { anonymous: 401, other_member: 403, owner: 403, admin: 303 },
        ),
        get("/admin/providers/{id}", |ids| format!("/admin/providers/{}", ids.provider), ADMIN_ONLY),
        post(
            "/admin/providers/{id}",
            |ids| format!("/admin/providers/{}", ids.provider),
            "kind=openai_compatible&base_url=http%3A%2F%2F127.0.0.1%3A9%2Fv1",
            ADMIN_ONLY,
        ),
        // The provider points at a closed port: the test answers with its failure.
        post(
            "/admin/providers/{id}/test",
            |ids| format!("/admin/providers/{}/test", ids.provider),
            "",
            ADMIN_ONLY,
        ),
        post(
            "/admin/providers/{id}/models",
            |ids| format!("/admin/providers/{}/models", ids.provider),
            "model=authz-model&context_window=4096",
            ADMIN_ONLY,
        ),
        post(
            "/admin/providers/{id}/keys",
            |ids| format!("/admin/providers/{}/keys", ids.provider),
            "label=authz&key=sk-authz-shared-1234",
            ADMIN_ONLY,
        ),
        post(
            "/admin/providers/{id}/keys/{key_id}/delete",
            |ids| format!("/admin/providers/{}/keys/{}/delete", ids.provider, ids.shared_key),
            "",
            ADMIN_ONLY,
        ),
        post(
            "/admin/providers/{id}/delete",
            |ids| format!("/admin/providers/{}/delete", ids.spare_provider),
            "",
            Expect { anonymous: 401, other_member: 403, owner: 403, admin: 303 },
        ),
        get("/admin/quotas", |_| "/admin/quotas".into(), ADMIN_ONLY),
        post("/admin/quotas", |_| "/admin/quotas".into(), "tokens_day=1000000", ADMIN_ONLY),
        get("/admin/usage", |_| "/admin/usage?days=7".into(), ADMIN_ONLY),
        get("/admin/usage.csv", |_| "/admin/usage.csv?days=7".into(), ADMIN_ONLY),
        get("/admin/audit", |_| "/admin/audit?action=user.".into(), ADMIN_ONLY),
        get("/admin/mcp", |_| "/admin/mcp".into(), ADMIN_ONLY),
        post(
            "/admin/mcp",
            |_| "/admin/mcp".into(),
            "name=authz-mcp&transport=stdio&command=true",
            ADMIN_ONLY,
        ),
        post(
            "/admin/mcp/{id}",
            |ids| format!("/admin/mcp/{}", ids.mcp),
            "name=kept&transport=stdio&command=true",
            ADMIN_ONLY,
        ),
        post("/admin/mcp/{id}/delete", |ids| format!("/admin/mcp/{}/delete", ids.spare_mcp), "", ADMIN_ONLY),
        get("/admin/host-folders", |_| "/admin/host-folders".into(), ADMIN_ONLY),
        // A relative path is refused, so nothing is allowed by this row.
        post(
            "/admin/host-folders",
            |ids| format!("/admin/host-folders?w={}", ids.workspace),
            "workspace_id=not-a-workspace&path=relative",
            Expect { anonymous: 401, other_member: 403, owner: 403, admin: 400 },
        ),
        post(
            "/admin/host-folders/{id}/delete",
            |ids| format!("/admin/host-folders/{}/delete", ids.host_root),
            "",
            ADMIN_ONLY,
        ),
        get("/settings", |_| "/settings".into(), OWN_PAGE),
        get("/sidebar", |_| "/sidebar".into(), OWN_PAGE),
        // A saved theme reloads the settings page.
        post(
            "/settings/theme",
            |_| "/settings/theme".into(),
            "theme=dark",
            Expect { anonymous: 401, other_member: 303, owner: 303, admin: 303 },
        ),
        post(
            "/settings/keys",
            |_| "/settings/keys".into(),
            "kind=openai&label=mine&key=sk-authz-own-5678",
            OWN_PAGE,
        ),
        // The owner's endpoint is on a closed loopback port the guard refuses: the test reports it.
        post(
            "/settings/keys/{id}/test",
            |ids| format!("/settings/keys/{}/test", ids.own_key),
            "",
            OWNER_ONLY(200),
        ),
        // The endpoint cannot be listed (the guard refuses it): the view says so.
        get(
            "/settings/keys/{id}/models",
            |ids| format!("/settings/keys/{}/models", ids.own_key),
            OWNER_ONLY(200),
        ),
        // Every field empty clears the member's word, which needs no listed model.
        post(
            "/settings/keys/{id}/models",
            |ids| format!("/settings/keys/{}/models", ids.own_key),
            "model=authz-model&tools=",
            OWNER_ONLY(200),
        ),
        post(
            "/settings/keys/{id}",
            |ids| format!("/settings/keys/{}", ids.own_key),
            "label=renamed&key=",
            OWNER_ONLY(200),
        ),
        post(
            "/settings/keys/{id}/delete",
            |ids| format!("/settings/keys/{}/delete", ids.own_key),
            "",
            OWNER_ONLY(200),
        ),
        post("/settings/model", |_| "/settings/model".into(), "model=", OWN_PAGE),
        get("/settings/tokens", |_| "/settings/tokens".into(), OWN_PAGE),
        post(
            "/settings/tokens",
            |_| "/settings/tokens".into(),
            "name=authz&scope=api&expires_days=30",
            OWN_PAGE,
        ),
        post(
            "/settings/tokens/{id}/revoke",
            |ids| format!("/settings/tokens/{}/revoke", ids.token),
            "",
            OWNER_ONLY(200),
        ),
        get("/settings/aliases", |_| "/settings/aliases".into(), OWN_PAGE),
        post(
            "/settings/aliases",
            |_| "/settings/aliases".into(),
            "alias=fast&target=openai%2Fgpt-4.1",
            OWN_PAGE,
        ),
        // Each caller's own alias of that name: the owner's exists, the others' do not.
        post(
            "/settings/aliases/{alias}/delete",
            |_| "/settings/aliases/authz-alias/delete".into(),
            "",
            OWNER_ONLY(200),
        ),
        get("/settings/approvals", |_| "/settings/approvals".into(), OWN_PAGE),
        get("/search", |_| "/search?q=needle".into(), OWN_PAGE),
        // Every signed-in caller stores a file of their own.
        post("/uploads", |_| "/uploads?name=a.txt".into(), "hello", OWN_PAGE),
        post("/uploads/{id}/delete", |ids| format!("/uploads/{}/delete", ids.upload), "", OWNER_ONLY(200)),
        // Knowing the hash grants nothing (the other callers uploaded other bytes).
        get("/blobs/{hash}", |ids| format!("/blobs/{}", ids.blob), OWNER_ONLY(200)),
        get("/settings/memory", |_| "/settings/memory".into(), OWN_PAGE),
        // Each caller's own memory; another's workspace as scope is a 404 (context::memory_*).
        post("/settings/memory", |_| "/settings/memory".into(), "scope=member&content=Likes+tea", OWN_PAGE),
        get("/settings/mcp", |_| "/settings/mcp".into(), OWN_PAGE),
        // A loopback URL is refused for everyone: nothing is added by this row.
        post(
            "/settings/mcp",
            |_| "/settings/mcp".into(),
            "name=mine&url=http%3A%2F%2F127.0.0.1%3A9%2Fmcp",
            Expect { anonymous: 401, other_member: 400, owner: 400, admin: 400 },
        ),
        get("/settings/prompts", |_| "/settings/prompts".into(), OWN_PAGE),
        post("/settings/prompts", |_| "/settings/prompts".into(), "name=Mine&body=Be+brief.", OWN_PAGE),
        post(
            "/settings/prompts/{id}/share",
            |ids| format!("/settings/prompts/{}/share", ids.prompt),
            "group=",
            OWNER_ONLY(200),
        ),
        post(
            "/settings/prompts/{id}/delete",
            |ids| format!("/settings/prompts/{}/delete", ids.prompt),
            "",
            OWNER_ONLY(200),
        ),
        post(
            "/settings/mcp/{id}/share",
            |ids| format!("/settings/mcp/{}/share", ids.own_mcp),
            "group=",
            OWNER_ONLY(200),
        ),
        post(
            "/settings/mcp/{id}/workspace",
            |ids| format!("/settings/mcp/{}/workspace", ids.own_mcp),
            "workspace=",
            OWNER_ONLY(200),
        ),
        post(
            "/settings/mcp/{id}/delete",
            |ids| format!("/settings/mcp/{}/delete", ids.own_mcp),
            "",
            OWNER_ONLY(200),
        ),
        post(
            "/settings/approvals/{id}/delete",
            |ids| format!("/settings/approvals/{}/delete", ids.rule),
            "",
            OWNER_ONLY(200),
        ),
        get("/account/sessions", |_| "/account/sessions".into(), OWN_PAGE),
        post(
            "/account/sessions/{id}/revoke",
            |ids| format!("/account/sessions/{}/revoke", ids.owner_spare_session),
            "",
            // Only the owner can end the owner's session; for anyone else it does not exist.
            Expect { anonymous: 401, other_member: 404, owner: 303, admin: 404 },
        ),
        get("/account/password", |_| "/account/password".into(), OWN_PAGE),
        // Test users have no password, so a change is refused as invalid, never forbidden.
        post(
            "/account/password",
            |_| "/account/password".into(),
            "current=a&new=b",
            Expect { anonymous: 401, other_member: 400, owner: 400, admin: 400 },
        ),
        get(
            "/s/{session_id}/events",
            |ids| format!("/s/{}/events", ids.session),
            // Someone else's session is indistinguishable from a missing one; admins included.
            Expect { anonymous: 401, other_member: 404, owner: 200, admin: 404 },
        ),
        post("/admin/models/refresh", |_| "/admin/models/refresh".into(), "", ADMIN_ONLY),
        // The instance's providers are off, but by now everyone has a key of their own (the
        // "/settings/keys" row): a signed-in submit opens the new session.
        post(
            "/sessions",
            |_| "/sessions".into(),
            "message=hello&client_id=authz-new-session",
            Expect { anonymous: 401, other_member: 303, owner: 303, admin: 303 },
        ),
        get("/s/{session_id}", |ids| format!("/s/{}", ids.session), OWNER_ONLY(200)),
        post(
            "/s/{session_id}/messages",
            |ids| format!("/s/{}/messages", ids.session),
            "message=hello&client_id=authz-send",
            OWNER_ONLY(400),
        ),
        post("/s/{session_id}/stop", |ids| format!("/s/{}/stop", ids.session), "", OWNER_ONLY(204)),
        get(
            "/s/{session_id}/messages/{message_id}/branch",
            |ids| format!("/s/{}/messages/{}/branch", ids.session, ids.question),
            OWNER_ONLY(200),
        ),
        // Nothing waits in the owner's session (its run is over): nothing to reload.
        get(
            "/s/{session_id}/pending-watch",
            |ids| format!("/s/{}/pending-watch", ids.session),
            OWNER_ONLY(204),
        ),
        get(
            "/s/{session_id}/tool-calls/{call_id}",
            |ids| format!("/s/{}/tool-calls/{}", ids.session, ids.call),
            OWNER_ONLY(200),
        ),
        post(
            "/s/{session_id}/tool-calls/{call_id}/decision",
            |ids| format!("/s/{}/tool-calls/{}/decision", ids.session, ids.call),
            "decision=yes&scope=session",
            OWNER_ONLY(200),
        ),
        post(
            "/s/{session_id}/files",
            |ids| format!("/s/{}/files", ids.session),
            "path=notes%2Fa.md&choice=pin",
            OWNER_ONLY(200),
        ),
        // The owner's run is over with every call answered: nothing to resume.
        post(
            "/s/{session_id}/tool-calls/{call_id}/resume",
            |ids| format!("/s/{}/tool-calls/{}/resume", ids.session, ids.call),
            "decision=yes",
            OWNER_ONLY(409),
        ),
        post(
            "/s/{session_id}/messages/{message_id}/continue",
            |ids| format!("/s/{}/messages/{}/continue", ids.session, ids.answer),
            "",
            OWNER_ONLY(400),
        ),
        post(
            "/s/{session_id}/messages/{message_id}/retry",
            |ids| format!("/s/{}/messages/{}/retry", ids.session, ids.answer),
            "",
            OWNER_ONLY(400),
        ),
        // No provider: the edit is refused with the composer's 400 after the owner check.
        post(
            "/s/{session_id}/messages/{message_id}/edit",
            |ids| format!("/s/{}/messages/{}/edit", ids.session, ids.question),
            "message=edited&client_id=authz-edit",
            OWNER_ONLY(400),
        ),
        post(
            "/s/{session_id}/messages/{message_id}/open",
            |ids| format!("/s/{}/messages/{}/open", ids.session, ids.answer),
            "",
            OWNER_ONLY(303),
        ),
        post(
            "/s/{session_id}/messages/{message_id}/select",
            |ids| format!("/s/{}/messages/{}/select", ids.session, ids.answer),
            "",
            OWNER_ONLY(200),
        ),
        post(
            "/s/{session_id}/messages/{message_id}/rewind",
            |ids| format!("/s/{}/messages/{}/rewind", ids.session, ids.answer),
            "",
            OWNER_ONLY(200),
        ),
        get(
            "/s/{session_id}/older",
            |ids| format!("/s/{}/older?before={}", ids.session, ids.answer),
            OWNER_ONLY(200),
        ),
        get("/s/{session_id}/tree", |ids| format!("/s/{}/tree", ids.session), OWNER_ONLY(200)),
        get("/s/{session_id}/activity", |ids| format!("/s/{}/activity", ids.session), OWNER_ONLY(200)),
        get(
            "/s/{session_id}/activity.jsonl",
            |ids| format!("/s/{}/activity.jsonl", ids.session),
            OWNER_ONLY(200),
        ),
        post(
            "/s/{session_id}/settings",
            |ids| format!("/s/{}/settings", ids.session),
            "temperature=0.5&system_prompt=Hi+{{+user.name+}}",
            OWNER_ONLY(200),
        ),
        post(
            "/s/{session_id}/prompt-preview",
            |ids| format!("/s/{}/prompt-preview", ids.session),
            "system_prompt=Hi",
            OWNER_ONLY(200),
        ),
        post(
            "/s/{session_id}/rename",
            |ids| format!("/s/{}/rename", ids.session),
            "title=Renamed",
            OWNER_ONLY(200),
        ),
        post(
            "/s/{session_id}/archive",
            |ids| format!("/s/{}/archive", ids.session),
            "archived=false",
            OWNER_ONLY(200),
        ),
        post(
            "/workspaces",
            |_| "/workspaces".into(),
            "name=Another",
            Expect { anonymous: 401, other_member: 303, owner: 303, admin: 303 },
        ),
        get("/w/{workspace_id}", |ids| format!("/w/{}", ids.workspace), OWNER_ONLY(200)),
        post(
            "/w/{workspace_id}",
            |ids| format!("/w/{}", ids.workspace),
            "name=Kept&approval_mode=suggest",
            OWNER_ONLY(200),
        ),
        post("/w/{workspace_id}/key", |ids| format!("/w/{}/key", ids.workspace), "key=", OWNER_ONLY(200)),
        get(
            "/w/{workspace_id}/sessions",
            |ids| format!("/w/{}/sessions?page=1", ids.workspace),
            OWNER_ONLY(200),
        ),
        // Shares go on the spare workspace, with a person who makes no other call.
        post(
            "/w/{workspace_id}/shares",
            |ids| format!("/w/{}/shares", ids.spare_workspace),
            "kind=person&who=friend%40example.com&role=viewer",
            OWNER_ONLY(200),
        ),
        post(
            "/w/{workspace_id}/shares/{share_id}",
            |ids| format!("/w/{}/shares/{}", ids.spare_workspace, ids.share),
            "role=editor",
            OWNER_ONLY(200),
        ),
        post(
            "/w/{workspace_id}/shares/{share_id}/delete",
            |ids| format!("/w/{}/shares/{}/delete", ids.spare_workspace, ids.share),
            "",
            OWNER_ONLY(200),
        ),
        // Destructive rows last, on spare objects: the owner's call removes them, so the admin
        // after it finds nothing either way.
        post(
            "/s/{session_id}/messages/{message_id}/delete",
            |ids| format!("/s/{}/messages/{}/delete", ids.session, ids.answer),
            "",
            OWNER_ONLY(200),
        ),
        post("/s/{session_id}/delete", |ids| format!("/s/{}/delete", ids.spare_session), "", OWNER_ONLY(200)),
        post(
            "/w/{workspace_id}/delete",
            |ids| format!("/w/{}/delete", ids.spare_workspace),
            "",
            OWNER_ONLY(303),
        ),
    ]
}

#[test]
fn every_route_has_an_authorization_case() {
    let cases = cases();
    for spec in specs() {
        assert!(
            cases.iter().any(|c| c.method == spec.method && c.pattern == spec.path),
            "route {} {} has no row in tests/it/authz.rs",
            spec.method,
            spec.path
        );
    }
    for c in &cases {
        assert!(
            specs().iter().any(|s| s.method == c.method && s.path == c.pattern),
            "authz row {} {} names no route",
            c.method,
            c.pattern
        );
    }
}

/// A user message and a stopped answer with some text, written straight to the database.
async fn stopped_answer(
    app: &TestApp,
    owner: &arbor::domain::accounts::User,
    session: Uuid,
    client_id: &str,
) -> Uuid {
    use arbor::domain::sessions::tree::{MessageStatus, Role as R};
    use arbor::providers::types::Part;
    use arbor::storage::repos::messages::{self, NewMessage, NewRun, Outcome};
    let (user_id, answer, run) = (Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7());
    let text = [Part::Text { text: "partial".into() }];
    let user = NewMessage {
        id: user_id,
        parent_id: None,
        role: R::User,
        parts: &text,
        model: None,
        status: MessageStatus::Complete,
        client_id: Some(client_id),
        author_id: None,
    };
    let reply = NewMessage {
        id: answer,
        parent_id: Some(user_id),
        role: R::Assistant,
        parts: &text,
        model: Some("nowhere/model"),
        status: MessageStatus::Streaming,
        client_id: None,
        author_id: None,
    };
    let new_run =
        NewRun { id: run, owner_id: owner.id, leaf_message_id: user_id, assistant_message_id: answer };
    messages::insert_turn(&app.state.db, session, &user, &reply, &new_run).await.unwrap();
    let outcome = Outcome {
        parts: &text,
        status: MessageStatus::Stopped,
        run_status: "cancelled",
        error: None,
        usage: None,
    };
    messages::finish(&app.state.db, answer, run, &outcome, None).await.unwrap();
    answer
}

async fn question_of(app: &TestApp, session: Uuid, answer: Uuid) -> Uuid {
    arbor::storage::repos::messages::find_message(&app.state.db, session, answer)
        .await
        .unwrap()
        .and_then(|m| m.parent_id)
        .unwrap()
}

async fn workspace_of(app: &TestApp, owner: &arbor::domain::accounts::User, session: Uuid) -> Uuid {
    let actor = arbor::domain::accounts::Actor::for_tests(owner);
    app.state.sessions.get_session(&actor, session).await.unwrap().workspace_id
}

async fn spare_workspace(app: &TestApp, owner: &arbor::domain::accounts::User) -> Uuid {
    let actor = arbor::domain::accounts::Actor::for_tests(owner);
    app.state.sessions.create_workspace(&actor, "Spare").await.unwrap().id
}

/// Providers, a shared key and the owner's own key, made through the services.
async fn console_objects(
    app: &TestApp,
    admin: &arbor::domain::accounts::User,
    owner: &arbor::domain::accounts::User,
    mut ids: Ids,
) -> Ids {
    use arbor::domain::admin::{NewKey, ProviderForm};
    use arbor::secret::Secret;
    let actor = arbor::domain::accounts::Actor::for_tests(admin);
    let origin = arbor::domain::audit::Origin::cli();
    let console = &app.state.admin;
    let form = |name: &str| ProviderForm {
        name: name.into(),
        kind: "openai_compatible".into(),
        base_url: "http://127.0.0.1:9/v1".into(),
        // Off: members reach models only through keys of their own.
        enabled: None,
        ..ProviderForm::default()
    };
    let db = &app.state.db;
    ids.provider =
        console.create_provider(&actor.admin().unwrap(), &origin, &form("authz")).await.unwrap().id;
    ids.spare_provider =
        console.create_provider(&actor.admin().unwrap(), &origin, &form("spare")).await.unwrap().id;
    let value = Secret::new("sk-authz-shared-0000");
    ids.shared_key = console
        .add_key(&actor.admin().unwrap(), &origin, ids.provider, NewKey { label: "k", value: &value })
        .await
        .unwrap()
        .id;
    let own = arbor::vault::store::NewSecret {
        kind: arbor::vault::store::SecretKind::ProviderKey,
        label: "own",
        provider: "authz-own",
        base_url: Some("http://127.0.0.1:9/v1"),
    };
    for (name, slot) in [("kept", &mut ids.mcp), ("spare", &mut ids.spare_mcp)] {
        let form = arbor::domain::mcp::servers::ServerForm {
            name: name.into(),
            transport: "stdio".into(),
            command: "true".into(),
            ..Default::default()
        };
        *slot = app.state.mcp.create(&actor.admin().unwrap(), &origin, &form).await.unwrap().id;
    }
    let owner_actor = arbor::domain::accounts::Actor::for_tests(owner);
    ids.token = app
        .state
        .accounts
        .tokens
        .create(&owner_actor, &origin, "authz", arbor::domain::accounts::api_tokens::Scope::Api, None)
        .await
        .unwrap()
        .row
        .id;
    app.state.aliases.set(&owner_actor, &origin, "authz-alias", "openai/gpt-4.1").await.unwrap();
    ids.own_key = app
        .state
        .vault
        .put_secret(db, owner.id, None, own, &Secret::new("sk-authz-own-0001"))
        .await
        .unwrap()
        .id;
    ids
}

/// A group the owner is in, and a spare one.
async fn group_objects(
    app: &TestApp,
    admin: &arbor::domain::accounts::User,
    owner: &arbor::domain::accounts::User,
    mut ids: Ids,
) -> Ids {
    let proof = arbor::domain::accounts::Actor::for_tests(admin).admin().unwrap();
    let origin = arbor::domain::audit::Origin::cli();
    ids.group = app.state.teams.groups.create(&proof, &origin, "authz-group").await.unwrap().id;
    ids.spare_group = app.state.teams.groups.create(&proof, &origin, "authz-spare").await.unwrap().id;
    app.state.teams.groups.add_member(&proof, &origin, ids.group, &owner.email).await.unwrap();
    app.create_user("friend@example.com", Role::Member).await;
    let owner_actor = arbor::domain::accounts::Actor::for_tests(owner);
    let target = arbor::domain::teams::shares::Target::Person("friend@example.com".into());
    let role = arbor::domain::sessions::access::ShareRole::Viewer;
    ids.share = app
        .state
        .teams
        .shares
        .share(&owner_actor, &origin, ids.spare_workspace, &target, role)
        .await
        .unwrap()
        .id;
    use arbor::domain::teams::links;
    let plain = links::LinkForm::default();
    let link =
        || app.state.teams.links.create(&owner_actor, &origin, (ids.session, ids.answer), &plain, false);
    ids.link_token = link().await.unwrap().token;
    ids.spare_link = link().await.unwrap().link.id;
    ids.admin_link = link().await.unwrap().link.id;
    ids.scim_token = app.state.scim.issue_token(&proof, &origin, "authz").await.unwrap().row.id;
    ids
}

/// A proposed tool call on the owner's stopped answer, and an "always" rule of the owner's.
async fn agent_objects(
    app: &TestApp,
    owner: &arbor::domain::accounts::User,
    session: Uuid,
    mut ids: Ids,
) -> Ids {
    use arbor::storage::repos::agent;
    let db = &app.state.db;
    let run = arbor::storage::repos::messages::latest_run_for_message(db, session, ids.answer)
        .await
        .unwrap()
        .unwrap();
    let call = agent::NewToolCall {
        run_id: run,
        session_id: session,
        owner_id: owner.id,
        message_id: ids.answer,
        call_id: "call_authz",
        position: 0,
        tool_name: "write_file",
        arguments: "{}",
        args_hash: "0",
        tool_digest: "0",
        tool_description: None,
        risk: "write",
    };
    ids.call = agent::ensure_call(db, &call).await.unwrap().id;
    ids.rule = agent::insert_rule(db, owner.id, "session", session, "write_file", "*", "0").await.unwrap().id;
    ids.host_root = agent::insert_host_root(db, ids.workspace, "/srv/authz", owner.id).await.unwrap().id;
    let actor = arbor::domain::accounts::Actor::for_tests(owner);
    ids.upload = app.state.files.upload(&actor, "a.txt", b"to delete".to_vec()).await.unwrap().id;
    ids.blob = app.state.files.upload(&actor, "kept.txt", b"owner's only".to_vec()).await.unwrap().hash;
    // A public address (it is never connected to here).
    let form = arbor::domain::mcp::servers::ServerForm {
        name: "mine".into(),
        url: "http://93.184.215.14/mcp".into(),
        ..Default::default()
    };
    ids.own_mcp = app
        .state
        .mcp
        .create_own(
            &arbor::domain::accounts::Actor::for_tests(owner),
            &arbor::domain::audit::Origin::cli(),
            &arbor::netguard::AllowedRanges::none(),
            &form,
        )
        .await
        .unwrap()
        .id;
    ids.prompt = arbor::domain::sessions::Sessions::new(db.clone())
        .create_template(
            &arbor::domain::accounts::Actor::for_tests(owner),
            &arbor::domain::audit::Origin::cli(),
            "Terse",
            "Answer in one line.",
        )
        .await
        .unwrap()
        .id;
    let actor = arbor::domain::accounts::Actor::for_tests(owner);
    let path = app.state.transfers.prepare_import(&actor, None).unwrap();
    std::fs::write(&path, br#"{"format":1,"source":"walk","workspaces":[]}"#).unwrap();
    ids.import_job = app
        .state
        .transfers
        .start_import(&actor, &arbor::domain::audit::Origin::cli(), path, "walk.json", None)
        .await
        .unwrap()
        .id;
    ids
}

async fn call(app: &TestApp, case: &Case, path: &str, session: Option<&TestSession>) -> u16 {
    let mut req = app.client.request(case.method.as_str().parse().unwrap(), app.url(path));
    if case.method != Method::GET {
        req = req
            .header("Origin", app.origin())
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(case.body);
    }
    if let Some(s) = session {
        req = req.header("Cookie", &s.cookie).header("X-CSRF-Token", &s.csrf);
    }
    req.send().await.unwrap().status().as_u16()
}

/// The people of the walk and the objects the rows act on.
pub(crate) struct World {
    pub(crate) other: arbor::domain::accounts::User,
    pub(crate) owner: arbor::domain::accounts::User,
    pub(crate) admin: arbor::domain::accounts::User,
    pub(crate) disabled_session: TestSession,
    pub(crate) ids: Ids,
}

pub(crate) async fn world(app: &TestApp) -> World {
    let owner = app.create_user("owner@example.com", Role::Member).await;
    let other = app.create_user("other@example.com", Role::Member).await;
    let admin = app.create_user("admin@example.com", Role::Admin).await;
    let disabled = app.create_user("gone@example.com", Role::Member).await;
    let (_, session) = app.create_session(&owner).await;
    let invite = app
        .state
        .accounts
        .invitations
        .create(
            &arbor::domain::accounts::Actor::for_tests(&admin).admin().unwrap(),
            "invitee@example.com",
            Role::Member,
            24,
        )
        .await
        .unwrap();
    let answer = stopped_answer(app, &owner, session, "authz-seed").await;
    let ids = Ids {
        session,
        answer,
        question: question_of(app, session, answer).await,
        workspace: workspace_of(app, &owner, session).await,
        spare_workspace: spare_workspace(app, &owner).await,
        spare_session: app.create_session(&owner).await.1,
        owner_spare_session: app.login_full(&owner).await.id,
        invite_token: invite.token,
        provider: Uuid::nil(),
        shared_key: Uuid::nil(),
        spare_provider: Uuid::nil(),
        victim: app.create_user("victim@example.com", Role::Member).await.id,
        own_key: Uuid::nil(),
        mcp: Uuid::nil(),
        spare_mcp: Uuid::nil(),
        token: Uuid::nil(),
        call: Uuid::nil(),
        rule: Uuid::nil(),
        host_root: Uuid::nil(),
        own_mcp: Uuid::nil(),
        prompt: Uuid::nil(),
        import_job: Uuid::nil(),
        upload: Uuid::nil(),
        blob: String::new(),
        group: Uuid::nil(),
        spare_group: Uuid::nil(),
        owner_id: owner.id,
        share: Uuid::nil(),
        link_token: String::new(),
        spare_link: Uuid::nil(),
        admin_link: Uuid::nil(),
        scim_token: Uuid::nil(),
    };
    let ids = group_objects(app, &admin, &owner, ids).await;
    let ids = console_objects(app, &admin, &owner, ids).await;
    let ids = agent_objects(app, &owner, session, ids).await;
    let disabled_session = app.login_full(&disabled).await;
    arbor::storage::repos::users::set_status(&app.state.db, disabled.id, UserStatus::Disabled).await.unwrap();

    World { other, owner, admin, disabled_session, ids }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_answers_each_caller_as_its_row_says() {
    let app = TestApp::spawn().await;
    let World { other, owner, admin, disabled_session, ids } = world(&app).await;
    let access_of =
        |c: &Case| specs().into_iter().find(|s| s.method == c.method && s.path == c.pattern).unwrap().access;
    let mut mutating = Vec::new();
    for case in cases() {
        let path = (case.path)(&ids);
        // A fresh session per call, so signing out in one call cannot affect the next.
        let got = Expect {
            anonymous: call(&app, &case, &path, None).await,
            other_member: call(&app, &case, &path, Some(&app.login_full(&other).await)).await,
            owner: call(&app, &case, &path, Some(&app.login_full(&owner).await)).await,
            admin: call(&app, &case, &path, Some(&app.login_full(&admin).await)).await,
        };
        assert_eq!(got, case.expect, "{} {path}", case.method);
        if case.method != Method::GET {
            mutating.push((case.pattern, got));
        }
        if access_of(&case) != Access::Public {
            assert_eq!(
                call(&app, &case, &path, Some(&disabled_session)).await,
                403,
                "disabled user on {path}"
            );
            let forged =
                TestSession { cookie: "arbor_session=forged".into(), csrf: "x".into(), id: String::new() };
            assert_eq!(call(&app, &case, &path, Some(&forged)).await, 401, "forged cookie on {path}");
        }
    }
    one_policy_per_resource(&mutating);
}

/// Who a route lets through, read from what each caller got (401, 403 and 404 refuse; anything
/// else, a refused form included, got past authorization).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Policy {
    /// Anonymous callers get in (sign-in, sign-up, invitations).
    SignedOut,
    /// No browser caller gets in: the API's token routes.
    TokenOnly,
    /// Admins only.
    AdminOnly,
    /// Each member on their own objects (a route that creates one admits every member).
    OwnObjects,
    /// The owner and admins.
    OwnerOrAdmin,
    /// Whoever holds the secret in the path (a share link's token): the token is the grant.
    TokenHolder,
    /// Any signed-in member, on anyone's object.
    AnyMember,
}

fn policy_of(pattern: &str, got: Expect) -> Policy {
    let admitted = |status: u16| !matches!(status, 401 | 403 | 404);
    let creates = !pattern.contains('{');
    match (admitted(got.anonymous), admitted(got.owner), admitted(got.other_member), admitted(got.admin)) {
        (true, ..) => Policy::SignedOut,
        _ if pattern.contains("{token}") => Policy::TokenHolder,
        (false, false, false, false) => Policy::TokenOnly,
        (false, false, false, true) => Policy::AdminOnly,
        (false, true, _, _) if creates => Policy::OwnObjects,
        (false, true, false, false) => Policy::OwnObjects,
        (false, true, false, true) => Policy::OwnerOrAdmin,
        _ => Policy::AnyMember,
    }
}

/// The resource a route acts on: its path up to the first id (`/admin/providers/{id}/keys` is
/// `/admin/providers`); `/sessions` and `/workspaces` create what `/s/…` and `/w/…` act on.
fn resource_of(pattern: &str) -> String {
    let pattern = match pattern {
        "/sessions" => "/s",
        "/workspaces" => "/w",
        other => other,
    };
    pattern.split('/').take_while(|segment| !segment.starts_with('{')).collect::<Vec<_>>().join("/")
}

/// SECURITY.md 29: create, update and delete of one resource are decided by one policy. Run over
/// the statuses the walk just saw on the real server, so a route that lets through someone its
/// siblings refuse (an update open to members where the create is admin-only, say) fails here.
fn one_policy_per_resource(mutating: &[(&'static str, Expect)]) {
    let mut families: std::collections::BTreeMap<String, Vec<(&str, Policy)>> = Default::default();
    for (pattern, got) in mutating {
        families.entry(resource_of(pattern)).or_default().push((pattern, policy_of(pattern, *got)));
    }
    assert!(families.len() > 30, "the walk covers the mutating routes: {families:?}");
    for (resource, routes) in &families {
        let first = routes[0].1;
        assert!(routes.iter().all(|(_, policy)| *policy == first), "{resource}: {routes:?}");
        assert_ne!(first, Policy::AnyMember, "{resource}: any member acts on anyone's: {routes:?}");
    }
}

/// SECURITY.md 60: no GET changes anything. Every GET row of the walk, for every caller,
/// leaves every row of every table as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_get_route_changes_the_database() {
    let app = TestApp::spawn().await;
    let World { other, owner, admin, disabled_session, ids } = world(&app).await;
    // One browser session per caller, made before the first digest.
    let callers = [
        None,
        Some(app.login_full(&other).await),
        Some(app.login_full(&owner).await),
        Some(app.login_full(&admin).await),
        Some(disabled_session),
    ];
    let gets: Vec<Case> = cases().into_iter().filter(|c| c.method == Method::GET).collect();
    assert!(gets.len() > 30, "the walk covers the GET routes");
    // A second branch becomes the active one, so the first question is off the active path:
    // showing it with `?at=` must not select it.
    stopped_answer(&app, &owner, ids.session, "authz-second-branch").await;
    let actor = arbor::domain::accounts::Actor::for_tests(&owner);
    let active = app.state.sessions.conversation(&actor, ids.session).await.unwrap().path;
    assert!(!active.iter().any(|m| m.id == ids.question), "the question is on another branch");
    // A first pass lets one-time bookkeeping happen (a session's first sight), then the digest.
    for case in &gets {
        for caller in &callers {
            call(&app, case, &(case.path)(&ids), caller.as_ref()).await;
        }
    }
    // The search indexer records its progress in the background; let it finish first.
    app.state.search.settle().await;
    let before = crate::support::digest::tables(&app.state.db).await;
    assert!(before.len() > 10 && before.values().any(|rows| !rows.is_empty()));
    for case in &gets {
        let path = (case.path)(&ids);
        for caller in &callers {
            call(&app, case, &path, caller.as_ref()).await;
        }
        // A search hit's link too: it focuses, it does not select.
        let at = format!("/s/{}?at={}", ids.session, ids.question);
        call(&app, case, &at, callers[2].as_ref()).await;
        app.state.search.settle().await;
        let after = crate::support::digest::tables(&app.state.db).await;
        let changed = crate::support::digest::changes(&before, &after);
        assert!(changed.is_empty(), "GET {path} changed the database: {changed:#?}");
    }
}

/// Every opening tag with `class="{class}…"` in `html` carries `hx-disable`; returns how many.
fn all_disabled(html: &str, class: &str) -> usize {
    let needle = format!("class=\"{class}");
    let mut seen = 0;
    for (at, _) in html.match_indices(&needle) {
        let start = html[..at].rfind('<').unwrap();
        let end = at + html[at..].find('>').unwrap();
        let tag = &html[start..=end];
        assert!(tag.contains(" hx-disable"), "a content container without hx-disable: {tag}");
        seen += 1;
    }
    seen
}

/// SECURITY.md 60 (`hx-disable`): on the session page and the search page, every container of
/// user or model text carries `hx-disable`, so markup in it can never drive htmx.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn containers_of_user_and_model_content_carry_hx_disable() {
    let app = TestApp::spawn().await;
    let World { owner, ids, .. } = world(&app).await;
    let owner_session = app.login_full(&owner).await;
    let page = app.get(&format!("/s/{}", ids.session), Some(&owner_session.cookie)).await;
    assert_eq!(page.status(), 200);
    let html = page.text().await.unwrap();
    assert!(all_disabled(&html, "msg-body") >= 2, "the question and the answer");
    for class in
        ["thought-body", "tool-output", "tool-call", "diff", "msg-files", "flash flash-error msg-error"]
    {
        all_disabled(&html, class);
    }
    app.state.search.settle().await;
    let res = app.get("/search?q=partial", Some(&owner_session.cookie)).await;
    let html = res.text().await.unwrap();
    assert!(all_disabled(&html, "hit-snippet") >= 1, "{html}");
    assert!(all_disabled(&html, "hit-title") >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_state_changing_route_refuses_cross_site_and_tokenless_requests() {
    let app = TestApp::spawn().await;
    let owner = app.create_user("owner@example.com", Role::Member).await;
    let ids = Ids {
        session: Uuid::now_v7(),
        answer: Uuid::now_v7(),
        question: Uuid::now_v7(),
        workspace: Uuid::now_v7(),
        spare_workspace: Uuid::now_v7(),
        spare_session: Uuid::now_v7(),
        owner_spare_session: app.login_full(&owner).await.id,
        invite_token: "x".repeat(43),
        provider: Uuid::now_v7(),
        shared_key: Uuid::now_v7(),
        spare_provider: Uuid::now_v7(),
        victim: Uuid::now_v7(),
        own_key: Uuid::now_v7(),
        mcp: Uuid::now_v7(),
        spare_mcp: Uuid::now_v7(),
        token: Uuid::now_v7(),
        call: Uuid::now_v7(),
        rule: Uuid::now_v7(),
        host_root: Uuid::now_v7(),
        own_mcp: Uuid::now_v7(),
        prompt: Uuid::now_v7(),
        import_job: Uuid::now_v7(),
        upload: Uuid::now_v7(),
        blob: "0".repeat(64),
        group: Uuid::now_v7(),
        spare_group: Uuid::now_v7(),
        owner_id: owner.id,
        share: Uuid::now_v7(),
        link_token: "A".repeat(43),
        spare_link: Uuid::now_v7(),
        admin_link: Uuid::now_v7(),
        scim_token: Uuid::now_v7(),
    };
    let mutating: Vec<Case> = cases().into_iter().filter(|c| c.method != Method::GET).collect();
    assert!(!mutating.is_empty());
    for spec in specs().iter().filter(|s| s.method != Method::GET) {
        assert!(mutating.iter().any(|c| c.pattern == spec.path), "no CSRF case for {}", spec.path);
    }
    for case in &mutating {
        let path = (case.path)(&ids);
        let send = |headers: Vec<(&'static str, String)>| {
            let mut req = app
                .client
                .request(
                    reqwest::Method::from_bytes(case.method.as_str().as_bytes()).unwrap(),
                    app.url(&path),
                )
                .header("Content-Type", "application/x-www-form-urlencoded")
                .body(case.body);
            for (k, v) in headers {
                req = req.header(k, v);
            }
            async move { req.send().await.unwrap().status().as_u16() }
        };
        let s = app.login_full(&owner).await;
        // Cross-site, even with a valid cookie and token.
        let cross = send(vec![
            ("Cookie", s.cookie.clone()),
            ("X-CSRF-Token", s.csrf.clone()),
            ("Sec-Fetch-Site", "cross-site".into()),
        ])
        .await;
        if arbor::web::handlers::api::is_api_path(&path) || path.starts_with("/scim/") {
            // The API and SCIM take tokens only: a browser's cookie, whatever its origin, is no
            // credential.
            assert_eq!(cross, 401, "cookies do not authorize {path}");
            continue;
        }
        assert_eq!(cross, 403, "cross-site {path}");
        let same_site = send(vec![
            ("Cookie", s.cookie.clone()),
            ("X-CSRF-Token", s.csrf.clone()),
            ("Sec-Fetch-Site", "same-site".into()),
        ])
        .await;
        assert_eq!(same_site, 403, "same-site but cross-origin {path}");
        let evil = send(vec![
            ("Cookie", s.cookie.clone()),
            ("X-CSRF-Token", s.csrf.clone()),
            ("Origin", "https://evil.example".into()),
        ])
        .await;
        assert_eq!(evil, 403, "foreign Origin {path}");
        // Same origin but no or a wrong token.
        let no_token = send(vec![("Cookie", s.cookie.clone()), ("Origin", app.origin())]).await;
        assert_eq!(no_token, 403, "no token {path}");
        let wrong = send(vec![
            ("Cookie", s.cookie.clone()),
            ("Origin", app.origin()),
            ("X-CSRF-Token", "wrong".into()),
        ])
        .await;
        assert_eq!(wrong, 403, "wrong token {path}");
        // Anonymous, cross-site or with no origin information at all.
        assert_eq!(
            send(vec![("Sec-Fetch-Site", "cross-site".into())]).await,
            403,
            "anonymous cross-site {path}"
        );
        assert_eq!(send(vec![]).await, 403, "no Origin or Sec-Fetch-Site on {path}");
        // None of that signed the session out or revoked anything.
        assert_eq!(
            app.get("/account/sessions", Some(&s.cookie)).await.status(),
            200,
            "{path} had a side effect"
        );
    }
    let listed = arbor::storage::repos::auth_sessions::list_for_user(&app.state.db, owner.id).await.unwrap();
    assert!(
        listed.iter().any(|l| l.id == ids.owner_spare_session),
        "the spare session survived every refused revoke"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_ids_are_404_not_500() {
    let app = TestApp::spawn().await;
    let owner = app.create_user("owner@example.com", Role::Member).await;
    let s = app.login_full(&owner).await;
    for bad in ["not-a-uuid", "..", "%2e%2e", "00000000-0000-0000-0000-000000000000"] {
        let status = app.get(&format!("/s/{bad}/events"), Some(&s.cookie)).await.status();
        assert_eq!(status, 404, "{bad}");
        let status = app.post_form(&format!("/account/sessions/{bad}/revoke"), "", Some(&s)).await.status();
        assert_eq!(status, 404, "{bad}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anonymous_browsers_are_sent_to_the_sign_in_page() {
    let app = TestApp::spawn().await;
    let res = app
        .client
        .get(app.url("/account/sessions?tab=1"))
        .header("Accept", "text/html")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 303);
    assert_eq!(res.headers()["location"], "/login?next=/account/sessions%3Ftab%3D1");
    let res = app.client.get(app.url("/account/sessions")).header("HX-Request", "true").send().await.unwrap();
    assert_eq!(res.status(), 401);
    assert_eq!(res.headers()["hx-redirect"], "/login?next=/account/sessions");
    // API-style callers keep the 401.
    assert_eq!(app.get("/account/sessions", None).await.status(), 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signing_out_server_side_ends_the_session_and_expiry_is_enforced() {
    let app = TestApp::spawn().await;
    let owner = app.create_user("owner@example.com", Role::Member).await;
    let (_, session) = app.create_session(&owner).await;
    let cookie = app.login(&owner).await;
    let path = format!("/s/{session}/events");
    assert_eq!(app.get(&path, Some(&cookie)).await.status(), 200);
    let token = cookie.trim_start_matches("arbor_session=");
    arbor::auth::sessions::revoke(&app.state.db, &arbor::auth::sessions::hash_token(token)).await.unwrap();
    assert_eq!(app.get(&path, Some(&cookie)).await.status(), 401);

    // Idle timeout: a session last seen long ago is refused and removed.
    let cookie = app.login(&owner).await;
    let token = cookie.trim_start_matches("arbor_session=").to_string();
    let long_ago = chrono::Utc::now() - chrono::Duration::days(30);
    arbor::storage::repos::auth_sessions::touch(
        &app.state.db,
        &arbor::auth::sessions::hash_token(&token),
        long_ago,
    )
    .await
    .unwrap();
    // Activity written into the past is not something storage ever does (it only moves it
    // forward, which a kept copy may miss); the test says so, as a write that ends a session does.
    arbor::storage::changes::changed(arbor::storage::changes::Kept::Accounts);
    assert_eq!(app.get(&path, Some(&cookie)).await.status(), 401);
    assert_eq!(app.get(&path, Some(&cookie)).await.status(), 401);
}

/// The table's access level is enforced by the table itself: a route whose handler asks for no
/// user at all still refuses the wrong caller once it is registered through the guard.
#[tokio::test]
async fn the_route_table_enforces_access_without_the_handlers_help() {
    use actix_web::{App, test, web};
    use arbor::web::routes::guarded;
    let app = TestApp::spawn().await;
    let member = app.create_user("member@example.com", Role::Member).await;
    let admin = app.create_user("admin@example.com", Role::Admin).await;
    let (member_cookie, admin_cookie) = (app.login(&member).await, app.login(&admin).await);
    let service = test::init_service(
        App::new()
            .app_data(web::Data::new(app.state.clone()))
            .route("/user", guarded(web::get().to(|| async { "reached" }), Access::User))
            .route("/admin", guarded(web::get().to(|| async { "reached" }), Access::Admin))
            .route("/public", guarded(web::get().to(|| async { "reached" }), Access::Public)),
    )
    .await;
    let call = |path: &'static str, cookie: Option<String>| {
        let mut req = test::TestRequest::get().uri(path);
        if let Some(c) = cookie {
            req = req.insert_header(("cookie", c));
        }
        req.to_request()
    };
    let expect = [
        ("/public", None, 200),
        ("/user", None, 401),
        ("/admin", None, 401),
        ("/user", Some(member_cookie.clone()), 200),
        ("/admin", Some(member_cookie.clone()), 403),
        ("/admin", Some(admin_cookie.clone()), 200),
    ];
    for (path, cookie, status) in expect {
        // A refusal comes back as the error the server turns into its error page.
        let (got, body) = match test::try_call_service(&service, call(path, cookie.clone())).await {
            Ok(res) => (res.status().as_u16(), test::read_body(res).await),
            Err(e) => (e.as_response_error().status_code().as_u16(), Default::default()),
        };
        assert_eq!(got, status, "{path} with {cookie:?}");
        assert_eq!(body == "reached", status == 200, "{path}: the handler ran only when allowed");
    }
}
