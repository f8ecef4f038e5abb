//! The `javascript` runtime's rows: a new session and its first result, a
//! warm one-line cell, what an idle live session adds to the process's
//! `Pss`, hibernating and resuming a session holding about 10 MB of
//! objects, a fork and its child's first run; beside them, the native
//! baseline `node -e 'console.log(1)'`.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use anypath_interpreter::{Interpreter, InterpreterConfig, StateOrigin};
use anypath_sandbox::{CellRequest, LimitOverrides, SessionRuntime};
use hdrhistogram::Histogram;

use crate::interpreter::{code, ok, row, time};
use crate::show;

/// Base of the links artifacts carry.
const BASE: &str = "http://127.0.0.1:3001";
/// About 10 MB of objects: 60,000 small objects with a string each.
const TEN_MB: &str = "const objs = Array.from({ length: 60000 }, (_, i) => ({ i, s: String(i).repeat(3) }))";
/// Idle live sessions whose `Pss` is measured together.
const IDLE_SESSIONS: usize = 100;
/// Runs of the native baseline.
const NODE_RUNS: usize = 30;

/// Every row, `iterations` times each (fewer for the heavier ones).
pub async fn run(javascript: &SessionRuntime, iterations: usize) -> anyhow::Result<()> {
    let root = tempfile::tempdir()?;
    let mut config = InterpreterConfig::new(root.path());
    // Every session of these rows stays live: the budget is not what they measure.
    config.session_memory_bytes = u64::MAX;
    let interpreter = std::sync::Arc::new(Interpreter::new(vec![javascript.clone()], config).context("starting the interpreter")?);
    let heavy = iterations.clamp(10, 200);
    println!();
    println!("javascript sessions (QuickJS): {iterations} warm runs, {heavy} of the others");
    println!("{:<48} {:>10} {:>10}", "operation", "p50", "p99");

    let first = time(heavy, |i| {
        let interpreter = &interpreter;
        async move { has_value(interpreter.runs().run_python("bench", &format!("new-{i}"), code("1 + 1"), BASE).await?, "2") }
    })
    .await?;
    row("javascript: new session + first result", &first);
    for i in 0..heavy {
        interpreter.sessions().close("bench", &format!("new-{i}")).await?;
    }

    ok(interpreter.runs().run_python("bench", "warm", code("var x = 0"), BASE).await?)?;
    let warm = time(iterations, |_| {
        let interpreter = &interpreter;
        async move { ok(interpreter.runs().run_python("bench", "warm", code("x += 1"), BASE).await?) }
    })
    .await?;
    row("javascript: warm one-line cell", &warm);

    let before = pss_bytes();
    for i in 0..IDLE_SESSIONS {
        ok(interpreter.runs().run_python("bench", &format!("idle-{i}"), code("var x = 1"), BASE).await?)?;
    }
    let per_idle = before.zip(pss_bytes()).map(|(before, after)| after.saturating_sub(before) / IDLE_SESSIONS as u64);
    println!("{:<48} {:>10}", format!("javascript: Pss per idle live session ({IDLE_SESSIONS})"), per_idle.map_or("n/a".to_owned(), |b| format!("{:.2} MiB", b as f64 / (1 << 20) as f64)));

    let home = tempfile::tempdir()?;
    let mut session = javascript.live_instance(Some(home.path().to_path_buf()), &LimitOverrides::default());
    cell(&mut session, TEN_MB).await?;
    let memory = session.memory_bytes();
    let (mut hibernate, mut resume) = (Histogram::<u64>::new(3)?, Histogram::<u64>::new(3)?);
    let mut image_bytes = 0;
    for _ in 0..iterations.clamp(5, 50) {
        let began = Instant::now();
        let image = session.hibernate().await?.context("a live instance")?;
        hibernate.record(began.elapsed().as_nanos() as u64)?;
        image_bytes = image.len();
        session.resume_with(image);
        let began = Instant::now();
        let report = session.run(CellRequest { code: "objs.length".into(), ..CellRequest::default() }).await;
        resume.record(began.elapsed().as_nanos() as u64)?;
        if report.state != StateOrigin::Resumed || report.error.is_some() {
            bail!("the JavaScript session did not resume: {report:?}");
        }
    }
    row("javascript: hibernate, ~10 MB of objects", &hibernate);
    row("javascript: resume + a one-line run, same", &resume);
    println!("{:<48} {:>10.1} MiB (instance {:.1} MiB)", "javascript: state image, same", image_bytes as f64 / (1 << 20) as f64, memory as f64 / (1 << 20) as f64);

    ok(interpreter.runs().run_python("bench", "parent", code(TEN_MB), BASE).await?)?;
    let mut pair = Histogram::<u64>::new(3)?;
    for i in 0..iterations.clamp(5, 100) {
        let began = Instant::now();
        interpreter.sessions().fork("bench", "parent", &format!("child-{i}")).await?;
        let report = interpreter.runs().run_python("bench", &format!("child-{i}"), code("objs.length"), BASE).await?;
        pair.record(began.elapsed().as_nanos() as u64)?;
        has_value(report, "60000")?;
    }
    row("javascript: fork + the child's first one-line run", &pair);

    match node_baseline() {
        Ok(node) => {
            row("baseline: node -e 'console.log(1)'", &node);
            let ratio = |ours: &Histogram<u64>| node.value_at_quantile(0.5) as f64 / ours.value_at_quantile(0.5) as f64;
            println!("ratio: node -e p50 / javascript new session + first result p50 = {:.1}x; / warm cell p50 = {:.0}x", ratio(&first), ratio(&warm));
        }
        Err(error) => println!("baseline: node -e skipped ({error:#})"),
    }
    println!(
        "goals: new session + first result <= 2 ms over HTTP (the app rows), warm cell <= 50 us, idle Pss <= 1 MiB, hibernate / resume of ~10 MB <= 15 ms; warm p50 {}",
        show(Duration::from_nanos(warm.value_at_quantile(0.5)))
    );
    Ok(())
}

