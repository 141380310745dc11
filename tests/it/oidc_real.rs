//! Sign-in against a real OpenID provider (the `oidc-provider` npm package) on loopback.

use std::net::TcpListener;

use arbor::domain::accounts::Role;

use crate::support::idp::{Idp, IdpAccount, IdpConfig};
use crate::support::{TestApp, session_cookie_from};

const CLIENT_ID: &str = "arbor";
const CLIENT_SECRET: &str = "a-real-client-secret:with-colon";

fn accounts() -> Vec<IdpAccount> {
    vec![
        IdpAccount {
            sub: "alice".into(),
            email: "alice@example.test".into(),
            email_verified: true,
            name: "Alice Anders".into(),
            preferred_username: "alice".into(),
            groups: vec!["arbor-admins".into(), "dev".into()],
        },
        IdpAccount {
            sub: "bob".into(),
            email: "bob@example.test".into(),
            email_verified: false,
            name: "Bob Berg".into(),
            preferred_username: "bob".into(),
            groups: vec![],
        },
    ]
}

/// A real provider and an Arbor registered at it.
pub(crate) async fn idp_and_app(
    alg: &'static str,
    adjust: impl FnOnce(&mut arbor::config::Config),
) -> (Idp, TestApp) {
    idp_with(accounts(), alg, adjust).await
}

/// A real provider holding these accounts and an Arbor registered at it.
pub(crate) async fn idp_with(
    accounts: Vec<IdpAccount>,
    alg: &'static str,
    adjust: impl FnOnce(&mut arbor::config::Config),
) -> (Idp, TestApp) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let idp = Idp::start(IdpConfig {
        client_id: CLIENT_ID.into(),
        client_secret: CLIENT_SECRET.into(),
        redirect_uris: vec![format!("{base}/auth/oidc/callback")],
        post_logout_redirect_uris: vec![format!("{base}/login")],
        accounts,
        alg,
    })
    .await
    .expect("start the test OpenID provider (scripts/test installs it with npm ci)");
    let issuer = idp.issuer.clone();
    let app = TestApp::spawn_on(listener, move |c| {
        c.oidc.issuer = issuer;
        c.oidc.client_id = CLIENT_ID.into();
        c.oidc.client_secret = CLIENT_SECRET.into();
        c.oidc.display_name = "Example SSO".into();
        c.oidc.admin_groups = vec!["arbor-admins".into()];
        // This provider releases the groups claim only for the `groups` scope.
        c.oidc.scopes = ["openid", "email", "profile", "groups"].map(String::from).to_vec();
        adjust(c);
    })
    .await;
    (idp, app)
}

