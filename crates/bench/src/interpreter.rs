//! Code-interpreter figures: a new session's first run, a warm one-line run
//! in a live session, a 1 MiB upload, a run that writes a 1 MiB file (scan,
//! hash and ingest into the artifact store included), and the linear memory
//! an idle live session holds.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use anypath_interpreter::{Interpreter, InterpreterConfig, RunRequest};
use anypath_sandbox::{CellRequest, LimitOverrides, SessionRuntime};
use hdrhistogram::Histogram;

use crate::show;

/// Base of the links artifacts carry.
const BASE: &str = "http://127.0.0.1:3001";

/// p50 of the warm one-line run, for the ratio against the python3 baseline.
pub async fn run(sandbox: &SessionRuntime, iterations: usize) -> anyhow::Result<Duration> {
    let root = std::env::temp_dir().join(format!("anypath-bench-interpreter-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let mut config = InterpreterConfig::new(&root);
    // Every session of these rows stays live: "new session" measures a start,
    // not the hibernation of an older session past the memory budget (the
    // session-state rows measure that).
    config.session_memory_bytes = u64::MAX;
    let interpreter = std::sync::Arc::new(Interpreter::new(vec![sandbox.clone()], config).context("starting the interpreter")?);
    let heavy = iterations.clamp(10, 200);
    println!();
    println!("code interpreter ({} warm runs, {heavy} of the others)", iterations);
    println!("{:<48} {:>10} {:>10}", "operation", "p50", "p99");

    let first = time(heavy, |i| {
        let interpreter = &interpreter;
        async move { ok(interpreter.runs().run_python("bench", &format!("new-{i}"), code("x = 1"), BASE).await?) }
    })
    .await?;
    row("new session, first run", &first);
    for i in 0..heavy {
        interpreter.sessions().close("bench", &format!("new-{i}")).await?;
    }
    // Sessions arriving 20 ms apart, as agents open them: each finds a home
    // and an instance made ahead (back to back, as above, they outrun it).
    let paced = time_own(heavy, |i| {
        let interpreter = &interpreter;
        async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            let began = Instant::now();
            ok(interpreter.runs().run_python("bench", &format!("paced-{i}"), code("x = 1"), BASE).await?)?;
            Ok(began.elapsed())
        }
    })
    .await?;
    row("new session, first run (one every 20 ms)", &paced);
    for i in 0..heavy {
        interpreter.sessions().close("bench", &format!("paced-{i}")).await?;
    }

    ok(interpreter.runs().run_python("bench", "warm", code("x = 0"), BASE).await?)?;
    let warm = time(iterations, |_| {
        let interpreter = &interpreter;
        async move { ok(interpreter.runs().run_python("bench", "warm", code("x += 1"), BASE).await?) }
    })
    .await?;
    row("warm run, one line", &warm);

    let mib = Arc::new(vec![7u8; 1 << 20]);
    let upload = time(heavy, |i| {
        let (interpreter, mib) = (interpreter.clone(), mib.clone());
        // On the blocking pool, as the service calls it: a file call may wait there.
        let upload = move || interpreter.files().upload("bench", "files", &format!("up-{i}.bin"), &mib, true, None).map(drop);
        async move { Ok(tokio::task::spawn_blocking(upload).await??) }
    })
    .await?;
    row("upload 1 MiB", &upload);

    let artifact = time(heavy, |i| {
        let interpreter = &interpreter;
        // Distinct bytes each time: every run hashes and stores a new blob.
        let write = format!("open('out-{}.bin', 'wb').write(b'x' * ((1 << 20) - 8) + b'%08d' % {i})", i % 4);
        async move {
            let report = interpreter.runs().run_python("bench", "artifact", code(&write), BASE).await?;
            if report.artifacts.len() != 1 {
                bail!("expected one artifact, got {:?}", report.artifacts);
            }
            ok(report)
        }
    })
    .await?;
    row("run + 1 MiB artifact (scan, hash, keep)", &artifact);

    let mut idle = sandbox.live_instance(None, &LimitOverrides::default());
    let report = idle.run(CellRequest { code: "x = 1".into(), ..CellRequest::default() }).await;
    if report.error.is_some() {
        bail!("idle session run failed: {:?}", report.error);
    }
    println!("{:<48} {:>10.1} MiB", "memory held by an idle session", idle.memory_bytes() as f64 / (1 << 20) as f64);
    let _ = std::fs::remove_dir_all(&root);
    Ok(Duration::from_nanos(warm.value_at_quantile(0.5)))
}

pub(crate) fn code(source: &str) -> RunRequest {
    RunRequest { code: source.into(), ..RunRequest::default() }
}

pub(crate) fn ok(report: anypath_interpreter::RunReport) -> anyhow::Result<()> {
    match report.cell.error {
        None => Ok(()),
        Some(e) => bail!("run failed: {e}"),
    }
}

/// Prints one row: the operation's p50 and p99.
pub(crate) fn row(name: &str, histogram: &Histogram<u64>) {
    let at = |q| Duration::from_nanos(histogram.value_at_quantile(q));
    println!("{name:<48} {:>10} {:>10}", show(at(0.5)), show(at(0.99)));
}

/// Runs `op(i)` for i in 0..n, one at a time, recording the duration each
/// reports of itself (what it does before it starts timing is not counted).
pub(crate) async fn time_own<F, Fut>(n: usize, op: F) -> anyhow::Result<Histogram<u64>>
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Duration>>,
{
    let mut histogram = Histogram::<u64>::new(3)?;
    for i in 0..n {
        histogram.record(op(i).await?.as_nanos() as u64)?;
    }
    Ok(histogram)
}

/// Runs `op(i)` for i in 0..n, one at a time, recording each duration.
pub(crate) async fn time<F, Fut>(n: usize, op: F) -> anyhow::Result<Histogram<u64>>
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    let mut histogram = Histogram::<u64>::new(3)?;
    for i in 0..n {
        let began = Instant::now();
        op(i).await?;
        histogram.record(began.elapsed().as_nanos() as u64)?;
    }
    Ok(histogram)
}
