//! The interpreter's shared state and its entry points: the sandboxes, the
//! session table, the stores, and one accessor per part ([`Sessions`],
//! [`Hibernation`], [`Runs`], [`Files`], [`Artifacts`], [`Datasets`]),
//! each a view over this state that does one kind of work.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use anypath_sandbox::{Runtime, SessionRuntime};
use anypath_wire::ReadinessCheck;

use crate::artifact_store::ArtifactStore;
use crate::artifacts::Artifacts;
use crate::config::{InterpreterConfig, Storage};
use crate::dataset_store::DatasetStore;
use crate::datasets::Datasets;
use crate::error::InterpreterError;
use crate::files::Files;
use crate::hibernation::Hibernation;
use crate::runs::Runs;
use crate::session::Table;
use crate::session_store::{LocalSessionStore, SessionStore};
use crate::sessions::Sessions;
use crate::signing::Signer;
use crate::stats::{Stats, StatsSnapshot};

/// The code interpreter: sessions over one sandbox per runtime.
pub struct Interpreter {
    pub(crate) sandboxes: Vec<SessionRuntime>,
    pub(crate) config: InterpreterConfig,
    pub(crate) artifact_store: ArtifactStore,
    pub(crate) dataset_store: DatasetStore,
    /// Homes with started instances for new `python` sessions.
    pub(crate) ready: Option<Arc<crate::ready::ReadyHomes>>,
    /// What is kept for each session.
    pub(crate) store: Arc<dyn SessionStore>,
    pub(crate) table: Mutex<Table>,
    pub(crate) stats: Stats,
}

impl Interpreter {
    /// The interpreter over `sandboxes` (one per runtime it offers, the
    /// default runtime's among them), keeping sessions under the root;
    /// removes what an earlier process left past its TTL.
    pub fn new(sandboxes: Vec<SessionRuntime>, config: InterpreterConfig) -> Result<Self, InterpreterError> {
        let config = config.with_resolved_root()?;
        let store = Arc::new(LocalSessionStore::open(&config.root)?);
        Self::start(sandboxes, config, store)
    }

    /// [`Self::new`] with sessions kept in `store`; artifacts, datasets and
    /// the signing key stay under the configured root.
    pub fn with_store(sandboxes: Vec<SessionRuntime>, config: InterpreterConfig, store: Arc<dyn SessionStore>) -> Result<Self, InterpreterError> {
        Self::start(sandboxes, config.with_resolved_root()?, store)
    }

    fn start(sandboxes: Vec<SessionRuntime>, mut config: InterpreterConfig, store: Arc<dyn SessionStore>) -> Result<Self, InterpreterError> {
        let offered = |runtime: Runtime| sandboxes.iter().any(|s| s.runtime() == runtime);
        let default_runtime = match config.default_runtime {
            Some(runtime) if !offered(runtime) => return Err(InterpreterError::RuntimeUnavailable(runtime)),
            Some(runtime) => runtime,
            None if offered(Runtime::PythonData) => Runtime::PythonData,
            None => Runtime::Python,
        };
        config.default_runtime = Some(default_runtime);
        let signer = match &config.signing_key {
            Some(key) => Signer::new(key.clone()),
            None => Signer::load_or_create(&config.root.join("signing.key"))?,
        };
        let artifact_store = ArtifactStore::open(&config.root.join("artifacts"), signer, config.artifacts.clone())?;
        let dataset_store = DatasetStore::new(config.datasets.clone(), &config.root)?;
        let ready = sandboxes.iter().find(|s| s.runtime() == Runtime::Python).map(|python| crate::ready::ReadyHomes::new(&config.root, python.clone()));
        if let Some(ready) = &ready {
            ready.fill();
        }
        tracing::info!(storage = ?config.storage, root = %config.root.display(), "interpreter storage");
        let interpreter =
            Self { sandboxes, config, artifact_store, dataset_store, ready, store, table: Mutex::new(HashMap::new()), stats: Stats::default() };
        crate::sessions::sweep_store(&interpreter);
        Ok(interpreter)
    }

