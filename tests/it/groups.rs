//! Groups: the admin console makes, renames and deletes them and manages members; members see
//! their groups; the identity provider's claim syncs the groups it manages (tests/it/oidc_real.rs
//! drives that through a real provider).

use arbor::domain::accounts::{Actor, Role};
use arbor::domain::audit::Origin;
use arbor::domain::teams::groups::{self, Claim};

use crate::support::{TestApp, urlencode};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admins_make_rename_fill_and_delete_groups_and_members_see_theirs() {
    let app = TestApp::spawn().await;
    let admin = app.create_user("root@example.com", Role::Admin).await;
    let member = app.create_user("mia@example.com", Role::Member).await;
    let admin_s = app.login_full(&admin).await;
    let member_s = app.login_full(&member).await;

    let res = app.post_form("/admin/groups", "name=+Engineering+", Some(&admin_s)).await;
    assert_eq!(res.status(), 200);
    let html = res.text().await.unwrap();
    assert!(html.contains("Group Engineering made."), "{html}");
    let listed = app.state.teams.groups.list(&Actor::for_tests(&admin).admin().unwrap()).await.unwrap();
    let engineering = listed.iter().find(|(g, _)| g.name == "Engineering").unwrap().0.clone();
    assert!(!engineering.managed_by_idp);

    // The same name in another case is the same group.
    let res = app.post_form("/admin/groups", "name=engineering", Some(&admin_s)).await;
    assert_eq!(res.status(), 409);
    assert!(res.text().await.unwrap().contains("already a group called engineering"));

    let path = format!("/admin/groups/{}", engineering.id);
    let res = app.post_form(&format!("{path}/members"), "email=MIA%40example.com", Some(&admin_s)).await;
    assert_eq!(res.status(), 200);
    assert!(res.text().await.unwrap().contains("mia@example.com is in the group."));
    let page = app.get(&path, Some(&admin_s.cookie)).await.text().await.unwrap();
    assert!(page.contains(&format!("member-{}", member.id)), "{page}");
    let listed = app.state.teams.groups.list(&Actor::for_tests(&admin).admin().unwrap()).await.unwrap();
    assert_eq!(listed.iter().find(|(g, _)| g.id == engineering.id).unwrap().1, 1);

    let settings = app.get("/settings", Some(&member_s.cookie)).await.text().await.unwrap();
    assert!(settings.contains(">Engineering</span>"), "{settings}");

    let res = app.post_form(&format!("{path}/rename"), "name=Platform", Some(&admin_s)).await;
    assert_eq!(res.status(), 200);
    let settings = app.get("/settings", Some(&member_s.cookie)).await.text().await.unwrap();
    assert!(settings.contains(">Platform</span>"));

    let res = app.post_form(&format!("{path}/members/{}/remove", member.id), "", Some(&admin_s)).await;
    assert_eq!(res.status(), 200);
    let settings = app.get("/settings", Some(&member_s.cookie)).await.text().await.unwrap();
    assert!(settings.contains("You are in no group."));
    // Taking out someone who is not in it: nothing to take out.
    let res = app.post_form(&format!("{path}/members/{}/remove", member.id), "", Some(&admin_s)).await;
    assert_eq!(res.status(), 404);

    let res = app.post_form(&format!("{path}/delete"), "", Some(&admin_s)).await;
    assert_eq!(res.status(), 200);
    assert!(res.text().await.unwrap().contains("Group Platform deleted."));
    assert_eq!(app.get(&path, Some(&admin_s.cookie)).await.status(), 404);

    let audit: Vec<String> = arbor::storage::repos::audit::list(&app.state.db, &Default::default(), 50)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.action)
        .collect();
    for action in ["group.create", "group.member.add", "group.rename", "group.member.remove", "group.delete"]
    {
        assert!(audit.iter().any(|a| a == action), "{action} in {audit:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_group_input_is_refused_with_a_reason_and_writes_nothing() {
    let app = TestApp::spawn().await;
    let admin = app.create_user("root@example.com", Role::Admin).await;
    let admin_s = app.login_full(&admin).await;
    let long = "x".repeat(101);
    for (body, status, says) in [
        ("name=", 400, "Give the group a name."),
        ("name=+++", 400, "Give the group a name."),
        (&*format!("name={long}"), 400, "at most 100 characters"),
        ("name=a%07b", 400, "without control characters"),
        ("name=a%00b", 400, "may not contain NUL characters"),
    ] {
        let res = app.post_form("/admin/groups", body, Some(&admin_s)).await;
        assert_eq!(res.status(), status, "{body}");
        assert!(res.text().await.unwrap().contains(says), "{body}");
    }
    // A missing field and a megabyte of name are refused before any work.
    assert_eq!(app.post_form("/admin/groups", "nom=x", Some(&admin_s)).await.status(), 400);
    let huge = format!("name={}", "y".repeat(1 << 20));
    assert!(app.post_form("/admin/groups", &huge, Some(&admin_s)).await.status().is_client_error());
    let proof = Actor::for_tests(&admin).admin().unwrap();
    assert!(app.state.teams.groups.list(&proof).await.unwrap().is_empty());

    let group = app.state.teams.groups.create(&proof, &Origin::cli(), "ops").await.unwrap();
    let path = format!("/admin/groups/{}", group.id);
    for email in ["nobody%40example.com", "not-an-email", ""] {
        let res = app.post_form(&format!("{path}/members"), &format!("email={email}"), Some(&admin_s)).await;
        assert_eq!(res.status(), 400, "{email}");
    }
    assert_eq!(app.get("/admin/groups/not-a-uuid", Some(&admin_s.cookie)).await.status(), 404);
    let unknown = uuid::Uuid::now_v7();
    assert_eq!(app.get(&format!("/admin/groups/{unknown}"), Some(&admin_s.cookie)).await.status(), 404);
    assert_eq!(
        app.post_form(&format!("/admin/groups/{unknown}/delete"), "", Some(&admin_s)).await.status(),
        404
    );
    let other = app.state.teams.groups.create(&proof, &Origin::cli(), "dev").await.unwrap();
    let res =
        app.post_form(&format!("{path}/rename"), &format!("name={}", urlencode("DEV")), Some(&admin_s)).await;
    assert_eq!(res.status(), 409);
    let (still, _) = app.state.teams.groups.detail(&proof, group.id).await.unwrap();
    assert_eq!(still.name, "ops");
    assert_eq!(app.state.teams.groups.detail(&proof, other.id).await.unwrap().0.name, "dev");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_replaces_only_provider_managed_memberships_and_oversized_claims_change_nothing() {
    let app = TestApp::spawn().await;
    let db = &app.state.db;
    let admin = app.create_user("root@example.com", Role::Admin).await;
    let person = app.create_user("pat@example.com", Role::Member).await;
    let proof = Actor::for_tests(&admin).admin().unwrap();
    let actor = Actor::for_tests(&person);
    // A hand-made group the claim also names, and one it does not.
    let by_hand = app.state.teams.groups.create(&proof, &Origin::cli(), "Dev").await.unwrap();
    let kept = app.state.teams.groups.create(&proof, &Origin::cli(), "Ops").await.unwrap();
    app.state.teams.groups.add_member(&proof, &Origin::cli(), kept.id, &person.email).await.unwrap();

    let claim =
        |names: &[&str]| Claim::from_raw(Some(&names.iter().map(|n| n.to_string()).collect::<Vec<_>>()));
    groups::sync_from_claim(db, person.id, &claim(&["dev", "team-a", "team-b", "TEAM-A"])).await.unwrap();
    let names = |gs: Vec<arbor::domain::teams::Group>| gs.into_iter().map(|g| g.name).collect::<Vec<_>>();
    // "dev" is the hand-made group: not joined; team-a and team-b are made, managed, joined.
    assert_eq!(names(app.state.teams.groups.mine(&actor).await.unwrap()), ["Ops", "team-a", "team-b"]);
    assert!(!app.state.teams.groups.detail(&proof, by_hand.id).await.unwrap().0.managed_by_idp);

    groups::sync_from_claim(db, person.id, &claim(&["team-b"])).await.unwrap();
    assert_eq!(names(app.state.teams.groups.mine(&actor).await.unwrap()), ["Ops", "team-b"]);

    // Ten thousand groups, or a claim that is not there: logged, memberships unchanged.
    let many: Vec<String> = (0..10_000).map(|i| format!("g{i}")).collect();
    groups::sync_from_claim(db, person.id, &Claim::from_raw(Some(&many))).await.unwrap();
    groups::sync_from_claim(db, person.id, &Claim::from_raw(None)).await.unwrap();
    assert_eq!(names(app.state.teams.groups.mine(&actor).await.unwrap()), ["Ops", "team-b"]);
    assert_eq!(app.state.teams.groups.list(&proof).await.unwrap().len(), 4);

    // An empty list is a claim: it empties the managed memberships.
    groups::sync_from_claim(db, person.id, &claim(&[])).await.unwrap();
    assert_eq!(names(app.state.teams.groups.mine(&actor).await.unwrap()), ["Ops"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persons_quota_is_their_own_else_their_groups_most_generous_else_the_default() {
    use arbor::domain::admin::quotas::Quota;
    let app = TestApp::spawn().await;
    // The table as calls read it: kept in memory, and read again after every change.
    let quotas = app.state.engine.quota_gate();
    let admin = app.create_user("root@example.com", Role::Admin).await;
    let admin_s = app.login_full(&admin).await;
    let pat = app.create_user("pat@example.com", Role::Member).await;
    let proof = Actor::for_tests(&admin).admin().unwrap();
    for name in ["small", "large"] {
        let g = app.state.teams.groups.create(&proof, &Origin::cli(), name).await.unwrap();
        app.state.teams.groups.add_member(&proof, &Origin::cli(), g.id, &pat.email).await.unwrap();
    }
    let save = |body: &'static str| {
        let (app, s) = (&app, &admin_s);
        async move { app.post_form("/admin/quotas", body, Some(s)).await }
    };
    assert_eq!(save("tokens_day=10").await.status(), 200);
    assert_eq!(quotas.effective(pat.id).await.unwrap().tokens_day, Some(10), "the default");
    assert_eq!(save("group=small&tokens_day=100&dollars_day=1").await.status(), 200);
    assert_eq!(save("group=LARGE&tokens_day=500").await.status(), 200);
    let q = quotas.effective(pat.id).await.unwrap();
    // 500 tokens from "large"; dollars unlimited, since "large" sets none.
    assert_eq!(q, Quota { tokens_day: Some(500), tokens_month: None, micros_day: None, micros_month: None });
    let page = app.get("/admin/quotas", Some(&admin_s.cookie)).await.text().await.unwrap();
    assert!(page.contains("quota-groups") && page.contains("<td>large</td>"), "{page}");
    assert_eq!(save("email=pat%40example.com&tokens_day=7").await.status(), 200);
    assert_eq!(quotas.effective(pat.id).await.unwrap().tokens_day, Some(7), "their own first");
    // Removing the group's quota, or the group, falls back.
    assert_eq!(save("email=pat%40example.com&inherit=on").await.status(), 200);
    assert_eq!(save("group=large&inherit=on").await.status(), 200);
    assert_eq!(quotas.effective(pat.id).await.unwrap().tokens_day, Some(100));
    let small = app.state.teams.groups.by_name(&proof, "small").await.unwrap().unwrap();
    app.state.teams.groups.delete(&proof, &Origin::cli(), small.id).await.unwrap();
    assert_eq!(quotas.effective(pat.id).await.unwrap().tokens_day, Some(10), "the default again");
    // Bad input.
    for body in [
        "group=nope&tokens_day=1",
        "group=large&email=pat%40example.com&tokens_day=1",
        "group=large&tokens_day=-1",
    ] {
        assert_eq!(save(body).await.status(), 400, "{body}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_groups_approval_mode_loosens_the_instances_for_its_members_and_bad_grants_are_refused() {
    use crate::agent::{agent, says, write_call};
    use crate::support::mock_upstream::Provider;
    const MODEL: &str = "openai/gpt-4o-mini";
    // The session asks for auto-edit; the instance allows no looser than suggest.
    let a = agent("auto-edit", |c| c.agent.loosest_approval_mode = "suggest".into()).await;
    let app = &a.c.app;
    let db = &app.state.db;
    let root = app.create_user("root@example.com", Role::Admin).await;
    let root_s = app.login_full(&root).await;
    let proof = Actor::for_tests(&root).admin().unwrap();

    a.c.mock.enqueue(Provider::OpenAi, write_call("notes/one.md", "1\n"));
    a.c.send_ok("Write one", MODEL).await;
    let call = a.paused().await;
    assert!(!a.folder.join("one.md").exists());
    assert_eq!(a.decide(call, "no", "").await.status(), 200);
    assert_eq!(a.ended().await, "cancelled");

    // An admin lets the group "builders" use auto-edit, through the console.
    let builders = app.state.teams.groups.create(&proof, &Origin::cli(), "builders").await.unwrap();
    app.state.teams.groups.add_member(&proof, &Origin::cli(), builders.id, &a.c.user.email).await.unwrap();
    let path = format!("/admin/groups/{}", builders.id);
    let page = app.get(&path, Some(&root_s.cookie)).await.text().await.unwrap();
    assert!(
        page.contains("the instance&#x27;s (suggest)") || page.contains("the instance's (suggest)"),
        "{page}"
    );
    // Bad grants are refused with a reason and change nothing.
    for (body, says) in [
        ("default_role=owner&loosest_approval_mode=", "member or admin"),
        ("default_role=member&loosest_approval_mode=yolo", "suggest, auto-edit or full-auto"),
    ] {
        let res = app.post_form(&format!("{path}/grants"), body, Some(&root_s)).await;
        assert_eq!(res.status(), 400, "{body}");
        assert!(res.text().await.unwrap().contains(says), "{body}");
    }
    assert_eq!(
        app.post_form(&format!("{path}/grants"), "loosest_approval_mode=", Some(&root_s)).await.status(),
        400
    );
    let unknown = uuid::Uuid::now_v7();
    let res =
        app.post_form(&format!("/admin/groups/{unknown}/grants"), "default_role=member", Some(&root_s)).await;
    assert_eq!(res.status(), 404);
    assert_eq!(
        app.state.teams.groups.detail(&proof, builders.id).await.unwrap().0.loosest_approval_mode,
        None
    );

    let res = app
        .post_form(
            &format!("{path}/grants"),
            "default_role=member&loosest_approval_mode=auto-edit",
            Some(&root_s),
        )
        .await;
    assert_eq!(res.status(), 200);
    assert!(res.text().await.unwrap().contains("What builders grants is saved."));
    assert_eq!(
        groups::loosest_approval_mode(db, a.c.user.id).await.unwrap().map(|m| m.as_str()),
        Some("auto-edit")
    );

    // Now the same write runs unasked.
    a.c.mock.enqueue(Provider::OpenAi, write_call("notes/two.md", "2\n"));
    a.c.mock.enqueue(Provider::OpenAi, says("Written."));
    a.c.send_ok("Write two", MODEL).await;
    assert_eq!(a.ended().await, "completed");
    assert_eq!(std::fs::read_to_string(a.folder.join("two.md")).unwrap(), "2\n");
    assert_eq!(a.calls().await.last().unwrap().decision.as_deref(), Some("auto"));

    // Out of the group, the instance's ceiling holds again.
    app.state.teams.groups.remove_member(&proof, &Origin::cli(), builders.id, a.c.user.id).await.unwrap();
    assert_eq!(groups::loosest_approval_mode(db, a.c.user.id).await.unwrap(), None);
    let audit = arbor::storage::repos::audit::list(db, &Default::default(), 50).await.unwrap();
    assert!(audit.iter().any(|e| e.action == "group.grants"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_shares_a_prompt_template_with_a_group_that_reads_and_copies_it() {
    let app = TestApp::spawn().await;
    let db = &app.state.db;
    let root = app.create_user("root@example.com", Role::Admin).await;
    let ada = app.create_user("ada@example.com", Role::Member).await;
    let bob = app.create_user("bob@example.com", Role::Member).await;
    let (ada_s, bob_s) = (app.login_full(&ada).await, app.login_full(&bob).await);
    let proof = Actor::for_tests(&root).admin().unwrap();
    let writers = app.state.teams.groups.create(&proof, &Origin::cli(), "writers").await.unwrap();
    let elsewhere = app.state.teams.groups.create(&proof, &Origin::cli(), "elsewhere").await.unwrap();
    for email in [&ada.email, &bob.email] {
        app.state.teams.groups.add_member(&proof, &Origin::cli(), writers.id, email).await.unwrap();
    }

    let body = format!("name=Terse&body={}", urlencode("Answer in one line, {{ user.name }}."));
    let res = app.post_form("/settings/prompts", &body, Some(&ada_s)).await;
    assert_eq!(res.status(), 200);
    assert!(res.text().await.unwrap().contains("Template Terse saved."));
    // Bad templates and forms are refused with a reason and save nothing.
    let bomb = urlencode("{{ range(end=100000000) | length }}");
    for (body, says) in [
        ("name=&body=x".to_string(), "needs a name"),
        ("name=Empty&body=+".to_string(), "Write the template."),
        (format!("name=Bomb&body={bomb}"), ""),
        ("name=Open&body=%7B%25+for+i+in".to_string(), ""),
    ] {
        let res = app.post_form("/settings/prompts", &body, Some(&ada_s)).await;
        assert_eq!(res.status(), 400, "{body}");
        assert!(res.text().await.unwrap().contains(says), "{body}");
    }
    assert_eq!(app.post_form("/settings/prompts", "name=NoBody", Some(&ada_s)).await.status(), 400);
    let huge = format!("name=Huge&body={}", "y".repeat(1 << 20));
    assert!(app.post_form("/settings/prompts", &huge, Some(&ada_s)).await.status().is_client_error());
    let ada_actor = Actor::for_tests(&ada);
    let mine = arbor::domain::sessions::Sessions::new(db.clone()).my_templates(&ada_actor).await.unwrap();
    assert_eq!(mine.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["Terse"]);
    let id = mine[0].id;

    // Shared with a group of hers: Bob reads it, with who keeps it; nobody else changes it.
    let share = |body: String| {
        let path = format!("/settings/prompts/{id}/share");
        let s = &ada_s;
        let app = &app;
        async move { app.post_form(&path, &body, Some(s)).await }
    };
    for body in [format!("group={}", elsewhere.id), "group=nope".into()] {
        let res = share(body.clone()).await;
        assert_eq!(res.status(), 400, "{body}");
        assert!(res.text().await.unwrap().contains("one of your groups"));
    }
    assert_eq!(share(format!("group={}", writers.id)).await.status(), 200);
    let page = app.get("/settings/prompts", Some(&bob_s.cookie)).await.text().await.unwrap();
    assert!(page.contains(&format!("id=\"shared-template-{id}\"")), "{page}");
    assert!(
        page.contains("Answer in one line, {{ user.name }}.") && page.contains("through writers"),
        "{page}"
    );
    assert!(!page.contains(&format!("/settings/prompts/{id}/delete")), "Bob may not delete it");
    for action in ["delete", "share"] {
        let res = app.post_form(&format!("/settings/prompts/{id}/{action}"), "group=", Some(&bob_s)).await;
        assert_eq!(res.status(), 404, "{action}");
    }
    // Deleting the group ends the sharing; unsharing too.
    app.state.teams.groups.delete(&proof, &Origin::cli(), writers.id).await.unwrap();
    assert!(
        arbor::domain::sessions::Sessions::new(db.clone())
            .templates_shared_with_me(&Actor::for_tests(&bob))
            .await
            .unwrap()
            .is_empty()
    );

    // At most 100 templates a member.
    for i in 1..arbor::domain::sessions::MAX_TEMPLATES {
        arbor::storage::repos::prompt_templates::insert(db, ada.id, &format!("t{i}"), "x").await.unwrap();
    }
    let res = app.post_form("/settings/prompts", "name=One+more&body=x", Some(&ada_s)).await;
    assert_eq!(res.status(), 400);
    assert!(res.text().await.unwrap().contains("at most 100 templates"));
    assert_eq!(
        app.post_form(&format!("/settings/prompts/{id}/delete"), "", Some(&ada_s)).await.status(),
        200
    );
    let audit: Vec<String> = arbor::storage::repos::audit::list(db, &Default::default(), 50)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.action)
        .collect();
    for action in ["prompt.create", "prompt.share", "prompt.delete"] {
        assert!(audit.iter().any(|a| a == action), "{action} in {audit:?}");
    }
}
