//! Snapshots: a session's Python state and files kept under an id, from
//! which any number of new sessions start. A snapshot is taken by the same
//! copy a fork makes, into a session of the service's own
//! (`__snapshot_<id>`, see [`names::is_hidden`]) that no client opens or
//! runs in; a session started from it is a fork of that session. So a
//! snapshot costs what a fork costs, lives wherever sessions live (one
//! host's disk, or a fleet's object store), and needs no second way to
//! keep state.
//!
//! What clients see of a snapshot (its names, source, size, expiry) is a
//! record: in the fleet's records when sessions are shared, else in a file
//! on this host. Snapshots expire after the configured retention and count
//! toward a per-tenant quota, like artifacts.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anypath_sandbox::Runtime;
use anypath_wire::{SessionInfo, SnapshotInfo};
use futures_util::future::BoxFuture;

use crate::error::InterpreterError;
use crate::interpreter::Interpreter;
use crate::names;
use crate::operation::{CallContext, Described, Operation, OperationKind};
use crate::stores::shared_records::Fields;

/// The kind of the snapshots' records.
const KIND: &str = "snapshot";
/// The record's one field: the snapshot as JSON.
const FIELD: &str = "snapshot";
/// The stored session of snapshot `id` is `__snapshot_<id>`.
const SESSION_PREFIX: &str = "__snapshot_";

/// A snapshot as its record keeps it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Record {
    tenant: String,
    /// When it was taken, in nanoseconds: the list's order, also for
    /// snapshots taken within one second.
    #[serde(default)]
    created_nanos: u128,
    #[serde(flatten)]
    info: SnapshotInfo,
}

/// The interpreter's snapshots: see [`Interpreter::snapshots`].
pub struct Snapshots<'a> {
    interpreter: &'a Arc<Interpreter>,
}

impl Interpreter {
    /// Snapshots of sessions, and sessions started from them.
    pub fn snapshots(self: &Arc<Self>) -> Snapshots<'_> {
        Snapshots { interpreter: self }
    }
}

