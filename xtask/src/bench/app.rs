//! The whole request path under load: `anypath up` (and the app under
//! `spin up`) beside json-server, driven by `oha` ([`crate::bench::oha`];
//! the rows are in [`crate::bench::rest`]); then a code-interpreter run through the plain
//! HTTP API and through MCP, E2B's SDK, Jupyter, and fair share.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

use anyhow::{Context, bail};
use serde_json::Value;

use crate::bench::json_server::JsonServer;
use crate::bench::llm_stub::LlmStub;
use crate::bench::oha::{OHA_VERSION, REQUESTS, ensure_oha, load, report};
use crate::bench::rest::{self, MEMBER, Measured, RECORDS, Server};
use crate::flags::AppSections;
use crate::shell::{Running, root};

/// A Redis server for the benchmark, with production durability
/// (`appendfsync everysec`); killed when dropped.
pub(crate) struct BenchRedis {
    _server: Running,
    pub(crate) port: u16,
    cli: PathBuf,
}

impl BenchRedis {
    pub(crate) fn start(server: &Path, dir: &Path) -> anyhow::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let child = Command::new(server)
            .args(["--bind", "127.0.0.1", "--port", &port.to_string(), "--save", "", "--appendonly", "yes"])
            .args(["--appendfsync", "everysec", "--dir"])
            .arg(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting redis-server")?;
        let redis = Self { _server: Running(child), port, cli: server.with_file_name("redis-cli") };
        for _ in 0..200 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Ok(redis);
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        bail!("redis-server did not start on port {port}")
    }

    fn app_env(&self) -> Vec<(String, String)> {
        vec![
            ("SPIN_VARIABLE_STORE_BACKEND".into(), "redis".into()),
            ("SPIN_VARIABLE_REDIS_URL".into(), format!("redis://127.0.0.1:{}", self.port)),
            ("SPIN_VARIABLE_REDIS_ALLOWED".into(), format!("redis://127.0.0.1:{}", self.port)),
        ]
    }

    /// Commands the app sent Redis per request, counted by `MONITOR` (a
    /// script's own commands, which run inside the server, are not round
    /// trips): `requests` sequential calls of `send`.
    fn round_trips(&self, requests: usize, send: impl Fn() -> anyhow::Result<()>) -> anyhow::Result<f64> {
        let mut monitor = Command::new(&self.cli)
            .args(["-p", &self.port.to_string(), "monitor"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("starting redis-cli monitor")?;
        let stdout = monitor.stdout.take().context("monitor output")?;
        let monitor = Running(monitor);
        let (lines, seen) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = lines.send(line);
            }
        });
        seen.recv_timeout(std::time::Duration::from_secs(10)).context("redis-cli monitor did not start")?;
        for _ in 0..requests {
            send()?;
        }
        std::thread::sleep(std::time::Duration::from_millis(300));
        drop(monitor);
        let commands = seen.try_iter().filter(|line| line.contains("] \"") && !line.contains(" lua] ")).count();
        Ok(commands as f64 / requests as f64)
    }
}

/// The API keys of the sandbox listener's two tenants: only a key (or a
/// token) decides a caller's tenant there.
const BENCH_KEYS: &str = "bench-a:tenant-a,bench-b:tenant-b,e2b_be9c4:tenant-c";

/// The app under test: `anypath up` on a fresh data directory.
pub(crate) struct BenchApp {
    _process: Running,
    pub(crate) base: String,
    pub(crate) sandbox: String,
    /// E2B's API, beside the sandbox listener.
    e2b: String,
}

fn start_app(binary: &Path, runner: &Path, data: &Path, env: &[(String, String)]) -> anyhow::Result<BenchApp> {
    let mut child = Command::new(binary)
        .args(["up", "--listen", "127.0.0.1:0", "--sandbox-listen", "127.0.0.1:0", "--e2b-listen", "127.0.0.1:0", "--api-keys", BENCH_KEYS, "--kv"])
        .arg(data.join("kv.db"))
        .arg("--data-dir")
        .arg(data.join("interpreter"))
        // Room for the commands row's folder of 1,000 files (the default quota is 1,000 entries a session).
        .args(["--max-session-files", "5000"])
        .arg("--wheelhouse")
        .arg(root().join(crate::runtime_wheels::WHEELHOUSE_DIR))
        .arg("--runner")
        .arg(runner)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .current_dir(root())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting anypath up")?;
    let stderr = child.stderr.take().context("app stderr")?;
    let process = Running(child);
    let (address, sandbox, e2b) = listen_addresses(stderr)?;
    Ok(BenchApp { _process: process, base: format!("http://{address}"), sandbox: format!("http://{sandbox}"), e2b: format!("http://{e2b}") })
}

