//! The key vault's master key: generated once on a fresh install, checked on every start; a
//! wrong or missing key stops the server before anything is written.

use std::process::Stdio;
use std::time::Duration;

use arbor::vault::crypto::Key;
use sea_orm::{ConnectionTrait, Statement};

use crate::cli::{Child, arbor, wait_exit, wait_healthy};
use crate::support::{TestApp, free_port, init_crypto};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_install_generates_a_private_key_file_and_records_its_id() {
    let app = TestApp::spawn().await;
    let path = arbor::vault::default_key_file(&app.state.config.data_dir);
    let raw = std::fs::read(&path).expect("master.key written");
    let key = arbor::vault::parse_key(&raw).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    }
    let status = arbor::vault::status(&app.state.db).await.unwrap();
    assert_eq!(status.expected_key_id.as_deref(), Some(key.key_id().as_str()));
    assert_eq!(app.state.vault.key_id(), key.key_id());
    assert!(format!("{:?}", app.state.vault).contains(&key.key_id()));
    // Opening again with the same key works and writes nothing new.
    let env: Vec<(String, String)> = Vec::new();
    let again = arbor::vault::Vault::open(&app.state.db, &env, &app.state.config.data_dir).await.unwrap();
    assert_eq!(again.key_id(), key.key_id());
    // Another key is refused with both ids named.
    let other = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(other.path(), Key::generate().bytes()).unwrap();
    let env = vec![("ARBOR_MASTER_KEY_FILE".to_string(), other.path().display().to_string())];
    let err = arbor::vault::Vault::open(&app.state.db, &env, &app.state.config.data_dir).await.unwrap_err();
    let text = err.to_string();
    assert!(text.starts_with("vault master key mismatch: configured key id "), "{text}");
    assert!(text.contains(&format!("database expects {}; nothing was modified", key.key_id())), "{text}");
}

