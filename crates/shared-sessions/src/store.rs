//! The session store several hosts share: homes stay on this host's disk
//! (the instance sees a local directory), and what another host needs to
//! take a session over goes to the object store and to Redis, fenced by the
//! session's lease.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anypath_interpreter::session_store::{DiscardedHome, SessionDirs};
use anypath_interpreter::{InterpreterError, InterruptRequest, LocalSessionStore, SessionMeta, SessionStore};
use futures_util::future::BoxFuture;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use tokio::runtime::Handle;
use tokio::sync::mpsc::UnboundedReceiver;

use crate::artifacts::SharedArtifacts;
use crate::coordination::Coordination;
use crate::error::SharedStoreError;
use crate::file_sync::{FileList, FileSync};
use crate::images::SharedImages;
use crate::sweep::{SweepReport, Sweeper};
use crate::location::ObjectLocation;
use crate::records::RedisRecords;

/// Record fields (see [`Coordination`]).
const META: &str = "meta";
const IMAGE: &str = "image";
const IMAGE_BYTES: &str = "image_bytes";
/// "1" while the image is the newest state the session had; "0" once a
/// run resumed it (the state then lives in that host's instance).
const IMAGE_CURRENT: &str = "image_current";
const FILES: &str = "files";
/// The packs the image's manifest names, space-separated (for the sweep).
pub(crate) const IMAGE_PACKS: &str = "image_packs";

/// How to open a [`SharedSessionStore`].
#[derive(Debug, Clone)]
pub struct SharedStoreOptions {
    /// `s3://bucket/prefix`.
    pub objects: ObjectLocation,
    /// `redis://...`.
    pub coordination: String,
    /// This host's name in leases (unique per running process).
    pub host: String,
    /// How long a lease lasts without renewal: a dead host's sessions are
    /// claimable within it.
    pub lease: Duration,
    /// How many bytes of image segments this host keeps in memory, so a
    /// session coming back fetches only what changed elsewhere.
    pub segment_cache_bytes: usize,
    /// How long an object nothing names is kept before the sweep removes
    /// it: longer than any save takes.
    pub grace: Duration,
    /// How often this host offers to sweep the store (one host of the
    /// fleet sweeps at a time).
    pub sweep_every: Duration,
}

impl SharedStoreOptions {
    /// Options with the defaults for the cache and the grace period.
    pub fn new(objects: ObjectLocation, coordination: String, host: String, lease: Duration) -> Self {
        Self { objects, coordination, host, lease, segment_cache_bytes: 256 << 20, grace: Duration::from_secs(600), sweep_every: Duration::from_secs(300) }
    }
}

/// Sessions kept for every host of a fleet (see the crate's doc).
pub struct SharedSessionStore {
    local: LocalSessionStore,
    coordination: Arc<Coordination>,
    files: Arc<FileSync>,
    artifacts: Arc<SharedArtifacts>,
    records: Arc<RedisRecords>,
    pub(crate) images: Arc<SharedImages>,
    sweeper: Arc<Sweeper>,
    runtime: Handle,
    handovers: Mutex<Option<UnboundedReceiver<(String, String)>>>,
    interrupts: Mutex<Option<UnboundedReceiver<InterruptRequest>>>,
    /// For each session this host last wrote or read files of: the file
    /// list's object and what it lists, so an unchanged directory is
    /// neither written nor fetched again.
    synced: Mutex<HashMap<(String, String), (String, FileList)>>,
}

