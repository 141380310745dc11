//! The example compose files (deploy/) parse, refer only to services, volumes and secrets they
//! define, and give Arbor only settings that exist: each Arbor service's environment, with
//! compose's `${…}` filled in, passes `arbor check-config` without a warning.

use yaml_rust2::{Yaml, YamlLoader};

use crate::cli::arbor;

const FILES: &[&str] = &["deploy/compose.yml", "deploy/compose.postgres.yml"];

fn load(file: &str) -> Yaml {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    let mut docs = YamlLoader::load_from_str(&text).unwrap_or_else(|e| panic!("{file}: {e}"));
    assert_eq!(docs.len(), 1, "{file}: one document");
    docs.remove(0)
}

fn keys(y: &Yaml) -> Vec<String> {
    y.as_hash().map(|h| h.keys().filter_map(|k| k.as_str().map(str::to_string)).collect()).unwrap_or_default()
}

/// A list of names or a map keyed by name (both forms compose takes).
fn names(y: &Yaml) -> Vec<String> {
    match y {
        Yaml::Array(items) => items
            .iter()
            .filter_map(|i| {
                i.as_str().map(str::to_string).or_else(|| i["source"].as_str().map(str::to_string))
            })
            .collect(),
        other => keys(other),
    }
}

/// Compose's `${NAME}`, `${NAME:-default}` and `${NAME:?message}`: a default where there is one,
/// else a stand-in value, as an operator's `.env` would give.
fn interpolate(value: &str) -> String {
    let mut out = String::new();
    let mut rest = value;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        let end = rest[at..].find('}').map(|e| at + e).expect("closed ${");
        let inner = &rest[at + 2..end];
        match inner.split_once(":-") {
            Some((_, default)) => out.push_str(default),
            None => out.push_str("example"),
        }
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    out
}

fn scalar(y: &Yaml) -> String {
    match y {
        Yaml::String(s) | Yaml::Real(s) => s.clone(),
        Yaml::Integer(i) => i.to_string(),
        Yaml::Boolean(b) => b.to_string(),
        _ => String::new(),
    }
}

#[test]
fn the_compose_files_parse_and_use_only_settings_that_exist() {
    for file in FILES {
        let doc = load(file);
        let services = keys(&doc["services"]);
        let (volumes, secrets) = (keys(&doc["volumes"]), keys(&doc["secrets"]));
        assert!(services.iter().any(|s| s == "arbor"), "{file}: an arbor service");
        for name in &services {
            let service = &doc["services"][name.as_str()];
            for dep in names(&service["depends_on"]) {
                assert!(services.contains(&dep), "{file}: {name} depends on unknown {dep}");
            }
            for secret in names(&service["secrets"]) {
                assert!(secrets.contains(&secret), "{file}: {name} uses undefined secret {secret}");
            }
            for mount in service["volumes"].as_vec().into_iter().flatten() {
                let source = scalar(mount).split(':').next().unwrap_or_default().to_string();
                if !source.starts_with('.') && !source.starts_with('/') {
                    assert!(volumes.contains(&source), "{file}: {name} mounts undefined volume {source}");
                }
            }
        }

        // The Arbor service's environment is valid configuration, with nothing unknown.
        let arbor_service = &doc["services"]["arbor"];
        let env: Vec<(String, String)> = arbor_service["environment"]
            .as_hash()
            .expect("environment as a map")
            .iter()
            .map(|(k, v)| (scalar(k), interpolate(&scalar(v))))
            .collect();
        assert!(env.iter().all(|(k, _)| k.starts_with("ARBOR_")), "{file}: {env:?}");
        let dir = tempfile::tempdir().unwrap();
        let out = arbor(dir.path()).arg("check-config").envs(env.clone()).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{file}: {stderr}");
        assert!(!stderr.contains("WARN") && !stderr.to_lowercase().contains("unknown"), "{file}: {stderr}");
        let shown = String::from_utf8_lossy(&out.stdout);
        if *file == "deploy/compose.postgres.yml" {
            assert!(shown.contains("url = \"postgres://arbor:****@db:5432/arbor\""), "{shown}");
            assert!(shown.contains("bind = \"0.0.0.0:9464\""), "{shown}");
        }
    }
}
