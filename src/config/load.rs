//! Loading: the embedded defaults, then the file, then ARBOR_* variables and *_FILE secrets, then
//! flags; validation that names the key at fault.

use super::*;

/// Overrides given on the command line.
#[derive(Debug, Default, Clone)]
pub struct CliOverrides {
    /// `--config FILE`.
    pub config_file: Option<PathBuf>,
    /// `--bind ADDR:PORT`.
    pub bind: Option<SocketAddr>,
    /// `--data-dir DIR`.
    pub data_dir: Option<PathBuf>,
}

/// A loaded configuration plus the warnings met while loading it.
#[derive(Debug)]
pub struct Loaded {
    /// The effective configuration.
    pub config: Config,
    /// Non-fatal findings, e.g. unknown `ARBOR_*` variables.
    pub warnings: Vec<String>,
}

/// Why the configuration could not be loaded; `Display` is the one line shown to the operator.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A key has a value of the wrong type or shape.
    #[error("configuration error: `{key}` ({source_name}): {message}")]
    BadValue { key: String, source_name: String, message: String },
    /// A key that Arbor does not know.
    #[error("configuration error: unknown key `{key}` in {source_name}")]
    UnknownKey { key: String, source_name: String },
    /// A file could not be read or parsed.
    #[error("configuration error: {0}")]
    File(String),
}

impl Config {
    /// The public base URL without a trailing slash.
    pub fn public_url(&self) -> String {
        if self.server.public_url.is_empty() {
            format!("http://{}", self.server.bind)
        } else {
            self.server.public_url.trim_end_matches('/').to_string()
        }
    }

    /// Whether Arbor is reached over HTTPS (decides cookie flags).
    pub fn is_https(&self) -> bool {
        self.public_url().starts_with("https://")
    }

    /// The database URL, SQLite in the data directory when none is configured.
    pub fn database_url(&self) -> String {
        if self.database.url.is_empty() {
            format!("sqlite://{}?mode=rwc", self.data_dir.join("arbor.db").display())
        } else {
            self.database.url.clone()
        }
    }

    /// Whether local email-and-password accounts are enabled.
    pub fn local_accounts_enabled(&self) -> bool {
        match self.auth.local_accounts {
            Toggle::On => true,
            Toggle::Off => false,
            Toggle::Auto => self.oidc.issuer.is_empty(),
        }
    }

    /// The configuration as TOML with secrets replaced, for `arbor check-config`.
    pub fn to_redacted_toml(&self) -> String {
        let mut shown = self.clone();
        shown.database.url = redact_url(&self.database.url);
        shown.bus.url = redact_url(&self.bus.url);
        if !shown.smtp.password.is_empty() {
            shown.smtp.password = "****".into();
        }
        if !shown.oidc.client_secret.is_empty() {
            shown.oidc.client_secret = "****".into();
        }
        if !shown.metrics.token.is_empty() {
            shown.metrics.token = "****".into();
        }
        for provider in shown.llm.providers.values_mut() {
            if !provider.api_key.is_empty() {
                provider.api_key = "****".into();
            }
        }
        toml::to_string_pretty(&shown).unwrap_or_else(|e| format!("# could not render: {e}\n"))
    }

