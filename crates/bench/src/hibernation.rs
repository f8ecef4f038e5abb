//! Session state that outlives its instance: hibernating and resuming a
//! session holding about 10 MB of Python objects, and forking it. (The
//! capacity row, sessions read back after the rest pushed them out of
//! memory, is in `default_runtime`, for both runtimes.)

use std::time::Instant;

use anyhow::{Context, bail};
use anypath_interpreter::{Interpreter, InterpreterConfig, StateOrigin};
use anypath_sandbox::{CellRequest, LimitOverrides, LiveInstance, SessionRuntime};
use hdrhistogram::Histogram;

use crate::interpreter::{code, ok, row, time};

/// About 10 MB of objects: 40,000 small dicts with a string each.
const TEN_MB: &str = "objs = [{'i': i, 's': str(i) * 3} for i in range(40_000)]";
const BASE: &str = "http://127.0.0.1:3001";
/// Forks made of one session in the fork rows.
const FORKS: usize = 100;

/// The `python` rows.
pub async fn run(sandbox: &SessionRuntime, iterations: usize) -> anyhow::Result<()> {
    println!();
    println!("session state: hibernate, resume, fork ({iterations} each)");
    println!("{:<48} {:>10} {:>10}", "operation", "p50", "p99");
    let home = tempfile::tempdir()?;
    let mut session = ten_mb_session(sandbox, home.path().to_path_buf()).await?;
    let memory = session.memory_bytes();
    let (hibernate, resume, image) = cycles(&mut session, iterations, "len(objs)").await?;
    row("hibernate, ~10 MB of objects (capture + drop)", &hibernate);
    row("resume + a one-line run, ~10 MB of objects", &resume);
    println!("{:<48} {:>10.1} MiB (instance {:.1} MiB)", "state image, ~10 MB of objects", image.len() as f64 / (1 << 20) as f64, memory as f64 / (1 << 20) as f64);

    let root = tempfile::tempdir()?;
    let interpreter = std::sync::Arc::new(Interpreter::new(vec![sandbox.clone()], InterpreterConfig::new(root.path())).context("interpreter")?);
    ok(interpreter.runs().run_python("bench", "parent", code(TEN_MB), BASE).await?)?;
    // Forks by the hundred, as an agent exploring branches from one state
    // makes them: the first captures the state, the rest share its image.
    let began = Instant::now();
    let fork = time(FORKS, |i| {
        let interpreter = &interpreter;
        async move {
            interpreter.sessions().fork("bench", "parent", &format!("child-{i}")).await?;
            Ok(())
        }
    })
    .await?;
    let all = began.elapsed();
    row("fork, ~10 MB of objects (files + state image)", &fork);
    println!("{:<48} {:>10}", format!("{FORKS} forks of that session, in all"), crate::show(all));
    // What the forks added on disk, each file counted once however many
    // links it has: forks of one state share its image.
    let parent = disk_bytes(&root.path().join("sessions/bench/parent"));
    let all = disk_bytes(&root.path().join("sessions/bench"));
    println!(
        "{:<48} {:>10.1} KiB each ({} forks; the parent {:.1} MiB)",
        "fork: disk added per fork, links counted once",
        all.saturating_sub(parent) as f64 / FORKS as f64 / 1024.0,
        FORKS,
        parent as f64 / (1 << 20) as f64
    );
    // A fork holds no instance until it runs: its first run resumes the image.
    let first_run = time(iterations.min(FORKS), |i| {
        let interpreter = &interpreter;
        async move {
            let report = interpreter.runs().run_python("bench", &format!("child-{i}"), code("print(len(objs))"), BASE).await?;
            anyhow::ensure!(report.cell.state == StateOrigin::Resumed && report.cell.output.stdout == "40000\n", "the fork did not resume its state: {report:?}");
            ok(report)
        }
    })
    .await?;
    row("a fork's first run (maps the shared state)", &first_run);
    // A fork and its child's first run together, the state frozen by the
    // first fork: what an agent branching from one state waits for.
    let (mut pair, mut pair_fork) = (Histogram::<u64>::new(3)?, Histogram::<u64>::new(3)?);
    for i in 0..iterations.min(FORKS) {
        let began = Instant::now();
        interpreter.sessions().fork("bench", "parent", &format!("pair-{i}")).await?;
        pair_fork.record(began.elapsed().as_nanos() as u64)?;
        let report = interpreter.runs().run_python("bench", &format!("pair-{i}"), code("print(len(objs))"), BASE).await?;
        pair.record(began.elapsed().as_nanos() as u64)?;
        anyhow::ensure!(report.cell.state == StateOrigin::Resumed && report.cell.output.stdout == "40000\n", "the fork did not take its state: {report:?}");
        ok(report)?;
    }
    row("fork + the child's first one-line run", &pair);
    row("  of which the fork", &pair_fork);
    // The same hundred in one call (`fork` with `count`): the parent locked
    // and its state captured once, the children made in one pass.
    let mut many = Histogram::<u64>::new(3)?;
    for round in 0..iterations.clamp(1, 20) {
        let names: Vec<String> = (0..FORKS).map(|i| format!("many-{round}-{i}")).collect();
        let began = Instant::now();
        let made = interpreter.sessions().fork_many("bench", "parent", &names).await?;
        many.record(began.elapsed().as_nanos() as u64)?;
        anyhow::ensure!(made.len() == FORKS, "fork_many made {} of {FORKS}", made.len());
    }
    row(&format!("{FORKS} forks in one call (count = {FORKS})"), &many);
    Ok(())
}

