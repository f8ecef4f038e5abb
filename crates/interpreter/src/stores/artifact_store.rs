//! Artifacts: the files a successful run created or changed, kept after the
//! session is gone. Bytes live once per content in a content-addressed blob
//! store (`blobs/<sha256[..2]>/<sha256>`, written once, shared across sessions
//! and tenants); metadata lives in SQLite (`index.sqlite3`). Each artifact has
//! a stable id and a signed download link; it expires after the retention
//! time, and a blob no artifact (nor staged dataset, `crate::stores::dataset_store`)
//! refers to any more is removed.

use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anypath_wire::{ArtifactFailure, FileInfo};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use rusqlite::{Connection, OptionalExtension, params};
use sha2::{Digest, Sha256};

use crate::directory::session_files::GUEST_DIR;
use crate::error::InterpreterError;
use crate::stores::artifact_share::ArtifactShare;
use crate::stores::mime::{SNIFF_BYTES, media_type};
use crate::stores::signing::Signer;

/// How artifacts are kept.
#[derive(Debug, Clone)]
pub struct ArtifactConfig {
    /// How long an artifact (and its download link) lives after it was made.
    pub retention: Duration,
    /// Bytes of live artifacts one tenant may hold.
    pub tenant_quota_bytes: u64,
    /// Artifacts one run may keep: past it, the run's other changed files
    /// stay in the session but are not kept (the report says which).
    pub max_per_run: usize,
}

/// Artifacts one run keeps by default: a notebook's worth of figures and
/// tables, while a run that writes thousands of files (an unzip, a cache)
/// does not fill the artifact store with them.
pub const DEFAULT_MAX_ARTIFACTS_PER_RUN: usize = 100;

impl Default for ArtifactConfig {
    /// 24 hours, 1 GiB per tenant, [`DEFAULT_MAX_ARTIFACTS_PER_RUN`] per run.
    fn default() -> Self {
        Self { retention: Duration::from_secs(24 * 3600), tenant_quota_bytes: 1 << 30, max_per_run: DEFAULT_MAX_ARTIFACTS_PER_RUN }
    }
}

/// A run's changed files (in name order) split at the per-run cap: the
/// first `cap` to keep, and a failure naming each of the rest.
pub(crate) fn within_run_cap(mut files: Vec<FileInfo>, cap: usize) -> (Vec<FileInfo>, Vec<ArtifactFailure>) {
    if files.len() <= cap {
        return (files, Vec::new());
    }
    let changed = files.len();
    let dropped = files.split_off(cap).into_iter().map(|file| ArtifactFailure {
        filename: file.filename,
        error: format!("not kept as an artifact: the run changed {changed} files and a run keeps at most {cap} (the first {cap} by name are kept; the file is still in the session)"),
    });
    (files, dropped.collect())
}

pub use anypath_wire::Artifact;

/// An artifact as the index holds it: with the tenant it belongs to, which
/// decides who may see it and is signed into its `/files/...` link, but is
/// never shown.
struct Indexed {
    tenant: String,
    artifact: Artifact,
}

/// Characters escaped in a URL path segment or query value.
const URL_ESCAPED: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'_').remove(b'.').remove(b'~');

/// The content-addressed store and its index.
pub struct ArtifactStore {
    db: Mutex<Connection>,
    blobs: PathBuf,
    signer: Signer,
    config: ArtifactConfig,
    /// Where the fleet's other hosts publish theirs, when sessions are shared.
    share: Option<Arc<dyn ArtifactShare>>,
}

/// The signed query of a link: `expires` and `signature`.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct LinkQuery {
    pub expires: u64,
    pub signature: String,
    /// The tenant of a `/files/...` link.
    #[serde(default)]
    pub tenant: Option<String>,
}

impl ArtifactStore {
    /// The service's key, which signs links (and runs' callbacks).
    pub fn signer(&self) -> &Signer {
        &self.signer
    }

