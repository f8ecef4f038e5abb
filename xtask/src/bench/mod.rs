//! `cargo xtask bench`: build, then the sandbox's in-process benchmark
//! (`anypath-bench`), the app's ([`crate::bench::app`]) and the fleet's
//! ([`crate::bench::fleet`]) and the density section
//! ([`crate::bench::density`]), or only a part; the scale section
//! ([`crate::bench::scale`]) runs only when asked for (the options:
//! [`crate::flags::Bench`]).

mod app;
mod density;
mod fair;
mod fleet;
mod fleet_many;
mod hosts;
mod javascript;
mod json_server;
mod jupyter;
mod llm_stub;
mod machine;
mod many_sessions;
mod oha;
mod rest;
mod scale;
mod table;

use std::process::Command;

use anyhow::bail;
use clap::CommandFactory;

use crate::build::{Built, build_all};
use crate::flags::{AppSections, Bench};
use crate::shell::{root, run, step};

/// Runs the command.
pub fn run_bench(options: &Bench) -> anyhow::Result<()> {
    let (only, fleet_only, scale_only, passed) = (options.sections(), options.fleet_only(), options.scale_only(), options.passed());
    let density_only = options.density_only();
    if (only.is_some() || fleet_only || scale_only || density_only) && !passed.is_empty() {
        let mut xtask = crate::flags::Xtask::command();
        xtask.build();
        let usage = xtask.find_subcommand_mut("bench").map(|bench| bench.render_long_help().to_string()).unwrap_or_default();
        bail!("{:?} would go to anypath-bench, which --only app, --only rest, --only fleet, --only density and --only scale skip\n\n{usage}", passed.join(" "));
    }
    let built = if options.build() { build_all()? } else { prebuilt()? };
    if scale_only {
        return crate::bench::scale::run_scale_bench(&built.binary, &built.runner, options.scale_sessions());
    }
    if density_only {
        return crate::bench::density::run_density_bench(&built.binary, &built.runner, options.density_sessions());
    }
    if fleet_only {
        let redis_server = crate::redis_server::ensure()?;
        return crate::bench::fleet::run_fleet_bench(&built.binary, &built.runner, &redis_server, options.fleet_sessions());
    }
    let javascript_only = only == Some(AppSections::Javascript);
    if only.is_none() || javascript_only {
        step("running the benchmarks");
        let section: &[&str] = if javascript_only { &["--only", "javascript"] } else { &[] };
        run(Command::new(root().join("target/release/anypath-bench"))
            .args(section)
            .arg("--runner")
            .arg(&built.runner)
            .arg("--python-data")
            .arg(&built.python_data)
            .arg("--baseline-venv")
            .arg(root().join("target/bench-venv"))
            .arg("--javascript")
            .arg(root().join(crate::javascript_runtime::JAVASCRIPT_RUNTIME))
            .args(&passed))?;
    }
    let redis_server = crate::redis_server::ensure()?;
    crate::bench::app::run_app_bench(&built.binary, &built.runner, &redis_server, only.unwrap_or(AppSections::All))?;
    if only.is_none() {
        crate::bench::fleet::run_fleet_bench(&built.binary, &built.runner, &redis_server, options.fleet_sessions())?;
        crate::bench::density::run_density_bench(&built.binary, &built.runner, options.density_sessions())?;
    }
    Ok(())
}

/// What an earlier build left in `target/`, for `--no-build`.
fn prebuilt() -> anyhow::Result<Built> {
    let target = root().join("target");
    let built = Built {
        runner: target.join("python-runner/runner.wasm"),
        python_data: target.join("python-data"),
        binary: target.join("release/anypath"),
        wheelhouse: root().join(crate::runtime_wheels::WHEELHOUSE_DIR),
    };
    for path in [&built.binary, &built.runner] {
        if !path.is_file() {
            bail!("--no-build, but {} is missing: run cargo xtask build first", path.display());
        }
    }
    Ok(built)
}
