//! The layering rules of ARCHITECTURE.md, checked against the source tree: where queries live,
//! what the domain may import, that the code map names every folder, and file sizes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file below `dir`, recursively.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in fs::read_dir(&d).expect("readable source folder") {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// The code of a file without its comments (so a doc line may name a crate it does not use).
fn code_lines(path: &Path) -> Vec<(usize, String)> {
    let text = fs::read_to_string(path).expect("readable source file");
    text.lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.split("//").next().unwrap_or("").to_string()))
        .filter(|(_, l)| !l.trim().is_empty())
        .collect()
}

fn offenders(dirs: &[&str], needles: &[&str]) -> Vec<String> {
    let mut found = Vec::new();
    for dir in dirs {
        for file in rust_files(&root().join(dir)) {
            for (n, line) in code_lines(&file) {
                if needles.iter().any(|needle| line.contains(needle)) {
                    found.push(format!("{}:{n}: {}", file.display(), line.trim()));
                }
            }
        }
    }
    found
}

#[test]
fn queries_live_in_storage_only() {
    let found = offenders(&["src/domain", "src/web"], &["sea_orm", "sea_query", "sqlx::"]);
    assert!(found.is_empty(), "queries outside src/storage:\n{}", found.join("\n"));
}

/// Handlers reach the database only through the services built in the app state: no handler
/// passes the connection, and the web layer names no repository.
#[test]
fn the_web_layer_reaches_the_database_through_services_only() {
    let found = offenders(&["src/web"], &["state.db", ".db,", "(&db", "storage::repos"]);
    assert!(found.is_empty(), "the web layer uses the database directly:\n{}", found.join("\n"));
}

/// A handler never imports another handler: what two of them share lives in `src/web/`.
#[test]
fn handlers_import_no_other_handler() {
    let handlers = root().join("src/web/handlers");
    let mut needles = vec!["handlers::".to_string(), "super::super::".to_string()];
    for file in rust_files(&handlers) {
        if file.parent() == Some(handlers.as_path())
            && let Some(stem) = file.file_stem().and_then(|s| s.to_str())
        {
            needles.push(format!("super::{stem}::"));
        }
    }
    let needles: Vec<&str> = needles.iter().map(String::as_str).collect();
    let found: Vec<String> = offenders(&["src/web/handlers"], &needles)
        .into_iter()
        .filter(|line| !line.contains("/mod.rs:"))
        .collect();
    assert!(found.is_empty(), "handlers importing handlers:\n{}", found.join("\n"));
}

/// Rows cross into the domain as the value types of `src/model`, never as SeaORM entities.
#[test]
fn no_entity_type_is_named_outside_storage() {
    let found = offenders(&["src/domain", "src/web", "src/model"], &["storage::entities", "entities::"]);
    assert!(found.is_empty(), "entity types named outside src/storage:\n{}", found.join("\n"));
}

/// No public repository function takes or returns an entity row: what crosses out of storage
/// is a `model` type (entities stay the tables' shapes, private to storage).
#[test]
fn repositories_hand_out_model_types_only() {
    let mut found = Vec::new();
    for file in rust_files(&root().join("src/storage/repos")) {
        let code: Vec<String> = code_lines(&file).into_iter().map(|(_, l)| l).collect();
        let code = code.join("\n");
        let mut rest = code.as_str();
        while let Some(at) = rest.find("pub async fn ").or_else(|| rest.find("pub fn ")) {
            let signature = &rest[at..];
            let end = signature.find('{').unwrap_or(signature.len());
            let signature = &signature[..end];
            if signature.contains("::Model") || signature.contains("ActiveModel") {
                found.push(format!(
                    "{}: {}",
                    file.display(),
                    signature.split_whitespace().collect::<Vec<_>>().join(" ")
                ));
            }
            rest = &rest[at + end..];
        }
    }
    assert!(found.is_empty(), "repositories handing out entity rows:\n{}", found.join("\n"));
}

#[test]
fn the_domain_knows_nothing_of_http_or_templates() {
    let found = offenders(&["src/domain"], &["actix_web", "actix_web_lab", "tera::", "use tera"]);
    assert!(found.is_empty(), "the domain imports the web layer:\n{}", found.join("\n"));
    let found = offenders(&["src/domain"], &["crate::web"]);
    assert!(found.is_empty(), "the domain imports the web layer:\n{}", found.join("\n"));
}

