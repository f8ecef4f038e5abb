//! The `javascript` runtime over HTTP, on `anypath up`'s sandbox listener:
//! a new session and its first result (`POST /v1/sessions/{id}/run` with
//! `runtime: "javascript"`), beside the same for the default Python
//! runtime, and a one-line cell in a warm JavaScript session under `oha`.

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, bail};
use serde_json::{Value, json};

use crate::bench::oha::{REQUESTS, load, report};

/// New sessions each runtime's row opens, one after another.
const NEW_SESSIONS: usize = 100;

/// Prints the rows against the sandbox listener at `sandbox`.
pub fn rows(oha: &Path, sandbox: &str) -> anyhow::Result<()> {
    let client = reqwest::blocking::Client::new();
    let first_result = |runtime: &str, prefix: &str, code: &str, expected: &str| -> anyhow::Result<(f64, f64)> {
        let mut millis = Vec::with_capacity(NEW_SESSIONS);
        for i in 0..NEW_SESSIONS {
            let began = Instant::now();
            let report: Value = client
                .post(format!("{sandbox}/v1/sessions/{prefix}-{i}/run"))
                .header("x-api-key", "bench-a")
                .json(&json!({ "code": code, "runtime": runtime }))
                .send()?
                .json()
                .context("a run's report")?;
            millis.push(began.elapsed().as_secs_f64() * 1e3);
            if report["exit_code"] != 0 || report["results"][0]["text"] != expected {
                bail!("the first run of a {runtime} session answered {report}");
            }
        }
        for i in 0..NEW_SESSIONS {
            client.delete(format!("{sandbox}/v1/sessions/{prefix}-{i}")).header("x-api-key", "bench-a").send()?;
        }
        millis.sort_by(f64::total_cmp);
        let at = |q: f64| millis[((millis.len() as f64 - 1.0) * q).round() as usize];
        Ok((at(0.5), at(0.99)))
    };
    println!("\njavascript sessions over HTTP (anypath up's sandbox listener), c=1");
    println!("{:<48} {:>10} {:>10}", "request", "p50", "p99");
    let (js_p50, js_p99) = first_result("javascript", "js-new", "1 + 1", "2")?;
    println!("{:<48} {js_p50:>8.2}ms {js_p99:>8.2}ms", format!("new javascript session + first result ({NEW_SESSIONS})"));
    let (py_p50, py_p99) = first_result("python", "py-new", "1 + 1", "2")?;
    println!("{:<48} {py_p50:>8.2}ms {py_p99:>8.2}ms", format!("new python session + first result ({NEW_SESSIONS})"));

    let run_url = format!("{sandbox}/v1/sessions/bench-js/run");
    let opened: Value = client.post(&run_url).header("x-api-key", "bench-a").json(&json!({ "code": "var x = 0", "runtime": "javascript" })).send()?.json()?;
    if opened["exit_code"] != 0 {
        bail!("the warm-up run failed: {opened}");
    }
    let body = r#"{"code":"x += 1"}"#;
    let warm = load(oha, &run_url, REQUESTS, "1", &["-m", "POST", "-T", "application/json", "-d", body, "-H", "x-api-key: bench-a"])?;
    report("POST /v1/sessions/{id}/run, warm javascript", "1", &warm);
    println!("goal: a new javascript session + first result <= 2 ms p50 over HTTP; javascript / python at p50 = {:.2}x", js_p50 / py_p50);
    Ok(())
}