/// The vault tables' content, for before/after comparisons.
async fn vault_rows(db: &arbor::storage::Db) -> String {
    let q = |sql: &str| Statement::from_string(db.get_database_backend(), sql.to_string());
    let mut out = String::new();
    for row in db.query_all_raw(q("SELECT kek_id, canary FROM vault_meta")).await.unwrap() {
        let id: String = row.try_get("", "kek_id").unwrap();
        let canary: Vec<u8> = row.try_get("", "canary").unwrap();
        out.push_str(&format!("meta {id} {canary:?}\n"));
    }
    for table in ["vault_keys", "vault_secrets"] {
        let row = db.query_one_raw(q(&format!("SELECT COUNT(*) AS n FROM {table}"))).await.unwrap().unwrap();
        let n: i64 = row.try_get("", "n").unwrap();
        out.push_str(&format!("{table} {n}\n"));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_or_missing_master_key_stops_the_server_and_changes_nothing() {
    init_crypto();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let data = dir.path().join("data");
    // First start: the vault is set up with a generated key.
    let child = arbor(dir.path())
        .args(["serve", "--bind", &format!("127.0.0.1:{port}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut child = Child(child);
    assert!(wait_healthy(&format!("http://127.0.0.1:{port}/healthz"), Duration::from_secs(20)).await);
    let _ = child.0.kill();
    wait_exit(&mut child.0, Duration::from_secs(10)).expect("stopped");
    let key_file = arbor::vault::default_key_file(&data);
    let good = std::fs::read(&key_file).unwrap();
    let good_id = arbor::vault::parse_key(&good).unwrap().key_id();
    let db_url = format!("sqlite://{}?mode=rw", data.join("arbor.db").display());
    let db = sea_orm::Database::connect(&db_url).await.unwrap();
    let before = vault_rows(&db).await;
    assert!(before.contains(&good_id), "{before}");

    // A wrong key: exit code 2, the message names both ids, nothing changed.
    let wrong = dir.path().join("wrong.key");
    let wrong_key = Key::generate();
    std::fs::write(&wrong, wrong_key.bytes()).unwrap();
    let out = arbor(dir.path())
        .args(["serve", "--bind", &format!("127.0.0.1:{port}")])
        .env("ARBOR_MASTER_KEY_FILE", &wrong)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    let expected = format!(
        "vault master key mismatch: configured key id {}, database expects {good_id}; nothing was modified",
        wrong_key.key_id()
    );
    assert!(err.contains(&expected), "{err}");
    assert_eq!(vault_rows(&db).await, before);
    assert_eq!(std::fs::read(&key_file).unwrap(), good, "the key file is untouched");
    // `arbor vault status` says the same, and exits 1.
    let out =
        arbor(dir.path()).args(["vault", "status"]).env("ARBOR_MASTER_KEY_FILE", &wrong).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(&format!("master key id {good_id}")) && text.contains("DOES NOT MATCH"), "{text}");

    // The key file gone: refused too, and no new key is generated over the old vault.
    std::fs::rename(&key_file, dir.path().join("backup.key")).unwrap();
    let out = arbor(dir.path()).args(["serve", "--bind", &format!("127.0.0.1:{port}")]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no master key is configured"));
    assert!(!key_file.exists(), "no key was generated");
    assert_eq!(vault_rows(&db).await, before);

    // The backed-up key given through the environment (hex) works.
    let hex: String =
        arbor::vault::parse_key(&good).unwrap().bytes().iter().map(|b| format!("{b:02x}")).collect();
    let out = arbor(dir.path()).args(["vault", "status"]).env("ARBOR_MASTER_KEY", &hex).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("matches"));
    // Closed inside the runtime (see crash.rs).
    db.close().await.unwrap();
}

/// SECURITY.md 59: a key given as `ARBOR_MASTER_KEY` opens the vault, yet the running server's
/// environment (what `/proc/<pid>/environ` shows, and what every child would inherit) lacks it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_master_key_from_the_environment_leaves_the_servers_environment() {
    init_crypto();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let healthz = format!("http://127.0.0.1:{port}/healthz");
    let serve = || {
        let mut cmd = arbor(dir.path());
        cmd.args(["serve", "--bind", &format!("127.0.0.1:{port}")]);
        cmd
    };
    // First start generates the key; then it moves out of the data folder, so only the
    // environment can supply it (without it the server refuses to start, see above).
    let mut child = Child(serve().stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap());
    assert!(wait_healthy(&healthz, Duration::from_secs(20)).await);
    let _ = child.0.kill();
    wait_exit(&mut child.0, Duration::from_secs(10)).expect("stopped");
    let key_file = arbor::vault::default_key_file(&dir.path().join("data"));
    let key = arbor::vault::parse_key(&std::fs::read(&key_file).unwrap()).unwrap();
    std::fs::rename(&key_file, dir.path().join("backup.key")).unwrap();
    let hex: String = key.bytes().iter().map(|b| format!("{b:02x}")).collect();

    let mut child = Child(
        serve().env("ARBOR_MASTER_KEY", &hex).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap(),
    );
    assert!(wait_healthy(&healthz, Duration::from_secs(20)).await, "the vault opened with the key");
    let environ = std::fs::read(format!("/proc/{}/environ", child.0.id())).unwrap();
    let environ = String::from_utf8_lossy(&environ);
    assert!(!environ.split('\0').any(|v| v.starts_with("ARBOR_MASTER_KEY=")), "{environ}");
    assert!(!environ.contains(&hex), "the key's value is nowhere in the environment");
    assert!(environ.contains("ARBOR_MASTER_KEY_ON_STDIN=1"), "the key was handed over: {environ}");
    assert!(!key_file.exists(), "no key file was written for it");
    let _ = child.0.kill();
    wait_exit(&mut child.0, Duration::from_secs(10)).expect("stopped");

    // After the handover the vault still checks the key: a wrong one stops the server (exit 2).
    let wrong: String = Key::generate().bytes().iter().map(|b| format!("{b:02x}")).collect();
    let out = serve().env("ARBOR_MASTER_KEY", &wrong).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("vault master key mismatch"));
    // An oversized value is refused before it is copied anywhere.
    let out = serve().env("ARBOR_MASTER_KEY", "a".repeat(5000)).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("longer than 4096 bytes"));
    // The internal variable set by hand, with no key on standard input, is explained.
    let out = serve().env("ARBOR_MASTER_KEY_ON_STDIN", "1").stdin(Stdio::null()).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unset it"));
}

/// A stored secret's raw row.
async fn secret_row(db: &arbor::storage::Db, id: uuid::Uuid) -> (Vec<u8>, i32) {
    use sea_orm::EntityTrait;
    let row = arbor::storage::entities::vault_secret::Entity::find_by_id(id).one(db).await.unwrap().unwrap();
    (row.ciphertext, row.dek_version)
}

fn provider_key<'a>(label: &'a str) -> arbor::vault::store::NewSecret<'a> {
    arbor::vault::store::NewSecret {
        kind: arbor::vault::store::SecretKind::ProviderKey,
        label,
        provider: "openai",
        base_url: None,
    }
}

