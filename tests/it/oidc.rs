//! Sign-in with an OpenID Connect provider, against a provider that can be made to misbehave.

use arbor::domain::accounts::Role;
use serde_json::json;

use crate::support::rogue_idp::{self, RogueIdp, Scenario};
use crate::support::{TestApp, session_cookie_from};

const CLIENT_ID: &str = "arbor-test";
const CLIENT_SECRET: &str = "rogue-client-secret";

async fn app_with(idp: &RogueIdp, adjust: impl FnOnce(&mut arbor::config::Config)) -> TestApp {
    let issuer = idp.issuer.clone();
    TestApp::spawn_with(move |c| {
        c.oidc.issuer = issuer;
        c.oidc.client_id = CLIENT_ID.into();
        c.oidc.client_secret = CLIENT_SECRET.into();
        c.oidc.display_name = "Rogue Corp".into();
        adjust(c);
    })
    .await
}

/// `POST /auth/oidc/start` from the sign-in page.
async fn start_flow(app: &TestApp, body: &str) -> reqwest::Response {
    app.post_form("/auth/oidc/start", body, None).await
}

/// One sign-in attempt like a browser: start, follow to the provider, come back.
/// Returns the callback's response.
async fn sign_in_with(app: &TestApp, extra_form: &str, cookies: &str) -> reqwest::Response {
    let mut start = app
        .client
        .post(app.url("/auth/oidc/start"))
        .header("Origin", app.origin())
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(format!("next=%2Faccount%2Fsessions{extra_form}"));
    if !cookies.is_empty() {
        start = start.header("Cookie", cookies);
    }
    let start = start.send().await.unwrap();
    assert_eq!(start.status(), 303, "start: {}", start.text().await.unwrap_or_default());
    let flow_cookie = flow_cookie(&start);
    let to_idp = start.headers()["location"].to_str().unwrap().to_string();
    let at_idp = app.client.get(&to_idp).send().await.unwrap();
    assert!(at_idp.status().is_redirection(), "the provider redirects back");
    let back = at_idp.headers()["location"].to_str().unwrap().to_string();
    let cookie = if cookies.is_empty() { flow_cookie } else { format!("{flow_cookie}; {cookies}") };
    app.client.get(&back).header("Cookie", cookie).send().await.unwrap()
}

fn flow_cookie(res: &reqwest::Response) -> String {
    res.headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|c| c.starts_with("arbor_oidc="))
        .and_then(|c| c.split(';').next())
        .expect("flow cookie")
        .to_string()
}

/// A local administrator, admin@example.com, beside the provider's accounts.
async fn local_admin(app: &TestApp) -> arbor::domain::accounts::User {
    app.state
        .accounts
        .create_local("admin@example.com", "Admin", "correct horse battery", 12, Role::Admin)
        .await
        .unwrap()
}