/// The app under the real `spin up`, beside `anypath sandbox serve --token`
/// (the shape of a Spin deployment), each on a fresh data directory.
struct SpinApp {
    _spin: Running,
    _sandbox: Running,
    base: String,
}

/// How `spin up`'s SQLite key-value file journals its transactions.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Journal {
    /// As Spin makes the file: a rollback journal, several syncs per transaction.
    Default,
    /// Write-ahead logging, set on the file before Spin first opens it (what the README advises).
    Wal,
}

fn start_spin_app(spin: &Path, binary: &Path, runner: &Path, data: &Path, env: &[(String, String)], journal: Journal) -> anyhow::Result<SpinApp> {
    const TOKEN: &str = "bench-sandbox-token";
    std::fs::create_dir_all(data)?;
    if journal == Journal::Wal {
        // The mode is kept in the file: Spin's connection opens it in it.
        let db = rusqlite::Connection::open(data.join("kv.db"))?;
        let mode: String = db.query_row("PRAGMA journal_mode=WAL", [], |row| row.get(0))?;
        anyhow::ensure!(mode == "wal", "the key-value file is in {mode} mode, not wal");
    }
    let mut sandbox = Command::new(binary)
        .args(["sandbox", "serve", "--listen", "127.0.0.1:0", "--token", TOKEN, "--runner"])
        .arg(runner)
        .arg("--data-dir")
        .arg(data.join("interpreter"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting anypath sandbox serve")?;
    let stderr = sandbox.stderr.take().context("sandbox stderr")?;
    let sandbox = Running(sandbox);
    let sandbox_address = announced(stderr, |line| {
        let entry: Value = serde_json::from_str(line).ok()?;
        (entry["message"] == "sandbox serving").then(|| entry["listen"].as_str().unwrap_or_default().to_owned())
    })
    .context("anypath sandbox serve did not start serving")?;
    let runtime_config = data.join("runtime-config.toml");
    let kv = toml::Value::String(data.join("kv.db").display().to_string());
    std::fs::write(&runtime_config, format!("[key_value_store.default]\ntype = \"spin\"\npath = {kv}\n"))?;
    let mut child = Command::new(spin)
        .process_group(0)
        .args(["up", "--quiet", "--listen", "127.0.0.1:0", "--runtime-config-file"])
        .arg(&runtime_config)
        .arg("--state-dir")
        .arg(data.join("spin-state"))
        .env("SPIN_VARIABLE_SANDBOX_HOSTS", &sandbox_address)
        .env("SPIN_VARIABLE_SANDBOX_ALLOWED", &sandbox_address)
        .env("SPIN_VARIABLE_SANDBOX_TOKEN", TOKEN)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .current_dir(root())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("starting spin up")?;
    let stdout = child.stdout.take().context("spin stdout")?;
    let spin = Running(child);
    let address = announced(stdout, |line| line.trim().strip_prefix("Serving http://").map(str::to_owned))
        .context("spin up did not start serving")?;
    Ok(SpinApp { _spin: spin, _sandbox: sandbox, base: format!("http://{address}") })
}

/// Reads `output` until `pick` finds the address in a line, then keeps
/// draining it on a thread so the process never writes into a full pipe.
fn announced<T: Send + 'static>(
    output: impl std::io::Read + Send + 'static,
    pick: impl Fn(&str) -> Option<T> + Send + 'static,
) -> anyhow::Result<T> {
    let (found, address) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(output).lines().map_while(Result::ok) {
            if let Some(address) = pick(&line) {
                let _ = found.send(address);
            }
        }
    });
    address.recv_timeout(std::time::Duration::from_secs(120)).context("no address announced")
}

