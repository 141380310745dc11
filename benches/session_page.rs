//! Session page benchmark: server time to render `GET /s/{id}` for a session whose tree holds
//! 2,000 messages (target: p99 under 25 ms).
//!
//! ```sh
//! cargo bench --bench session_page -- [--messages 2000] [--requests 300]
//! ```
//!
//! Runs Arbor in this process (release profile, SQLite in a temp dir, one worker), seeds one
//! session with `--messages` messages: a main path of question/answer turns where every tenth
//! answer also has a regenerated sibling and every fifth question an edited sibling, so the page
//! shows sibling navigation and an overview with many branches. Then it requests the page
//! sequentially over loopback (after a warm-up) and reports the time from sending the request
//! to the last byte of the body. Results are printed as markdown and written to
//! `bench/results/arbor-session-page.md`.

use std::time::{Duration, Instant};

use arbor::domain::accounts::{Actor, Role, UserStatus};
use arbor::domain::sessions::tree::{MessageStatus, Role as MessageRole};
use arbor::providers::types::Part;
use arbor::storage::repos::messages::{self, NewMessage, NewRun};
use uuid::Uuid;

type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

fn text(i: usize, role: &str) -> Vec<Part> {
    let body = if role == "user" {
        format!("Question {i}: how does step {i} of the plan work, and what could go wrong?")
    } else {
        format!(
            "Answer {i}. Here is a **summary** with a list:\n\n- first point about `step {i}`\n- second point\n\n\
             ```rust\nfn step_{i}() -> u32 {{ {i} }}\n```\n\nAnd a closing paragraph with [a link](https://example.com/{i})."
        )
    };
    vec![Part::Text { text: body }]
}

async fn seed(state: &arbor::state::AppState, owner: Uuid, session: Uuid, total: usize) -> Res<usize> {
    let mut parent: Option<Uuid> = None;
    let mut written = 0usize;
    let mut turn = 0usize;
    while written + 2 <= total {
        turn += 1;
        // Every fifth question also gets an edited sibling (with its own answer), written first so
        // the main path stays the newest choice.
        if turn.is_multiple_of(5) && written + 4 <= total {
            let (q, a) = (Uuid::now_v7(), Uuid::now_v7());
            insert_turn(state, owner, session, parent, q, a, turn).await?;
            written += 2;
        }
        let (q, a) = (Uuid::now_v7(), Uuid::now_v7());
        insert_turn(state, owner, session, parent, q, a, turn).await?;
        written += 2;
        // Every tenth answer has a regenerated sibling.
        if turn.is_multiple_of(10) && written < total {
            let sibling = Uuid::now_v7();
            let parts = text(turn, "assistant");
            let m = NewMessage {
                id: sibling,
                parent_id: Some(q),
                role: MessageRole::Assistant,
                parts: &parts,
                model: Some("mock/model"),
                status: MessageStatus::Complete,
                client_id: None,
                author_id: None,
            };
            let run = NewRun {
                id: Uuid::now_v7(),
                owner_id: owner,
                leaf_message_id: q,
                assistant_message_id: sibling,
            };
            messages::insert_answer(&state.db, session, &m, &run).await?;
            written += 1;
            // Back to the first answer on the main path.
            let path: Vec<Uuid> = arbor::domain::sessions::tree::path_to(
                &messages::session_messages(&state.db, session).await?,
                a,
            )
            .iter()
            .map(|m| m.id)
            .collect();
            messages::select_path(&state.db, session, &path).await?;
        }
        parent = Some(a);
    }
    Ok(written)
}

async fn insert_turn(
    state: &arbor::state::AppState,
    owner: Uuid,
    session: Uuid,
    parent: Option<Uuid>,
    q: Uuid,
    a: Uuid,
    turn: usize,
) -> Res<()> {
    let (qp, ap) = (text(turn, "user"), text(turn, "assistant"));
    let user = NewMessage {
        id: q,
        parent_id: parent,
        role: MessageRole::User,
        parts: &qp,
        model: None,
        status: MessageStatus::Complete,
        client_id: None,
        author_id: None,
    };
    let answer = NewMessage {
        id: a,
        parent_id: Some(q),
        role: MessageRole::Assistant,
        parts: &ap,
        model: Some("mock/model"),
        status: MessageStatus::Complete,
        client_id: None,
        author_id: None,
    };
    let run = NewRun { id: Uuid::now_v7(), owner_id: owner, leaf_message_id: q, assistant_message_id: a };
    messages::insert_turn(&state.db, session, &user, &answer, &run).await?;
    Ok(())
}

