//! `anypath`: the native host of the anypath sandbox.

mod admission;
mod cli;
mod credentials;
mod envelope;
mod exec_file;
mod runner_path;
mod dataset_api;
mod interpreter_api;
mod interpreter_service;
mod mcp;
mod metrics;
mod reference;
mod run_events;
mod serve;
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
