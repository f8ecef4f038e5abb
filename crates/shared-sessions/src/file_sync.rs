//! A session's files in the object store: each file's content once, named
//! by its SHA-256 (two sessions or two saves with the same file store it
//! once), and a list of the directory's files naming them.
//!
//! Runs on the blocking pool (inside the store's `block_on`), so the local
//! file work is plain `std::fs`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::coordination::Coordination;
use crate::error::SharedStoreError;
use crate::location::ObjectLocation;

/// A session directory's files, by path relative to it.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct FileList {
    pub(crate) files: BTreeMap<String, ListedFile>,
}

/// One file of a [`FileList`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ListedFile {
    pub(crate) sha256: String,
    pub(crate) size: u64,
}

/// Moves files between session directories and the object store.
pub(crate) struct FileSync {
    pub(crate) objects: Arc<dyn ObjectStore>,
    pub(crate) location: ObjectLocation,
    pub(crate) coordination: Arc<Coordination>,
}

impl FileSync {
    /// Where the content `sha256` is kept.
    pub(crate) fn blob(&self, sha256: &str) -> object_store::path::Path {
        self.location.path(&["blobs", sha256])
    }

    /// What `dir` holds now: each file's content hash and size.
    pub(crate) fn list(&self, dir: &Path) -> Result<FileList, SharedStoreError> {
        let mut listed = FileList::default();
        for (relative, path) in walk(dir)? {
            let content = std::fs::read(&path).map_err(|e| SharedStoreError::local(format!("reading {}", path.display()), e))?;
            listed.files.insert(relative, ListedFile { sha256: hex::encode(Sha256::digest(&content)), size: content.len() as u64 });
        }
        Ok(listed)
    }

    /// Keeps the contents `listed` (those of `dir`) not stored yet, and the
    /// list at `list`.
    pub(crate) async fn persist(&self, dir: &Path, listed: &FileList, list: &object_store::path::Path) -> Result<(), SharedStoreError> {
        for (relative, file) in &listed.files {
            let blob = self.blob(&file.sha256);
            if self.keep_named(&blob).await? {
                continue;
            }
            let path = safe_join(dir, relative)?;
            let content = std::fs::read(&path).map_err(|e| SharedStoreError::local(format!("reading {}", path.display()), e))?;
            self.objects.put(&blob, PutPayload::from(content)).await?;
        }
        self.objects.put(list, PutPayload::from(serde_json::to_vec(listed)?)).await?;
        Ok(())
    }

    /// Notes that a list about to be written names the content `blob`;
    /// true when the store holds it (so it need not be written). A content
    /// the sweep is removing is waited for, then written again.
    pub(crate) async fn keep_named(&self, blob: &object_store::path::Path) -> Result<bool, SharedStoreError> {
        let name = [blob.to_string()];
        let started = std::time::Instant::now();
        while !self.coordination.refer_packs(&name).await?.is_empty() {
            if started.elapsed() > std::time::Duration::from_secs(30) {
                return Err(SharedStoreError::corrupt(format!("{blob} stayed marked for removal")));
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        Ok(self.objects.head(blob).await.is_ok())
    }

    /// Makes `dir` hold exactly the files of the list at `list`: files
    /// already here with the same content are kept, others fetched, the
    /// rest removed. Returns the list.
    pub(crate) async fn restore(&self, list: &object_store::path::Path, dir: &Path) -> Result<FileList, SharedStoreError> {
        let bytes = self.objects.get(list).await?.bytes().await?;
        let listed: FileList = serde_json::from_slice(&bytes)?;
        std::fs::create_dir_all(dir).map_err(|e| SharedStoreError::local(format!("making {}", dir.display()), e))?;
        for (relative, path) in walk(dir)? {
            let wanted = listed.files.get(&relative);
            if wanted.is_none_or(|w| !same_content(&path, w)) {
                std::fs::remove_file(&path).map_err(|e| SharedStoreError::local(format!("removing {}", path.display()), e))?;
            }
        }
        for (relative, file) in &listed.files {
            let path = safe_join(dir, relative)?;
            if path.exists() {
                continue;
            }
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(|e| SharedStoreError::local(format!("making {}", parent.display()), e))?;
            }
            let content = self.objects.get(&self.blob(&file.sha256)).await?.bytes().await?;
            std::fs::write(&path, &content).map_err(|e| SharedStoreError::local(format!("writing {}", path.display()), e))?;
        }
        Ok(listed)
    }
}

/// Whether the file at `path` holds `file`'s content.
fn same_content(path: &Path, file: &ListedFile) -> bool {
    match std::fs::metadata(path) {
        Ok(meta) if meta.len() == file.size => std::fs::read(path).is_ok_and(|content| hex::encode(Sha256::digest(&content)) == file.sha256),
        _ => false,
    }
}

/// `relative` under `dir`, refused when it would leave it.
fn safe_join(dir: &Path, relative: &str) -> Result<PathBuf, SharedStoreError> {
    let path = Path::new(relative);
    let plain = path.components().all(|c| matches!(c, std::path::Component::Normal(_)));
    if !plain {
        return Err(SharedStoreError::local(format!("a stored file list names {relative:?}"), std::io::Error::from(std::io::ErrorKind::InvalidData)));
    }
    Ok(dir.join(path))
}

/// Every plain file under `dir`, by its path relative to it (`/`-separated);
/// links are not followed.
fn walk(dir: &Path) -> Result<Vec<(String, PathBuf)>, SharedStoreError> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_owned()];
    while let Some(current) = pending.pop() {
        let entries = match std::fs::read_dir(&current) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(SharedStoreError::local(format!("listing {}", current.display()), e)),
        };
        for entry in entries {
            let entry = entry.map_err(|e| SharedStoreError::local(format!("listing {}", current.display()), e))?;
            let kind = entry.file_type().map_err(|e| SharedStoreError::local(format!("reading {}", entry.path().display()), e))?;
            if kind.is_dir() {
                pending.push(entry.path());
            } else if kind.is_file()
                && let Ok(relative) = entry.path().strip_prefix(dir)
            {
                let relative = relative.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/");
                found.push((relative, entry.path()));
            }
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_never_leads_out_of_its_directory() {
        let dir = Path::new("/srv/home");
        assert_eq!(safe_join(dir, "a/b.txt").unwrap(), dir.join("a/b.txt"));
        assert!(safe_join(dir, "../etc/passwd").is_err());
        assert!(safe_join(dir, "/etc/passwd").is_err());
        assert!(safe_join(dir, "a/../../x").is_err());
    }
}
