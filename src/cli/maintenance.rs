//! `arbor reindex` and `arbor blobs gc`: maintenance with the server stopped.

use std::process::ExitCode;

use arbor::config::Config;

use crate::open_migrated;

/// `arbor vault status`: after bringing the schema up to date it only reads; exit 1 when the
/// configured key is not the database's.
/// `arbor reindex`: rebuilds the search index with a progress bar.
pub(crate) async fn reindex(config: Config) -> ExitCode {
    let db = match open_migrated(&config).await {
        Ok(db) => db,
        Err(code) => return code,
    };
    let dir = config.search.dir(&config.data_dir);
    let result = arbor::domain::search::reindex(&db, &dir, |done, total| {
        eprint!("\r{}", arbor::vault::rotate::progress_bar(done, total, "messages"));
    })
    .await;
    eprintln!();
    match result {
        Ok(docs) => {
            println!("search index rebuilt: {docs} messages indexed");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("reindex failed: {e} (is the server still running? stop it first)");
            ExitCode::FAILURE
        }
    }
}

/// `arbor blobs gc`: removes files nothing refers to.
pub(crate) async fn blobs_gc(config: Config, grace_secs: u64) -> ExitCode {
    let db = match open_migrated(&config).await {
        Ok(db) => db,
        Err(code) => return code,
    };
    let store = match arbor::blobs::BlobStore::new(config.files.blob_dir(&config.data_dir)) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("cannot open the file store: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut settings = arbor::file_settings(&config.files);
    settings.gc_grace = std::time::Duration::from_secs(grace_secs);
    match arbor::domain::files::Files::new(db, store, settings).collect().await {
        Ok(done) => {
            println!(
                "removed {} unreferenced files, {} stray files and {} uploads never sent",
                done.blobs, done.orphan_files, done.stale_uploads
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("collection failed: {e}");
            ExitCode::FAILURE
        }
    }
}
