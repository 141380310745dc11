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
