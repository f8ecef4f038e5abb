//! What the default runtime of sessions costs an operator: the same rows for
//! `python` and `python-data` side by side, each through an interpreter
//! whose default it is (a session opened without naming a runtime): a new
//! session and its first run, the resident memory an idle live session adds,
//! and the capacity row (sessions holding `x = i`, read back in a scattered
//! order after the rest have pushed them out of memory).

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use anypath_interpreter::{Interpreter, InterpreterConfig, StateOrigin};
use anypath_sandbox::{Runtime, SessionRuntime};

use crate::interpreter::{code, ok, time};
use crate::show;

/// Base of the links artifacts carry.
const BASE: &str = "http://127.0.0.1:3001";
/// Idle sessions kept live to measure what one adds to the resident set.
const RESIDENT_SESSIONS: usize = 16;

/// One runtime's figures.
struct Figures {
    first_p50: Duration,
    first_p99: Duration,
    resident_per_idle: Option<u64>,
    open_per_session: Duration,
    read_per_session: Duration,
    resumed: usize,
    resident_after: Option<u64>,
}

/// The side-by-side rows; `data` is absent when the data runtime is not built.
pub async fn run(python: &SessionRuntime, data: Option<&SessionRuntime>, iterations: usize, sessions: usize) -> anyhow::Result<()> {
    println!();
    println!("default runtime of sessions: new session ({iterations}), idle memory ({RESIDENT_SESSIONS}), capacity ({sessions} sessions)");
    let mut columns = vec![(Runtime::Python, measure(python, iterations, sessions).await?)];
    if let Some(data) = data {
        columns.push((Runtime::PythonData, measure(data, iterations, sessions).await?));
    }
    let header: String = columns.iter().map(|(runtime, _)| format!("{:>14}", runtime.name())).collect();
    println!("{:<48}{header}", "row");
    let print = |name: &str, cell: &dyn Fn(&Figures) -> String| {
        let cells: String = columns.iter().map(|(_, figures)| format!("{:>14}", cell(figures))).collect();
        println!("{name:<48}{cells}");
    };
    print("new session + first run, p50", &|f| show(f.first_p50));
    print("new session + first run, p99", &|f| show(f.first_p99));
    print("resident memory per idle live session", &|f| mib(f.resident_per_idle));
    print(&format!("{sessions} sessions: open + x = i, per session"), &|f| show(f.open_per_session));
    print(&format!("{sessions} sessions: read back shuffled, per session"), &|f| show(f.read_per_session));
    print(&format!("{sessions} sessions: resumed from an image"), &|f| f.resumed.to_string());
    print(&format!("resident memory after {sessions} sessions"), &|f| mib(f.resident_after));
    Ok(())
}

fn mib(bytes: Option<u64>) -> String {
    bytes.map_or_else(|| "n/a".to_owned(), |b| format!("{:.1} MiB", b as f64 / (1 << 20) as f64))
}

/// Every row for one runtime, each from a fresh interpreter with the
/// operator's defaults (the 2 GiB live-memory budget included).
async fn measure(sandbox: &SessionRuntime, iterations: usize, sessions: usize) -> anyhow::Result<Figures> {
    let (root, interpreter) = fresh(sandbox, None)?;
    let first = time(iterations, |i| {
        let interpreter = &interpreter;
        async move { ok(interpreter.runs().run_python("bench", &format!("new-{i}"), code("x = 1"), BASE).await?) }
    })
    .await?;
    drop(interpreter);
    drop(root);

    // Every idle session stays live here, whatever the budget would say.
    let (root, interpreter) = fresh(sandbox, Some(u64::MAX))?;
    let before = resident_bytes();
    for i in 0..RESIDENT_SESSIONS {
        ok(interpreter.runs().run_python("bench", &format!("idle-{i}"), code("x = 1"), BASE).await?)?;
    }
    let resident_per_idle = before.zip(resident_bytes()).map(|(before, after)| after.saturating_sub(before) / RESIDENT_SESSIONS as u64);
    drop(interpreter);
    drop(root);

    let (_root, interpreter) = fresh(sandbox, None)?;
    let began = Instant::now();
    for i in 0..sessions {
        ok(interpreter.runs().run_python("bench", &format!("s{i}"), code(&format!("x = {i}")), BASE).await?)?;
    }
    let opened = began.elapsed();
    let began = Instant::now();
    let mut resumed = 0;
    for step in 0..sessions {
        // 7919 is prime: a scattered order that visits every session once.
        let i = (step * 7919 + 13) % sessions;
        let report = interpreter.runs().run_python("bench", &format!("s{i}"), code("print(x)"), BASE).await?;
        if report.cell.output.stdout != format!("{i}\n") || report.cell.state_reset {
            bail!("{} session s{i} lost its value: {:?}", sandbox.runtime(), report.cell);
        }
        resumed += usize::from(report.cell.state == StateOrigin::Resumed);
    }
    let read = began.elapsed();
    let per = |total: Duration| total / sessions.max(1) as u32;
    Ok(Figures {
        first_p50: Duration::from_nanos(first.value_at_quantile(0.5)),
        first_p99: Duration::from_nanos(first.value_at_quantile(0.99)),
        resident_per_idle,
        open_per_session: per(opened),
        read_per_session: per(read),
        resumed,
        resident_after: resident_bytes(),
    })
}

/// An interpreter whose only (so default) runtime is `sandbox`, in a fresh
/// directory removed when the first value is dropped.
fn fresh(sandbox: &SessionRuntime, memory_budget: Option<u64>) -> anyhow::Result<(tempfile::TempDir, Arc<Interpreter>)> {
    let root = tempfile::tempdir()?;
    let mut config = InterpreterConfig::new(root.path());
    if let Some(budget) = memory_budget {
        config.session_memory_bytes = budget;
    }
    let interpreter = Interpreter::new(vec![sandbox.clone()], config).context("starting the interpreter")?;
    if interpreter.default_runtime() != sandbox.runtime() {
        bail!("the interpreter's default is {}, not {}", interpreter.default_runtime(), sandbox.runtime());
    }
    Ok((root, Arc::new(interpreter)))
}

/// The process's resident set (`VmRSS`), in bytes.
fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kib: u64 = status.lines().find_map(|l| l.strip_prefix("VmRSS:"))?.split_whitespace().next()?.parse().ok()?;
    Some(kib * 1024)
}