    /// Checks that go beyond types: each names its key.
    fn validate(&self) -> Result<(), (String, String)> {
        let bad = |key: &str, msg: &str| Err((key.to_string(), msg.to_string()));
        let url = &self.server.public_url;
        if !url.is_empty() {
            match reqwest::Url::parse(url) {
                Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => {}
                _ => {
                    return bad("server.public_url", "must be an http:// or https:// URL, or empty");
                }
            }
        }
        let db = &self.database.url;
        let db_ok =
            db.is_empty() || ["postgres://", "postgresql://", "sqlite:"].iter().any(|p| db.starts_with(p));
        if !db_ok {
            return bad("database.url", "must start with postgres://, postgresql:// or sqlite:, or be empty");
        }
        if !self.metrics.bind.trim().is_empty() && self.metrics.separate_bind().is_none() {
            return bad("metrics.bind", "must be an address and port such as 127.0.0.1:9464, or empty");
        }
        if self.metrics.enabled
            && self.metrics.token.trim().is_empty()
            && self.metrics.separate_bind().is_none()
        {
            return bad("metrics.token", "metrics.enabled needs a token, or a separate metrics.bind address");
        }
        let bus = self.bus.url.trim();
        if !(bus.is_empty() || bus.starts_with("redis://") || bus.starts_with("rediss://")) {
            return bad("bus.url", "must start with redis:// or rediss://, or be empty");
        }
        if !bus.is_empty() && !db.starts_with("postgres") {
            return bad(
                "bus.url",
                "several instances need PostgreSQL: set database.url to a postgres:// URL",
            );
        }
        let prefix = &self.bus.prefix;
        let prefix_ok = (1..=64).contains(&prefix.len())
            && prefix.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b':' | b'_' | b'-'));
        if !prefix_ok {
            return bad("bus.prefix", "must be 1-64 letters, digits, ':', '_' or '-'");
        }
        if !(2..=300).contains(&self.bus.lease_secs) {
            return bad("bus.lease_secs", "must be between 2 and 300");
        }
        if self.database.max_connections > 1000 {
            return bad("database.max_connections", "must be between 0 (automatic) and 1000");
        }
        let ollama = self.llm.local_ollama_url.trim();
        if self.llm.detect_local_ollama && !(ollama.starts_with("http://") || ollama.starts_with("https://"))
        {
            return bad("llm.local_ollama_url", "must be an http:// or https:// URL");
        }
        if self.server.max_body_bytes < 1024 {
            return bad("server.max_body_bytes", "must be at least 1024");
        }
        if self.events.keepalive_secs == 0 || self.events.keepalive_secs > 300 {
            return bad("events.keepalive_secs", "must be between 1 and 300");
        }
        if self.agent.max_iterations == 0 || self.agent.max_iterations > 1000 {
            return bad("agent.max_iterations", "must be between 1 and 1000");
        }
        if !["suggest", "auto-edit", "full-auto"].contains(&self.agent.loosest_approval_mode.as_str()) {
            return bad("agent.loosest_approval_mode", "must be suggest, auto-edit or full-auto");
        }
        if self.agent.shell_timeout_secs == 0 || self.agent.fetch_timeout_secs == 0 {
            return bad("agent.shell_timeout_secs", "tool timeouts must be at least 1 second");
        }
        if let Some(bad_range) =
            self.agent.fetch_allow.iter().find(|r| crate::netguard::AllowedRanges::parse(r).is_err())
        {
            return Err((
                "agent.fetch_allow".into(),
                format!("{bad_range:?} is not an address range like 10.0.0.0/8"),
            ));
        }
        if self.files.max_file_mb == 0 || self.files.max_image_side < 64 {
            return bad(
                "files.max_file_mb",
                "files must be allowed at least 1 MiB and images 64 pixels a side",
            );
        }
        if !(10..=600_000).contains(&self.search.commit_interval_ms) {
            return bad("search.commit_interval_ms", "must be between 10 and 600000");
        }
        for (key, value) in [
            ("limits.runs_per_member", self.limits.runs_per_member),
            ("limits.streams_per_member", self.limits.streams_per_member),
            ("limits.uploads_per_member", self.limits.uploads_per_member),
        ] {
            if !(1..=10_000).contains(&value) {
                return bad(key, "must be between 1 and 10000");
            }
        }
        for (key, value) in [
            ("limits.import_max_mb", self.limits.import_max_mb),
            ("limits.import_document_mb", self.limits.import_document_mb),
        ] {
            if !(1..=65_536).contains(&value) {
                return bad(key, "must be between 1 and 65536");
            }
        }
        if self.events.channel_capacity < 16 {
            return bad("events.channel_capacity", "must be at least 16");
        }
        if self.auth.session_idle_minutes < 1 {
            return bad("auth.session_idle_minutes", "must be at least 1");
        }
        if self.auth.min_password_length < 8 {
            return bad("auth.min_password_length", "must be at least 8");
        }
        if self.auth.login_attempts_per_ip_per_minute == 0
            || self.auth.login_attempts_per_account_per_minute == 0
        {
            return bad(
                "auth.login_attempts_per_ip_per_minute",
                "sign-in limits must be at least 1 per minute",
            );
        }
        if !self.oidc.issuer.is_empty() {
            match reqwest::Url::parse(&self.oidc.issuer) {
                Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => {}
                _ => return bad("oidc.issuer", "must be an http(s) URL, or empty"),
            }
            if self.oidc.client_id.is_empty() {
                return bad("oidc.client_id", "is required when oidc.issuer is set");
            }
            let known = ["RS256", "RS384", "RS512", "PS256", "ES256", "ES384", "EdDSA"];
            if let Some(a) = self.oidc.signing_algs.iter().find(|a| !known.contains(&a.as_str())) {
                return Err((
                    "oidc.signing_algs".into(),
                    format!("{a:?} is not an accepted algorithm ({})", known.join(", ")),
                ));
            }
            if self.oidc.signing_algs.is_empty() {
                return bad("oidc.signing_algs", "must name at least one algorithm");
            }
        }
        if self.auth.invitation_valid_hours < 1 {
            return bad("auth.invitation_valid_hours", "must be at least 1");
        }
        if !self.smtp.host.is_empty() && self.smtp.from.parse::<lettre::message::Mailbox>().is_err() {
            return bad("smtp.from", "must be an address like \"Arbor <arbor@example.com>\"");
        }
        if self.auth.session_max_hours < 1 {
            return bad("auth.session_max_hours", "must be at least 1");
        }
        if self.data_dir.as_os_str().is_empty() {
            return bad("data_dir", "must not be empty");
        }
        if !(1..=50).contains(&self.llm.max_attempts) {
            return bad("llm.max_attempts", "must be between 1 and 50");
        }
        if !(10..=500).contains(&self.llm.coalesce_ms) {
            return bad("llm.coalesce_ms", "must be between 10 and 500");
        }
        if !(100..=1000).contains(&self.llm.flush_ms) {
            return bad("llm.flush_ms", "must be between 100 and 1000 (a crash may lose at most a second)");
        }
        if self.llm.idle_timeout_secs == 0 || self.llm.connect_timeout_secs == 0 {
            return bad("llm.idle_timeout_secs", "timeouts must be at least 1 second");
        }
        if !self.llm.default_model.is_empty() && !self.llm.default_model.contains('/') {
            return bad("llm.default_model", "must be \"<provider>/<model>\", e.g. \"openai/gpt-4.1-mini\"");
        }
        if !self.llm.image_model.is_empty() && !self.llm.image_model.contains('/') {
            return bad("llm.image_model", "must be \"<provider>/<model>\", e.g. \"openai/gpt-image-1\"");
        }
        for (name, p) in &self.llm.providers {
            let key = format!("llm.providers.{name}");
            if name.is_empty()
                || !name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
            {
                return Err((key, "provider names use lowercase letters, digits, '-' and '_'".into()));
            }
            if p.kind == ProviderKind::OpenAiCompatible && p.base_url.is_empty() {
                return Err((
                    format!("{key}.base_url"),
                    "an openai_compatible provider needs a base_url".into(),
                ));
            }
            if !p.base_url.is_empty() {
                match reqwest::Url::parse(&p.base_url) {
                    Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => {}
                    _ => return Err((format!("{key}.base_url"), "must be an http(s) URL".into())),
                }
            }
        }
        if let Err(e) = tracing_subscriber::EnvFilter::try_new(&self.log.level) {
            return Err(("log.level".into(), format!("not a valid filter: {e}")));
        }
        Ok(())
    }
}

