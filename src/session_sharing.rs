//! Where the code interpreter keeps sessions: on this host's disk (the
//! default), or shared by every host of a fleet through an S3-compatible
//! object store and Redis, so any host serves any session.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use anypath_interpreter::{Interpreter, InterpreterConfig};
use anypath_sandbox::SessionRuntime;
use anypath_shared_sessions::{ObjectLocation, SharedSessionStore, SharedStoreOptions};
use clap::Args;

/// Sessions shared by several hosts (both flags, or neither).
#[derive(Args, Clone, Debug)]
pub struct SharingArgs {
    /// Keep sessions' state images and files in this S3-compatible object
    /// store, `s3://BUCKET[/PREFIX]`, so that any host sharing it (and
    /// `--coordination`) serves any session. The endpoint, region and
    /// credentials come from `AWS_ENDPOINT_URL`, `AWS_REGION`,
    /// `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY`; `AWS_ALLOW_HTTP=true`
    /// for a plain-HTTP endpoint.
    #[arg(long, env = "ANYPATH_SESSION_STORE", requires = "coordination")]
    session_store: Option<String>,
    /// The Redis the hosts sharing `--session-store` coordinate on
    /// (`redis://HOST:PORT`): which host holds each session live, under a
    /// lease, and the pointer to its newest image.
    #[arg(long, env = "ANYPATH_COORDINATION", requires = "session_store")]
    coordination: Option<String>,
    /// Seconds a host's hold on a live session lasts without renewal: the
    /// sessions of a host that died are taken over within this.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    lease_seconds: u64,
    /// Megabytes of state-image segments each host keeps in memory: a
    /// session that comes back fetches only the segments that changed
    /// since this host last saw it.
    #[arg(long, default_value_t = 256)]
    segment_cache_mb: usize,
    /// Seconds an object of the shared store that nothing names any more
    /// (an old image's pack, a file's content, a manifest a dead host left)
    /// is kept before the fleet's sweep removes it.
    #[arg(long, default_value_t = 600, value_parser = clap::value_parser!(u64).range(1..))]
    sweep_grace_seconds: u64,
    /// Seconds between the fleet's sweeps (one host sweeps at a time).
    #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..))]
    sweep_every_seconds: u64,
}

impl SharingArgs {
    /// The interpreter over `sandboxes` with `config`, keeping sessions
    /// where these flags say.
    pub async fn open(&self, sandboxes: Vec<SessionRuntime>, config: InterpreterConfig) -> anyhow::Result<Interpreter> {
        let (Some(objects), Some(coordination)) = (&self.session_store, &self.coordination) else {
            return Interpreter::new(sandboxes, config).context("starting the code interpreter");
        };
        let config = config.with_resolved_root()?;
        let mut options = SharedStoreOptions::new(
            ObjectLocation::parse(objects).context("--session-store")?,
            coordination.clone(),
            format!("{}-{}", hostname(), uuid_like()),
            Duration::from_secs(self.lease_seconds),
        );
        options.segment_cache_bytes = self.segment_cache_mb << 20;
        options.grace = Duration::from_secs(self.sweep_grace_seconds);
        options.sweep_every = Duration::from_secs(self.sweep_every_seconds);
        let store = SharedSessionStore::open(&config.root, options).await.context("opening the shared session store")?;
        // Starting sweeps the homes an earlier process left, asking the
        // shared store of each: store calls wait on the runtime, so not on it.
        let store = store as Arc<dyn anypath_interpreter::SessionStore>;
        tokio::task::spawn_blocking(move || Interpreter::with_store(sandboxes, config, store))
            .await
            .context("starting the code interpreter")?
            .context("starting the code interpreter")
    }
}

/// This machine's name, for reading which host holds a session.
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname").map(|h| h.trim().to_owned()).ok().filter(|h| !h.is_empty() && !h.contains(char::is_whitespace)).unwrap_or_else(|| "host".to_owned())
}

/// A name no other process of the fleet has, restarts included.
fn uuid_like() -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    format!("{}-{nanos:x}", std::process::id())
}
