//! A digest of every row of every table, to show that something changed nothing.

use std::collections::BTreeMap;

use sea_orm::{ConnectionTrait, DatabaseBackend, Statement};

/// Each table's rows, each row as text, sorted: compare two to see what changed.
pub async fn tables(db: &arbor::storage::Db) -> BTreeMap<String, Vec<String>> {
    let backend = db.get_database_backend();
    let names = match backend {
        DatabaseBackend::Sqlite => {
            "SELECT name AS t FROM sqlite_master WHERE type = 'table' \
                                    AND name NOT LIKE 'sqlite_%' ORDER BY name"
        }
        _ => "SELECT tablename AS t FROM pg_tables WHERE schemaname = current_schema() ORDER BY tablename",
    };
    let names: Vec<String> = db
        .query_all_raw(Statement::from_string(backend, names))
        .await
        .unwrap()
        .iter()
        .map(|r| r.try_get::<String>("", "t").unwrap())
        .collect();
    let mut out = BTreeMap::new();
    for table in names {
        let sql = match backend {
            DatabaseBackend::Sqlite => {
                let columns: Vec<String> = db
                    .query_all_raw(Statement::from_string(backend, format!("PRAGMA table_info(\"{table}\")")))
                    .await
                    .unwrap()
                    .iter()
                    .map(|r| r.try_get::<String>("", "name").unwrap())
                    .collect();
                let row =
                    columns.iter().map(|c| format!("quote(\"{c}\")")).collect::<Vec<_>>().join(" || '|' || ");
                format!("SELECT {row} AS r FROM \"{table}\"")
            }
            _ => format!("SELECT t::text AS r FROM \"{table}\" t"),
        };
        let mut rows: Vec<String> = db
            .query_all_raw(Statement::from_string(backend, sql))
            .await
            .unwrap()
            .iter()
            .map(|r| r.try_get::<Option<String>>("", "r").unwrap().unwrap_or_default())
            .collect();
        rows.sort();
        out.insert(table, rows);
    }
    out
}

/// What differs between two digests, table by table (empty when nothing does).
pub fn changes(before: &BTreeMap<String, Vec<String>>, after: &BTreeMap<String, Vec<String>>) -> Vec<String> {
    let mut out = Vec::new();
    for (table, rows) in after {
        let old = before.get(table).cloned().unwrap_or_default();
        let gone: Vec<&String> = old.iter().filter(|r| !rows.contains(r)).collect();
        let new: Vec<&String> = rows.iter().filter(|r| !old.contains(r)).collect();
        if !gone.is_empty() || !new.is_empty() {
            out.push(format!("{table}: was {gone:?}, now {new:?}"));
        }
    }
    out
}
