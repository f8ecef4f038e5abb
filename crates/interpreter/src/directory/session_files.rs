//! A session's files on the host: the directory its code sees at /mnt/data.
//!
//! Code may leave symlinks behind; the host never follows one. Every read,
//! write and delete works on a path checked by [`crate::names`], and refuses
//! anything that is not a plain file or directory on the way.

use std::fs;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

pub use anypath_wire::FileInfo;

use crate::error::InterpreterError;
use crate::names;

/// What the code sees as the session directory.
pub const GUEST_DIR: &str = "/mnt/data";

/// The files of one session directory.
#[derive(Debug, Clone)]
pub struct SessionFiles {
    dir: PathBuf,
}

impl SessionFiles {
    /// The files under `dir` (which must exist).
    pub fn new(dir: PathBuf) -> Self {
        Self { dir }
    }

    /// The host directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Writes `bytes` as `filename` (a plain name); an existing file is
    /// replaced only with `overwrite`.
    pub fn write(&self, filename: &str, bytes: &[u8], overwrite: bool) -> Result<FileInfo, InterpreterError> {
        let name = names::filename(filename)?;
        let path = self.dir.join(name);
        if let Ok(meta) = fs::symlink_metadata(&path) {
            if !meta.is_file() {
                return Err(InterpreterError::NotAFile(name.to_owned()));
            }
            if !overwrite {
                return Err(InterpreterError::Exists(name.to_owned()));
            }
        }
        write_replacing(&path, bytes)?;
        Ok(info(name.to_owned(), bytes.len() as u64))
    }

    /// The file at `relative` (a path inside the directory).
    pub fn read(&self, relative: &str) -> Result<(FileInfo, Vec<u8>), InterpreterError> {
        let (rel, path) = self.plain_file(relative)?;
        let bytes = fs::OpenOptions::new()
            .read(true)
            .custom_flags(O_NOFOLLOW)
            .open(&path)
            .and_then(|mut f| {
                let mut buf = Vec::new();
                std::io::Read::read_to_end(&mut f, &mut buf)?;
                Ok(buf)
            })
            .map_err(|e| InterpreterError::io("reading the file", e))?;
        Ok((info(rel, bytes.len() as u64), bytes))
    }

    /// The host path of the plain file at `relative`, checked like [`Self::read`].
    pub fn host_path(&self, relative: &str) -> Result<(FileInfo, PathBuf), InterpreterError> {
        let (rel, path) = self.plain_file(relative)?;
        let size = fs::symlink_metadata(&path).map_err(|e| InterpreterError::io("reading the file", e))?.len();
        Ok((info(rel, size), path))
    }

    /// Removes the file at `relative`.
    pub fn delete(&self, relative: &str) -> Result<(), InterpreterError> {
        let (_, path) = self.plain_file(relative)?;
        fs::remove_file(&path).map_err(|e| InterpreterError::io("deleting the file", e))
    }

    /// Every plain file, depth first, sorted by name. Symlinks and other
    /// special files the code made are not listed.
    pub fn list(&self) -> Result<Vec<FileInfo>, InterpreterError> {
        let mut found = Vec::new();
        walk(&self.dir, String::new(), &mut found).map_err(|e| InterpreterError::io("listing the files", e))?;
        found.sort_by(|a, b| a.filename.cmp(&b.filename));
        Ok(found)
    }

    /// Checks every component of `relative` is a directory or, last, a plain file.
    fn plain_file(&self, relative: &str) -> Result<(String, PathBuf), InterpreterError> {
        let rel = names::relative_path(relative)?;
        let mut path = self.dir.clone();
        let parts: Vec<_> = rel.components().collect();
        for (i, part) in parts.iter().enumerate() {
            path.push(part);
            let last = i + 1 == parts.len();
            match fs::symlink_metadata(&path) {
                Ok(meta) if last && meta.is_file() => {}
                Ok(meta) if !last && meta.is_dir() => {}
                Ok(_) => return Err(InterpreterError::NotAFile(relative.to_owned())),
                Err(_) => return Err(InterpreterError::NoSuchFile(relative.to_owned())),
            }
        }
        Ok((rel.to_string_lossy().into_owned(), path))
    }
}

/// A session file as a client sees it.
pub(crate) fn info(filename: String, size_bytes: u64) -> FileInfo {
    FileInfo { path: format!("{GUEST_DIR}/{filename}"), filename, size_bytes }
}

