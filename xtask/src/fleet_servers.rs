//! The object store and Redis one test run's fleet suites share: one
//! SeaweedFS (`weed server -s3`) and one `redis-server` on free loopback
//! ports, started before the tests and stopped after them. The tests find
//! them by `ANYPATH_FLEET_S3` (the S3 endpoint, with the bucket
//! [`BUCKET`] made) and `ANYPATH_FLEET_REDIS`, and keep apart by prefix;
//! a test that kills its store or Redis starts its own.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

/// The bucket every fleet test keeps its sessions in.
pub const BUCKET: &str = "anypath-sessions";

/// The two servers, stopped (and their data removed) when dropped.
pub struct FleetServers {
    weed: Child,
    redis: Child,
    dir: PathBuf,
    s3: String,
    redis_url: String,
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

impl FleetServers {
    /// Starts both under a fresh directory in `scratch`, and makes the bucket.
    pub fn start(weed: &Path, redis_server: &Path, scratch: &Path) -> anyhow::Result<Self> {
        let dir = scratch.join(format!("anypath-fleet-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("weed"))?;
        std::fs::create_dir_all(dir.join("redis"))?;
        let redis_port = free_port()?;
        let redis = Command::new(redis_server)
            .args(["--bind", "127.0.0.1", "--port", &redis_port.to_string(), "--save", "", "--appendonly", "yes", "--dir"])
            .arg(dir.join("redis"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting redis-server")?;
        let ports: Vec<u16> = (0..8).map(|_| free_port()).collect::<anyhow::Result<_>>()?;
        let log = std::fs::File::create(dir.join("weed.log"))?;
        // The same servers and flags as the tests' own store (tests/common/seaweedfs.rs).
        let weed = Command::new(weed)
            .arg("-logtostderr")
            .arg("server")
            .arg(format!("-dir={}", dir.join("weed").display()))
            .args(["-ip=127.0.0.1", "-ip.bind=127.0.0.1"])
            .arg(format!("-master.port={}", ports[0]))
            .arg(format!("-master.port.grpc={}", ports[1]))
            .arg(format!("-volume.port={}", ports[2]))
            .arg(format!("-volume.port.grpc={}", ports[3]))
            .args(["-filer", &format!("-filer.port={}", ports[4]), &format!("-filer.port.grpc={}", ports[5])])
            .args(["-s3", &format!("-s3.port={}", ports[6]), &format!("-s3.port.grpc={}", ports[7])])
            .args(["-s3.port.iceberg=0", "-s3.port.lance=0", "-s3.iam=false", "-master.telemetry=false", "-master.resumeState=false"])
            .args(["-master.volumeSizeLimitMB=64", "-volume.max=64", "-volume.preStopSeconds=0"])
            .env_remove("AWS_ACCESS_KEY_ID")
            .env_remove("AWS_SECRET_ACCESS_KEY")
            .current_dir(&dir)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .context("starting weed")?;
        let mut servers = Self { weed, redis, s3: format!("http://127.0.0.1:{}", ports[6]), redis_url: format!("redis://127.0.0.1:{redis_port}"), dir };
        servers.make_bucket()?;
        Ok(servers)
    }

    /// Makes the bucket, once the gateway takes it (its volumes come up
    /// seconds after it answers).
    fn make_bucket(&mut self) -> anyhow::Result<()> {
        let client = reqwest::blocking::Client::builder().timeout(Duration::from_secs(5)).build()?;
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let made = client.put(format!("{}/{BUCKET}", self.s3)).send();
            let probe = client.put(format!("{}/{BUCKET}/probe", self.s3)).body("anypath").send();
            if made.is_ok() && probe.is_ok_and(|r| r.status().is_success()) {
                return Ok(());
            }
            if let Ok(Some(status)) = self.weed.try_wait() {
                bail!("weed exited ({status}) before it served; see {}", self.dir.join("weed.log").display());
            }
            if Instant::now() > deadline {
                bail!("SeaweedFS did not take a write within two minutes; see {}", self.dir.join("weed.log").display());
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The variables the tests find the servers by.
    pub fn env(&self) -> [(&'static str, &str); 2] {
        [("ANYPATH_FLEET_S3", &self.s3), ("ANYPATH_FLEET_REDIS", &self.redis_url)]
    }
}

impl Drop for FleetServers {
    fn drop(&mut self) {
        for child in [&mut self.weed, &mut self.redis] {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
