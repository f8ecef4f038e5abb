//! Background runs on disk: one JSON file per run under
//! `<data dir>/runs/<tenant>/<run_id>.json`, written whole and renamed into
//! place (flushed first), when the run starts and when it ends. A record
//! still `running` when a process opens the directory was left by a process
//! that never stopped gracefully: it is marked `lost`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anypath_wire::{ErrorBody, RunState};

use anypath_interpreter::shared_records::SharedRecords;

use super::tracked::StoredRun;

/// How long a finished run's record is kept.
pub(crate) const KEPT_FOR: Duration = Duration::from_secs(24 * 3600);

/// Where runs' records are kept.
pub(crate) enum RunRecords {
    /// This host's directory.
    Disk(DiskRecords),
    /// Records every host of a fleet sees (a run started on one host is
    /// found, followed and stopped from any other).
    Shared(SharedRunRecords),
}

/// The kind of the fleet's shared records that holds runs.
const SHARED_KIND: &str = "run";
/// The record's field holding the run as JSON.
const SHARED_FIELD: &str = "run";

impl RunRecords {
    /// Opens the directory `dir` (created when missing).
    pub fn open(dir: PathBuf) -> std::io::Result<Self> {
        std::fs::create_dir_all(&dir)?;
        Ok(Self::Disk(DiskRecords { dir }))
    }

    /// Records kept in the fleet's shared records; called on the runtime.
    pub fn shared(records: std::sync::Arc<dyn SharedRecords>) -> Self {
        Self::Shared(SharedRunRecords { records, runtime: tokio::runtime::Handle::current() })
    }

    /// Marks the runs an earlier process left running as lost, and prunes
    /// old records; how many were lost. Shared records are left as they
    /// are: a run another host still runs is not this host's to judge.
    pub fn recover(&self) -> std::io::Result<usize> {
        match self {
            Self::Disk(disk) => disk.recover(),
            Self::Shared(_) => Ok(0),
        }
    }

    /// Writes `stored` in place of its earlier record.
    pub fn write(&self, stored: &StoredRun) -> std::io::Result<()> {
        match self {
            Self::Disk(disk) => disk.write(stored),
            Self::Shared(shared) => shared.write(stored),
        }
    }

    /// The record of a run, when there is one.
    pub fn read(&self, tenant: &str, run_id: &str) -> Option<StoredRun> {
        match self {
            Self::Disk(disk) => disk.read(tenant, run_id),
            Self::Shared(shared) => shared.read(tenant, run_id),
        }
    }

    pub fn remove(&self, tenant: &str, run_id: &str) {
        match self {
            Self::Disk(disk) => disk.remove(tenant, run_id),
            Self::Shared(shared) => shared.remove(tenant, run_id),
        }
    }

    /// Removes the records of runs that ended more than [`KEPT_FOR`] ago.
    pub fn prune(&self) {
        match self {
            Self::Disk(disk) => disk.prune(),
            Self::Shared(shared) => shared.prune(),
        }
    }
}

/// Runs' records in the fleet's shared records, one per run (called on the
/// blocking pool: each call waits on the runtime).
pub(crate) struct SharedRunRecords {
    records: std::sync::Arc<dyn SharedRecords>,
    runtime: tokio::runtime::Handle,
}

impl SharedRunRecords {
    fn id(tenant: &str, run_id: &str) -> String {
        format!("{tenant}.{run_id}")
    }

    fn write(&self, stored: &StoredRun) -> std::io::Result<()> {
        let json = serde_json::to_string(stored).map_err(std::io::Error::other)?;
        let fields = [(SHARED_FIELD.to_owned(), json), ("ended_unix".to_owned(), if stored.status.state.is_final() { unix_now().to_string() } else { String::new() })].into_iter().collect();
        self.runtime.block_on(self.records.write(SHARED_KIND, &Self::id(&stored.tenant, &stored.status.run_id), fields)).map_err(std::io::Error::other)
    }

    fn read(&self, tenant: &str, run_id: &str) -> Option<StoredRun> {
        let fields = self.runtime.block_on(self.records.read(SHARED_KIND, &Self::id(tenant, run_id))).ok()??;
        serde_json::from_str(fields.get(SHARED_FIELD)?).ok()
    }

