//! Chat search over HTTP: each user finds only their own messages, whatever the query says;
//! deleted sessions vanish; start-up heals what the index missed; the agent's `search_chat`;
//! several instances, each with its own index on one database.

use std::time::{Duration, Instant};

use arbor::domain::accounts::{Actor, Role};
use arbor::domain::search::{Cursors, SearchService};
use arbor::index::{IndexId, SearchQuery};
use serde_json::json;
use uuid::Uuid;

use crate::agent::{calls, says};
use crate::runs::{Chat, chat_with};
use crate::support::mock_upstream::Provider;

const MODEL: &str = "openai/gpt-4o-mini";

/// Sends a message and waits for its answer.
async fn exchange(c: &Chat, text: &str, answer: &str) -> Uuid {
    c.mock.enqueue(Provider::OpenAi, says(answer));
    let id = c.send_ok(text, MODEL).await;
    c.settled(id).await;
    id
}

async fn search_html(c: &Chat, cookie: &str, q: &str) -> String {
    let q: String = q
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect();
    let res = c.app.get(&format!("/search?q={q}"), Some(cookie)).await;
    assert_eq!(res.status(), 200);
    res.text().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_user_finds_only_their_own_messages_whatever_the_query_says() {
    let c = chat_with(|_| {}).await;
    exchange(&c, "Where is the needle in the haystack?", "Under the hay.").await;
    // Bob, with a needle of his own.
    let bob = c.app.create_user("bob@example.com", Role::Member).await;
    let bob_s = c.app.login_full(&bob).await;
    let (_, bob_session) = c.app.create_session(&bob).await;
    c.mock.enqueue(Provider::OpenAi, says("Bob's answer."));
    let res = c
        .app
        .post_form(
            &format!("/s/{bob_session}/messages"),
            &crate::runs::form("my own needle", "bob-1", MODEL),
            Some(&bob_s),
        )
        .await;
    assert_eq!(res.status(), 200);
    tokio::time::sleep(Duration::from_millis(300)).await;
    c.app.state.search.settle().await;

    let ada = search_html(&c, &c.s.cookie, "needle").await;
    assert!(ada.contains(&c.session.to_string()) && !ada.contains(&bob_session.to_string()), "{ada}");
    assert!(ada.contains("<mark>needle</mark>"), "{ada}");
    for attempt in [
        format!("user_id:{} needle", c.user.id),
        "+owner:* needle".to_string(),
        "*".to_string(),
        "needle OR user_id:x".to_string(),
        "needle AND (".to_string(),
        format!("session_id:{} needle", c.session),
    ] {
        let html = search_html(&c, &bob_s.cookie, &attempt).await;
        assert!(!html.contains(&format!("/s/{}?at=", c.session)), "{attempt}: {html}");
        assert!(!html.contains("haystack"), "{attempt}: {html}");
    }
    let bob_hits = search_html(&c, &bob_s.cookie, "needle").await;
    assert!(bob_hits.contains(&bob_session.to_string()));
    // Phrases, exclusions and filters.
    assert!(search_html(&c, &c.s.cookie, "\"the haystack\"").await.contains("search-hit"));
    let question = c.messages().await.into_iter().find(|m| m.text().contains("haystack")).unwrap().id;
    assert!(search_html(&c, &c.s.cookie, "needle").await.contains(&format!("at={question}")));
    assert!(!search_html(&c, &c.s.cookie, "needle -haystack").await.contains(&format!("at={question}")));
    assert!(search_html(&c, &c.s.cookie, "hay role:assistant").await.contains("Under the"));
    assert!(search_html(&c, &c.s.cookie, "after:not-a-date").await.contains("flash-error"));
    // A workspace that is not one, and a page that is not a number, are refused.
    assert_eq!(c.app.get("/search?q=needle&w=../x", Some(&c.s.cookie)).await.status(), 400);
    assert_eq!(c.app.get("/search?q=needle&page=abc", Some(&c.s.cookie)).await.status(), 400);
    // The sidebar's live list.
    let res = c.app.get("/search?live=1&q=needle", Some(&c.s.cookie)).await;
    assert!(res.text().await.unwrap().contains(&format!("/s/{}?at=", c.session)));

    // A deleted session vanishes from results and snippets at once.
    c.app.state.sessions.delete_session(&Actor::for_tests(&c.user), c.session).await.unwrap();
    let ada = search_html(&c, &c.s.cookie, "needle").await;
    assert!(!ada.contains("haystack") && !ada.contains(&c.session.to_string()), "{ada}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_up_indexes_what_the_index_missed_after_its_watermark() {
    use sea_orm::{ActiveModelTrait, Set};
    let c = chat_with(|_| {}).await;
    let old = exchange(&c, "an old remark about walruses", "Noted.").await;
    let recent = exchange(&c, "a recent remark about walruses", "Noted again.").await;
    c.app.state.search.settle().await;
    let db = &c.app.state.db;
    // The old message was written an hour ago; the watermark says everything up to just
    // before the recent one was committed.
    let messages = c.messages().await;
    let old_user = messages.iter().find(|m| m.text().contains("old remark")).unwrap().id;
    let recent_user = messages.iter().find(|m| m.text().contains("recent remark")).unwrap().id;
    let hour_ago = chrono::Utc::now() - chrono::Duration::hours(1);
    for id in [old_user, old] {
        arbor::storage::entities::message::ActiveModel {
            id: Set(id),
            updated_at: Set(hour_ago),
            ..Default::default()
        }
        .update(db)
        .await
        .unwrap();
    }
    let watermark = hour_ago + chrono::Duration::minutes(30);
    {
        use arbor::storage::entities::index_state;
        use sea_orm::EntityTrait;
        index_state::Entity::delete_many().exec(db).await.unwrap();
        index_state::ActiveModel { name: Set("messages".into()), watermark: Set(watermark) }
            .insert(db)
            .await
            .unwrap();
    }
    // A "restarted" service whose index lost everything that was not committed before the
    // watermark's point... here: an empty index, so only what start-up re-reads is in it. The
    // watermark is the legacy shared row ("messages", from before each index had its own):
    // an index without a row of its own starts there, once.
    let id = IndexId::random();
    let index = arbor::index::SearchIndex::open_in_ram().unwrap();
    let service =
        SearchService::start_with(db.clone(), index, id, false, Duration::from_millis(50)).await.unwrap();
    service.settle().await;
    let actor = Actor::for_tests(&c.user);
    let found = hits(&service, &actor, "walruses").await;
    assert!(
        found.contains(&recent_user),
        "the missed message is healed: {found:?} {recent_user} {recent} {old_user} {old}"
    );
    assert!(!found.contains(&old_user), "start-up begins at the watermark, not at the start: {found:?}");
    // From then on the index keeps its own watermark, and the legacy row is left as it was.
    let own = stored(db, &Cursors::of(id).messages).await.expect("the index's own watermark");
    assert!(own > watermark, "{own} {watermark}");
    let legacy = watermark_of_legacy(db).await.map(|w| w.timestamp_micros());
    assert_eq!(legacy, Some(watermark.timestamp_micros()));
    drop(service);

    // The index's own row wins over the legacy one: with the legacy row at the start of time
    // and its own just before the recent message, the old message is still not re-read.
    set_watermark(db, "messages", hour_ago - chrono::Duration::hours(2)).await;
    set_watermark(db, &Cursors::of(id).messages, watermark).await;
    let index = arbor::index::SearchIndex::open_in_ram().unwrap();
    let service =
        SearchService::start_with(db.clone(), index, id, false, Duration::from_millis(50)).await.unwrap();
    service.settle().await;
    let again = hits(&service, &actor, "walruses").await;
    assert!(again.contains(&recent_user) && !again.contains(&old_user), "{again:?}");
    // Whereas a new index id with only the legacy row to go by starts from that row.
    let index = arbor::index::SearchIndex::open_in_ram().unwrap();
    let other =
        SearchService::start_with(db.clone(), index, IndexId::random(), false, Duration::from_millis(50))
            .await
            .unwrap();
    other.settle().await;
    assert!(hits(&other, &actor, "walruses").await.contains(&old_user));
}

async fn hits(service: &SearchService, actor: &Actor, q: &str) -> Vec<Uuid> {
    service.search(actor, q, None, 1, 10).await.unwrap().hits.iter().map(|h| h.message_id).collect()
}

async fn stored(db: &arbor::storage::Db, name: &str) -> Option<chrono::DateTime<chrono::Utc>> {
    arbor::storage::repos::search::load_watermark(db, name).await.unwrap()
}

async fn watermark_of_legacy(db: &arbor::storage::Db) -> Option<chrono::DateTime<chrono::Utc>> {
    stored(db, "messages").await
}

async fn set_watermark(db: &arbor::storage::Db, name: &str, at: chrono::DateTime<chrono::Utc>) {
    arbor::storage::repos::search::store_watermark(db, name, at).await.unwrap();
}

/// How many documents matching `q` the service's index holds for `user`, without the
/// database check that searches make.
fn indexed(service: &SearchService, user: Uuid, q: &str) -> usize {
    let query = SearchQuery::parse(q, None).unwrap();
    service.index_for_tests().search(user, &query, 0, 10).unwrap().total
}

/// Waits up to five seconds (many feeder ticks) for `check`, without nudging anything.
async fn within_ticks(what: &str, check: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !check() {
        assert!(Instant::now() < deadline, "not within the feeder's ticks: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A second instance's search: its own index directory, on the same database.
async fn instance(db: &arbor::storage::Db, dir: &std::path::Path) -> std::sync::Arc<SearchService> {
    SearchService::start(db.clone(), dir, Duration::from_millis(100)).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_with_their_own_indexes_find_a_message_written_once_and_forget_what_another_deleted() {
    let c = chat_with(|_| {}).await;
    let db = &c.app.state.db;
    exchange(&c, "A remark about narwhals and their tusks.", "Noted.").await;
    // Two more instances, each with its own index directory, beside the app's own.
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (a, b) = (instance(db, dir_a.path()).await, instance(db, dir_b.path()).await);
    let (id_a, id_b) = (IndexId::of_dir(dir_a.path()).unwrap(), IndexId::of_dir(dir_b.path()).unwrap());
    assert_ne!(id_a, id_b);
    a.settle().await;
    b.settle().await;
    let actor = Actor::for_tests(&c.user);
    for service in [&a, &b] {
        assert_eq!(hits(service, &actor, "narwhals").await.len(), 1);
        assert_eq!(indexed(service, c.user.id, "narwhals"), 1);
    }
    // Each keeps its own watermark.
    for id in [id_a, id_b] {
        assert!(stored(db, &Cursors::of(id).messages).await.is_some(), "{id}");
    }

    // Bob writes too; his messages reach both indexes.
    let bob = c.app.create_user("bob@example.com", Role::Member).await;
    let bob_s = c.app.login_full(&bob).await;
    let (_, bob_session) = c.app.create_session(&bob).await;
    c.mock.enqueue(Provider::OpenAi, says("Bob's answer about walruses."));
    let res = c
        .app
        .post_form(
            &format!("/s/{bob_session}/messages"),
            &crate::runs::form("bob asks about walruses", "bob-1", MODEL),
            Some(&bob_s),
        )
        .await;
    assert_eq!(res.status(), 200);
    within_ticks("Bob's messages indexed by both", || {
        indexed(&a, bob.id, "walruses") == 2 && indexed(&b, bob.id, "walruses") == 2
    })
    .await;

    // The session is deleted through the app (a third instance): the other two indexes drop
    // its documents by their own feeders, not only at the check every search makes.
    let res = c.app.post_form(&format!("/s/{}/delete", c.session), "", Some(&c.s)).await;
    assert!(res.status().is_success() || res.status().is_redirection(), "{}", res.status());
    within_ticks("the deleted session gone from both indexes", || {
        [&a, &b, &c.app.state.search].iter().all(|s| indexed(s, c.user.id, "narwhals") == 0)
    })
    .await;
    // Each stores how far it applied the tombstones (once the deletion is committed).
    a.settle().await;
    b.settle().await;
    for id in [id_a, id_b] {
        assert!(stored(db, &Cursors::of(id).tombstones).await.is_some(), "{id}");
    }

    // A deleted person: the same, through a user tombstone.
    let root = c.app.create_user("root@example.com", Role::Admin).await;
    let root_s = c.app.login_full(&root).await;
    let res = c.app.post_form(&format!("/admin/users/{}/delete", bob.id), "", Some(&root_s)).await;
    assert_eq!(res.status(), 200);
    within_ticks("the deleted user's documents gone from both indexes", || {
        indexed(&a, bob.id, "walruses") == 0 && indexed(&b, bob.id, "walruses") == 0
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_instance_applies_the_deletions_it_missed_and_old_tombstones_are_pruned() {
    use arbor::storage::entities::search_tombstone;
    use sea_orm::{ActiveModelTrait, EntityTrait, PaginatorTrait, Set};
    let c = chat_with(|_| {}).await;
    let db = &c.app.state.db;
    exchange(&c, "Something about platypuses.", "Noted.").await;
    let dir = tempfile::tempdir().unwrap();
    let (index, fresh) = arbor::index::SearchIndex::open(dir.path()).unwrap();
    let id = IndexId::of_dir(dir.path()).unwrap();
    let interval = Duration::from_millis(100);
    let service = SearchService::start_with(db.clone(), index.clone(), id, fresh, interval).await.unwrap();
    service.settle().await;
    assert_eq!(indexed(&service, c.user.id, "platypuses"), 1);
    // The instance stops; meanwhile another deletes the session, and a tombstone older than
    // they are kept lies in the table.
    drop(service);
    let res = c.app.post_form(&format!("/s/{}/delete", c.session), "", Some(&c.s)).await;
    assert!(res.status().is_success() || res.status().is_redirection(), "{}", res.status());
    c.app.state.search.settle().await;
    let old = chrono::Utc::now() - chrono::Duration::days(arbor::domain::search::TOMBSTONE_DAYS + 1);
    search_tombstone::ActiveModel {
        id: Set(Uuid::now_v7()),
        session_id: Set(Some(Uuid::new_v4())),
        user_id: Set(None),
        created_at: Set(old),
    }
    .insert(db)
    .await
    .unwrap();
    assert_eq!(search_tombstone::Entity::find().count(db).await.unwrap(), 2);
    assert_eq!(index.num_docs(), 2, "the stopped instance's index still holds the session");
    // Started again (same index, same id): its first passes catch up.
    let service = SearchService::start_with(db.clone(), index.clone(), id, false, interval).await.unwrap();
    within_ticks("the missed deletion applied", || index.num_docs() == 0).await;
    service.settle().await;
    assert_eq!(search_tombstone::Entity::find().count(db).await.unwrap(), 1, "the old tombstone is pruned");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_searches_the_users_own_chats() {
    let a = crate::agent::agent("suggest", |_| {}).await;
    exchange(&a.c, "The launch code word is pineapple.", "Remembered.").await;
    a.c.app.state.search.settle().await;
    a.c.mock.enqueue(Provider::OpenAi, calls(&[("s1", "search_chat", json!({"query": "code word"}))]));
    a.c.mock.enqueue(Provider::OpenAi, says("It was pineapple."));
    a.c.send_ok("What was the code word?", MODEL).await;
    assert_eq!(a.ended().await, "completed");
    let body = a.c.mock.requests_for(Provider::OpenAi)[2].json().unwrap();
    let results: Vec<&serde_json::Value> =
        body["messages"].as_array().unwrap().iter().filter(|m| m["role"] == "tool").collect();
    assert!(results[0]["content"].as_str().unwrap().contains("pineapple"), "{results:?}");
}