/// The run's value is `expected` (its `text/plain`), with no error.
fn has_value(report: anypath_interpreter::RunReport, expected: &str) -> anyhow::Result<()> {
    let shown = report.cell.results.first().map(|r| r.text.clone());
    anyhow::ensure!(report.cell.error.is_none() && shown.as_deref() == Some(expected), "expected {expected}, got {:?} {:?}", shown, report.cell.error);
    Ok(())
}

async fn cell(session: &mut anypath_sandbox::LiveInstance, code: &str) -> anyhow::Result<()> {
    let report = session.run(CellRequest { code: code.into(), ..CellRequest::default() }).await;
    match report.error {
        None => Ok(()),
        Some(e) => bail!("run failed: {e}"),
    }
}

/// The process's proportional set size (`Pss` of `smaps_rollup`), in bytes.
fn pss_bytes() -> Option<u64> {
    let rollup = std::fs::read_to_string("/proc/self/smaps_rollup").ok()?;
    let kib: u64 = rollup.lines().find_map(|l| l.strip_prefix("Pss:"))?.split_whitespace().next()?.parse().ok()?;
    Some(kib * 1024)
}

/// `node -e 'console.log(1)'`, a fresh process each run (`ANYPATH_NODE`, else `node`).
fn node_baseline() -> anyhow::Result<Histogram<u64>> {
    let node = std::env::var_os("ANYPATH_NODE").unwrap_or_else(|| "node".into());
    let mut histogram = Histogram::<u64>::new(3)?;
    for _ in 0..NODE_RUNS {
        let began = Instant::now();
        let output = std::process::Command::new(&node).args(["-e", "console.log(1)"]).output().context("running node")?;
        anyhow::ensure!(output.status.success() && output.stdout == b"1\n", "node answered {:?}", output);
        histogram.record(began.elapsed().as_nanos() as u64)?;
    }
    Ok(histogram)
}