impl SharedSessionStore {
    /// Opens the store with homes under `root` on this host: connects to
    /// Redis, checks the bucket answers, and starts renewing leases and
    /// listening for hand-over requests.
    pub fn open<'f>(root: &'f Path, options: SharedStoreOptions) -> BoxFuture<'f, Result<Arc<Self>, SharedStoreError>> {
        Box::pin(async move {
            let objects = options.objects.open()?;
            // A wrong endpoint, bucket or key fails here, not at the first hand-over.
            let probe = options.objects.path(&["fleet", "probe"]);
            objects.put(&probe, PutPayload::from_static(b"anypath")).await?;
            let namespace = format!("anypath:{}:{}", options.objects.bucket, options.objects.prefix);
            let coordination = Coordination::connect(&options.coordination, namespace, options.host.clone(), options.lease).await?;
            let local = LocalSessionStore::open(root).map_err(|e| SharedStoreError::local(e.to_string(), std::io::Error::other("local store")))?;
            let (to, handovers) = tokio::sync::mpsc::unbounded_channel();
            let (interrupts_to, interrupts) = tokio::sync::mpsc::unbounded_channel();
            tokio::spawn(coordination.clone().listen_for_handovers(to, interrupts_to));
            spawn_renewals(Arc::downgrade(&coordination), options.lease / 3);
            tracing::info!(host = %options.host, bucket = %options.objects.bucket, prefix = %options.objects.prefix, lease_ms = options.lease.as_millis() as u64, "sessions shared through the object store and Redis");
            let images = Arc::new(SharedImages::new(objects.clone(), coordination.clone(), options.segment_cache_bytes, options.grace));
            let sweeper = Arc::new(Sweeper {
                objects: objects.clone(),
                location: options.objects.clone(),
                coordination: coordination.clone(),
                grace: options.grace,
                last: Mutex::new(SweepReport::default()),
            });
            spawn_sweeps(Arc::downgrade(&sweeper), options.sweep_every);
            let files = Arc::new(FileSync { objects, location: options.objects, coordination: coordination.clone() });
            let artifacts = Arc::new(SharedArtifacts { coordination: coordination.clone(), files: files.clone(), runtime: Handle::current() });
            let records = Arc::new(RedisRecords { coordination: coordination.clone() });
            Ok(Arc::new(Self {
                local,
                coordination,
                files,
                artifacts,
                records,
                images,
                sweeper,
                runtime: Handle::current(),
                handovers: Mutex::new(Some(handovers)),
                interrupts: Mutex::new(Some(interrupts)),
                synced: Mutex::new(HashMap::new()),
            }))
        })
    }

    /// Sweeps the store now (see [`crate::sweep`]), whatever other hosts do.
    pub async fn sweep_now(&self) -> Result<SweepReport, SharedStoreError> {
        self.sweeper.sweep().await
    }

    /// What the last sweep on this host found, and this host's image
    /// traffic, as `/metrics` shows them.
    pub fn metrics(&self) -> Vec<(String, &'static str, f64)> {
        use std::sync::atomic::Ordering::Relaxed;
        let report = self.sweeper.last.lock().unwrap_or_else(PoisonError::into_inner).clone();
        let counters = &self.images.counters;
        let (cached_bytes, cached) = self.images.cached();
        let mut out = vec![
            ("store_manifests_written".to_owned(), "Image manifests this host wrote to the shared store", counters.manifests_written.load(Relaxed) as f64),
            ("store_segments_written".to_owned(), "Image segments this host wrote (only those no image before held)", counters.segments_written.load(Relaxed) as f64),
            ("store_segment_bytes_written".to_owned(), "Bytes of image segments this host wrote", counters.segment_bytes_written.load(Relaxed) as f64),
            ("store_segments_reused".to_owned(), "Image segments a manifest named without writing them again", counters.segments_reused.load(Relaxed) as f64),
            ("store_segments_fetched".to_owned(), "Image segments this host read from the shared store", counters.segments_fetched.load(Relaxed) as f64),
            ("store_segment_bytes_fetched".to_owned(), "Bytes of image segments this host read", counters.segment_bytes_fetched.load(Relaxed) as f64),
            ("store_segments_from_cache".to_owned(), "Image segments a resume found in this host's cache", counters.segments_cached.load(Relaxed) as f64),
            ("store_images_refused".to_owned(), "Stored images refused as damaged, out of bounds or another session's", counters.refused.load(Relaxed) as f64),
            ("store_segment_cache_bytes".to_owned(), "Bytes of image segments this host keeps in memory", cached_bytes as f64),
            ("store_segment_cache_segments".to_owned(), "Image segments this host keeps in memory", cached as f64),
            ("store_sweep_finished_unix_ms".to_owned(), "When this host last swept the shared store (0: never)", report.finished_unix_ms as f64),
            ("store_sweep_duration_ms".to_owned(), "How long this host's last sweep of the shared store took", report.duration_ms as f64),
            ("store_sweep_records_removed".to_owned(), "Records of expired sessions no host held that this host's sweeps removed", report.records_removed as f64),
        ];
        for kind in ["images", "packs", "files", "blobs"] {
            let (count, bytes) = report.objects.get(kind).copied().unwrap_or_default();
            let (gone, gone_bytes) = report.removed.get(kind).copied().unwrap_or_default();
            out.push((format!("store_{kind}_objects"), "Objects of this kind in the shared store at the last sweep", count as f64));
            out.push((format!("store_{kind}_bytes"), "Bytes of this kind in the shared store at the last sweep", bytes as f64));
            out.push((format!("store_{kind}_removed_objects"), "Objects of this kind this host's sweeps removed", gone as f64));
            out.push((format!("store_{kind}_removed_bytes"), "Bytes of this kind this host's sweeps removed", gone_bytes as f64));
        }
        out
    }

    /// Waits for `future` on the store's runtime (the caller is on the
    /// blocking pool).
    fn wait<T>(&self, future: impl Future<Output = Result<T, SharedStoreError>>) -> Result<T, SharedStoreError> {
        self.runtime.block_on(future)
    }

    fn objects(&self) -> &Arc<dyn ObjectStore> {
        &self.files.objects
    }

    fn field(&self, tenant: &str, session_id: &str, field: &str) -> Result<Option<String>, SharedStoreError> {
        Ok(self.wait(self.coordination.record(tenant, session_id))?.remove(field))
    }

    /// A new immutable object's path for the session, named by its lease's token.
    fn new_object(&self, tenant: &str, session_id: &str, kind: &str) -> Result<object_store::path::Path, SharedStoreError> {
        let token = self.coordination.token(tenant, session_id).ok_or(SharedStoreError::LeaseLost)?;
        let name = format!("{token:020}-{}", uuid::Uuid::new_v4().simple());
        Ok(self.files.location.path(&[kind, tenant, session_id, &name]))
    }

    /// Removes an object nothing points to any more, off the caller's path.
    fn forget_object(&self, path: Option<String>) {
        if let Some(path) = path {
            let objects = self.objects().clone();
            self.runtime.spawn(async move {
                let _ = objects.delete(&object_store::path::Path::from(path)).await;
            });
        }
    }

    fn files_dir(&self, tenant: &str, session_id: &str) -> Result<PathBuf, InterpreterError> {
        Ok(self.local.prepare_home(tenant, session_id, None)?.files)
    }
}

