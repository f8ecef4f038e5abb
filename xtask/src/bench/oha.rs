//! oha, the load generator every row under load is measured with: a
//! pinned version from crates.io, installed into `target/tools` on first
//! use, run to a JSON report that must show every request succeeded, and
//! its latencies and rate printed as one row.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use serde_json::Value;

use crate::shell::{cargo_command, root, run, step};

/// The oha release the rows are measured with.
pub(crate) const OHA_VERSION: &str = "1.16.0";
/// Requests per row of the code interpreter and of fair share.
pub(crate) const REQUESTS: &str = "2000";

/// The path of oha, installing it when it is not there yet.
pub(crate) fn ensure_oha() -> anyhow::Result<PathBuf> {
    let tools = root().join("target/tools");
    let oha = tools.join("bin/oha");
    if !oha.is_file() {
        step(&format!("installing the load generator oha {OHA_VERSION} into target/tools (once)"));
        run(cargo_command()
            .args(["install", "--locked", "--quiet", "oha", "--version", OHA_VERSION, "--root"])
            .arg(&tools))?;
    }
    Ok(oha)
}

/// `requests` requests to `url` from `concurrency` clients (`extra`: oha's
/// method, headers and body), failing unless every answer was a 2xx.
pub(crate) fn load(oha: &Path, url: &str, requests: &str, concurrency: &str, extra: &[&str]) -> anyhow::Result<Value> {
    let output = Command::new(oha)
        .args(["--no-tui", "--output-format", "json", "-n", requests, "-c", concurrency])
        .args(extra)
        .arg(url)
        .output()
        .context("running oha")?;
    if !output.status.success() {
        bail!("oha failed: {}", String::from_utf8_lossy(&output.stderr));
    }
    let result: Value = serde_json::from_slice(&output.stdout).context("oha's JSON output")?;
    let codes = &result["statusCodeDistribution"];
    let bad: u64 = codes
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(code, _)| !code.starts_with('2'))
        .filter_map(|(_, n)| n.as_u64())
        .sum();
    if bad > 0 || result["summary"]["successRate"].as_f64() != Some(1.0) {
        bail!("{url}: not every request succeeded: {codes}");
    }
    Ok(result)
}

/// One printed row: name, clients, p50, p99 and requests per second.
pub(crate) fn report(name: &str, concurrency: &str, result: &Value) {
    let ms = |key: &str| result["latencyPercentiles"][key].as_f64().unwrap_or(f64::NAN) * 1e3;
    let rps = result["summary"]["requestsPerSec"].as_f64().unwrap_or(f64::NAN);
    println!("{name:<34} {concurrency:>5} {:>7.1} ms {:>7.1} ms {rps:>10.0}", ms("p50"), ms("p99"));
}
