//! `anypath-bench`: latency and throughput of the sandbox, with a baseline.
//!
//! Each scenario runs a fixed block many times on fresh instances, at 1 and 2
//! concurrent executions, and prints p50/p99 latency and executions per
//! second. The same trivial block run through `python3 -I -c` is the baseline.
//! Then the code interpreter's operations (`interpreter`), the warm one-line
//! run against the same baseline, and the `javascript` runtime's rows
//! against `node -e`.

mod data_runtime;
mod default_runtime;
mod hibernation;
mod interpreter;
mod javascript;
mod scenarios;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use anypath_sandbox::{BlockRunner, RunnerConfig};
use clap::Parser;
use hdrhistogram::Histogram;

use scenarios::Scenario;

#[derive(Parser)]
#[command(about = "Sandbox latency and throughput against a python3 baseline")]
struct Args {
    /// The runner component.
    #[arg(long, env = "ANYPATH_RUNNER")]
    runner: PathBuf,
    /// Executions per scenario and concurrency level.
    #[arg(long, default_value_t = 2000)]
    iterations: usize,
    /// Runs of the python3 baseline.
    #[arg(long, default_value_t = 100)]
    baseline_runs: usize,
    /// Run only scenarios whose name contains this text (`interpreter`:
    /// only the code-interpreter rows).
    #[arg(long)]
    only: Option<String>,
    /// Instances kept started ahead of demand.
    #[arg(long, default_value_t = 4)]
    warm_instances: usize,
    /// The data runtime's directory (`target/python-data`); its rows are skipped without it.
    #[arg(long, env = "ANYPATH_PYTHON_DATA")]
    python_data: Option<PathBuf>,
    /// Runs per row of the data runtime (each first run takes about a second).
    #[arg(long, default_value_t = 5)]
    data_runs: usize,
    /// Sessions the capacity row opens and reads back, for each runtime.
    #[arg(long, default_value_t = 1000)]
    capacity_sessions: usize,
    /// The JavaScript runtime (`target/javascript/javascript.wasm`); its rows are skipped without it.
    #[arg(long, env = "ANYPATH_JAVASCRIPT")]
    javascript: Option<PathBuf>,
    /// Where the baseline's venv with pandas and matplotlib is kept between runs.
    #[arg(long, default_value = "target/bench-venv")]
    baseline_venv: PathBuf,
}

/// Latency percentiles and throughput of one measured run.
struct Figures {
    p50: Duration,
    p99: Duration,
    per_second: f64,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(run(args))
}

