//! How an interpreter starts: the default runtime resolved against the
//! sandboxes offered, the signing key, the artifact and dataset stores, the
//! ready homes for new `python` sessions, and a sweep of what an earlier
//! process left past its TTL.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use anypath_sandbox::{Runtime, SessionRuntime};

use crate::config::InterpreterConfig;
use crate::error::InterpreterError;
use crate::held::stats::Stats;
use crate::interpreter::Interpreter;
use crate::stores::artifact_store::ArtifactStore;
use crate::stores::dataset_store::DatasetStore;
use crate::stores::session_store::{LocalSessionStore, SessionStore};
use crate::stores::signing::Signer;

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
    /// the signing key stay under the configured root, which `config` has
    /// already resolved ([`InterpreterConfig::with_resolved_root`], so that
    /// the store's homes may go under it too).
    pub fn with_store(sandboxes: Vec<SessionRuntime>, config: InterpreterConfig, store: Arc<dyn SessionStore>) -> Result<Self, InterpreterError> {
        Self::start(sandboxes, config, store)
    }

    fn start(sandboxes: Vec<SessionRuntime>, mut config: InterpreterConfig, store: Arc<dyn SessionStore>) -> Result<Self, InterpreterError> {
        let offered = |runtime: Runtime| sandboxes.iter().any(|s| s.runtime() == runtime);
        let default_runtime = match config.default_runtime {
            Some(runtime) if !offered(runtime) => return Err(InterpreterError::RuntimeUnavailable(runtime)),
            Some(runtime) => runtime,
            None if offered(Runtime::PythonData) => Runtime::PythonData,
            None if offered(Runtime::Python) => Runtime::Python,
            // An interpreter of one other runtime (JavaScript alone) defaults to it.
            None => sandboxes.first().map_or(Runtime::Python, SessionRuntime::runtime),
        };
        config.default_runtime = Some(default_runtime);
        let signer = match &config.signing_key {
            Some(key) => Signer::new(key.clone()),
            None => Signer::load_or_create(&config.root.join("signing.key"))?,
        };
        let artifact_store = ArtifactStore::open(&config.root.join("artifacts"), signer, config.artifacts.clone())?.shared_through(store.artifact_share());
        let dataset_store = DatasetStore::new(config.datasets.clone(), &config.root)?;
        // Homes made ahead, for the first runtime whose instances may start
        // before their session (today `python`'s).
        let ready = sandboxes.iter().find(|s| s.starts_ahead()).map(|ahead| crate::held::ready::ReadyHomes::new(&config.root, ahead.clone()));
        if let Some(ready) = &ready {
            ready.fill();
        }
        tracing::info!(storage = ?config.storage, root = %config.root.display(), "interpreter storage");
        let snapshot_records: Arc<dyn crate::stores::shared_records::SharedRecords> = match store.shared_records() {
            Some(shared) => shared,
            None => Arc::new(crate::stores::local_records::LocalRecords::open(&config.root.join("records"))?),
        };
        let interpreter = Self {
            sandboxes,
            config,
            artifact_store,
            dataset_store,
            ready,
            store,
            table: Mutex::new(HashMap::new()),
            claiming: Default::default(),
            opening: Default::default(),
            snapshot_records,
            stats: Stats::default(),
            shell: None,
            wheelhouse: None,
        };
        crate::views::sessions::sweep_store(&interpreter);
        Ok(interpreter)
    }
}