/// The most bytes an object a record names as an image may have.
const MAX_IMAGE_OBJECT: u64 = 8 << 30;

/// The runtime the session's record says it runs.
fn runtime_of(record: &HashMap<String, String>) -> Option<String> {
    let meta: SessionMeta = serde_json::from_str(record.get(META)?).ok()?;
    Some(meta.runtime.to_string())
}

/// Offers to sweep the store every `every` (one host of the fleet sweeps
/// each period) while the store lives.
fn spawn_sweeps(sweeper: std::sync::Weak<Sweeper>, every: Duration) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        // The first tick is at once: a fleet starting up sweeps after a period.
        tick.tick().await;
        loop {
            tick.tick().await;
            let Some(sweeper) = sweeper.upgrade() else { return };
            if let Err(error) = sweeper.sweep_if_due(every).await {
                tracing::warn!(%error, "the shared store's sweep failed; the next period tries again");
            }
        }
    });
}

/// Renews this host's leases every `every` while the coordination lives.
fn spawn_renewals(coordination: std::sync::Weak<Coordination>, every: Duration) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        loop {
            tick.tick().await;
            let Some(coordination) = coordination.upgrade() else { return };
            coordination.renew_all().await;
        }
    });
}

impl SessionStore for SharedSessionStore {
    fn home(&self, tenant: &str, session_id: &str) -> PathBuf {
        self.local.home(tenant, session_id)
    }