async fn user_count(app: &TestApp) -> u64 {
    use sea_orm::{EntityTrait, PaginatorTrait};
    arbor::storage::entities::user::Entity::find().count(&app.state.db).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_good_sign_in_creates_the_account_and_a_session() {
    for scenario in [Scenario::Good, Scenario::Es256Good, Scenario::RotatedKey] {
        let idp = rogue_idp::start(CLIENT_ID, CLIENT_SECRET).await.unwrap();
        idp.set_claims(
            json!({"email": "Ada@Example.com", "email_verified": true, "name": "Ada L", "groups": ["staff"]}),
        );
        let app = app_with(&idp, |_| {}).await;
        if scenario == Scenario::RotatedKey {
            // Discovery (and its keys) cached first, then the provider rotates.
            let login = app.get("/login", None).await.text().await.unwrap();
            assert!(login.contains("Sign in with Rogue Corp"));
            assert_eq!(sign_in_with(&app, "", "").await.status(), 303);
        }
        idp.set_scenario(scenario);
        let res = sign_in_with(&app, "", "").await;
        assert_eq!(res.status(), 303, "{scenario:?}: {}", res.text().await.unwrap_or_default());
        assert_eq!(res.headers()["location"], "/account/sessions");
        let cookie = session_cookie_from(&res).expect("session");
        let page = app.get("/account/sessions", Some(&cookie)).await;
        assert_eq!(page.status(), 200);
        let (user, hash) = arbor::storage::repos::users::find_by_email(&app.state.db, "ada@example.com")
            .await
            .unwrap()
            .into_iter()
            .next()
            .unwrap();
        assert!(hash.is_none(), "no password for provider accounts");
        assert_eq!(user.display_name, "Ada L");
        assert_eq!(user.role, Role::Member);
        let sent = idp.last_authorize().unwrap();
        assert_eq!(sent.code_challenge_method.as_deref(), Some("S256"), "PKCE S256, always");
        assert!(sent.state.is_some_and(|s| s.len() >= 22) && sent.nonce.is_some_and(|n| n.len() >= 22));
        assert_eq!(sent.client_id.as_deref(), Some(CLIENT_ID));
        assert_eq!(sent.redirect_uri, Some(format!("{}/auth/oidc/callback", app.origin())));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_misbehaving_answer_is_refused_without_side_effects() {
    for scenario in Scenario::MUST_FAIL {
        let idp = rogue_idp::start(CLIENT_ID, CLIENT_SECRET).await.unwrap();
        idp.set_claims(json!({"email": "eve@example.com", "email_verified": true}));
        idp.set_scenario(scenario);
        let app = app_with(&idp, |_| {}).await;
        let before = user_count(&app).await;
        let start = start_flow(&app, "next=%2F").await;
        if scenario == Scenario::DiscoveryIssuerMismatch {
            // Refused before the browser is even sent anywhere.
            assert_eq!(start.status(), 503, "{scenario:?}");
            assert!(start.headers().get("location").is_none());
            continue;
        }
        assert_eq!(start.status(), 303, "{scenario:?}");
        let flow = flow_cookie(&start);
        let at_idp = app.client.get(start.headers()["location"].to_str().unwrap()).send().await.unwrap();
        let back = at_idp.headers()["location"].to_str().unwrap().to_string();
        let res = app.client.get(&back).header("Cookie", &flow).send().await.unwrap();
        assert_eq!(res.status(), 400, "{scenario:?} must be refused");
        assert!(session_cookie_from(&res).is_none(), "{scenario:?}: no session");
        assert_eq!(user_count(&app).await, before, "{scenario:?}: no user row");
        let body = res.text().await.unwrap();
        assert!(body.contains("Sign-in failed"), "{scenario:?}: {body}");
        assert!(!body.contains(CLIENT_SECRET));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_must_be_this_browsers_fresh_and_unused() {
    let idp = rogue_idp::start(CLIENT_ID, CLIENT_SECRET).await.unwrap();
    idp.set_claims(json!({"email": "ada@example.com", "email_verified": true}));
    let app = app_with(&idp, |_| {}).await;
    let start = start_flow(&app, "next=%2F").await;
    let flow = flow_cookie(&start);
    let at_idp = app.client.get(start.headers()["location"].to_str().unwrap()).send().await.unwrap();
    let back = at_idp.headers()["location"].to_str().unwrap().to_string();

    // Another browser (no cookie, or someone else's) cannot complete it.
    assert_eq!(app.client.get(&back).send().await.unwrap().status(), 400);
    let other = app.client.get(&back).header("Cookie", "arbor_oidc=someone-elses-flow").send().await.unwrap();
    assert_eq!(other.status(), 400);
    // Missing or altered state.
    let without_state = back.split("&state=").next().unwrap().to_string();
    // (A flow is single-use: a fresh one for the tampering check.)
    let f2 = flow_cookie(&start_flow(&app, "next=%2F").await);
    assert_eq!(app.client.get(&without_state).header("Cookie", &f2).send().await.unwrap().status(), 400);
    // The right browser completes it once; a replay finds nothing.
    let ok = app.client.get(&back).header("Cookie", &flow).send().await.unwrap();
    assert_eq!(ok.status(), 303);
    assert_eq!(app.client.get(&back).header("Cookie", &flow).send().await.unwrap().status(), 400);
    assert_eq!(user_count(&app).await, 1);
}

/// SECURITY.md 32: a code is redeemed with the verifier of the flow that asked for it. A code
/// stolen from one sign-in and injected into another browser's callback (with that browser's own
/// state and flow cookie) goes to the provider with the wrong verifier and is refused there; the
/// provider checks S256 verifiers as a real one does. (The ID token's nonce, bound to the other
/// flow, would be refused too; the provider's count shows the verifier was checked first.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_code_redeemed_with_another_flows_verifier_signs_nobody_in() {
    let idp = rogue_idp::start(CLIENT_ID, CLIENT_SECRET).await.unwrap();
    idp.set_claims(json!({"email": "attacker@example.com", "email_verified": true}));
    let app = app_with(&idp, |_| {}).await;
    let res = inject_code(&app).await;
    assert_eq!(res.status(), 400, "the provider refuses the code for this verifier");
    assert!(session_cookie_from(&res).is_none());
    assert!(res.text().await.unwrap().contains("Sign-in failed"));
    assert_eq!(user_count(&app).await, 0, "nobody was signed in or created");
    assert_eq!(idp.verifier_refusals(), 1, "Arbor sent this flow's verifier, not the code's");
    // A flow redeeming its own code sends the matching verifier.
    assert_eq!(sign_in_with(&app, "", "").await.status(), 303);
    assert_eq!(idp.verifier_refusals(), 1);
}

/// The attacker's browser runs a flow to the provider and keeps the code it gets back; the
/// victim's browser starts its own flow, and its callback (its own state, its flow cookie)
/// carries the attacker's code. The callback's response.
async fn inject_code(app: &TestApp) -> reqwest::Response {
    let attacker = start_flow(app, "next=%2F").await;
    let attacker_challenge = idp_challenge(&attacker);
    let stolen_code = query_value(&idp_callback(app, &attacker).await, "code");
    let victim = start_flow(app, "next=%2F").await;
    assert_ne!(attacker_challenge, idp_challenge(&victim), "each flow has its own verifier");
    let victim_back = idp_callback(app, &victim).await;
    let mut injected = reqwest::Url::parse(&victim_back).unwrap();
    let pairs: Vec<(String, String)> = injected
        .query_pairs()
        .map(|(k, v)| (k.to_string(), if k == "code" { stolen_code.clone() } else { v.to_string() }))
        .collect();
    injected.query_pairs_mut().clear().extend_pairs(pairs);
    assert_ne!(query_value(injected.as_str(), "code"), query_value(&victim_back, "code"));
    app.client.get(injected.as_str()).header("Cookie", flow_cookie(&victim)).send().await.unwrap()
}

/// The `code_challenge` a started flow sends to the provider.
fn idp_challenge(start: &reqwest::Response) -> String {
    let to_idp = start.headers()["location"].to_str().unwrap();
    assert_eq!(query_value(to_idp, "code_challenge_method"), "S256");
    query_value(to_idp, "code_challenge")
}

/// Follows a started flow to the provider and returns the callback URL it sends the browser to.
async fn idp_callback(app: &TestApp, start: &reqwest::Response) -> String {
    let at_idp = app.client.get(start.headers()["location"].to_str().unwrap()).send().await.unwrap();
    assert!(at_idp.status().is_redirection());
    at_idp.headers()["location"].to_str().unwrap().to_string()
}

fn query_value(url: &str, name: &str) -> String {
    let url = reqwest::Url::parse(url).unwrap();
    url.query_pairs().find(|(k, _)| k == name).map(|(_, v)| v.into_owned()).expect("parameter present")
}

/// SECURITY.md 33: the provider asserts the local admin's address. Only a verified address with
/// linking allowed links; `email_verified` false or missing, or the admin's address as
/// `preferred_username` beside another email, gets a separate member account with no access to
/// the admin's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn emails_never_link_accounts_unless_allowed_and_verified() {
    let admin_email = json!({"email": "admin@example.com", "preferred_username": "admin"});
    let with = |extra: serde_json::Value| {
        let mut claims = admin_email.clone();
        claims.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        claims
    };
    let cases = [
        ("linking off", false, with(json!({"email_verified": true})), false),
        ("unverified", true, with(json!({"email_verified": false})), false),
        ("verification missing", true, admin_email.clone(), false),
        (
            "the admin's address as preferred_username",
            true,
            json!({"email": "eve@example.com", "email_verified": true, "preferred_username": "admin@example.com"}),
            false,
        ),
        ("verified, linking on", true, with(json!({"email_verified": true})), true),
    ];
    for (what, link_enabled, claims, expect_linked) in cases {
        let idp = rogue_idp::start(CLIENT_ID, CLIENT_SECRET).await.unwrap();
        idp.set_claims(claims);
        let app = app_with(&idp, |c| {
            c.oidc.link_verified_email = link_enabled;
            c.auth.local_accounts = arbor::config::Toggle::On;
        })
        .await;
        let admin = local_admin(&app).await;
        let (_, session) = app.create_session(&admin).await;
        let res = sign_in_with(&app, "", "").await;
        assert_eq!(res.status(), 303, "{what}");
        let cookie = session_cookie_from(&res).unwrap();
        let page = app.get("/", Some(&cookie)).await.text().await.unwrap();
        let linked = arbor::storage::repos::users::has_identity(&app.state.db, admin.id).await.unwrap();
        assert_eq!(linked, expect_linked, "{what}");
        // Unlinked sign-ins get their own member account, never the admin's: no console, not
        // the admin's sessions.
        assert_eq!(page.contains(r#"href="/admin""#), expect_linked, "{what}: admin powers only when linked");
        let console = app.get("/admin/users", Some(&cookie)).await.status().as_u16();
        assert_eq!(console, if expect_linked { 200 } else { 403 }, "{what}");
        let theirs = app.get(&format!("/s/{session}"), Some(&cookie)).await.status().as_u16();
        assert_eq!(theirs, if expect_linked { 200 } else { 404 }, "{what}");
        assert_eq!(user_count(&app).await, if expect_linked { 1 } else { 2 }, "{what}");
    }
}

/// SECURITY.md 56: an OIDC sign-in with `email_verified=false` claiming someone else's address:
/// the address is kept apart (shown as unverified), never stored as the account's email, never
/// used for lookups or links; admin lookups by email find exactly one account or refuse.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unverified_email_is_kept_apart_and_admin_lookups_are_unambiguous() {
    use arbor::domain::accounts::{self, UserStatus};
    use arbor::storage::repos::users;
    let idp = rogue_idp::start(CLIENT_ID, CLIENT_SECRET).await.unwrap();
    idp.set_claims(json!({"email": "Admin@Example.com", "email_verified": false, "name": "Mallory"}));
    let app = app_with(&idp, |c| {
        c.oidc.link_verified_email = true;
        c.auth.local_accounts = arbor::config::Toggle::On;
    })
    .await;
    let admin = local_admin(&app).await;
    assert_eq!(sign_in_with(&app, "", "").await.status(), 303);
    use sea_orm::EntityTrait;
    let rows = arbor::storage::entities::user::Entity::find().all(&app.state.db).await.unwrap();
    let mallory = rows.iter().find(|u| u.id != admin.id).expect("a new account, not a link");
    assert_eq!(mallory.email, "", "an unverified address is not the account's email");
    assert_eq!(mallory.unverified_email.as_deref(), Some("admin@example.com"), "kept apart, normalised");
    assert_eq!(mallory.role, "member");
    assert!(!users::has_identity(&app.state.db, admin.id).await.unwrap(), "never linked");
    // Every lookup by that email finds the real owner only.
    let found = accounts::one_by_email(&app.state.db, "ADMIN@example.com ").await.unwrap().unwrap();
    assert_eq!(found.id, admin.id);
    assert_eq!(app.state.accounts.promote_by_email("admin@example.com").await.unwrap().id, admin.id);
    let token = app
        .state
        .accounts
        .tokens
        .issue_for_operator("admin@example.com", "ops", arbor::domain::accounts::api_tokens::Scope::Api, None)
        .await
        .unwrap();
    assert!(!token.token.is_empty());
    // The console shows the claim as unverified.
    let admin_session = app.login_full(&admin).await;
    let page = app.get("/admin/users", Some(&admin_session.cookie)).await.text().await.unwrap();
    assert!(page.contains("unverified: admin@example.com") && page.contains("no verified email"), "{page}");

    // Signing in again once the provider verified an address: that becomes the email.
    idp.set_claims(json!({"email": "mallory@example.com", "email_verified": true, "name": "Mallory"}));
    assert_eq!(sign_in_with(&app, "", "").await.status(), 303);
    let again = arbor::storage::entities::user::Entity::find_by_id(mallory.id)
        .one(&app.state.db)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((again.email.as_str(), again.unverified_email.as_deref()), ("mallory@example.com", None));

    // Two accounts with one verified email (made before links were allowed, say): every admin
    // lookup by that email refuses, naming the reason, instead of picking one.
    for _ in 0..2 {
        users::insert(&app.state.db, "twin@example.com", "Twin", Role::Member, UserStatus::Active)
            .await
            .unwrap();
    }
    let refused = app.state.accounts.promote_by_email("twin@example.com").await.unwrap_err();
    assert!(
        refused.to_string().contains("More than one account has the email twin@example.com"),
        "{refused}"
    );
    let refused = app
        .state
        .accounts
        .tokens
        .issue_for_operator("twin@example.com", "ops", arbor::domain::accounts::api_tokens::Scope::Api, None)
        .await
        .unwrap_err();
    assert!(refused.to_string().contains("More than one account"), "{refused}");
    let body = "name=twin-only&kind=openai&visibility=users&allowed_emails=twin%40example.com";
    let res = app.post_form("/admin/providers", body, Some(&admin_session)).await;
    assert_eq!(res.status(), 409);
    assert!(res.text().await.unwrap().contains("More than one account"));
    let res =
        app.post_form("/admin/quotas", "email=twin%40example.com&tokens_day=5", Some(&admin_session)).await;
    assert!(res.status() == 409 || res.status() == 400, "{}", res.status());

    // JSON in attributes comes from a serializer: an address with a quote stays one value.
    let quoted = users::insert(&app.state.db, "q\"x@example.com", "Q", Role::Member, UserStatus::Active)
        .await
        .unwrap();
    let quota = arbor::domain::admin::quotas::Quota {
        tokens_day: Some(5),
        tokens_month: None,
        micros_day: None,
        micros_month: None,
    };
    app.state
        .admin
        .set_quota(
            &arbor::domain::accounts::Actor::for_tests(&admin).admin().unwrap(),
            &arbor::domain::audit::Origin::cli(),
            arbor::domain::admin::quotas::Subject::Person(quoted.id),
            quota,
            false,
        )
        .await
        .unwrap();
    let page = app.get("/admin/quotas", Some(&admin_session.cookie)).await.text().await.unwrap();
    let at = page.find("hx-vals=\"").expect("the reset button") + "hx-vals=\"".len();
    let raw = &page[at..at + page[at..].find('"').unwrap()];
    let vals: serde_json::Value =
        serde_json::from_str(&raw.replace("&quot;", "\"").replace("&#x2F;", "/")).unwrap();
    assert_eq!(vals, json!({"email": "q\"x@example.com", "inherit": "on"}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_subject_from_another_issuer_is_another_person() {
    let app = TestApp::spawn().await;
    let mut cfg = app.state.config.oidc.clone();
    cfg.issuer = "https://a.example".into();
    let mut id = arbor::auth::oidc::VerifiedIdentity {
        issuer: "https://a.example".into(),
        subject: "42".into(),
        email: Some("x@example.com".into()),
        email_verified: true,
        name: None,
        preferred_username: None,
        groups: vec![],
        groups_sent: false,
    };
    let a = app.state.accounts.sign_in_with_provider(&cfg, &id, None).await.unwrap();
    let again = app.state.accounts.sign_in_with_provider(&cfg, &id, None).await.unwrap();
    assert_eq!(a.id, again.id);
    id.issuer = "https://b.example".into();
    let b = app.state.accounts.sign_in_with_provider(&cfg, &id, None).await.unwrap();
    assert_ne!(a.id, b.id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roles_follow_the_admin_group_at_every_sign_in() {
    let idp = rogue_idp::start(CLIENT_ID, CLIENT_SECRET).await.unwrap();
    idp.set_claims(json!({"email": "ops@example.com", "email_verified": true, "groups": ["arbor-admins"]}));
    let app = app_with(&idp, |c| c.oidc.admin_groups = vec!["arbor-admins".into()]).await;
    assert_eq!(sign_in_with(&app, "", "").await.status(), 303);
    let (u, _) = arbor::storage::repos::users::find_by_email(&app.state.db, "ops@example.com")
        .await
        .unwrap()
        .into_iter()
        .next()
        .unwrap();
    assert_eq!(u.role, Role::Admin);
    idp.set_claims(json!({"email": "ops@example.com", "email_verified": true, "groups": ["staff"]}));
    assert_eq!(sign_in_with(&app, "", "").await.status(), 303);
    let (u, _) = arbor::storage::repos::users::find_by_email(&app.state.db, "ops@example.com")
        .await
        .unwrap()
        .into_iter()
        .next()
        .unwrap();
    assert_eq!(u.role, Role::Member, "removed from the group, no longer admin");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_lists_keep_others_out_but_invitations_let_them_in() {
    let idp = rogue_idp::start(CLIENT_ID, CLIENT_SECRET).await.unwrap();
    idp.set_claims(json!({"email": "guest@elsewhere.com", "email_verified": true, "groups": ["guests"]}));
    let app = app_with(&idp, |c| {
        c.oidc.allowed_groups = vec!["staff".into()];
        c.oidc.allowed_email_domains = vec!["example.com".into()];
    })
    .await;
    let res = sign_in_with(&app, "", "").await;
    assert_eq!(res.status(), 403);
    assert!(session_cookie_from(&res).is_none());
    assert_eq!(user_count(&app).await, 0);

    let admin = app.create_user("root@example.com", Role::Admin).await;
    let inv = app
        .state
        .accounts
        .invitations
        .create(
            &arbor::domain::accounts::Actor::for_tests(&admin).admin().unwrap(),
            "guest@elsewhere.com",
            Role::Admin,
            24,
        )
        .await
        .unwrap();
    let invite_page = app.get(&format!("/invite/{}", inv.token), None).await.text().await.unwrap();
    assert!(invite_page.contains("Accept with Rogue Corp"));
    let res = sign_in_with(&app, &format!("&invitation={}", inv.token), "").await;
    assert_eq!(res.status(), 303);
    let (u, _) = arbor::storage::repos::users::find_by_email(&app.state.db, "guest@elsewhere.com")
        .await
        .unwrap()
        .into_iter()
        .next()
        .unwrap();
    assert_eq!(u.role, Role::Admin, "the invited role");
    assert_eq!(app.get(&format!("/invite/{}", inv.token), None).await.status(), 404, "used up");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_setup_link_works_with_a_provider_sign_in() {
    let idp = rogue_idp::start(CLIENT_ID, CLIENT_SECRET).await.unwrap();
    idp.set_claims(json!({"email": "first@example.com", "email_verified": true}));
    let app = app_with(&idp, |_| {}).await;
    let token = app.state.accounts.open_setup().await.unwrap().unwrap();
    let res = app.get(&format!("/setup/{token}"), None).await;
    assert_eq!(res.headers()["location"], "/login", "local accounts are off once OIDC is configured");
    let setup = res
        .headers()
        .get_all("set-cookie")
        .iter()
        .find_map(|v| v.to_str().ok().filter(|c| c.starts_with("arbor_setup=")))
        .and_then(|c| c.split(';').next())
        .unwrap()
        .to_string();
    assert_eq!(sign_in_with(&app, "", &setup).await.status(), 303);
    let (u, _) = arbor::storage::repos::users::find_by_email(&app.state.db, "first@example.com")
        .await
        .unwrap()
        .into_iter()
        .next()
        .unwrap();
    assert_eq!(u.role, Role::Admin);
    assert!(app.state.accounts.open_setup().await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_oidc_configured_password_sign_in_is_off_by_default() {
    let idp = rogue_idp::start(CLIENT_ID, CLIENT_SECRET).await.unwrap();
    let app = app_with(&idp, |_| {}).await;
    let page = app.get("/login", None).await.text().await.unwrap();
    assert!(page.contains("Sign in with Rogue Corp") && !page.contains(r#"action="/login""#));
    assert_eq!(app.post_form("/login", "email=a%40b.io&password=whatever-long", None).await.status(), 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
/// SECURITY.md 50: starting a sign-in and coming back from the provider are each limited per
/// client address; `X-Forwarded-For` from a peer that is not a trusted proxy changes nothing.
async fn starting_sign_ins_is_rate_limited_per_address() {
    let idp = rogue_idp::start(CLIENT_ID, CLIENT_SECRET).await.unwrap();
    idp.set_claims(json!({"email": "ada@example.com", "email_verified": true}));
    let app = app_with(&idp, |c| c.auth.login_attempts_per_ip_per_minute = 2).await;
    let start = |from: &'static str| {
        app.client
            .post(app.url("/auth/oidc/start"))
            .header("Origin", app.origin())
            .header("Content-Type", "application/x-www-form-urlencoded")
            .header("X-Forwarded-For", from)
            .body("next=%2F")
            .send()
    };
    let first = start("203.0.113.1").await.unwrap();
    assert_eq!(first.status(), 303);
    assert_eq!(start("203.0.113.2").await.unwrap().status(), 303);
    let limited = start("203.0.113.3").await.unwrap();
    assert_eq!(limited.status(), 429);
    assert!(limited.headers().contains_key("retry-after"));
    assert!(limited.headers().get("location").is_none());

    // Callbacks: a made-up one is refused, a second too, the third is not even looked at; the
    // real one of the first flow is then limited as well, and nobody was signed in.
    let callback = |from: &'static str, url: String, cookie: String| {
        app.client.get(url).header("Cookie", cookie).header("X-Forwarded-For", from).send()
    };
    let garbage = app.url("/auth/oidc/callback?code=made-up&state=made-up");
    let no_flow = "arbor_oidc=made-up".to_string();
    assert_eq!(callback("198.51.100.1", garbage.clone(), no_flow.clone()).await.unwrap().status(), 400);
    assert_eq!(callback("198.51.100.2", garbage.clone(), no_flow.clone()).await.unwrap().status(), 400);
    let limited = callback("198.51.100.3", garbage, no_flow).await.unwrap();
    assert_eq!(limited.status(), 429);
    assert!(limited.headers().contains_key("retry-after"));
    let back = idp_callback(&app, &first).await;
    let limited = callback("198.51.100.4", back, flow_cookie(&first)).await.unwrap();
    assert_eq!(limited.status(), 429);
    assert!(session_cookie_from(&limited).is_none());
    assert_eq!(user_count(&app).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_concurrent_first_sign_ins_make_one_member_and_no_admin() {
    let idp = rogue_idp::start(CLIENT_ID, CLIENT_SECRET).await.unwrap();
    idp.set_claims(json!({"email": "new@example.com", "email_verified": true}));
    let app = app_with(&idp, |c| c.auth.login_attempts_per_ip_per_minute = 100).await;
    let attempts = (0..20).map(|_| sign_in_with(&app, "", ""));
    let results = futures_util::future::join_all(attempts).await;
    for res in &results {
        assert_eq!(res.status(), 303, "no sign-in fails on the race");
    }
    assert_eq!(user_count(&app).await, 1, "one person, one account");
    assert_eq!(arbor::storage::repos::users::count_admins(&app.state.db).await.unwrap(), 0);
}
