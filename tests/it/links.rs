//! Share links: a snapshot of one branch that signed-in colleagues (or anyone, when public links
//! are allowed) can read, that later edits do not change, that can be continued in one's own
//! workspace, and that stops opening when revoked or expired, leaking nothing.

use arbor::domain::accounts::Role;
use uuid::Uuid;

use crate::runs::{Chat, chat_with};
use crate::support::TestSession;
use crate::support::mock_upstream::{Provider, Reply};

const MODEL: &str = "openai/gpt-4o-mini";

async fn exchange(c: &Chat, text: &str) -> Uuid {
    c.mock.enqueue(Provider::OpenAi, Reply::fixture("openai/text.sse"));
    let answer = c.send_ok(text, MODEL).await;
    c.settled(answer).await;
    answer
}

/// Makes a link down to `message` and returns the token in its URL.
async fn share(c: &Chat, message: Uuid, body: &str) -> String {
    let res = c.app.post_form(&format!("/s/{}/messages/{message}/share", c.session), body, Some(&c.s)).await;
    assert_eq!(res.status(), 200);
    let html = res.text().await.unwrap();
    let at = html.find("/l/").unwrap_or_else(|| panic!("no link in {html}")) + 3;
    html[at..at + 43].to_string()
}

async fn open(c: &Chat, token: &str, who: Option<&TestSession>) -> reqwest::Response {
    c.app.get(&format!("/l/{token}"), who.map(|s| s.cookie.as_str())).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_shows_the_branch_as_it_was_to_signed_in_colleagues_and_can_be_continued() {
    let c = chat_with(|_| {}).await;
    let colleague = c.app.create_user("col@example.com", Role::Member).await;
    let col = c.app.login_full(&colleague).await;
    let first = exchange(&c, "the first question").await;
    exchange(&c, "the second question").await;
    let token = share(&c, first, "expires=7").await;

    let res = open(&c, &token, Some(&col)).await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["x-robots-tag"], "noindex, nofollow");
    assert_eq!(res.headers()["referrer-policy"], "no-referrer");
    let page = res.text().await.unwrap();
    assert!(page.contains("the first question") && !page.contains("the second question"), "{page}");
    assert!(
        page.contains("noindex") && !page.contains("id=\"composer\"") && !page.contains("btn-regenerate")
    );
    assert!(page.contains("id=\"continue-link\""));

    // Later changes do not reach the link, even deleting what it shows.
    let res = c.post(&format!("/s/{}/messages/{first}/delete", c.session)).await;
    assert_eq!(res.status(), 200);
    let page = open(&c, &token, Some(&col)).await.text().await.unwrap();
    assert!(page.contains("the first question"), "the snapshot stays");

    // Signed out: the sign-in page first, then back here.
    let res = open(&c, &token, None).await;
    assert_eq!(res.status(), 303);
    assert!(res.headers()["location"].to_str().unwrap().starts_with("/login?next=%2Fl%2F"));

    // "Continue in my workspace": a new session of the colleague's with the same messages.
    let res = c.app.post_form(&format!("/l/{token}/continue"), "", Some(&col)).await;
    assert_eq!(res.status(), 303);
    let to = res.headers()["location"].to_str().unwrap().to_string();
    let session = Uuid::parse_str(to.trim_start_matches("/s/")).unwrap();
    let actor = arbor::domain::accounts::Actor::for_tests(&colleague);
    let conv = c.app.state.sessions.conversation(&actor, session).await.unwrap();
    let texts: Vec<String> = conv.path.iter().map(|m| m.text()).collect();
    assert_eq!(texts.len(), 2);
    assert_eq!(texts[0], "the first question");
    assert_eq!(conv.session.owner_id, colleague.id);
    // They can go on from there.
    let reply = c.app.get(&to, Some(&col.cookie)).await;
    assert_eq!(reply.status(), 200);

    // Revoked by its creator: a 404 that says nothing more than an unknown link.
    let links =
        c.app.state.teams.links.mine(&arbor::domain::accounts::Actor::for_tests(&c.user)).await.unwrap();
    assert_eq!(links.len(), 1);
    let mine = c.app.get("/settings/links", Some(&c.s.cookie)).await.text().await.unwrap();
    assert!(mine.contains(&format!("link-{}", links[0].id)));
    let res = c.post(&format!("/settings/links/{}/delete", links[0].id)).await;
    assert_eq!(res.status(), 200);
    let gone = open(&c, &token, Some(&col)).await;
    assert_eq!(gone.status(), 404);
    let unknown = open(&c, &"A".repeat(43), Some(&col)).await;
    assert_eq!(unknown.status(), 404);
    assert_eq!(
        gone.text().await.unwrap(),
        unknown.text().await.unwrap(),
        "revoked and unknown look the same"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_links_and_admin_revocation_are_404_and_public_links_need_the_instance_to_allow_them() {
    let c = chat_with(|_| {}).await;
    let admin = c.app.create_user("root@example.com", Role::Admin).await;
    let admin_s = c.app.login_full(&admin).await;
    let answer = exchange(&c, "a public question").await;
    // Public links are off by default.
    let res =
        c.app.post_form(&format!("/s/{}/messages/{answer}/share", c.session), "public=on", Some(&c.s)).await;
    assert_eq!(res.status(), 400);
    assert!(res.text().await.unwrap().contains("Public links are off"));

    let token = share(&c, answer, "expires=1").await;
    assert_eq!(open(&c, &token, Some(&admin_s)).await.status(), 200);
    // A day later (moved back by hand): gone.
    use sea_orm::ConnectionTrait;
    let db = &c.app.state.db;
    let past = if crate::support::TestDb::is_postgres() {
        "now() - INTERVAL '1 day'"
    } else {
        "'2000-01-01 00:00:00+00:00'"
    };
    let sql = format!("UPDATE share_links SET expires_at = {past}");
    db.execute_unprepared(&sql).await.unwrap();
    assert_eq!(open(&c, &token, Some(&admin_s)).await.status(), 404);

    // Admins see every link and revoke any.
    let token = share(&c, answer, "").await;
    let page = c.app.get("/admin/links", Some(&admin_s.cookie)).await.text().await.unwrap();
    assert!(page.contains("ada"), "the creator is named: {page}");
    let proof = arbor::domain::accounts::Actor::for_tests(&admin).admin().unwrap();
    let (all, _) = c.app.state.teams.links.all(&proof).await.unwrap();
    let newest = all.first().unwrap();
    let res = c.app.post_form(&format!("/admin/links/{}/delete", newest.id), "", Some(&admin_s)).await;
    assert_eq!(res.status(), 200);
    assert_eq!(open(&c, &token, Some(&c.s)).await.status(), 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_public_link_opens_without_signing_in_where_the_admin_allows_it() {
    let c = chat_with(|cfg| cfg.sharing.public_links = true).await;
    let answer = exchange(&c, "for everyone").await;
    let token = share(&c, answer, "public=on").await;
    let res = open(&c, &token, None).await;
    assert_eq!(res.status(), 200);
    let page = res.text().await.unwrap();
    assert!(page.contains("for everyone") && !page.contains("continue-link"), "{page}");
    // Continuing needs an account.
    assert_eq!(c.app.post_form(&format!("/l/{token}/continue"), "", None).await.status(), 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_link_input_is_refused_and_nobody_else_can_share_or_guess() {
    let c = chat_with(|_| {}).await;
    let answer = exchange(&c, "mine").await;
    let other = c.app.create_user("other@example.com", Role::Member).await;
    let other_s = c.app.login_full(&other).await;
    let path = format!("/s/{}/messages/{answer}/share", c.session);
    for (body, says) in [
        ("expires=2", "Pick how long"),
        ("expires=-1", "Pick how long"),
        ("expires=99999999999", "Pick how long"),
    ] {
        let res = c.app.post_form(&path, body, Some(&c.s)).await;
        assert_eq!(res.status(), 400, "{body}");
        assert!(res.text().await.unwrap().contains(says), "{body}");
    }
    // A message not on the branch shown, or of nobody's.
    let res =
        c.app.post_form(&format!("/s/{}/messages/{}/share", c.session, Uuid::now_v7()), "", Some(&c.s)).await;
    assert_eq!(res.status(), 400);
    assert_eq!(c.app.post_form(&path, "", Some(&other_s)).await.status(), 404);
    assert_eq!(c.app.post_form(&path, "", None).await.status(), 401);
    // Guessing: malformed and unknown tokens cost nothing and say nothing.
    for token in ["x", "..%2F..", &"A".repeat(43), &"A".repeat(5000)] {
        assert_eq!(open(&c, token, Some(&other_s)).await.status(), 404, "{token}");
    }
    let token = share(&c, answer, "").await;
    let file = c.app.get(&format!("/l/{token}/files/{}", "0".repeat(64)), Some(&other_s.cookie)).await;
    assert_eq!(file.status(), 404);
    let file = c.app.get(&format!("/l/{token}/files/{}", "0".repeat(64)), None).await;
    assert_eq!(file.status(), 404, "a file is never a sign-in prompt");
    assert_eq!(c.app.post_form("/settings/links/not-an-id/delete", "", Some(&c.s)).await.status(), 404);
    let links =
        c.app.state.teams.links.mine(&arbor::domain::accounts::Actor::for_tests(&c.user)).await.unwrap();
    // Someone else's link cannot be revoked by a member.
    assert_eq!(
        c.app
            .post_form(&format!("/settings/links/{}/delete", links[0].id), "", Some(&other_s))
            .await
            .status(),
        404
    );
    assert_eq!(open(&c, &token, Some(&other_s)).await.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_keeps_showing_its_files_after_their_message_is_deleted_and_lets_them_go_when_revoked() {
    use crate::files::{chip_ids, png, upload};
    let c = chat_with(|_| {}).await;
    let colleague = c.app.create_user("col@example.com", Role::Member).await;
    let col = c.app.login_full(&colleague).await;
    let res = upload(&c, &c.s, "chart.png", png()).await;
    assert_eq!(res.status(), 200);
    let (upload_id, hash) = chip_ids(&res.text().await.unwrap());
    c.mock.enqueue(Provider::OpenAi, Reply::fixture("openai/text.sse"));
    let body = format!(
        "{}&attachments={upload_id}",
        crate::runs::form("look at this", &Uuid::new_v4().simple().to_string(), MODEL)
    );
    let res = c.app.post_form(&format!("/s/{}/messages", c.session), &body, Some(&c.s)).await;
    assert_eq!(res.status(), 200);
    let answer = crate::runs::streaming_id(&res.text().await.unwrap());
    let answer = c.settled(answer).await;
    let token = share(&c, answer.id, "").await;

    let page = open(&c, &token, Some(&col)).await.text().await.unwrap();
    let file = format!("/l/{token}/files/{hash}");
    assert!(page.contains(&file), "{page}");
    // The colleague cannot fetch it as a blob of theirs, only through the link.
    assert_eq!(c.app.get(&format!("/blobs/{hash}"), Some(&col.cookie)).await.status(), 404);
    let res = c.app.get(&file, Some(&col.cookie)).await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["content-type"], "image/png");

    // Continuing it copies the file, which counts against the colleague's storage: over their
    // quota it is refused with a reason and nothing is made; within it, the copy is theirs.
    let db = &c.app.state.db;
    let col_actor = arbor::domain::accounts::Actor::for_tests(&colleague);
    let tight = arbor::domain::files::FileSettings { user_quota_bytes: 1, ..Default::default() };
    let tight_teams =
        arbor::domain::teams::Teams::new(db.clone(), Default::default(), c.app.state.blobs.clone(), tight);
    let refused = tight_teams.links.continue_in_workspace(&col_actor, &token).await;
    assert!(
        matches!(&refused, Err(arbor::domain::DomainError::Invalid(m)) if m.contains("storage limit")),
        "{refused:?}"
    );
    let own_sessions = || async {
        arbor::domain::sessions::Sessions::new(db.clone())
            .sidebar(&col_actor, None)
            .await
            .unwrap()
            .iter()
            .filter(|w| !w.shared)
            .map(|w| w.sessions.len())
            .sum::<usize>()
    };
    assert_eq!(own_sessions().await, 0, "nothing was made");
    assert_eq!(c.app.post_form(&format!("/l/{token}/continue"), "", Some(&col)).await.status(), 303);
    assert_eq!(own_sessions().await, 1);
    let used = arbor::storage::repos::files::user_bytes(db, colleague.id).await.unwrap();
    assert!(used > 0, "the copied file counts as the colleague's");

    let refs = || async {
        arbor::storage::repos::files::blob_row(&c.app.state.db, &hash).await.unwrap().map(|b| b.refcount)
    };
    let with_link = refs().await.unwrap();
    let question = answer.parent_id.unwrap();
    assert_eq!(c.post(&format!("/s/{}/messages/{question}/delete", c.session)).await.status(), 200);
    assert_eq!(refs().await, Some(with_link - 1), "the message's reference went, the link's stays");
    assert_eq!(c.app.get(&file, Some(&col.cookie)).await.status(), 200, "the link still shows it");
    let link = c
        .app
        .state
        .teams
        .links
        .mine(&arbor::domain::accounts::Actor::for_tests(&c.user))
        .await
        .unwrap()
        .remove(0);
    assert_eq!(c.post(&format!("/settings/links/{}/delete", link.id)).await.status(), 200);
    assert_eq!(refs().await, Some(1), "revoked: only the colleague's continued copy holds the file");
    assert_eq!(c.app.get(&file, Some(&col.cookie)).await.status(), 404);
}