impl Snapshots<'_> {
    /// Keeps the session's state and files as a new snapshot (the session
    /// goes on as it was; its open files are closed, as by a fork). A
    /// `name` moves to this snapshot from any other of the tenant's.
    pub fn create<'f>(&'f self, tenant: &'f str, session_id: &'f str, name: Option<&'f str>) -> BoxFuture<'f, Result<SnapshotInfo, InterpreterError>> {
        Box::pin(async move {
            let name = name.map(snapshot_name).transpose()?;
            names::client_session_id(session_id)?;
            let config = &self.interpreter.config.snapshots;
            let held = self.of_tenant(tenant).await?;
            if held.len() >= config.max_per_tenant {
                return Err(InterpreterError::SnapshotQuota(format!("the tenant holds {} snapshots, the most it may; delete one first", held.len())));
            }
            let held_bytes: u64 = held.iter().map(|r| r.info.size_bytes).sum();
            if held_bytes >= config.tenant_quota_bytes {
                return Err(quota_error(held_bytes, config.tenant_quota_bytes));
            }
            let id = crate::names::new_short_id();
            let stored = stored_session(&id);
            let copied = self.interpreter.sessions().copy_session(tenant, session_id, &stored, None).await?;
            let (owner, kept) = (tenant.to_owned(), stored.clone());
            let size_bytes = self.interpreter.off_workers(move |i| Ok(stored_bytes(i, &owner, &kept))).await?;
            if held_bytes + size_bytes > config.tenant_quota_bytes {
                self.remove_stored(tenant, &stored).await;
                return Err(quota_error(held_bytes + size_bytes, config.tenant_quota_bytes));
            }
            let now = SystemTime::now();
            let created = unix_seconds(now);
            let created_nanos = now.duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
            let info = SnapshotInfo {
                snapshot_id: id,
                names: name.iter().map(|n| (*n).to_owned()).collect(),
                session_id: session_id.to_owned(),
                runtime: copied.runtime,
                created_unix: created,
                expires_unix: created.saturating_add(config.retention.as_secs()),
                size_bytes,
            };
            if let Some(name) = name {
                for mut other in held.into_iter().filter(|r| r.info.names.iter().any(|n| n == name)) {
                    other.info.names.retain(|n| n != name);
                    self.write(&other).await?;
                }
            }
            let record = Record { tenant: tenant.to_owned(), created_nanos, info };
            if let Err(error) = self.write(&record).await {
                self.remove_stored(tenant, &stored).await;
                return Err(error);
            }
            Ok(record.info)
        })
    }

    /// The tenant's live snapshots, newest first: all of them, those taken
    /// from `session_id`, or the one whose name (or id) is `name`.
    pub fn list<'f>(&'f self, tenant: &'f str, session_id: Option<&'f str>, name: Option<&'f str>) -> BoxFuture<'f, Result<Vec<SnapshotInfo>, InterpreterError>> {
        Box::pin(async move {
            Ok(self
                .of_tenant(tenant)
                .await?
                .into_iter()
                .map(|r| r.info)
                .filter(|s| session_id.is_none_or(|id| s.session_id == id))
                .filter(|s| name.is_none_or(|name| s.snapshot_id == name || s.names.iter().any(|n| n == name)))
                .collect())
        })
    }

    /// The tenant's snapshot with this id or name.
    pub fn get<'f>(&'f self, tenant: &'f str, id_or_name: &'f str) -> BoxFuture<'f, Result<SnapshotInfo, InterpreterError>> {
        Box::pin(async move {
            Ok(self.find(tenant, id_or_name).await?.info)
        })
    }

    /// Removes the tenant's snapshot with this id or name; `false` when
    /// there is none.
    pub fn delete<'f>(&'f self, tenant: &'f str, id_or_name: &'f str) -> BoxFuture<'f, Result<bool, InterpreterError>> {
        Box::pin(async move {
            let record = match self.find(tenant, id_or_name).await {
                Ok(record) => record,
                Err(InterpreterError::NoSuchSnapshot(_)) => return Ok(false),
                Err(error) => return Err(error),
            };
            self.interpreter.snapshot_records.remove(KIND, &record_id(tenant, &record.info.snapshot_id)).await?;
            self.remove_stored(tenant, &stored_session(&record.info.snapshot_id)).await;
            Ok(true)
        })
    }

    /// A new session `session_id` with the snapshot's files and state,
    /// idle for `ttl` (the server's default when absent) before it expires.
    /// A session asking for a `runtime` other than the snapshot's is refused.
    pub fn start_session<'f>(&'f self, tenant: &'f str, id_or_name: &'f str, session_id: &'f str, ttl: Option<Duration>, runtime: Option<Runtime>) -> BoxFuture<'f, Result<SessionInfo, InterpreterError>> {
        Box::pin(async move {
            names::client_session_id(session_id)?;
            let record = self.find(tenant, id_or_name).await?;
            crate::held::session::check_runtime(session_id, record.info.runtime, runtime)?;
            let ttl = ttl.unwrap_or(self.interpreter.config.default_ttl).min(self.interpreter.config.max_ttl);
            let stored = stored_session(&record.info.snapshot_id);
            self.interpreter.sessions().copy_session(tenant, &stored, session_id, Some(ttl)).await.map_err(|error| match error {
                // The record outlived its state (removed by hand, or lost with a host).
                InterpreterError::NoSuchSession(_) => InterpreterError::NoSuchSnapshot(id_or_name.to_owned()),
                other => other,
            })
        })
    }

    /// Removes every snapshot past its retention; returns how many.
    pub fn sweep(&self) -> BoxFuture<'_, Result<usize, InterpreterError>> {
        Box::pin(async move {
            let now = unix_seconds(SystemTime::now());
            let mut removed = 0;
            for (id, fields) in self.interpreter.snapshot_records.list(KIND).await? {
                let Some(record) = parse(&fields) else { continue };
                if record.info.expires_unix <= now {
                    self.interpreter.snapshot_records.remove(KIND, &id).await?;
                    self.remove_stored(&record.tenant, &stored_session(&record.info.snapshot_id)).await;
                    removed += 1;
                }
            }
            Ok(removed)
        })
    }

    /// The tenant's live snapshots' records, newest first.
    async fn of_tenant(&self, tenant: &str) -> Result<Vec<Record>, InterpreterError> {
        let tenant = names::tenant(tenant)?;
        let now = unix_seconds(SystemTime::now());
        let mut found: Vec<Record> = self
            .interpreter
            .snapshot_records
            .list(KIND)
            .await?
            .iter()
            .filter_map(|(_, fields)| parse(fields))
            .filter(|r| r.tenant == tenant && r.info.expires_unix > now)
            .collect();
        found.sort_by(|a, b| (b.info.created_unix, b.created_nanos, &b.info.snapshot_id).cmp(&(a.info.created_unix, a.created_nanos, &a.info.snapshot_id)));
        Ok(found)
    }

    /// The tenant's live snapshot whose id, else whose name, is `id_or_name`.
    async fn find(&self, tenant: &str, id_or_name: &str) -> Result<Record, InterpreterError> {
        let held = self.of_tenant(tenant).await?;
        let by_id = held.iter().position(|r| r.info.snapshot_id == id_or_name);
        let found = by_id.or_else(|| held.iter().position(|r| r.info.names.iter().any(|n| n == id_or_name)));
        found.map(|at| held[at].clone()).ok_or_else(|| InterpreterError::NoSuchSnapshot(id_or_name.to_owned()))
    }

    async fn write(&self, record: &Record) -> Result<(), InterpreterError> {
        let json = serde_json::to_string(record).map_err(|e| InterpreterError::Invalid(format!("a snapshot record: {e}")))?;
        let fields = Fields::from([(FIELD.to_owned(), json)]);
        self.interpreter.snapshot_records.write(KIND, &record_id(&record.tenant, &record.info.snapshot_id), fields).await
    }

    /// Removes a snapshot's stored session (gone already is fine).
    async fn remove_stored(&self, tenant: &str, stored: &str) {
        match self.interpreter.sessions().close(tenant, stored).await {
            Ok(()) | Err(InterpreterError::NoSuchSession(_)) => {}
            Err(error) => tracing::warn!(session = stored, %error, "a snapshot's stored session was not removed"),
        }
    }
}

