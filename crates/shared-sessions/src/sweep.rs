//! The fleet's sweep of the shared store: one host at a time (a Redis lock
//! as long as the period) removes what nothing names any more.
//!
//! - Records of sessions no host holds whose idle time passed their TTL
//!   (their host died before it could expire them).
//! - Manifests and file lists no record names, once older than the grace.
//! - Packs and file contents no manifest, file list or artifact names, once
//!   older than the grace, marked on Redis first so a host about to name
//!   one again sees it going (see [`crate::images`]).
//!
//! Why nothing named is removed: a record is read after every object it
//! names was written, so an object written before the records were read
//! and named by none of them is named by no save that finished; a save that
//! has not finished notes its packs on Redis before it writes its manifest,
//! and finishes within half the grace, so its packs either carry a recent
//! note or were written after the sweep began (younger than the grace).

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anypath_interpreter::SessionMeta;
use futures_util::{StreamExt, TryStreamExt};
use object_store::{ObjectMeta, ObjectStore, ObjectStoreExt};

use crate::coordination::{Coordination, unix_ms};
use crate::error::SharedStoreError;
use crate::file_sync::FileList;
use crate::location::ObjectLocation;

/// Sessions a snapshot keeps its state in: their lifetime is the snapshot's.
const SNAPSHOT_SESSIONS: &str = "__snapshot_";

/// What a sweep found and removed; for `/metrics`, what this host's last
/// sweep found and what all its sweeps removed.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct SweepReport {
    /// When it ran, in ms since the Unix epoch (0: never on this host).
    pub finished_unix_ms: i64,
    pub duration_ms: u64,
    /// Objects and bytes in the store after it, by kind.
    pub objects: HashMap<&'static str, (u64, u64)>,
    /// Objects and bytes it removed, by kind.
    pub removed: HashMap<&'static str, (u64, u64)>,
    /// Records of expired sessions no host held that it removed.
    pub records_removed: u64,
}

impl SweepReport {
    /// This report after `next`: its findings, and the removals of both.
    fn then(&mut self, next: &SweepReport) {
        self.finished_unix_ms = next.finished_unix_ms;
        self.duration_ms = next.duration_ms;
        self.objects = next.objects.clone();
        for (kind, (n, bytes)) in &next.removed {
            let total = self.removed.entry(kind).or_default();
            total.0 += n;
            total.1 += bytes;
        }
        self.records_removed += next.records_removed;
    }
}

/// The object kinds kept under the store's prefix.
const KINDS: [&str; 4] = ["images", "packs", "files", "blobs"];

/// Sweeps the store's objects and records.
pub(crate) struct Sweeper {
    pub(crate) objects: std::sync::Arc<dyn ObjectStore>,
    pub(crate) location: ObjectLocation,
    pub(crate) coordination: std::sync::Arc<Coordination>,
    pub(crate) grace: Duration,
    pub(crate) last: Mutex<SweepReport>,
}

impl Sweeper {
    /// Sweeps once when no other host is sweeping this period; the report
    /// when it swept.
    pub(crate) async fn sweep_if_due(&self, period: Duration) -> Result<Option<SweepReport>, SharedStoreError> {
        if !self.coordination.take_sweep(period).await? {
            return Ok(None);
        }
        self.sweep().await.map(Some)
    }