fn walk(dir: &Path, prefix: String, found: &mut Vec<FileInfo>) -> std::io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".partial") && name.starts_with('.') {
            continue;
        }
        let rel = if prefix.is_empty() { name } else { format!("{prefix}/{name}") };
        let kind = entry.file_type()?;
        if kind.is_dir() {
            walk(&entry.path(), rel, found)?;
        } else if kind.is_file() {
            found.push(info(rel, entry.metadata()?.len()));
        }
    }
    Ok(())
}

/// `O_NOFOLLOW`: the last component is checked before opening, and a symlink
/// swapped in between the check and the open still fails here.
#[cfg(target_os = "linux")]
pub(crate) const O_NOFOLLOW: i32 = 0o400000;
#[cfg(not(target_os = "linux"))]
pub(crate) const O_NOFOLLOW: i32 = 0x0100;

/// Writes `bytes` to `path` (replacing a file there) beside it and renames
/// it over: a reader never sees half a file.
pub(crate) fn write_replacing(path: &Path, bytes: &[u8]) -> Result<(), InterpreterError> {
    write_replacing_as(path, bytes, 0o600, |_| Ok(()))
}

/// [`write_replacing`] with the file's permission bits (whatever the
/// process's umask), and `finish` done on the new file before it takes
/// its place (its metadata, so no reader sees it without).
pub(crate) fn write_replacing_as(path: &Path, bytes: &[u8], mode: u32, finish: impl FnOnce(&Path) -> Result<(), InterpreterError>) -> Result<(), InterpreterError> {
    use std::os::unix::fs::PermissionsExt;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let partial = path.with_file_name(format!(".{name}.{}.partial", uuid::Uuid::new_v4().simple()));
    let written = (|| {
        let mut file = fs::OpenOptions::new().write(true).create_new(true).mode(mode).open(&partial).map_err(|e| InterpreterError::io("writing the file", e))?;
        let io = |e| InterpreterError::io("writing the file", e);
        file.set_permissions(fs::Permissions::from_mode(mode)).map_err(io)?;
        file.write_all(bytes).map_err(io)?;
        file.sync_all().map_err(io)?;
        finish(&partial)?;
        fs::rename(&partial, path).map_err(io)
    })();
    if written.is_err() {
        let _ = fs::remove_file(&partial);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The files of a fresh directory, which is removed when the returned
    /// `TempDir` is dropped.
    fn temp(name: &str) -> (tempfile::TempDir, SessionFiles) {
        let dir = tempfile::Builder::new().prefix(&format!("anypath-files-{name}-")).tempdir().unwrap();
        let files = SessionFiles::new(dir.path().to_path_buf());
        (dir, files)
    }

    #[test]
    fn write_read_list_delete_round_trip() {
        let (_dir, files) = temp("round");
        let binary: Vec<u8> = (0..=255).collect();
        assert_eq!(files.write("b.bin", &binary, false).unwrap().size_bytes, 256);
        files.write("a.txt", b"hello", false).unwrap();
        assert_eq!(files.read("b.bin").unwrap().1, binary);
        assert!(matches!(files.write("a.txt", b"x", false), Err(InterpreterError::Exists(_))));
        files.write("a.txt", b"bye", true).unwrap();
        assert_eq!(files.read("/mnt/data/a.txt").unwrap().1, b"bye");
        let names: Vec<String> = files.list().unwrap().into_iter().map(|f| f.filename).collect();
        assert_eq!(names, ["a.txt", "b.bin"]);
        files.delete("a.txt").unwrap();
        assert!(matches!(files.read("a.txt"), Err(InterpreterError::NoSuchFile(_))));
    }

    /// Boundary: the host side of the session directory never follows a
    /// symlink the code planted.
    #[test]
    fn symlinks_are_neither_read_listed_nor_written_through() {
        let (_dir, files) = temp("links");
        std::os::unix::fs::symlink("/etc/hostname", files.dir().join("link")).unwrap();
        assert!(matches!(files.read("link"), Err(InterpreterError::NotAFile(_))));
        assert!(matches!(files.write("link", b"x", true), Err(InterpreterError::NotAFile(_))));
        assert!(files.list().unwrap().is_empty());
        std::os::unix::fs::symlink("/etc", files.dir().join("dir")).unwrap();
        assert!(matches!(files.read("dir/hostname"), Err(InterpreterError::NotAFile(_))));
    }
}
