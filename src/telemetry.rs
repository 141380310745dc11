//! Tracing setup: pretty in a terminal, JSON when configured; `RUST_LOG` wins over the config.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

use crate::config::{LogConfig, LogFormat};

/// Installs the global subscriber once; later calls (tests) are no-ops.
pub fn init(log: &LogConfig) {
    let filter = std::env::var("RUST_LOG")
        .ok()
        .and_then(|v| EnvFilter::try_new(v).ok())
        .or_else(|| EnvFilter::try_new(&log.level).ok())
        .unwrap_or_else(|| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    let result = match log.format {
        LogFormat::Json => builder.json().flatten_event(true).with_current_span(true).try_init(),
        LogFormat::Pretty => builder.with_ansi(std::io::stderr().is_terminal()).compact().try_init(),
    };
    // Already installed (e.g. by a test harness): keep the first one.
    let _ = result;
}