#[tokio::test]
async fn secrets_round_trip_count_their_encryptions_and_never_move_between_owners() {
    use arbor::secret::Secret;
    use arbor::vault::store::{StoreError, Use};
    use sea_orm::{ActiveModelTrait, EntityTrait, Set};
    let app = TestApp::spawn().await;
    let (db, vault) = (&app.state.db, &app.state.vault);
    let (alice, bob) = (uuid::Uuid::now_v7(), uuid::Uuid::now_v7());
    let a =
        vault.put_secret(db, alice, None, provider_key("a"), &Secret::new("sk-alice-1111")).await.unwrap();
    let b = vault.put_secret(db, bob, None, provider_key("b"), &Secret::new("sk-bob-2222")).await.unwrap();
    assert_eq!((a.last4.as_str(), b.last4.as_str()), ("1111", "2222"));
    let used = Use { by: Some(alice), purpose: "test" };
    assert_eq!(vault.reveal(db, alice, a.id, used).await.unwrap().expose(), "sk-alice-1111");
    // Owners are checked: Bob cannot read Alice's secret by its id.
    assert!(matches!(vault.reveal(db, bob, a.id, used).await, Err(StoreError::NotFound)));
    // The plaintext is nowhere in the row.
    let (blob, _) = secret_row(db, a.id).await;
    assert!(!blob.windows(13).any(|w| w == b"sk-alice-1111"));

    // Replacing counts another encryption under Alice's data key; an empty value is refused and
    // leaves the stored secret as it was.
    vault.put_secret(db, alice, Some(a.id), provider_key("a"), &Secret::new("sk-alice-3333")).await.unwrap();
    let before = secret_row(db, a.id).await;
    assert!(matches!(
        vault.put_secret(db, alice, Some(a.id), provider_key("a"), &Secret::new("  ")).await,
        Err(StoreError::Empty)
    ));
    assert_eq!(secret_row(db, a.id).await, before);
    let dek =
        arbor::storage::entities::vault_key::Entity::find_by_id((alice, 1)).one(db).await.unwrap().unwrap();
    assert_eq!(dek.encryptions, 2);

    // Bob's ciphertext copied into Alice's row (same provider, same key version) fails to decrypt.
    let (bob_blob, _) = secret_row(db, b.id).await;
    arbor::storage::entities::vault_secret::ActiveModel {
        id: Set(a.id),
        ciphertext: Set(bob_blob),
        ..Default::default()
    }
    .update(db)
    .await
    .unwrap();
    assert!(matches!(vault.reveal(db, alice, a.id, used).await, Err(StoreError::Crypto(_))));
    // An unknown version byte is an error, never plaintext.
    arbor::storage::entities::vault_secret::ActiveModel {
        id: Set(b.id),
        ciphertext: Set(b"sk-bob-2222".to_vec()),
        ..Default::default()
    }
    .update(db)
    .await
    .unwrap();
    let err = vault.reveal(db, bob, b.id, Use { by: Some(bob), purpose: "test" }).await.unwrap_err();
    assert!(err.to_string().contains("unknown vault format version"), "{err}");

    // Only the successful decryption was audited, without the value.
    let rows = arbor::storage::repos::audit::list(
        db,
        &arbor::storage::repos::audit::Filter { action: Some("vault.decrypt".into()), ..Default::default() },
        10,
    )
    .await
    .unwrap();
    assert_eq!(rows.len(), 1);
    assert!(!rows[0].details.contains("sk-alice"), "{}", rows[0].details);
    assert!(rows[0].details.contains("\"purpose\":\"test\""));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotation_killed_half_way_resumes_and_every_secret_still_decrypts() {
    use arbor::secret::Secret;
    use arbor::vault::store::Use;
    init_crypto();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let old_file = dir.path().join("old.key");
    let new_file = dir.path().join("new.key");
    let (old, new) = (Key::generate(), Key::generate());
    std::fs::write(&old_file, old.bytes()).unwrap();
    std::fs::write(&new_file, new.bytes()).unwrap();
    let env = vec![("ARBOR_MASTER_KEY_FILE".to_string(), old_file.display().to_string())];

    // Many owners, each with a data key and a secret, made through the library.
    let db_url = format!("sqlite://{}?mode=rwc", data.join("arbor.db").display());
    let db = sea_orm::Database::connect(&db_url).await.unwrap();
    arbor::storage::migrate_up(&db).await.unwrap();
    let vault = arbor::vault::Vault::open(&db, &env, &data).await.unwrap();
    let mut owners = Vec::new();
    for i in 0..400 {
        let owner = uuid::Uuid::now_v7();
        let value = format!("sk-owner-{i:04}");
        let meta = vault
            .put_secret(&db, owner, None, provider_key("k"), &Secret::new(value.as_str()))
            .await
            .unwrap();
        owners.push((owner, meta.id, value));
    }

    // Rotate one key per transaction and kill the process once some rows moved.
    let rotate = || {
        let mut cmd = arbor(dir.path());
        cmd.args(["vault", "rotate", "--batch-size", "1", "--new-key-file"])
            .arg(&new_file)
            .args(["--data-dir"])
            .arg(&data)
            .env("ARBOR_MASTER_KEY_FILE", &old_file);
        cmd
    };
    let mut child = Child(rotate().stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap());
    let count_new = || {
        let db = &db;
        let id = new.key_id();
        async move {
            let sql = format!("SELECT COUNT(*) AS n FROM vault_keys WHERE kek_id = '{id}'");
            let row = db
                .query_one_raw(Statement::from_string(db.get_database_backend(), sql))
                .await
                .unwrap()
                .unwrap();
            row.try_get::<i64>("", "n").unwrap()
        }
    };
    let began = std::time::Instant::now();
    loop {
        let moved = count_new().await;
        if moved > 0 {
            break;
        }
        assert!(child.0.try_wait().unwrap().is_none(), "the rotation ended before it could be killed");
        assert!(began.elapsed() < Duration::from_secs(30), "no data key was ever rewrapped");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    child.0.kill().unwrap();
    wait_exit(&mut child.0, Duration::from_secs(10)).expect("killed");
    let half = count_new().await;
    assert!(half > 0 && half < 400, "killed half-way: {half} of 400 moved");
    assert_eq!(
        arbor::vault::status(&db).await.unwrap().expected_key_id,
        Some(old.key_id()),
        "not switched yet"
    );

    // Run it again: it resumes, finishes, and the database now expects the new key.
    let out = rotate().output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains(&format!("to {}", new.key_id())), "{stdout}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("400/400 data keys"), "a progress bar");
    let status = arbor::vault::status(&db).await.unwrap();
    assert_eq!(status.expected_key_id, Some(new.key_id()));
    assert_eq!(status.data_keys_elsewhere, 0);
    // Every secret decrypts under the new key; the old key is now refused.
    let env_new = vec![("ARBOR_MASTER_KEY_FILE".to_string(), new_file.display().to_string())];
    let rotated = arbor::vault::Vault::open(&db, &env_new, &data).await.unwrap();
    for (owner, id, value) in &owners {
        let got = rotated.reveal(&db, *owner, *id, Use { by: None, purpose: "test" }).await.unwrap();
        assert_eq!(got.expose(), value);
    }
    assert!(arbor::vault::Vault::open(&db, &env, &data).await.is_err());
    // A third run says it is already done.
    let out = rotate().output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("rotation already complete"));
    db.close().await.unwrap();
}

/// SECURITY.md 41: a run goes on server-side whether or not its owner is still connected; it
/// decrypts only its owner's key, writes an audit row for each use, and when the owner's secret
/// cannot be decrypted it fails closed with a clear answer: no crash, no other key used instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_decrypts_only_its_owners_key_audits_it_and_fails_closed() {
    use crate::support::mock_upstream::{Provider, Reply};
    use arbor::storage::entities::{audit_entry as audit_log, vault_secret};
    use sea_orm::{ActiveModelTrait, ColumnTrait, EntityTrait, QueryFilter, Set};
    let c = crate::runs::chat_with(|c| c.llm.member_base_url_allow = vec!["127.0.0.0/8".into()]).await;
    let upstream = crate::admin::enc(&c.mock.url(Provider::OpenAi));
    // Each keeps a key for their own OpenAI-compatible endpoint (here, the mock).
    let add_key = |s: &crate::support::TestSession, name: &str, key: &str| {
        let body = format!("kind=openai_compatible&name={name}&base_url={upstream}&label=mine&key={key}");
        let app = &c.app;
        let s = s.clone();
        async move { app.post_form("/settings/keys", &body, Some(&s)).await.status() }
    };
    assert_eq!(add_key(&c.s, "adas", "sk-ADA-OWN-KEY-1234").await, 200);
    let bob = c.app.create_user("bob@example.com", arbor::domain::accounts::Role::Member).await;
    let bob_s = c.app.login_full(&bob).await;
    assert_eq!(add_key(&bob_s, "bobs", "sk-BOB-OWN-KEY-5678").await, 200);
    let secret_of = |owner: uuid::Uuid| {
        let db = c.app.state.db.clone();
        async move {
            vault_secret::Entity::find()
                .filter(vault_secret::Column::OwnerId.eq(owner))
                .one(&db)
                .await
                .unwrap()
                .unwrap()
        }
    };
    let (ada_secret, bob_secret) = (secret_of(c.user.id).await, secret_of(bob.id).await);

    let decrypts_so_far = || {
        let db = c.app.state.db.clone();
        async move {
            audit_log::Entity::find()
                .filter(audit_log::Column::Action.eq("vault.decrypt"))
                .all(&db)
                .await
                .unwrap()
                .into_iter()
                .map(|r| r.id)
                .collect::<Vec<_>>()
        }
    };
    let earlier = decrypts_so_far().await;
    // Nobody listens to the stream (the browser is gone): the run still finishes, with Ada's key.
    // (A busy machine may make the provider client retry: each attempt is answered.)
    for _ in 0..3 {
        c.mock.enqueue(Provider::OpenAi, Reply::fixture("openai/text.sse"));
    }
    let answer = c.send_ok("Hello", "adas/gpt-4o-mini").await;
    let done = c.settled(answer).await;
    assert_eq!(done.status, arbor::domain::sessions::tree::MessageStatus::Complete, "{:?}", done.error);
    let sent = c.mock.requests_for(Provider::OpenAi);
    let calls: Vec<_> = sent.iter().filter(|r| r.method == "POST").collect();
    assert!(!calls.is_empty());
    for call in calls {
        assert_eq!(call.header("authorization"), Some("Bearer sk-ADA-OWN-KEY-1234"), "only Ada's key");
    }
    let decrypts = audit_log::Entity::find()
        .filter(audit_log::Column::Action.eq("vault.decrypt"))
        .all(&c.app.state.db)
        .await
        .unwrap()
        .into_iter()
        .filter(|r| !earlier.contains(&r.id))
        .collect::<Vec<_>>();
    assert!(!decrypts.is_empty(), "the use is audited");
    for row in &decrypts {
        assert_eq!(row.target, format!("secret:{}", ada_secret.id), "only Ada's secret was decrypted");
        assert_eq!(row.actor_id, Some(c.user.id));
        assert!(
            row.details.contains(&c.user.id.to_string()) && row.details.contains("purpose"),
            "{}",
            row.details
        );
        assert!(!row.details.contains("sk-ADA"), "never the value");
    }
    assert!(!decrypts.iter().any(|r| r.target.contains(&bob_secret.id.to_string())));

    // Ada's stored secret no longer decrypts (tampered, or wrapped under another key): her next
    // run fails with a clear message; nothing is sent upstream, neither Bob's key nor the server's.
    let mut broken = ada_secret.ciphertext.clone();
    let last = broken.len() - 1;
    broken[last] ^= 0x5a;
    vault_secret::ActiveModel { id: Set(ada_secret.id), ciphertext: Set(broken), ..Default::default() }
        .update(&c.app.state.db)
        .await
        .unwrap();
    // Written behind the server's back: say so, as every write through the vault does (the
    // sealed key the last call read is kept until then).
    arbor::storage::changes::changed(arbor::storage::changes::Kept::Vault);
    let before = c.mock.requests_for(Provider::OpenAi).len();
    c.mock.enqueue(Provider::OpenAi, Reply::fixture("openai/text.sse"));
    let client_id = uuid::Uuid::new_v4().simple().to_string();
    let res = c
        .app
        .post_form(
            &format!("/s/{}/messages", c.session),
            &crate::runs::form("Again", &client_id, "adas/gpt-4o-mini"),
            Some(&c.s),
        )
        .await;
    let status = res.status().as_u16();
    let body = res.text().await.unwrap();
    if status == 200 {
        // The run started and ended with an error on the answer.
        let id = crate::runs::streaming_id(&body);
        let m = c.settled(id).await;
        assert_eq!(m.status, arbor::domain::sessions::tree::MessageStatus::Error, "{m:?}");
    } else {
        assert!((400..600).contains(&status), "{status}");
    }
    assert_eq!(c.mock.requests_for(Provider::OpenAi).len(), before, "no call went out with another key");
    assert_eq!(c.app.get("/healthz", None).await.status(), 200, "the server is fine");
    // Bob is not affected.
    c.mock.enqueue(Provider::OpenAi, Reply::fixture("openai/text.sse"));
    let (_, bob_session) = c.app.create_session(&bob).await;
    let res = c
        .app
        .post_form(
            &format!("/s/{bob_session}/messages"),
            &crate::runs::form("Hi", &uuid::Uuid::new_v4().simple().to_string(), "bobs/gpt-4o-mini"),
            Some(&bob_s),
        )
        .await;
    assert_eq!(res.status(), 200);
}

