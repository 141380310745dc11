//! Chat search over HTTP: each user finds only their own messages, whatever the query says;
//! deleted sessions vanish; start-up heals what the index missed; the agent's `search_chat`.

use std::time::Duration;

use arbor::domain::accounts::{Actor, Role};
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
    arbor::domain::sessions::delete_session(&c.app.state.db, &Actor::for_tests(&c.user), c.session)
        .await
        .unwrap();
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
    // watermark's point... here: an empty index, so only what start-up re-reads is in it.
    let index = arbor::index::SearchIndex::open_in_ram().unwrap();
    let service =
        arbor::domain::search::SearchService::start_with(db.clone(), index, false, Duration::from_millis(50))
            .await
            .unwrap();
    service.settle().await;
    let actor = Actor::for_tests(&c.user);
    let page = service.search(&actor, "walruses", None, 1, 10).await.unwrap();
    let found: Vec<Uuid> = page.hits.iter().map(|h| h.message_id).collect();
    assert!(
        found.contains(&recent_user),
        "the missed message is healed: {found:?} {recent_user} {recent} {old_user} {old}"
    );
    assert!(!found.contains(&old_user), "start-up begins at the watermark, not at the start: {found:?}");
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