#[test]
fn storage_and_the_value_types_do_not_import_the_domain() {
    let found = offenders(&["src/storage", "src/model"], &["crate::domain", "crate::web"]);
    assert!(found.is_empty(), "storage depends on the domain:\n{}", found.join("\n"));
}

#[test]
fn the_code_map_names_every_folder() {
    let map = fs::read_to_string(root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md at the top level");
    let mut missing = Vec::new();
    let mut stack = vec![root().join("src")];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).expect("readable source folder") {
            let path = entry.expect("directory entry").path();
            if !path.is_dir() {
                continue;
            }
            let rel = path.strip_prefix(root()).expect("inside the repository").display().to_string();
            // A folder that only holds a file's unit tests (`foo/tests.rs`) is part of `foo.rs`.
            let only_tests = fs::read_dir(&path)
                .expect("readable folder")
                .all(|e| e.map(|e| e.file_name() == "tests.rs").unwrap_or(false));
            if !only_tests && !map.contains(&format!("`{rel}/`")) {
                missing.push(rel);
            }
            stack.push(path);
        }
    }
    missing.sort();
    assert!(missing.is_empty(), "ARCHITECTURE.md does not name these folders (as `src/x/`): {missing:?}");
}

#[test]
fn no_source_file_is_two_concerns() {
    // About 600 lines of code; unit tests live in sibling `tests.rs` files and do not count.
    const LIMIT: usize = 650;
    let mut long = Vec::new();
    for file in rust_files(&root().join("src")) {
        if file.file_name().is_some_and(|n| n == "tests.rs") {
            continue;
        }
        let text = fs::read_to_string(&file).expect("readable source file");
        let code = text.split("\n#[cfg(test)]\nmod tests {").next().unwrap_or("");
        let lines = code.lines().count();
        if lines > LIMIT {
            long.push(format!("{} ({lines} lines)", file.display()));
        }
    }
    assert!(long.is_empty(), "files over {LIMIT} lines of code:\n{}", long.join("\n"));
}

/// SECURITY.md 10: every template is autoescaped (`.html`), and each `| safe` in them takes only
/// sanitizer output or markup built by escaping code: the rendered markdown (ammonia), the
/// search snippet (text escaped, `<mark>` added) and the usage charts (every label escaped, see
/// `web::charts` tests). A new `| safe` fails here until it is added with its reason.
#[test]
fn every_safe_filter_takes_sanitizer_output_only() {
    let allowed = [
        ("partials/_message.html", "m.html"),
        // The same markdown rendering, for a summary card (a summary is the model's markdown).
        ("partials/_message.html", "m.html"),
        // And for a finished task's summary card (written by the model, or the user's words).
        ("partials/_message.html", "m.html"),
        ("partials/_search_hit.html", "h.snippet_html"),
        ("partials/_admin_usage.html", "chart_tokens"),
        ("partials/_admin_usage.html", "chart_cost"),
        ("partials/_admin_usage.html", "chart_users"),
        ("partials/_admin_usage.html", "chart_models"),
    ];
    let templates = root().join("templates");
    let mut stack = vec![templates.clone()];
    let mut found = Vec::new();
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).expect("readable templates folder") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let rel = path.strip_prefix(&templates).expect("inside").display().to_string();
            assert!(rel.ends_with(".html"), "{rel}: templates must end in .html to be autoescaped");
            let text = fs::read_to_string(&path).expect("readable template");
            for (at, _) in text.match_indices("safe") {
                let open = text[..at].rfind("{{").unwrap_or(0);
                let close = text[..at].rfind("}}").map_or(0, |c| c + 2);
                if open < close || !text[open..at].contains('|') {
                    continue; // not inside an expression's filter
                }
                let variable = text[open + 2..at].split('|').next().unwrap_or("").trim().to_string();
                found.push((rel.clone(), variable));
            }
        }
    }
    for (file, variable) in &found {
        assert!(
            allowed.iter().any(|(f, v)| f == file && v == variable),
            "{file}: `{variable} | safe` is not known sanitizer output"
        );
    }
    assert_eq!(found.len(), allowed.len(), "every allowed `| safe` is still there: {found:?}");
}
