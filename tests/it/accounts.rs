//! Local accounts, browser sessions, the admin setup link and sign-in limits.

use arbor::domain::accounts::{Role, UserStatus};
use sea_orm::{ActiveModelTrait, Set};

use crate::support::{TestApp, TestSession, session_cookie_from};

const PASSWORD: &str = "correct horse battery";

async fn signup_app() -> TestApp {
    TestApp::spawn_with(|c| c.auth.allow_signup = true).await
}

async fn sign_up(app: &TestApp, email: &str) -> reqwest::Response {
    let body = format!("email={}&display_name=Ada&password={}", urlenc(email), urlenc(PASSWORD));
    app.post_form("/signup", &body, None).await
}

async fn sign_in(app: &TestApp, email: &str, password: &str) -> reqwest::Response {
    app.post_form("/login", &format!("email={}&password={}", urlenc(email), urlenc(password)), None).await
}

fn urlenc(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_up_is_off_by_default() {
    let app = TestApp::spawn().await;
    assert_eq!(app.get("/signup", None).await.status(), 404);
    assert_eq!(sign_up(&app, "ada@example.com").await.status(), 404);
    assert!(
        arbor::storage::repos::users::find_by_email(&app.state.db, "ada@example.com")
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_up_then_sign_in_with_safe_cookies() {
    let app = signup_app().await;
    let res = sign_up(&app, "Ada@Example.com").await;
    assert_eq!(res.status(), 303);
    let set_cookie = res
        .headers()
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .collect::<Vec<_>>();
    let session = set_cookie.iter().find(|c| c.starts_with("arbor_session=")).expect("session cookie");
    assert!(
        session.contains("HttpOnly") && session.contains("SameSite=Lax") && session.contains("Path=/"),
        "{session}"
    );
    let cookie = session_cookie_from(&res).unwrap();
    let home = app.get("/", Some(&cookie)).await.text().await.unwrap();
    assert!(home.contains("Welcome, Ada"));
    assert!(home.contains(r#"<meta name="csrf-token""#));

    let (user, _) = arbor::storage::repos::users::find_by_email(&app.state.db, "ada@example.com")
        .await
        .unwrap()
        .into_iter()
        .next()
        .unwrap();
    assert_eq!(user.role, Role::Member);

    let res = sign_in(&app, "ada@example.com", PASSWORD).await;
    assert_eq!(res.status(), 303);
    assert_eq!(res.headers()["location"], "/");
    let second = session_cookie_from(&res).unwrap();
    assert_ne!(second, cookie, "every sign-in gets a new token");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn posted_role_fields_are_ignored_at_sign_up() {
    let app = signup_app().await;
    let body = format!(
        "email=eve%40example.com&display_name=Eve&password={}&role=admin&status=active&is_admin=true",
        urlenc(PASSWORD)
    );
    assert_eq!(app.post_form("/signup", &body, None).await.status(), 303);
    let (user, _) = arbor::storage::repos::users::find_by_email(&app.state.db, "eve@example.com")
        .await
        .unwrap()
        .into_iter()
        .next()
        .unwrap();
    assert_eq!(user.role, Role::Member);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_sign_up_input_is_refused_with_a_message() {
    let app = signup_app().await;
    let res =
        app.post_form("/signup", "email=not-an-email&display_name=x&password=long-enough-pw", None).await;
    assert_eq!(res.status(), 400);
    assert!(res.text().await.unwrap().contains("Enter a valid email address."));
    let res = app.post_form("/signup", "email=a%40example.com&display_name=x&password=short", None).await;
    assert_eq!(res.status(), 400);
    assert!(res.text().await.unwrap().contains("at least 12 characters"));
    let res = app.post_form("/signup", "email=a%40example.com", None).await;
    assert_eq!(res.status(), 400, "missing fields");
    assert_eq!(sign_up(&app, "dup@example.com").await.status(), 303);
    let res = sign_up(&app, "DUP@example.com").await;
    assert_eq!(res.status(), 400);
    assert!(res.text().await.unwrap().contains("sign in instead"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_password_and_unknown_email_look_the_same() {
    let app = signup_app().await;
    sign_up(&app, "ada@example.com").await;
    let wrong = sign_in(&app, "ada@example.com", "not the password").await;
    let unknown = sign_in(&app, "nobody@example.com", "not the password").await;
    assert_eq!(wrong.status(), 401);
    assert_eq!(unknown.status(), 401);
    assert!(session_cookie_from(&wrong).is_none() && session_cookie_from(&unknown).is_none());
    let a = wrong.text().await.unwrap();
    let b = unknown.text().await.unwrap();
    assert!(a.contains(arbor::domain::accounts::BAD_CREDENTIALS));
    assert_eq!(a.replace("ada@example.com", ""), b.replace("nobody@example.com", ""), "same page either way");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disabled_user_cannot_sign_in() {
    let app = signup_app().await;
    sign_up(&app, "ada@example.com").await;
    let (user, _) = arbor::storage::repos::users::find_by_email(&app.state.db, "ada@example.com")
        .await
        .unwrap()
        .into_iter()
        .next()
        .unwrap();
    arbor::storage::repos::users::set_status(&app.state.db, user.id, UserStatus::Disabled).await.unwrap();
    let res = sign_in(&app, "ada@example.com", PASSWORD).await;
    assert_eq!(res.status(), 403);
    assert!(session_cookie_from(&res).is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pre_set_cookie_is_not_kept_after_sign_in() {
    let app = signup_app().await;
    sign_up(&app, "ada@example.com").await;
    // An attacker's own valid session planted in the victim's browser is ended by sign-in.
    let (user, _) = arbor::storage::repos::users::find_by_email(&app.state.db, "ada@example.com")
        .await
        .unwrap()
        .into_iter()
        .next()
        .unwrap();
    let planted = app.login(&user).await;
    let res = app
        .client
        .post(app.url("/login"))
        .header("Origin", app.origin())
        .header("Cookie", &planted)
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(format!("email=ada%40example.com&password={}", urlenc(PASSWORD)))
        .send()
        .await
        .unwrap();
    // The planted session is signed in, so it must present its CSRF token: refused.
    assert_eq!(res.status(), 403);
    let res = app
        .client
        .post(app.url("/login"))
        .header("Origin", app.origin())
        .header("Cookie", "arbor_session=planted-by-attacker")
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(format!("email=ada%40example.com&password={}", urlenc(PASSWORD)))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 303);
    let fresh = session_cookie_from(&res).unwrap();
    assert_ne!(fresh, "arbor_session=planted-by-attacker");
    assert_eq!(app.get("/account/sessions", Some("arbor_session=planted-by-attacker")).await.status(), 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_in_attempts_are_limited_per_account_and_per_address() {
    let app = TestApp::spawn_with(|c| {
        c.auth.allow_signup = true;
        c.auth.login_attempts_per_account_per_minute = 3;
        // 4 attempts for Ada (the refused one included) + 3 for others = 7.
        c.auth.login_attempts_per_ip_per_minute = 7;
    })
    .await;
    sign_up(&app, "ada@example.com").await;
    for _ in 0..3 {
        assert_eq!(sign_in(&app, "ada@example.com", "wrong password!").await.status(), 401);
    }
    let res = sign_in(&app, "ada@example.com", PASSWORD).await;
    assert_eq!(res.status(), 429, "even the right password waits once the account is limited");
    assert!(res.headers().contains_key("retry-after"));
    assert!(res.text().await.unwrap().contains("Too many sign-in attempts"));
    // Other accounts from the same address still work until the address limit…
    for i in 0..3 {
        let forged = app
            .client
            .post(app.url("/login"))
            .header("Origin", app.origin())
            // X-Forwarded-For from an untrusted peer is ignored: every attempt counts for 127.0.0.1.
            .header("X-Forwarded-For", format!("203.0.113.{i}"))
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(format!("email=user{i}%40example.com&password=whatever-long"))
            .send()
            .await
            .unwrap();
        assert_eq!(forged.status(), 401);
    }
    // …which is now reached.
    assert_eq!(sign_in(&app, "someone@example.com", "whatever-long").await.status(), 429);
}

/// A sign-in from `from` (a trusted proxy forwards it) with a form body as given.
async fn sign_in_from(app: &TestApp, from: impl AsRef<str>, body: String) -> reqwest::Response {
    app.client
        .post(app.url("/login"))
        .header("Origin", app.origin())
        .header("X-Forwarded-For", from.as_ref())
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(body)
        .send()
        .await
        .unwrap()
}

/// SECURITY.md 53: a sign-in flood with 1 MiB emails from many addresses is refused before any
/// work, the limiter keeps nothing for it, IPv6 addresses in one /64 count as one client, and
/// password hashing beyond the server's capacity is refused with 503 and Retry-After.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sign_in_flood_is_refused_early_and_bounded() {
    let app = TestApp::spawn_with(|c| {
        c.auth.allow_signup = true;
        c.auth.trusted_proxies = vec!["127.0.0.1".parse().unwrap(), "::1".parse().unwrap()];
        c.auth.login_attempts_per_ip_per_minute = 3;
        c.auth.login_attempts_per_account_per_minute = 1000;
        c.server.max_body_bytes = 2 * 1024 * 1024;
    })
    .await;
    sign_up(&app, "ada@example.com").await;
    let kept = app.state.login_limiter.len();

    // 1 MiB emails from 100 addresses: each refused at once (400), and nothing is remembered.
    let huge = format!("{}%40example.com", "a".repeat(1024 * 1024));
    for i in 0..100 {
        let res = sign_in_from(&app, &format!("198.51.100.{i}"), format!("email={huge}&password=x")).await;
        assert_eq!(res.status(), 400);
        let page = res.text().await.unwrap();
        assert!(
            page.contains("Enter a valid email address and password."),
            "{}",
            &page[..200.min(page.len())]
        );
        assert!(page.len() < 64 * 1024, "the email is not echoed back");
    }
    assert_eq!(app.state.login_limiter.len(), kept, "the flood left nothing in the limiter");
    assert!(app.state.login_limiter.len() <= arbor::auth::ratelimit::CAPACITY);

    // Addresses in one IPv6 /64 are one client: the fourth attempt is refused.
    for i in 1..=3 {
        let from = format!("2001:db8:7:7:{i:x}::{i:x}");
        let res =
            sign_in_from(&app, &from, format!("email=v6-{i}%40example.com&password=whatever-long")).await;
        assert_eq!(res.status(), 401, "attempt {i}");
    }
    let res =
        sign_in_from(&app, "2001:db8:7:7:ffff::9", "email=v6%40example.com&password=x-long".into()).await;
    assert_eq!(res.status(), 429);
    // Another /64 is another client.
    let res = sign_in_from(&app, "2001:db8:7:8::1", "email=v6%40example.com&password=x-long".into()).await;
    assert_eq!(res.status(), 401);

    // Many sign-ins at once from many addresses: no more hashes run than the server has cores,
    // a few wait, the rest are told to come back (503 + Retry-After); none fails.
    let attempts = (0..150).map(|i| {
        sign_in_from(&app, format!("192.0.2.{i}"), format!("email=u{i}%40example.com&password=whatever-long"))
    });
    let results = futures_util::future::join_all(attempts).await;
    let mut busy = 0;
    for res in results {
        match res.status().as_u16() {
            401 => {}
            503 => {
                busy += 1;
                assert!(res.headers().contains_key("retry-after"));
                assert!(res.text().await.unwrap().contains("busy checking other sign-ins"));
            }
            other => panic!("unexpected status {other}"),
        }
    }
    assert!(busy > 0, "a flood beyond the hashing capacity is refused");
    // Once it is over, the right password signs in.
    let res =
        sign_in_from(&app, "192.0.2.200", format!("email=ada%40example.com&password={}", urlenc(PASSWORD)))
            .await;
    assert_eq!(res.status(), 303);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_out_ends_the_session_server_side() {
    let app = signup_app().await;
    let cookie = session_cookie_from(&sign_up(&app, "ada@example.com").await).unwrap();
    let (user, _) = arbor::storage::repos::users::find_by_email(&app.state.db, "ada@example.com")
        .await
        .unwrap()
        .into_iter()
        .next()
        .unwrap();
    let s = app.login_full(&user).await;
    let res = app.post_form("/logout", "", Some(&s)).await;
    assert_eq!(res.status(), 303);
    let cleared = res
        .headers()
        .get_all("set-cookie")
        .iter()
        .any(|v| v.to_str().unwrap().starts_with("arbor_session=;"));
    assert!(cleared, "cookie cleared");
    assert_eq!(app.get("/account/sessions", Some(&s.cookie)).await.status(), 401, "old cookie is dead");
    assert_eq!(app.get("/account/sessions", Some(&cookie)).await.status(), 200, "other sessions live on");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn absolute_lifetime_is_enforced() {
    let app = TestApp::spawn().await;
    let user = app.create_user("ada@example.com", Role::Member).await;
    let s = app.login_full(&user).await;
    arbor::storage::entities::auth_session::ActiveModel {
        id: Set(s.id.clone()),
        expires_at: Set(chrono::Utc::now() - chrono::Duration::minutes(1)),
        ..Default::default()
    }
    .update(&app.state.db)
    .await
    .unwrap();
    assert_eq!(app.get("/account/sessions", Some(&s.cookie)).await.status(), 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_page_lists_and_revokes_only_your_own() {
    let app = TestApp::spawn().await;
    let ada = app.create_user("ada@example.com", Role::Member).await;
    let bob = app.create_user("bob@example.com", Role::Member).await;
    let here = app.login_full(&ada).await;
    let phone = app.login_full(&ada).await;
    let bobs = app.login_full(&bob).await;
    let page = app.get("/account/sessions", Some(&here.cookie)).await.text().await.unwrap();
    assert!(page.contains(&here.id) && page.contains(&phone.id) && !page.contains(&bobs.id));
    assert!(page.contains("this browser"));

    assert_eq!(
        app.post_form(&format!("/account/sessions/{}/revoke", bobs.id), "", Some(&here)).await.status(),
        404
    );
    assert_eq!(
        app.get("/account/sessions", Some(&bobs.cookie)).await.status(),
        200,
        "Bob is still signed in"
    );

    assert_eq!(
        app.post_form(&format!("/account/sessions/{}/revoke", phone.id), "", Some(&here)).await.status(),
        303
    );
    assert_eq!(app.get("/account/sessions", Some(&phone.cookie)).await.status(), 401);
    let res = app.post_form(&format!("/account/sessions/{}/revoke", here.id), "", Some(&here)).await;
    assert_eq!(res.headers()["location"], "/login");
    assert_eq!(app.get("/account/sessions", Some(&here.cookie)).await.status(), 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn change_password() {
    let app = signup_app().await;
    sign_up(&app, "ada@example.com").await;
    let (user, _) = arbor::storage::repos::users::find_by_email(&app.state.db, "ada@example.com")
        .await
        .unwrap()
        .into_iter()
        .next()
        .unwrap();
    let s = app.login_full(&user).await;
    // Another browser, a full-access token and an API-only token, all made before the change.
    let other_browser = app.login_full(&user).await;
    let actor = arbor::domain::accounts::Actor::for_tests(&user);
    let origin = arbor::domain::audit::Origin::system();
    let token = |scope| {
        let (tokens, actor, origin) = (&app.state.accounts.tokens, &actor, &origin);
        async move { tokens.create(actor, origin, "t", scope, None).await.unwrap().token.expose().to_string() }
    };
    let full = token(arbor::domain::accounts::api_tokens::Scope::Full).await;
    let api_only = token(arbor::domain::accounts::api_tokens::Scope::Api).await;
    let with_token = |path: &str, token: &str| {
        app.client.get(app.url(path)).header("Authorization", format!("Bearer {token}")).send()
    };
    assert_eq!(with_token("/account/sessions", &full).await.unwrap().status(), 200);
    let res = app.post_form("/account/password", "current=wrong&new=another+long+password", Some(&s)).await;
    assert_eq!(res.status(), 400);
    assert!(res.text().await.unwrap().contains("current password is not correct"));
    let res = app
        .post_form("/account/password", &format!("current={}&new=short", urlenc(PASSWORD)), Some(&s))
        .await;
    assert_eq!(res.status(), 400);
    let res = app
        .post_form(
            "/account/password",
            &format!("current={}&new=another+long+password", urlenc(PASSWORD)),
            Some(&s),
        )
        .await;
    assert_eq!(res.status(), 200);
    let page = res.text().await.unwrap();
    assert!(page.contains("Your password has been changed."), "{page}");
    // Signed out: the browser that signed up and the other one; revoked: the full token only.
    assert!(page.contains("signed out (2)") && page.contains("revoked (1)"), "{page}");
    // This browser stays signed in; the other one, and the full-access token, are done.
    assert_eq!(app.get("/account/sessions", Some(&s.cookie)).await.status(), 200);
    assert_eq!(app.get("/account/sessions", Some(&other_browser.cookie)).await.status(), 401);
    assert_eq!(with_token("/account/sessions", &full).await.unwrap().status(), 401);
    assert_eq!(with_token("/v1/models", &api_only).await.unwrap().status(), 200);
    assert_eq!(sign_in(&app, "ada@example.com", PASSWORD).await.status(), 401);
    assert_eq!(sign_in(&app, "ada@example.com", "another long password").await.status(), 303);
}

/// SECURITY.md 57: guessing the current password is limited like signing in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_current_password_check_is_rate_limited() {
    let app = signup_app().await;
    sign_up(&app, "ada@example.com").await;
    let (user, _) = arbor::storage::repos::users::find_by_email(&app.state.db, "ada@example.com")
        .await
        .unwrap()
        .into_iter()
        .next()
        .unwrap();
    let s = app.login_full(&user).await;
    let limit = app.state.config.auth.login_attempts_per_account_per_minute;
    for _ in 0..limit {
        let res =
            app.post_form("/account/password", "current=guess&new=another+long+password", Some(&s)).await;
        assert_eq!(res.status(), 400);
    }
    // Past the limit even the right password waits, and nothing changes.
    let body = format!("current={}&new=another+long+password", urlenc(PASSWORD));
    let res = app.post_form("/account/password", &body, Some(&s)).await;
    assert_eq!(res.status(), 429);
    assert!(res.headers().get("retry-after").is_some());
    assert!(res.text().await.unwrap().contains("Too many attempts"));
    assert_eq!(sign_in(&app, "ada@example.com", PASSWORD).await.status(), 303);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn next_never_leaves_the_site() {
    let app = TestApp::spawn_with(|c| {
        c.auth.allow_signup = true;
        c.auth.login_attempts_per_account_per_minute = 50;
    })
    .await;
    sign_up(&app, "ada@example.com").await;
    let cases = [
        ("/account/sessions", "/account/sessions"),
        ("https://evil.example", "/"),
        ("//evil.example", "/"),
        ("/\\evil.example", "/"),
        ("javascript:alert(1)", "/"),
        // A percent-encoded backslash stays an on-site path.
        ("/%5Cevil.example", "/%5Cevil.example"),
    ];
    for (next, expected) in cases {
        let body = format!("email=ada%40example.com&password={}&next={}", urlenc(PASSWORD), urlenc(next));
        let res = app.post_form("/login", &body, None).await;
        assert_eq!(res.status(), 303);
        assert_eq!(res.headers()["location"], expected, "{next}");
    }
}

async fn setup_cookie(app: &TestApp) -> String {
    let token = app.state.accounts.open_setup().await.unwrap().expect("no admin yet");
    let res = app.get(&format!("/setup/{token}"), None).await;
    assert_eq!(res.status(), 303);
    assert_eq!(res.headers()["location"], "/signup");
    let c = res
        .headers()
        .get_all("set-cookie")
        .iter()
        .find_map(|v| v.to_str().ok().filter(|s| s.starts_with("arbor_setup=")))
        .unwrap();
    c.split(';').next().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_setup_link_makes_exactly_one_admin_and_then_stops_working() {
    let app = TestApp::spawn().await;
    let setup = setup_cookie(&app).await;
    let signup_page = app.client.get(app.url("/signup")).header("Cookie", &setup).send().await.unwrap();
    assert_eq!(signup_page.status(), 200, "sign-up opens for the setup link even though it is off");
    assert!(signup_page.text().await.unwrap().contains("becomes its administrator"));
    let res = app
        .client
        .post(app.url("/signup"))
        .header("Origin", app.origin())
        .header("Cookie", &setup)
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(format!("email=root%40example.com&display_name=Root&password={}", urlenc(PASSWORD)))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 303);
    let (root, _) = arbor::storage::repos::users::find_by_email(&app.state.db, "root@example.com")
        .await
        .unwrap()
        .into_iter()
        .next()
        .unwrap();
    assert_eq!(root.role, Role::Admin);
    // Used once: the same cookie no longer opens sign-up, and no new link is issued.
    let again = app.client.get(app.url("/signup")).header("Cookie", &setup).send().await.unwrap();
    assert_eq!(again.status(), 404);
    assert!(app.state.accounts.open_setup().await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_concurrent_setup_sign_ups_make_one_admin() {
    let app = TestApp::spawn_with(|c| c.auth.login_attempts_per_ip_per_minute = 100).await;
    let setup = setup_cookie(&app).await;
    let mut tasks = Vec::new();
    for i in 0..20 {
        let client = app.client.clone();
        let url = app.url("/signup");
        let origin = app.origin();
        let setup = setup.clone();
        tasks.push(tokio::spawn(async move {
            client
                .post(url)
                .header("Origin", origin)
                .header("Cookie", setup)
                .header("Content-Type", "application/x-www-form-urlencoded")
                .body(format!("email=racer{i}%40example.com&display_name=R&password=correct+horse+battery"))
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }));
    }
    for t in tasks {
        let status = t.await.unwrap();
        assert!(status == 303 || status == 404, "{status}");
    }
    assert_eq!(arbor::storage::repos::users::count_admins(&app.state.db).await.unwrap(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_deployments_use_host_prefixed_secure_cookies() {
    let app = TestApp::spawn_with(|c| {
        c.auth.allow_signup = true;
        c.server.public_url = "https://arbor.example.com".into();
    })
    .await;
    let res = app
        .client
        .post(app.url("/signup"))
        .header("Origin", "https://arbor.example.com")
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(format!("email=ada%40example.com&display_name=Ada&password={}", urlenc(PASSWORD)))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 303);
    let c = res
        .headers()
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .find(|c| c.starts_with("__Host-arbor_session="))
        .unwrap();
    assert!(
        c.contains("Secure") && c.contains("HttpOnly") && c.contains("Path=/") && !c.contains("Domain"),
        "{c}"
    );
    assert!(res.headers().contains_key("strict-transport-security"));
    // With a public URL configured, only that origin is accepted.
    let res = app.post_form("/login", "email=a%40b.io&password=x", None).await;
    assert_eq!(res.status(), 403);
    let _ = TestSession { cookie: String::new(), csrf: String::new(), id: String::new() };
}
