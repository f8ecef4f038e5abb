//! The object store and Redis one test run's fleet suites share: one
//! SeaweedFS ([`ObjectStore`], with the bucket the suites use) and one
//! `redis-server`, on free loopback ports, started before the tests and
//! stopped after them. The tests find them by
//! `ANYPATH_FLEET_S3` and `ANYPATH_FLEET_REDIS` and keep apart by prefix; a
//! test that kills its store or Redis starts its own.

use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::Context;

use crate::seaweedfs::ObjectStore;
use crate::shell::{Running, ScratchDir};

/// The two servers, stopped (and then their data removed) when dropped.
pub struct FleetServers {
    _store: ObjectStore,
    _redis: Running,
    s3: String,
    redis_url: String,
    /// Last: removed once both servers are gone.
    _dir: ScratchDir,
}

impl FleetServers {
    /// Starts both under a fresh directory in `scratch`; the bucket is made.
    pub fn start(weed: &Path, redis_server: &Path, scratch: &Path) -> anyhow::Result<Self> {
        let dir = scratch.join(format!("anypath-fleet-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("redis"))?;
        let redis_port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let redis = Command::new(redis_server)
            .args(["--bind", "127.0.0.1", "--port", &redis_port.to_string(), "--save", "", "--appendonly", "yes", "--dir"])
            .arg(dir.join("redis"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting redis-server")?;
        let redis = Running(redis);
        let store = ObjectStore::start(weed, &dir.join("store"))?;
        let s3 = store.endpoint().to_owned();
        Ok(Self { _store: store, _redis: redis, s3, redis_url: format!("redis://127.0.0.1:{redis_port}"), _dir: ScratchDir(dir) })
    }

    /// The variables the tests find the servers by.
    pub fn env(&self) -> [(&'static str, &str); 2] {
        [("ANYPATH_FLEET_S3", &self.s3), ("ANYPATH_FLEET_REDIS", &self.redis_url)]
    }
}
