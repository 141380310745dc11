use super::*;

fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

#[test]
fn defaults_load_and_match_the_documented_values() {
    let loaded = load(&CliOverrides::default(), &[]).unwrap();
    let c = loaded.config;
    assert_eq!(c.server.bind, "127.0.0.1:8080".parse().unwrap());
    assert_eq!(c.data_dir, PathBuf::from("./data"));
    assert_eq!(c.log.format, LogFormat::Pretty);
    assert!(c.database_url().starts_with("sqlite://./data/arbor.db"));
    assert!(loaded.warnings.is_empty());
}

#[test]
fn every_default_key_is_commented() {
    let lines: Vec<&str> = DEFAULT_TOML.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') || t.starts_with('[') {
            continue;
        }
        assert!(i > 0 && lines[i - 1].trim().starts_with('#'), "key without a comment: {t}");
    }
}

#[test]
fn env_overrides_nested_keys_and_alias() {
    let e = env(&[
        ("ARBOR_SERVER__BIND", "0.0.0.0:9000"),
        ("ARBOR_DATABASE_URL", "postgres://u:pw@h/db"),
        ("ARBOR_LOG__FORMAT", "json"),
    ]);
    let c = load(&CliOverrides::default(), &e).unwrap().config;
    assert_eq!(c.server.bind.port(), 9000);
    assert_eq!(c.database.url, "postgres://u:pw@h/db");
    assert_eq!(c.log.format, LogFormat::Json);
}

#[test]
fn cli_flags_win_over_env() {
    let e = env(&[("ARBOR_SERVER__BIND", "0.0.0.0:9000")]);
    let cli = CliOverrides { bind: Some("127.0.0.1:7000".parse().unwrap()), ..Default::default() };
    assert_eq!(load(&cli, &e).unwrap().config.server.bind.port(), 7000);
}

#[test]
fn file_variables_read_secrets() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("db");
    std::fs::write(&f, "postgres://a:s3cr3t-canary@h/db\n").unwrap();
    let e = env(&[("ARBOR_DATABASE__URL_FILE", f.to_str().unwrap())]);
    let c = load(&CliOverrides::default(), &e).unwrap().config;
    assert_eq!(c.database.url, "postgres://a:s3cr3t-canary@h/db");
    assert!(!c.to_redacted_toml().contains("s3cr3t-canary"));
    assert!(!format!("{c:?}").contains("s3cr3t-canary"));
}

#[test]
fn unknown_env_var_is_a_warning_naming_it() {
    let e = env(&[("ARBOR_SERVR__BIND", "x"), ("ARBOR_TEST_DATABASE_URL", "postgres://x")]);
    let loaded = load(&CliOverrides::default(), &e).unwrap();
    assert_eq!(loaded.warnings.len(), 1);
    assert!(loaded.warnings[0].contains("ARBOR_SERVR__BIND"));
}

#[test]
fn bad_env_value_names_key_and_variable() {
    let e = env(&[("ARBOR_SERVER__BIND", "not-an-address")]);
    let err = load(&CliOverrides::default(), &e).unwrap_err().to_string();
    assert!(err.contains("server.bind"), "{err}");
    assert!(err.contains("ARBOR_SERVER__BIND"), "{err}");
    assert!(!err.contains('\n'));
}

#[test]
fn unknown_key_in_file_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("arbor.toml");
    std::fs::write(&f, "[server]\nbnd = \"x\"\n").unwrap();
    let cli = CliOverrides { config_file: Some(f), ..Default::default() };
    let err = load(&cli, &[]).unwrap_err().to_string();
    assert!(err.contains("server.bnd"), "{err}");
}

#[test]
fn bad_value_in_file_names_key_and_file() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("arbor.toml");
    std::fs::write(&f, "[log]\nformat = \"xml\"\n").unwrap();
    let cli = CliOverrides { config_file: Some(f), ..Default::default() };
    let err = load(&cli, &[]).unwrap_err().to_string();
    assert!(err.contains("log.format") && err.contains("arbor.toml"), "{err}");
}