    /// Session lifecycle: open, describe, close, fork, contexts, restart, the sweep.
    pub fn sessions(self: &Arc<Self>) -> Sessions<'_> {
        Sessions::of(self)
    }

    /// Parking live state in images under the memory budget, and resuming it.
    pub fn hibernation(self: &Arc<Self>) -> Hibernation<'_> {
        Hibernation::of(self)
    }

    /// Running code in sessions.
    pub fn runs(self: &Arc<Self>) -> Runs<'_> {
        Runs::of(self)
    }

    /// A session's files and tree, within its quota.
    pub fn files(self: &Arc<Self>) -> Files<'_> {
        Files::of(self)
    }

    /// The artifacts runs kept, and a session's files read as artifacts.
    pub fn artifacts(self: &Arc<Self>) -> Artifacts<'_> {
        Artifacts::of(self)
    }

    /// Mounted and staged datasets, and their views in sessions.
    pub fn datasets(self: &Arc<Self>) -> Datasets<'_> {
        Datasets::of(self)
    }

    /// The runtime of a session created without naming one.
    pub fn default_runtime(&self) -> Runtime {
        self.config.default_runtime.unwrap_or(Runtime::Python)
    }

    /// The sandboxes sessions run on, one per runtime.
    pub fn sandboxes(&self) -> &[SessionRuntime] {
        &self.sandboxes
    }

    pub(crate) fn sandbox_for(&self, runtime: Runtime) -> Result<&SessionRuntime, InterpreterError> {
        self.sandboxes.iter().find(|s| s.runtime() == runtime).ok_or(InterpreterError::RuntimeUnavailable(runtime))
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

    /// What the interpreter did since it started, and its sessions now.
    pub fn stats(&self) -> StatsSnapshot {
        use std::sync::atomic::Ordering::Relaxed;
        let sessions: Vec<_> = self.table.lock().unwrap_or_else(|p| p.into_inner()).values().cloned().collect();
        // A session whose lock is held is running, so live.
        let live = sessions.iter().filter(|s| s.is_live()).count() as u64;
        let hibernated = sessions.iter().filter(|s| s.hibernated.load(Relaxed)).count() as u64;
        self.stats.snapshot(live, hibernated, sessions.len() as u64)
    }

    /// Live instances held now.
    pub fn live_count(&self) -> usize {
        self.stats().sessions_live as usize
    }

    /// What readiness needs of the interpreter, each check named: the
    /// session runtimes are loaded, the data directory takes a file, and
    /// the artifact index and blob store work. Touches the disk: call it
    /// off the async workers.
    pub fn readiness(&self) -> Vec<ReadinessCheck> {
        let runtimes: Vec<String> = self.sandboxes.iter().map(|s| s.runtime().to_string()).collect();
        let loaded = if runtimes.is_empty() { Err("no session runtime is loaded".to_owned()) } else { Ok(()) };
        vec![
            ReadinessCheck::of("session_runtimes", loaded, Some(runtimes.join(", "))),
            ReadinessCheck::of("data_directory", self.store.check_writable(), None),
            ReadinessCheck::of("artifact_store", self.artifact_store.check(), None),
        ]
    }

    /// Runs file work on the blocking pool, off the async workers.
    pub(crate) async fn off_workers<T: Send + 'static>(
        self: &Arc<Self>,
        work: impl FnOnce(&Arc<Interpreter>) -> Result<T, InterpreterError> + Send + 'static,
    ) -> Result<T, InterpreterError> {
        let this = self.clone();
        tokio::task::spawn_blocking(move || work(&this))
            .await
            .unwrap_or_else(|e| Err(InterpreterError::io("file work", std::io::Error::other(e.to_string()))))
    }
}

impl Drop for Interpreter {
    fn drop(&mut self) {
        if self.config.storage == Storage::Memory {
            let _ = std::fs::remove_dir_all(&self.config.root);
        }
    }
}