async fn run(args: Args) -> anyhow::Result<()> {
    let mut config = RunnerConfig::new(&args.runner);
    config.warm_instances = args.warm_instances;
    let sandbox = BlockRunner::start(config).await.context("starting the sandbox")?;
    let scenarios = scenarios::all()?;
    println!("anypath sandbox benchmark: {} executions per row, fresh instance each", args.iterations);
    println!("{:<34} {:>5} {:>10} {:>10} {:>10}", "scenario", "conc", "p50", "p99", "exec/s");
    let mut trivial_p50 = None;
    for scenario in scenarios.iter().filter(|s| args.only.as_deref().is_none_or(|only| s.name.contains(only))) {
        scenario.check(&sandbox).await?;
        for concurrency in [1, 2] {
            // Let the warm pool refill so every row starts from the same state.
            tokio::time::sleep(Duration::from_millis(200)).await;
            let figures = measure(&sandbox, scenario, concurrency, args.iterations).await?;
            println!(
                "{:<34} {:>5} {:>10} {:>10} {:>10.0}",
                scenario.name,
                concurrency,
                show(figures.p50),
                show(figures.p99),
                figures.per_second
            );
            if scenario.name == scenarios::TRIVIAL && concurrency == 1 {
                trivial_p50 = Some(figures.p50);
            }
        }
    }
    let interpreter_rows = args.only.as_deref().is_none_or(|only| only == "interpreter");
    let warm_cell = if interpreter_rows { Some(interpreter::run(&sandbox.session_runtime().await?, args.iterations).await?) } else { None };
    if args.only.as_deref().is_none_or(|only| "hibernation".contains(only)) {
        let sessions = sandbox.session_runtime().await?;
        hibernation::run(&sessions, args.iterations.clamp(5, 50)).await?;
        hibernation::run_shared(&sessions, args.iterations.clamp(5, 50)).await?;
        if let Some(layout) = &args.python_data {
            hibernation::run_data(layout, args.iterations.clamp(5, 20)).await?;
        }
    }
    if args.only.as_deref().is_none_or(|only| "default runtime".contains(only)) {
        let data = match &args.python_data {
            Some(layout) => {
                let config = anypath_sandbox::PythonDataConfig::new(layout, anypath_sandbox::DataVariant::Preimported);
                Some(anypath_sandbox::SessionRuntime::start_python_data(config).await.context("starting the python-data runtime")?)
            }
            None => None,
        };
        default_runtime::run(&sandbox.session_runtime().await?, data.as_ref(), args.iterations.clamp(10, 100), args.capacity_sessions).await?;
    }
    if args.only.as_deref().is_none_or(|only| "javascript".contains(only)) {
        match &args.javascript {
            Some(component) => {
                let config = anypath_sandbox::JavascriptConfig::new(component);
                let javascript = anypath_sandbox::SessionRuntime::start_javascript(config).await.context("starting the javascript runtime")?;
                javascript::run(&javascript, args.iterations).await?;
            }
            None => println!("
javascript rows skipped: pass --javascript (cargo xtask bench does)"),
        }
    }
    println!();
    let baseline = python_baseline(args.baseline_runs)?;
    println!(
        "{:<34} {:>5} {:>10} {:>10} {:>10.0}",
        "baseline: python3 -I -c (trivial)",
        1,
        show(baseline.p50),
        show(baseline.p99),
        baseline.per_second
    );
    if let Some(ours) = trivial_p50 {
        println!(
            "ratio: python3 -I -c p50 / anypath trivial p50 = {:.1}x",
            baseline.p50.as_secs_f64() / ours.as_secs_f64()
        );
    }
    if let Some(cell) = warm_cell {
        println!(
            "ratio: python3 -I -c p50 / interpreter warm run p50 = {:.0}x",
            baseline.p50.as_secs_f64() / cell.as_secs_f64()
        );
    }
    match (&args.python_data, args.only.is_none() || args.only.as_deref() == Some("python-data")) {
        (Some(layout), true) => data_runtime::run(layout, args.data_runs.max(1), &args.baseline_venv).await?,
        (None, _) => println!("\npython-data rows skipped: pass --python-data (cargo xtask bench does)"),
        _ => {}
    }
    Ok(())
}

async fn measure(sandbox: &BlockRunner, scenario: &Scenario, concurrency: usize, iterations: usize) -> anyhow::Result<Figures> {
    let histogram = Arc::new(Mutex::new(Histogram::<u64>::new(3)?));
    let started = Instant::now();
    let mut workers = Vec::new();
    for worker in 0..concurrency {
        let (sandbox, scenario, histogram) = (sandbox.clone(), scenario.clone(), histogram.clone());
        let count = iterations / concurrency + usize::from(worker < iterations % concurrency);
        workers.push(tokio::spawn(async move {
            for i in 0..count {
                let request = scenario.request(i)?;
                let began = Instant::now();
                let report = sandbox.execute(request).await;
                let elapsed = began.elapsed();
                if let Err(failure) = report.outcome {
                    bail!("{} failed: {:?}", scenario.name, failure.error);
                }
                histogram.lock().map_err(|_| anyhow::anyhow!("poisoned"))?.record(elapsed.as_nanos() as u64)?;
            }
            Ok(())
        }));
    }
    for worker in workers {
        worker.await??;
    }
    let wall = started.elapsed();
    let histogram = histogram.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
    Ok(Figures {
        p50: Duration::from_nanos(histogram.value_at_quantile(0.5)),
        p99: Duration::from_nanos(histogram.value_at_quantile(0.99)),
        per_second: iterations as f64 / wall.as_secs_f64(),
    })
}

/// The trivial block through a fresh `python3 -I -c` process each time.
fn python_baseline(runs: usize) -> anyhow::Result<Figures> {
    let python = python_executable()?;
    let mut histogram = Histogram::<u64>::new(3)?;
    let started = Instant::now();
    for _ in 0..runs {
        let began = Instant::now();
        let status = std::process::Command::new(&python)
            .args(["-I", "-c", scenarios::TRIVIAL_CODE])
            .status()
            .context("running python3 for the baseline")?;
        if !status.success() {
            bail!("python3 baseline failed with {status}");
        }
        histogram.record(began.elapsed().as_nanos() as u64)?;
    }
    Ok(Figures {
        p50: Duration::from_nanos(histogram.value_at_quantile(0.5)),
        p99: Duration::from_nanos(histogram.value_at_quantile(0.99)),
        per_second: runs as f64 / started.elapsed().as_secs_f64(),
    })
}

/// The interpreter itself, not a version-manager shim in front of it, so the
/// baseline measures CPython start-up and nothing else.
fn python_executable() -> anyhow::Result<PathBuf> {
    let output = std::process::Command::new("python3")
        .args(["-I", "-c", "import sys; print(sys.executable)"])
        .output()
        .context("running python3 for the baseline")?;
    let path = String::from_utf8(output.stdout)?.trim().to_owned();
    if path.is_empty() {
        bail!("python3 did not report its executable");
    }
    Ok(PathBuf::from(path))
}

pub(crate) fn show(d: Duration) -> String {
    let micros = d.as_secs_f64() * 1e6;
    if micros < 10_000.0 { format!("{micros:.0} us") } else { format!("{:.1} ms", micros / 1000.0) }
}
