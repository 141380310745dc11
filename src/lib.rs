//! Arbor: a self-hosted, multi-user server for LLM agents with branching sessions.
//!
//! `main.rs` is only the CLI; this crate builds the state and the route table, and the
//! integration tests use exactly the same code.

pub mod auth;
pub mod backup;
pub mod blobs;
pub mod bus;
pub mod config;
pub mod domain;
pub mod events;
#[cfg(test)]
mod future_size;
pub mod gateway;
pub mod index;
pub mod limits;
pub mod mail;
pub mod metrics;
pub mod model;
pub mod netguard;
pub mod prompting;
pub mod providers;
pub mod secret;
pub mod state;
pub mod storage;
pub mod telemetry;
pub mod tls;
pub mod tools;
pub mod vault;
pub mod web;

use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use actix_web::{HttpServer, web as aweb};

use crate::config::Config;
use crate::events::RunRegistry;
use crate::state::AppState;

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    /// The database could not be opened, checked or migrated.
    #[error("{0}")]
    Storage(#[from] storage::StorageError),
    /// The OIDC settings could not be used.
    #[error("{0}")]
    Oidc(String),
    /// The provider settings or the model catalog could not be used.
    #[error("{0}")]
    Providers(String),
    /// Recovering interrupted replies failed.
    #[error("{0}")]
    Recovery(String),
    /// The mail settings could not be turned into a transport.
    #[error("{0}")]
    Mail(String),
    /// The vault's master key is missing, unreadable or not the database's.
    #[error("{0}")]
    Vault(#[from] vault::VaultError),
    /// The bus to the other instances could not be opened.
    #[error("{0}")]
    Bus(#[from] bus::BusError),
    /// The listener could not be bound or the server failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// The agent's settings: the sandbox found on this machine, and the paths no tool process may
/// read (the data directory, the configuration file, the master key file).
async fn agent_settings(config: &Config, env: &[(String, String)]) -> domain::agent::AgentSettings {
    let sandbox = tools::Sandbox::detect().await;
    let mut hidden = vec![config.data_dir.clone()];
    for (name, value) in env {
        if matches!(name.as_str(), "ARBOR_MASTER_KEY_FILE" | "ARBOR_CONFIG") && !value.is_empty() {
            hidden.push(std::path::PathBuf::from(value));
        }
    }
    hidden.push(std::path::PathBuf::from("/etc/arbor"));
    // Relative paths name nothing inside the sandbox: make them absolute.
    let hidden = hidden.into_iter().map(|p| std::path::absolute(&p).unwrap_or(p)).collect();
    domain::agent::AgentSettings::new(&config.agent, sandbox, hidden)
}

/// Connects, migrates and assembles the state once.
pub async fn build_state(config: Config) -> Result<AppState, StartupError> {
    let renderer = config.agent.prompt_renderer.trim();
    prompting::set_renderer((!renderer.is_empty()).then(|| std::path::PathBuf::from(renderer)));
    // Before anything records: queue gauges count up and down from their first item.
    if config.metrics.enabled {
        metrics::install();
    }
    let (db, queries) = storage::connect_counted(&config).await?;
    storage::migrate_up(&db).await?;
    let env = vault::handover::process_env();
    let vault = vault::Vault::open(&db, &env, &config.data_dir).await?;
    let bus = bus::open(&config.bus.url, &config.bus.prefix, storage::instance_id()).await?;
    let runs = RunRegistry::new(config.events.channel_capacity)
        .with_owner_limit(config.limits.runs_per_member)
        .with_bus(bus.clone());
    let oidc = auth::oidc::Oidc::new(&config.oidc, &config.public_url())
        .map_err(|e| StartupError::Oidc(e.to_string()))?
        .map(Arc::new);
    let mailer = mail::Mailer::from_config(&config.smtp).map_err(|e| StartupError::Mail(e.to_string()))?;
    let mut providers = domain::providers::Providers::from_config(&config.llm)
        .map_err(|e| StartupError::Providers(e.to_string()))?;
    if config.llm.detect_local_ollama {
        providers.detect_local_ollama(config.llm.local_ollama_url.trim().trim_end_matches('/')).await;
    }
    let mut providers = providers.with_vault(db.clone(), vault.clone());
    // Several instances: limits counted in Redis, cooldowns and reloads announced on the bus.
    let counters = match bus.is_shared() {
        true => Some(
            bus::limits::SharedCounters::connect(config.bus.url.trim(), &config.bus.prefix)
                .await
                .map_err(|e| bus::BusError::Unreachable(e.to_string()))?,
        ),
        false => None,
    };
    if let Some(counters) = &counters {
        providers = providers.with_instances(counters.clone(), bus.clone());
    }
    providers.reload().await.map_err(|e| StartupError::Providers(e.to_string()))?;
    let pacing = domain::runs::Pacing {
        coalesce: Duration::from_millis(config.llm.coalesce_ms),
        flush: Duration::from_millis(config.llm.flush_ms),
    };
    let blobs = blobs::BlobStore::new(config.files.blob_dir(&config.data_dir))
        .map_err(|e| StartupError::Io(std::io::Error::other(format!("blob store: {e}"))))?;
    let config_files = config.files.clone();
    let search = domain::search::SearchService::start(
        db.clone(),
        &config.search.dir(&config.data_dir),
        Duration::from_millis(config.search.commit_interval_ms),
    )
    .await
    .map_err(|e| StartupError::Io(std::io::Error::other(format!("search index: {e}"))))?;
    let mut file_limits = file_settings(&config_files);
    if let Some(counters) = &counters {
        file_limits.reservations = domain::files::Reservations::shared(counters.clone());
    }
    let files = domain::files::Files::new(db.clone(), blobs.clone(), file_limits);
    let providers = Arc::new(providers);
    domain::providers::listen_to_instances(providers.clone());
    domain::fresh::share_changes(&bus);
    let quota_holds = match &counters {
        Some(counters) => domain::admin::quota_holds::QuotaHolds::shared(counters.clone()),
        None => domain::admin::quota_holds::QuotaHolds::default(),
    };
    let quotas = domain::admin::quotas::QuotaGate::new(db.clone(), quota_holds);
    let admin = domain::admin::AdminConsole::new(db.clone(), vault.clone(), providers.clone());
    let mut engine = domain::runs::RunEngine::new(db.clone(), runs.clone(), providers, pacing)
        .with_quotas(quotas.clone())
        .with_files(files.clone())
        .with_search(search.clone())
        .with_data_dir(config.data_dir.clone())
        .with_title_inference(config.llm.infer_titles)
        .with_agent(agent_settings(&config, &env).await)
        .with_mcp(Arc::new(domain::mcp::runtime::McpRuntime::new(
            db.clone(),
            vault.clone(),
            tools::mcp::McpManager::new(
                Duration::from_secs(config.agent.mcp_call_timeout_secs),
                Duration::from_secs(config.agent.mcp_start_timeout_secs),
            ),
            netguard::AllowedRanges::parse(&config.llm.member_base_url_allow.join(" ")).unwrap_or_default(),
        )));
    if bus.is_shared() {
        engine = engine.with_lease(Duration::from_secs(config.bus.lease_secs));
    }
    // Replies that were streaming when the process died: keep their text, offer "Continue".
    let interrupted = engine.recover().await.map_err(|e| StartupError::Recovery(e.to_string()))?;
    if interrupted > 0 {
        tracing::warn!(interrupted, "replies cut off by the last shutdown are marked interrupted");
    }
    engine.keep_lease();
    let usage = storage::usage_writer::UsageWriter::start(db.clone());
    let transfers = domain::transfer::Transfers::new(
        db.clone(),
        blobs.clone(),
        files.settings().clone(),
        search.clone(),
        transfer_scratch(&config.data_dir, bus.is_shared()),
        domain::transfer::ImportLimits {
            max_upload: config.limits.import_max_mb.saturating_mul(1024 * 1024),
            max_document: config.limits.import_document_mb.saturating_mul(1024 * 1024),
        },
    )
    .map_err(|e| StartupError::Io(std::io::Error::other(format!("transfer scratch folder: {e}"))))?;
    let sessions = domain::sessions::Sessions::new(db.clone());
    let access = domain::teams::shares::AccessChanges::linked(bus);
    let teams =
        domain::teams::Teams::new(db.clone(), access.clone(), blobs.clone(), files.settings().clone());
    let keys =
        domain::providers::user_keys::MemberKeys::new(db.clone(), vault.clone(), engine.providers().clone());
    let aliases = domain::providers::aliases::Aliases::new(db.clone());
    let agent = domain::agent::Agent::new(db.clone());
    let gateway =
        domain::gateway::Gateway::new(db.clone(), engine.providers().clone(), quotas, usage.clone());
    let scim = domain::scim::Directory::new(db.clone(), runs.clone(), access);
    let mcp = domain::mcp::McpServers::new(db.clone(), vault.clone());
    let deletions = domain::deletion::Deletions::new(
        sessions.clone(),
        runs.clone(),
        admin.clone(),
        search.clone(),
        files.clone(),
    );
    let passwords = auth::passwords::Hasher::default();
    let accounts = domain::accounts::Accounts::new(db.clone(), passwords, config.auth.clone());
    let streams = limits::MemberSlots::default();
    let operations = domain::operations::Operations::new(db.clone(), runs.clone(), streams.clone());
    let pages = domain::pages::Pages::new(domain::pages::PageSources {
        db: db.clone(),
        sessions: sessions.clone(),
        engine: engine.clone(),
        agent: agent.clone(),
        files: files.clone(),
        keys: keys.clone(),
        aliases: aliases.clone(),
        teams: teams.clone(),
        mcp: mcp.clone(),
        admin: admin.clone(),
        search: search.clone(),
        transfers: transfers.clone(),
    });
    Ok(AppState {
        config: Arc::new(config),
        db,
        templates: Arc::default(),
        runs,
        engine,
        mailer,
        oidc,
        login_limiter: counters.map(auth::ratelimit::RateLimiter::shared).unwrap_or_default(),
        accounts,
        streams,
        operations,
        uploads: limits::MemberSlots::default(),
        usage,
        vault,
        blobs,
        files,
        search,
        transfers,
        sessions,
        admin,
        deletions,
        queries,
        teams,
        mcp,
        scim,
        agent,
        gateway,
        keys,
        aliases,
        pages,
    })
}

/// Where exports and imports are spooled: `transfer` in the data directory, emptied at start.
/// Instances sharing a data directory each get a folder of their own there (a folder of an
/// instance gone for a day is removed).
fn transfer_scratch(data_dir: &std::path::Path, shared: bool) -> std::path::PathBuf {
    let root = data_dir.join("transfer");
    if !shared {
        return root;
    }
    let day = Duration::from_secs(86_400);
    for entry in std::fs::read_dir(&root).into_iter().flatten().flatten() {
        let old =
            entry.metadata().and_then(|m| m.modified()).is_ok_and(|t| t.elapsed().is_ok_and(|e| e > day));
        if old && entry.file_name().to_str().is_some_and(|n| uuid::Uuid::parse_str(n).is_ok()) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
    root.join(storage::instance_id().to_string())
}

/// Upload limits and image handling from the configuration.
pub fn file_settings(c: &config::FilesConfig) -> domain::files::FileSettings {
    domain::files::FileSettings {
        max_file_bytes: c.max_file_mb.saturating_mul(1024 * 1024),
        user_quota_bytes: c.user_quota_mb.saturating_mul(1024 * 1024),
        images: blobs::ImageLimits {
            resize: c.resize_images,
            max_side: c.max_image_side,
            thumb_side: 320,
            max_pixels: 50_000_000,
        },
        upload_ttl: Duration::from_secs(c.upload_ttl_hours.saturating_mul(3600)),
        gc_grace: Duration::from_secs(3600),
        reservations: domain::files::Reservations::default(),
    }
}

/// Starts serving on an already-bound listener; the returned server handles SIGTERM and Ctrl-C.
pub fn serve(state: AppState, listener: TcpListener) -> Result<actix_web::dev::Server, StartupError> {
    let workers = match state.config.server.workers {
        0 => std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        n => n,
    };
    let shutdown = state.config.server.shutdown_timeout_secs;
    let metrics_bind = state.config.metrics.separate_bind().filter(|_| state.config.metrics.enabled);
    let data = aweb::Data::new(state);
    if let Some(addr) = metrics_bind {
        let data = data.clone();
        let metrics = HttpServer::new(move || {
            actix_web::App::new()
                .app_data(data.clone())
                .app_data(web::extractors::MetricsListener)
                .route("/metrics", aweb::get().to(web::handlers::health::metrics))
        })
        .workers(1)
        .shutdown_timeout(1)
        .bind(addr)?
        .run();
        tokio::spawn(metrics);
    }
    let server = HttpServer::new(move || web::build_app(data.clone()))
        .workers(workers)
        // Signals are ours (`stop_on_signals`): the live replies end before the workers stop.
        .disable_signals()
        .shutdown_timeout(shutdown)
        .client_request_timeout(Duration::from_secs(30))
        // Streams are many small writes: without this, Nagle's algorithm holds the second write
        // until the client's delayed ACK (~40 ms) arrives.
        .tcp_nodelay(true)
        .listen(listener)?
        .run();
    Ok(server)
}

/// Stops `server` on SIGTERM or Ctrl-C. First every live reply ends itself as interrupted, with
/// its text and usage written and its page's stream closed (at most `grace`); only then does the
/// server stop taking requests and give the open ones `grace` to finish. Stopping the workers
/// first would drop the replies' tasks mid-write instead.
pub fn stop_on_signals(server: &actix_web::dev::Server, engine: domain::runs::RunEngine, grace: Duration) {
    let handle = server.handle();
    tokio::spawn(async move {
        shutdown_signal().await;
        let (live, left) = engine.stop_for_shutdown(grace).await;
        if live > 0 {
            tracing::info!(
                live,
                still_running = left,
                "stopping: the live replies were ended as interrupted"
            );
        }
        handle.stop(true).await;
    });
}

async fn shutdown_signal() {
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                term.recv().await;
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot listen for SIGTERM; only Ctrl-C stops the server");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = terminate => {}
    }
}
