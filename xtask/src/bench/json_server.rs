//! json-server, the reference the benchmark sets anypath's REST face
//! beside: the version `tests/frontends/package-lock.json` pins, installed
//! by the same `npm ci` as the frontend provider tests, run by Node on a
//! free port with its database file in the benchmark's directory.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde::Deserialize;

use crate::shell::Running;

/// A json-server serving an empty `members` collection; killed (with its
/// process group) when dropped.
pub struct JsonServer {
    _process: Running,
    pub base: String,
    /// The installed version, as its `package.json` says.
    pub version: String,
}

/// The part of a `package.json` read here.
#[derive(Deserialize)]
struct PackageJson {
    version: String,
}

/// The record that tells this server from whatever else may answer on a reused port.
#[derive(Deserialize)]
struct Mark {
    mark: String,
}

/// Free ports tried: one may be taken between finding it and json-server binding it.
const PORT_TRIES: usize = 5;

impl JsonServer {
    /// Installs the pinned packages when needed, then starts json-server on
    /// `dir/db.json` (written here: `members` empty).
    pub fn start(dir: &Path) -> anyhow::Result<Self> {
        let frontends = crate::frontends::ensure()?;
        let package = frontends.dir.join("node_modules/json-server");
        let manifest = std::fs::read(package.join("package.json")).context("reading json-server's package.json")?;
        let version = serde_json::from_slice::<PackageJson>(&manifest).context("json-server's package.json")?.version;
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let db = dir.join("db.json");
        let mark = dir.display().to_string();
        let seed = serde_json::json!({"members": [], "bench": {"mark": mark}});
        std::fs::write(&db, seed.to_string()).with_context(|| format!("writing {}", db.display()))?;
        for _ in 0..PORT_TRIES {
            let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
            let child = Command::new(&frontends.node)
                .arg(package.join("lib/cli/bin.js"))
                .args(["--host", "127.0.0.1", "--port", &port.to_string(), "--quiet"])
                .arg(&db)
                // Its static files would come from ./public: none here.
                .current_dir(dir)
                .process_group(0)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .context("starting json-server")?;
            let mut process = Running(child);
            let base = format!("http://127.0.0.1:{port}");
            if serves(&mut process.0, &base, &mark)? {
                return Ok(Self { _process: process, base, version });
            }
        }
        bail!("json-server could not serve on a free port in {PORT_TRIES} tries")
    }
}

/// Waits until `child` answers `GET /bench` with this instance's mark;
/// false once it has exited (it lost the port).
fn serves(child: &mut Child, base: &str, mark: &str) -> anyhow::Result<bool> {
    let client = reqwest::blocking::Client::builder().timeout(Duration::from_secs(2)).build()?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if child.try_wait()?.is_some() {
            return Ok(false);
        }
        let answer = client.get(format!("{base}/bench")).send().and_then(|r| r.json::<Mark>());
        if answer.is_ok_and(|answer| answer.mark == mark) {
            return Ok(true);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    bail!("json-server did not serve {base} within 30 s")
}
