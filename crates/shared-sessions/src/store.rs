//! The session store several hosts share: homes stay on this host's disk
//! (the instance sees a local directory), and what another host needs to
//! take a session over goes to the object store and to Redis, fenced by the
//! session's lease.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anypath_interpreter::session_store::{DiscardedHome, SessionDirs};
use anypath_interpreter::{InterpreterError, LocalSessionStore, SessionMeta, SessionStore};
use futures_util::future::BoxFuture;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use tokio::runtime::Handle;
use tokio::sync::mpsc::UnboundedReceiver;

use crate::artifacts::SharedArtifacts;
use crate::coordination::Coordination;
use crate::error::SharedStoreError;
use crate::file_sync::{FileList, FileSync};
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
}

/// Sessions kept for every host of a fleet (see the crate's doc).
pub struct SharedSessionStore {
    local: LocalSessionStore,
    coordination: Arc<Coordination>,
    files: Arc<FileSync>,
    artifacts: Arc<SharedArtifacts>,
    records: Arc<RedisRecords>,
    runtime: Handle,
    handovers: Mutex<Option<UnboundedReceiver<(String, String)>>>,
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
            tokio::spawn(coordination.clone().listen_for_handovers(to));
            spawn_renewals(Arc::downgrade(&coordination), options.lease / 3);
            tracing::info!(host = %options.host, bucket = %options.objects.bucket, prefix = %options.objects.prefix, lease_ms = options.lease.as_millis() as u64, "sessions shared through the object store and Redis");
            let files = Arc::new(FileSync { objects, location: options.objects });
            let artifacts = Arc::new(SharedArtifacts { coordination: coordination.clone(), files: files.clone(), runtime: Handle::current() });
            let records = Arc::new(RedisRecords { coordination: coordination.clone() });
            Ok(Arc::new(Self {
                local,
                coordination,
                files,
                artifacts,
                records,
                runtime: Handle::current(),
                handovers: Mutex::new(Some(handovers)),
                synced: Mutex::new(HashMap::new()),
            }))
        })
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
        let path = self.new_object(tenant, session_id, "images")?;
        let before = self.field(tenant, session_id, IMAGE)?;
        self.wait(async {
            self.objects().put(&path, PutPayload::from(image.to_vec())).await?;
            let bytes = image.len().to_string();
            self.coordination.set_record(tenant, session_id, &[(IMAGE, path.as_ref()), (IMAGE_BYTES, &bytes), (IMAGE_CURRENT, "1")]).await?;
            // The pointer moved: the image before it is nobody's now.
            self.forget_object(before.filter(|b| b.as_str() != path.as_ref()));
            Ok(())
        })?;
        Ok(())
    }

    fn read_image(&self, tenant: &str, session_id: &str) -> Result<Vec<u8>, InterpreterError> {
        let path = self.field(tenant, session_id, IMAGE)?.ok_or_else(|| InterpreterError::SharedStore("the session has no saved image".to_owned()))?;
        let bytes = self.wait(async { Ok(self.objects().get(&object_store::path::Path::from(path)).await?.bytes().await?) })?;
        Ok(bytes.to_vec())
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

    fn artifact_share(&self) -> Option<Arc<dyn anypath_interpreter::ArtifactShare>> {
        Some(self.artifacts.clone())
    }

    fn shared_records(&self) -> Option<Arc<dyn anypath_interpreter::shared_records::SharedRecords>> {
        Some(self.records.clone())
    }

    fn handover_requests(&self) -> Option<UnboundedReceiver<(String, String)>> {
        self.handovers.lock().unwrap_or_else(PoisonError::into_inner).take()
    }
}