    fn remove(&self, tenant: &str, run_id: &str) {
        let _ = self.runtime.block_on(self.records.remove(SHARED_KIND, &Self::id(tenant, run_id)));
    }

    fn prune(&self) {
        let Ok(all) = self.runtime.block_on(self.records.list(SHARED_KIND)) else { return };
        let now = unix_now();
        for (id, fields) in all {
            let ended = fields.get("ended_unix").and_then(|e| e.parse::<u64>().ok());
            if ended.is_some_and(|at| now.saturating_sub(at) > KEPT_FOR.as_secs()) {
                let _ = self.runtime.block_on(self.records.remove(SHARED_KIND, &id));
            }
        }
    }
}

fn unix_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// The records' directory.
pub(crate) struct DiskRecords {
    dir: PathBuf,
}

impl DiskRecords {
    /// Marks the runs an earlier process left running as lost, and prunes
    /// old records; how many were lost.
    fn recover(&self) -> std::io::Result<usize> {
        let records = self;
        let mut lost = 0;
        for path in records.files() {
            let Some(mut stored) = read_file(&path) else { continue };
            if stored.status.state != RunState::Running {
                continue;
            }
            stored.status.state = RunState::Lost;
            stored.status.error = Some(ErrorBody {
                code: "run_lost".into(),
                message: "the process running it ended without a graceful stop; its outcome is unknown".into(),
                request_id: stored.request_id.clone(),
            });
            stored.error_status = Some(410);
            records.write(&stored)?;
            lost += 1;
        }
        records.prune();
        Ok(lost)
    }

    fn path(&self, tenant: &str, run_id: &str) -> Option<PathBuf> {
        // Both were checked as names ([A-Za-z0-9_-]); checked again, as a path.
        let plain = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        (plain(tenant) && plain(run_id)).then(|| self.dir.join(tenant).join(format!("{run_id}.json")))
    }

    fn write(&self, stored: &StoredRun) -> std::io::Result<()> {
        let path = self.path(&stored.tenant, &stored.status.run_id).ok_or_else(|| std::io::Error::other("a run's tenant or id is not a plain name"))?;
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let staged = path.with_extension(format!("{}.partial", uuid::Uuid::new_v4().simple()));
        let body = serde_json::to_vec(stored).map_err(std::io::Error::other)?;
        let written = std::fs::File::create(&staged).and_then(|mut file| file.write_all(&body).and_then(|()| file.sync_data())).and_then(|()| std::fs::rename(&staged, &path));
        if written.is_err() {
            let _ = std::fs::remove_file(&staged);
        }
        written
    }

    fn read(&self, tenant: &str, run_id: &str) -> Option<StoredRun> {
        read_file(&self.path(tenant, run_id)?)
    }

    fn remove(&self, tenant: &str, run_id: &str) {
        if let Some(path) = self.path(tenant, run_id) {
            let _ = std::fs::remove_file(path);
        }
    }

    fn prune(&self) {
        for path in self.files() {
            let old = std::fs::metadata(&path).and_then(|m| m.modified()).ok().and_then(|t| t.elapsed().ok()).is_some_and(|age| age > KEPT_FOR);
            if old && read_file(&path).is_some_and(|s| s.status.state.is_final()) {
                let _ = std::fs::remove_file(&path);
            }
        }
    }

    /// Every record's file.
    fn files(&self) -> Vec<PathBuf> {
        let tenants = std::fs::read_dir(&self.dir).into_iter().flatten().flatten().map(|e| e.path()).filter(|p| p.is_dir());
        tenants
            .flat_map(|dir| std::fs::read_dir(dir).into_iter().flatten().flatten().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .collect()
    }
}

fn read_file(path: &Path) -> Option<StoredRun> {
    let bytes = std::fs::read(path).ok()?;
    match serde_json::from_slice(&bytes) {
        Ok(stored) => Some(stored),
        Err(error) => {
            tracing::warn!(%error, path = %path.display(), "a run's record does not parse: skipped");
            None
        }
    }
}