/// Start at Arbor, sign in at the provider as `login`, come back; the callback's response.
pub(crate) async fn sign_in(idp: &Idp, app: &TestApp, login: &str) -> reqwest::Response {
    let start = app.post_form("/auth/oidc/start", "next=%2F", None).await;
    assert_eq!(start.status(), 303);
    let flow = start
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|c| c.starts_with("arbor_oidc="))
        .and_then(|c| c.split(';').next())
        .unwrap()
        .to_string();
    let authorize = start.headers()["location"].to_str().unwrap().to_string();
    assert!(authorize.contains("code_challenge_method=S256"));
    let back = idp.sign_in(&authorize, login).await.unwrap();
    app.client.get(&back).header("Cookie", flow).send().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_full_code_flow_with_rs256_and_es256() {
    for alg in ["RS256", "ES256"] {
        let (idp, app) = idp_and_app(alg, |_| {}).await;
        let res = sign_in(&idp, &app, "alice").await;
        assert_eq!(res.status(), 303, "{alg}: {}", res.text().await.unwrap_or_default());
        let cookie = session_cookie_from(&res).unwrap();
        let home = app.get("/", Some(&cookie)).await.text().await.unwrap();
        assert!(home.contains("Welcome, Alice Anders"), "{alg}");
        let (alice, _) = arbor::storage::repos::users::find_by_email(&app.state.db, "alice@example.test")
            .await
            .unwrap()
            .into_iter()
            .next()
            .unwrap();
        assert_eq!(alice.role, Role::Admin, "{alg}: arbor-admins maps to admin");

        // Bob's email is unverified and he has no admin group: a member, whose address is kept
        // apart and found by no lookup (SECURITY.md 56).
        let res = sign_in(&idp, &app, "bob").await;
        assert_eq!(res.status(), 303);
        assert!(
            arbor::storage::repos::users::find_by_email(&app.state.db, "bob@example.test")
                .await
                .unwrap()
                .is_empty()
        );
        use arbor::storage::entities::user;
        use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
        let bob = user::Entity::find()
            .filter(user::Column::UnverifiedEmail.eq("bob@example.test"))
            .one(&app.state.db)
            .await
            .unwrap()
            .expect("bob's account");
        assert_eq!((bob.email.as_str(), bob.role.as_str()), ("", "member"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_login_at_the_provider_comes_back_refused() {
    let (idp, app) = idp_and_app("RS256", |_| {}).await;
    let res = sign_in(&idp, &app, "mallory").await;
    assert_eq!(res.status(), 400);
    assert!(session_cookie_from(&res).is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signing_out_also_signs_out_at_the_provider() {
    let (idp, app) = idp_and_app("RS256", |_| {}).await;
    let res = sign_in(&idp, &app, "alice").await;
    let cookie = session_cookie_from(&res).unwrap();
    let (alice, _) = arbor::storage::repos::users::find_by_email(&app.state.db, "alice@example.test")
        .await
        .unwrap()
        .into_iter()
        .next()
        .unwrap();
    // A session with its CSRF token, as the page would have it.
    let s = app.login_full(&alice).await;
    let out = app.post_form("/logout", "", Some(&s)).await;
    assert_eq!(out.status(), 303);
    let to = out.headers()["location"].to_str().unwrap().to_string();
    assert!(to.starts_with(&idp.issuer), "to the provider's end_session_endpoint: {to}");
    assert!(to.contains("client_id=arbor") && to.contains("post_logout_redirect_uri="));
    let back = idp.sign_out(&to).await.unwrap();
    assert!(back.starts_with(&format!("{}/login", app.origin())), "{back}");
    assert_eq!(app.get("/account/sessions", Some(&s.cookie)).await.status(), 401);
    assert_eq!(app.get("/account/sessions", Some(&cookie)).await.status(), 200, "only that session ended");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_groups_claim_syncs_the_groups_the_provider_manages_at_every_sign_in() {
    use arbor::domain::accounts::Actor;
    use arbor::domain::audit::Origin;
    let (idp, app) = idp_and_app("RS256", |_| {}).await;
    let db = &app.state.db;
    // A group made by hand before the sign-in: the claim's "dev" does not join it.
    let root = app.create_user("root@example.com", Role::Admin).await;
    let proof = Actor::for_tests(&root).admin().unwrap();
    let by_hand = app.state.teams.groups.create(&proof, &Origin::cli(), "dev").await.unwrap();

    let res = sign_in(&idp, &app, "alice").await;
    assert_eq!(res.status(), 303);
    let cookie = session_cookie_from(&res).unwrap();
    let (alice, _) = arbor::storage::repos::users::find_by_email(db, "alice@example.test")
        .await
        .unwrap()
        .into_iter()
        .next()
        .unwrap();
    let names = |gs: Vec<arbor::domain::teams::Group>| gs.into_iter().map(|g| g.name).collect::<Vec<_>>();
    let mine = app.state.teams.groups.mine(&Actor::for_tests(&alice)).await.unwrap();
    assert!(mine.iter().all(|g| g.managed_by_idp));
    assert_eq!(names(mine), ["arbor-admins"]);
    assert!(app.state.teams.groups.detail(&proof, by_hand.id).await.unwrap().1.is_empty());
    let settings = app.get("/settings", Some(&cookie)).await.text().await.unwrap();
    assert!(settings.contains(">arbor-admins</span>"), "{settings}");

    // A provider-managed group the claim no longer names is left at the next sign-in.
    let legacy = arbor::storage::repos::groups::insert(db, "legacy", true).await.unwrap().unwrap();
    arbor::storage::repos::groups::add_member(db, legacy.id, alice.id).await.unwrap();
    assert_eq!(sign_in(&idp, &app, "alice").await.status(), 303);
    assert_eq!(
        names(app.state.teams.groups.mine(&Actor::for_tests(&alice)).await.unwrap()),
        ["arbor-admins"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_account_the_directory_provisioned_is_the_one_its_first_sign_in_uses() {
    let (idp, app) = idp_and_app("RS256", |_| {}).await;
    assert!(!app.state.config.oidc.link_verified_email, "linking by email is off");
    let provisioned = arbor::storage::repos::directory::insert_user(
        &app.state.db,
        "alice@example.test",
        "Alice",
        Some("ext-a"),
        true,
    )
    .await
    .unwrap();
    let res = sign_in(&idp, &app, "alice").await;
    assert_eq!(res.status(), 303);
    let found =
        arbor::storage::repos::users::find_by_email(&app.state.db, "alice@example.test").await.unwrap();
    assert_eq!(found.len(), 1, "no second account");
    assert_eq!(found[0].0.id, provisioned.id);
    assert!(arbor::storage::repos::users::has_identity(&app.state.db, provisioned.id).await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_that_grants_admin_makes_its_members_admins_at_their_first_sign_in_only() {
    use arbor::domain::accounts::Actor;
    use arbor::domain::audit::Origin;
    use arbor::domain::teams::groups;
    // No configured admin groups: the role is the groups' to give.
    let (idp, app) = idp_and_app("RS256", |c| c.oidc.admin_groups = vec![]).await;
    let db = &app.state.db;
    let root = app.create_user("root@example.com", Role::Admin).await;
    let proof = Actor::for_tests(&root).admin().unwrap();
    let dev = arbor::storage::repos::groups::insert(db, "dev", true).await.unwrap().unwrap();
    let grants = groups::Grants { default_role: "admin".into(), loosest_approval_mode: String::new() };
    app.state.teams.groups.set_grants(&proof, &Origin::cli(), dev.id, &grants).await.unwrap();

    let find = |email: &'static str| async move {
        arbor::storage::repos::users::find_by_email(db, email).await.unwrap().into_iter().next().unwrap().0
    };
    // Alice's claim names dev: her account starts as an admin, and the audit says why.
    assert_eq!(sign_in(&idp, &app, "alice").await.status(), 303);
    let alice = find("alice@example.test").await;
    assert_eq!(alice.role, Role::Admin);
    let audit = arbor::storage::repos::audit::list(db, &Default::default(), 50).await.unwrap();
    assert!(
        audit.iter().any(|e| e.action == "user.role" && e.details.to_string().contains("first sign-in")),
        "{audit:?}"
    );

    // Only the first sign-in: once an admin makes her a member, the next sign-in keeps that.
    arbor::storage::repos::users::set_role(db, alice.id, Role::Member).await.unwrap();
    assert_eq!(sign_in(&idp, &app, "alice").await.status(), 303);
    assert_eq!(find("alice@example.test").await.role, Role::Member);

    // Bob is in no group: a member.
    assert_eq!(sign_in(&idp, &app, "bob").await.status(), 303);
    use arbor::storage::entities::user;
    use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
    let bob = user::Entity::find()
        .filter(user::Column::UnverifiedEmail.eq("bob@example.test"))
        .one(db)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(bob.role, "member");
}