    fn prepare_home(&self, tenant: &str, session_id: &str, shared_files: Option<&Path>) -> Result<SessionDirs, InterpreterError> {
        self.local.prepare_home(tenant, session_id, shared_files)
    }

    fn read_meta(&self, tenant: &str, session_id: &str) -> Option<SessionMeta> {
        match self.field(tenant, session_id, META) {
            Ok(meta) => meta.and_then(|m| serde_json::from_str(&m).ok()),
            Err(error) => {
                tracing::warn!(%error, session = %session_id, "a session's record could not be read");
                None
            }
        }
    }

    fn write_meta(&self, tenant: &str, session_id: &str, meta: &SessionMeta) -> Result<(), InterpreterError> {
        let text = serde_json::to_string(meta).map_err(SharedStoreError::from)?;
        Ok(self.wait(self.coordination.set_record(tenant, session_id, &[(META, &text)]))?)
    }

    fn has_image(&self, tenant: &str, session_id: &str) -> bool {
        self.field(tenant, session_id, IMAGE).ok().flatten().is_some()
    }

    fn image_bytes(&self, tenant: &str, session_id: &str) -> u64 {
        self.field(tenant, session_id, IMAGE_BYTES).ok().flatten().and_then(|b| b.parse().ok()).unwrap_or(0)
    }

    fn save_image(&self, tenant: &str, session_id: &str, image: &[u8]) -> Result<(), InterpreterError> {
        let record = self.wait(self.coordination.record(tenant, session_id))?;
        let before = record.get(IMAGE).cloned();
        let runtime = runtime_of(&record);
        let (pack, manifest) = (self.new_object(tenant, session_id, "packs")?, self.new_object(tenant, session_id, "images")?);
        let now = self.wait(async {
            let fields = match self.images.save(tenant, session_id, runtime, image, pack, manifest.clone()).await? {
                Some(saved) => vec![(IMAGE, saved.manifest), (IMAGE_BYTES, saved.image_bytes.to_string()), (IMAGE_CURRENT, "1".to_owned()), (IMAGE_PACKS, saved.packs.join(" "))],
                // An image of a format before segments is kept whole.
                None => {
                    self.objects().put(&manifest, PutPayload::from(image.to_vec())).await?;
                    vec![(IMAGE, manifest.to_string()), (IMAGE_BYTES, image.len().to_string()), (IMAGE_CURRENT, "1".to_owned()), (IMAGE_PACKS, String::new())]
                }
            };
            let named: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
            self.coordination.set_record(tenant, session_id, &named).await?;
            Ok(fields.into_iter().next().map(|(_, image)| image))
        })?;
        // The pointer moved: the manifest before it is nobody's now (its
        // packs are the sweep's to judge).
        self.forget_object(before.filter(|b| Some(b) != now.as_ref()));
        Ok(())
    }

    fn read_image(&self, tenant: &str, session_id: &str) -> Result<Vec<u8>, InterpreterError> {
        let record = self.wait(self.coordination.record(tenant, session_id))?;
        let path = record.get(IMAGE).cloned().ok_or_else(|| InterpreterError::SharedStore("the session has no saved image".to_owned()))?;
        let runtime = runtime_of(&record);
        Ok(self.wait(async {
            let object = self.objects().get(&object_store::path::Path::from(path.as_str())).await?;
            if object.meta.size > MAX_IMAGE_OBJECT {
                return Err(SharedStoreError::corrupt(format!("its image object is {} bytes, more than any save writes", object.meta.size)));
            }
            let bytes = object.bytes().await?;
            if SharedImages::is_stored_manifest(&bytes) {
                return self.images.read(tenant, session_id, runtime.as_deref(), bytes).await;
            }
            // An image kept whole, as before manifests.
            Ok(bytes.to_vec())
        })?)
    }

