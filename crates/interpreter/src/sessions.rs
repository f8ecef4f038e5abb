//! The code interpreter's core: sessions named by the client and scoped by
//! tenant, each with a directory and a live instance, an idle TTL, explicit
//! close, a bound on live instances (least recently used idle ones give theirs
//! up; their files stay) and one run at a time.
//!
//! Every tool an agent uses is one call here: `upload_file`, `run_python`,
//! `list_files`, `read_file`, `close_session`.
//!
//! On disk: `<root>/sessions/<tenant>/<session_id>/meta.json` (TTL, last
//! use, attached datasets) beside `data/`, the directory the code sees at
//! /mnt/data, and `datasets/`, the one it sees at /data (`crate::datasets`). A restart
//! finds the files again; what is past its TTL is removed at start. An
//! expired session's directory is first moved to `<root>/discarded/`, so the
//! session table is never locked for the length of a tree's removal.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anypath_sandbox::{CellRequest, FileQuota, Interrupt, LimitOverrides, LiveInstance, LiveSink, Runtime, SessionRuntime};
pub use anypath_wire::{ArtifactContent, ArtifactFailure, LoadArtifactRequest, ReadinessCheck, RunReport, RunRequest, SessionInfo, StateOrigin};
use serde::{Deserialize, Serialize};

use crate::artifacts::{Artifact, ArtifactConfig, ArtifactStore};
use crate::datasets::{DatasetConfig, Datasets, ReceivedFile};
use crate::error::InterpreterError;
use crate::files::{FileInfo, SessionFiles};
use crate::tree::Entry;
use crate::names;
use crate::signing::Signer;
use crate::stats::{Stats, StatsSnapshot};

/// Where an expired session's directory is moved, under the root, to be
/// removed once the session table is unlocked.
const DISCARDED: &str = "discarded";

/// A hibernated session's state image, beside `data/` (outside what the code sees).
const STATE_IMAGE: &str = "state.img";

/// Where a session that expired holding state leaves a note, under the
/// root: `expired/<tenant>/<session_id>`, so that a session opened later
/// under its name says the state it finds is not the one it had.
const EXPIRED: &str = "expired";

/// How long the note of an expired session is kept.
const EXPIRED_NOTE_KEPT: Duration = Duration::from_secs(24 * 3600);

/// A session's view of its datasets, beside `data/`: what the code sees at /data.
pub(crate) const DATASETS_VIEW: &str = "datasets";

/// How stale a session's `meta.json` (its last use) may be: runs in between
/// do not write it.
const META_REFRESH: Duration = Duration::from_secs(5);

/// Environment a run may pass: this many variables, each name and value bounded.
const MAX_ENV_VARS: usize = 64;
const MAX_ENV_VALUE_BYTES: usize = 4096;

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
    /// How long a run waits for the session's previous run before `Busy`.
    pub busy_wait: Duration,
    /// What a session directory may hold: checked inside the guest as code
    /// writes, and on every upload.
    pub quota: FileQuota,
    /// Retention and quota of artifacts.
    pub artifacts: ArtifactConfig,
    /// Largest artifact whose bytes [`Interpreter::read_artifact`] returns inline.
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
            busy_wait: Duration::from_secs(10),
            quota: FileQuota { max_file_bytes: 100 << 20, max_session_bytes: 500 << 20, max_files: 1000 },
            artifacts: ArtifactConfig::default(),
            read_cap_bytes: 5 << 20,
            signing_key: None,
            public_url: None,
            default_runtime: None,
            datasets: DatasetConfig::default(),
        }
    }
}

/// The code interpreter: sessions over one sandbox per runtime.
pub struct Interpreter {
    sandboxes: Vec<SessionRuntime>,
    config: InterpreterConfig,
    artifacts: ArtifactStore,
    datasets: Datasets,
    /// Homes with started instances for new `python` sessions.
    ready: Option<Arc<crate::ready::ReadyHomes>>,
    sessions: Mutex<HashMap<(String, String), Arc<Session>>>,
    stats: Stats,
}

struct Session {
    tenant: String,
    id: String,
    home: PathBuf,
    files: SessionFiles,
    /// What the code sees at /data.
    datasets_view: PathBuf,
    /// The staged datasets attached to it (kept in `meta.json`).
    attached: Mutex<Vec<String>>,
    runtime: Runtime,
    ttl: Duration,
    last_used: Mutex<Instant>,
    /// A run has left Python state in the instance (kept in `meta.json`).
    had_state: std::sync::atomic::AtomicBool,
    /// The state waits in `STATE_IMAGE` (read under `live`'s lock).
    hibernated: std::sync::atomic::AtomicBool,
    /// Linear memory the live instance held after its last run.
    memory_bytes: std::sync::atomic::AtomicU64,
    live: tokio::sync::Mutex<LiveInstance>,
    /// The session directory as the last successful run left it, so the
    /// next run need not walk it again before it starts. Read and written
    /// only under `live`'s lock; an upload or a delete clears it.
    seen: Mutex<Option<Snapshot>>,
    /// When `meta.json` was last written, and whether it said the session
    /// held state.
    meta_written: Mutex<Option<(Instant, bool)>>,
    /// Stops the run going on now, if there is one.
    running: Mutex<Option<Interrupt>>,
}

/// Each file of a session directory with its size and modification time.
type Snapshot = HashMap<String, (u64, SystemTime)>;

/// The note an expired session that held state leaves (see [`EXPIRED`]).
#[derive(Serialize, Deserialize)]
struct ExpiredNote {
    ttl_seconds: u64,
}

/// What the first run of a session opened in place of an expired one says.
fn expired_reason(ttl_seconds: u64) -> String {
    format!("the session expired (idle past its TTL of {ttl_seconds} s) and was removed with its state and files; it starts afresh")
}

#[derive(Serialize, Deserialize)]
struct Meta {
    ttl_seconds: u64,
    last_used_unix: u64,
    /// Absent in sessions written before runtimes existed: those ran `python`.
    #[serde(default)]
    runtime: Runtime,
    /// A run has left Python state in the session's instance: a process
    /// that finds the session on disk starts a fresh one and must say so.
    #[serde(default)]
    had_state: bool,
    /// The staged datasets attached to the session, shown again at /data
    /// when a later process loads it.
    #[serde(default)]
    datasets: Vec<String>,
}

impl Interpreter {
    /// The interpreter over `sandboxes` (one per runtime it offers, the
    /// default runtime's among them); removes what an earlier process left
    /// past its TTL.
    pub fn new(sandboxes: Vec<SessionRuntime>, mut config: InterpreterConfig) -> Result<Self, InterpreterError> {
        let offered = |runtime: Runtime| sandboxes.iter().any(|s| s.runtime() == runtime);
        let default_runtime = match config.default_runtime {
            Some(runtime) if !offered(runtime) => return Err(InterpreterError::RuntimeUnavailable(runtime)),
            Some(runtime) => runtime,
            None if offered(Runtime::PythonData) => Runtime::PythonData,
            None => Runtime::Python,
        };
        config.default_runtime = Some(default_runtime);
        if config.storage == Storage::Memory {
            config.root = memory_root()?;
        }
        std::fs::create_dir_all(config.root.join("sessions")).map_err(|e| InterpreterError::io("creating the session root", e))?;
        // What a killed process moved aside but never removed.
        let _ = std::fs::remove_dir_all(config.root.join(DISCARDED));
        std::fs::create_dir_all(config.root.join(DISCARDED)).map_err(|e| InterpreterError::io("creating the discarded-sessions directory", e))?;
        let signer = match &config.signing_key {
            Some(key) => Signer::new(key.clone()),
            None => Signer::load_or_create(&config.root.join("signing.key"))?,
        };
        let artifacts = ArtifactStore::open(&config.root.join("artifacts"), signer, config.artifacts.clone())?;
        let datasets = Datasets::new(config.datasets.clone(), &config.root)?;
        let ready = sandboxes.iter().find(|s| s.runtime() == Runtime::Python).map(|python| crate::ready::ReadyHomes::new(&config.root, python.clone()));
        if let Some(ready) = &ready {
            ready.fill();
        }
        tracing::info!(storage = ?config.storage, root = %config.root.display(), "interpreter storage");
        let interpreter = Self { sandboxes, config, artifacts, datasets, ready, sessions: Mutex::new(HashMap::new()), stats: Stats::default() };
        interpreter.sweep_disk();
        Ok(interpreter)
    }

    /// Creates the session, or returns it; `ttl` is capped by the server's
    /// maximum; `runtime` is the server's default when not given, and an
    /// existing session must already run it.
    pub fn open_session(&self, tenant: &str, session_id: &str, ttl: Option<Duration>, runtime: Option<Runtime>) -> Result<SessionInfo, InterpreterError> {
        let session = self.session(tenant, session_id, Create::Yes { ttl, runtime })?;
        Ok(self.info(&session))
    }

    /// The runtime of a session created without naming one.
    pub fn default_runtime(&self) -> Runtime {
        self.config.default_runtime.unwrap_or(Runtime::Python)
    }

    /// The sandboxes sessions run on, one per runtime.
    pub fn sandboxes(&self) -> &[SessionRuntime] {
        &self.sandboxes
    }

    fn sandbox_for(&self, runtime: Runtime) -> Result<&SessionRuntime, InterpreterError> {
        self.sandboxes.iter().find(|s| s.runtime() == runtime).ok_or(InterpreterError::RuntimeUnavailable(runtime))
    }

