//! Every route in the table, for every kind of caller. A route without a row fails this test.

use actix_web::http::Method;
use arbor::domain::accounts::{Role, UserStatus};
use arbor::web::routes::{Access, specs};
use uuid::Uuid;

use crate::support::TestApp;

/// What a caller gets.
#[derive(Debug, Clone, Copy)]
struct Expect {
    anonymous: u16,
    other_member: u16,
    owner: u16,
    admin: u16,
}

/// How to call a route with the owner's objects, and what each caller gets.
struct Case {
    method: Method,
    pattern: &'static str,
    path: fn(&Ids) -> String,
    expect: Expect,
}

struct Ids {
    session: Uuid,
}

const PUBLIC_OK: Expect = Expect {
    anonymous: 200,
    other_member: 200,
    owner: 200,
    admin: 200,
};

fn cases() -> Vec<Case> {
    vec![
        Case {
            method: Method::GET,
            pattern: "/",
            path: |_| "/".into(),
            expect: PUBLIC_OK,
        },
        Case {
            method: Method::GET,
            pattern: "/healthz",
            path: |_| "/healthz".into(),
            expect: PUBLIC_OK,
        },
        Case {
            method: Method::GET,
            pattern: "/readyz",
            path: |_| "/readyz".into(),
            expect: PUBLIC_OK,
        },
        Case {
            method: Method::GET,
            pattern: "/static/{path:.*}",
            path: |_| "/static/app.css".into(),
            expect: PUBLIC_OK,
        },
        Case {
            method: Method::GET,
            pattern: "/s/{session_id}/events",
            path: |ids| format!("/s/{}/events", ids.session),
            // Someone else's session is indistinguishable from a missing one.
            expect: Expect {
                anonymous: 401,
                other_member: 404,
                owner: 200,
                admin: 404,
            },
        },
    ]
}

#[test]
fn every_route_has_an_authorization_case() {
    let cases = cases();
    for spec in specs() {
        assert!(
            cases
                .iter()
                .any(|c| c.method == spec.method && c.pattern == spec.path),
            "route {} {} has no row in tests/it/authz.rs",
            spec.method,
            spec.path
        );
    }
    for c in &cases {
        assert!(
            specs()
                .iter()
                .any(|s| s.method == c.method && s.path == c.pattern),
            "authz row {} {} names no route",
            c.method,
            c.pattern
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_answers_each_caller_as_its_row_says() {
    let app = TestApp::spawn().await;
    let owner = app.create_user("owner@example.com", Role::Member).await;
    let other = app.create_user("other@example.com", Role::Member).await;
    let admin = app.create_user("admin@example.com", Role::Admin).await;
    let disabled = app.create_user("gone@example.com", Role::Member).await;
    let (_, session) = app.create_session(&owner).await;
    let ids = Ids { session };
    let owner_cookie = app.login(&owner).await;
    let other_cookie = app.login(&other).await;
    let admin_cookie = app.login(&admin).await;
    let disabled_cookie = app.login(&disabled).await;
    arbor::storage::repos::users::set_status(&app.state.db, disabled.id, UserStatus::Disabled)
        .await
        .unwrap();

    let access_of = |c: &Case| {
        specs()
            .into_iter()
            .find(|s| s.method == c.method && s.path == c.pattern)
            .unwrap()
            .access
    };
    for case in cases() {
        let path = (case.path)(&ids);
        let call = |cookie: Option<String>| {
            let req = app
                .client
                .request(case.method.as_str().parse().unwrap(), app.url(&path));
            let req = match cookie {
                Some(c) => req.header("Cookie", c),
                None => req,
            };
            async move { req.send().await.unwrap().status().as_u16() }
        };
        let got = Expect {
            anonymous: call(None).await,
            other_member: call(Some(other_cookie.clone())).await,
            owner: call(Some(owner_cookie.clone())).await,
            admin: call(Some(admin_cookie.clone())).await,
        };
        let e = case.expect;
        assert_eq!(
            (got.anonymous, got.other_member, got.owner, got.admin),
            (e.anonymous, e.other_member, e.owner, e.admin),
            "{} {path}: (anonymous, other member, owner, admin)",
            case.method
        );
        if access_of(&case) != Access::Public {
            assert_eq!(
                call(Some(disabled_cookie.clone())).await,
                403,
                "disabled user on {path}"
            );
            // A forged or stale cookie is anonymous.
            assert_eq!(
                call(Some("arbor_session=forged".into())).await,
                401,
                "forged cookie on {path}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_ids_are_404_not_500() {
    let app = TestApp::spawn().await;
    let owner = app.create_user("owner@example.com", Role::Member).await;
    let cookie = app.login(&owner).await;
    for bad in [
        "not-a-uuid",
        "..",
        "%2e%2e",
        "00000000-0000-0000-0000-000000000000",
    ] {
        let status = app.get(&format!("/s/{bad}/events"), Some(&cookie)).await.status();
        assert_eq!(status, 404, "{bad}");
    }
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
    arbor::auth::sessions::revoke(&app.state.db, &arbor::auth::sessions::hash_token(token))
        .await
        .unwrap();
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
    assert_eq!(app.get(&path, Some(&cookie)).await.status(), 401);
    assert_eq!(app.get(&path, Some(&cookie)).await.status(), 401);
}
