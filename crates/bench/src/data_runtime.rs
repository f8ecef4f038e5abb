//! Data-runtime figures: a new python-data session's first run and its
//! first imports (pandas and pyplot) from each form of the reactor (plain,
//! the wheel's snapshot, pre-initialised), a warm one-line run, the CSV ->
//! chart script in a new session and again in the same session, and the
//! memory an idle session holds (its linear memory, and what the process's
//! resident set grows by per session). The same imports and the same chart
//! script through the host's `python3` with pandas and matplotlib in a
//! throw-away venv are the baseline (skipped, with the reason, when they
//! cannot be installed).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, bail};
use anypath_sandbox::{CellRequest, DataVariant, LimitOverrides, LiveInstance, PythonDataConfig, SessionRuntime};
use hdrhistogram::Histogram;

use crate::interpreter::{row, time};

const SALES: &str = "region,month,amount\nnorth,1,120\nsouth,1,80\nnorth,2,150\nsouth,2,95\neast,1,60\neast,2,75\n";

/// An analysis session's first line.
const IMPORTS: &str = "import pandas as pd\nimport matplotlib.pyplot as plt\n";

/// Reads the CSV in the working directory, groups it and saves a bar chart.
const CHART: &str = "import pandas as pd
import matplotlib
matplotlib.use('Agg')
import matplotlib.pyplot as plt
df = pd.read_csv('sales.csv')
totals = df.groupby('region')['amount'].sum()
fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
totals.plot.bar(ax=ax)
fig.savefig('chart.png')
plt.close(fig)
";

/// Pinned for the baseline venv, the releases closest to those in the runtime.
const BASELINE_PACKAGES: [&str; 2] = ["pandas==2.3.3", "matplotlib==3.10.7"];
/// Idle sessions started to measure what one adds to the resident set.
const RESIDENT_SESSIONS: usize = 8;

