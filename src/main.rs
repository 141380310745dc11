//! The `arbor` command line: serve, migrate, check-config, healthcheck.

use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use arbor::config::{self, CliOverrides, Config};

mod cli;

/// jemalloc, whose background thread returns freed memory to the system (glibc keeps most of
/// what a burst of streams took; BENCHMARKS.md, "Memory after a burst"). Built unprefixed, it
/// is the process's `malloc` too, so SQLite's memory is returned the same way.
#[cfg(all(unix, not(target_env = "musl")))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

use cli::backup::{backup, restore};
use cli::maintenance::{blobs_gc, reindex};
use cli::vault::{vault_rotate, vault_status};

/// Arbor: a self-hosted, multi-user server for LLM agents with branching sessions.
#[derive(Parser)]
#[command(name = "arbor", version, about, long_about = None)]
struct Cli {
    /// Configuration file (TOML) layered over the built-in defaults; also ARBOR_CONFIG.
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Apply pending database migrations, then serve the web UI and API.
    Serve {
        /// Address and port to listen on (default 127.0.0.1:8080).
        #[arg(long, value_name = "ADDR:PORT")]
        bind: Option<SocketAddr>,
        /// Directory for the database, index and files (default ./data).
        #[arg(long, value_name = "DIR")]
        data_dir: Option<PathBuf>,
    },
    /// Inspect or change the database schema.
    Migrate {
        #[command(subcommand)]
        action: MigrateAction,
        /// Directory for the database (default ./data).
        #[arg(long, value_name = "DIR", global = true)]
        data_dir: Option<PathBuf>,
    },
    /// Print the effective configuration with secrets redacted, then exit.
    CheckConfig,
    /// Create or promote administrators.
    Admin {
        #[command(subcommand)]
        action: AdminAction,
        /// Directory for the database (default ./data).
        #[arg(long, value_name = "DIR", global = true)]
        data_dir: Option<PathBuf>,
    },
    /// The key vault: whether it is set up, under which master key, and whether the configured
    /// key is that one.
    Vault {
        #[command(subcommand)]
        action: VaultAction,
        /// Directory for the database (default ./data).
        #[arg(long, value_name = "DIR", global = true)]
        data_dir: Option<PathBuf>,
    },
    /// Rebuild the search index from the database (run it with the server stopped).
    Reindex {
        /// Directory for the database and index (default ./data).
        #[arg(long, value_name = "DIR")]
        data_dir: Option<PathBuf>,
    },
    /// Attached files.
    Blobs {
        #[command(subcommand)]
        action: BlobsAction,
        /// Directory for the database and files (default ./data).
        #[arg(long, value_name = "DIR", global = true)]
        data_dir: Option<PathBuf>,
    },
    /// Write a consistent copy of the database and attached files to FILE (a .tar.gz), while the
    /// server runs. The vault's master key is not included: keep it apart.
    Backup {
        /// The archive to write (must not exist).
        #[arg(long, value_name = "FILE")]
        to: PathBuf,
        /// Directory for the database and files (default ./data).
        #[arg(long, value_name = "DIR")]
        data_dir: Option<PathBuf>,
    },
    /// Restore a backup into an empty data directory (a master.key file may already be there),
    /// then check the database and rebuild the search index.
    Restore {
        /// The archive `arbor backup` wrote.
        #[arg(long, value_name = "FILE")]
        from: PathBuf,
        /// The empty directory to restore into (default ./data).
        #[arg(long, value_name = "DIR")]
        data_dir: Option<PathBuf>,
    },
    /// Exit 0 when a running server answers /healthz (for container health checks).
    Healthcheck {
        /// URL to probe (default: http://<server.bind>/healthz).
        #[arg(long)]
        url: Option<String>,
    },
}

#[derive(Subcommand)]
enum MigrateAction {
    /// Apply every pending migration.
    Up,
    /// Roll back the most recent migrations.
    Down {
        /// How many migrations to roll back.
        #[arg(long, default_value_t = 1)]
        steps: u32,
    },
    /// List migrations and whether each is applied.
    Status,
}

#[derive(Subcommand)]
enum BlobsAction {
    /// Remove stored files nothing refers to any more (and uploads never sent).
    Gc {
        /// Keep unreferenced files younger than this many seconds (an upload may be on its way).
        #[arg(long, default_value_t = 3600)]
        grace_secs: u64,
    },
}

