//! The kernels this process serves: each is one interpreter session plus
//! what Jupyter's protocol says about it and a session does not keep (its
//! kernelspec, execution count, header session, connections, the queue of
//! its cells).
//!
//! Which kernels exist, and for whom, is written to a file beside the
//! sessions on every change, so a restarted service finds its kernels
//! again: their files and hibernated state are on disk already. When
//! sessions are shared between hosts, each kernel's record is a shared
//! record instead, read on every call: a kernel started through one host
//! is used through any (its activity, count and sockets are per host).

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

use anypath_interpreter::InterpreterError;
use anypath_interpreter::shared_records::{Fields, SharedRecords};
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use super::message::Sender;

/// The kind of the kernels' shared records, and their one field.
const KIND: &str = "jupyter-kernel";
const RECORD: &str = "record";

/// How many iopub frames a slow socket may fall behind before it loses some.
const IOPUB_BACKLOG: usize = 4096;

/// What is kept of a kernel across restarts of the service.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Record {
    pub id: String,
    pub tenant: String,
    /// Its kernelspec's name.
    pub spec: String,
    /// The interpreter session behind it.
    pub session_id: String,
    /// The `KERNEL_*` variables it was started with: every cell sees them.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
}

/// What changes while a kernel runs.
#[derive(Debug)]
pub(crate) struct Activity {
    pub last: SystemTime,
    pub busy: bool,
    /// Cells counted so far (Jupyter's `execution_count`).
    pub execution_count: u64,
    /// The header session of its messages; new on every restart.
    pub sender: Sender,
    /// Cells run with `store_history`, as `(session, line, input)`.
    pub history: Vec<(String, u64, String)>,
}

/// One kernel.
#[derive(Debug)]
pub(crate) struct Kernel {
    pub record: Record,
    activity: Mutex<Activity>,
    /// Open websockets.
    pub connections: AtomicUsize,
    /// Every socket's copy of iopub.
    pub iopub: broadcast::Sender<Arc<String>>,
    /// Cells run one at a time, in the order they came (tokio's mutex is fair).
    pub queue: tokio::sync::Mutex<()>,
    /// Tickets handed to shell requests as they arrive.
    next_ticket: AtomicU64,
    /// Requests with a ticket below this are aborted (an earlier cell failed
    /// with `stop_on_error`).
    abort_below: AtomicU64,
    /// Cancelled when the kernel is shut down: its sockets close.
    gone: CancellationToken,
}

impl Kernel {
    fn new(record: Record) -> Self {
        let (iopub, _) = broadcast::channel(IOPUB_BACKLOG);
        let activity = Activity {
            last: SystemTime::now(),
            busy: false,
            execution_count: 0,
            sender: Sender { session: uuid::Uuid::new_v4().to_string() },
            history: Vec::new(),
        };
        Self {
            record,
            activity: Mutex::new(activity),
            connections: AtomicUsize::new(0),
            iopub,
            queue: tokio::sync::Mutex::new(()),
            next_ticket: AtomicU64::new(0),
            abort_below: AtomicU64::new(0),
            gone: CancellationToken::new(),
        }
    }

    /// Marks the kernel shut down: what is queued is aborted, its sockets close.
    pub(crate) fn shut(&self) {
        self.abort_queued();
        self.gone.cancel();
    }

    /// Whether the kernel was shut down (through this host).
    pub(crate) fn is_gone(&self) -> bool {
        self.gone.is_cancelled()
    }

    /// Resolves once the kernel is shut down.
    pub(crate) async fn gone(&self) {
        self.gone.cancelled().await;
    }

