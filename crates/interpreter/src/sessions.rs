//! The code interpreter's core: sessions named by the client and scoped by
//! tenant, each with a directory and a live instance, an idle TTL, explicit
//! close, a bound on live instances (least recently used idle ones give theirs
//! up; their files stay) and one run at a time.
//!
//! Every tool an agent uses is one call here: `upload_file`, `run_python`,
//! `list_files`, `read_file`, `close_session`.
//!
//! On disk: `<root>/sessions/<tenant>/<session_id>/meta.json` (TTL and last
//! use) beside `data/`, the directory the code sees at /mnt/data. A restart
//! finds the files again; what is past its TTL is removed at start.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anypath_sandbox::{CellReport, CellRequest, FileQuota, LimitOverrides, LiveInstance, Runtime, SessionRuntime};
use serde::{Deserialize, Serialize};

use crate::artifacts::{Artifact, ArtifactConfig, ArtifactStore};
use crate::error::InterpreterError;
use crate::files::{FileInfo, SessionFiles};
use crate::names;
use crate::signing::Signer;

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
    /// Live instances kept at once; beyond it the least recently used idle one is dropped.
    pub max_live: usize,
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
    /// The runtime of a session created without naming one.
    pub default_runtime: Runtime,
}

impl InterpreterConfig {
    /// Defaults: 15 minutes idle TTL, at most 4 hours, 16 live instances, 10 s
    /// wait; 100 MiB per file, 500 MiB and 1000 entries per session; artifacts kept 24 hours, 1 GiB per tenant, read inline up to 5 MiB.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            storage: Storage::Disk,
            default_ttl: Duration::from_secs(15 * 60),
            max_ttl: Duration::from_secs(4 * 3600),
            max_live: 16,
            busy_wait: Duration::from_secs(10),
            quota: FileQuota { max_file_bytes: 100 << 20, max_session_bytes: 500 << 20, max_files: 1000 },
            artifacts: ArtifactConfig::default(),
            read_cap_bytes: 5 << 20,
            signing_key: None,
            public_url: None,
            default_runtime: Runtime::Python,
        }
    }
}

/// What a client sees of a session.
#[derive(Debug, Clone, Serialize)]
pub struct SessionInfo {
    pub session_id: String,
    pub ttl_seconds: u64,
    /// Seconds until the session expires if it stays idle.
    pub expires_in_seconds: u64,
    /// Whether a live instance holds Python state now.
    pub live: bool,
    /// The Python the session runs.
    pub runtime: Runtime,
}

/// One run asked of a session.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct RunRequest {
    pub code: String,
    /// Environment variables the code sees; the host's never reach it.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Lower limits for this run.
    #[serde(default)]
    pub limits: LimitOverrides,
    /// The runtime, when this run creates the session (the server's default
    /// otherwise); a session keeps the runtime it was created with.
    #[serde(default)]
    pub runtime: Option<Runtime>,
}

/// What a run reports.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct RunReport {
    pub run_id: String,
    pub session_id: String,
    #[serde(flatten)]
    pub cell: CellReport,
    /// Files the run created or changed, kept as artifacts (none after a failed run).
    pub artifacts: Vec<Artifact>,
    /// Changed files that could not be kept (tenant quota, storage failure).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub artifact_errors: Vec<ArtifactFailure>,
}

/// A changed file that was not kept as an artifact, and why.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ArtifactFailure {
    pub filename: String,
    pub error: String,
}

/// An artifact's bytes, read inline.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ArtifactContent {
    pub path: String,
    pub mime_type: String,
    pub size_bytes: u64,
    pub sha256: String,
    pub content_base64: String,
}

/// The code interpreter: sessions over one sandbox per runtime.
pub struct Interpreter {
    sandboxes: Vec<SessionRuntime>,
    config: InterpreterConfig,
    artifacts: ArtifactStore,
    sessions: Mutex<HashMap<(String, String), Arc<Session>>>,
}

struct Session {
    tenant: String,
    id: String,
    home: PathBuf,
    files: SessionFiles,
    runtime: Runtime,
    ttl: Duration,
    last_used: Mutex<Instant>,
    /// A run has left Python state in the instance (kept in `meta.json`).
    had_state: std::sync::atomic::AtomicBool,
    live: tokio::sync::Mutex<LiveInstance>,
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
}

