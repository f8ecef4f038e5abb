//! `cargo xtask bench`: build, then the sandbox's in-process benchmark
//! (`anypath-bench`) and the app's ([`crate::app_bench`]), or only a part.

use std::process::Command;

use anyhow::bail;

use crate::app_bench::AppSections;
use crate::steps::{Built, build_all, root, run, step};

/// `cargo xtask bench --help`.
pub const USAGE: &str = "usage: cargo xtask bench [--only app|rest] [--no-build] [anypath-bench options]

Builds everything, then prints the figures of every section:
  the sandbox    in process, against a python3 baseline (target/release/anypath-bench;
                 its options pass through, e.g. --only <text> runs only the
                 scenarios whose name contains it)
  app            the whole request path: anypath's REST face beside json-server
                 (the pinned 0.17.4) on the same records and requests, under
                 anypath up (SQLite, Redis) and spin up (with SPIN_BIN or spin on
                 PATH), a cached LLM plan against a model stub; then the code
                 interpreter over HTTP, MCP, E2B's SDK and Jupyter, and fair share

options:
  --only app     only the app section
  --only rest    only the app section's REST rows (beside json-server) and
                 Redis's round trips per request
  --no-build     use what the last build left in target/ (target/release/anypath,
                 target/python-runner/runner.wasm, the Spin components) instead
                 of building first
  -h, --help     this text";

/// What the command line asks for.
struct Options {
    /// `None`: every section; else only this part of the app's.
    only: Option<AppSections>,
    build: bool,
    help: bool,
    /// For `anypath-bench`.
    passed: Vec<String>,
}

fn parse(args: &[String]) -> Options {
    let mut options = Options { only: None, build: true, help: false, passed: Vec::new() };
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--no-build" => options.build = false,
            "-h" | "--help" => options.help = true,
            "--only" => match args.next().map(String::as_str) {
                Some("app") => options.only = Some(AppSections::All),
                Some("rest") => options.only = Some(AppSections::Rest),
                Some(other) => options.passed.extend(["--only".to_owned(), other.to_owned()]),
                None => options.passed.push(arg.clone()),
            },
            _ => options.passed.push(arg.clone()),
        }
    }
    options
}

/// Runs the command.
pub fn run_bench(args: &[String]) -> anyhow::Result<()> {
    let options = parse(args);
    if options.help {
        println!("{USAGE}");
        return Ok(());
    }
    if options.only.is_some() && !options.passed.is_empty() {
        bail!("{:?} would go to anypath-bench, which --only app and --only rest skip\n\n{USAGE}", options.passed.join(" "));
    }
    let built = if options.build { build_all()? } else { prebuilt()? };
    if options.only.is_none() {
        step("running the benchmarks");
        run(Command::new(root().join("target/release/anypath-bench"))
            .arg("--runner")
            .arg(&built.runner)
            .arg("--python-data")
            .arg(&built.python_data)
            .arg("--baseline-venv")
            .arg(root().join("target/bench-venv"))
            .args(&options.passed))?;
    }
    let redis_server = crate::redis_server::ensure()?;
    crate::app_bench::run_app_bench(&built.binary, &built.runner, &redis_server, options.only.unwrap_or(AppSections::All))
}

/// What an earlier build left in `target/`, for `--no-build`.
fn prebuilt() -> anyhow::Result<Built> {
    let target = root().join("target");
    let built = Built {
        runner: target.join("python-runner/runner.wasm"),
        python_data: target.join("python-data"),
        binary: target.join("release/anypath"),
    };
    for path in [&built.binary, &built.runner] {
        if !path.is_file() {
            bail!("--no-build, but {} is missing: run cargo xtask build first", path.display());
        }
    }
    Ok(built)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn sections_are_taken_and_the_rest_passes_to_anypath_bench() {
        let app = parse(&args("--only app --no-build"));
        assert!(app.only == Some(AppSections::All) && !app.build && app.passed.is_empty());
        let rest = parse(&args("--only rest"));
        assert!(rest.only == Some(AppSections::Rest) && rest.build);
        let scenario = parse(&args("--only interpreter --iterations 10"));
        assert!(scenario.only.is_none());
        assert_eq!(scenario.passed, args("--only interpreter --iterations 10"));
        assert!(parse(&args("-h")).help);
    }
}
