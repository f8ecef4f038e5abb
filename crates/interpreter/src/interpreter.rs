//! The interpreter's shared state: the sandboxes, the session table, the
//! stores, the gates and the counters (`held`, `stores`, `gates`). Each
//! view (`sessions`, `hibernation`, `runs`, `files`, `artifacts`,
//! `datasets`, `snapshots`, in `views`) adds its own accessor to
//! [`Interpreter`] in its module, as a view over this state that does one
//! kind of work, so this module depends on none of them; `opening` starts it.

use std::sync::{Arc, Mutex};

use anypath_sandbox::{Runtime, SessionRuntime};
use anypath_wire::ReadinessCheck;

use crate::config::{InterpreterConfig, Storage};
use crate::error::InterpreterError;
use crate::held::session::Table;
use crate::held::stats::{Stats, StatsSnapshot};
use crate::stores::artifact_store::ArtifactStore;
use crate::stores::dataset_store::DatasetStore;
use crate::stores::session_store::SessionStore;

/// The code interpreter: sessions over one sandbox per runtime.
pub struct Interpreter {
    pub(crate) sandboxes: Vec<SessionRuntime>,
    pub(crate) config: InterpreterConfig,
    pub(crate) artifact_store: ArtifactStore,
    pub(crate) dataset_store: DatasetStore,
    /// Homes with started instances for new `python` sessions.
    pub(crate) ready: Option<Arc<crate::held::ready::ReadyHomes>>,
    /// What is kept for each session.
    pub(crate) store: Arc<dyn SessionStore>,
    pub(crate) table: Mutex<Table>,
    /// Sessions this host is claiming from the store and not listed yet.
    pub(crate) claiming: crate::gates::claims::Claims,
    /// Sessions being opened from the store: one opening of each at a time.
    pub(crate) opening: crate::gates::opening_gate::OpeningGate,
    /// Where snapshots are recorded: the fleet's records, or this host's.
    pub(crate) snapshot_records: Arc<dyn crate::stores::shared_records::SharedRecords>,
    pub(crate) stats: Stats,
    /// Runs command lines on sessions' trees, when this host has it.
    pub(crate) shell: Option<anypath_sandbox::shell::ShellRuntime>,
    /// The operator's wheels, which `pip` in commands installs from.
    pub(crate) wheelhouse: Option<std::path::PathBuf>,
}

impl Interpreter {
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

    /// The service's key: it signs download links and runs' callbacks.
    pub fn signer(&self) -> &crate::stores::signing::Signer {
        self.artifact_store.signer()
    }

    /// Records every host of the fleet sees, when sessions are shared
    /// between hosts; `None` on one host.
    pub fn shared_records(&self) -> Option<Arc<dyn crate::stores::shared_records::SharedRecords>> {
        self.store.shared_records()
    }

    /// The session store's own figures (name, help, value): a shared
    /// store's traffic and sweeps; none for local disk.
    pub fn store_metrics(&self) -> Vec<(String, &'static str, f64)> {
        self.store.store_metrics()
    }

    /// What the interpreter did since it started, and its sessions now.
    pub fn stats(&self) -> StatsSnapshot {
        use std::sync::atomic::Ordering::Relaxed;
        let sessions: Vec<_> = self.table.lock().unwrap_or_else(|p| p.into_inner()).values().cloned().collect();
        // A session whose lock is held is running, so live.
        let live: Vec<_> = sessions.iter().filter(|s| s.is_live()).collect();
        let live_bytes = live.iter().map(|s| s.memory_bytes.load(Relaxed)).sum();
        let hibernated = sessions.iter().filter(|s| s.hibernated.load(Relaxed)).count() as u64;
        self.stats.snapshot(live.len() as u64, live_bytes, hibernated, sessions.len() as u64)
    }

    /// The memory the live sessions' instances may hold of their own
    /// before the least recently used are hibernated.
    pub fn memory_budget(&self) -> u64 {
        self.config.session_memory_bytes
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