impl Interpreter {
    /// The interpreter over `sandboxes` (one per runtime it offers, the
    /// default runtime's among them); removes what an earlier process left
    /// past its TTL.
    pub fn new(sandboxes: Vec<SessionRuntime>, mut config: InterpreterConfig) -> Result<Self, InterpreterError> {
        if !sandboxes.iter().any(|s| s.runtime() == config.default_runtime) {
            return Err(InterpreterError::RuntimeUnavailable(config.default_runtime));
        }
        if config.storage == Storage::Memory {
            config.root = memory_root()?;
        }
        std::fs::create_dir_all(config.root.join("sessions")).map_err(|e| InterpreterError::io("creating the session root", e))?;
        let signer = match &config.signing_key {
            Some(key) => Signer::new(key.clone()),
            None => Signer::load_or_create(&config.root.join("signing.key"))?,
        };
        let artifacts = ArtifactStore::open(&config.root.join("artifacts"), signer, config.artifacts.clone())?;
        tracing::info!(storage = ?config.storage, root = %config.root.display(), "interpreter storage");
        let interpreter = Self { sandboxes, config, artifacts, sessions: Mutex::new(HashMap::new()) };
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
        self.config.default_runtime
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

    /// Removes the session: its instance, its directory, its files.
    pub async fn close_session(&self, tenant: &str, session_id: &str) -> Result<(), InterpreterError> {
        let session = self.session(tenant, session_id, Create::No)?;
        let _running = session.live.lock().await;
        self.forget(&session);
        Ok(())
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
        session.files.write(filename, bytes, overwrite)
    }

    /// Refuses an upload that would take the session past its quota.
    fn check_upload(&self, session: &Session, filename: &str, size: u64) -> Result<(), InterpreterError> {
        let quota = self.config.quota;
        let name = names::filename(filename)?;
        let replaced = std::fs::symlink_metadata(session.files.dir().join(name)).ok().filter(|m| m.is_file()).map(|m| m.len());
        let usage = anypath_sandbox::directory_usage(session.files.dir());
        // Saturating: the directory may have changed since it was counted.
        let bytes = usage.bytes.saturating_sub(replaced.unwrap_or(0)).saturating_add(size);
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

    /// One file's bytes.
    pub fn read_file(&self, tenant: &str, session_id: &str, path: &str) -> Result<(FileInfo, Vec<u8>), InterpreterError> {
        self.session(tenant, session_id, Create::No)?.files.read(path)
    }

    /// Deletes one file, under the run lock: a run or an upload counting the
    /// session's usage never sees a file vanish halfway.
    pub fn delete_file(&self, tenant: &str, session_id: &str, path: &str) -> Result<(), InterpreterError> {
        let session = self.session(tenant, session_id, Create::No)?;
        let _running = session.live.try_lock().map_err(|_| InterpreterError::Busy(session_id.to_owned()))?;
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

    /// Runs code in the session (created on first use), one run at a time.
    /// Files the run created or changed become artifacts linked under `base_url`.
    pub async fn run_python(&self, tenant: &str, session_id: &str, request: RunRequest, base_url: &str) -> Result<RunReport, InterpreterError> {
        let env = checked_env(request.env)?;
        let session = self.session(tenant, session_id, Create::Yes { ttl: None, runtime: request.runtime })?;
        let mut live = tokio::time::timeout(self.config.busy_wait, session.live.lock())
            .await
            .map_err(|_| InterpreterError::Busy(session_id.to_owned()))?;
        let before = snapshot(session.files.dir());
        let cell = live.run(CellRequest { code: request.code, env, limits: request.limits }).await;
        session.had_state.store(live.is_live(), std::sync::atomic::Ordering::Relaxed);
        // Fail fast: after a failed run nothing is scanned or kept.
        let changed_files = if cell.error.is_none() { changed(&session.files, &before) } else { Vec::new() };
        // Kept while the run's lock is held, so the next run cannot change them first.
        let (artifacts, artifact_errors) = self.keep(&session, changed_files, base_url);
        drop(live);
        self.touch(&session);
        self.evict_beyond_limit(&session).await;
        let run_id = uuid::Uuid::new_v4().simple().to_string();
        let report = RunReport { run_id, session_id: session_id.to_owned(), cell, artifacts, artifact_errors };
        tracing::info!(
            tenant, session = session_id, run_id = %report.run_id, runtime = %session.runtime,
            outcome = report.cell.error.as_ref().map_or("ok", |e| e.kind()),
            duration_us = report.cell.metrics.duration_us, fuel = report.cell.metrics.fuel_consumed,
            peak_memory_bytes = report.cell.metrics.peak_memory_bytes, state_reset = report.cell.state_reset,
            "run"
        );
        Ok(report)
    }

    /// Keeps each changed file as an artifact.
    fn keep(&self, session: &Session, files: Vec<FileInfo>, base_url: &str) -> (Vec<Artifact>, Vec<ArtifactFailure>) {
        let mut kept = Vec::new();
        let mut failed = Vec::new();
        for file in files {
            let ingested = session
                .files
                .host_path(&file.filename)
                .and_then(|(_, path)| self.artifacts.ingest(&session.tenant, &session.id, &file.filename, &path, base_url));
            match ingested {
                Ok(artifact) => kept.push(artifact),
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
                self.forget(session);
            }
        }
        expired.len() + self.sweep_disk()
    }

    /// Live instances held now.
    pub fn live_count(&self) -> usize {
        let sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        sessions.values().filter(|s| s.live.try_lock().is_ok_and(|l| l.is_live()) || s.live.try_lock().is_err()).count()
    }

    fn info(&self, session: &Session) -> SessionInfo {
        SessionInfo {
            session_id: session.id.clone(),
            ttl_seconds: session.ttl.as_secs(),
            expires_in_seconds: session.ttl.saturating_sub(session.idle()).as_secs(),
            live: session.live.try_lock().map_or(true, |l| l.is_live()),
            runtime: session.runtime,
        }
    }

    /// The session named `session_id` of `tenant`: known, found on disk, or (with `create`) new.
    fn session(&self, tenant: &str, session_id: &str, create: Create) -> Result<Arc<Session>, InterpreterError> {
        let tenant = names::tenant(tenant)?;
        let session_id = names::session_id(session_id)?;
        let (ttl, asked) = match create {
            Create::Yes { ttl, runtime } => (ttl, runtime),
            Create::No => (None, None),
        };
        let key = (tenant.to_owned(), session_id.to_owned());
        let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(session) = sessions.get(&key)
            && session.idle() < session.ttl {
                check_runtime(session_id, session.runtime, asked)?;
                session.touch();
                return Ok(session.clone());
            }
        let home = self.config.root.join("sessions").join(tenant).join(session_id);
        let on_disk = read_meta(&home).filter(|m| unix_now().saturating_sub(m.last_used_unix) < m.ttl_seconds);
        if on_disk.is_none() && matches!(create, Create::No) {
            return Err(InterpreterError::NoSuchSession(session_id.to_owned()));
        }
        let runtime = match &on_disk {
            Some(meta) => {
                check_runtime(session_id, meta.runtime, asked)?;
                meta.runtime
            }
            None => asked.unwrap_or(self.config.default_runtime),
        };
        let sandbox = self.sandbox_for(runtime)?;
        let ttl = ttl
            .or(on_disk.as_ref().map(|m| Duration::from_secs(m.ttl_seconds)))
            .unwrap_or(self.config.default_ttl)
            .min(self.config.max_ttl)
            .max(Duration::from_secs(1));
        if on_disk.is_none() {
            let _ = std::fs::remove_dir_all(&home); // an expired predecessor
        }
        let data = home.join("data");
        std::fs::create_dir_all(&data).map_err(|e| InterpreterError::io("creating the session directory", e))?;
        let mut live = sandbox.live_instance(Some(data.clone()), &LimitOverrides::default()).with_quota(self.config.quota);
        // An earlier process's instance held state this one cannot bring back.
        let had_state = on_disk.as_ref().is_some_and(|m| m.had_state);
        if had_state {
            live = live.with_state_lost();
        }
        let session = Arc::new(Session {
            tenant: tenant.to_owned(),
            id: session_id.to_owned(),
            files: SessionFiles::new(data),
            home,
            runtime,
            ttl,
            last_used: Mutex::new(Instant::now()),
            had_state: std::sync::atomic::AtomicBool::new(had_state),
            live: tokio::sync::Mutex::new(live),
        });
        session.write_meta()?;
        sessions.insert(key, session.clone());
        Ok(session)
    }

    fn touch(&self, session: &Session) {
        session.touch();
        let _ = session.write_meta();
    }

    fn forget(&self, session: &Session) {
        let key = (session.tenant.clone(), session.id.clone());
        let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        if sessions.get(&key).is_some_and(|s| std::ptr::eq(Arc::as_ptr(s), session)) {
            sessions.remove(&key);
        }
        drop(sessions);
        let _ = std::fs::remove_dir_all(&session.home);
    }

    /// Keeps at most `max_live` instances: the least recently used idle
    /// sessions other than `current` give theirs up.
    async fn evict_beyond_limit(&self, current: &Session) {
        let mut candidates: Vec<Arc<Session>> = {
            let sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
            sessions.values().filter(|s| !std::ptr::eq(Arc::as_ptr(s), current)).cloned().collect()
        };
        candidates.sort_by_key(|s| std::cmp::Reverse(s.idle()));
        let mut live = 1 + candidates.iter().filter(|s| s.live.try_lock().map_or(true, |l| l.is_live())).count();
        for session in candidates {
            if live <= self.config.max_live {
                break;
            }
            if let Ok(mut instance) = session.live.try_lock()
                && instance.is_live() {
                    instance.reset();
                    live -= 1;
                }
        }
    }

    /// Removes session directories on disk past their TTL (left by this or an
    /// earlier process); returns how many.
    fn sweep_disk(&self) -> usize {
        let mut removed = 0;
        let Ok(tenants) = std::fs::read_dir(self.config.root.join("sessions")) else { return 0 };
        for tenant in tenants.flatten() {
            let Ok(homes) = std::fs::read_dir(tenant.path()) else { continue };
            for home in homes.flatten() {
                let expired = read_meta(&home.path()).is_none_or(|m| unix_now().saturating_sub(m.last_used_unix) >= m.ttl_seconds);
                let key = (tenant.file_name().to_string_lossy().into_owned(), home.file_name().to_string_lossy().into_owned());
                let known = self.sessions.lock().unwrap_or_else(|p| p.into_inner()).contains_key(&key);
                if expired && !known && std::fs::remove_dir_all(home.path()).is_ok() {
                    removed += 1;
                }
            }
        }
        removed
    }
}

impl Drop for Interpreter {
    fn drop(&mut self) {
        if self.config.storage == Storage::Memory {
            let _ = std::fs::remove_dir_all(&self.config.root);
        }
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

impl Session {
    fn idle(&self) -> Duration {
        self.last_used.lock().unwrap_or_else(|p| p.into_inner()).elapsed()
    }

    fn touch(&self) {
        *self.last_used.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
    }

    fn write_meta(&self) -> Result<(), InterpreterError> {
        let meta = Meta {
            ttl_seconds: self.ttl.as_secs(),
            last_used_unix: unix_now(),
            runtime: self.runtime,
            had_state: self.had_state.load(std::sync::atomic::Ordering::Relaxed),
        };
        let bytes = serde_json::to_vec(&meta).unwrap_or_default();
        std::fs::write(self.home.join("meta.json"), bytes).map_err(|e| InterpreterError::io("writing session metadata", e))
    }
}

/// Whether a call may create the session it names, and how.
#[derive(Clone, Copy)]
enum Create {
    No,
    Yes { ttl: Option<Duration>, runtime: Option<Runtime> },
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
fn snapshot(dir: &Path) -> HashMap<String, (u64, SystemTime)> {
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

fn changed(files: &SessionFiles, before: &HashMap<String, (u64, SystemTime)>) -> Vec<FileInfo> {
    let after = snapshot(files.dir());
    let mut found: Vec<FileInfo> = files
        .list()
        .unwrap_or_default()
        .into_iter()
        .filter(|f| before.get(&f.filename) != after.get(&f.filename))
        .collect();
    found.sort_by(|a, b| a.filename.cmp(&b.filename));
    found
}

#[cfg(test)]
mod send_check {
    fn is_send<T: Send>(_: T) {}
    #[allow(dead_code)]
    fn run_python_is_send(i: &super::Interpreter) {
        is_send(i.run_python("t", "s", super::RunRequest::default(), "http://h"));
    }
}