    /// Its changing state, touched now.
    pub(crate) fn activity(&self) -> MutexGuard<'_, Activity> {
        let mut activity = self.activity.lock().unwrap_or_else(|p| p.into_inner());
        activity.last = SystemTime::now();
        activity
    }

    /// Its changing state, as it is.
    pub(crate) fn peek(&self) -> MutexGuard<'_, Activity> {
        self.activity.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The sender of its messages now.
    pub(crate) fn sender(&self) -> Sender {
        self.peek().sender.clone()
    }

    /// Sends a frame to every socket on the kernel (none listening is fine).
    pub(crate) fn publish(&self, frame: String) {
        let _ = self.iopub.send(Arc::new(frame));
    }

    /// A ticket for a shell request arriving now.
    pub(crate) fn ticket(&self) -> u64 {
        self.next_ticket.fetch_add(1, Ordering::SeqCst)
    }

    /// Whether the request holding `ticket` is to be aborted.
    pub(crate) fn aborted(&self, ticket: u64) -> bool {
        ticket < self.abort_below.load(Ordering::SeqCst)
    }

    /// Aborts every request that has arrived so far and not yet run.
    pub(crate) fn abort_queued(&self) {
        self.abort_below.store(self.next_ticket.load(Ordering::SeqCst), Ordering::SeqCst);
    }

    /// Starts the namespace's messages afresh: a new header session, the count at zero.
    pub(crate) fn restarted(&self) {
        let mut activity = self.activity();
        activity.sender = Sender { session: uuid::Uuid::new_v4().to_string() };
        activity.execution_count = 0;
        activity.busy = false;
        drop(activity);
        self.abort_queued();
    }
}

/// Every kernel of this process, by id.
pub(crate) struct Kernels {
    /// Where one host keeps them between processes.
    file: Option<PathBuf>,
    map: Mutex<HashMap<String, Arc<Kernel>>>,
    /// The fleet's records, when sessions are shared between hosts.
    shared: Option<Arc<dyn SharedRecords>>,
}

impl Kernels {
    /// The kernels saved in `file` (none when it is missing or unreadable).
    pub(crate) fn load(file: PathBuf) -> Self {
        let records: Vec<Record> = std::fs::read(&file).ok().and_then(|bytes| serde_json::from_slice(&bytes).ok()).unwrap_or_default();
        let map = records.into_iter().map(|record| (record.id.clone(), Arc::new(Kernel::new(record)))).collect();
        Self { file: Some(file), map: Mutex::new(map), shared: None }
    }

    /// The kernels of a fleet: each a shared record (no file).
    pub(crate) fn shared(records: Arc<dyn SharedRecords>) -> Self {
        Self { file: None, map: Mutex::new(HashMap::new()), shared: Some(records) }
    }

    fn table(&self) -> MutexGuard<'_, HashMap<String, Arc<Kernel>>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The tenant's kernel `id`; another tenant's is none. On a fleet, the
    /// kernel exists while its record does.
    pub(crate) async fn get(&self, tenant: &str, id: &str) -> Result<Option<Arc<Kernel>>, InterpreterError> {
        let kernel = match &self.shared {
            None => self.table().get(id).cloned(),
            Some(shared) => match shared.read(KIND, id).await? {
                Some(fields) => Some(self.cached(&fields)?),
                None => {
                    self.table().remove(id);
                    None
                }
            },
        };
        Ok(kernel.filter(|kernel| kernel.record.tenant == tenant))
    }

    /// The tenant's kernels, oldest id first.
    pub(crate) async fn of_tenant(&self, tenant: &str) -> Result<Vec<Arc<Kernel>>, InterpreterError> {
        let all = match &self.shared {
            None => self.all(),
            Some(shared) => {
                let mut found = Vec::new();
                for (id, fields) in shared.list(KIND).await? {
                    match self.cached(&fields) {
                        Ok(kernel) => found.push(kernel),
                        Err(error) => tracing::warn!(kernel = %id, %error, "a shared kernel record does not parse"),
                    }
                }
                found
            }
        };
        let mut kernels: Vec<_> = all.into_iter().filter(|k| k.record.tenant == tenant).collect();
        kernels.sort_by(|a, b| a.record.id.cmp(&b.record.id));
        Ok(kernels)
    }