#[tokio::main]
async fn main() -> Res<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let total = arg("--messages", 2000);
    let requests = arg("--requests", 300);
    let dir = tempfile::tempdir()?;
    let mut config = arbor::config::load(&arbor::config::CliOverrides::default(), &[])?.config;
    config.data_dir = dir.path().to_path_buf();
    config.database.url = format!("sqlite://{}?mode=rwc", dir.path().join("bench.db").display());
    config.server.workers = 1;
    config.llm.detect_local_ollama = false;
    config.log.level = "warn".into();
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    config.server.bind = listener.local_addr()?;
    let addr = listener.local_addr()?;
    let state = arbor::build_state(config).await?;
    let server = arbor::serve(state.clone(), listener)?;
    tokio::spawn(server);

    let user = arbor::storage::repos::users::insert(
        &state.db,
        "bench@example.com",
        "Bench",
        Role::Member,
        UserStatus::Active,
    )
    .await?;
    let actor = Actor::for_tests(&user);
    let workspace = state.sessions.create_workspace(&actor, "Bench").await?;
    let session = state.sessions.create_session(&actor, workspace.id, "Two thousand messages").await?;
    let seeded = Instant::now();
    let written = seed(&state, user.id, session.id, total).await?;
    eprintln!("seeded {written} messages in {:.1?}", seeded.elapsed());
    let issued =
        arbor::auth::sessions::issue(&state.db, &state.config.auth, user.id, Some("bench"), None).await?;
    let cookie = format!("arbor_session={}", issued.token);
    let client = reqwest::Client::builder().build()?;
    let url = format!("http://{addr}/s/{}", session.id);
    let mut body_len = 0;
    for _ in 0..20 {
        let res = client.get(&url).header("Cookie", &cookie).send().await?;
        if res.status() != 200 {
            return Err(format!("page answered {}", res.status()).into());
        }
        body_len = res.bytes().await?.len();
    }
    let mut times = Vec::with_capacity(requests);
    for _ in 0..requests {
        let start = Instant::now();
        let res = client.get(&url).header("Cookie", &cookie).send().await?;
        let status = res.status();
        res.bytes().await?;
        times.push(start.elapsed());
        if status != 200 {
            return Err(format!("page answered {status}").into());
        }
    }
    times.sort();
    let ms = |d: Duration| format!("{:.2}", d.as_secs_f64() * 1000.0);
    // Where the time goes, measured the same way (median of 50) in this process.
    let median = |mut v: Vec<Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    let mut load = Vec::new();
    let mut conv_t = Vec::new();
    let mut views_t = Vec::new();
    for _ in 0..50 {
        let t = Instant::now();
        let all = messages::session_skeleton(&state.db, session.id).await?;
        load.push(t.elapsed());
        drop(all);
        let t = Instant::now();
        let conv = state
            .sessions
            .conversation_window(&actor, session.id, None, arbor::domain::pages::THREAD_WINDOW)
            .await?;
        conv_t.push(t.elapsed());
        let t = Instant::now();
        let window =
            conv.path[conv.path.len().saturating_sub(arbor::domain::pages::THREAD_WINDOW)..].to_vec();
        let views: Vec<_> = window.iter().map(arbor::web::session_view::message_view).collect();
        views_t.push(t.elapsed());
        drop(views);
    }
    eprintln!(
        "median: tree skeleton {} ms, conversation (skeleton, tree, 40 whole messages) {} ms, 40 message views (markdown) {} ms",
        ms(median(load)),
        ms(median(conv_t)),
        ms(median(views_t))
    );
    let report = format!(
        "| messages in the tree | requests | page size | p50 ms | p95 ms | p99 ms | max ms |\n\
         |---|---|---|---|---|---|---|\n\
         | {written} | {requests} | {} KiB | {} | {} | {} | {} |\n",
        body_len / 1024,
        ms(percentile(&times, 0.50)),
        ms(percentile(&times, 0.95)),
        ms(percentile(&times, 0.99)),
        ms(*times.last().unwrap_or(&Duration::ZERO)),
    );
    println!("{report}");
    let out = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/results");
    std::fs::create_dir_all(&out)?;
    std::fs::write(out.join("arbor-session-page.md"), &report)?;
    Ok(())
}
