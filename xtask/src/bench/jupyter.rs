//! The Jupyter row of `cargo xtask bench`: a kernel started and its first
//! `1 + 1` answered, and `1 + 1` round trips over the kernel websocket, on
//! anypath's sandbox listener and, in the same run with the same client,
//! on `jupyter server` with a native ipykernel.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

use anyhow::{Context, bail};
use serde_json::Value;

use crate::shell::{Running, root};

/// Kernels started per side.
const STARTS: &str = "10";
/// `1 + 1` round trips per side.
const ROUND_TRIPS: &str = "300";
/// The native server's token.
const NATIVE_TOKEN: &str = "bench-native";

/// Times both sides and prints them with their ratios; `key` is a tenant's API key on `sandbox`.
pub fn row(sandbox: &str, key: &str) -> anyhow::Result<()> {
    let python = crate::jupyter_clients::ensure()?;
    let ours = measure(&python, sandbox, key)?;
    let runtime = root().join("target/jupyter-bench");
    std::fs::create_dir_all(&runtime).with_context(|| format!("creating {}", runtime.display()))?;
    let (native_server, native_url) = start_native(&python, &runtime)?;
    let native = measure(&python, &native_url, NATIVE_TOKEN)?;
    drop(native_server);
    let _ = std::fs::remove_dir_all(&runtime);
    println!("\nJupyter kernels (python3; ours the data runtime), {STARTS} starts and {ROUND_TRIPS} round trips per side, one Python client");
    println!("{:<44} {:>10} {:>10} {:>10} {:>10}", "server", "start p50", "start p99", "1+1 p50", "1+1 p99");
    for (name, figures) in [("anypath (sandbox listener)", &ours), ("jupyter server 2.21.1 + ipykernel 7.4.0", &native)] {
        println!(
            "{name:<44} {:>8.1}ms {:>8.1}ms {:>8.2}ms {:>8.2}ms",
            quantile(figures, "start_ms", 0.5),
            quantile(figures, "start_ms", 0.99),
            quantile(figures, "round_trip_ms", 0.5),
            quantile(figures, "round_trip_ms", 0.99)
        );
    }
    println!(
        "native / anypath at p50: kernel start to first result {:.1}x, 1+1 round trip {:.2}x",
        quantile(&native, "start_ms", 0.5) / quantile(&ours, "start_ms", 0.5),
        quantile(&native, "round_trip_ms", 0.5) / quantile(&ours, "round_trip_ms", 0.5)
    );
    Ok(())
}

fn measure(python: &std::path::Path, base: &str, token: &str) -> anyhow::Result<Value> {
    let output = Command::new(python)
        .arg(root().join("tests/support/jupyter_bench.py"))
        .args([base, token, "python3", STARTS, ROUND_TRIPS])
        .output()
        .context("running the Jupyter benchmark client")?;
    if !output.status.success() {
        bail!("the Jupyter benchmark client failed against {base}: {}", String::from_utf8_lossy(&output.stderr));
    }
    serde_json::from_slice(&output.stdout).context("the Jupyter benchmark's JSON")
}

/// `jupyter server` on a free port with ipykernel's `python3`, and its address.
fn start_native(python: &std::path::Path, dir: &std::path::Path) -> anyhow::Result<(Running, String)> {
    let mut child = Command::new(python)
        .args(["-m", "jupyter_server", "--allow-root", "--ServerApp.ip=127.0.0.1", "--ServerApp.port=0", "--ServerApp.open_browser=False"])
        .arg(format!("--IdentityProvider.token={NATIVE_TOKEN}"))
        .arg(format!("--ServerApp.root_dir={}", dir.display()))
        .env("JUPYTER_RUNTIME_DIR", dir.join("runtime"))
        .env("JUPYTER_CONFIG_DIR", dir.join("config"))
        .process_group(0)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting jupyter server")?;
    let stderr = child.stderr.take().context("jupyter server's stderr")?;
    let server = Running(child);
    let mut lines = BufReader::new(stderr).lines();
    let address = loop {
        let Some(line) = lines.next().transpose().context("reading jupyter server's output")? else {
            bail!("jupyter server ended before it served");
        };
        if let Some(at) = line.find("http://127.0.0.1:").filter(|_| line.contains("/?token="))
            && let Some(end) = line[at + 7..].find('/')
        {
            break line[at..at + 7 + end].to_owned();
        }
    };
    // Keep reading its output, so it never blocks on a full pipe.
    std::thread::spawn(move || lines.for_each(drop));
    Ok((server, address))
}

fn quantile(figures: &Value, key: &str, q: f64) -> f64 {
    let mut values: Vec<f64> = figures.get(key).and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_f64).collect();
    values.sort_by(f64::total_cmp);
    let index = ((values.len() as f64 - 1.0) * q).round() as usize;
    values.get(index).copied().unwrap_or(f64::NAN)
}