    /// Opens (or creates) the store under `dir`.
    pub fn open(dir: &Path, signer: Signer, config: ArtifactConfig) -> Result<Self, InterpreterError> {
        let blobs = dir.join("blobs");
        fs::create_dir_all(&blobs).map_err(|e| InterpreterError::io("creating the blob store", e))?;
        let db = open_index(&dir.join("index.sqlite3"))?;
        Ok(Self { db: Mutex::new(db), blobs, signer, config, share: None })
    }

    /// The store, publishing what it keeps through `share` and finding there
    /// what other hosts kept (when given one).
    pub fn shared_through(mut self, share: Option<Arc<dyn ArtifactShare>>) -> Self {
        self.share = share;
        self
    }

    /// Indexes here an artifact another host kept (its content is fetched
    /// when first opened).
    fn import(&self, tenant: &str, artifact: &Artifact) -> Result<(), InterpreterError> {
        let db = self.db.lock().unwrap_or_else(|p| p.into_inner());
        index_row(&db, "INSERT OR IGNORE", tenant, artifact)
    }

    /// Indexes here the session's artifacts other hosts kept.
    fn import_session(&self, tenant: &str, session_id: &str) -> Result<(), InterpreterError> {
        let Some(share) = &self.share else { return Ok(()) };
        for artifact in share.session_artifacts(tenant, session_id)? {
            self.import(tenant, &artifact)?;
        }
        Ok(())
    }

    /// Keeps the file at `host_path` (`filename` in the session) as an
    /// artifact: hashed and copied into a blob (unless that content is stored
    /// already), then indexed. Refused past the tenant's byte quota.
    pub fn ingest(&self, tenant: &str, session_id: &str, filename: &str, host_path: &Path, base_url: &str) -> Result<Artifact, InterpreterError> {
        let staged = self.stage(host_path)?;
        let made = since_epoch();
        let now = made.as_secs();
        let db = self.db.lock().unwrap_or_else(|p| p.into_inner());
        let held: u64 = db
            .query_row("SELECT COALESCE(SUM(size_bytes), 0) FROM artifacts WHERE tenant = ?1 AND expires_unix > ?2", params![tenant, now], |r| {
                r.get::<_, i64>(0)
            })
            .map_err(InterpreterError::index)? as u64;
        if held + staged.size > self.config.tenant_quota_bytes {
            let _ = fs::remove_file(&staged.path);
            return Err(InterpreterError::ArtifactQuota { filename: filename.to_owned(), held, quota: self.config.tenant_quota_bytes });
        }
        // Under the index lock, so the sweep cannot remove a blob being reused.
        let blob = self.blob_path(&staged.sha256);
        if blob.exists() {
            let _ = fs::remove_file(&staged.path);
        } else {
            let placed = blob.parent().map_or(Ok(()), fs::create_dir_all).and_then(|()| fs::rename(&staged.path, &blob));
            if let Err(e) = placed {
                let _ = fs::remove_file(&staged.path);
                return Err(InterpreterError::io("storing the artifact", e));
            }
        }
        let artifact = Artifact {
            id: uuid::Uuid::new_v4().simple().to_string(),
            path: format!("{GUEST_DIR}/{filename}"),
            filename: filename.to_owned(),
            size_bytes: staged.size,
            mime_type: media_type(filename, &staged.head),
            sha256: staged.sha256,
            session_id: session_id.to_owned(),
            created_unix: now,
            expires_unix: expiry_after(made, self.config.retention),
            download_url: String::new(),
            file_url: String::new(),
        };
        index_row(&db, "INSERT", tenant, &artifact)?;
        drop(db);
        if let Some(share) = &self.share {
            share.publish(tenant, &artifact, &blob)?;
        }
        Ok(self.linked(Indexed { tenant: tenant.to_owned(), artifact }, base_url))
    }

