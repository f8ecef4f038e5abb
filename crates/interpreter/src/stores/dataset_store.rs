//! Datasets: data someone else provides, which a session's code reads at
//! `/data/<name>` and cannot change.
//!
//! - **Mounted**: each sub-directory of the operator's `--datasets` directory,
//!   in every session of the tenants its access list allows (every tenant
//!   without a list).
//! - **Staged**: a tenant's own upload (`PUT /v1/datasets/{name}`), kept in
//!   the artifact store's content-addressed blobs (each content once) and
//!   listed in its index, shown in the sessions it is attached to.
//!
//! A session sees one directory at `/data`, preopened read-only: its
//! *view*, `<session home>/datasets/`, beside (not inside) the directory the
//! code sees at `/mnt/data`, so it counts toward no quota and never becomes
//! an artifact. The view holds hard links, never copies: to the mounted
//! files, and to the blobs of staged ones. A mounted directory on another
//! filesystem cannot be linked from; its files are copied once into
//! `<root>/dataset-copies/` and linked from there.
//!
//! The guest cannot write through `/data` (`EROFS`), nor hard-link a file
//! from it into `/mnt/data` (no hard links under a quota), so no session
//! can change a byte another session or an artifact shares.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anypath_wire::{DatasetFile, DatasetInfo, DatasetSource};
use rusqlite::params;
use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::error::InterpreterError;
use crate::names;
use crate::stores::artifact_store::ArtifactStore;

/// What the code sees as the datasets directory.
pub const GUEST_DATASETS: &str = "/data";

/// Files a listing names per dataset; `file_count` says how many there are.
const LISTED_FILES: usize = 100;

/// How datasets are offered.
#[derive(Debug, Clone)]
pub struct DatasetConfig {
    /// The operator's directory whose sub-directories are mounted datasets.
    pub mounted: Option<PathBuf>,
    /// Which tenants see which mounted dataset (every tenant each, without).
    pub access: Option<DatasetAccess>,
    /// Bytes of staged datasets one tenant may hold.
    pub tenant_quota_bytes: u64,
}

impl Default for DatasetConfig {
    /// Nothing mounted; 2 GiB of staged datasets per tenant.
    fn default() -> Self {
        Self { mounted: None, access: None, tenant_quota_bytes: 2 << 30 }
    }
}

/// The access list of mounted datasets (`--datasets-acl FILE`), TOML:
///
/// ```toml
/// [datasets]
/// census = ["acme", "globex"]
/// weather = ["*"]
/// ```
///
/// A dataset the list does not name is shown to no tenant; `"*"` is every tenant.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DatasetAccess {
    tenants: BTreeMap<String, BTreeSet<String>>,
}

/// An access list that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum AccessListError {
    #[error("reading {path}: {source}")]
    Read { path: String, source: io::Error },
    #[error("{path} is not a dataset access list: {source}")]
    Parse { path: String, source: toml::de::Error },
    #[error("{path}: {source}")]
    Name { path: String, source: names::NameError },
}

impl DatasetAccess {
    /// Reads and checks the list at `path`.
    pub fn load(path: &Path) -> Result<Self, AccessListError> {
        let shown = path.display().to_string();
        let text = fs::read_to_string(path).map_err(|source| AccessListError::Read { path: shown.clone(), source })?;
        Self::parse(&text).map_err(|e| match e {
            ParseError::Toml(source) => AccessListError::Parse { path: shown, source },
            ParseError::Name(source) => AccessListError::Name { path: shown, source },
        })
    }

    fn parse(text: &str) -> Result<Self, ParseError> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct File {
            datasets: BTreeMap<String, BTreeSet<String>>,
        }
        let file: File = toml::from_str(text).map_err(ParseError::Toml)?;
        for (dataset, tenants) in &file.datasets {
            names::dataset(dataset).map_err(ParseError::Name)?;
            for tenant in tenants.iter().filter(|t| t.as_str() != "*") {
                names::tenant(tenant).map_err(ParseError::Name)?;
            }
        }
        Ok(Self { tenants: file.datasets })
    }

    /// Whether `tenant` sees the mounted dataset `name`.
    pub fn allows(&self, name: &str, tenant: &str) -> bool {
        self.tenants.get(name).is_some_and(|t| t.contains("*") || t.contains(tenant))
    }
}