    /// The session as it is, without creating it.
    pub fn session_info(&self, tenant: &str, session_id: &str) -> Result<SessionInfo, InterpreterError> {
        let session = self.session(tenant, session_id, Create::No)?;
        Ok(self.info(&session))
    }

    /// Removes the session: its instance, its directory, its files. The
    /// file work runs on the blocking pool.
    pub async fn close_session(self: &Arc<Self>, tenant: &str, session_id: &str) -> Result<(), InterpreterError> {
        let (tenant, id) = (tenant.to_owned(), session_id.to_owned());
        let session = self.off_workers(move |i| i.session(&tenant, &id, Create::No)).await?;
        let _running = session.live.lock().await;
        self.unlist(&session);
        Stats::add(&self.stats.sessions_closed, 1);
        let home = session.home.clone();
        // The session is gone whether or not its directory could be removed.
        let _ = tokio::task::spawn_blocking(move || remove_tree(&home)).await;
        Ok(())
    }

    /// Runs file work on the blocking pool, off the async workers.
    async fn off_workers<T: Send + 'static>(
        self: &Arc<Self>,
        work: impl FnOnce(&Interpreter) -> Result<T, InterpreterError> + Send + 'static,
    ) -> Result<T, InterpreterError> {
        let this = self.clone();
        tokio::task::spawn_blocking(move || work(&this))
            .await
            .unwrap_or_else(|e| Err(InterpreterError::io("file work", std::io::Error::other(e.to_string()))))
    }

    /// Writes a file into the session (created on first use, on `runtime`
    /// or the server's default).
    pub fn upload_file(
        &self,
        tenant: &str,
        session_id: &str,
        filename: &str,
        bytes: &[u8],
        overwrite: bool,
        runtime: Option<Runtime>,
    ) -> Result<FileInfo, InterpreterError> {
        // Checked first, so a refused name creates no session either.
        names::filename(filename)?;
        let session = self.session(tenant, session_id, Create::Yes { ttl: None, runtime })?;
        // Under the run lock, so a run cannot write between the check and the upload.
        let _running = session.live.try_lock().map_err(|_| InterpreterError::Busy(session_id.to_owned()))?;
        self.check_upload(&session, filename, bytes.len() as u64)?;
        session.forget_seen(&_running);
        session.files.write(filename, bytes, overwrite)
    }

    /// Puts the tenant's artifact `artifact_id` into the session (created
    /// when new) as `filename`, by default the name it had: a report made
    /// yesterday, revised in a new session today. The bytes count toward the
    /// session's quota like an upload's.
    pub fn load_artifact(&self, tenant: &str, session_id: &str, request: &LoadArtifactRequest) -> Result<FileInfo, InterpreterError> {
        use std::io::Read;
        let (artifact, mut file) = self.artifacts.open_for_tenant(names::tenant(tenant)?, &request.artifact_id)?;
        // An artifact from a sub-directory lands under its own name.
        let own_name = artifact.filename.rsplit('/').next().unwrap_or(&artifact.filename);
        let filename = request.filename.as_deref().unwrap_or(own_name);
        names::filename(filename)?;
        // Refused before its bytes are read; the upload checks the rest.
        if artifact.size_bytes > self.config.quota.max_file_bytes {
            return Err(InterpreterError::Quota(format!("the artifact is {} bytes, over the largest file of {}", artifact.size_bytes, self.config.quota.max_file_bytes)));
        }
        let mut bytes = Vec::with_capacity(artifact.size_bytes as usize);
        file.read_to_end(&mut bytes).map_err(|e| InterpreterError::io("reading the artifact", e))?;
        self.upload_file(tenant, session_id, filename, &bytes, request.overwrite, request.runtime)
    }

    /// Refuses an upload that would take the session past its quota.
    fn check_upload(&self, session: &Session, filename: &str, size: u64) -> Result<(), InterpreterError> {
        let name = names::filename(filename)?;
        self.check_write(session, name, &session.files.dir().join(name), size)
    }

    /// Whether writing `size` bytes at `path` (named `name` in errors) keeps
    /// the session within its quota, counting the file it replaces.
    fn check_write(&self, session: &Session, name: &str, path: &Path, size: u64) -> Result<(), InterpreterError> {
        let quota = self.config.quota;
        let replaced = std::fs::symlink_metadata(path).ok().filter(|m| m.is_file()).map(|m| m.len());
        let usage = anypath_sandbox::directory_usage(session.files.dir());
        let image = std::fs::metadata(session.home.join(STATE_IMAGE)).map_or(0, |m| m.len());
        // Saturating: the directory may have changed since it was counted.
        let bytes = usage.bytes.saturating_add(image).saturating_sub(replaced.unwrap_or(0)).saturating_add(size);
        let files = usage.files.saturating_add(u64::from(replaced.is_none()));
        if size > quota.max_file_bytes {
            return Err(InterpreterError::Quota(format!("{name} is {size} bytes; a file may hold {}", quota.max_file_bytes)));
        }
        if bytes > quota.max_session_bytes {
            return Err(InterpreterError::Quota(format!("the session would hold {bytes} bytes; its quota is {}", quota.max_session_bytes)));
        }
        if files > quota.max_files {
            return Err(InterpreterError::Quota(format!("the session would hold {files} entries; its quota is {}", quota.max_files)));
        }
        Ok(())
    }

    /// Every file of the session.
    pub fn list_files(&self, tenant: &str, session_id: &str) -> Result<Vec<FileInfo>, InterpreterError> {
        self.session(tenant, session_id, Create::No)?.files.list()
    }

    /// Every file of the session, and the datasets it reads at /data.
    pub fn session_files(&self, tenant: &str, session_id: &str) -> Result<anypath_wire::FileList, InterpreterError> {
        let session = self.session(tenant, session_id, Create::No)?;
        let files = session.files.list()?;
        let datasets = self.datasets.shown(&self.artifacts, &session.tenant, &session.datasets_view)?;
        Ok(anypath_wire::FileList { files, datasets })
    }

    /// The datasets the tenant sees mounted or has staged.
    pub fn list_datasets(&self, tenant: &str) -> Result<Vec<anypath_wire::DatasetInfo>, InterpreterError> {
        self.datasets.list(&self.artifacts, names::tenant(tenant)?)
    }

    /// Keeps `files` (received in the staging area, see
    /// [`ArtifactStore::staging_path`]) as the tenant's dataset `name`.
    pub fn stage_dataset(&self, tenant: &str, name: &str, files: Vec<ReceivedFile>) -> Result<anypath_wire::DatasetInfo, InterpreterError> {
        let tenant = match names::tenant(tenant) {
            Ok(tenant) => tenant,
            Err(e) => {
                files.iter().for_each(|f| drop(std::fs::remove_file(&f.path)));
                return Err(e.into());
            }
        };
        self.datasets.stage(&self.artifacts, tenant, name, files)
    }

    /// Bytes the tenant may still stage as `name`.
    pub fn dataset_room(&self, tenant: &str, name: &str) -> Result<u64, InterpreterError> {
        self.datasets.room(&self.artifacts, names::tenant(tenant)?, names::dataset(name)?)
    }

    /// Forgets the tenant's staged dataset `name`.
    pub fn remove_dataset(&self, tenant: &str, name: &str) -> Result<(), InterpreterError> {
        self.datasets.remove(&self.artifacts, names::tenant(tenant)?, name)
    }

    /// Shows the tenant's staged dataset `name` in the session (created
    /// when new) at /data/<name>, read-only, from then on, this run's
    /// instance included; no byte is copied.
    pub fn attach_dataset(&self, tenant: &str, session_id: &str, name: &str) -> Result<anypath_wire::DatasetInfo, InterpreterError> {
        // Checked first, so a refused name creates no session either.
        names::dataset(name)?;
        let session = self.session(tenant, session_id, Create::Yes { ttl: None, runtime: None })?;
        let _running = session.live.try_lock().map_err(|_| InterpreterError::Busy(session_id.to_owned()))?;
        let info = self.datasets.attach(&self.artifacts, &session.tenant, name, &session.datasets_view)?;
        {
            let mut attached = session.attached.lock().unwrap_or_else(|p| p.into_inner());
            if !attached.iter().any(|a| a == name) {
                attached.push(name.to_owned());
            }
        }
        session.write_meta()?;
        Ok(info)
    }

    /// One file's bytes.
    pub fn read_file(&self, tenant: &str, session_id: &str, path: &str) -> Result<(FileInfo, Vec<u8>), InterpreterError> {
        self.session(tenant, session_id, Create::No)?.files.read(path)
    }

    /// Deletes one file, under the run lock: a run or an upload counting the
    /// session's usage never sees a file vanish halfway.
    pub fn delete_file(&self, tenant: &str, session_id: &str, path: &str) -> Result<(), InterpreterError> {
        let session = self.session(tenant, session_id, Create::No)?;
        let _running = session.live.try_lock().map_err(|_| InterpreterError::Busy(session_id.to_owned()))?;
        session.forget_seen(&_running);
        session.files.delete(path)
    }

    /// The base of absolute links: the configured public URL, else `host`,
    /// the address the caller was reached at (its request's `Host`, or the
    /// listener's own address).
    pub fn base_url(&self, host: &str) -> String {
        match &self.config.public_url {
            Some(url) => url.trim_end_matches('/').to_owned(),
            None => format!("http://{host}"),
        }
    }

    /// The largest file an upload may bring (the per-file quota), in bytes.
    pub fn max_upload_bytes(&self) -> u64 {
        self.config.quota.max_file_bytes
    }

    /// The configuration the interpreter runs with (what its callers may be
    /// told of its limits).
    pub fn config(&self) -> &InterpreterConfig {
        &self.config
    }

    /// The artifact store (signed downloads read it directly).
    pub fn artifacts(&self) -> &ArtifactStore {
        &self.artifacts
    }

    /// The session's live artifacts, newest first.
    pub fn session_artifacts(&self, tenant: &str, session_id: &str, base_url: &str) -> Result<Vec<Artifact>, InterpreterError> {
        let tenant = names::tenant(tenant)?;
        self.artifacts.list(tenant, names::session_id(session_id)?, base_url)
    }

    /// One artifact of the tenant's.
    pub fn artifact(&self, tenant: &str, id: &str, base_url: &str) -> Result<Artifact, InterpreterError> {
        self.artifacts.get(names::tenant(tenant)?, id, base_url)
    }

    /// A session file's bytes as base64, up to the read cap. A larger file is
    /// refused with a link to fetch it instead: the signed link of the
    /// artifact holding these bytes when a run kept one, else the session's
    /// file download route. A read never writes.
    pub fn read_artifact(&self, tenant: &str, session_id: &str, path: &str, base_url: &str) -> Result<ArtifactContent, InterpreterError> {
        use base64::Engine;
        let session = self.session(tenant, session_id, Create::No)?;
        let (info, host_path) = session.files.host_path(path)?;
        if info.size_bytes > self.config.read_cap_bytes {
            let kept = self.artifacts.find_content(&session.tenant, &session.id, &info.filename, &host_path, base_url)?;
            let download_url = match kept {
                Some(artifact) => artifact.download_url,
                None => format!("{base_url}/v1/sessions/{}/files/{}", session.id, crate::artifacts::url_path(&info.filename)),
            };
            return Err(InterpreterError::TooLarge { path: info.path, size: info.size_bytes, cap: self.config.read_cap_bytes, download_url });
        }
        let (info, bytes) = session.files.read(path)?;
        let head = &bytes[..bytes.len().min(crate::mime::SNIFF_BYTES)];
        Ok(ArtifactContent {
            mime_type: crate::mime::media_type(&info.filename, head),
            sha256: hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&bytes)),
            size_bytes: info.size_bytes,
            content_base64: base64::engine::general_purpose::STANDARD.encode(&bytes),
            path: info.path,
        })
    }

    /// Runs code in the session (created on first use), one run at a time;
    /// the caller writes the run's log line (it knows the request).
    /// Files the run created or changed become artifacts linked under
    /// `base_url`. Finding the session, scanning its files and hashing what
    /// changed run on the blocking pool; only the run itself is async.
    pub async fn run_python(self: &Arc<Self>, tenant: &str, session_id: &str, request: RunRequest, base_url: &str) -> Result<RunReport, InterpreterError> {
        self.run_python_live(tenant, session_id, request, base_url, None).await
    }

    /// [`Self::run_python`], sending output and results to `live` as they
    /// are made (when given); the report holds them all again.
    pub async fn run_python_live(
        self: &Arc<Self>,
        tenant: &str,
        session_id: &str,
        request: RunRequest,
        base_url: &str,
        sink: Option<LiveSink>,
    ) -> Result<RunReport, InterpreterError> {
        let env = checked_env(request.env)?;
        let create = Create::Yes { ttl: None, runtime: request.runtime };
        // A warm run finds its session in the table; only a new or reloaded
        // one needs the disk, on the blocking pool.
        let session = match self.listed_session(tenant, session_id, &create)? {
            Some(session) => session,
            None => {
                let (owner, id) = (tenant.to_owned(), session_id.to_owned());
                self.off_workers(move |i| i.session(&owner, &id, create)).await?
            }
        };
        let mut live = tokio::time::timeout(self.config.busy_wait, session.live.lock())
            .await
            .map_err(|_| InterpreterError::Busy(session_id.to_owned()))?;
        self.take_saved_state(&session, &mut live).await;
        let cached = session.seen.lock().unwrap_or_else(|p| p.into_inner()).take();
        let before = match cached {
            Some(before) => before,
            None => {
                let scanned = session.clone();
                self.off_workers(move |_| Ok(snapshot(scanned.files.dir()))).await?
            }
        };
        // Armed under the run's lock: an interrupt stops this run, never a later one.
        let interrupt = Interrupt::new();
        *session.running.lock().unwrap_or_else(|p| p.into_inner()) = Some(interrupt.clone());
        let cell = live
            .run(CellRequest {
                code: request.code,
                env,
                limits: request.limits,
                figure_formats: request.figure_formats,
                result_data: request.result_data,
                live: sink,
                interrupt: Some(interrupt),
            })
            .await;
        *session.running.lock().unwrap_or_else(|p| p.into_inner()) = None;
        session.had_state.store(live.is_live(), std::sync::atomic::Ordering::Relaxed);
        session.memory_bytes.store(live.memory_bytes(), std::sync::atomic::Ordering::Relaxed);
        let succeeded = cell.error.is_none();
        // The filesystem layer saw every change the code tried: when it saw
        // none, the directory is as the run found it, and nothing is walked.
        let untouched = succeeded && !live.files_touched();
        let (artifacts, artifact_errors) = if untouched && !session.meta_due() {
            session.touch();
            *session.seen.lock().unwrap_or_else(|p| p.into_inner()) = Some(before);
            (Vec::new(), Vec::new())
        } else {
            let (kept, base_url) = (session.clone(), base_url.to_owned());
            // Kept while the run's lock is held, so the next run cannot change them first.
            self.off_workers(move |i| {
                // Fail fast: after a failed run nothing is scanned or kept
                // (and the next run walks the directory itself).
                let changed_files = if untouched {
                    *kept.seen.lock().unwrap_or_else(|p| p.into_inner()) = Some(before);
                    Vec::new()
                } else if succeeded {
                    let after = snapshot(kept.files.dir());
                    let found = changed(&before, &after);
                    *kept.seen.lock().unwrap_or_else(|p| p.into_inner()) = Some(after);
                    found
                } else {
                    Vec::new()
                };
                let artifacts = i.keep(&kept, changed_files, &base_url);
                i.touch(&kept);
                Ok(artifacts)
            })
            .await?
        };
        drop(live);
        self.evict_beyond_limit(&session).await;
        let run_id = uuid::Uuid::new_v4().simple().to_string();
        Ok(RunReport { run_id, session_id: session_id.to_owned(), runtime: session.runtime, cell, artifacts, artifact_errors })
    }

    /// Keeps each changed file as an artifact.
    fn keep(&self, session: &Session, files: Vec<FileInfo>, base_url: &str) -> (Vec<Artifact>, Vec<ArtifactFailure>) {
        let mut kept = Vec::new();
        let (files, mut failed) = crate::artifacts::within_run_cap(files, self.artifacts.max_per_run());
        for file in files {
            let ingested = session
                .files
                .host_path(&file.filename)
                .and_then(|(_, path)| self.artifacts.ingest(&session.tenant, &session.id, &file.filename, &path, base_url));
            match ingested {
                Ok(artifact) => {
                    Stats::add(&self.stats.artifacts_kept, 1);
                    Stats::add(&self.stats.artifact_bytes_kept, artifact.size_bytes);
                    kept.push(artifact)
                }
                Err(e) => failed.push(ArtifactFailure { filename: file.filename, error: e.to_string() }),
            }
        }
        (kept, failed)
    }

    /// Removes every session idle past its TTL and every expired artifact
    /// (with blobs nothing refers to any more); returns how many sessions.
    pub fn sweep(&self) -> usize {
        if let Err(e) = self.artifacts.sweep() {
            tracing::warn!(error = %e, "artifact sweep failed");
        }
        let expired: Vec<Arc<Session>> = {
            let sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
            sessions.values().filter(|s| s.idle() >= s.ttl).cloned().collect()
        };
        for session in &expired {
            // A session running code is in use, not idle: it stays.
            if let Ok(_running) = session.live.try_lock() {
                if session.had_state.load(std::sync::atomic::Ordering::Relaxed) {
                    self.leave_expired_note(&session.tenant, &session.id, session.ttl.as_secs());
                }
                self.forget(session);
            }
        }
        let removed = expired.len() + self.sweep_disk();
        Stats::add(&self.stats.sweeps, 1);
        Stats::add(&self.stats.sessions_expired, removed as u64);
        removed
    }

    /// What the interpreter did since it started, and its sessions now.
    pub fn stats(&self) -> StatsSnapshot {
        use std::sync::atomic::Ordering::Relaxed;
        let sessions: Vec<Arc<Session>> = self.sessions.lock().unwrap_or_else(|p| p.into_inner()).values().cloned().collect();
        // A session whose lock is held is running, so live.
        let live = sessions.iter().filter(|s| s.live.try_lock().map_or(true, |l| l.is_live())).count() as u64;
        let hibernated = sessions.iter().filter(|s| s.hibernated.load(Relaxed)).count() as u64;
        self.stats.snapshot(live, hibernated, sessions.len() as u64)
    }

    /// What readiness needs of the interpreter, each check named: the
    /// session runtimes are loaded, the data directory takes a file, and
    /// the artifact index and blob store work. Touches the disk: call it
    /// off the async workers.
    pub fn readiness(&self) -> Vec<ReadinessCheck> {
        let runtimes: Vec<String> = self.sandboxes.iter().map(|s| s.runtime().to_string()).collect();
        let loaded = if runtimes.is_empty() { Err("no session runtime is loaded".to_owned()) } else { Ok(()) };
        let writable = tempfile::NamedTempFile::new_in(&self.config.root)
            .map(drop)
            .map_err(|e| format!("the data directory {} is not writable: {e}", self.config.root.display()));
        vec![
            ReadinessCheck::of("session_runtimes", loaded, Some(runtimes.join(", "))),
            ReadinessCheck::of("data_directory", writable, None),
            ReadinessCheck::of("artifact_store", self.artifacts.check(), None),
        ]
    }

    /// Live instances held now.
    pub fn live_count(&self) -> usize {
        self.stats().sessions_live as usize
    }

    fn info(&self, session: &Session) -> SessionInfo {
        SessionInfo {
            session_id: session.id.clone(),
            ttl_seconds: session.ttl.as_secs(),
            expires_in_seconds: session.ttl.saturating_sub(session.idle()).as_secs(),
            live: session.live.try_lock().map_or(true, |l| l.is_live()),
            hibernated: session.hibernated.load(std::sync::atomic::Ordering::Relaxed),
            runtime: session.runtime,
        }
    }

    /// The session named `session_id` of `tenant`: known, found on disk, or
    /// (with `create`) new. An expired predecessor's directory is removed
    /// after the session table is unlocked, so calls on other sessions never
    /// wait for it.
    fn session(&self, tenant: &str, session_id: &str, create: Create) -> Result<Arc<Session>, InterpreterError> {
        let mut discarded = None;
        let session = self.session_locked(tenant, session_id, create, &mut discarded);
        if let Some(path) = discarded {
            remove_tree(&path);
        }
        session
    }

    /// The session when the table holds it unexpired: no file is touched,
    /// so the async workers may ask. `None` means [`Self::session`] must
    /// look on disk or create it.
    fn listed_session(&self, tenant: &str, session_id: &str, create: &Create) -> Result<Option<Arc<Session>>, InterpreterError> {
        let key = (names::tenant(tenant)?.to_owned(), names::session_id(session_id)?.to_owned());
        let asked = match create {
            Create::Yes { runtime, .. } => *runtime,
            Create::Sharing { runtime, .. } => Some(*runtime),
            Create::No => None,
        };
        let sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        listed(&sessions, &key, asked)
    }

    /// [`Self::session`] under the table's lock; an expired predecessor's
    /// directory is moved aside into `discarded` (one rename), not removed.
    fn session_locked(&self, tenant: &str, session_id: &str, create: Create, discarded: &mut Option<PathBuf>) -> Result<Arc<Session>, InterpreterError> {
        let tenant = names::tenant(tenant)?;
        let session_id = names::session_id(session_id)?;
        let may_create = !matches!(create, Create::No);
        let (ttl, asked, shared_files) = match create {
            Create::Yes { ttl, runtime } => (ttl, runtime, None),
            Create::Sharing { ttl, runtime, files } => (ttl, Some(runtime), Some(files)),
            Create::No => (None, None, None),
        };
        let key = (tenant.to_owned(), session_id.to_owned());
        let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(session) = listed(&sessions, &key, asked)? {
            return Ok(session);
        }
        let home = self.config.root.join("sessions").join(tenant).join(session_id);
        let (on_disk, expired): (Option<Meta>, Option<Meta>) = match read_meta(&home) {
            Some(meta) if unix_now().saturating_sub(meta.last_used_unix) < meta.ttl_seconds => (Some(meta), None),
            found => (None, found),
        };
        if on_disk.is_none() && !may_create {
            return Err(InterpreterError::NoSuchSession(session_id.to_owned()));
        }
        // A session opened in place of one that expired holding state (still
        // listed, still on disk, or noted when it was removed) says so on
        // its first run: it is not the session its caller had.
        let replaced_ttl = match on_disk {
            Some(_) => None,
            None => {
                let listed = sessions.get(&key).filter(|s| s.had_state.load(std::sync::atomic::Ordering::Relaxed)).map(|s| s.ttl.as_secs());
                let noted = self.take_expired_note(tenant, session_id).map(|n| n.ttl_seconds);
                listed.or(expired.filter(|m| m.had_state).map(|m| m.ttl_seconds)).or(noted)
            }
        };
        let runtime = match &on_disk {
            Some(meta) => {
                check_runtime(session_id, meta.runtime, asked)?;
                meta.runtime
            }
            None => asked.unwrap_or_else(|| self.default_runtime()),
        };
        let sandbox = self.sandbox_for(runtime)?;
        let ttl = ttl
            .or(on_disk.as_ref().map(|m| Duration::from_secs(m.ttl_seconds)))
            .unwrap_or(self.config.default_ttl)
            .min(self.config.max_ttl)
            .max(Duration::from_secs(1));
        let mut adopted = None;
        if on_disk.is_none() {
            // An expired predecessor: the path is free at once, the tree goes later.
            *discarded = self.discard(&home);
            Stats::add(&self.stats.sessions_created, 1);
            if let Some(files) = &shared_files {
                // The other session's directory, seen through a link that
                // removing this session removes without following it.
                std::fs::create_dir_all(&home).map_err(|e| InterpreterError::io("creating the session directory", e))?;
                std::os::unix::fs::symlink(files, home.join("data")).map_err(|e| InterpreterError::io("sharing the session directory", e))?;
            } else if runtime == Runtime::Python {
                adopted = self.ready.as_ref().and_then(|ready| ready.take(&home));
            }
        }
        let data = home.join("data");
        std::fs::create_dir_all(&data).map_err(|e| InterpreterError::io("creating the session directory", e))?;
        // Made anew on every load: the mounted datasets and their access
        // list may have changed since an earlier process made it.
        let datasets_view = home.join(DATASETS_VIEW);
        let attached = on_disk.as_ref().map(|m| m.datasets.clone()).unwrap_or_default();
        let attached = self.datasets.build_view(&self.artifacts, tenant, &datasets_view, &attached)?;
        let mut live = sandbox
            .live_instance(Some(data.clone()), &LimitOverrides::default())
            .with_quota(self.config.quota)
            .with_datasets(datasets_view.clone());
        if let Some(started) = adopted {
            live.adopt(started);
        }
        // An earlier process's state: in its image when it was hibernated
        // (a graceful stop), else lost with that process.
        let had_state = on_disk.as_ref().is_some_and(|m| m.had_state);
        let hibernated = on_disk.is_some() && home.join(STATE_IMAGE).is_file();
        if had_state && !hibernated {
            live = live.with_state_lost_for("the process that held the session's state stopped without saving it; the session starts fresh with its files");
        }
        if let Some(ttl_seconds) = replaced_ttl {
            live = live.with_state_lost_for(expired_reason(ttl_seconds));
        }
        let session = Arc::new(Session {
            tenant: tenant.to_owned(),
            id: session_id.to_owned(),
            files: SessionFiles::new(data),
            datasets_view,
            attached: Mutex::new(attached),
            home,
            runtime,
            ttl,
            last_used: Mutex::new(Instant::now()),
            had_state: std::sync::atomic::AtomicBool::new(had_state),
            hibernated: std::sync::atomic::AtomicBool::new(hibernated),
            memory_bytes: std::sync::atomic::AtomicU64::new(0),
            live: tokio::sync::Mutex::new(live),
            // A new session's directory was just made empty: its first run
            // need not walk it to know what it held.
            seen: Mutex::new((on_disk.is_none() && shared_files.is_none()).then(Snapshot::new)),
            meta_written: Mutex::new(None),
            running: Mutex::new(None),
        });
        session.write_meta()?;
        sessions.insert(key, session.clone());
        Ok(session)
    }

    /// Marks the session used; writes its `meta.json` when due.
    fn touch(&self, session: &Session) {
        session.touch();
        if session.meta_due() {
            let _ = session.write_meta();
        }
    }

    /// Removes the session from the table and its directory from the disk.
    fn forget(&self, session: &Session) {
        self.unlist(session);
        remove_tree(&session.home);
    }

    /// Takes the session out of the table (when it is still the one listed).
    fn unlist(&self, session: &Session) {
        let key = (session.tenant.clone(), session.id.clone());
        let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        if sessions.get(&key).is_some_and(|s| std::ptr::eq(Arc::as_ptr(s), session)) {
            sessions.remove(&key);
        }
    }

    /// Moves `home` aside under the root, to be removed by the caller once
    /// it has let go of the session table: one rename instead of a whole
    /// tree's removal while every other call waits. Where the rename fails
    /// (the tree is elsewhere), the tree is removed in place, since the path
    /// must be free before the new session takes it.
    fn discard(&self, home: &Path) -> Option<PathBuf> {
        let aside = self.config.root.join(DISCARDED).join(uuid::Uuid::new_v4().simple().to_string());
        match std::fs::rename(home, &aside) {
            Ok(()) => Some(aside),
            Err(_) => {
                if std::fs::symlink_metadata(home).is_ok() {
                    let _ = std::fs::remove_dir_all(home);
                }
                None
            }
        }
    }

    /// Keeps the live instances' memory within the budget: the least
    /// recently used idle sessions other than `current` are hibernated.
    async fn evict_beyond_limit(self: &Arc<Self>, current: &Session) {
        let candidates: Vec<Arc<Session>> = {
            let sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
            sessions.values().filter(|s| !std::ptr::eq(Arc::as_ptr(s), current)).cloned().collect()
        };
        let held = |s: &Session| if s.live.try_lock().map_or(true, |l| l.is_live()) { s.memory_bytes.load(std::sync::atomic::Ordering::Relaxed) } else { 0 };
        let mut total: u64 = held(current) + candidates.iter().map(|s| held(s)).sum::<u64>();
        if total <= self.config.session_memory_bytes {
            return;
        }
        for session in longest_idle_first(candidates, |s| s.idle()) {
            if total <= self.config.session_memory_bytes {
                break;
            }
            let Ok(mut live) = session.live.try_lock() else { continue };
            if live.is_live() {
                total = total.saturating_sub(session.memory_bytes.load(std::sync::atomic::Ordering::Relaxed));
                self.hibernate(&session, &mut live).await;
            }
        }
    }

    /// Hibernates every live session idle for `hibernate_after_idle`;
    /// returns how many.
    pub async fn hibernate_idle(self: &Arc<Self>) -> usize {
        let idle: Vec<Arc<Session>> = {
            let sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
            sessions.values().filter(|s| s.idle() >= self.config.hibernate_after_idle).cloned().collect()
        };
        let mut hibernated = 0;
        for session in idle {
            let Ok(mut live) = session.live.try_lock() else { continue };
            if live.is_live() && self.hibernate(&session, &mut live).await {
                hibernated += 1;
            }
        }
        hibernated
    }

    /// Hibernates every live session, waiting for runs in progress (on a
    /// graceful stop): the next process resumes them. A session whose image
    /// was read but not restored yet has it written back. Returns how many.
    pub async fn hibernate_all(self: &Arc<Self>) -> usize {
        let all: Vec<Arc<Session>> = self.sessions.lock().unwrap_or_else(|p| p.into_inner()).values().cloned().collect();
        let mut hibernated = 0;
        for session in all {
            let Ok(mut live) = tokio::time::timeout(self.config.busy_wait, session.live.lock()).await else { continue };
            if (live.is_live() || live.is_hibernated()) && self.hibernate(&session, &mut live).await {
                hibernated += 1;
            }
        }
        hibernated
    }

    /// Saves the live instance's state beside the session's files and drops
    /// the instance. An image that cannot be made or kept (the session's
    /// quota counts it) loses the state, and the next run says why.
    async fn hibernate(self: &Arc<Self>, session: &Arc<Session>, live: &mut LiveInstance) -> bool {
        let image = match live.hibernate().await {
            Ok(Some(image)) => image,
            Ok(None) => return false,
            Err(error) => {
                tracing::warn!(session = %session.id, %error, "a session's state could not be captured");
                live.lose_state(format!("its state could not be saved when it was parked ({error})"));
                return false;
            }
        };
        // Marked before the write is awaited: when this call is dropped (its
        // caller's client went away) the write still ends on the blocking
        // pool, and the next run reads the image; one that is not there is
        // reported lost (`live` holds the state as away until it is back).
        session.hibernated.store(true, std::sync::atomic::Ordering::Relaxed);
        let kept = session.clone();
        match self.off_workers(move |i| i.save_image(&kept, &image)).await {
            Ok(()) => true,
            Err(error) => {
                session.hibernated.store(false, std::sync::atomic::Ordering::Relaxed);
                tracing::warn!(session = %session.id, %error, "a session's state image was not kept");
                live.lose_state(format!("its state could not be saved when it was parked ({error})"));
                false
            }
        }
    }

    /// Writes a state image for `session`, if it fits the session's quota
    /// beside its files.
    fn save_image(&self, session: &Session, image: &[u8]) -> Result<(), InterpreterError> {
        let usage = anypath_sandbox::directory_usage(session.files.dir());
        let total = usage.bytes.saturating_add(image.len() as u64);
        if total > self.config.quota.max_session_bytes {
            return Err(InterpreterError::Quota(format!(
                "the state image ({} bytes) and the files ({} bytes) exceed the session's {} bytes",
                image.len(),
                usage.bytes,
                self.config.quota.max_session_bytes
            )));
        }
        let path = session.home.join(STATE_IMAGE);
        let partial = session.home.join(format!("{STATE_IMAGE}.partial"));
        #[cfg(test)]
        tests::pause_at(tests::Step::ImageWrite, &path);
        std::fs::write(&partial, image).map_err(|e| InterpreterError::io("writing a state image", e))?;
        std::fs::rename(&partial, &path).map_err(|e| InterpreterError::io("writing a state image", e))
    }

    /// Before a run: a hibernated session's image goes to its instance (and
    /// off the disk: from here on the state lives in the instance).
    ///
    /// Safe to drop at any await: until the image is in the instance the
    /// session stays marked hibernated and its image stays on disk, and the
    /// instance holds the state as away, so no later run starts fresh
    /// without saying so.
    async fn take_saved_state(self: &Arc<Self>, session: &Arc<Session>, live: &mut LiveInstance) {
        use std::sync::atomic::Ordering::Relaxed;
        if live.is_live() || !session.hibernated.load(Relaxed) {
            return;
        }
        live.expect_saved_state();
        let path = session.home.join(STATE_IMAGE);
        let read = {
            let path = path.clone();
            self.off_workers(move |_| {
                #[cfg(test)]
                tests::pause_at(tests::Step::ImageRead, &path);
                std::fs::read(&path).map_err(|e| InterpreterError::io("reading a state image", e))
            })
            .await
        };
        session.hibernated.store(false, Relaxed);
        let image = match read {
            Ok(image) => image,
            Err(error) => {
                live.lose_state(format!("its saved state could not be read ({error})"));
                return;
            }
        };
        live.resume_with(image);
        // From here the state lives in the instance: an image left behind
        // would be resumed, stale, by a process that finds it after a crash.
        let removed = self.off_workers(move |_| std::fs::remove_file(&path).map_err(|e| InterpreterError::io("removing a resumed state image", e))).await;
        if let Err(error) = removed {
            tracing::warn!(session = %session.id, %error, "a resumed session's state image stays on disk");
        }
    }

    /// A new session `new_id` of the same tenant with a copy of `session_id`'s
    /// files and live state, so each can go its own way. The copy counts
    /// toward the new session's quota; the parent's open files are closed.
    pub async fn fork_session(self: &Arc<Self>, tenant: &str, session_id: &str, new_id: &str) -> Result<SessionInfo, InterpreterError> {
        names::session_id(new_id)?;
        let (owner, id, new) = (tenant.to_owned(), session_id.to_owned(), new_id.to_owned());
        let parent = self
            .off_workers(move |i| {
                let parent = i.session(&owner, &id, Create::No)?;
                if i.session(&owner, &new, Create::No).is_ok() {
                    return Err(InterpreterError::SessionExists(new));
                }
                Ok(parent)
            })
            .await?;
        let mut live = tokio::time::timeout(self.config.busy_wait, parent.live.lock())
            .await
            .map_err(|_| InterpreterError::Busy(session_id.to_owned()))?;
        let image = if parent.hibernated.load(std::sync::atomic::Ordering::Relaxed) && !live.is_live() {
            let path = parent.home.join(STATE_IMAGE);
            Some(self.off_workers(move |_| std::fs::read(&path).map_err(|e| InterpreterError::io("reading a state image", e))).await?)
        } else {
            live.capture().await.map_err(|e| InterpreterError::Invalid(format!("the session's state cannot be copied: {e}")))?
        };
        let (owner, new, runtime, ttl) = (tenant.to_owned(), new_id.to_owned(), parent.runtime, parent.ttl);
        let from = parent.clone();
        let child = self
            .off_workers(move |i| {
                let child = i.session(&owner, &new, Create::Yes { ttl: Some(ttl), runtime: Some(runtime) })?;
                let attached = from.attached.lock().unwrap_or_else(|p| p.into_inner()).clone();
                let shown = i.datasets.build_view(&i.artifacts, &owner, &child.datasets_view, &attached);
                let copied = shown.and_then(|shown| {
                    *child.attached.lock().unwrap_or_else(|p| p.into_inner()) = shown;
                    copy_tree(from.files.dir(), child.files.dir())
                });
                let copied = copied.and_then(|()| match &image {
                    Some(image) => i.save_image(&child, image),
                    None => Ok(()),
                });
                if let Err(error) = copied {
                    i.forget(&child);
                    return Err(error);
                }
                if image.is_some() {
                    child.hibernated.store(true, std::sync::atomic::Ordering::Relaxed);
                    child.had_state.store(true, std::sync::atomic::Ordering::Relaxed);
                }
                child.write_meta()?;
                Ok(child)
            })
            .await?;
        drop(live);
        Ok(self.info(&child))
    }

    /// A new session `context_id` over the same files as `session_id` (its
    /// directory is shared, its Python state is its own), on the same
    /// runtime: a second code context of one sandbox.
    pub fn open_context(&self, tenant: &str, session_id: &str, context_id: &str, ttl: Option<Duration>) -> Result<SessionInfo, InterpreterError> {
        let parent = self.session(tenant, session_id, Create::No)?;
        if self.session(tenant, context_id, Create::No).is_ok() {
            return Err(InterpreterError::SessionExists(context_id.to_owned()));
        }
        let create = Create::Sharing { ttl, runtime: parent.runtime, files: parent.files.dir().to_path_buf() };
        let context = self.session(tenant, context_id, create)?;
        Ok(self.info(&context))
    }

    /// Parks the session's live state in its image now, waiting for a run
    /// in progress; the next run resumes it. False when no state was live.
    pub async fn hibernate_session(self: &Arc<Self>, tenant: &str, session_id: &str) -> Result<bool, InterpreterError> {
        let (owner, id) = (tenant.to_owned(), session_id.to_owned());
        let session = self.off_workers(move |i| i.session(&owner, &id, Create::No)).await?;
        let mut live = tokio::time::timeout(self.config.busy_wait, session.live.lock())
            .await
            .map_err(|_| InterpreterError::Busy(session_id.to_owned()))?;
        Ok(live.is_live() && self.hibernate(&session, &mut live).await)
    }

    /// Stops the session's run in progress, if there is one; true when one
    /// was stopped. Touches no file: the async workers may call it.
    pub fn interrupt(&self, tenant: &str, session_id: &str) -> Result<bool, InterpreterError> {
        let key = (names::tenant(tenant)?.to_owned(), names::session_id(session_id)?.to_owned());
        let session = self.sessions.lock().unwrap_or_else(|p| p.into_inner()).get(&key).cloned();
        let Some(session) = session else { return Ok(false) };
        let running = session.running.lock().unwrap_or_else(|p| p.into_inner());
        match running.as_ref() {
            Some(interrupt) => {
                interrupt.interrupt();
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Starts the session's Python state afresh over the same files (a
    /// kernel restart), waiting for a run in progress: the live instance
    /// and any saved image are dropped.
    pub async fn restart_session(self: &Arc<Self>, tenant: &str, session_id: &str) -> Result<(), InterpreterError> {
        let (owner, id) = (tenant.to_owned(), session_id.to_owned());
        let session = self.off_workers(move |i| i.session(&owner, &id, Create::No)).await?;
        let mut live = tokio::time::timeout(self.config.busy_wait, session.live.lock())
            .await
            .map_err(|_| InterpreterError::Busy(session_id.to_owned()))?;
        live.reset();
        session.hibernated.store(false, std::sync::atomic::Ordering::Relaxed);
        session.had_state.store(false, std::sync::atomic::Ordering::Relaxed);
        let image = session.home.join(STATE_IMAGE);
        let kept = session.clone();
        self.off_workers(move |_| {
            let _ = std::fs::remove_file(&image);
            kept.write_meta()
        })
        .await
    }

    /// The entry at `path` of the session's tree (`""`: its directory).
    pub fn stat_path(&self, tenant: &str, session_id: &str, path: &str) -> Result<Entry, InterpreterError> {
        self.session(tenant, session_id, Create::No)?.files.stat(path)
    }

    /// The entries under the directory `path`, `depth` levels deep.
    pub fn list_dir(&self, tenant: &str, session_id: &str, path: &str, depth: u32) -> Result<Vec<Entry>, InterpreterError> {
        self.session(tenant, session_id, Create::No)?.files.list_dir(path, depth)
    }

    /// Makes the directory `path` with its parents; false when it was there.
    pub fn make_dir(&self, tenant: &str, session_id: &str, path: &str) -> Result<bool, InterpreterError> {
        self.change_tree(tenant, session_id, |session| {
            self.check_write(session, path, &session.files.resolve(path)?, 0)?;
            session.files.make_dir(path)
        })
    }

    /// Writes `bytes` at `path`, replacing a file there and making its
    /// directories; within the session's quota.
    pub fn write_path(&self, tenant: &str, session_id: &str, path: &str, bytes: &[u8]) -> Result<Entry, InterpreterError> {
        self.change_tree(tenant, session_id, |session| {
            self.check_write(session, path, &session.files.resolve(path)?, bytes.len() as u64)?;
            session.files.write_path(path, bytes)
        })
    }

    /// Removes the file or directory at `path`.
    pub fn remove_path(&self, tenant: &str, session_id: &str, path: &str) -> Result<(), InterpreterError> {
        self.change_tree(tenant, session_id, |session| session.files.remove(path))
    }

    /// Moves `from` to `to` in the session's tree.
    pub fn move_path(&self, tenant: &str, session_id: &str, from: &str, to: &str) -> Result<Entry, InterpreterError> {
        self.change_tree(tenant, session_id, |session| session.files.move_path(from, to))
    }

    /// Changes the session's tree while no run is going (`Busy` otherwise),
    /// and makes the next run count its directory again.
    fn change_tree<T>(&self, tenant: &str, session_id: &str, change: impl FnOnce(&Session) -> Result<T, InterpreterError>) -> Result<T, InterpreterError> {
        let session = self.session(tenant, session_id, Create::No)?;
        let running = session.live.try_lock().map_err(|_| InterpreterError::Busy(session_id.to_owned()))?;
        let changed = change(&session);
        session.forget_seen(&running);
        changed
    }

    /// Removes session directories on disk past their TTL (left by this or an
    /// earlier process); returns how many.
    fn sweep_disk(&self) -> usize {
        let mut removed = 0;
        let Ok(tenants) = std::fs::read_dir(self.config.root.join("sessions")) else { return 0 };
        for tenant in tenants.flatten() {
            let Ok(homes) = std::fs::read_dir(tenant.path()) else { continue };
            for home in homes.flatten() {
                let meta = read_meta(&home.path());
                let expired = meta.as_ref().is_none_or(|m| unix_now().saturating_sub(m.last_used_unix) >= m.ttl_seconds);
                let key = (tenant.file_name().to_string_lossy().into_owned(), home.file_name().to_string_lossy().into_owned());
                let known = self.sessions.lock().unwrap_or_else(|p| p.into_inner()).contains_key(&key);
                if expired && !known {
                    if let Some(meta) = meta.as_ref().filter(|m| m.had_state) {
                        self.leave_expired_note(&key.0, &key.1, meta.ttl_seconds);
                    }
                    if std::fs::remove_dir_all(home.path()).is_ok() {
                        removed += 1;
                    }
                }
            }
        }
        self.forget_old_expired_notes();
        removed
    }

    /// Notes that `tenant`'s session `session_id` expired holding state.
    /// Best effort: without it, a session opened later under that name
    /// cannot say what it lost.
    fn leave_expired_note(&self, tenant: &str, session_id: &str, ttl_seconds: u64) {
        let path = self.config.root.join(EXPIRED).join(tenant).join(session_id);
        let bytes = serde_json::to_vec(&ExpiredNote { ttl_seconds }).unwrap_or_default();
        let written = path.parent().map_or(Ok(()), std::fs::create_dir_all).and_then(|()| std::fs::write(&path, bytes));
        if let Err(error) = written {
            tracing::warn!(tenant, session = session_id, %error, "an expired session's note was not written");
        }
    }

    /// The note `tenant`'s session `session_id` left when it expired
    /// holding state, taken (removed) for the session now opened in its place.
    fn take_expired_note(&self, tenant: &str, session_id: &str) -> Option<ExpiredNote> {
        let path = self.config.root.join(EXPIRED).join(tenant).join(session_id);
        let note = serde_json::from_slice(&std::fs::read(&path).ok()?).ok();
        let _ = std::fs::remove_file(&path);
        note
    }

    /// Removes the notes of sessions expired longer ago than [`EXPIRED_NOTE_KEPT`].
    fn forget_old_expired_notes(&self) {
        let Ok(tenants) = std::fs::read_dir(self.config.root.join(EXPIRED)) else { return };
        for tenant in tenants.flatten() {
            for note in std::fs::read_dir(tenant.path()).into_iter().flatten().flatten() {
                let old = note.metadata().and_then(|m| m.modified()).ok().and_then(|at| at.elapsed().ok()).is_some_and(|age| age >= EXPIRED_NOTE_KEPT);
                if old {
                    let _ = std::fs::remove_file(note.path());
                }
            }
        }
    }
}

impl Drop for Interpreter {
    fn drop(&mut self) {
        if self.config.storage == Storage::Memory {
            let _ = std::fs::remove_dir_all(&self.config.root);
        }
    }
}

/// `sessions` in the order the memory budget hibernates them: the longest
/// `idle` first. Each idle time is read once, before the sort: read during
/// it, idle times grow as it goes and drop as runs touch sessions, which is
/// no order at all (the standard sort may then panic, taking the answer of
/// the run that asked with it).
fn longest_idle_first<T>(sessions: Vec<T>, idle: impl Fn(&T) -> Duration) -> Vec<T> {
    let mut keyed: Vec<(Duration, T)> = sessions.into_iter().map(|s| (idle(&s), s)).collect();
    keyed.sort_by_key(|(idle, _)| std::cmp::Reverse(*idle));
    keyed.into_iter().map(|(_, s)| s).collect()
}

/// Copies the files and directories under `from` into `to` (a copy-on-write
/// clone where the filesystem offers one: `std::fs::copy` uses
/// `copy_file_range`).
fn copy_tree(from: &Path, to: &Path) -> Result<(), InterpreterError> {
    let io = |e| InterpreterError::io("copying a session's files", e);
    for entry in std::fs::read_dir(from).map_err(io)? {
        let entry = entry.map_err(io)?;
        let kind = entry.file_type().map_err(io)?;
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            std::fs::create_dir_all(&target).map_err(io)?;
            copy_tree(&entry.path(), &target)?;
        } else if kind.is_file() {
            std::fs::copy(entry.path(), &target).map_err(io)?;
        }
    }
    Ok(())
}

/// Removes a directory tree no session refers to any more.
fn remove_tree(path: &Path) {
    #[cfg(test)]
    tests::pause_at(tests::Step::Removal, path);
    let _ = std::fs::remove_dir_all(path);
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

impl Session {
    fn idle(&self) -> Duration {
        self.last_used.lock().unwrap_or_else(|p| p.into_inner()).elapsed()
    }

    fn touch(&self) {
        *self.last_used.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
    }

    /// The directory changed outside a run: the next run walks it again
    /// (for its changed files and its quota). `live` is the session's
    /// instance, whose lock the caller holds.
    fn forget_seen(&self, live: &LiveInstance) {
        *self.seen.lock().unwrap_or_else(|p| p.into_inner()) = None;
        live.directory_changed();
    }

    /// Whether `meta.json` should be written again: its last use is older
    /// than [`META_REFRESH`], or it says the session holds no state when it
    /// does (or the reverse). Between writes a crash loses at most that
    /// much of the idle time a restarted process counts.
    fn meta_due(&self) -> bool {
        let had_state = self.had_state.load(std::sync::atomic::Ordering::Relaxed);
        let written = self.meta_written.lock().unwrap_or_else(|p| p.into_inner());
        written.is_none_or(|(at, with_state)| at.elapsed() >= META_REFRESH || with_state != had_state)
    }

    fn write_meta(&self) -> Result<(), InterpreterError> {
        let meta = Meta {
            ttl_seconds: self.ttl.as_secs(),
            last_used_unix: unix_now(),
            runtime: self.runtime,
            had_state: self.had_state.load(std::sync::atomic::Ordering::Relaxed),
            datasets: self.attached.lock().unwrap_or_else(|p| p.into_inner()).clone(),
        };
        let bytes = serde_json::to_vec(&meta).unwrap_or_default();
        std::fs::write(self.home.join("meta.json"), bytes).map_err(|e| InterpreterError::io("writing session metadata", e))?;
        *self.meta_written.lock().unwrap_or_else(|p| p.into_inner()) = Some((Instant::now(), meta.had_state));
        Ok(())
    }
}

/// Whether a call may create the session it names, and how.
#[derive(Clone)]
enum Create {
    No,
    Yes { ttl: Option<Duration>, runtime: Option<Runtime> },
    /// A new session whose directory is another session's: the same
    /// files, its own Python state (a second context of one sandbox).
    Sharing { ttl: Option<Duration>, runtime: Runtime, files: PathBuf },
}

/// The table's unexpired session under `key`, touched, when it runs the
/// runtime `asked` for (if any).
fn listed(sessions: &HashMap<(String, String), Arc<Session>>, key: &(String, String), asked: Option<Runtime>) -> Result<Option<Arc<Session>>, InterpreterError> {
    match sessions.get(key) {
        Some(session) if session.idle() < session.ttl => {
            check_runtime(&key.1, session.runtime, asked)?;
            session.touch();
            Ok(Some(session.clone()))
        }
        _ => Ok(None),
    }
}

/// An existing session runs the runtime it was created with: asking for another is an error.
fn check_runtime(session_id: &str, has: Runtime, asked: Option<Runtime>) -> Result<(), InterpreterError> {
    match asked {
        Some(asked) if asked != has => Err(InterpreterError::RuntimeMismatch { session: session_id.to_owned(), has, asked }),
        _ => Ok(()),
    }
}

fn read_meta(home: &Path) -> Option<Meta> {
    serde_json::from_slice(&std::fs::read(home.join("meta.json")).ok()?).ok()
}

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// The run's environment: names of letters, digits and `_`, bounded.
fn checked_env(env: BTreeMap<String, String>) -> Result<Vec<(String, String)>, InterpreterError> {
    if env.len() > MAX_ENV_VARS {
        return Err(InterpreterError::Invalid(format!("env holds more than {MAX_ENV_VARS} variables")));
    }
    env.into_iter()
        .map(|(name, value)| {
            let valid_name = !name.is_empty()
                && name.len() <= 128
                && !name.starts_with(|c: char| c.is_ascii_digit())
                && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
            if !valid_name {
                return Err(InterpreterError::Invalid(format!("env name {name:?} must be letters, digits and '_'")));
            }
            if value.len() > MAX_ENV_VALUE_BYTES || value.contains('\0') {
                return Err(InterpreterError::Invalid(format!("env value of {name} is over {MAX_ENV_VALUE_BYTES} bytes or holds NUL")));
            }
            Ok((name, value))
        })
        .collect()
}

/// Size and modification time of every file, to tell what a run changed.
fn snapshot(dir: &Path) -> Snapshot {
    SessionFiles::new(dir.to_path_buf())
        .list()
        .unwrap_or_default()
        .into_iter()
        .filter_map(|f| {
            let modified = std::fs::symlink_metadata(dir.join(&f.filename)).and_then(|m| m.modified()).ok()?;
            Some((f.filename, (f.size_bytes, modified)))
        })
        .collect()
}

/// The files of `after` that are new or differ from `before`, by name.
fn changed(before: &Snapshot, after: &Snapshot) -> Vec<FileInfo> {
    let mut found: Vec<FileInfo> = after
        .iter()
        .filter(|(name, seen)| before.get(*name) != Some(*seen))
        .map(|(name, (size, _))| crate::files::info(name.clone(), *size))
        .collect();
    found.sort_by(|a, b| a.filename.cmp(&b.filename));
    found
}

#[cfg(test)]
mod send_check {
    fn is_send<T: Send>(_: T) {}
    #[allow(dead_code)]
    fn run_python_is_send(i: &std::sync::Arc<super::Interpreter>) {
        is_send(i.run_python("t", "s", super::RunRequest::default(), "http://h"));
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};
    use std::sync::mpsc::{Receiver, Sender, channel};
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use anypath_sandbox::{BlockRunner, RunnerConfig};

    use super::{Interpreter, InterpreterConfig, RunReport};

    /// The file work a test may hold up.
    #[derive(Clone, Copy, PartialEq, Eq, Debug)]
    pub(super) enum Step {
        /// A session's tree is removed.
        Removal,
        /// A state image is written.
        ImageWrite,
        /// A state image is read to be resumed.
        ImageRead,
    }

    /// A step held up under `root`: it reports the path, then waits to be let go.
    struct Gate {
        root: PathBuf,
        step: Step,
        entered: Sender<PathBuf>,
        release: Receiver<()>,
    }

    /// Steps the test holds up; tests in this process share it, each under its own root.
    static GATES: Mutex<Vec<Gate>> = Mutex::new(Vec::new());

    /// Called before each step of file work: one under a gated root waits there.
    pub(super) fn pause_at(step: Step, path: &Path) {
        let gate = {
            let mut gates = GATES.lock().unwrap_or_else(|p| p.into_inner());
            let at = gates.iter().position(|g| g.step == step && path.starts_with(&g.root));
            at.map(|at| gates.remove(at))
        };
        if let Some(gate) = gate {
            let _ = gate.entered.send(path.to_path_buf());
            let _ = gate.release.recv_timeout(Duration::from_secs(30));
        }
    }

    fn runner() -> PathBuf {
        let path = std::env::var_os("ANYPATH_RUNNER")
            .map(PathBuf::from)
            .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/python-runner/runner.wasm"));
        assert!(path.is_file(), "runner component {} is missing: run `cargo xtask build` or set ANYPATH_RUNNER", path.display());
        path
    }

    /// An interpreter on `root`, and the runtime its sandbox started on
    /// (kept alive as long as the sandbox).
    fn interpreter(root: &Path) -> (tokio::runtime::Runtime, Arc<Interpreter>) {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime");
        let mut config = RunnerConfig::new(runner());
        config.warm_instances = 0;
        let runner = runtime.block_on(BlockRunner::start(config)).expect("the runner starts");
        let sessions = runtime.block_on(runner.session_runtime()).expect("sessions start");
        (runtime, Arc::new(Interpreter::new(vec![sessions], InterpreterConfig::new(root)).expect("interpreter")))
    }

    /// Runs `work` on its own thread; its answer, or `None` when it takes
    /// longer than `within`.
    fn within<T: Send + 'static>(within: Duration, work: impl FnOnce() -> T + Send + 'static) -> Option<T> {
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            let _ = tx.send(work());
        });
        rx.recv_timeout(within).ok()
    }

    /// A run reports the files it changed and no others: the directory as
    /// the last run left it is reused only until an upload or a delete
    /// changes it between runs.
    #[test]
    fn files_changed_between_runs_are_not_the_next_runs_artifacts() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (runtime, interpreter) = interpreter(dir.path());
        let run = |code: &str| {
            let report = runtime.block_on(interpreter.run_python("t", "s", super::RunRequest::code(code), "http://h")).expect("run");
            assert_eq!(report.cell.error, None, "{code}");
            report.artifacts.into_iter().map(|a| a.filename).collect::<Vec<_>>()
        };
        assert_eq!(run("open('a.txt', 'w').write('one')"), ["a.txt"]);
        assert!(run("x = 1").is_empty(), "a run that touches nothing lists nothing");
        interpreter.upload_file("t", "s", "b.txt", b"uploaded", false, None).expect("upload");
        assert!(run("x = 2").is_empty(), "the upload is not the run's change");
        interpreter.delete_file("t", "s", "a.txt").expect("delete");
        assert_eq!(run("open('a.txt', 'w').write('one')"), ["a.txt"], "a file the run made again after a delete is its change");
        assert_eq!(run("open('b.txt', 'w').write('changed by the run')"), ["b.txt"]);
    }

    /// Reopening an expired session removes its old directory while the
    /// session table is free: with that removal held up, calls on other
    /// sessions (an existing one, a new one) still answer at once.
    #[test]
    fn an_expired_sessions_directory_is_removed_without_holding_the_table() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (_runtime, interpreter) = interpreter(dir.path());
        let short = Some(Duration::from_secs(1));
        interpreter.open_session("t", "old", short, None).expect("old session");
        interpreter.upload_file("t", "old", "left.txt", b"from before", false, None).expect("upload");
        interpreter.open_session("t", "other", None, None).expect("other session");
        std::thread::sleep(Duration::from_millis(1100));

        let (entered_tx, entered) = channel();
        let (release, release_rx) = channel();
        GATES.lock().expect("gates").push(Gate { root: dir.path().to_path_buf(), step: Step::Removal, entered: entered_tx, release: release_rx });
        let reopening = {
            let interpreter = interpreter.clone();
            std::thread::spawn(move || interpreter.open_session("t", "old", None, None))
        };
        let removing = entered.recv_timeout(Duration::from_secs(10)).expect("the expired directory is removed");
        assert!(removing.starts_with(dir.path().join(super::DISCARDED)), "removed after being moved aside: {}", removing.display());

        let other = interpreter.clone();
        let answered = within(Duration::from_secs(5), move || other.session_info("t", "other").map(|i| i.session_id));
        assert_eq!(answered.map(Result::ok), Some(Some("other".to_owned())), "another session answers during the removal");
        let other = interpreter.clone();
        let created = within(Duration::from_secs(5), move || other.open_session("t", "new", None, None).is_ok());
        assert_eq!(created, Some(true), "a new session is created during the removal");
        assert!(!reopening.is_finished(), "the reopening call waits for its own removal");

        release.send(()).expect("released");
        let reopened = reopening.join().expect("no panic").expect("reopened");
        assert_eq!(reopened.session_id, "old");
        assert!(interpreter.list_files("t", "old").expect("files").is_empty(), "the reopened session starts empty");
        assert!(!removing.exists(), "the old tree is gone");
    }

    /// Holds up the next `step` under `root`: a receiver told when it is
    /// reached, and the sender that lets it go.
    fn hold(root: &Path, step: Step) -> (Receiver<PathBuf>, Sender<()>) {
        let (entered_tx, entered) = channel();
        let (release, release_rx) = channel();
        GATES.lock().expect("gates").push(Gate { root: root.to_path_buf(), step, entered: entered_tx, release: release_rx });
        (entered, release)
    }

    fn run(runtime: &tokio::runtime::Runtime, interpreter: &Arc<Interpreter>, code: &str) -> RunReport {
        runtime.block_on(interpreter.run_python("t", "s", super::RunRequest::code(code), "http://h")).expect("run")
    }

    /// A state parked while its caller goes away (a client that disconnects
    /// while the memory budget hibernates another session, or its own) is
    /// not lost: the image being written is what the next run resumes.
    #[test]
    fn a_hibernation_dropped_while_its_image_is_written_is_resumed() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (runtime, interpreter) = interpreter(dir.path());
        assert_eq!(run(&runtime, &interpreter, "x = 41").cell.error, None);
        let (entered, release) = hold(dir.path(), Step::ImageWrite);
        let parking = {
            let interpreter = interpreter.clone();
            runtime.spawn(async move { interpreter.hibernate_session("t", "s").await })
        };
        entered.recv_timeout(Duration::from_secs(30)).expect("the image is being written");
        parking.abort();
        assert!(runtime.block_on(parking).is_err_and(|e| e.is_cancelled()), "the hibernation was dropped mid-write");
        release.send(()).expect("released");
        // The write, let go, ends on the blocking pool by itself.
        let image = dir.path().join("sessions/t/s").join(super::STATE_IMAGE);
        let written = within(Duration::from_secs(30), move || {
            while !image.is_file() {
                std::thread::sleep(Duration::from_millis(10));
            }
        });
        assert!(written.is_some(), "the image was written");
        let report = run(&runtime, &interpreter, "print(x + 1)");
        let cell = &report.cell;
        assert_eq!((cell.output.stdout.as_str(), cell.state, cell.state_reset), ("42\n", super::StateOrigin::Resumed, false), "{:?}", cell.error);
    }

    /// A resume dropped while its image is read (the run's client went
    /// away) leaves the image where it was: the next run resumes it.
    #[test]
    fn a_resume_dropped_while_its_image_is_read_leaves_the_state_for_the_next_run() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (runtime, interpreter) = interpreter(dir.path());
        assert_eq!(run(&runtime, &interpreter, "x = 41").cell.error, None);
        assert!(runtime.block_on(interpreter.hibernate_session("t", "s")).expect("hibernated"));
        let (entered, release) = hold(dir.path(), Step::ImageRead);
        let resuming = {
            let interpreter = interpreter.clone();
            runtime.spawn(async move { interpreter.run_python("t", "s", super::RunRequest::code("x += 1"), "http://h").await })
        };
        entered.recv_timeout(Duration::from_secs(30)).expect("the image is being read");
        resuming.abort();
        assert!(runtime.block_on(resuming).is_err_and(|e| e.is_cancelled()), "the run was dropped mid-read");
        release.send(()).expect("released");
        let report = run(&runtime, &interpreter, "print(x + 1)");
        let cell = &report.cell;
        assert_eq!((cell.output.stdout.as_str(), cell.state, cell.state_reset), ("42\n", super::StateOrigin::Resumed, false), "{:?}", cell.error);
    }

    /// A state handed out and never handed back is reported lost, with its
    /// reason, rather than taken for a session that held none.
    #[test]
    fn a_state_image_that_vanishes_is_reported_lost() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (runtime, interpreter) = interpreter(dir.path());
        assert_eq!(run(&runtime, &interpreter, "x = 41").cell.error, None);
        assert!(runtime.block_on(interpreter.hibernate_session("t", "s")).expect("hibernated"));
        std::fs::remove_file(dir.path().join("sessions/t/s").join(super::STATE_IMAGE)).expect("image removed");
        let report = run(&runtime, &interpreter, "print(x)");
        let cell = &report.cell;
        assert!(cell.state_reset, "{cell:?}");
        assert!(cell.state_note.as_deref().is_some_and(|n| n.contains("could not be read")), "{:?}", cell.state_note);
    }

    /// The memory budget orders sessions by idle times read once each: read
    /// while the sort compares them (they change as it goes, and as runs
    /// touch sessions), they are no order, and the sort may panic, taking
    /// the answer of the run that asked for the eviction with it.
    #[test]
    fn the_eviction_order_reads_each_idle_time_once() {
        use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
        let readings = AtomicU64::new(0);
        let first_read = Mutex::new(std::collections::HashMap::new());
        let sessions: Vec<u64> = (0..10_000).collect();
        // Each reading differs from the last, as a clock and concurrent touches make it.
        let ordered = super::longest_idle_first(sessions, |session| {
            let n = readings.fetch_add(1, Relaxed);
            let idle = Duration::from_nanos(n.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40);
            first_read.lock().expect("readings").entry(*session).or_insert(idle);
            idle
        });
        assert_eq!(readings.load(Relaxed), 10_000, "one reading per session");
        let first_read = first_read.into_inner().expect("readings");
        let idle: Vec<Duration> = ordered.iter().map(|s| first_read[s]).collect();
        assert!(idle.windows(2).all(|w| w[0] >= w[1]), "the longest idle first");
        assert_eq!(ordered.len(), 10_000);
    }

    /// A session that expired holding state and is opened again under its
    /// name says on its first run that it starts afresh, and why: whether
    /// it was still listed, already swept away, or found expired on disk by
    /// the next process. A session that never held state says nothing.
    #[test]
    fn a_session_opened_in_place_of_an_expired_one_says_its_state_was_lost() {
        let dir = tempfile::tempdir().expect("temp dir");
        let short = Some(Duration::from_secs(1));
        let run_in = |runtime: &tokio::runtime::Runtime, interpreter: &Arc<Interpreter>, id: &str, code: &str| {
            let report = runtime.block_on(interpreter.run_python("t", id, super::RunRequest::code(code), "http://h")).expect("run");
            assert_eq!(report.cell.error, None, "{id}");
            (report.cell.output.stdout.clone(), report.cell.state_reset, report.cell.state_note.unwrap_or_default())
        };
        {
            let (runtime, interpreter) = interpreter(dir.path());
            for id in ["listed", "swept", "stateless"] {
                interpreter.open_session("t", id, short, None).expect("opened");
            }
            for id in ["listed", "swept"] {
                run_in(&runtime, &interpreter, id, "x = 1");
            }
            std::thread::sleep(Duration::from_millis(2100));
            // Still listed, not swept yet.
            let (stdout, reset, note) = run_in(&runtime, &interpreter, "listed", "print('x' in globals())");
            assert_eq!((stdout.as_str(), reset), ("False\n", true), "{note}");
            assert!(note.contains("expired"), "{note}");
            assert!(interpreter.sweep() >= 2, "the other two expired");
            assert!(!dir.path().join("sessions/t/swept").exists(), "swept away");
            let (stdout, reset, note) = run_in(&runtime, &interpreter, "swept", "print('x' in globals())");
            assert_eq!((stdout.as_str(), reset), ("False\n", true), "{note}");
            assert!(note.contains("expired"), "{note}");
            let (stdout, reset, _) = run_in(&runtime, &interpreter, "swept", "x = 2\nprint('x' in globals())");
            assert_eq!((stdout.as_str(), reset), ("True\n", false), "said once, then the new session holds its own state");
            let (stdout, reset, note) = run_in(&runtime, &interpreter, "stateless", "print('x' in globals())");
            assert_eq!((stdout.as_str(), reset), ("False\n", false), "a session without state lost none: {note}");
            // Expires while no process runs.
            interpreter.open_session("t", "restarted", short, None).expect("opened");
            run_in(&runtime, &interpreter, "restarted", "x = 1");
        }
        std::thread::sleep(Duration::from_millis(2100));
        let (runtime, interpreter) = interpreter(dir.path());
        assert!(!dir.path().join("sessions/t/restarted").exists(), "removed when the next process started");
        let (stdout, reset, note) = run_in(&runtime, &interpreter, "restarted", "print('x' in globals())");
        assert_eq!((stdout.as_str(), reset), ("False\n", true), "{note}");
        assert!(note.contains("expired"), "{note}");
    }
}