/// A snapshot's name: 1 to 128 characters of A-Z, a-z, 0-9 and `-_.:/`.
fn snapshot_name(name: &str) -> Result<&str, InterpreterError> {
    let allowed = name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':' | b'/'));
    if (1..=128).contains(&name.len()) && allowed {
        Ok(name)
    } else {
        Err(InterpreterError::Invalid(format!("a snapshot's name must be 1 to 128 characters of A-Z, a-z, 0-9 and -_.:/, not {name:?}")))
    }
}

fn quota_error(bytes: u64, quota: u64) -> InterpreterError {
    InterpreterError::SnapshotQuota(format!("the tenant's snapshots would hold {bytes} bytes, and the quota is {quota}; delete one first"))
}

/// The session a snapshot's state and files are kept in.
fn stored_session(snapshot_id: &str) -> String {
    format!("{SESSION_PREFIX}{snapshot_id}")
}

/// Records of all tenants share one kind: the tenant names its own (a
/// tenant name holds no `.`).
fn record_id(tenant: &str, snapshot_id: &str) -> String {
    format!("{tenant}.{snapshot_id}")
}

fn parse(fields: &Fields) -> Option<Record> {
    let json = fields.get(FIELD)?;
    match serde_json::from_str(json) {
        Ok(record) => Some(record),
        Err(error) => {
            tracing::warn!(%error, "a snapshot record does not parse");
            None
        }
    }
}

/// A new snapshot id: 20 lowercase letters and digits.
fn unix_seconds(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// Bytes a stored session holds: its state image and its files.
fn stored_bytes(interpreter: &Interpreter, tenant: &str, session_id: &str) -> u64 {
    let image = interpreter.store.image_bytes(tenant, session_id);
    let files = interpreter.table.lock().unwrap_or_else(|p| p.into_inner()).get(&(tenant.to_owned(), session_id.to_owned())).map(|s| s.files.dir().to_owned());
    image + files.map(|dir| anypath_sandbox::directory_usage(&dir).bytes).unwrap_or(0)
}

/// Keeps the session's state and files as a snapshot.
#[derive(Debug)]
pub struct CreateSnapshot {
    /// The session to keep.
    pub session_id: String,
    /// A name to find it by besides its id.
    pub name: Option<String>,
}

impl Operation for CreateSnapshot {
    type Output = SnapshotInfo;

    fn describe(&self) -> Described {
        let described = Described::new(OperationKind::Snapshot).session(&self.session_id);
        match &self.name {
            Some(name) => described.subject(name),
            None => described,
        }
    }

    fn call(self, interpreter: Arc<Interpreter>, caller: &CallContext) -> BoxFuture<'_, Result<SnapshotInfo, InterpreterError>> {
        Box::pin(async move {
            interpreter.snapshots().create(&caller.tenant, &self.session_id, self.name.as_deref()).await
        })
    }
}

