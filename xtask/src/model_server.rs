//! One model server for a whole test run: `tests/support/llama_server.py`
//! serving the small model, started once so that the small-model suites
//! share one loaded model (`ANYPATH_LLM_ADDRESS`) instead of each loading
//! its own. It is stopped when this value is dropped, and it exits by itself
//! when its standard input closes, so it never outlives the run.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{Context, bail};
use serde::Deserialize;

use crate::shell::{root, step};

/// The suites that share the server: each gets a slot of its own, and
/// llama.cpp decodes their requests together (two suites side by side took
/// 185 s here, one after the other on one slot about twice that).
pub const SUITES: usize = 2;

/// How long loading the model may take on a busy 2-core machine.
const LOAD_TIMEOUT: Duration = Duration::from_secs(300);

/// The line the script prints once `/health` answers.
#[derive(Deserialize)]
struct Announcement {
    message: String,
    listen: String,
}

/// A running model server.
pub struct ModelServer {
    child: Child,
    _stdin: ChildStdin,
    /// `127.0.0.1:port`.
    pub address: String,
}

impl ModelServer {
    /// Starts the server on `model` with the venv's `python` and waits until
    /// it answers. Its log goes to `target/llama-server.log`.
    pub fn start(python: &Path, model: &Path) -> anyhow::Result<Self> {
        step(&format!("starting one model server for the small-model suites (llama.cpp, two threads, {SUITES} slots)"));
        let log_path = root().join("target/llama-server.log");
        let log = std::fs::File::create(&log_path).with_context(|| format!("creating {}", log_path.display()))?;
        let mut child = Command::new(python)
            .arg(root().join("tests/support/llama_server.py"))
            .arg("--model")
            .arg(model)
            .args(["--port", "0", "--parallel", &SUITES.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .context("starting tests/support/llama_server.py")?;
        let stdin = child.stdin.take().context("the server's stdin")?;
        let stdout = child.stdout.take().context("the server's stdout")?;
        let (found, announced) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Ok(announcement) = serde_json::from_str::<Announcement>(&line)
                    && announcement.message == "llm serving"
                {
                    let _ = found.send(announcement.listen);
                }
            }
        });
        let mut server = Self { child, _stdin: stdin, address: String::new() };
        match announced.recv_timeout(LOAD_TIMEOUT) {
            Ok(address) => server.address = address,
            Err(_) => bail!("the model server did not report its address within {} s; see {}", LOAD_TIMEOUT.as_secs(), log_path.display()),
        }
        step(&format!("model server on {}", server.address));
        Ok(server)
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