    /// A stored manifest is shared: the copy names the same packs.
    fn copy_image(&self, tenant: &str, from: &str, to: &str) -> Result<(), InterpreterError> {
        let path = self.field(tenant, from, IMAGE)?.ok_or_else(|| InterpreterError::SharedStore("the session has no saved image".to_owned()))?;
        let manifest = self.new_object(tenant, to, "images")?;
        let shared = self.wait(async {
            let bytes = self.objects().get(&object_store::path::Path::from(path.as_str())).await?.bytes().await?;
            if !SharedImages::is_stored_manifest(&bytes) {
                return Ok(false);
            }
            let Some(saved) = self.images.share(tenant, to, &bytes, manifest).await? else { return Ok(false) };
            let bytes = saved.image_bytes.to_string();
            let packs = saved.packs.join(" ");
            self.coordination
                .set_record(tenant, to, &[(IMAGE, &saved.manifest), (IMAGE_BYTES, &bytes), (IMAGE_CURRENT, "1"), (IMAGE_PACKS, &packs)])
                .await?;
            Ok(true)
        })?;
        if !shared {
            let image = self.read_image(tenant, from)?;
            self.save_image(tenant, to, &image)?;
        }
        Ok(())
    }

    /// The image stays where the next host finds it, marked as older than
    /// the live state: a host that takes the session over after this one
    /// died resumes it and says what was lost.
    fn remove_image(&self, tenant: &str, session_id: &str) -> Result<(), InterpreterError> {
        Ok(self.wait(self.coordination.set_record(tenant, session_id, &[(IMAGE_CURRENT, "0")]))?)
    }

    fn discard_home(&self, tenant: &str, session_id: &str) -> Option<DiscardedHome> {
        // A session made anew in an expired one's place starts without its record.
        if let Err(error) = self.wait(self.coordination.delete_record(tenant, session_id)) {
            tracing::warn!(%error, session = %session_id, "an expired session's record was not removed");
        }
        self.local.discard_home(tenant, session_id)
    }

    fn remove_discarded(&self, discarded: DiscardedHome) {
        self.local.remove_discarded(discarded);
    }

    fn remove_home(&self, tenant: &str, session_id: &str) -> bool {
        // A home this host no longer holds is only its copy: the record is
        // the holder's to remove.
        if !self.coordination.holds(tenant, session_id) {
            return self.local.remove_home(tenant, session_id);
        }
        let forgotten = self.wait(self.coordination.delete_record(tenant, session_id));
        if let Err(error) = &forgotten {
            tracing::warn!(%error, session = %session_id, "a removed session's record stays");
        }
        self.release(tenant, session_id);
        self.local.remove_home(tenant, session_id) && forgotten.is_ok()
    }

    fn homes(&self) -> Vec<(String, String)> {
        self.local.homes()
    }

    fn leave_expired_note(&self, tenant: &str, session_id: &str, ttl_seconds: u64) {
        self.local.leave_expired_note(tenant, session_id, ttl_seconds);
    }

    fn take_expired_note(&self, tenant: &str, session_id: &str) -> Option<u64> {
        self.local.take_expired_note(tenant, session_id)
    }

    fn forget_old_expired_notes(&self) {
        self.local.forget_old_expired_notes();
    }

    fn check_writable(&self) -> Result<(), String> {
        self.local.check_writable()
    }