#[derive(Subcommand)]
enum VaultAction {
    /// Show the master key id the database expects, the data keys, and the configured key.
    Status,
    /// Rewrap every data key under a new master key (run it with the server stopped). Resumable:
    /// if it is interrupted, run the same command again.
    Rotate {
        /// File holding the new master key (32 bytes, hex or base64), e.g. from `openssl rand -hex 32`.
        #[arg(long, value_name = "FILE")]
        new_key_file: PathBuf,
        /// Data keys rewrapped per transaction.
        #[arg(long, default_value_t = 100)]
        batch_size: u64,
    },
}

#[derive(Subcommand)]
enum AdminAction {
    /// Create a local administrator account. The password is read from --password-file, or
    /// else from the first line of standard input.
    Create {
        /// Email address to sign in with.
        #[arg(long)]
        email: String,
        /// Display name (default: the part of the email before @).
        #[arg(long, default_value = "")]
        name: String,
        /// File holding the password.
        #[arg(long, value_name = "FILE")]
        password_file: Option<PathBuf>,
    },
    /// Make an existing user an administrator.
    Promote {
        /// Email address of the user.
        #[arg(long)]
        email: String,
    },
    /// Create an API token for a user and print it (shown once), e.g. for scripts and CI.
    Token {
        /// Email address of the user.
        #[arg(long)]
        email: String,
        /// The token's name.
        #[arg(long, default_value = "command line")]
        name: String,
        /// `api` (the /v1 model API), `sessions` (the sessions API) or `full` (both, and the account).
        #[arg(long, default_value = "api")]
        scope: String,
        /// Days until it expires (default: never).
        #[arg(long)]
        days: Option<u32>,
    },
}

/// Exit code for configuration errors.
const EXIT_CONFIG: u8 = 2;

fn load_config(
    cli_config: Option<PathBuf>,
    bind: Option<SocketAddr>,
    data_dir: Option<PathBuf>,
) -> Result<Config, ExitCode> {
    let env = arbor::vault::handover::process_env();
    let overrides = CliOverrides { config_file: cli_config, bind, data_dir };
    match config::load(&overrides, &env) {
        Ok(loaded) => {
            arbor::telemetry::init(&loaded.config.log);
            for w in &loaded.warnings {
                tracing::warn!("{w}");
            }
            Ok(loaded.config)
        }
        Err(e) => {
            eprintln!("{e}");
            Err(ExitCode::from(EXIT_CONFIG))
        }
    }
}

