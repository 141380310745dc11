//! Invitations: created by admins, accepted once through the link, expiring; mail on and off.

use arbor::domain::accounts::Role;
use sea_orm::{ActiveModelTrait, Set};

use crate::support::{TestApp, session_cookie_from};

/// The invitation link an admin page shows, if any.
fn link_in(html: &str) -> Option<String> {
    let start = html.find("<code class=\"invitation-link\">")? + "<code class=\"invitation-link\">".len();
    Some(html[start..].split('<').next()?.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_mail_the_admin_gets_the_link_and_it_works_once() {
    let app = TestApp::spawn().await;
    let admin = app.create_user("root@example.com", Role::Admin).await;
    let s = app.login_full(&admin).await;
    let res = app.post_form("/admin/invitations", "email=New%40Example.com&role=admin", Some(&s)).await;
    assert_eq!(res.status(), 200);
    let html = res.text().await.unwrap();
    assert!(html.contains("Mail is off"), "{html}");
    let link = link_in(&html).expect("link shown");
    let path = link.strip_prefix(&app.origin()).expect("link on this server").to_string();

    let page = app.get(&path, None).await;
    assert_eq!(page.status(), 200);
    assert!(page.text().await.unwrap().contains("new@example.com"));

    let bad = app.post_form(&path, "display_name=New&password=short", None).await;
    assert_eq!(bad.status(), 400);
    let res = app.post_form(&path, "display_name=New+Admin&password=correct+horse+battery", None).await;
    assert_eq!(res.status(), 303);
    assert!(session_cookie_from(&res).is_some(), "signed in straight away");
    let (user, _) = arbor::storage::repos::users::find_by_email(&app.state.db, "new@example.com")
        .await
        .unwrap()
        .into_iter()
        .next()
        .unwrap();
    assert_eq!(user.role, Role::Admin, "the invited role");
    assert_eq!(user.display_name, "New Admin");

    // Single use.
    assert_eq!(app.get(&path, None).await.status(), 404);
    assert_eq!(
        app.post_form(&path, "display_name=X&password=correct+horse+battery", None).await.status(),
        404
    );
    let listing = app.get("/admin/invitations", Some(&s.cookie)).await.text().await.unwrap();
    assert!(listing.contains("accepted"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_and_unknown_links_are_404() {
    let app = TestApp::spawn().await;
    let admin = app.create_user("root@example.com", Role::Admin).await;
    let actor = arbor::domain::accounts::Actor::for_tests(&admin);
    let new = app
        .state
        .accounts
        .invitations
        .create(&actor.admin().unwrap(), "late@example.com", Role::Member, 1)
        .await
        .unwrap();
    arbor::storage::entities::invitation::ActiveModel {
        id: Set(new.invitation.id),
        expires_at: Set(chrono::Utc::now() - chrono::Duration::minutes(1)),
        ..Default::default()
    }
    .update(&app.state.db)
    .await
    .unwrap();
    assert_eq!(app.get(&format!("/invite/{}", new.token), None).await.status(), 404);
    for bad in ["nope", &"a".repeat(43), "..%2F..%2Fetc"] {
        assert_eq!(app.get(&format!("/invite/{bad}"), None).await.status(), 404, "{bad}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_invitations_are_refused_with_a_message() {
    let app = TestApp::spawn().await;
    let admin = app.create_user("root@example.com", Role::Admin).await;
    app.create_user("taken@example.com", Role::Member).await;
    let s = app.login_full(&admin).await;
    let res = app.post_form("/admin/invitations", "email=not-an-address&role=member", Some(&s)).await;
    assert_eq!(res.status(), 400);
    assert!(res.text().await.unwrap().contains("Enter a valid email address."));
    let res = app.post_form("/admin/invitations", "email=a%40example.com&role=owner", Some(&s)).await;
    assert_eq!(res.status(), 400);
    let res = app.post_form("/admin/invitations", "email=taken%40example.com&role=member", Some(&s)).await;
    assert_eq!(res.status(), 400);
    assert!(res.text().await.unwrap().contains("already has an account"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_cannot_invite() {
    let app = TestApp::spawn().await;
    let member = app.create_user("m@example.com", Role::Member).await;
    let s = app.login_full(&member).await;
    let res = app.post_form("/admin/invitations", "email=friend%40example.com&role=admin", Some(&s)).await;
    assert_eq!(res.status(), 403);
    let actor = arbor::domain::accounts::Actor::for_tests(&member);
    // The invitation services take an `Admin` proof, which a member's actor cannot give.
    assert!(matches!(actor.admin(), Err(arbor::domain::DomainError::Forbidden)));
    let admin = app.create_user("root@example.com", Role::Admin).await;
    let listed = app
        .state
        .accounts
        .invitations
        .list(&arbor::domain::accounts::Actor::for_tests(&admin).admin().unwrap())
        .await
        .unwrap();
    assert!(listed.is_empty(), "nothing was created");
}

mod with_mail {
    use std::time::Duration;

    use arbor::domain::accounts::Role;

    use super::link_in;
    use crate::support::TestApp;
    use crate::support::smtp::{self, SmtpOptions, SmtpServer};

    async fn app_with_mail(srv: &SmtpServer, user: Option<(&str, &str)>) -> TestApp {
        let port = srv.smtp_port;
        let user = user.map(|(u, p)| (u.to_string(), p.to_string()));
        TestApp::spawn_with(move |c| {
            c.smtp.host = "127.0.0.1".into();
            c.smtp.port = port;
            c.smtp.security = arbor::config::SmtpSecurity::None;
            c.smtp.from = "Arbor <arbor@example.test>".into();
            if let Some((u, p)) = user {
                c.smtp.username = u;
                c.smtp.password = p;
            }
        })
        .await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_invitation_arrives_by_mail_in_text_and_html() {
        let srv = smtp::start(SmtpOptions::default()).await.unwrap();
        let app = app_with_mail(&srv, None).await;
        let admin = app.create_user("<b>root</b>@example.com", Role::Admin).await;
        let s = app.login_full(&admin).await;
        let res =
            app.post_form("/admin/invitations", "email=carol%40example.test&role=member", Some(&s)).await;
        assert_eq!(res.status(), 200);
        let page = res.text().await.unwrap();
        assert!(page.contains("Invitation mailed to carol@example.test."), "{page}");
        let shown = link_in(&page).unwrap();

        let mail = srv.wait_for("carol@example.test", Duration::from_secs(10)).await.unwrap();
        assert_eq!(mail.subject, "You are invited to Arbor");
        assert_eq!(mail.from, "arbor@example.test");
        let text = mail.text.unwrap();
        let html = mail.html.unwrap();
        assert!(text.contains(&shown), "the mailed link is the one shown");
        assert!(html.contains(&shown));
        assert!(
            html.contains("&lt;b&gt;root&lt;&#x2f;b&gt;") || html.contains("&lt;b&gt;root&lt;/b&gt;"),
            "{html}"
        );
        assert!(!html.contains("<b>root"));
        assert!(mail.headers.contains_key("message-id"));

        let path = shown.strip_prefix(&app.origin()).unwrap().to_string();
        let res = app.post_form(&path, "display_name=Carol&password=correct+horse+battery", None).await;
        assert_eq!(res.status(), 303);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn mail_servers_that_need_a_login_get_one() {
        let srv = smtp::start(SmtpOptions {
            user: Some("arbor".into()),
            pass: Some("mail-pass".into()),
            reject: vec![],
        })
        .await
        .unwrap();
        let app = app_with_mail(&srv, Some(("arbor", "mail-pass"))).await;
        let admin = app.create_user("root@example.com", Role::Admin).await;
        let s = app.login_full(&admin).await;
        let page =
            app.post_form("/admin/invitations", "email=dave%40example.test&role=admin", Some(&s)).await;
        assert!(page.text().await.unwrap().contains("Invitation mailed"));
        let mail = srv.wait_for("dave@example.test", Duration::from_secs(10)).await.unwrap();
        assert_eq!(mail.auth_user.as_deref(), Some("arbor"));

        // Wrong credentials: the admin is told, with the link to copy.
        let wrong = app_with_mail(&srv, Some(("arbor", "wrong"))).await;
        let admin = wrong.create_user("root@example.com", Role::Admin).await;
        let s = wrong.login_full(&admin).await;
        let page = wrong
            .post_form("/admin/invitations", "email=erin%40example.test&role=member", Some(&s))
            .await
            .text()
            .await
            .unwrap();
        assert!(page.contains("could not be sent"), "{page}");
        assert!(link_in(&page).is_some());
        assert!(!page.contains("mail-pass") && !page.contains("wrong\""), "no credentials in the page");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_refused_mail_is_reported_and_nothing_is_lost() {
        let srv =
            smtp::start(SmtpOptions { reject: vec!["bounce@example.test".into()], ..Default::default() })
                .await
                .unwrap();
        let app = app_with_mail(&srv, None).await;
        let admin = app.create_user("root@example.com", Role::Admin).await;
        let s = app.login_full(&admin).await;
        let page =
            app.post_form("/admin/invitations", "email=bounce%40example.test&role=member", Some(&s)).await;
        assert_eq!(page.status(), 200);
        let page = page.text().await.unwrap();
        assert!(page.contains("The mail to bounce@example.test could not be sent"), "{page}");
        let link = link_in(&page).expect("the link to copy instead");
        // The invitation exists and works.
        let path = link.strip_prefix(&app.origin()).unwrap().to_string();
        assert_eq!(app.get(&path, None).await.status(), 200);
        assert!(srv.messages().await.unwrap().is_empty());
    }
}
