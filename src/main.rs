//! `anypath`: the native host of the anypath sandbox.
//!
//! The sandbox service itself is the `anypath-service` crate; this binary
//! holds the command line, `anypath up`, and the one-off commands.

mod app_gate;
mod cli;
mod exec_file;
mod reference;
mod runner_path;
mod session_sharing;
mod up;

use clap::Parser;

fn main() -> std::process::ExitCode {
    let cli = cli::Cli::parse();
    init_logging();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("anypath: cannot start the async runtime: {error}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(cli::run(cli)) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("anypath: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// JSON log lines on stderr; `RUST_LOG` filters them.
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .json()
        .flatten_event(true)
        .with_current_span(false)
        .with_writer(std::io::stderr)
        .with_env_filter(filter)
        .init();
}