/// Replaces the password of a URL with `****`.
pub fn redact_url(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut u) if u.password().is_some() => {
            let _ = u.set_password(Some("****"));
            u.to_string()
        }
        _ => url.to_string(),
    }
}

/// Every dotted key path that the defaults define.
pub(super) fn known_keys() -> BTreeSet<String> {
    fn walk(prefix: &str, dict: &Dict, out: &mut BTreeSet<String>) {
        for (k, v) in dict {
            let path = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
            match v {
                Value::Dict(_, inner) => walk(&path, inner, out),
                _ => {
                    out.insert(path);
                }
            }
        }
    }
    let mut out = BTreeSet::new();
    if let Ok(data) = Figment::from(Toml::string(DEFAULT_TOML)).data() {
        for dict in data.values() {
            walk("", dict, &mut out);
        }
    }
    out
}

/// Maps `ARBOR_SERVER__BIND` to `server.bind`, if it is a known key.
pub(super) fn env_key(rest: &str, known: &BTreeSet<String>) -> Option<String> {
    if let Some((_, key)) = ENV_ALIASES.iter().find(|(name, _)| *name == rest) {
        return Some((*key).to_string());
    }
    let path = rest.split("__").map(str::to_ascii_lowercase).collect::<Vec<_>>().join(".");
    if known.contains(&path) {
        return Some(path);
    }
    // Provider tables are named by the operator: llm.providers.<name>.<field>.
    match path.split('.').collect::<Vec<_>>().as_slice() {
        ["llm", "providers", name, field] if !name.is_empty() && PROVIDER_FIELDS.contains(field) => {
            Some(path)
        }
        _ => None,
    }
}

