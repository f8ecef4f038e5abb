//! The fleet the fleet benchmark runs on: one SeaweedFS object store
//! ([`ObjectStore`]), one Redis and `anypath sandbox serve` hosts sharing
//! them, each host started, stopped gracefully and started again on demand,
//! its log lines about hand-overs and stops kept for the report; and the
//! HTTP calls the rows time, and what the store alone costs ([`time_plain`]). The same hosts also run alone, on a data directory of their own
//! ([`FleetConfig::local`]), for the scale section.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};

use crate::seaweedfs::{BUCKET, ObjectStore, START_TIMEOUT};
use crate::shell::Running;

/// The prefix every host keeps its sessions under, in the store's [`BUCKET`].
const PREFIX: &str = "sessions";
/// Every host signs links with the same key, as a fleet must.
const SIGNING_KEY: &str = "fleet-bench-signing-key-0123456789abcdef";
/// Idle hibernation never fires during a run: only the benchmark decides when to hibernate.
const NEVER_IDLE: &str = "86400";

/// Plain `PUT`s and `GET`s of `n` objects of `bytes` pseudo-random
/// bytes, one after another on one connection: what the store itself
/// costs a hand-over's image, apart from the hosts.
pub fn time_plain(store: &ObjectStore, bytes: usize, n: usize) -> anyhow::Result<(Latencies, Latencies)> {
    let client = reqwest::blocking::Client::builder().timeout(Duration::from_secs(60)).build()?;
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let body: Vec<u8> = (0..bytes)
        .map(|_| {
            // xorshift64: incompressible enough, and no dependency for it.
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect();
    let (mut puts, mut gets) = (Vec::new(), Vec::new());
    for i in 0..n {
        let url = format!("{}/{BUCKET}/plain/{i}", store.endpoint());
        let started = Instant::now();
        let response = client.put(&url).body(body.clone()).send()?;
        anyhow::ensure!(response.status().is_success(), "PUT {url}: {}", response.status());
        puts.push(started.elapsed());
        let started = Instant::now();
        let response = client.get(&url).send()?;
        anyhow::ensure!(response.status().is_success(), "GET {url}: {}", response.status());
        let got = response.bytes()?.len();
        gets.push(started.elapsed());
        anyhow::ensure!(got == bytes, "GET {url} gave {got} bytes, not {bytes}");
        let _ = client.delete(&url).send();
    }
    Ok((Latencies::of(&puts), Latencies::of(&gets)))
}

/// Reads the fleet's session records on Redis (`redis-cli`), for what no
/// answer tells: the size of a session's newest image.
pub struct Records {
    cli: PathBuf,
    port: u16,
}

impl Records {
    /// The records on the Redis at `port`, read with the `redis-cli` beside `redis_server`.
    pub fn new(redis_server: &Path, port: u16) -> Self {
        Self { cli: redis_server.with_file_name("redis-cli"), port }
    }

    /// The bytes of the session's newest image (of the default tenant,
    /// the one a call without a key acts for), when it has one.
    pub fn image_bytes(&self, session: &str) -> Option<u64> {
        let key = format!("anypath:{BUCKET}:{PREFIX}:record:default:{session}");
        let output = Command::new(&self.cli).args(["-p", &self.port.to_string(), "HGET", &key, "image_bytes"]).output().ok()?;
        String::from_utf8_lossy(&output.stdout).trim().parse().ok()
    }
}

/// How a host is started beyond what every host of the fleet shares.
#[derive(Clone, Debug, Default)]
pub struct HostOptions {
    /// `--checkpoint every-run` instead of the default `idle`.
    pub every_run: bool,
    /// `--session-memory-mb`: a small budget makes one run on a host
    /// hibernate that host's other sessions.
    pub session_memory_mb: Option<u64>,
    /// Idle sessions stay live (a lone host hibernates them after a minute
    /// by default): only the memory budget hibernates them.
    pub never_idle: bool,
}

/// What every host of the fleet is started with.
pub struct FleetConfig {
    /// `anypath`, as built.
    binary: PathBuf,
    /// The Python runner component.
    runner: PathBuf,
    /// Hosts' data directories go under it.
    dir: PathBuf,
    /// The store and Redis the hosts share; `None`: hosts that keep their
    /// sessions under their own data directory ([`Self::local`]).
    shared: Option<Shared>,
}

/// Where a fleet's hosts share sessions.
struct Shared {
    /// The environment that puts a host's S3 client on the store.
    env: Vec<(&'static str, String)>,
    /// `redis://127.0.0.1:<port>`.
    coordination: String,
}

impl FleetConfig {
    /// The hosts' shared configuration: `store` for images and files, Redis on `redis_port`.
    pub fn new(binary: &Path, runner: &Path, dir: &Path, store: &ObjectStore, redis_port: u16) -> Self {
        let shared = Shared { env: store.env(), coordination: format!("redis://127.0.0.1:{redis_port}") };
        Self { binary: binary.to_owned(), runner: runner.to_owned(), dir: dir.to_owned(), shared: Some(shared) }
    }

    /// Hosts with no object store or Redis: each keeps its sessions under
    /// its own data directory (in `dir`), and every setting but the
    /// listener, the runner and that directory is the service's default.
    pub fn local(binary: &Path, runner: &Path, dir: &Path) -> Self {
        Self { binary: binary.to_owned(), runner: runner.to_owned(), dir: dir.to_owned(), shared: None }
    }
}

/// What a host's graceful stop did, as its log says.
#[derive(Clone, Copy, Debug)]
pub struct Stopped {
    /// Live sessions whose state it wrote.
    pub hibernated: u64,
    /// Sessions it let go of for another host (a lone host counts every session).
    pub handed_over: u64,
    /// Both, as the host timed them.
    pub elapsed_ms: u64,
}

/// A log line a host wrote, as far as the benchmark reads it.
#[derive(Clone, Debug)]
pub struct LogLine {
    /// The line's `message` (a line that is no JSON: the whole line).
    pub message: String,
    /// The session it is about, if it names one.
    pub session: Option<String>,
    /// `elapsed_us`, or `elapsed_ms` in microseconds, if it times something.
    pub elapsed_us: Option<u64>,
    /// The whole line.
    pub line: Value,
}

/// One `anypath sandbox serve` of the fleet.
pub struct Host {
    /// Its name in the report and its data directory's.
    pub name: String,
    options: HostOptions,
    /// `--data-dir`, kept over restarts.
    data_dir: PathBuf,
    process: Option<Running>,
    /// `http://127.0.0.1:<port>`, as its last start announced.
    pub base: String,
    /// Its hand-over, stop and warning lines, over every start.
    log: Arc<Mutex<Vec<LogLine>>>,
}

/// The messages kept from a host's log (besides warnings and errors).
const KEPT: &[&str] = &["session handed over", "sessions hibernated for the stop", "hand-over phases", "state parked", "saved state read"];

impl Host {
    /// Starts a host named `name` and waits until it serves.
    pub fn start(config: &FleetConfig, name: &str, options: HostOptions) -> anyhow::Result<Self> {
        let data_dir = config.dir.join(format!("host-{name}"));
        let mut host = Self { name: name.to_owned(), options, data_dir, process: None, base: String::new(), log: Arc::default() };
        host.start_again(config)?;
        Ok(host)
    }

    /// Starts the host (again, after [`Self::stop`]) on a free port over
    /// its data directory; returns how long it took to serve.
    pub fn start_again(&mut self, config: &FleetConfig) -> anyhow::Result<Duration> {
        anyhow::ensure!(self.process.is_none(), "host {} is running", self.name);
        let started = Instant::now();
        let mut command = Command::new(&config.binary);
        command
            .args(["sandbox", "serve", "--listen", "127.0.0.1:0", "--runner"])
            .arg(&config.runner)
            .arg("--data-dir")
            .arg(&self.data_dir)
            .args(["--checkpoint", if self.options.every_run { "every-run" } else { "idle" }])
            // Often enough that the many-sessions row reads what the store holds.
            .args(["--sweep-every-seconds", "15"])
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        match &config.shared {
            Some(shared) => command
                .args(["--session-store", &format!("s3://{BUCKET}/{PREFIX}"), "--coordination", &shared.coordination])
                .args(["--signing-key", SIGNING_KEY, "--hibernate-after-idle-seconds", NEVER_IDLE])
                .envs(shared.env.iter().map(|(k, v)| (k, v))),
            // A variable left in the environment must not make a lone host a fleet's.
            None => command.env_remove("ANYPATH_SESSION_STORE").env_remove("ANYPATH_COORDINATION"),
        };
        if self.options.never_idle && config.shared.is_none() {
            command.args(["--hibernate-after-idle-seconds", NEVER_IDLE]);
        }
        if let Some(mb) = self.options.session_memory_mb {
            command.args(["--session-memory-mb", &mb.to_string()]);
        }
        let mut child = command.spawn().context("starting anypath sandbox serve")?;
        let stderr = child.stderr.take().context("the host's stderr")?;
        let running = Running(child);
        let address = read_log(stderr, self.log.clone())?;
        self.process = Some(running);
        self.base = format!("http://{address}");
        Ok(started.elapsed())
    }

    /// SIGTERM, and waits for the process to end (a graceful stop hands
    /// its sessions to the store); returns how long that took.
    pub fn stop(&mut self) -> anyhow::Result<Duration> {
        let Some(mut running) = self.process.take() else { bail!("host {} is not running", self.name) };
        let started = Instant::now();
        let pid = i32::try_from(running.0.id())?;
        // SAFETY: kill(2) on our own child's pid; it touches no memory of ours.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let deadline = started + Duration::from_secs(300);
        loop {
            if let Some(status) = running.0.try_wait()? {
                anyhow::ensure!(status.success(), "host {} ended with {status} on SIGTERM", self.name);
                return Ok(started.elapsed());
            }
            if Instant::now() > deadline {
                bail!("host {} did not stop within five minutes of SIGTERM", self.name);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// The kept log lines so far.
    pub fn log(&self) -> Vec<LogLine> {
        self.log.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// What its last graceful stop logged it did, when a stop logged it.
    pub fn last_stop(&self) -> Option<Stopped> {
        let line = self.log().into_iter().rev().find(|l| l.message == "sessions hibernated for the stop")?;
        let count = |field: &str| line.line[field].as_u64().unwrap_or_default();
        Some(Stopped { hibernated: count("hibernated"), handed_over: count("handed_over"), elapsed_ms: count("elapsed_ms") })
    }

    /// Its data directory (`--data-dir`).
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// The running process's memory, when it runs and Linux tells.
    pub fn memory(&self) -> Option<crate::bench::machine::Memory> {
        crate::bench::machine::memory(self.process.as_ref()?.0.id())
    }
}

/// Reads the host's log until it announces its address, then keeps reading
/// it on a thread (so it never writes into a full pipe), keeping the lines
/// the report reads.
fn read_log(stderr: impl std::io::Read + Send + 'static, kept: Arc<Mutex<Vec<LogLine>>>) -> anyhow::Result<String> {
    let (found, address) = std::sync::mpsc::channel();
    let last: Arc<Mutex<std::collections::VecDeque<String>>> = Arc::default();
    let tail = last.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            {
                let mut last = tail.lock().unwrap_or_else(PoisonError::into_inner);
                if last.len() == 20 {
                    last.pop_front();
                }
                last.push_back(line.clone());
            }
            // Most lines are audit lines: only the few that can matter are parsed.
            let worth = line.contains("sandbox serving") || line.contains("\"WARN\"") || line.contains("\"ERROR\"") || KEPT.iter().any(|m| line.contains(m));
            if !worth {
                continue;
            }
            let Ok(entry) = serde_json::from_str::<Value>(&line) else {
                // Not a log line: an error the process printed as it ended.
                kept.lock().unwrap_or_else(PoisonError::into_inner).push(LogLine { message: line.clone(), session: None, elapsed_us: None, line: Value::String(line) });
                continue;
            };
            let message = entry["message"].as_str().unwrap_or_default().to_owned();
            if message == "sandbox serving" {
                let _ = found.send(entry["listen"].as_str().unwrap_or_default().to_owned());
                continue;
            }
            let session = entry["session"].as_str().map(str::to_owned);
            let elapsed_us = entry["elapsed_us"].as_u64().or_else(|| entry["elapsed_ms"].as_u64().map(|ms| ms * 1000));
            kept.lock().unwrap_or_else(PoisonError::into_inner).push(LogLine { message, session, elapsed_us, line: entry });
        }
    });
    address.recv_timeout(START_TIMEOUT).with_context(|| {
        let last = last.lock().unwrap_or_else(PoisonError::into_inner);
        format!("the host did not announce its address; its last lines:\n{}", Vec::from(last.clone()).join("\n"))
    })
}

/// A run's answer and how long it took, request to answer.
pub struct Timed {
    /// Request sent to answer read.
    pub elapsed: Duration,
    /// The run's report.
    pub answer: Value,
}

/// The HTTP calls of the benchmark, one client (kept-alive connections) for all hosts.
pub struct Calls {
    client: reqwest::blocking::Client,
}

impl Calls {
    /// A client whose calls give up after two minutes.
    pub fn new() -> anyhow::Result<Self> {
        Ok(Self { client: reqwest::blocking::Client::builder().timeout(Duration::from_secs(120)).build()? })
    }

    /// The host's `/healthz`.
    pub fn health(&self, host: &str) -> anyhow::Result<serde_json::Value> {
        let response = self.client.get(format!("{host}/healthz")).send()?;
        let status = response.status();
        anyhow::ensure!(status.is_success(), "/healthz on {host}: {status}");
        response.json().context("/healthz's answer")
    }

    /// Opens a `python` session on `host`.
    pub fn open(&self, host: &str, session: &str) -> anyhow::Result<()> {
        self.open_as(host, session, "python")
    }

    /// Opens the session in `runtime` on `host`.
    pub fn open_as(&self, host: &str, session: &str, runtime: &str) -> anyhow::Result<()> {
        let response = self.client.post(format!("{host}/v1/sessions")).json(&json!({"session_id": session, "runtime": runtime})).send()?;
        let status = response.status();
        anyhow::ensure!(status.is_success(), "opening {session} on {host}: {status} {}", response.text().unwrap_or_default());
        Ok(())
    }

    /// Runs `code` in the session on `host`; an error unless it answered
    /// 200 (a cell that raised answers 200 too: see [`Self::run_ok`]).
    pub fn run(&self, host: &str, session: &str, code: &str) -> anyhow::Result<Timed> {
        let started = Instant::now();
        let response = self.client.post(format!("{host}/v1/sessions/{session}/run")).json(&json!({"code": code})).send()?;
        let status = response.status();
        let body = response.bytes()?;
        let elapsed = started.elapsed();
        anyhow::ensure!(status.is_success(), "run in {session} on {host}: {status} {}", String::from_utf8_lossy(&body));
        Ok(Timed { elapsed, answer: serde_json::from_slice(&body).context("a run's answer")? })
    }

    /// [`Self::run`], and an error unless the cell ran through with its
    /// state kept (a state reset here would time a fresh session).
    pub fn run_ok(&self, host: &str, session: &str, code: &str) -> anyhow::Result<Timed> {
        let timed = self.run(host, session, code)?;
        if timed.answer["exit_code"] != 0 || timed.answer["state_reset"] == true {
            bail!("run in {session} on {host} did not keep its state: {}", timed.answer);
        }
        Ok(timed)
    }

    /// Closes the session (its state, files and records go) through `host`.
    pub fn close(&self, host: &str, session: &str) -> anyhow::Result<()> {
        let response = self.client.delete(format!("{host}/v1/sessions/{session}")).send()?;
        let status = response.status();
        anyhow::ensure!(status.is_success(), "closing {session} on {host}: {status} {}", response.text().unwrap_or_default());
        Ok(())
    }

    /// The value of `anypath_<name>` in the host's `/metrics` (0 when the
    /// host does not show it).
    pub fn metric(&self, host: &str, name: &str) -> anyhow::Result<f64> {
        let text = self.client.get(format!("{host}/metrics")).send()?.error_for_status()?.text()?;
        let wanted = format!("anypath_{name} ");
        Ok(text.lines().find_map(|line| line.strip_prefix(&wanted)).and_then(|v| v.trim().parse().ok()).unwrap_or(0.0))
    }

    /// The session as `host` describes it.
    pub fn describe(&self, host: &str, session: &str) -> anyhow::Result<Value> {
        let response = self.client.get(format!("{host}/v1/sessions/{session}")).send()?;
        let status = response.status();
        anyhow::ensure!(status.is_success(), "describing {session} on {host}: {status}");
        Ok(response.json()?)
    }
}

/// Milliseconds, sorted, with their quantiles.
pub struct Latencies(Vec<f64>);

impl Latencies {
    /// The durations, in milliseconds, sorted.
    pub fn of(durations: &[Duration]) -> Self {
        let mut ms: Vec<f64> = durations.iter().map(|d| d.as_secs_f64() * 1e3).collect();
        ms.sort_by(f64::total_cmp);
        Self(ms)
    }

    /// How many there are.
    pub fn n(&self) -> usize {
        self.0.len()
    }

    /// The `q` quantile (nearest rank), NaN when empty.
    pub fn quantile(&self, q: f64) -> f64 {
        if self.0.is_empty() {
            return f64::NAN;
        }
        let index = ((self.0.len() as f64 - 1.0) * q).round() as usize;
        self.0[index.min(self.0.len() - 1)]
    }

    /// The median, in milliseconds.
    pub fn p50(&self) -> f64 {
        self.quantile(0.5)
    }

    /// The 99th percentile, in milliseconds.
    pub fn p99(&self) -> f64 {
        self.quantile(0.99)
    }
}