    /// The newest live artifact of the session's `filename` holding exactly
    /// the bytes now at `host_path`, if a run kept one. Only reads.
    pub fn find_content(&self, tenant: &str, session_id: &str, filename: &str, host_path: &Path, base_url: &str) -> Result<Option<Artifact>, InterpreterError> {
        let sha256 = hash_file(host_path)?;
        self.import_session(tenant, session_id)?;
        let db = self.db.lock().unwrap_or_else(|p| p.into_inner());
        let found = db
            .query_row(
                &format!("SELECT {COLUMNS} FROM artifacts WHERE tenant = ?1 AND session_id = ?2 AND filename = ?3 AND sha256 = ?4 AND expires_unix > ?5 ORDER BY created_unix DESC, rowid DESC LIMIT 1"),
                params![tenant, session_id, filename, sha256, unix_now() as i64],
                row,
            )
            .optional()
            .map_err(InterpreterError::index)?;
        Ok(found.map(|a| self.linked(a, base_url)))
    }

    /// The tenant's artifact `id`, while it lives.
    pub fn get(&self, tenant: &str, id: &str, base_url: &str) -> Result<Artifact, InterpreterError> {
        self.by_id(id)?.filter(|a| a.tenant == tenant).map(|a| self.linked(a, base_url)).ok_or_else(|| InterpreterError::NoSuchArtifact(id.to_owned()))
    }

    /// Whether the index answers a query and the blob store is a writable
    /// directory; what is wrong otherwise.
    pub fn check(&self) -> Result<(), String> {
        let db = self.db.lock().unwrap_or_else(|p| p.into_inner());
        db.query_row("SELECT count(*) FROM artifacts", [], |row| row.get::<_, i64>(0)).map_err(|e| format!("the artifact index does not answer: {e}"))?;
        drop(db);
        tempfile::NamedTempFile::new_in(&self.blobs).map(drop).map_err(|e| format!("the blob store {} is not writable: {e}", self.blobs.display()))
    }

    /// The tenant's artifact `id` and an open handle on its bytes; another
    /// tenant's id is as unknown as one that never was.
    pub fn open_for_tenant(&self, tenant: &str, id: &str) -> Result<(Artifact, fs::File), InterpreterError> {
        let indexed = self.by_id(id)?.filter(|a| a.tenant == tenant).ok_or_else(|| InterpreterError::NoSuchArtifact(id.to_owned()))?;
        self.open_blob(indexed.artifact)
    }

    /// Every live artifact of a session, newest first.
    pub fn list(&self, tenant: &str, session_id: &str, base_url: &str) -> Result<Vec<Artifact>, InterpreterError> {
        self.import_session(tenant, session_id)?;
        let db = self.db.lock().unwrap_or_else(|p| p.into_inner());
        let mut statement = db
            .prepare(&format!("SELECT {COLUMNS} FROM artifacts WHERE tenant = ?1 AND session_id = ?2 AND expires_unix > ?3 ORDER BY created_unix DESC, rowid DESC"))
            .map_err(InterpreterError::index)?;
        let rows = statement.query_map(params![tenant, session_id, unix_now() as i64], row).map_err(InterpreterError::index)?;
        let found: Result<Vec<Indexed>, _> = rows.collect();
        Ok(found.map_err(InterpreterError::index)?.into_iter().map(|a| self.linked(a, base_url)).collect())
    }

    /// The artifact and an open handle on its bytes, for a link whose
    /// signature checks out and has not expired. Every refusal is the same
    /// `Forbidden`, so a guess learns nothing. The tenant it belongs to
    /// comes first, for the audit trail.
    pub fn open_signed(&self, id: &str, query: &LinkQuery) -> Result<(String, Artifact, fs::File), InterpreterError> {
        let expires = query.expires.to_string();
        if !self.signer.verify(&["artifact", id, &expires], &query.signature) || query.expires <= unix_now() {
            return Err(InterpreterError::Forbidden);
        }
        let indexed = self.by_id(id)?.ok_or(InterpreterError::Forbidden)?;
        let (artifact, file) = self.open_blob(indexed.artifact)?;
        Ok((indexed.tenant, artifact, file))
    }

