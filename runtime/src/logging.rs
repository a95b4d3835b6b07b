//! Log output: tracing to stderr, `RUST_LOG` respected, compact lines or JSON.

use tracing_subscriber::EnvFilter;

use crate::config::LogFormat;

/// Installs the global subscriber. Default level `info` (access log included).
pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let colours = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(colours);
    match format {
        LogFormat::Compact => builder.compact().with_target(false).init(),
        LogFormat::Json => builder.json().flatten_event(true).init(),
    }
}
