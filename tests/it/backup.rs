//! `arbor backup` while the server writes, then `arbor restore` into a fresh directory: the same
//! trees, files and vault secrets (with the same master key), an intact database, a rebuilt
//! search index; and the refusals.

use std::path::Path;
use std::process::Output;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use arbor::domain::accounts::Actor;
use arbor::secret::Secret;
use arbor::vault::store::{NewSecret, SecretKind, Use};

use crate::cli::arbor;
use crate::files::{chip_ids, png, upload};
use crate::runs::chat_with;
use crate::support::TestDb;
use crate::support::mock_upstream::{Provider, Reply};

/// `arbor backup --to ARCHIVE` on the data directory, the server running.
fn backup(work: &Path, archive: &Path, data_dir: &Path, db_url: &str) -> Output {
    arbor(work)
        .args(["backup", "--to"])
        .arg(archive)
        .arg("--data-dir")
        .arg(data_dir)
        .env("ARBOR_DATABASE_URL", db_url)
        .output()
        .unwrap()
}

/// `arbor restore --from ARCHIVE` into `dir`, SQLite unless a database URL is given.
fn restore(work: &Path, archive: &Path, dir: &Path, db_url: Option<&str>) -> Output {
    let mut cmd = arbor(work);
    cmd.args(["restore", "--from"]).arg(archive).arg("--data-dir").arg(dir);
    if let Some(url) = db_url {
        cmd.env("ARBOR_DATABASE_URL", url);
    }
    cmd.output().unwrap()
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_taken_while_writing_restores_the_same_trees_files_and_secrets() {
    let c = chat_with(|_| {}).await;
    let (db, data_dir) = (c.app.state.db.clone(), c.app.state.config.data_dir.clone());
    let db_url = c.app.state.config.database.url.clone();
    let work = tempfile::tempdir().unwrap();

    // A tree of two turns, an attached file and a secret in the vault.
    for _ in 0..2 {
        c.mock.enqueue(Provider::OpenAi, Reply::fixture("openai/text.sse"));
        let answer = c.send_ok("Tell me something", "openai/gpt-4o-mini").await;
        c.settled(answer).await;
    }
    let res = upload(&c, &c.s, "red.png", png()).await;
    assert_eq!(res.status(), 200);
    let (_, hash) = chip_ids(&res.text().await.unwrap());
    let blob_path = c.app.state.blobs.path_of(&hash).unwrap();
    let blob_rel = blob_path.strip_prefix(&data_dir).unwrap().to_path_buf();
    let secret =
        NewSecret { kind: SecretKind::ProviderKey, label: "mine", provider: "openai", base_url: None };
    let stored = c
        .app
        .state
        .vault
        .put_secret(&db, c.user.id, None, secret, &Secret::new("sk-backup-4242"))
        .await
        .unwrap();
    let tree = c.messages().await;

    // Writes keep coming while the backup runs.
    let actor = Actor::for_tests(&c.user);
    let ws =
        arbor::domain::sessions::Sessions::new(db.clone()).create_workspace(&actor, "Busy").await.unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (db, actor, stop) = (db.clone(), actor.clone(), stop.clone());
        tokio::spawn(async move {
            let mut n = 0u32;
            while !stop.load(Ordering::Relaxed) {
                arbor::domain::sessions::Sessions::new(db.clone())
                    .create_session(&actor, ws.id, &format!("busy {n}"))
                    .await
                    .unwrap();
                n += 1;
            }
            n
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let archive = work.path().join("arbor-backup.tar.gz");
    let out = backup(work.path(), &archive, &data_dir, &db_url);
    stop.store(true, Ordering::Relaxed);
    let written = writer.await.unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("master key is not in the backup"), "{}", text(&out));
    assert!(written > 0);

    // The same file again is refused, and nothing is overwritten.
    let before = std::fs::metadata(&archive).unwrap().len();
    let again = backup(work.path(), &archive, &data_dir, &db_url);
    assert!(!again.status.success() && text(&again).contains("already exists"), "{}", text(&again));
    assert_eq!(std::fs::metadata(&archive).unwrap().len(), before);

    let fresh = work.path().join("restored");
    let key_file = arbor::vault::default_key_file(&data_dir);
    if TestDb::is_postgres() {
        // PostgreSQL: the archive holds the files only; pg_dump keeps the database. Restoring it
        // as a SQLite directory is refused, beside the same database it restores the files.
        assert!(text(&out).contains("pg_dump"), "{}", text(&out));
        let refused = restore(work.path(), &archive, &fresh, None);
        assert!(
            !refused.status.success() && text(&refused).contains("taken from PostgreSQL"),
            "{}",
            text(&refused)
        );
        assert!(!fresh.join("arbor.db").exists());
        let out = restore(work.path(), &archive, &fresh, Some(&db_url));
        assert!(out.status.success(), "{}", text(&out));
        assert_eq!(std::fs::read(fresh.join(&blob_rel)).unwrap(), std::fs::read(&blob_path).unwrap());
        return;
    }

    // Restore into a fresh directory, with the master key put there first.
    std::fs::create_dir_all(&fresh).unwrap();
    std::fs::copy(&key_file, arbor::vault::default_key_file(&fresh)).unwrap();
    let out = restore(work.path(), &archive, &fresh, None);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("search index rebuilt"), "{}", text(&out));
    assert!(fresh.join("index").is_dir(), "the search index is rebuilt");

    let restored =
        sea_orm::Database::connect(format!("sqlite://{}?mode=rw", fresh.join("arbor.db").display()))
            .await
            .unwrap();
    assert_eq!(arbor::storage::snapshot::sqlite_integrity(&restored).await.unwrap(), "ok");
    // The same tree, message for message.
    let again = arbor::storage::repos::messages::session_messages(&restored, c.session).await.unwrap();
    let ids = |m: &[arbor::domain::sessions::tree::Message]| {
        m.iter().map(|m| (m.id, m.parent_id, m.text())).collect::<Vec<_>>()
    };
    assert_eq!(ids(&again), ids(&tree));
    // Sessions written during the backup: a prefix of them, each whole.
    use arbor::storage::entities::chat_session;
    use sea_orm::{ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter};
    let busy = chat_session::Entity::find()
        .filter(chat_session::Column::WorkspaceId.eq(ws.id))
        .count(&restored)
        .await
        .unwrap();
    assert!(busy <= u64::from(written), "{busy} of {written}");
    // The file, byte for byte.
    assert_eq!(std::fs::read(fresh.join(&blob_rel)).unwrap(), std::fs::read(&blob_path).unwrap());
    // The secret, under the same master key.
    let env = vec![("ARBOR_MASTER_KEY_FILE".to_string(), key_file.display().to_string())];
    let vault = arbor::vault::Vault::open(&restored, &env, &fresh).await.unwrap();
    let used = Use { by: Some(c.user.id), purpose: "test" };
    assert_eq!(vault.reveal(&restored, c.user.id, stored.id, used).await.unwrap().expose(), "sk-backup-4242");
    restored.close().await.unwrap();

    // A restore into a directory that is not empty, or from a file that is not a backup, is
    // refused and leaves nothing behind.
    let out = restore(work.path(), &archive, &fresh, None);
    assert!(!out.status.success() && text(&out).contains("not empty"), "{}", text(&out));
    let junk = work.path().join("junk.tar.gz");
    std::fs::write(&junk, b"not a backup at all").unwrap();
    let empty = work.path().join("empty");
    let out = restore(work.path(), &junk, &empty, None);
    assert!(!out.status.success() && text(&out).contains("not an Arbor backup"), "{}", text(&out));
    assert!(std::fs::read_dir(&empty).map(|d| d.count()).unwrap_or(0) == 0, "nothing left behind");
}