/// Live children of one shared state in the memory row.
const CHILDREN: usize = 1000;

/// The sharing rows, on the sandbox's own sessions (no service around
/// them): freezing a state, and [`CHILDREN`] live children of it, each
/// having run one small cell, with what they add to the process's `Pss`.
pub async fn run_shared(sandbox: &SessionRuntime, iterations: usize) -> anyhow::Result<()> {
    println!();
    println!("shared states: a ~10 MB state frozen once, mapped by every child ({iterations} each)");
    println!("{:<48} {:>10} {:>10}", "operation", "p50", "p99");
    let home = tempfile::tempdir()?;
    std::fs::create_dir_all(home.path().join("parent"))?;
    let mut parent = ten_mb_session(sandbox, home.path().join("parent")).await?;
    let mut freeze = Histogram::<u64>::new(3)?;
    for i in 0..iterations {
        // A run changes the state: the next share captures and freezes it anew.
        cell(&mut parent, &format!("objs[0]['round'] = {i}")).await?;
        let began = Instant::now();
        parent.share().await?.context("a live parent")?;
        freeze.record(began.elapsed().as_nanos() as u64)?;
    }
    row("capture + freeze, ~10 MB (once per state)", &freeze);
    let state = parent.share().await?.context("a live parent")?;
    anyhow::ensure!(state.is_mapped(), "the runtime does not map shared states");
    let before = pss()?;
    let mut first = Histogram::<u64>::new(3)?;
    let mut children = Vec::with_capacity(CHILDREN);
    for i in 0..CHILDREN {
        let dir = home.path().join(format!("child-{i}"));
        std::fs::create_dir_all(&dir)?;
        let mut child = sandbox.live_instance(Some(dir), &LimitOverrides::default());
        let began = Instant::now();
        child.resume_shared(state.clone());
        let report = child.run(CellRequest { code: format!("objs[{i}]['child'] = {i}; print(len(objs))"), ..CellRequest::default() }).await;
        first.record(began.elapsed().as_nanos() as u64)?;
        if report.state != StateOrigin::Resumed || report.output.stdout != "40000\n" {
            bail!("child {i} did not take the state: {report:?}");
        }
        children.push(child);
    }
    let grown = pss()?.saturating_sub(before);
    let mut owned = 0;
    for child in &mut children {
        owned += child.memory_regions().await.map_or(0, |regions| regions.private_bytes());
    }
    row("a child: start, map the state, first run", &first);
    println!(
        "{:<48} {:>10.1} MiB ({:.0} KiB a child, {:.0} KiB of it its memory's own pages; goal <= 512 MiB)",
        format!("{CHILDREN} live children, one cell each: Pss added"),
        grown as f64 / (1 << 20) as f64,
        grown as f64 / CHILDREN as f64 / 1024.0,
        owned as f64 / CHILDREN as f64 / 1024.0
    );
    // The budget's give-back (an idle session's pages that hold their
    // source's bytes again returned to the kernel), then the same count.
    let before_give_back = pss()?;
    for child in &mut children {
        child.give_back_unchanged_pages().await;
    }
    let given = before_give_back.saturating_sub(pss()?);
    println!(
        "{:<48} {:>10.1} MiB ({:.0} KiB a child)",
        "the same after give-back: Pss added",
        grown.saturating_sub(given) as f64 / (1 << 20) as f64,
        grown.saturating_sub(given) as f64 / CHILDREN as f64 / 1024.0
    );
    drop(children);
    Ok(())
}

