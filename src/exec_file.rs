//! `anypath exec FILE`: run one file and print its report, for debugging blocks.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use anypath_sandbox::ExecRequest;
use serde_json::value::RawValue;

use crate::cli::RunnerArgs;

/// Runs `file` with `ctx` and `collections` (`NAME=FILE`); exit code 0 only on success.
pub async fn run(file: PathBuf, ctx: &str, collections: &[String], runner: &RunnerArgs) -> anyhow::Result<ExitCode> {
    let code = std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
    let mut request = ExecRequest::new(code);
    request.ctx = RawValue::from_string(ctx.to_owned()).context("--ctx is not valid JSON")?;
    for spec in collections {
        let (name, path) = spec.split_once('=').context("--collection takes NAME=FILE")?;
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?;
        let documents = RawValue::from_string(text).with_context(|| format!("{path} is not valid JSON"))?;
        request.collections.push(anypath_sandbox::CollectionInput::whole(name, 0, documents));
    }
    let sandbox = runner.start_cold().await?;
    let report = sandbox.execute(request).await;
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(if report.outcome.is_ok() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