    /// The newest artifact named `filename` in the session, for a signed
    /// `/files/{session_id}/{filename}` link, after the tenant it belongs to.
    pub fn open_signed_file(&self, session_id: &str, filename: &str, query: &LinkQuery) -> Result<(String, Artifact, fs::File), InterpreterError> {
        let tenant = query.tenant.as_deref().unwrap_or_default();
        let expires = query.expires.to_string();
        if !self.signer.verify(&["file", tenant, session_id, filename, &expires], &query.signature) || query.expires <= unix_now() {
            return Err(InterpreterError::Forbidden);
        }
        self.import_session(tenant, session_id)?;
        let artifact = {
            let db = self.db.lock().unwrap_or_else(|p| p.into_inner());
            db.query_row(
                &format!("SELECT {COLUMNS} FROM artifacts WHERE tenant = ?1 AND session_id = ?2 AND filename = ?3 AND expires_unix > ?4 ORDER BY created_unix DESC, rowid DESC LIMIT 1"),
                params![tenant, session_id, filename, unix_now() as i64],
                row,
            )
            .optional()
            .map_err(InterpreterError::index)?
        };
        let indexed = artifact.ok_or(InterpreterError::Forbidden)?;
        let (artifact, file) = self.open_blob(indexed.artifact)?;
        Ok((indexed.tenant, artifact, file))
    }

    /// Artifacts one run may keep.
    pub fn max_per_run(&self) -> usize {
        self.config.max_per_run
    }

    /// Removes expired artifacts, then every blob no artifact or staged
    /// dataset refers to; returns how many blobs went.
    pub fn sweep(&self) -> Result<usize, InterpreterError> {
        let db = self.db.lock().unwrap_or_else(|p| p.into_inner());
        db.execute("DELETE FROM artifacts WHERE expires_unix <= ?1", params![unix_now() as i64]).map_err(InterpreterError::index)?;
        let mut removed = 0;
        for shard in fs::read_dir(&self.blobs).into_iter().flatten().flatten() {
            if shard.file_name() == STAGING {
                removed += remove_stale_staging(&shard.path());
                continue;
            }
            for blob in fs::read_dir(shard.path()).into_iter().flatten().flatten() {
                let name = blob.file_name().to_string_lossy().into_owned();
                let referenced: bool = db
                    .query_row(
                        "SELECT EXISTS (SELECT 1 FROM artifacts WHERE sha256 = ?1) OR EXISTS (SELECT 1 FROM dataset_files WHERE sha256 = ?1)",
                        params![name],
                        |r| r.get(0),
                    )
                    .map_err(InterpreterError::index)?;
                if !referenced && fs::remove_file(blob.path()).is_ok() {
                    removed += 1;
                }
            }
        }
        Ok(removed)
    }

    /// Blobs held on disk now (each distinct content once).
    pub fn blob_count(&self) -> usize {
        fs::read_dir(&self.blobs).into_iter().flatten().flatten().filter(|shard| shard.file_name() != STAGING).map(|shard| fs::read_dir(shard.path()).into_iter().flatten().count()).sum()
    }

    fn by_id(&self, id: &str) -> Result<Option<Indexed>, InterpreterError> {
        let here = {
            let db = self.db.lock().unwrap_or_else(|p| p.into_inner());
            db.query_row(&format!("SELECT {COLUMNS} FROM artifacts WHERE id = ?1 AND expires_unix > ?2"), params![id, unix_now() as i64], row)
                .optional()
                .map_err(InterpreterError::index)?
        };
        match (here, &self.share) {
            (Some(indexed), _) => Ok(Some(indexed)),
            (None, Some(share)) => match share.find(id)? {
                Some((tenant, artifact)) if artifact.expires_unix > unix_now() => {
                    self.import(&tenant, &artifact)?;
                    Ok(Some(Indexed { tenant, artifact }))
                }
                _ => Ok(None),
            },
            (None, None) => Ok(None),
        }
    }

