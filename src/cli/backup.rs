//! `arbor backup` and `arbor restore` (the work is in `arbor::backup`).

use std::path::Path;
use std::process::ExitCode;

use arbor::config::Config;

/// `arbor backup --to FILE`: safe while the server runs.
pub(crate) async fn backup(config: Config, to: &Path) -> ExitCode {
    let db = match arbor::storage::connect(&config).await {
        Ok(db) => db,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let result = arbor::backup::create(&db, &config, to).await;
    let _ = db.close().await;
    match result {
        Ok(m) => {
            println!(
                "backup written to {}: {}{} attached files, schema {}",
                to.display(),
                if m.database_included { "the database, " } else { "" },
                m.blobs,
                m.migrations.last().map_or("(empty)", String::as_str),
            );
            if !m.database_included {
                println!("The database is PostgreSQL: back it up with pg_dump as well (README, Operations).");
            }
            println!(
                "The vault's master key is not in the backup: keep it apart (the data directory's master.key, \
                 or what ARBOR_MASTER_KEY_FILE names); a restore needs the same key."
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("backup failed: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `arbor restore --from FILE`: into an empty data directory, with the server stopped.
pub(crate) async fn restore(config: Config, from: &Path) -> ExitCode {
    match arbor::backup::restore(&config, from).await {
        Ok(r) => {
            println!(
                "restored the backup of {} ({} attached files) into {}; search index rebuilt ({} messages)",
                r.manifest.created_at.format("%Y-%m-%d %H:%M UTC"),
                r.manifest.blobs,
                config.data_dir.display(),
                r.indexed
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("restore failed: {e}");
            ExitCode::FAILURE
        }
    }
}