    /// Sweeps once, now.
    pub(crate) async fn sweep(&self) -> Result<SweepReport, SharedStoreError> {
        let started = Instant::now();
        let began_ms = unix_ms();
        let cutoff_ms = began_ms - self.grace.as_millis() as i64;
        let mut report = SweepReport::default();
        // What the records name.
        let mut named: HashSet<String> = HashSet::new();
        let mut lists = Vec::new();
        let now_s = (began_ms / 1000) as u64;
        for (tenant, session, fields, held) in self.coordination.all_records().await? {
            let meta: Option<SessionMeta> = fields.get("meta").and_then(|m| serde_json::from_str(m).ok());
            let expired = meta.as_ref().is_some_and(|m| m.last_used_unix.saturating_add(m.ttl_seconds).saturating_add(self.grace.as_secs()) < now_s);
            if !held && expired && !session.starts_with(SNAPSHOT_SESSIONS) && self.coordination.remove_unheld_record(&tenant, &session).await? {
                tracing::info!(%tenant, %session, "the record of an expired session no host held was removed");
                report.records_removed += 1;
                continue;
            }
            if let Some(image) = fields.get("image") {
                named.insert(image.clone());
            }
            for pack in fields.get(crate::store::IMAGE_PACKS).map(|p| p.split_whitespace()).into_iter().flatten() {
                named.insert(pack.to_owned());
            }
            if let Some(list) = fields.get("files") {
                named.insert(list.clone());
                lists.push(list.clone());
            }
        }
        // File contents the lists and the artifacts name.
        let contents = futures_util::stream::iter(lists)
            .map(|list| async move {
                let bytes = self.objects.get(&object_store::path::Path::from(list)).await?.bytes().await?;
                Ok::<_, SharedStoreError>(serde_json::from_slice::<FileList>(&bytes).ok())
            })
            .buffer_unordered(16)
            .try_collect::<Vec<_>>()
            .await;
        let contents = match contents {
            Ok(contents) => contents,
            // A list removed meanwhile (its session moved on): sweep no blob this time.
            Err(SharedStoreError::Objects(object_store::Error::NotFound { .. })) => return self.count_only(report, started).await,
            Err(error) => return Err(error),
        };
        for list in contents.into_iter().flatten() {
            for file in list.files.values() {
                named.insert(self.location.path(&["blobs", &file.sha256]).to_string());
            }
        }
        for sha in self.coordination.artifact_contents().await? {
            named.insert(self.location.path(&["blobs", &sha]).to_string());
        }
        for kind in KINDS {
            let listed: Vec<ObjectMeta> = self.objects.list(Some(&self.location.path(&[kind]))).try_collect().await?;
            let (mut count, mut bytes) = (0u64, 0u64);
            let mut unnamed: Vec<&ObjectMeta> = Vec::new();
            for object in &listed {
                if !named.contains(object.location.as_ref()) && object.last_modified.timestamp_millis() < cutoff_ms {
                    unnamed.push(object);
                } else {
                    count += 1;
                    bytes += object.size;
                }
            }
            // Packs and contents may be named again by a save under way:
            // only those Redis lets go are removed.
            let removable: HashSet<String> = match kind {
                "packs" | "blobs" => {
                    let names: Vec<String> = unnamed.iter().map(|o| o.location.to_string()).collect();
                    self.coordination.doom_packs(cutoff_ms, &names).await?.into_iter().collect()
                }
                _ => unnamed.iter().map(|o| o.location.to_string()).collect(),
            };
            let (mut gone, mut gone_bytes) = (0u64, 0u64);
            for object in unnamed {
                if !removable.contains(object.location.as_ref()) {
                    count += 1;
                    bytes += object.size;
                    continue;
                }
                match self.objects.delete(&object.location).await {
                    Ok(()) | Err(object_store::Error::NotFound { .. }) => {
                        gone += 1;
                        gone_bytes += object.size;
                    }
                    Err(error) => {
                        tracing::warn!(%error, object = %object.location, "the sweep could not remove an object; the next sweep tries again");
                        count += 1;
                        bytes += object.size;
                    }
                }
            }
            if kind == "blobs" {
                // A content's name is its hash: once gone it may be written again.
                let removed: Vec<String> = removable.into_iter().collect();
                self.coordination.forget_named(&removed).await?;
            }
            report.objects.insert(kind, (count, bytes));
            report.removed.insert(kind, (gone, gone_bytes));
        }
        self.finish(report, started)
    }

    /// A sweep that removed no object: counts what the store holds.
    async fn count_only(&self, mut report: SweepReport, started: Instant) -> Result<SweepReport, SharedStoreError> {
        for kind in KINDS {
            let listed: Vec<ObjectMeta> = self.objects.list(Some(&self.location.path(&[kind]))).try_collect().await?;
            report.objects.insert(kind, (listed.len() as u64, listed.iter().map(|o| o.size).sum()));
        }
        self.finish(report, started)
    }

    fn finish(&self, mut report: SweepReport, started: Instant) -> Result<SweepReport, SharedStoreError> {
        report.duration_ms = started.elapsed().as_millis() as u64;
        report.finished_unix_ms = unix_ms();
        let removed: u64 = report.removed.values().map(|(n, _)| n).sum();
        tracing::info!(removed_objects = removed, records_removed = report.records_removed, duration_ms = report.duration_ms, "the shared store was swept");
        self.last.lock().unwrap_or_else(std::sync::PoisonError::into_inner).then(&report);
        Ok(report)
    }
}