/// The tenant's snapshots, newest first (of one session, or by name).
#[derive(Debug, Default)]
pub struct ListSnapshots {
    /// Only those taken from this session.
    pub session_id: Option<String>,
    /// Only the one with this name.
    pub name: Option<String>,
}

impl Operation for ListSnapshots {
    type Output = Vec<SnapshotInfo>;

    fn describe(&self) -> Described {
        let described = Described::new(OperationKind::ListSnapshots);
        match &self.session_id {
            Some(session) => described.session(session),
            None => described,
        }
    }

    fn call(self, interpreter: Arc<Interpreter>, caller: &CallContext) -> BoxFuture<'_, Result<Vec<SnapshotInfo>, InterpreterError>> {
        Box::pin(async move {
            interpreter.snapshots().list(&caller.tenant, self.session_id.as_deref(), self.name.as_deref()).await
        })
    }
}

/// One of the tenant's snapshots, by id or name.
#[derive(Debug)]
pub struct DescribeSnapshot {
    pub snapshot: String,
}

impl Operation for DescribeSnapshot {
    type Output = SnapshotInfo;

    fn describe(&self) -> Described {
        Described::new(OperationKind::DescribeSnapshot).subject(&self.snapshot)
    }

    fn call(self, interpreter: Arc<Interpreter>, caller: &CallContext) -> BoxFuture<'_, Result<SnapshotInfo, InterpreterError>> {
        Box::pin(async move {
            interpreter.snapshots().get(&caller.tenant, &self.snapshot).await
        })
    }
}

/// Removes one of the tenant's snapshots; answers whether there was one.
#[derive(Debug)]
pub struct DeleteSnapshot {
    pub snapshot: String,
}

impl Operation for DeleteSnapshot {
    type Output = bool;

    fn describe(&self) -> Described {
        Described::new(OperationKind::DeleteSnapshot).subject(&self.snapshot)
    }

    fn call(self, interpreter: Arc<Interpreter>, caller: &CallContext) -> BoxFuture<'_, Result<bool, InterpreterError>> {
        Box::pin(async move {
            interpreter.snapshots().delete(&caller.tenant, &self.snapshot).await
        })
    }
}

/// A new session started from a snapshot.
#[derive(Debug)]
pub struct StartFromSnapshot {
    /// The new session's name: it must not exist yet.
    pub session_id: String,
    /// The snapshot's id or name.
    pub snapshot: String,
    /// Idle time after which the new session is removed.
    pub ttl: Option<Duration>,
    /// The runtime the caller expects (the snapshot's, when absent).
    pub runtime: Option<Runtime>,
}

impl Operation for StartFromSnapshot {
    type Output = SessionInfo;

    fn describe(&self) -> Described {
        Described::new(OperationKind::Open).session(&self.session_id).subject(&self.snapshot)
    }

    fn call(self, interpreter: Arc<Interpreter>, caller: &CallContext) -> BoxFuture<'_, Result<SessionInfo, InterpreterError>> {
        let tenant = caller.tenant.clone();
        Box::pin(async move { interpreter.snapshots().start_session(&tenant, &self.snapshot, &self.session_id, self.ttl, self.runtime).await })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_stored_sessions_keep_to_their_alphabets() {
        assert!(snapshot_name("snap-filter-1a2b").is_ok());
        assert!(snapshot_name("team/base:v2").is_ok());
        for bad in ["", "a b", "é", &"x".repeat(129)] {
            assert!(snapshot_name(bad).is_err(), "{bad:?}");
        }
        let id = crate::names::new_short_id();
        assert_eq!(id.len(), 20);
        let stored = stored_session(&id);
        assert!(names::session_id(&stored).is_ok() && names::is_hidden(&stored), "{stored}");
        assert!(names::client_session_id(&stored).is_err());
    }
}