/// Prints the data runtime's rows; `venv_dir` keeps the baseline's venv between runs.
pub async fn run(layout: &Path, runs: usize, venv_dir: &Path) -> anyhow::Result<()> {
    let root = std::env::temp_dir().join(format!("anypath-bench-data-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    println!();
    println!("python-data runtime ({runs} runs per row; sessions start from the pre-initialised image unless named)");
    println!("{:<48} {:>10} {:>10}", "operation", "p50", "p99");

    let mut variants = Vec::new();
    for variant in [DataVariant::Plain, DataVariant::Snapshot, DataVariant::Preimported] {
        let name = serde_json::to_value(variant)?.as_str().unwrap_or_default().to_owned();
        let sandbox = SessionRuntime::start_python_data(PythonDataConfig::new(layout, variant))
            .await
            .with_context(|| format!("starting python-data ({name})"))?;
        let start = time(runs, |i| {
            let dir = session_dir(&root, &format!("{name}-start-{i}"));
            let sandbox = &sandbox;
            async move { first_run(sandbox, &dir, "x = 1").await.map(drop) }
        })
        .await?;
        row(&format!("new session: x = 1 ({name})"), &start);
        let imports = time(runs, |i| {
            let dir = session_dir(&root, &format!("{name}-import-{i}"));
            let sandbox = &sandbox;
            async move { first_run(sandbox, &dir, IMPORTS).await.map(drop) }
        })
        .await?;
        row(&format!("new session: import pandas, pyplot ({name})"), &imports);
        variants.push((variant, name, sandbox, imports));
    }
    let Some((_, _, preimported, imports)) = variants.pop() else { bail!("no pre-initialised runtime") };
    let Some((_, _, snapshot, _)) = variants.pop() else { bail!("no snapshot runtime") };

    let mut warm = preimported.live_instance(Some(session_dir(&root, "warm")), &LimitOverrides::default());
    cell(&mut warm, "x = 0").await?;
    let (one_line, _) = repeat(&mut warm, "x += 1", runs * 20).await?;
    row("warm run, one line", &one_line);

    let mut new_session_charts = Vec::new();
    for (sandbox, name) in [(&snapshot, "snapshot"), (&preimported, "preimported")] {
        let chart = time(runs, |i| {
            let dir = session_dir(&root, &format!("{name}-chart-{i}"));
            async move {
                std::fs::write(dir.join("sales.csv"), SALES)?;
                first_run(sandbox, &dir, CHART).await.map(drop)
            }
        })
        .await?;
        row(&format!("CSV -> chart, new session ({name})"), &chart);
        new_session_charts.push(chart);
    }
    let cold = new_session_charts.pop().context("the pre-initialised chart row")?;

    let dir = session_dir(&root, "charts");
    std::fs::write(dir.join("sales.csv"), SALES)?;
    let mut session = preimported.live_instance(Some(dir), &LimitOverrides::default());
    let first_fuel = cell(&mut session, CHART).await?;
    let (warm_chart, later_fuel) = repeat(&mut session, CHART, runs).await?;
    row("CSV -> chart, same session again", &warm_chart);
    println!("{:<48} {:>10.2e} {:>10.2e}", "fuel: a new session's chart / a later one", first_fuel as f64, later_fuel as f64);
    println!("{:<48} {:>10.1} MiB", "linear memory of an idle session", session.memory_bytes() as f64 / (1 << 20) as f64);
    match resident_per_session(&preimported, &root).await? {
        Some(bytes) => println!("{:<48} {:>10.1} MiB", format!("resident memory per idle session ({RESIDENT_SESSIONS})"), bytes as f64 / (1 << 20) as f64),
        None => println!("resident memory per idle session: skipped (no /proc/self/status)"),
    }

    match baseline_python(venv_dir) {
        Ok(python) => {
            let host_imports = host_run(&python, &root, "imports.py", IMPORTS, runs)?;
            row("baseline: host python3 import pandas, pyplot", &host_imports);
            let baseline = host_run(&python, &root, "chart.py", CHART, runs)?;
            row("baseline: host python3 CSV -> chart", &baseline);
            let p50 = |h: &Histogram<u64>| h.value_at_quantile(0.5) as f64;
            println!(
                "ratio: host python3 / new session (pre-initialised), imports p50 = {:.1}x; chart p50 = {:.1}x; / same-session chart p50 = {:.1}x",
                p50(&host_imports) / p50(&imports),
                p50(&baseline) / p50(&cold),
                p50(&baseline) / p50(&warm_chart)
            );
        }
        Err(reason) => println!("baseline skipped: pandas and matplotlib could not be installed for the host's python3 ({reason:#})"),
    }
    let _ = std::fs::remove_dir_all(&root);
    Ok(())
}

/// What the process's resident set grows by per idle session: sessions
/// started from one image share its unchanged pages.
async fn resident_per_session(sandbox: &SessionRuntime, root: &Path) -> anyhow::Result<Option<u64>> {
    let Some(before) = resident_bytes() else { return Ok(None) };
    let mut sessions = Vec::new();
    for i in 0..RESIDENT_SESSIONS {
        let mut session = sandbox.live_instance(Some(session_dir(root, &format!("resident-{i}"))), &LimitOverrides::default());
        cell(&mut session, "x = 1").await?;
        sessions.push(session);
    }
    let after = resident_bytes().unwrap_or(before);
    drop(sessions);
    Ok(Some(after.saturating_sub(before) / RESIDENT_SESSIONS as u64))
}

/// The process's resident set (`VmRSS`).
fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

fn session_dir(root: &Path, name: &str) -> PathBuf {
    let dir = root.join(name).join("data");
    let _ = std::fs::create_dir_all(&dir);
    dir
}

/// A new session's first run of `code` (its instance started on the way).
async fn first_run(sandbox: &SessionRuntime, dir: &Path, code: &str) -> anyhow::Result<u64> {
    let mut session = sandbox.live_instance(Some(dir.to_path_buf()), &LimitOverrides::default());
    cell(&mut session, code).await
}

/// Runs `code` `n` times in one session; the durations and the last run's fuel.
async fn repeat(session: &mut LiveInstance, code: &str, n: usize) -> anyhow::Result<(Histogram<u64>, u64)> {
    let mut histogram = Histogram::<u64>::new(3)?;
    let mut fuel = 0;
    for _ in 0..n {
        let began = Instant::now();
        fuel = cell(session, code).await?;
        histogram.record(began.elapsed().as_nanos() as u64)?;
    }
    Ok((histogram, fuel))
}

/// Runs `code`; its fuel, or the failure.
async fn cell(session: &mut LiveInstance, code: &str) -> anyhow::Result<u64> {
    let report = session.run(CellRequest { code: code.into(), ..CellRequest::default() }).await;
    match report.error {
        None => Ok(report.metrics.fuel_consumed),
        Some(error) => bail!("python-data run failed: {error} ({})", report.output.stderr),
    }
}

/// The venv's python with the baseline packages, made on first use.
fn baseline_python(venv: &Path) -> anyhow::Result<PathBuf> {
    // Absolute: the chart runs with another working directory.
    let venv = &std::path::absolute(venv)?;
    let python = venv.join("bin/python");
    let has = |python: &Path| Command::new(python).args(["-c", "import pandas, matplotlib"]).output().is_ok_and(|o| o.status.success());
    if python.is_file() && has(&python) {
        return Ok(python);
    }
    eprintln!("==> installing {} into {} for the baseline", BASELINE_PACKAGES.join(" "), venv.display());
    let status = Command::new("python3").arg("-m").arg("venv").arg(venv).status().context("python3 -m venv")?;
    if !status.success() {
        bail!("python3 -m venv failed with {status}");
    }
    let status = Command::new(venv.join("bin/pip"))
        .args(["install", "--quiet", "--disable-pip-version-check"])
        .args(BASELINE_PACKAGES)
        .status()
        .context("pip install")?;
    if !status.success() || !has(&python) {
        bail!("pip install {} failed ({status})", BASELINE_PACKAGES.join(" "));
    }
    Ok(python)
}

/// `script` (saved as `name`) through a fresh host process each time, as a
/// process-per-call sandbox runs it.
fn host_run(python: &Path, root: &Path, name: &str, script: &str, runs: usize) -> anyhow::Result<Histogram<u64>> {
    let dir = root.join("host");
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("sales.csv"), SALES)?;
    std::fs::write(dir.join(name), script)?;
    let mut histogram = Histogram::<u64>::new(3)?;
    for _ in 0..runs {
        let began = Instant::now();
        let status = Command::new(python)
            .args(["-I", name])
            .current_dir(&dir)
            .env("MPLCONFIGDIR", dir.join("mpl"))
            .status()
            .with_context(|| format!("running the host's {name}"))?;
        if !status.success() {
            bail!("the host's {name} failed with {status}");
        }
        histogram.record(began.elapsed().as_nanos() as u64)?;
    }
    Ok(histogram)
}