/// Runs the REST rows on json-server, `anypath up` with the store on
/// SQLite (key-value) and on Redis, and the app under `spin up` when there
/// is a Spin CLI; then, for [`AppSections::All`], the code interpreter's rows.
pub fn run_app_bench(binary: &Path, runner: &Path, redis_server: &Path, sections: AppSections) -> anyhow::Result<()> {
    let oha = ensure_oha()?;
    let data = std::env::temp_dir().join(format!("anypath-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&data);
    let load_before = crate::bench::machine::load_average();
    if sections == AppSections::Javascript {
        let app = start_app(binary, runner, &data.join("javascript"), &[])?;
        crate::bench::javascript::rows(&oha, &app.sandbox)?;
        drop(app);
        let _ = std::fs::remove_dir_all(&data);
        return Ok(());
    }
    if sections == AppSections::Fair {
        let stub = LlmStub::start()?;
        let app = start_app(binary, runner, &data.join("sqlite"), &stub.app_env())?;
        crate::bench::fair::endless_blocks(&oha, &app.sandbox)?;
        crate::bench::fair::through_app(&oha, "anypath up", &app.base, Some(&app.sandbox))?;
        drop(app);
        // Under `spin up` the host is Spin's: what a flood does there.
        if let Some(spin) = crate::spin::find()? {
            let under_spin = start_spin_app(&spin.path, binary, runner, &data.join("spin"), &stub.app_env(), Journal::Default)?;
            crate::bench::fair::through_app(&oha, &spin.version, &under_spin.base, None)?;
        }
        let _ = std::fs::remove_dir_all(&data);
        return Ok(());
    }

    let json_server = JsonServer::start(&data.join("json-server"))?;
    let reference = Server { name: format!("json-server {}", json_server.version), base: &json_server.base, planner: None };
    let (reference, answers) = rest::measure(&oha, &reference, None)?;
    drop(json_server);

    // Every anypath server plans in `auto` mode against the stub: the rules
    // plan the CRUD rows (checked), the stub's cached plan the one path they do not.
    let stub = LlmStub::start()?;
    let planned = stub.app_env();
    let app = start_app(binary, runner, &data.join("sqlite"), &planned)?;
    let sqlite = Server { name: "anypath up, sqlite".into(), base: &app.base, planner: Some(&stub) };
    let (sqlite, _) = rest::measure(&oha, &sqlite, Some(&answers))?;
    let redis = BenchRedis::start(redis_server, &data.join("redis-data"))?;
    let on_redis = start_app(binary, runner, &data.join("redis"), &[redis.app_env(), planned.clone()].concat())?;
    let redis_rows = Server { name: "anypath up, redis".into(), base: &on_redis.base, planner: Some(&stub) };
    let (redis_rows, _) = rest::measure(&oha, &redis_rows, Some(&answers))?;
    let spin = crate::spin::find()?;
    let mut spin_rows = Vec::new();
    if let Some(spin) = &spin {
        let under_spin = start_spin_app(&spin.path, binary, runner, &data.join("spin"), &planned, Journal::Default)?;
        let server = Server { name: "spin up, sqlite".into(), base: &under_spin.base, planner: Some(&stub) };
        spin_rows.push(rest::measure(&oha, &server, Some(&answers))?.0);
        drop(under_spin);
        let under_spin = start_spin_app(&spin.path, binary, runner, &data.join("spin-wal"), &planned, Journal::Wal)?;
        let server = Server { name: "spin up, sqlite wal".into(), base: &under_spin.base, planner: Some(&stub) };
        spin_rows.push(rest::measure(&oha, &server, Some(&answers))?.0);
        drop(under_spin);
        // The store on Redis under Spin too: a Redis server of its own, so
        // its records start from the same ids.
        let spin_redis = BenchRedis::start(redis_server, &data.join("redis-spin-data"))?;
        let under_spin =
            start_spin_app(&spin.path, binary, runner, &data.join("spin-redis"), &[spin_redis.app_env(), planned.clone()].concat(), Journal::Default)?;
        let server = Server { name: "spin up, redis".into(), base: &under_spin.base, planner: Some(&stub) };
        spin_rows.push(rest::measure(&oha, &server, Some(&answers))?.0);
    }
    let anypath: Vec<Measured> = [sqlite, redis_rows].into_iter().chain(spin_rows).collect();

    println!("\nREST face beside json-server: the same {RECORDS} records, created through each server's POST; {} requests per row ({} for the list), load from oha {OHA_VERSION}", rest::REQUESTS, rest::LIST_REQUESTS);
    println!("anypath plans in auto mode against a model stub: the rules plan the CRUD rows, the cached plan the last; json-server has no planner");
    println!("last column: the anypath server's req/s over json-server's on the same row");
    println!(
        "machine: {} cores, load average (1, 5, 15 min) {load_before} before the rows, {} after",
        crate::bench::machine::cores(),
        crate::bench::machine::load_average()
    );
    rest::print_table(&reference, &anypath);
    for measured in &anypath {
        println!("cached LLM plan against the rules-planned GET, {}: {} (goal: p50 within 2x)", measured.server, rest::cached_against_rules(measured));
        for (request, phases) in &measured.phases {
            println!("  where the time goes, {} (Server-Timing medians, c=1): {phases}", request.label());
        }
    }
    let [on_sqlite, on_redis_rows, rest @ ..] = anypath.as_slice() else { bail!("the SQLite and Redis rows are missing") };
    println!("p50 on Redis against SQLite (anypath up): {}", rest::p50_ratios(on_sqlite, on_redis_rows));
    match (&spin, rest) {
        (Some(spin), [on_spin, on_spin_wal, on_spin_redis, ..]) => {
            println!("p50 under {} against anypath up (SQLite): {}", spin.version, rest::p50_ratios(on_sqlite, on_spin));
            println!("p50 under {} with the key-value file in WAL mode against anypath up (SQLite): {}", spin.version, rest::p50_ratios(on_sqlite, on_spin_wal));
            println!("p50 under {} on Redis against anypath up on Redis: {}", spin.version, rest::p50_ratios(on_redis_rows, on_spin_redis));
        }
        _ => println!("spin up rows skipped: no Spin CLI found (set SPIN_BIN, or put spin on PATH)"),
    }

    let client = reqwest::blocking::Client::new();
    let get = || -> anyhow::Result<()> {
        let response = client.get(format!("{}/members/42", on_redis.base)).send()?;
        anyhow::ensure!(response.status() == 200, "GET answered {}", response.status());
        Ok(())
    };
    let post = || -> anyhow::Result<()> {
        let response = client.post(format!("{}/members/", on_redis.base)).header("content-type", "application/json").body(MEMBER).send()?;
        anyhow::ensure!(response.status() == 201, "POST answered {}", response.status());
        Ok(())
    };
    println!(
        "Redis round trips per request (MONITOR, 50 requests each): GET /members/42 {:.1}, POST /members/ {:.1}",
        redis.round_trips(50, get)?,
        redis.round_trips(50, post)?
    );
    drop(on_redis);
    drop(redis);

    if sections == AppSections::All {
        interpreter_over_mcp(&oha, &app.sandbox)?;
        crate::bench::javascript::rows(&oha, &app.sandbox)?;
        e2b_sdk_row(&app)?;
        crate::bench::jupyter::row(&app.sandbox, "bench-a")?;
        crate::bench::fair::endless_blocks(&oha, &app.sandbox)?;
        crate::bench::fair::through_app(&oha, "anypath up", &app.base, Some(&app.sandbox))?;
    }
    drop(app);
    let _ = std::fs::remove_dir_all(&data);
    Ok(())
}

/// A one-line cell in a warm session, through `POST /v1/sessions/{id}/run`
/// and through `tools/call run_python` on `/mcp`: the protocol's overhead.
fn interpreter_over_mcp(oha: &Path, sandbox: &str) -> anyhow::Result<()> {
    let run_url = format!("{sandbox}/v1/sessions/bench/run");
    let run_body = r#"{"code":"x = 1"}"#;
    let mcp_url = format!("{sandbox}/mcp");
    let mcp_body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"run_python","arguments":{"session_id":"bench","code":"x = 1"}}}"#;
    let mcp_headers = ["-H", "accept: application/json, text/event-stream", "-H", "mcp-protocol-version: 2025-06-18", "-H", "x-api-key: bench-a"];
    // Both must really run the cell (a tool error is HTTP 200 too), and the session gets warm.
    let client = reqwest::blocking::Client::new();
    let plain: Value = client.post(&run_url).header("content-type", "application/json").header("x-api-key", "bench-a").body(run_body).send()?.json()?;
    if plain["exit_code"] != 0 {
        bail!("the warm-up run failed: {plain}");
    }
    let mut call = client.post(&mcp_url).header("content-type", "application/json").body(mcp_body);
    for pair in mcp_headers.chunks(2) {
        if let Some((name, value)) = pair[1].split_once(": ") {
            call = call.header(name, value);
        }
    }
    let answer: Value = call.send()?.json()?;
    if answer["result"]["isError"] != false || answer["result"]["structuredContent"]["exit_code"] != 0 {
        bail!("run_python over MCP failed: {answer}");
    }

    println!("\ncode interpreter, a one-line cell in a warm session, {REQUESTS} requests per row");
    println!("{:<34} {:>5} {:>10} {:>10} {:>10}", "request", "conc", "p50", "p99", "req/s");
    let post = ["-m", "POST", "-T", "application/json", "-d"];
    let http = load(oha, &run_url, REQUESTS, "1", &[&post[..], &[run_body, "-H", "x-api-key: bench-a"]].concat())?;
    report("POST /v1/sessions/{id}/run", "1", &http);
    let mcp = load(oha, &mcp_url, REQUESTS, "1", &[&post[..], &[mcp_body], &mcp_headers[..]].concat())?;
    report("MCP tools/call run_python", "1", &mcp);
    let p50 = |result: &Value| result["latencyPercentiles"]["p50"].as_f64().unwrap_or(f64::NAN) * 1e6;
    let (http_us, mcp_us) = (p50(&http), p50(&mcp));
    println!(
        "MCP overhead at p50: {:+.0} us ({:.2}x the plain HTTP API)",
        mcp_us - http_us,
        mcp_us / http_us
    );
    Ok(())
}

