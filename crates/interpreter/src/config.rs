//! How an interpreter is configured: where it keeps sessions and artifacts
//! ([`Storage`]) and the limits and times its sessions live by
//! ([`InterpreterConfig`]), its snapshots' among them ([`SnapshotConfig`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anypath_sandbox::{FileQuota, Runtime};

use crate::error::InterpreterError;
use crate::stores::artifact_store::ArtifactConfig;
use crate::stores::dataset_store::DatasetConfig;

/// When a live session's state reaches its store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Checkpoint {
    /// When it is hibernated (idle, over the memory budget, handed over,
    /// on a graceful stop): a host that dies loses what ran since, and the
    /// next run says so.
    #[default]
    Idle,
    /// After every run, before its answer goes out: a host that dies loses
    /// no acknowledged run. A run that leaves a file open is checkpointed
    /// once the file is closed (an image cannot hold an open file).
    EveryRun,
}

/// Where sessions and artifacts live.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Storage {
    /// Under `root`: a restart of the host finds them again.
    #[default]
    Disk,
    /// In a fresh RAM-backed directory (`/dev/shm`), removed when the
    /// interpreter is dropped: nothing touches the disk.
    Memory,
}

/// How the interpreter keeps sessions.
#[derive(Debug, Clone)]
pub struct InterpreterConfig {
    /// Where session directories and artifacts live (with [`Storage::Disk`]).
    pub root: PathBuf,
    /// Whether `root` is on disk or a fresh directory in memory.
    pub storage: Storage,
    /// Idle time after which a session is removed, unless it asks for another.
    pub default_ttl: Duration,
    /// The longest idle TTL a session may ask for.
    pub max_ttl: Duration,
    /// Linear memory the live instances of all sessions may hold together;
    /// beyond it the least recently used idle sessions are hibernated.
    pub session_memory_bytes: u64,
    /// Idle time after which a live session is hibernated.
    pub hibernate_after_idle: Duration,
    /// When a live session's state is written to its store besides
    /// hibernation (see [`Checkpoint`]).
    pub checkpoint: Checkpoint,
    /// How long a run waits for the session's previous run before `Busy`.
    pub busy_wait: Duration,
    /// What a session directory may hold: checked inside the guest as code
    /// writes, and on every upload.
    pub quota: FileQuota,
    /// Retention and quota of artifacts.
    pub artifacts: ArtifactConfig,
    /// Largest artifact whose bytes [`crate::views::artifacts::Artifacts::read_artifact`] returns inline.
    pub read_cap_bytes: u64,
    /// Key signing download links; generated and kept under `root` when absent.
    pub signing_key: Option<Vec<u8>>,
    /// The service's public base URL (`https://sandbox.example.com`), for
    /// absolute links; callers that know the request's host may pass their own.
    pub public_url: Option<String>,
    /// The runtime of a session created without naming one; `None`:
    /// `python-data` when the interpreter offers it (analysis code imports
    /// pandas, numpy and matplotlib), else `python`.
    pub default_runtime: Option<Runtime>,
    /// Mounted datasets and the staged datasets' quota.
    pub datasets: DatasetConfig,
    /// Retention and quota of snapshots.
    pub snapshots: SnapshotConfig,
}

impl InterpreterConfig {
    /// Defaults: 15 minutes idle TTL, at most 4 hours, 2 GiB of live
    /// instances' memory, hibernation after 60 s idle, 10 s wait; 100 MiB per file, 500 MiB and 1000 entries per session; artifacts kept 24 hours, 1 GiB per tenant, read inline up to 5 MiB.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            storage: Storage::Disk,
            default_ttl: Duration::from_secs(15 * 60),
            max_ttl: Duration::from_secs(4 * 3600),
            session_memory_bytes: 2 << 30,
            hibernate_after_idle: Duration::from_secs(60),
            checkpoint: Checkpoint::Idle,
            busy_wait: Duration::from_secs(10),
            quota: FileQuota { max_file_bytes: 100 << 20, max_session_bytes: 500 << 20, max_files: 1000 },
            artifacts: ArtifactConfig::default(),
            read_cap_bytes: 5 << 20,
            signing_key: None,
            public_url: None,
            default_runtime: None,
            datasets: DatasetConfig::default(),
            snapshots: SnapshotConfig::default(),
        }
    }

    /// The configuration with its root where it will be used: with
    /// [`Storage::Memory`], a fresh directory on `/dev/shm` in place of `root`
    /// (each call makes another: resolve once).
    pub fn with_resolved_root(mut self) -> Result<Self, InterpreterError> {
        if self.storage == Storage::Memory {
            self.root = memory_root()?;
        }
        Ok(self)
    }
}

/// A fresh directory on the RAM-backed filesystem, named after this process
/// so a later start can remove what a killed one left.
fn memory_root() -> Result<PathBuf, InterpreterError> {
    let shm = Path::new("/dev/shm");
    if !shm.is_dir() {
        return Err(InterpreterError::Invalid("memory storage needs a RAM-backed /dev/shm".to_owned()));
    }
    remove_dead_memory_roots(shm);
    let root = shm.join(format!("anypath-{}-{}", std::process::id(), uuid::Uuid::new_v4().simple()));
    std::os::unix::fs::DirBuilderExt::mode(&mut std::fs::DirBuilder::new(), 0o700)
        .create(&root)
        .map_err(|e| InterpreterError::io("creating the in-memory root", e))?;
    Ok(root)
}

/// Removes `anypath-<pid>-*` directories whose process is gone.
fn remove_dead_memory_roots(shm: &Path) {
    for entry in std::fs::read_dir(shm).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let pid = name.strip_prefix("anypath-").and_then(|rest| rest.split('-').next()).and_then(|pid| pid.parse::<u32>().ok());
        if let Some(pid) = pid
            && !Path::new("/proc").join(pid.to_string()).exists()
        {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// Retention and quota of snapshots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotConfig {
    /// How long a snapshot lives after it was taken.
    pub retention: Duration,
    /// Bytes of snapshots (state images and files) one tenant may hold.
    pub tenant_quota_bytes: u64,
    /// Snapshots one tenant may hold.
    pub max_per_tenant: usize,
}

impl Default for SnapshotConfig {
    /// 7 days, 2 GiB and 100 snapshots per tenant.
    fn default() -> Self {
        Self { retention: Duration::from_secs(7 * 24 * 3600), tenant_quota_bytes: 2 << 30, max_per_tenant: 100 }
    }
}
