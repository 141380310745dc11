//! The example compose files (deploy/) parse, refer only to services, volumes, secrets and
//! configs they define (and to files that exist), and give Arbor only settings that exist: each
//! Arbor service's environment (`arbor`, `arbor-1`, …), with compose's `${…}` filled in, passes
//! `arbor check-config` without a warning. A proxy trusted for `X-Forwarded-For` is at the fixed
//! address the Arbor services trust; the cluster file's instances share their settings but not
//! their search indexes, and its proxy balances across all of them with event streams unbuffered.

use yaml_rust2::{Yaml, YamlLoader};

use crate::cli::arbor;

const FILES: &[&str] = &["deploy/compose.yml", "deploy/compose.postgres.yml", "deploy/compose.cluster.yml"];

fn path_of(file: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(file)
}

fn load(file: &str) -> Yaml {
    let path = path_of(file);
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

/// An Arbor server's service: `arbor`, or one of several instances `arbor-1`, `arbor-2`, ….
fn is_arbor(service: &str) -> bool {
    service == "arbor" || service.starts_with("arbor-")
}

/// The mount target of a short-syntax volume whose source is `source`.
fn mount_target(service: &Yaml, source: &str) -> Option<String> {
    service["volumes"].as_vec().into_iter().flatten().find_map(|m| {
        let mount = scalar(m);
        let mut parts = mount.split(':');
        (parts.next() == Some(source)).then(|| parts.next().unwrap_or_default().to_string())
    })
}

/// The service's environment, with compose's `${…}` filled in.
fn environment(file: &str, name: &str, service: &Yaml) -> Vec<(String, String)> {
    service["environment"]
        .as_hash()
        .unwrap_or_else(|| panic!("{file}: {name}'s environment as a map"))
        .iter()
        .map(|(k, v)| (scalar(k), interpolate(&scalar(v))))
        .collect()
}

#[test]
fn the_compose_files_parse_and_use_only_settings_that_exist() {
    for file in FILES {
        let doc = load(file);
        let dir_of_file = path_of(file).parent().unwrap().to_path_buf();
        let services = keys(&doc["services"]);
        let (volumes, secrets, configs) =
            (keys(&doc["volumes"]), keys(&doc["secrets"]), keys(&doc["configs"]));
        let arbors: Vec<&String> = services.iter().filter(|s| is_arbor(s)).collect();
        assert!(!arbors.is_empty(), "{file}: an arbor service");
        for name in &services {
            let service = &doc["services"][name.as_str()];
            for dep in names(&service["depends_on"]) {
                assert!(services.contains(&dep), "{file}: {name} depends on unknown {dep}");
            }
            for secret in names(&service["secrets"]) {
                assert!(secrets.contains(&secret), "{file}: {name} uses undefined secret {secret}");
            }
            for config in names(&service["configs"]) {
                assert!(configs.contains(&config), "{file}: {name} uses undefined config {config}");
            }
            for mount in service["volumes"].as_vec().into_iter().flatten() {
                let source = scalar(mount).split(':').next().unwrap_or_default().to_string();
                if source.starts_with('.') {
                    // A file or folder of this repository (a proxy's configuration, say).
                    assert!(dir_of_file.join(&source).exists(), "{file}: {name} mounts missing {source}");
                } else if !source.starts_with('/') {
                    assert!(volumes.contains(&source), "{file}: {name} mounts undefined volume {source}");
                }
            }
        }
        for config in &configs {
            let config = &doc["configs"][config.as_str()];
            if let Some(source) = config["file"].as_str() {
                assert!(dir_of_file.join(source).exists(), "{file}: config file {source} is missing");
            } else {
                assert!(
                    config["content"].as_str().is_some_and(|c| !c.trim().is_empty()),
                    "{file}: {config:?}"
                );
            }
        }

        // Every Arbor service's environment is valid configuration, with nothing unknown.
        let mut environments = Vec::new();
        for name in &arbors {
            let env = environment(file, name, &doc["services"][name.as_str()]);
            assert!(env.iter().all(|(k, _)| k.starts_with("ARBOR_")), "{file}: {name}: {env:?}");
            let dir = tempfile::tempdir().unwrap();
            let out = arbor(dir.path()).arg("check-config").envs(env.clone()).output().unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "{file}: {name}: {stderr}");
            assert!(
                !stderr.contains("WARN") && !stderr.to_lowercase().contains("unknown"),
                "{file}: {name}: {stderr}"
            );
            let shown = String::from_utf8_lossy(&out.stdout).into_owned();
            if *file != "deploy/compose.yml" {
                assert!(shown.contains("url = \"postgres://arbor:****@db:5432/arbor\""), "{file}: {shown}");
                assert!(shown.contains("bind = \"0.0.0.0:9464\""), "{file}: {shown}");
            }
            if *file == "deploy/compose.cluster.yml" {
                assert!(shown.contains("@redis:6379"), "{file}: {name} is on the bus: {shown}");
            }

            // The proxy that Arbor believes is the one at that fixed address.
            if let Some((_, trusted)) = env.iter().find(|(k, _)| k == "ARBOR_AUTH__TRUSTED_PROXIES") {
                let proxy = &doc["services"]["proxy"]["networks"]["default"]["ipv4_address"];
                let address = proxy.as_str().unwrap_or_else(|| panic!("{file}: the proxy's fixed address"));
                assert!(
                    trusted.contains(&format!("\"{address}\"")),
                    "{file}: {name} trusts {trusted}, not {address}"
                );
            }
            environments.push(env);
        }

        if *file == "deploy/compose.cluster.yml" {
            assert!(arbors.len() >= 2, "{file}: several instances");
            assert!(environments.windows(2).all(|w| w[0] == w[1]), "{file}: the instances' settings differ");
            // Each instance's search index on a volume of its own, where its settings put it.
            let index_dir = environments[0]
                .iter()
                .find_map(|(k, v)| (k == "ARBOR_SEARCH__INDEX_DIR").then_some(v.as_str()))
                .unwrap_or_else(|| panic!("{file}: ARBOR_SEARCH__INDEX_DIR"));
            let mut index_volumes = Vec::new();
            for name in &arbors {
                let service = &doc["services"][name.as_str()];
                let own = names(&doc["volumes"])
                    .into_iter()
                    .find(|v| mount_target(service, v).as_deref() == Some(index_dir))
                    .unwrap_or_else(|| panic!("{file}: {name} has no volume at {index_dir}"));
                assert!(!index_volumes.contains(&own), "{file}: {own} is mounted by two instances");
                index_volumes.push(own);
                assert!(mount_target(service, "arbor-data").as_deref() == Some("/data"), "{file}: {name}");
                let deps = names(&service["depends_on"]);
                assert!(
                    ["db", "redis"].iter().all(|d| deps.iter().any(|x| x == d)),
                    "{file}: {name}: {deps:?}"
                );
            }
            let redis = &doc["services"]["redis"];
            assert!(scalar(&redis["healthcheck"]["test"][2]) == "ping", "{file}: redis-cli ping");
            let caddyfile = doc["configs"]["caddyfile"]["content"].as_str().expect("an inline Caddyfile");
            let upstreams = format!(
                "reverse_proxy {}",
                arbors.iter().map(|a| format!("{a}:8080")).collect::<Vec<_>>().join(" ")
            );
            for needed in
                [upstreams.as_str(), "lb_policy round_robin", "health_uri /readyz", "flush_interval -1", "h2"]
            {
                assert!(caddyfile.contains(needed), "{file}: the Caddyfile lacks `{needed}`");
            }
        }
    }
}
