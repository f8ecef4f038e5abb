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
    let mut session = sandbox.live_instance(Some(home.path().to_path_buf()), &LimitOverrides::default());
    cell(&mut session, TEN_MB).await?;
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
    row("a fork's first run (resumes the shared image)", &first_run);
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