enum ParseError {
    Toml(toml::de::Error),
    Name(names::NameError),
}

/// A file received for a staged dataset, already on disk in the blob
/// store's staging area.
#[derive(Debug)]
pub struct ReceivedFile {
    /// Its name inside the dataset; `None` for a dataset that is one file.
    pub filename: Option<String>,
    /// Where its bytes wait (taken over: moved into a blob or removed).
    pub path: PathBuf,
}

/// The datasets of one interpreter.
pub struct DatasetStore {
    config: DatasetConfig,
    /// Copies of mounted files that live on another filesystem.
    copies: PathBuf,
}

/// One staged file as the index holds it.
struct StagedRow {
    name: String,
    file: String,
    sha256: String,
    size: u64,
    created: u64,
}

impl DatasetStore {
    /// The datasets of an interpreter rooted at `root`; copies an earlier
    /// process made are removed (the views that use them keep their links).
    pub fn new(config: DatasetConfig, root: &Path) -> Result<Self, InterpreterError> {
        let copies = root.join("dataset-copies");
        let _ = fs::remove_dir_all(&copies);
        if let Some(dir) = &config.mounted
            && !dir.is_dir()
        {
            return Err(InterpreterError::io("opening the datasets directory", io::Error::new(io::ErrorKind::NotFound, dir.display().to_string())));
        }
        Ok(Self { config, copies })
    }