    /// Every kernel this process knows.
    pub(crate) fn all(&self) -> Vec<Arc<Kernel>> {
        self.table().values().cloned().collect()
    }

    /// The kernel a shared record describes, as the table's entry (kept
    /// when it is there already: its activity and sockets live here).
    fn cached(&self, fields: &Fields) -> Result<Arc<Kernel>, InterpreterError> {
        let json = fields.get(RECORD).ok_or_else(|| InterpreterError::SharedStore("a kernel record has no content".to_owned()))?;
        let record: Record = serde_json::from_str(json).map_err(|e| InterpreterError::SharedStore(format!("a kernel record does not parse: {e}")))?;
        let mut table = self.table();
        let kernel = table.entry(record.id.clone()).or_insert_with(|| Arc::new(Kernel::new(record)));
        Ok(kernel.clone())
    }

    /// Adds a kernel and saves the list (or its shared record).
    pub(crate) async fn insert(&self, record: Record) -> Result<Arc<Kernel>, InterpreterError> {
        if let Some(shared) = &self.shared {
            let json = serde_json::to_string(&record).map_err(|e| InterpreterError::SharedStore(format!("a kernel record: {e}")))?;
            shared.write(KIND, &record.id, Fields::from([(RECORD.to_owned(), json)])).await?;
        }
        let kernel = Arc::new(Kernel::new(record));
        self.table().insert(kernel.record.id.clone(), kernel.clone());
        self.save().await;
        Ok(kernel)
    }

    /// Removes a kernel and saves the list (or removes its shared record).
    pub(crate) async fn remove(&self, id: &str) -> Result<Option<Arc<Kernel>>, InterpreterError> {
        if let Some(shared) = &self.shared {
            shared.remove(KIND, id).await?;
        }
        let removed = self.table().remove(id);
        self.save().await;
        Ok(removed)
    }

    /// Writes the list beside the sessions, off the async workers; a
    /// failure is logged (the kernels still run, a restart would lose them).
    async fn save(&self) {
        let Some(file) = self.file.clone() else { return };
        let records: Vec<Record> = self.table().values().map(|k| k.record.clone()).collect();
        let written = tokio::task::spawn_blocking(move || -> std::io::Result<()> {
            let bytes = serde_json::to_vec_pretty(&records).map_err(std::io::Error::other)?;
            let partial = file.with_extension("json.partial");
            std::fs::write(&partial, bytes)?;
            std::fs::rename(&partial, &file)
        })
        .await;
        match written {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "the kernel list could not be saved"),
            Err(e) => tracing::warn!(error = %e, "saving the kernel list stopped"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str, tenant: &str) -> Record {
        Record { id: id.into(), tenant: tenant.into(), spec: "python3".into(), session_id: format!("jupyter-{id}"), env: BTreeMap::new() }
    }

    #[tokio::test]
    async fn kernels_are_the_tenants_own_and_outlive_the_process() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let file = dir.path().join("kernels.json");
        let kernels = Kernels::load(file.clone());
        kernels.insert(record("a", "alice")).await.expect("kept");
        kernels.insert(record("b", "bob")).await.expect("kept");
        assert!(kernels.get("alice", "a").await.expect("read").is_some());
        assert!(kernels.get("bob", "a").await.expect("read").is_none(), "another tenant's kernel is not found");
        let reloaded = Kernels::load(file);
        assert_eq!(reloaded.of_tenant("bob").await.expect("read").len(), 1);
        assert!(reloaded.remove("b").await.expect("removed").is_some());
        assert!(reloaded.of_tenant("bob").await.expect("read").is_empty());
    }

    #[test]
    fn an_error_with_stop_on_error_aborts_what_queued_behind_it() {
        let kernel = Kernel::new(record("a", "alice"));
        let (first, second) = (kernel.ticket(), kernel.ticket());
        kernel.abort_queued();
        let third = kernel.ticket();
        assert!(kernel.aborted(first) && kernel.aborted(second));
        assert!(!kernel.aborted(third), "a request arriving after the failure runs");
    }
}
