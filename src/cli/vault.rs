//! `arbor vault status` and `arbor vault rotate`.

use std::process::ExitCode;

use arbor::config::Config;

use crate::{EXIT_CONFIG, open_migrated};

pub(crate) async fn vault_status(config: Config) -> ExitCode {
    let db = match open_migrated(&config).await {
        Ok(db) => db,
        Err(code) => return code,
    };
    let status = match arbor::vault::status(&db).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let env = arbor::vault::handover::process_env();
    let configured = match arbor::vault::configured_key(&env, &config.data_dir) {
        Ok(k) => k,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    match &status.expected_key_id {
        Some(id) => println!("vault: set up; master key id {id}"),
        None => println!("vault: not set up yet (the server sets it up on its first start)"),
    }
    println!(
        "data keys: {} ({} wrapped under another master key)",
        status.data_keys, status.data_keys_elsewhere
    );
    match (configured, &status.expected_key_id) {
        (None, _) => println!("configured master key: none"),
        (Some((key, source)), expected) => {
            let id = key.key_id();
            let verdict = match expected {
                Some(e) if *e == id => "matches",
                Some(_) => "DOES NOT MATCH the database",
                None => "will be used on first start",
            };
            println!("configured master key: id {id} from {source:?}, {verdict}");
            if expected.as_ref().is_some_and(|e| *e != id) {
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}

/// `arbor vault rotate`: rewraps every data key under the new master key, with a progress bar.
pub(crate) async fn vault_rotate(config: Config, new_key_file: &std::path::Path, batch: u64) -> ExitCode {
    use arbor::vault::{KeySource, Vault, VaultError, rotate};
    let new_key = match std::fs::read(new_key_file)
        .map_err(|e| VaultError::BadKey(format!("{}: {e}", new_key_file.display())))
        .and_then(|raw| arbor::vault::parse_key(&raw))
    {
        Ok(k) => k,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let db = match open_migrated(&config).await {
        Ok(db) => db,
        Err(code) => return code,
    };
    match arbor::vault::status(&db).await {
        Ok(s) if s.expected_key_id.is_none() => {
            eprintln!(
                "nothing to rotate: the vault is not set up yet (the server sets it up on its first start)"
            );
            db.close().await.ok();
            return ExitCode::FAILURE;
        }
        Ok(_) => {}
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    }
    let env = arbor::vault::handover::process_env();
    let old = match Vault::open(&db, &env, &config.data_dir).await {
        Ok(v) => v,
        Err(VaultError::Mismatch { expected, .. }) if expected == new_key.key_id() => {
            println!(
                "rotation already complete: the database expects master key {expected}, the new key; \
                 configure it (ARBOR_MASTER_KEY_FILE={})",
                new_key_file.display()
            );
            db.close().await.ok();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("{e}");
            db.close().await.ok();
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let interactive = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let outcome = rotate::rotate(&db, &old, &new_key, batch, |done, total| {
        if interactive {
            eprint!("\r{}", rotate::progress_bar(done, total, "data keys"));
        } else {
            eprintln!("{}", rotate::progress_bar(done, total, "data keys"));
        }
    })
    .await;
    if interactive {
        eprintln!();
    }
    db.close().await.ok();
    let done = match outcome {
        Ok(done) => done,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    println!(
        "vault rotated from master key {} to {} ({} data keys rewrapped by this run)",
        done.from, done.to, done.rewrapped
    );
    let default_file = arbor::vault::default_key_file(&config.data_dir);
    if old.source() == &KeySource::File(default_file.clone())
        || matches!(old.source(), KeySource::Generated(p) if *p == default_file)
    {
        let retired = default_file.with_file_name(format!("master.key.{}.retired", done.from));
        let swapped = std::fs::rename(&default_file, &retired)
            .and_then(|()| std::fs::copy(new_key_file, &default_file).map(|_| ()))
            .and_then(|()| {
                use std::os::unix::fs::PermissionsExt as _;
                std::fs::set_permissions(&default_file, std::fs::Permissions::from_mode(0o600))
            });
        match swapped {
            Ok(()) => println!(
                "{} now holds the new key; the old one is kept as {} for backups taken before today",
                default_file.display(),
                retired.display()
            ),
            Err(e) => {
                eprintln!(
                    "could not put the new key in place ({e}): copy {} to {} before starting the server",
                    new_key_file.display(),
                    default_file.display()
                );
                return ExitCode::FAILURE;
            }
        }
    } else {
        println!(
            "set ARBOR_MASTER_KEY_FILE={} before starting the server; keep the old key as long as \
             backups taken before today are kept",
            new_key_file.display()
        );
    }
    ExitCode::SUCCESS
}