/// Runs of the E2B row, each path.
const E2B_RUNS: &str = "30";

/// A new sandbox and its first result through E2B's Python SDK, beside a
/// new session and its first run through the plain HTTP API, in one run.
fn e2b_sdk_row(app: &BenchApp) -> anyhow::Result<()> {
    let python = crate::venv::ensure_e2b_sdk()?;
    let output = Command::new(python)
        .arg(root().join("tests/support/e2b_bench.py"))
        .args([&app.e2b, &app.sandbox, "e2b_be9c4", "bench-a", E2B_RUNS])
        .output()
        .context("running the E2B benchmark client")?;
    if !output.status.success() {
        bail!("the E2B benchmark client failed: {}", String::from_utf8_lossy(&output.stderr));
    }
    let figures: Value = serde_json::from_slice(&output.stdout).context("the E2B benchmark's JSON")?;
    let quantile = |key: &str, q: f64| -> f64 {
        let mut values: Vec<f64> = figures[key].as_array().into_iter().flatten().filter_map(Value::as_f64).collect();
        values.sort_by(f64::total_cmp);
        let index = ((values.len() as f64 - 1.0) * q).round() as usize;
        values.get(index).copied().unwrap_or(f64::NAN)
    };
    println!("
a new sandbox and its first result (data runtime), {E2B_RUNS} runs per row, c=1, one Python client");
    println!("{:<46} {:>10} {:>10}", "path", "p50", "p99");
    let row = |name: &str, key: &str| println!("{name:<46} {:>8.1}ms {:>8.1}ms", quantile(key, 0.5), quantile(key, 0.99));
    row("E2B SDK: Sandbox.create() + run_code", "sdk_ms");
    row("HTTP API: POST /v1/sessions + run", "http_ms");
    println!(
        "E2B SDK p50 / HTTP API p50 = {:.2}x (E2B's own create alone: 150-450 ms)",
        quantile("sdk_ms", 0.5) / quantile("http_ms", 0.5)
    );
    println!("\nsnapshots through E2B's SDK: a sandbox holding a DataFrame of 1,000 rows and a file, {E2B_RUNS} runs");
    println!("{:<46} {:>10} {:>10}", "path", "p50", "p99");
    row("create_snapshot()", "snapshot_ms");
    row("Sandbox.create(snapshot) + first run_code", "from_snapshot_ms");
    println!(
        "goals: create_snapshot p50 <= 30 ms, from a snapshot to its first result <= 15 ms (E2B documents seconds); \
from a snapshot / fresh sandbox at p50 = {:.2}x",
        quantile("from_snapshot_ms", 0.5) / quantile("sdk_ms", 0.5)
    );
    println!("\ncommands through E2B's SDK (commands.run) in one sandbox, {E2B_RUNS} runs each; natively started processes of this host beside them");
    println!("{:<46} {:>10} {:>10}", "path", "p50", "p99");
    row("commands.run(\"echo hi\")", "echo_ms");
    row("commands.run(\"python -c 'print(1)'\")", "python_ms");
    row("commands.run(\"ls -la\"), 1,000 files", "ls_ms");
    row("!pip install python-slugify + its import", "pip_ms");
    row("native: bash -c 'echo hi'", "native_echo_ms");
    row("native: python3 -I -c 'print(1)'", "native_python_ms");
    println!(
        "goals: echo p50 <= 3 ms, python -c p50 <= 5 ms, ls -la of 1,000 files <= 10 ms, pip install and import <= 300 ms; \
python -c / native python3 at p50 = {:.2}x",
        quantile("python_ms", 0.5) / quantile("native_python_ms", 0.5)
    );
    Ok(())
}

/// The app's address and its sandbox listener's, from its log line "app serving".
fn listen_addresses(stderr: impl std::io::Read + Send + 'static) -> anyhow::Result<(String, String, String)> {
    announced(stderr, |line| {
        let entry: Value = serde_json::from_str(line).ok()?;
        let text = |key: &str| entry[key].as_str().unwrap_or_default().to_owned();
        (entry["message"] == "app serving").then(|| (text("listen"), text("sandbox"), text("e2b")))
    })
    .context("anypath up did not start serving")
}