    fn open_blob(&self, artifact: Artifact) -> Result<(Artifact, fs::File), InterpreterError> {
        let path = self.blob_path(&artifact.sha256);
        if let Some(share) = self.share.as_ref().filter(|_| !path.exists()) {
            // Kept by another host: its content is brought here once.
            let staged = self.staging_path()?;
            share.fetch_content(&artifact.sha256, &staged)?;
            let placed = self.with_index(|_| self.place_blob(&staged, &artifact.sha256));
            let _ = fs::remove_file(&staged);
            placed.map_err(|e| InterpreterError::io("storing a fetched artifact", e))?;
        }
        let file = fs::File::open(&path).map_err(|e| InterpreterError::io("opening the artifact", e))?;
        Ok((artifact, file))
    }

    /// Runs `work` under the index's lock: blobs placed and rows written
    /// within it are never seen by a sweep halfway.
    pub(crate) fn with_index<T>(&self, work: impl FnOnce(&Connection) -> T) -> T {
        let db = self.db.lock().unwrap_or_else(|p| p.into_inner());
        work(&db)
    }

    /// A fresh path in the staging area, where a body is received before it
    /// is hashed and becomes a blob (a crash leaves it to the sweep).
    pub fn staging_path(&self) -> Result<PathBuf, InterpreterError> {
        let shard = self.blobs.join(STAGING);
        fs::create_dir_all(&shard).map_err(|e| InterpreterError::io("creating the staging area", e))?;
        Ok(shard.join(format!(".{}", uuid::Uuid::new_v4().simple())))
    }

    /// Moves the staged file at `staged` (whose content hashes to `sha256`,
    /// synced to disk) into its blob, or leaves the blob that holds it
    /// already. Call under [`Self::with_index`].
    pub(crate) fn place_blob(&self, staged: &Path, sha256: &str) -> std::io::Result<()> {
        let blob = self.blob_path(sha256);
        if blob.exists() {
            return Ok(());
        }
        if let Some(shard) = blob.parent() {
            fs::create_dir_all(shard)?;
        }
        // The caller synced the bytes before taking the index lock.
        match fs::hard_link(staged, &blob) {
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
            other => other,
        }
    }

    pub(crate) fn blob_path(&self, sha256: &str) -> PathBuf {
        self.blobs.join(&sha256[..2]).join(sha256)
    }

    /// Hashes the file while copying it to a staging blob, synced to disk.
    fn stage(&self, source: &Path) -> Result<Staged, InterpreterError> {
        let io = |e| InterpreterError::io("reading the artifact", e);
        let mut input = fs::OpenOptions::new().read(true).custom_flags(crate::directory::session_files::O_NOFOLLOW).open(source).map_err(io)?;
        let shard = self.blobs.join(STAGING);
        fs::create_dir_all(&shard).map_err(io)?;
        let path = shard.join(format!(".{}", uuid::Uuid::new_v4().simple()));
        let copied = (|| {
            let mut output = fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&path)?;
            let mut hasher = Sha256::new();
            let mut buffer = vec![0; 256 << 10];
            let mut size = 0u64;
            // The first bytes decide the media type: kept from the copy, not read again.
            let mut head = Vec::with_capacity(SNIFF_BYTES);
            loop {
                let n = input.read(&mut buffer)?;
                if n == 0 {
                    break;
                }
                let wanted = (SNIFF_BYTES - head.len()).min(n);
                head.extend_from_slice(&buffer[..wanted]);
                hasher.update(&buffer[..n]);
                output.write_all(&buffer[..n])?;
                size += n as u64;
            }
            output.sync_all()?;
            Ok::<_, std::io::Error>(Staged { path: path.clone(), sha256: hex::encode(hasher.finalize()), size, head })
        })();
        copied.map_err(|e| {
            let _ = fs::remove_file(&path);
            InterpreterError::io("copying the artifact", e)
        })
    }

    /// The artifact with its signed links filled in.
    fn linked(&self, indexed: Indexed, base_url: &str) -> Artifact {
        let Indexed { tenant, mut artifact } = indexed;
        let expires = artifact.expires_unix.to_string();
        let signature = self.signer.sign(&["artifact", &artifact.id, &expires]);
        artifact.download_url = format!("{base_url}/v1/artifacts/{}/content?expires={expires}&signature={signature}", artifact.id);
        let signature = self.signer.sign(&["file", &tenant, &artifact.session_id, &artifact.filename, &expires]);
        artifact.file_url = format!(
            "{base_url}/files/{}/{}?tenant={}&expires={expires}&signature={signature}",
            artifact.session_id,
            url_path(&artifact.filename),
            utf8_percent_encode(&tenant, URL_ESCAPED)
        );
        artifact
    }
}