fn main() -> ExitCode {
    // The prompt renderer's child: before any thread exists, so its limits cover everything.
    if std::env::args_os().nth(1).is_some_and(|a| a == "render-prompt") {
        return arbor::prompting::child_main();
    }
    // One TLS stack for every outbound client: rustls with ring.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cli = Cli::parse();
    if matches!(cli.command, Command::Serve { .. }) {
        // Before the runtime starts any thread: the key must leave the environment first.
        if let Err(message) = arbor::vault::handover::hand_over_or_receive() {
            eprintln!("cannot start: {message}");
            return ExitCode::from(EXIT_CONFIG);
        }
    }
    // Purging freed pages on a thread of its own, off the request path; only for the server (the
    // prompt renderer's child above runs under rlimits and stays single-threaded).
    #[cfg(all(unix, not(target_env = "musl")))]
    if matches!(cli.command, Command::Serve { .. })
        && let Err(e) = tikv_jemalloc_ctl::background_thread::write(true)
    {
        eprintln!(
            "warning: jemalloc's background thread did not start ({e}); freed memory is returned later"
        );
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(run(cli))
}

async fn run(cli: Cli) -> ExitCode {
    match cli.command {
        Command::Serve { bind, data_dir } => {
            let config = match load_config(cli.config, bind, data_dir) {
                Ok(c) => c,
                Err(code) => return code,
            };
            serve(config).await
        }
        Command::Migrate { action, data_dir } => {
            let config = match load_config(cli.config, None, data_dir) {
                Ok(c) => c,
                Err(code) => return code,
            };
            migrate(config, action).await
        }
        Command::Admin { action, data_dir } => {
            let config = match load_config(cli.config, None, data_dir) {
                Ok(c) => c,
                Err(code) => return code,
            };
            admin(config, action).await
        }
        Command::Vault { action, data_dir } => {
            let config = match load_config(cli.config, None, data_dir) {
                Ok(c) => c,
                Err(code) => return code,
            };
            match action {
                VaultAction::Status => vault_status(config).await,
                VaultAction::Rotate { new_key_file, batch_size } => {
                    vault_rotate(config, &new_key_file, batch_size).await
                }
            }
        }
        Command::Reindex { data_dir } => {
            let config = match load_config(cli.config, None, data_dir) {
                Ok(c) => c,
                Err(code) => return code,
            };
            reindex(config).await
        }
        Command::Blobs { action: BlobsAction::Gc { grace_secs }, data_dir } => {
            let config = match load_config(cli.config, None, data_dir) {
                Ok(c) => c,
                Err(code) => return code,
            };
            blobs_gc(config, grace_secs).await
        }
        Command::Backup { to, data_dir } => match load_config(cli.config, None, data_dir) {
            Ok(config) => backup(config, &to).await,
            Err(code) => code,
        },
        Command::Restore { from, data_dir } => match load_config(cli.config, None, data_dir) {
            Ok(config) => restore(config, &from).await,
            Err(code) => code,
        },
        Command::CheckConfig => match load_config(cli.config, None, None) {
            Ok(c) => {
                print!("{}", c.to_redacted_toml());
                ExitCode::SUCCESS
            }
            Err(code) => code,
        },
        Command::Healthcheck { url } => {
            let url = match url {
                Some(u) => u,
                None => match load_config(cli.config, None, None) {
                    Ok(c) => {
                        let mut addr = c.server.bind;
                        if addr.ip().is_unspecified() {
                            addr.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
                        }
                        format!("http://{addr}/healthz")
                    }
                    Err(code) => return code,
                },
            };
            healthcheck(&url).await
        }
    }
}

async fn serve(config: Config) -> ExitCode {
    let bind = config.server.bind;
    let data_dir = config::absolute(&config.data_dir);
    let backend = if config.database.url.starts_with("postgres") { "postgres" } else { "sqlite" };
    let listener = match TcpListener::bind(bind) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("cannot listen on {bind}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let state = match arbor::build_state(config).await {
        Ok(s) => s,
        Err(e @ (arbor::StartupError::Vault(_) | arbor::StartupError::Bus(_))) => {
            // A key problem is a configuration error: nothing was written.
            eprintln!("cannot start: {e}");
            return ExitCode::from(EXIT_CONFIG);
        }
        Err(e) => {
            eprintln!("cannot start: {e}");
            return ExitCode::FAILURE;
        }
    };
    let public_url = state.config.public_url();
    match state.accounts.open_setup().await {
        Ok(Some(token)) => {
            // The link goes to the terminal, never into the log: logs are shipped and kept.
            tracing::warn!("No administrator yet: the one-time setup link is printed on standard output.");
            println!(
                "No administrator yet. Open {public_url}/setup/{token} and sign in to become the administrator \
                 (this link works once; a new one is printed at each start until then), or run `arbor admin create`."
            );
        }
        Ok(None) => {}
        Err(e) => {
            eprintln!("cannot prepare the setup link: {e}");
            return ExitCode::FAILURE;
        }
    }
    let engine = state.engine.clone();
    let usage = state.usage.clone();
    let state_grace = state.config.server.shutdown_timeout_secs;
    let server = match arbor::serve(state, listener) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("cannot start: {e}");
            return ExitCode::FAILURE;
        }
    };
    let grace = std::time::Duration::from_secs(state_grace);
    arbor::stop_on_signals(&server, engine.clone(), grace);
    tracing::info!(%bind, %public_url, data_dir = %data_dir.display(), database = backend, "Arbor is listening");
    let stopped = server.await;
    match engine.interrupt_for_shutdown().await {
        Ok(0) => {}
        Ok(n) => {
            tracing::warn!(interrupted = n, "replies still being written at shutdown are marked interrupted")
        }
        Err(e) => tracing::error!(error = %e, "could not mark the live replies interrupted"),
    }
    // The usage rows of the last calls, still gathering for their batch.
    usage.flush().await;
    // MCP servers started by the agent go with us.
    engine.shutdown_mcp().await;
    match stopped {
        Ok(()) => {
            tracing::info!("stopped");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("server error: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn migrate(config: Config, action: MigrateAction) -> ExitCode {
    let db = match arbor::storage::connect(&config).await {
        Ok(db) => db,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let result = match action {
        MigrateAction::Up => arbor::storage::migrate_up(&db).await.map(|()| "migrations applied".to_string()),
        MigrateAction::Down { steps } => arbor::storage::migrate_down(&db, steps)
            .await
            .map(|()| format!("rolled back {steps} migration(s)")),
        MigrateAction::Status => arbor::storage::migration_status(&db).await.map(|rows| {
            rows.iter()
                .map(|(name, applied)| format!("{} {name}", if *applied { "applied" } else { "pending" }))
                .collect::<Vec<_>>()
                .join("\n")
        }),
    };
    report(result)
}

fn read_password(file: Option<PathBuf>) -> Result<String, String> {
    let raw = match file {
        Some(path) => {
            std::fs::read_to_string(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?
        }
        None => {
            let mut line = String::new();
            std::io::stdin().read_line(&mut line).map_err(|e| format!("cannot read the password: {e}"))?;
            line
        }
    };
    Ok(raw.trim_end_matches(['\n', '\r']).to_string())
}

/// Connects and brings the schema up to date, for commands that then work on the data.
async fn open_migrated(config: &Config) -> Result<arbor::storage::Db, ExitCode> {
    let db = arbor::storage::connect(config).await.map_err(|e| {
        eprintln!("{e}");
        ExitCode::FAILURE
    })?;
    arbor::storage::migrate_up(&db).await.map_err(|e| {
        eprintln!("{e}");
        ExitCode::FAILURE
    })?;
    Ok(db)
}

async fn admin(config: Config, action: AdminAction) -> ExitCode {
    let db = match open_migrated(&config).await {
        Ok(db) => db,
        Err(code) => return code,
    };
    use arbor::domain::accounts;
    let result = match action {
        AdminAction::Create { email, name, password_file } => match read_password(password_file) {
            Ok(password) => {
                let min = config.auth.min_password_length;
                accounts::Accounts::new(
                    db.clone(),
                    arbor::auth::passwords::Hasher::default(),
                    config.auth.clone(),
                )
                .create_local(&email, &name, &password, min, accounts::Role::Admin)
                .await
                .map(|u| format!("created administrator {}", u.email))
                .map_err(|e| e.to_string())
            }
            Err(e) => Err(e),
        },
        AdminAction::Token { email, name, scope, days } => cli_token(&db, &email, &name, &scope, days).await,
        AdminAction::Promote { email } => accounts::Accounts::new(
            db.clone(),
            arbor::auth::passwords::Hasher::default(),
            config.auth.clone(),
        )
        .promote_by_email(&email)
        .await
        .map(|u| format!("{} is now an administrator", u.email))
        .map_err(|e| match e {
            arbor::domain::DomainError::NotFound => format!("no user with the email {email}"),
            e => e.to_string(),
        }),
    };
    report(result)
}

/// `arbor admin token`: a new API token for the user with this email, printed once.
async fn cli_token(
    db: &arbor::storage::Db,
    email: &str,
    name: &str,
    scope: &str,
    days: Option<u32>,
) -> Result<String, String> {
    use arbor::domain::accounts::api_tokens;
    let scope = api_tokens::Scope::parse(scope)
        .ok_or_else(|| "--scope must be api, sessions, full or scim".to_string())?;
    let created = api_tokens::ApiTokens::new(db.clone())
        .issue_for_operator(email, name, scope, days)
        .await
        .map_err(|e| match e {
        arbor::domain::DomainError::NotFound => format!("no user with the email {email}"),
        other => other.to_string(),
    })?;
    Ok(created.token.expose().to_string())
}

/// Prints a command's outcome: the text on stdout and success, or the error on stderr.
fn report<E: std::fmt::Display>(result: Result<String, E>) -> ExitCode {
    match result {
        Ok(text) => {
            println!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}

async fn healthcheck(url: &str) -> ExitCode {
    let client = match arbor::tls::client_builder().timeout(std::time::Duration::from_secs(5)).build() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    match client.get(url).send().await {
        Ok(r) if r.status().is_success() => ExitCode::SUCCESS,
        Ok(r) => {
            eprintln!("{url}: HTTP {}", r.status());
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("{url}: {e}");
            ExitCode::FAILURE
        }
    }
}