/// The process's proportional set size, in bytes.
fn pss() -> anyhow::Result<u64> {
    let text = std::fs::read_to_string("/proc/self/smaps_rollup")?;
    let line = text.lines().find(|line| line.starts_with("Pss:")).context("no Pss in smaps_rollup")?;
    let kb: u64 = line.split_whitespace().nth(1).context("Pss")?.parse()?;
    Ok(kb * 1024)
}

/// Bytes allocated on disk under `dir`, each file counted once whatever
/// its number of links.
fn disk_bytes(dir: &std::path::Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let mut seen = std::collections::HashSet::new();
    let mut total = 0;
    let mut pending = vec![dir.to_path_buf()];
    while let Some(at) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&at) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(meta) = entry.path().symlink_metadata() else {
                continue;
            };
            if meta.is_dir() {
                pending.push(entry.path());
            }
            if seen.insert((meta.dev(), meta.ino())) {
                total += meta.blocks() * 512;
            }
        }
    }
    total
}

/// `iterations` times: hibernate `session`, then resume it with a run of
/// `check`; both timings and the last image.
async fn cycles(session: &mut LiveInstance, iterations: usize, check: &str) -> anyhow::Result<(Histogram<u64>, Histogram<u64>, Vec<u8>)> {
    let mut image = Vec::new();
    let mut hibernate = Histogram::<u64>::new(3)?;
    let mut resume = Histogram::<u64>::new(3)?;
    for _ in 0..iterations {
        let began = Instant::now();
        image = session.hibernate().await?.context("a live instance")?;
        hibernate.record(began.elapsed().as_nanos() as u64)?;
        session.resume_with(image.clone());
        let began = Instant::now();
        let report = session.run(CellRequest { code: check.into(), ..CellRequest::default() }).await;
        resume.record(began.elapsed().as_nanos() as u64)?;
        if report.state != StateOrigin::Resumed || report.error.is_some() {
            bail!("resume failed: {report:?}");
        }
    }
    Ok((hibernate, resume, image))
}

/// A live session on `dir` holding [`TEN_MB`] of objects.
async fn ten_mb_session(sandbox: &SessionRuntime, dir: std::path::PathBuf) -> anyhow::Result<LiveInstance> {
    let mut session = sandbox.live_instance(Some(dir), &LimitOverrides::default());
    cell(&mut session, TEN_MB).await?;
    Ok(session)
}

async fn cell(session: &mut LiveInstance, code: &str) -> anyhow::Result<()> {
    let report = session.run(CellRequest { code: code.into(), ..CellRequest::default() }).await;
    match report.error {
        None => Ok(()),
        Some(e) => bail!("run failed: {e}"),
    }
}

/// The `python-data` row: hibernating and resuming a session holding a
/// 100,000-row DataFrame.
pub async fn run_data(layout: &std::path::Path, iterations: usize) -> anyhow::Result<()> {
    let config = anypath_sandbox::PythonDataConfig::new(layout, anypath_sandbox::DataVariant::Preimported);
    let sandbox = SessionRuntime::start_python_data(config).await.context("starting the python-data runtime")?;
    let home = tempfile::tempdir()?;
    let dir = home.path().join("data");
    std::fs::create_dir_all(&dir)?;
    let mut session = sandbox.live_instance(Some(dir), &LimitOverrides::default());
    cell(&mut session, "import numpy as np, pandas as pd\ndf = pd.DataFrame({'k': np.arange(100_000) % 7, 'v': np.random.default_rng(1).random(100_000), 's': [f'row {i}' for i in range(100_000)]})").await?;
    let (hibernate, resume, image) = cycles(&mut session, iterations, "len(df)").await?;
    row("python-data: hibernate, 100k-row DataFrame", &hibernate);
    row("python-data: resume + a one-line run, same", &resume);
    println!("{:<48} {:>10.1} MiB (instance {:.1} MiB)", "python-data: state image, same", image.len() as f64 / (1 << 20) as f64, session.memory_bytes() as f64 / (1 << 20) as f64);
    Ok(())
}