/// A stored key is read once and kept sealed between calls, but decrypted and audited for every
/// call; replacing its value counts from the very next call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_key_is_decrypted_and_audited_for_every_call_and_a_new_value_counts_at_once() {
    use crate::support::mock_upstream::{Provider, Reply};
    use arbor::storage::entities::{audit_entry as audit_log, vault_secret};
    use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
    let chat = crate::runs::chat_with(|c| c.llm.member_base_url_allow = vec!["127.0.0.0/8".into()]).await;
    let c = &chat;
    let upstream = crate::admin::enc(&c.mock.url(Provider::OpenAi));
    let body =
        format!("kind=openai_compatible&name=adas&base_url={upstream}&label=mine&key=sk-ADA-FIRST-1111");
    assert_eq!(c.app.post_form("/settings/keys", &body, Some(&c.s)).await.status(), 200);
    let secret = vault_secret::Entity::find()
        .filter(vault_secret::Column::OwnerId.eq(c.user.id))
        .one(&c.app.state.db)
        .await
        .unwrap()
        .unwrap();
    let decrypts = || {
        let db = c.app.state.db.clone();
        let target = format!("secret:{}", secret.id);
        async move {
            audit_log::Entity::find()
                .filter(audit_log::Column::Action.eq("vault.decrypt"))
                .filter(audit_log::Column::Target.eq(target))
                .all(&db)
                .await
                .unwrap()
                .len()
        }
    };
    let bearers = || -> Vec<String> {
        c.mock
            .requests_for(Provider::OpenAi)
            .iter()
            .filter(|r| r.method == "POST")
            .filter_map(|r| r.header("authorization").map(str::to_string))
            .collect()
    };
    let answer = |text: &'static str| async move {
        c.mock.enqueue(Provider::OpenAi, Reply::fixture("openai/text.sse"));
        let id = c.send_ok(text, "adas/gpt-4o-mini").await;
        let done = c.settled(id).await;
        assert_eq!(done.status, arbor::domain::sessions::tree::MessageStatus::Complete, "{:?}", done.error);
    };

    for text in ["one", "two", "three"] {
        let before = decrypts().await;
        answer(text).await;
        // Each call (title suggestions included) decrypted the key again and said so.
        assert!(decrypts().await > before, "the call for {text:?} was not audited");
    }
    assert!(bearers().iter().all(|b| b == "Bearer sk-ADA-FIRST-1111"), "{:?}", bearers());

    let replaced = c
        .app
        .post_form(&format!("/settings/keys/{}", secret.id), "label=mine&key=sk-ADA-SECOND-2222", Some(&c.s))
        .await;
    assert_eq!(replaced.status(), 200);
    let sent = bearers().len();
    answer("four").await;
    let after: Vec<String> = bearers().split_off(sent);
    assert!(!after.is_empty());
    assert!(after.iter().all(|b| b == "Bearer sk-ADA-SECOND-2222"), "the old value was used: {after:?}");
}