/// A session-relative file name as a URL path: each segment escaped.
pub(crate) fn url_path(filename: &str) -> String {
    let segments: Vec<String> = filename.split('/').map(|part| utf8_percent_encode(part, URL_ESCAPED).to_string()).collect();
    segments.join("/")
}

/// Hex SHA-256 of a file's bytes, read without following a symlink.
fn hash_file(path: &Path) -> Result<String, InterpreterError> {
    let io = |e| InterpreterError::io("reading the file", e);
    let mut input = fs::OpenOptions::new().read(true).custom_flags(crate::directory::session_files::O_NOFOLLOW).open(path).map_err(io)?;
    let mut hasher = Sha256::new();
    std::io::copy(&mut input, &mut hasher).map_err(io)?;
    Ok(hex::encode(hasher.finalize()))
}

/// Where a copy is hashed before it becomes a blob.
const STAGING: &str = "staging";
/// A staged copy older than this was left by a crash.
const STALE_STAGING: Duration = Duration::from_secs(3600);

fn remove_stale_staging(dir: &Path) -> usize {
    let stale = |entry: &fs::DirEntry| entry.metadata().and_then(|m| m.modified()).is_ok_and(|t| t.elapsed().is_ok_and(|age| age > STALE_STAGING));
    fs::read_dir(dir).into_iter().flatten().flatten().filter(|e| stale(e) && fs::remove_file(e.path()).is_ok()).count()
}

struct Staged {
    path: PathBuf,
    sha256: String,
    size: u64,
    /// The first [`SNIFF_BYTES`] of the content.
    head: Vec<u8>,
}

/// Writes the artifact's index row with `verb` (`INSERT`, or `INSERT OR
/// IGNORE` for a row another host may have given already).
fn index_row(db: &Connection, verb: &str, tenant: &str, artifact: &Artifact) -> Result<(), InterpreterError> {
    db.execute(
        &format!(
            "{verb} INTO artifacts (id, tenant, session_id, filename, size_bytes, mime_type, sha256, created_unix, expires_unix)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"
        ),
        params![
            artifact.id,
            tenant,
            artifact.session_id,
            artifact.filename,
            artifact.size_bytes as i64,
            artifact.mime_type,
            artifact.sha256,
            artifact.created_unix as i64,
            artifact.expires_unix as i64
        ],
    )
    .map_err(InterpreterError::index)?;
    Ok(())
}

const COLUMNS: &str = "id, tenant, session_id, filename, size_bytes, mime_type, sha256, created_unix, expires_unix";

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Indexed> {
    let filename: String = r.get(3)?;
    let artifact = Artifact {
        id: r.get(0)?,
        session_id: r.get(2)?,
        path: format!("{GUEST_DIR}/{filename}"),
        filename,
        size_bytes: r.get::<_, i64>(4)? as u64,
        mime_type: r.get(5)?,
        sha256: r.get(6)?,
        created_unix: r.get::<_, i64>(7)? as u64,
        expires_unix: r.get::<_, i64>(8)? as u64,
        download_url: String::new(),
        file_url: String::new(),
    };
    Ok(Indexed { tenant: r.get(1)?, artifact })
}

