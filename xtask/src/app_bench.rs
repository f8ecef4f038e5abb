//! The whole request path under load: `anypath up` driven by `oha`, a load
//! generator from crates.io installed into `target/tools` on first use.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use anyhow::{Context, bail};
use serde_json::Value;

use crate::steps::{cargo, root, run, step};

const OHA_VERSION: &str = "1.16.0";
const REQUESTS: &str = "2000";

/// Kills the app when the benchmark ends, however it ends.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs GET-by-id and POST against a fresh app and prints p50/p99 and req/s.
pub fn run_app_bench(binary: &Path, runner: &Path) -> anyhow::Result<()> {
    let oha = ensure_oha()?;
    let data = std::env::temp_dir().join(format!("anypath-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&data);
    let mut child = Command::new(binary)
        .args(["up", "--listen", "127.0.0.1:0", "--sandbox-listen", "127.0.0.1:0", "--kv"])
        .arg(data.join("kv.db"))
        .arg("--data-dir")
        .arg(data.join("interpreter"))
        .arg("--runner")
        .arg(runner)
        .current_dir(root())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting anypath up")?;
    let stderr = child.stderr.take().context("app stderr")?;
    let app = Running(child);
    let address = listen_address(stderr)?;
    let base = format!("http://{address}");

    println!("\nwhole request path (anypath up, rules planner), {REQUESTS} requests per row, load from oha {OHA_VERSION}");
    println!("{:<34} {:>5} {:>10} {:>10} {:>10}", "request", "conc", "p50", "p99", "req/s");
    let post = ["-m", "POST", "-T", "application/json", "-d", r#"{"name":"Alice","age":31}"#];
    load(&oha, &format!("{base}/members/"), "100", "1", &post)?; // the records GET reads
    for concurrency in ["1", "8"] {
        report("GET /members/42", concurrency, &load(&oha, &format!("{base}/members/42"), REQUESTS, concurrency, &[])?);
    }
    for concurrency in ["1", "8"] {
        report("POST /members/", concurrency, &load(&oha, &format!("{base}/members/"), REQUESTS, concurrency, &post)?);
    }
    drop(app);
    let _ = std::fs::remove_dir_all(&data);
    Ok(())
}

fn ensure_oha() -> anyhow::Result<PathBuf> {
    let tools = root().join("target/tools");
    let oha = tools.join("bin/oha");
    if !oha.is_file() {
        step(&format!("installing the load generator oha {OHA_VERSION} into target/tools (once)"));
        run(Command::new(cargo())
            .args(["install", "--locked", "--quiet", "oha", "--version", OHA_VERSION, "--root"])
            .arg(&tools))?;
    }
    Ok(oha)
}

/// Reads the app's log until it reports its address, then keeps draining it
/// on a thread so the app never writes into a full or closed pipe.
fn listen_address(stderr: impl std::io::Read + Send + 'static) -> anyhow::Result<String> {
    let (found, address) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Ok(entry) = serde_json::from_str::<Value>(&line) {
                if entry["message"] == "app serving" {
                    let _ = found.send(entry["listen"].as_str().unwrap_or_default().to_owned());
                }
            }
        }
    });
    address.recv_timeout(std::time::Duration::from_secs(120)).context("anypath up did not start serving")
}

fn load(oha: &Path, url: &str, requests: &str, concurrency: &str, extra: &[&str]) -> anyhow::Result<Value> {
    let output = Command::new(oha)
        .args(["--no-tui", "--output-format", "json", "-n", requests, "-c", concurrency])
        .args(extra)
        .arg(url)
        .output()
        .context("running oha")?;
    if !output.status.success() {
        bail!("oha failed: {}", String::from_utf8_lossy(&output.stderr));
    }
    let result: Value = serde_json::from_slice(&output.stdout).context("oha's JSON output")?;
    let codes = &result["statusCodeDistribution"];
    let bad: u64 = codes
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(code, _)| !code.starts_with('2'))
        .filter_map(|(_, n)| n.as_u64())
        .sum();
    if bad > 0 || result["summary"]["successRate"].as_f64() != Some(1.0) {
        bail!("{url}: not every request succeeded: {codes}");
    }
    Ok(result)
}

fn report(name: &str, concurrency: &str, result: &Value) {
    let ms = |key: &str| result["latencyPercentiles"][key].as_f64().unwrap_or(f64::NAN) * 1e3;
    let rps = result["summary"]["requestsPerSec"].as_f64().unwrap_or(f64::NAN);
    println!("{name:<34} {concurrency:>5} {:>7.1} ms {:>7.1} ms {rps:>10.0}", ms("p50"), ms("p99"));
}
