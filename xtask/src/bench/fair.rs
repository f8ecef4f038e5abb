//! Fair share under a flood, on every kind of request `anypath up` serves:
//! tenant B's requests alone, then while tenant A floods the same kind of
//! request with 32 clients. A's flood alone comes first, to show that a lone
//! tenant is served and never refused while capacity is free.

use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{Context, ensure};
use serde_json::Value;

use crate::bench::llm_stub::PLANNED_PATH;
use crate::bench::oha::{REQUESTS, load, report};
use crate::bench::rest::MEMBER;
use crate::shell::Running;

/// Clients of the flooding tenant.
const FLOOD_CLIENTS: &str = "32";
/// How long A floods alone, to count its answers.
const ALONE_FOR: &str = "5s";
/// How long A floods while B's requests run (B's requests end well before).
const FLOOD_FOR: &str = "25s";
/// Sessions A's interpreter flood spreads over (`flood-a-0` ... `flood-a-7`).
const FLOOD_SESSIONS: usize = 8;

/// One kind of request: where B sends it and where A floods it.
struct Kind {
    name: &'static str,
    /// B's URL.
    b_url: String,
    b_args: Vec<String>,
    /// A's URL, a `--rand-regex-url` pattern when `a_regex`.
    a_url: String,
    a_regex: bool,
    a_args: Vec<String>,
}

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