pub(crate) fn unix_now() -> u64 {
    since_epoch().as_secs()
}

fn since_epoch() -> Duration {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default()
}

/// The whole second at or after `retention` from `made`: rounded up, so an
/// artifact lives at least its retention however close to a second's end it
/// was made (the sweep compares with the current second, rounded down).
fn expiry_after(made: Duration, retention: Duration) -> u64 {
    let at = made + retention;
    at.as_secs() + u64::from(at.subsec_nanos() > 0)
}


/// The index's pragmas and schema, idempotent.
const INDEX_SCHEMA: &str = "PRAGMA journal_mode = WAL;
    PRAGMA synchronous = FULL;
    CREATE TABLE IF NOT EXISTS artifacts (
        id TEXT PRIMARY KEY,
        tenant TEXT NOT NULL,
        session_id TEXT NOT NULL,
        filename TEXT NOT NULL,
        size_bytes INTEGER NOT NULL,
        mime_type TEXT NOT NULL,
        sha256 TEXT NOT NULL,
        created_unix INTEGER NOT NULL,
        expires_unix INTEGER NOT NULL
    );
    CREATE INDEX IF NOT EXISTS artifacts_by_file ON artifacts (tenant, session_id, filename, created_unix);
    CREATE INDEX IF NOT EXISTS artifacts_by_blob ON artifacts (sha256);
    CREATE INDEX IF NOT EXISTS artifacts_by_expiry ON artifacts (expires_unix);
    CREATE TABLE IF NOT EXISTS dataset_files (
        tenant TEXT NOT NULL,
        name TEXT NOT NULL,
        file TEXT NOT NULL,
        sha256 TEXT NOT NULL,
        size_bytes INTEGER NOT NULL,
        created_unix INTEGER NOT NULL,
        PRIMARY KEY (tenant, name, file)
    );
    CREATE INDEX IF NOT EXISTS dataset_files_by_blob ON dataset_files (sha256);";

/// Opens the artifact index and makes sure of its schema.
///
/// Several services may share a data directory and start at once. The
/// switch to WAL and the schema take the write lock for a moment; SQLite
/// answers "locked" without waiting when two connections would deadlock
/// (both reading the schema, both wanting to write it), so the busy timeout
/// alone is not enough: the whole step is tried again until a deadline.
fn open_index(path: &Path) -> Result<Connection, InterpreterError> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let attempt = Connection::open(path).and_then(|db| {
            db.busy_timeout(std::time::Duration::from_secs(10))?;
            db.execute_batch(INDEX_SCHEMA)?;
            Ok(db)
        });
        match attempt {
            Ok(db) => return Ok(db),
            Err(e) if is_contended(&e) && std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(25));
            }
            Err(e) => return Err(InterpreterError::index(e)),
        }
    }
}