    fn claim(&self, tenant: &str, session_id: &str) -> Result<(), InterpreterError> {
        self.wait(self.coordination.claim(tenant, session_id))?;
        let key = (tenant.to_owned(), session_id.to_owned());
        let files = self.field(tenant, session_id, FILES).and_then(|list| match list {
            Some(list) => {
                let dir = self.files_dir(tenant, session_id).map_err(|e| SharedStoreError::local(e.to_string(), std::io::Error::other("session home")))?;
                let synced = self.synced.lock().unwrap_or_else(PoisonError::into_inner).get(&key).cloned();
                // This host wrote or read that list last, and the directory still holds it.
                if let Some((same_list, listed)) = synced
                    && same_list == list
                    && self.files.list(&dir).is_ok_and(|now| now == listed)
                {
                    return Ok(());
                }
                let listed = self.wait(self.files.restore(&object_store::path::Path::from(list.clone()), &dir))?;
                self.synced.lock().unwrap_or_else(PoisonError::into_inner).insert(key.clone(), (list, listed));
                Ok(())
            }
            None => Ok(()),
        });
        if let Err(error) = files {
            self.release(tenant, session_id);
            return Err(error.into());
        }
        Ok(())
    }

    fn holds(&self, tenant: &str, session_id: &str) -> bool {
        self.coordination.holds(tenant, session_id)
    }

    fn reclaim(&self, tenant: &str, session_id: &str) -> Result<bool, InterpreterError> {
        Ok(self.wait(self.coordination.reclaim(tenant, session_id))?)
    }

    fn persist_files(&self, tenant: &str, session_id: &str, files: &Path) -> Result<(), InterpreterError> {
        let before = self.field(tenant, session_id, FILES)?;
        let key = (tenant.to_owned(), session_id.to_owned());
        let listed = self.files.list(files)?;
        let synced = self.synced.lock().unwrap_or_else(PoisonError::into_inner).get(&key).cloned();
        // The directory as the store already lists it: nothing to write.
        if let (Some(before), Some((list, same))) = (&before, &synced)
            && before == list
            && *same == listed
        {
            return Ok(());
        }
        let list = self.new_object(tenant, session_id, "files")?;
        self.wait(async {
            self.files.persist(files, &listed, &list).await?;
            self.coordination.set_record(tenant, session_id, &[(FILES, list.as_ref())]).await?;
            Ok(())
        })?;
        self.forget_object(before.filter(|b| b.as_str() != list.as_ref()));
        self.synced.lock().unwrap_or_else(PoisonError::into_inner).insert(key, (list.to_string(), listed));
        Ok(())
    }

    fn release(&self, tenant: &str, session_id: &str) {
        if let Err(error) = self.wait(self.coordination.release(tenant, session_id)) {
            tracing::warn!(%error, session = %session_id, "a session's lease was not released; it lapses on its own");
        }
    }

    fn image_is_current(&self, tenant: &str, session_id: &str) -> bool {
        self.field(tenant, session_id, IMAGE_CURRENT).ok().flatten().is_none_or(|c| c == "1")
    }

    fn store_metrics(&self) -> Vec<(String, &'static str, f64)> {
        self.metrics()
    }

    fn artifact_share(&self) -> Option<Arc<dyn anypath_interpreter::ArtifactShare>> {
        Some(self.artifacts.clone())
    }

    fn shared_records(&self) -> Option<Arc<dyn anypath_interpreter::shared_records::SharedRecords>> {
        Some(self.records.clone())
    }

    fn handover_requests(&self) -> Option<UnboundedReceiver<(String, String)>> {
        self.handovers.lock().unwrap_or_else(PoisonError::into_inner).take()
    }

    fn interrupt_requests(&self) -> Option<UnboundedReceiver<InterruptRequest>> {
        self.interrupts.lock().unwrap_or_else(PoisonError::into_inner).take()
    }

    fn ask_interrupt(&self, tenant: &str, session_id: &str, run_id: Option<&str>) -> Result<bool, InterpreterError> {
        Ok(self.wait(self.coordination.ask_interrupt(tenant, session_id, run_id))?)
    }
}