/// The three rows: REST planned by the rules (no sandbox), REST answered by
/// a cached plan's Python block (a fresh sandbox each), and interpreter runs.
fn kinds(base: &str, sandbox: Option<&str>) -> Vec<Kind> {
    let tenant = |name: &str| args(&["-H", &format!("x-session-id: bench-fair-{name}")]);
    let key = |name: &str| args(&["-H", &format!("x-api-key: bench-{name}")]);
    let run = args(&["-m", "POST", "-T", "application/json", "-d", r#"{"code":"x = 1"}"#]);
    let mut kinds = vec![
        Kind {
            name: "REST by rules: GET /members/1",
            b_url: format!("{base}/members/1"),
            b_args: tenant("b"),
            a_url: format!("{base}/members/1"),
            a_regex: false,
            a_args: tenant("a"),
        },
        Kind {
            name: "REST with a block: GET /members/oldest",
            b_url: format!("{base}{PLANNED_PATH}"),
            b_args: tenant("b"),
            a_url: format!("{base}{PLANNED_PATH}"),
            a_regex: false,
            a_args: tenant("a"),
        },
    ];
    if let Some(sandbox) = sandbox {
        kinds.push(Kind {
            name: "interpreter: POST /v1/sessions/{id}/run",
            b_url: format!("{sandbox}/v1/sessions/fair-b/run"),
            b_args: [run.clone(), key("b")].concat(),
            a_url: format!("{sandbox}/v1/sessions/flood-a-[0-{}]/run", FLOOD_SESSIONS - 1),
            a_regex: true,
            a_args: [run, key("a")].concat(),
        });
    }
    kinds
}

/// Each tenant's data: a record for the REST rows (the block's plan is
/// made on the first request and cached), sessions for the interpreter's.
fn prepare(base: &str, sandbox: Option<&str>) -> anyhow::Result<()> {
    let client = reqwest::blocking::Client::new();
    for tenant in ["a", "b"] {
        let response = client
            .post(format!("{base}/members/"))
            .header("x-session-id", format!("bench-fair-{tenant}"))
            .header("content-type", "application/json")
            .body(MEMBER)
            .send()?;
        ensure!(response.status() == 201, "creating tenant {tenant}'s record answered {}", response.status());
        let response = client.get(format!("{base}{PLANNED_PATH}")).header("x-session-id", format!("bench-fair-{tenant}")).send()?;
        ensure!(response.status() == 200, "tenant {tenant}'s planned path answered {}", response.status());
    }
    let Some(sandbox) = sandbox else { return Ok(()) };
    let sessions = std::iter::once(("b", "fair-b".to_owned())).chain((0..FLOOD_SESSIONS).map(|i| ("a", format!("flood-a-{i}"))));
    for (tenant, id) in sessions {
        let response = client
            .post(format!("{sandbox}/v1/sessions"))
            .header("x-api-key", format!("bench-{tenant}"))
            .json(&serde_json::json!({ "session_id": id }))
            .send()?;
        ensure!(response.status().is_success(), "creating session {id} answered {}", response.status());
    }
    Ok(())
}

/// A's flood, running for `duration`; its oha summary once it ends.
fn flood(oha: &Path, kind: &Kind, duration: &str) -> anyhow::Result<Running> {
    let mut command = Command::new(oha);
    command.args(["--no-tui", "--output-format", "json", "-z", duration, "-c", FLOOD_CLIENTS]).args(&kind.a_args);
    if kind.a_regex {
        command.arg("--rand-regex-url");
    }
    let child = command.arg(&kind.a_url).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().context("starting the flood")?;
    Ok(Running(child))
}

/// The flood's answers by status and its rate, once it ended.
fn flood_summary(flood: Running) -> anyhow::Result<(Value, f64)> {
    let output = flood.finish().context("the flood's figures")?;
    let result: Value = serde_json::from_slice(&output).unwrap_or_default();
    Ok((result["statusCodeDistribution"].clone(), result["summary"]["requestsPerSec"].as_f64().unwrap_or(f64::NAN)))
}

/// Runs the rows of every kind on the app at `base` (under `host`), the
/// interpreter's too when its sandbox listener takes the bench's API keys.
pub(crate) fn through_app(oha: &Path, host: &str, base: &str, sandbox: Option<&str>) -> anyhow::Result<()> {
    prepare(base, sandbox)?;
    println!("\nfair share on every kind of request ({host}): tenant B at c=1, {REQUESTS} requests per row, while tenant A floods the same kind with {FLOOD_CLIENTS} clients");
    println!("{:<34} {:>5} {:>10} {:>10} {:>10}", "request", "conc", "p50", "p99", "req/s");
    let ms = |result: &Value, key: &str| result["latencyPercentiles"][key].as_f64().unwrap_or(f64::NAN) * 1e3;
    for kind in kinds(base, sandbox) {
        // The last row's flood leaves requests in flight: let them end first.
        std::thread::sleep(std::time::Duration::from_secs(2));
        println!("{}", kind.name);
        let (alone_codes, alone_rate) = flood_summary(flood(oha, &kind, ALONE_FOR)?)?;
        println!("{:<34} {FLOOD_CLIENTS:>5} {:>10} {:>10} {alone_rate:>10.0}  answers: {alone_codes}", "  A alone", "", "");
        let b_args: Vec<&str> = kind.b_args.iter().map(String::as_str).collect();
        let alone = load(oha, &kind.b_url, REQUESTS, "1", &b_args)?;
        report("  B alone", "1", &alone);
        let running = flood(oha, &kind, FLOOD_FOR)?;
        std::thread::sleep(std::time::Duration::from_secs(2));
        let flooded = load(oha, &kind.b_url, REQUESTS, "1", &b_args)?;
        report("  B while A floods", "1", &flooded);
        let (codes, rate) = flood_summary(running)?;
        println!("{:<34} {FLOOD_CLIENTS:>5} {:>10} {:>10} {rate:>10.0}  answers: {codes}", "  A flooding beside B", "", "");
        println!(
            "  B's p50 while A floods: {:.2}x alone; p99 {:.1} ms (goals: within 2x, under 50 ms)",
            ms(&flooded, "p50") / ms(&alone, "p50"),
            ms(&flooded, "p99")
        );
    }
    Ok(())
}

/// Tenant B's trivial block alone, then while tenant A floods the sandbox
/// with 16 clients looping on blocks that never end.
pub(crate) fn endless_blocks(oha: &Path, sandbox: &str) -> anyhow::Result<()> {
    let url = format!("{sandbox}/v1/exec");
    let as_b = ["-m", "POST", "-T", "application/json", "-H", "x-api-key: bench-b", "-d", r#"{"code":"REPLY = {'status': 200}"}"#];
    println!("\nfair share: tenant B's trivial block, {REQUESTS} requests per row, c=1");
    println!("{:<34} {:>5} {:>10} {:>10} {:>10}", "request", "conc", "p50", "p99", "req/s");
    let alone = load(oha, &url, REQUESTS, "1", &as_b)?;
    report("B alone", "1", &alone);
    let flood = Command::new(oha)
        .args(["--no-tui", "-z", "120s", "-c", "16", "-m", "POST", "-T", "application/json"])
        .args(["-H", "x-api-key: bench-a", "-d", r#"{"code":"while True:\n    pass"}"#])
        .arg(&url)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("starting the flood")?;
    let flood = Running(flood);
    std::thread::sleep(std::time::Duration::from_secs(2));
    let flooded = load(oha, &url, REQUESTS, "1", &as_b)?;
    drop(flood);
    report("B while A floods (16 clients)", "1", &flooded);
    let ms = |result: &Value, key: &str| result["latencyPercentiles"][key].as_f64().unwrap_or(f64::NAN) * 1e3;
    println!(
        "B's p50 while A floods: {:.2}x its p50 alone; p99 {:.1} ms (targets: within 2x, under 50 ms)",
        ms(&flooded, "p50") / ms(&alone, "p50"),
        ms(&flooded, "p99")
    );
    Ok(())
}