/// Whether `error` is another connection holding the lock.
fn is_contended(error: &rusqlite::Error) -> bool {
    matches!(
        error.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store in a fresh directory, which is removed when the returned
    /// `TempDir` is dropped (bound first, so after the store).
    fn store(name: &str, retention: Duration, quota: u64) -> (tempfile::TempDir, ArtifactStore) {
        let dir = tempfile::Builder::new().prefix(&format!("anypath-artifact-store-{name}-")).tempdir().unwrap();
        let config = ArtifactConfig { retention, tenant_quota_bytes: quota, ..ArtifactConfig::default() };
        let store = ArtifactStore::open(&dir.path().join("artifacts"), Signer::new(b"k".repeat(32)), config).unwrap();
        (dir, store)
    }

    /// Services sharing a data directory start at once: each opens the same
    /// fresh index, and none may fail on the other's schema lock.
    #[test]
    fn services_starting_together_on_one_data_directory_all_open_the_index() {
        for round in 0..5 {
            let dir = tempfile::Builder::new().prefix(&format!("anypath-artifact-race-{round}-")).tempdir().unwrap();
            let root = dir.path().join("artifacts");
            let start = std::sync::Arc::new(std::sync::Barrier::new(8));
            let opened: Vec<_> = (0..8)
                .map(|_| {
                    let (root, start) = (root.clone(), start.clone());
                    std::thread::spawn(move || {
                        start.wait();
                        let config = ArtifactConfig { retention: Duration::from_secs(60), tenant_quota_bytes: 1 << 20, ..ArtifactConfig::default() };
                        ArtifactStore::open(&root, Signer::new(b"k".repeat(32)), config).map(|_| ())
                    })
                })
                .collect();
            for open in opened {
                open.join().unwrap().expect("the index opens while others open it too");
            }
        }
    }

    fn file(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
        let path = dir.join(name);
        fs::write(&path, bytes).unwrap();
        path
    }

    #[test]
    fn a_run_keeps_its_first_files_up_to_the_cap_and_names_the_rest() {
        let files: Vec<FileInfo> = ["a.png", "b.png", "c.png"].iter().map(|n| crate::directory::session_files::info((*n).to_owned(), 1)).collect();
        let (kept, dropped) = within_run_cap(files.clone(), 3);
        assert_eq!((kept.len(), dropped.len()), (3, 0), "at the cap all are kept");
        let (kept, dropped) = within_run_cap(files, 2);
        let kept: Vec<&str> = kept.iter().map(|f| f.filename.as_str()).collect();
        assert_eq!(kept, ["a.png", "b.png"]);
        assert_eq!(dropped.len(), 1);
        assert_eq!(dropped[0].filename, "c.png");
        assert!(dropped[0].error.contains("changed 3 files") && dropped[0].error.contains("at most 2"), "{}", dropped[0].error);
    }

    #[test]
    fn an_expiry_is_rounded_up_to_a_whole_second() {
        let second = Duration::from_secs(1);
        assert_eq!(expiry_after(Duration::from_millis(10_999), second), 12, "made late in second 10, it lives past 11.999");
        assert_eq!(expiry_after(Duration::from_secs(10), second), 11, "on a whole second, nothing is added");
    }

    #[test]
    fn expired_artifacts_go_and_so_do_blobs_nothing_refers_to() {
        let (dir, store) = store("expiry", Duration::from_secs(1), 1 << 20);
        let shared = file(dir.path(), "shared.txt", b"same bytes");
        let first = store.ingest("t", "s1", "shared.txt", &shared, "http://h").unwrap();
        assert_eq!(store.blob_count(), 1);
        std::thread::sleep(Duration::from_millis(2100));
        // A newer artifact with the same bytes keeps the blob alive past the first one's expiry.
        let second = store.ingest("t", "s2", "shared.txt", &shared, "http://h").unwrap();
        assert_eq!(store.sweep().unwrap(), 0, "the blob is still referenced");
        assert!(matches!(store.get("t", &first.id, "http://h"), Err(InterpreterError::NoSuchArtifact(_))));
        assert_eq!(store.get("t", &second.id, "http://h").unwrap().sha256, first.sha256);
        std::thread::sleep(Duration::from_millis(2100));
        assert_eq!(store.sweep().unwrap(), 1);
        assert_eq!(store.blob_count(), 0, "no blob outlives every artifact that used it");
    }

    #[test]
    fn the_quota_counts_live_artifacts_of_one_tenant() {
        let (dir, store) = store("quota", Duration::from_secs(3600), 10);
        let path = file(dir.path(), "six.txt", b"123456");
        store.ingest("t", "s", "six.txt", &path, "http://h").unwrap();
        assert!(matches!(store.ingest("t", "s", "six.txt", &path, "http://h"), Err(InterpreterError::ArtifactQuota { .. })));
        store.ingest("u", "s", "six.txt", &path, "http://h").unwrap();
        assert_eq!(store.blob_count(), 1);
    }
}