/// Loads the configuration from the defaults, an optional file, the given environment and flags.
pub fn load(cli: &CliOverrides, env: &[(String, String)]) -> Result<Loaded, ConfigError> {
    let known = known_keys();
    let mut warnings = Vec::new();
    let mut figment = Figment::from(Toml::string(DEFAULT_TOML));

    let file = cli
        .config_file
        .clone()
        .or_else(|| env.iter().find(|(k, _)| k == "ARBOR_CONFIG").map(|(_, v)| PathBuf::from(v)));
    let file_name = file.as_ref().map(|f| format!("config file {}", f.display()));
    if let Some(path) = &file {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::File(format!("cannot read config file {}: {e}", path.display())))?;
        toml::from_str::<toml::Value>(&text).map_err(|e| {
            ConfigError::File(format!("config file {}: {}", path.display(), one_line(&e.to_string())))
        })?;
        figment = figment.merge(Toml::string(&text));
    }

    // Which variable set which key, so an error can name it.
    let mut sources: BTreeMap<String, String> = BTreeMap::new();
    for (name, value) in env {
        let Some(rest) = name.strip_prefix("ARBOR_") else {
            continue;
        };
        if NON_CONFIG_VARS.contains(&name.as_str()) {
            continue;
        }
        let (key, raw) = if let Some(key) = env_key(rest, &known) {
            (key, value.clone())
        } else if let Some(key) = rest.strip_suffix("_FILE").and_then(|r| env_key(r, &known)) {
            let content = std::fs::read_to_string(value).map_err(|e| ConfigError::BadValue {
                key: key.clone(),
                source_name: format!("environment variable {name}"),
                message: format!("cannot read file {value}: {e}"),
            })?;
            (key, content.trim_end_matches(['\n', '\r']).to_string())
        } else {
            warnings
                .push(format!("ignoring unknown environment variable {name}: it is not an Arbor setting"));
            continue;
        };
        let parsed: Value =
            raw.parse().unwrap_or_else(|_: std::convert::Infallible| Value::from(raw.clone()));
        figment = figment.merge(Serialized::default(&key, parsed));
        sources.insert(key, format!("environment variable {name}"));
    }

    if let Some(bind) = cli.bind {
        figment = figment.merge(Serialized::default("server.bind", bind.to_string()));
        sources.insert("server.bind".into(), "--bind".into());
    }
    if let Some(dir) = &cli.data_dir {
        figment = figment.merge(Serialized::default("data_dir", dir.display().to_string()));
        sources.insert("data_dir".into(), "--data-dir".into());
    }

    let source_of = |key: &str| -> String {
        sources.get(key).cloned().or_else(|| file_name.clone()).unwrap_or_else(|| "built-in default".into())
    };

    let config: Config = figment.extract().map_err(|err| {
        let err = err
            .into_iter()
            .next()
            .unwrap_or_else(|| figment::Error::from("invalid configuration".to_string()));
        let mut path = err.path.join(".");
        match &err.kind {
            figment::error::Kind::UnknownField(field, _) => {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(field);
                ConfigError::UnknownKey {
                    source_name: file_name.clone().unwrap_or_else(|| "configuration".into()),
                    key: path,
                }
            }
            kind => ConfigError::BadValue {
                source_name: source_of(&path),
                key: path,
                message: one_line(&kind.to_string()),
            },
        }
    })?;
    config.validate().map_err(|(key, message)| ConfigError::BadValue {
        source_name: source_of(&key),
        key,
        message,
    })?;
    Ok(Loaded { config, warnings })
}

/// Joins a multi-line message into one line.
pub(super) fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Resolves a possibly relative data directory against the current directory.
pub fn absolute(dir: &Path) -> PathBuf {
    if dir.is_absolute() {
        dir.to_path_buf()
    } else {
        std::env::current_dir().map(|cwd| cwd.join(dir)).unwrap_or_else(|_| dir.to_path_buf())
    }
}