    /// The mounted datasets `tenant` may see: name and host directory.
    fn mounted_for(&self, tenant: &str) -> Vec<(String, PathBuf)> {
        let Some(root) = &self.config.mounted else { return Vec::new() };
        let mut found: Vec<(String, PathBuf)> = fs::read_dir(root)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|entry| entry.file_type().is_ok_and(|t| t.is_dir()))
            .filter_map(|entry| {
                let name = entry.file_name().to_str()?.to_owned();
                names::dataset(&name).ok()?;
                let allowed = self.config.access.as_ref().is_none_or(|acl| acl.allows(&name, tenant));
                allowed.then(|| (name, entry.path()))
            })
            .collect();
        found.sort();
        found
    }

    /// Every dataset `tenant` sees mounted or has staged, by name.
    pub fn list(&self, store: &ArtifactStore, tenant: &str) -> Result<Vec<DatasetInfo>, InterpreterError> {
        let mut listed: Vec<DatasetInfo> = self.mounted_for(tenant).into_iter().map(|(name, dir)| mounted_info(&name, &dir)).collect();
        listed.extend(staged_infos(staged_rows(store, tenant, None)?));
        listed.sort_by(|a, b| a.name.cmp(&b.name).then((a.source == DatasetSource::Staged).cmp(&(b.source == DatasetSource::Staged))));
        Ok(listed)
    }

    /// The datasets a session's view shows now.
    pub fn shown(&self, store: &ArtifactStore, tenant: &str, view: &Path) -> Result<Vec<DatasetInfo>, InterpreterError> {
        let present: BTreeSet<String> = fs::read_dir(view).into_iter().flatten().flatten().filter_map(|e| e.file_name().to_str().map(str::to_owned)).collect();
        Ok(self.list(store, tenant)?.into_iter().filter(|d| present.contains(&d.name)).collect())
    }

    /// Keeps `files` as the tenant's dataset `name`, replacing one of that
    /// name (sessions it is attached to keep the old bytes until attached
    /// again). Refused past the tenant's dataset quota, and when a mounted
    /// dataset the tenant sees already has the name.
    pub fn stage(&self, store: &ArtifactStore, tenant: &str, name: &str, files: Vec<ReceivedFile>) -> Result<DatasetInfo, InterpreterError> {
        let discard = |files: &[ReceivedFile]| files.iter().for_each(|f| drop(fs::remove_file(&f.path)));
        let checked = (|| {
            names::dataset(name)?;
            if self.mounted_for(tenant).iter().any(|(mounted, _)| mounted == name) {
                return Err(InterpreterError::Invalid(format!("{name:?} is a mounted dataset; stage yours under another name")));
            }
            if files.is_empty() {
                return Err(InterpreterError::Invalid("a dataset needs at least one file".into()));
            }
            // The checked name is what is kept: the file's name inside the
            // dataset, one plain component (a `/mnt/data/` prefix stripped).
            let mut inner_names = Vec::with_capacity(files.len());
            for file in &files {
                let inner = match &file.filename {
                    Some(filename) => names::filename(filename)?.to_owned(),
                    None if files.len() == 1 => String::new(),
                    None => return Err(InterpreterError::Invalid("each file of a multi-file dataset needs a filename".into())),
                };
                if inner_names.contains(&inner) {
                    return Err(InterpreterError::Invalid(format!("the dataset names {inner:?} twice")));
                }
                inner_names.push(inner);
            }
            Ok(inner_names)
        })();
        let inner_names = match checked {
            Ok(inner_names) => inner_names,
            Err(e) => {
                discard(&files);
                return Err(e);
            }
        };
        // Hashed and synced outside the index lock: the slow part.
        let mut hashed = Vec::with_capacity(files.len());
        for (file, inner) in files.iter().zip(inner_names) {
            match hash(&file.path).and_then(|hashed| fs::File::open(&file.path)?.sync_all().map(|()| hashed)) {
                Ok((sha256, size)) => hashed.push((inner, sha256, size)),
                Err(e) => {
                    discard(&files);
                    return Err(InterpreterError::io("reading the dataset", e));
                }
            }
        }
        let total: u64 = hashed.iter().map(|(_, _, size)| size).sum();
        let now = crate::stores::artifact_store::unix_now();
        let stored = store.with_index(|db| {
            let held: i64 = db
                .query_row("SELECT COALESCE(SUM(size_bytes), 0) FROM dataset_files WHERE tenant = ?1 AND name != ?2", params![tenant, name], |r| r.get(0))
                .map_err(InterpreterError::index)?;
            let held = held as u64;
            if held.saturating_add(total) > self.config.tenant_quota_bytes {
                return Err(InterpreterError::Quota(format!(
                    "the tenant's datasets would hold {} bytes; the quota is {}",
                    held.saturating_add(total),
                    self.config.tenant_quota_bytes
                )));
            }
            // Blobs first, then the rows that keep them from the sweep,
            // both under the index lock the sweep takes.
            for (file, (_, sha256, _)) in files.iter().zip(&hashed) {
                store.place_blob(&file.path, sha256).map_err(|e| InterpreterError::io("storing the dataset", e))?;
            }
            let tx = db.unchecked_transaction().map_err(InterpreterError::index)?;
            tx.execute("DELETE FROM dataset_files WHERE tenant = ?1 AND name = ?2", params![tenant, name]).map_err(InterpreterError::index)?;
            for (file, sha256, size) in &hashed {
                tx.execute(
                    "INSERT INTO dataset_files (tenant, name, file, sha256, size_bytes, created_unix) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    params![tenant, name, file, sha256, *size as i64, now as i64],
                )
                .map_err(InterpreterError::index)?;
            }
            tx.commit().map_err(InterpreterError::index)
        });
        discard(&files);
        stored?;
        staged_infos(staged_rows(store, tenant, Some(name))?).pop().ok_or_else(|| InterpreterError::NoSuchDataset(name.to_owned()))
    }

    /// Bytes the tenant may still stage as `name` (a dataset of that name
    /// is replaced, so its bytes are free): a body is refused past it while
    /// it streams in.
    pub fn room(&self, store: &ArtifactStore, tenant: &str, name: &str) -> Result<u64, InterpreterError> {
        let held: i64 = store.with_index(|db| {
            db.query_row("SELECT COALESCE(SUM(size_bytes), 0) FROM dataset_files WHERE tenant = ?1 AND name != ?2", params![tenant, name], |r| r.get(0))
                .map_err(InterpreterError::index)
        })?;
        Ok(self.config.tenant_quota_bytes.saturating_sub(held as u64))
    }

    /// Forgets the tenant's staged dataset `name` (sessions that show it
    /// keep their links until they end).
    pub fn remove(&self, store: &ArtifactStore, tenant: &str, name: &str) -> Result<(), InterpreterError> {
        names::dataset(name)?;
        let removed = store.with_index(|db| {
            db.execute("DELETE FROM dataset_files WHERE tenant = ?1 AND name = ?2", params![tenant, name]).map_err(InterpreterError::index)
        })?;
        if removed == 0 { Err(InterpreterError::NoSuchDataset(name.to_owned())) } else { Ok(()) }
    }

    /// Makes `view` (a session's `/data`) anew: the mounted datasets the
    /// tenant sees, and its staged datasets in `attached` that still exist
    /// (returned: the names that do). Before the session's instance runs.
    pub fn build_view(&self, store: &ArtifactStore, tenant: &str, view: &Path, attached: &[String]) -> Result<Vec<String>, InterpreterError> {
        let io = |e| InterpreterError::io("making the session's /data", e);
        // Emptied, not replaced: an instance started ahead may already hold
        // the directory itself open as its /data.
        fs::create_dir_all(view).map_err(io)?;
        for entry in fs::read_dir(view).map_err(io)? {
            remove_any(&entry.map_err(io)?.path()).map_err(io)?;
        }
        let mounted = self.mounted_for(tenant);
        for (name, dir) in &mounted {
            // One dataset that cannot be shown must not keep a session from
            // opening: it is left out, and the operator told.
            if let Err(error) = self.link_tree(dir, &view.join(name)) {
                tracing::warn!(dataset = %name, %error, "a mounted dataset could not be shown in a session");
                let _ = remove_any(&view.join(name));
            }
        }
        let mut kept = Vec::new();
        for name in attached {
            // A mounted dataset the operator added since takes the name.
            if mounted.iter().any(|(mounted, _)| mounted == name) {
                continue;
            }
            match self.link_staged(store, tenant, name, view) {
                Ok(()) => kept.push(name.clone()),
                Err(InterpreterError::NoSuchDataset(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(kept)
    }

    /// Shows the tenant's staged dataset `name` in `view` (replacing what
    /// an earlier attach of that name showed).
    pub fn attach(&self, store: &ArtifactStore, tenant: &str, name: &str, view: &Path) -> Result<DatasetInfo, InterpreterError> {
        if self.mounted_for(tenant).iter().any(|(mounted, _)| mounted == name) {
            return Err(InterpreterError::Invalid(format!("{name:?} is a mounted dataset: every session already sees it at {GUEST_DATASETS}/{name}")));
        }
        self.link_staged(store, tenant, name, view)?;
        staged_infos(staged_rows(store, tenant, Some(name))?).pop().ok_or_else(|| InterpreterError::NoSuchDataset(name.to_owned()))
    }

    /// Links the blobs of a staged dataset into `view/<name>`, built beside
    /// and renamed into place, so a run never sees half of it.
    fn link_staged(&self, store: &ArtifactStore, tenant: &str, name: &str, view: &Path) -> Result<(), InterpreterError> {
        let io = |e| InterpreterError::io("attaching the dataset", e);
        // Under the index lock: the sweep cannot take a blob between the
        // rows being read and the links being made.
        store.with_index(|db| {
            let rows = staged_rows_in(db, tenant, Some(name))?;
            if rows.is_empty() {
                return Err(InterpreterError::NoSuchDataset(name.to_owned()));
            }
            let partial = view.join(format!(".{name}.{}.partial", uuid::Uuid::new_v4().simple()));
            let made = (|| {
                if rows.len() == 1 && rows[0].file.is_empty() {
                    fs::hard_link(store.blob_path(&rows[0].sha256), &partial)?;
                } else {
                    fs::create_dir(&partial)?;
                    for row in &rows {
                        fs::hard_link(store.blob_path(&row.sha256), partial.join(&row.file))?;
                    }
                }
                remove_any(&view.join(name))?;
                fs::rename(&partial, view.join(name))
            })();
            if made.is_err() {
                let _ = remove_any(&partial);
            }
            made.map_err(io)
        })
    }

    /// Mirrors the tree at `source` under `target` with hard links (plain
    /// files and directories only; symlinks are left out, never followed).
    fn link_tree(&self, source: &Path, target: &Path) -> io::Result<()> {
        fs::create_dir_all(target)?;
        let mut pending = vec![(source.to_path_buf(), target.to_path_buf())];
        while let Some((from, to)) = pending.pop() {
            for entry in fs::read_dir(&from)?.flatten() {
                let kind = entry.file_type()?;
                let destination = to.join(entry.file_name());
                if kind.is_dir() {
                    fs::create_dir(&destination)?;
                    pending.push((entry.path(), destination));
                } else if kind.is_file() {
                    self.link_file(&entry.path(), &destination)?;
                }
            }
        }
        Ok(())
    }

    /// A hard link to `source` at `destination`; where the kernel refuses
    /// one (another filesystem, `protected_hardlinks` on a file of another
    /// owner, the inode's link limit), to a copy of it made once per source
    /// file (and version of it). A file gone meanwhile is left out.
    fn link_file(&self, source: &Path, destination: &Path) -> io::Result<()> {
        match fs::hard_link(source, destination) {
            Err(e) if matches!(e.raw_os_error(), Some(libc::EXDEV | libc::EPERM | libc::EMLINK)) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            other => return other,
        }
        let meta = fs::metadata(source)?;
        let copy = self.copies.join(format!("{}-{}-{}-{}.{}", meta.dev(), meta.ino(), meta.size(), meta.mtime(), meta.mtime_nsec()));
        if !copy.is_file() {
            fs::create_dir_all(&self.copies)?;
            let partial = self.copies.join(format!(".{}.partial", uuid::Uuid::new_v4().simple()));
            let copied = fs::copy(source, &partial).and_then(|_| fs::rename(&partial, &copy));
            if copied.is_err() {
                let _ = fs::remove_file(&partial);
            }
            copied?;
        }
        fs::hard_link(&copy, destination)
    }
}

/// A file or a tree, removed; absent is fine.
fn remove_any(path: &Path) -> io::Result<()> {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => fs::remove_dir_all(path),
        Ok(_) => fs::remove_file(path),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// Hex SHA-256 and size of a file.
fn hash(path: &Path) -> io::Result<(String, u64)> {
    let mut file = fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let size = io::copy(&mut file, &mut hasher)?;
    Ok((hex::encode(hasher.finalize()), size))
}

/// A mounted dataset's listing: sizes from the directory, no hashing.
fn mounted_info(name: &str, dir: &Path) -> DatasetInfo {
    let mut files = Vec::new();
    let (mut size_bytes, mut file_count) = (0, 0);
    let mut pending = vec![(dir.to_path_buf(), String::new())];
    while let Some((at, prefix)) = pending.pop() {
        for entry in fs::read_dir(&at).into_iter().flatten().flatten() {
            let Ok(kind) = entry.file_type() else { continue };
            let Some(leaf) = entry.file_name().to_str().map(str::to_owned) else { continue };
            let inner = format!("{prefix}/{leaf}");
            if kind.is_dir() {
                pending.push((entry.path(), inner));
            } else if kind.is_file() {
                let size = entry.metadata().map_or(0, |m| m.len());
                size_bytes += size;
                file_count += 1;
                files.push(DatasetFile { path: format!("{GUEST_DATASETS}/{name}{inner}"), size_bytes: size, sha256: None });
            }
        }
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    files.truncate(LISTED_FILES);
    DatasetInfo { name: name.to_owned(), source: DatasetSource::Mounted, path: format!("{GUEST_DATASETS}/{name}"), size_bytes, file_count, sha256: None, created_unix: None, files }
}

fn staged_rows(store: &ArtifactStore, tenant: &str, name: Option<&str>) -> Result<Vec<StagedRow>, InterpreterError> {
    store.with_index(|db| staged_rows_in(db, tenant, name))
}

/// The tenant's staged files (of one dataset, or all), by dataset and file.
fn staged_rows_in(db: &rusqlite::Connection, tenant: &str, name: Option<&str>) -> Result<Vec<StagedRow>, InterpreterError> {
    let mut statement = db
        .prepare(
            "SELECT name, file, sha256, size_bytes, created_unix FROM dataset_files
             WHERE tenant = ?1 AND (?2 IS NULL OR name = ?2) ORDER BY name, file",
        )
        .map_err(InterpreterError::index)?;
    let rows = statement
        .query_map(params![tenant, name], |r| {
            Ok(StagedRow { name: r.get(0)?, file: r.get(1)?, sha256: r.get(2)?, size: r.get::<_, i64>(3)? as u64, created: r.get::<_, i64>(4)? as u64 })
        })
        .map_err(InterpreterError::index)?;
    rows.collect::<Result<Vec<_>, _>>().map_err(InterpreterError::index)
}

/// Staged rows grouped into datasets.
fn staged_infos(rows: Vec<StagedRow>) -> Vec<DatasetInfo> {
    let mut grouped: BTreeMap<String, Vec<StagedRow>> = BTreeMap::new();
    for row in rows {
        grouped.entry(row.name.clone()).or_default().push(row);
    }
    grouped
        .into_iter()
        .map(|(name, rows)| {
            let single = rows.len() == 1 && rows[0].file.is_empty();
            let sha256 = if single {
                rows[0].sha256.clone()
            } else {
                let manifest: String = rows.iter().map(|r| format!("{}  {}\n", r.sha256, r.file)).collect();
                hex::encode(Sha256::digest(manifest.as_bytes()))
            };
            let path = format!("{GUEST_DATASETS}/{name}");
            let files: Vec<DatasetFile> = rows
                .iter()
                .map(|r| DatasetFile {
                    path: if single { path.clone() } else { format!("{path}/{}", r.file) },
                    size_bytes: r.size,
                    sha256: Some(r.sha256.clone()),
                })
                .collect();
            DatasetInfo {
                size_bytes: rows.iter().map(|r| r.size).sum(),
                file_count: rows.len() as u64,
                created_unix: rows.iter().map(|r| r.created).max(),
                sha256: Some(sha256),
                source: DatasetSource::Staged,
                name,
                path,
                files,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stores::artifact_store::ArtifactConfig;
    use crate::stores::signing::Signer;

    /// A store and datasets under a fresh root, with a 1 KiB dataset quota.
    fn fixture() -> (tempfile::TempDir, ArtifactStore, DatasetStore) {
        let root = tempfile::tempdir().unwrap();
        let store = ArtifactStore::open(&root.path().join("artifacts"), Signer::new(b"k".to_vec()), ArtifactConfig::default()).unwrap();
        let config = DatasetConfig { tenant_quota_bytes: 1024, ..DatasetConfig::default() };
        let datasets = DatasetStore::new(config, root.path()).unwrap();
        (root, store, datasets)
    }

    fn received(store: &ArtifactStore, filename: Option<&str>, bytes: &[u8]) -> ReceivedFile {
        let path = store.staging_path().unwrap();
        fs::write(&path, bytes).unwrap();
        ReceivedFile { filename: filename.map(str::to_owned), path }
    }

    #[test]
    fn the_sweep_keeps_the_blobs_of_staged_datasets_and_only_those() {
        let (_root, store, datasets) = fixture();
        let staged = datasets.stage(&store, "acme", "sales.csv", vec![received(&store, None, b"a,b\n1,2\n")]).unwrap();
        assert_eq!(staged.sha256.as_deref(), Some(hex::encode(Sha256::digest(b"a,b\n1,2\n")).as_str()));
        assert_eq!(store.blob_count(), 1);
        assert_eq!(store.sweep().unwrap(), 0, "a staged dataset's blob is referenced");
        assert_eq!(store.blob_count(), 1);
        datasets.remove(&store, "acme", "sales.csv").unwrap();
        assert_eq!(store.sweep().unwrap(), 1, "once forgotten, its blob goes");
        assert_eq!(store.blob_count(), 0);
    }

    #[test]
    fn staging_refuses_past_the_quota_and_leaves_nothing_behind() {
        let (root, store, datasets) = fixture();
        let big = vec![b'x'; 2048];
        let refused = datasets.stage(&store, "acme", "big", vec![received(&store, None, &big)]);
        assert!(matches!(refused, Err(InterpreterError::Quota(_))), "{refused:?}");
        let twice = vec![received(&store, Some("a.csv"), b"1"), received(&store, Some("a.csv"), b"2")];
        assert!(matches!(datasets.stage(&store, "acme", "dup", twice), Err(InterpreterError::Invalid(_))));
        let staging = root.path().join("artifacts/blobs/staging");
        assert_eq!(fs::read_dir(&staging).unwrap().count(), 0, "refused bodies are removed");
        assert_eq!(store.blob_count(), 0);
    }

    #[test]
    fn a_file_name_is_kept_as_checked_so_no_link_lands_outside_the_view() {
        let (root, store, datasets) = fixture();
        // `names::filename` takes the path code sees and strips it: what is
        // kept must be the stripped name, never the absolute path.
        let files = vec![received(&store, Some("/mnt/data/x.csv"), b"1"), received(&store, Some("y.csv"), b"2")];
        let staged = datasets.stage(&store, "acme", "set", files).unwrap();
        assert_eq!(staged.files.iter().map(|f| f.path.as_str()).collect::<Vec<_>>(), ["/data/set/x.csv", "/data/set/y.csv"]);
        let view = root.path().join("view");
        datasets.build_view(&store, "acme", &view, &["set".into()]).unwrap();
        assert_eq!(fs::read(view.join("set/x.csv")).unwrap(), b"1");
        for bad in ["../x.csv", "a/b.csv", "/etc/passwd"] {
            let refused = datasets.stage(&store, "acme", "bad", vec![received(&store, Some(bad), b"1"), received(&store, Some("ok"), b"2")]);
            assert!(matches!(refused, Err(InterpreterError::Name(_))), "{bad}: {refused:?}");
        }
    }

    #[test]
    fn a_view_links_the_blobs_and_replacing_a_dataset_swaps_it_whole() {
        let (root, store, datasets) = fixture();
        let files = vec![received(&store, Some("a.csv"), b"1"), received(&store, Some("b.csv"), b"2")];
        datasets.stage(&store, "acme", "survey", files).unwrap();
        let view = root.path().join("view");
        assert_eq!(datasets.build_view(&store, "acme", &view, &["survey".into(), "gone".into()]).unwrap(), ["survey"]);
        let linked = fs::metadata(view.join("survey/a.csv")).unwrap();
        assert_eq!(linked.ino(), fs::metadata(store.blob_path(&hex::encode(Sha256::digest(b"1")))).unwrap().ino(), "a link, not a copy");
        assert!(datasets.attach(&store, "other", "survey", &view).is_err(), "another tenant's dataset is not found");
        datasets.stage(&store, "acme", "survey", vec![received(&store, Some("c.csv"), b"3")]).unwrap();
        datasets.attach(&store, "acme", "survey", &view).unwrap();
        let names: BTreeSet<String> = fs::read_dir(view.join("survey")).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        assert_eq!(names, BTreeSet::from(["c.csv".to_owned()]));
        assert_eq!(fs::read_dir(&view).unwrap().count(), 1, "no partial directory is left beside it");
    }

    #[test]
    fn the_access_list_names_tenants_per_dataset_and_denies_the_rest() {
        let acl = DatasetAccess::parse("[datasets]\ncensus = [\"acme\"]\nweather = [\"*\"]\n").ok().unwrap();
        assert!(acl.allows("census", "acme"));
        assert!(!acl.allows("census", "globex"));
        assert!(acl.allows("weather", "globex"));
        assert!(!acl.allows("secret", "acme"), "a dataset the list does not name is shown to nobody");
        assert!(DatasetAccess::parse("[datasets]\n\"../x\" = [\"acme\"]\n").is_err());
        assert!(DatasetAccess::parse("[datasets]\ncensus = [\"a b\"]\n").is_err());
        assert!(DatasetAccess::parse("census = [\"acme\"]\n").is_err());
    }
}
