//! The session's tree as bashkit sees it: WASI's filesystem, where every
//! path resolves below the host's preopens (the session's `/` and `/data`)
//! and `..` or a symlink cannot leave them (wasmtime refuses it).
//!
//! Symlinks are followed as a POSIX system follows them; the sandbox, not
//! this module, is what keeps them inside the tree.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use bashkit::{DirEntry, FileSystem, FileSystemExt, FileType, Metadata, Result};

/// The preopened tree; stateless, since WASI holds the handles.
pub(crate) struct Tree;

/// WASI keeps no permission bits (a read-only preopen such as `/data` refuses
/// writes by itself): these are what a Linux user's files show.
const FILE_MODE: u32 = 0o644;
const DIRECTORY_MODE: u32 = 0o755;
const SYMLINK_MODE: u32 = 0o777;

fn metadata_of(meta: &std::fs::Metadata) -> Metadata {
    let (file_type, mode) = if meta.file_type().is_symlink() {
        (FileType::Symlink, SYMLINK_MODE)
    } else if meta.is_dir() {
        (FileType::Directory, DIRECTORY_MODE)
    } else {
        (FileType::File, FILE_MODE)
    };
    let modified = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
    Metadata { file_type, size: meta.len(), mode, modified, created: meta.created().unwrap_or(modified) }
}

impl FileSystemExt for Tree {}

#[bashkit::async_trait]
impl FileSystem for Tree {
    async fn read_file(&self, path: &Path) -> Result<Vec<u8>> {
        Ok(std::fs::read(path)?)
    }

    async fn write_file(&self, path: &Path, content: &[u8]) -> Result<()> {
        Ok(std::fs::write(path, content)?)
    }

    async fn append_file(&self, path: &Path, content: &[u8]) -> Result<()> {
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new().append(true).create(true).open(path)?;
        Ok(file.write_all(content)?)
    }

    async fn mkdir(&self, path: &Path, recursive: bool) -> Result<()> {
        if recursive { Ok(std::fs::create_dir_all(path)?) } else { Ok(std::fs::create_dir(path)?) }
    }

    async fn remove(&self, path: &Path, recursive: bool) -> Result<()> {
        let meta = std::fs::symlink_metadata(path)?;
        if !meta.is_dir() {
            Ok(std::fs::remove_file(path)?)
        } else if recursive {
            Ok(std::fs::remove_dir_all(path)?)
        } else {
            Ok(std::fs::remove_dir(path)?)
        }
    }

    async fn stat(&self, path: &Path) -> Result<Metadata> {
        Ok(metadata_of(&std::fs::metadata(path)?))
    }

    async fn lstat(&self, path: &Path) -> Result<Metadata> {
        Ok(metadata_of(&std::fs::symlink_metadata(path)?))
    }

    async fn read_dir(&self, path: &Path) -> Result<Vec<DirEntry>> {
        let mut entries = Vec::new();
        for entry in std::fs::read_dir(path)? {
            let entry = entry?;
            // `ls -l` shows a symlink as one: its own metadata, not its
            // target's (a `DirEntry`'s is, read by name from the directory
            // already open, without resolving the whole path again).
            let metadata = metadata_of(&entry.metadata()?);
            entries.push(DirEntry { name: entry.file_name().to_string_lossy().into_owned(), metadata });
        }
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(entries)
    }

    async fn exists(&self, path: &Path) -> Result<bool> {
        Ok(std::fs::symlink_metadata(path).is_ok())
    }

    async fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        Ok(std::fs::rename(from, to)?)
    }

    async fn copy(&self, from: &Path, to: &Path) -> Result<()> {
        std::fs::copy(from, to)?;
        Ok(())
    }

    async fn symlink(&self, target: &Path, link: &Path) -> Result<()> {
        // `std::fs::soft_link` is the one stable way to make a symlink on WASI.
        #[allow(deprecated)]
        Ok(std::fs::soft_link(target, link)?)
    }

    async fn read_link(&self, path: &Path) -> Result<PathBuf> {
        Ok(std::fs::read_link(path)?)
    }

    async fn chmod(&self, _path: &Path, _mode: u32) -> Result<()> {
        // WASI has no permission bits; `chmod +x` succeeds and changes nothing.
        Ok(())
    }

    async fn set_modified_time(&self, path: &Path, time: SystemTime) -> Result<()> {
        let file = std::fs::File::options().write(true).open(path).or_else(|_| std::fs::File::open(path))?;
        Ok(file.set_modified(time)?)
    }
}