#[test]
fn validation_names_key() {
    let e = env(&[("ARBOR_SERVER__PUBLIC_URL", "ftp://x")]);
    let err = load(&CliOverrides::default(), &e).unwrap_err().to_string();
    assert!(err.contains("server.public_url"), "{err}");
    let e = env(&[("ARBOR_DATABASE__MAX_CONNECTIONS", "5000")]);
    let err = load(&CliOverrides::default(), &e).unwrap_err().to_string();
    assert!(err.contains("database.max_connections"), "{err}");
    for (var, key, value) in [
        ("ARBOR_LIMITS__RUNS_PER_MEMBER", "limits.runs_per_member", "0"),
        ("ARBOR_LIMITS__STREAMS_PER_MEMBER", "limits.streams_per_member", "100000"),
        ("ARBOR_LIMITS__UPLOADS_PER_MEMBER", "limits.uploads_per_member", "0"),
        ("ARBOR_LIMITS__IMPORT_MAX_MB", "limits.import_max_mb", "0"),
        ("ARBOR_LIMITS__IMPORT_DOCUMENT_MB", "limits.import_document_mb", "100000"),
        ("ARBOR_LLM__LOCAL_OLLAMA_URL", "llm.local_ollama_url", "127.0.0.1:11434"),
    ] {
        let err = load(&CliOverrides::default(), &env(&[(var, value)])).unwrap_err().to_string();
        assert!(err.contains(key), "{err}");
    }
    let err = load(&CliOverrides::default(), &env(&[("ARBOR_LIMITS__RUNS_PER_MEMBER", "-1")])).unwrap_err();
    assert!(err.to_string().contains("limits.runs_per_member"), "{err}");
    // Metrics are never public by accident: a token or a separate address is required.
    let err = load(&CliOverrides::default(), &env(&[("ARBOR_METRICS__ENABLED", "true")])).unwrap_err();
    assert!(err.to_string().contains("metrics.token"), "{err}");
    let err = load(&CliOverrides::default(), &env(&[("ARBOR_METRICS__BIND", "not an address")])).unwrap_err();
    assert!(err.to_string().contains("metrics.bind"), "{err}");
    let ok = env(&[("ARBOR_METRICS__ENABLED", "true"), ("ARBOR_METRICS__BIND", "127.0.0.1:9464")]);
    assert!(load(&CliOverrides::default(), &ok).is_ok());
    let redacted = load(&CliOverrides::default(), &env(&[("ARBOR_METRICS__TOKEN", "sekrit-token")]))
        .unwrap()
        .config
        .to_redacted_toml();
    assert!(!redacted.contains("sekrit-token"), "{redacted}");
}

#[test]
fn missing_config_file_is_an_error() {
    let cli = CliOverrides { config_file: Some("/nonexistent/arbor.toml".into()), ..Default::default() };
    assert!(load(&cli, &[]).unwrap_err().to_string().contains("/nonexistent/arbor.toml"));
}

#[test]
fn https_public_url_turns_on_secure_cookies() {
    let e = env(&[("ARBOR_SERVER__PUBLIC_URL", "https://arbor.example.com/")]);
    let c = load(&CliOverrides::default(), &e).unwrap().config;
    assert!(c.is_https());
    assert_eq!(c.public_url(), "https://arbor.example.com");
}

#[test]
fn the_bus_settings_are_checked_and_the_redis_password_is_never_shown() {
    let pg = ("ARBOR_DATABASE_URL", "postgres://arbor@db/arbor");
    let bus = |pairs: &[(&str, &str)]| load(&CliOverrides::default(), &env(pairs));
    let err = bus(&[pg, ("ARBOR_BUS__URL", "http://redis:6379")]).unwrap_err();
    assert!(err.to_string().contains("bus.url"), "{err}");
    let err = bus(&[("ARBOR_BUS__URL", "redis://redis:6379")]).unwrap_err();
    assert!(err.to_string().contains("PostgreSQL"), "several instances need PostgreSQL: {err}");
    for prefix in ["", "a b", "arbor/x", &"p".repeat(65)] {
        let err =
            bus(&[pg, ("ARBOR_BUS__URL", "redis://redis:6379"), ("ARBOR_BUS__PREFIX", prefix)]).unwrap_err();
        assert!(err.to_string().contains("bus.prefix"), "{prefix:?}: {err}");
    }
    for lease in ["0", "1", "301"] {
        let err = bus(&[pg, ("ARBOR_BUS__LEASE_SECS", lease)]).unwrap_err();
        assert!(err.to_string().contains("bus.lease_secs"), "{lease}: {err}");
    }
    let ok = bus(&[
        pg,
        ("ARBOR_BUS__URL", "redis://:s3cret-bus@redis:6379"),
        ("ARBOR_BUS__PREFIX", "team-a:arbor"),
    ])
    .unwrap()
    .config;
    assert_eq!(ok.bus.prefix, "team-a:arbor");
    let shown = ok.to_redacted_toml();
    assert!(!shown.contains("s3cret-bus") && shown.contains("redis://:****@redis:6379"), "{shown}");
    assert!(!format!("{ok:?}").contains("s3cret-bus"));
    assert!(bus(&[]).unwrap().config.bus.url.is_empty(), "one instance by default");
}

#[test]
fn automatic_pool_size_follows_the_cores_for_sqlite_only() {
    let mut db = load(&CliOverrides::default(), &[]).unwrap().config.database;
    assert_eq!(db.max_connections, 0, "the default is automatic");
    assert_eq!(db.pool_size(true, 1), 4);
    assert_eq!(db.pool_size(true, 2), 4);
    assert_eq!(db.pool_size(true, 6), 12);
    assert_eq!(db.pool_size(true, 64), 16);
    assert_eq!(db.pool_size(true, usize::MAX), 16);
    assert_eq!(db.pool_size(false, 2), 16);
    db.max_connections = 7;
    assert_eq!(db.pool_size(true, 2), 7);
    assert_eq!(db.pool_size(false, 2), 7);
}
