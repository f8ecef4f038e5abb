//! A session directory as a tree, for clients that address files by path
//! rather than by flat name (E2B's filesystem API): stat, list to a depth,
//! make directories, write with parent directories and metadata, remove
//! and move. What it makes has the permissions a Linux user's files have
//! (0644 for a file, 0755 for a directory), whatever the host's umask.
//!
//! Every path is checked with [`names::relative_path`] before anything
//! touches the disk, and no component of it may be a symlink (code in the
//! session may have made one pointing anywhere), so a call never leaves the
//! session directory.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::directory::session_files::SessionFiles;
use crate::error::InterpreterError;
use crate::names;

/// What a tree entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    File,
    Directory,
}

/// One file or directory of a session's tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The last component (`""` for the session directory itself).
    pub name: String,
    /// Relative to the session directory (`""` for the directory itself).
    pub path: String,
    pub kind: EntryKind,
    pub size: u64,
    /// Permission bits, as `ls -l` shows them.
    pub mode: u32,
    pub modified: SystemTime,
    /// A file's metadata (see [`crate::directory::file_metadata`]); empty for a directory.
    pub metadata: BTreeMap<String, String>,
    /// Where a symbolic link points, as it was written (never followed by
    /// the host: it may name a path outside the tree); `None` for a file or
    /// a directory. A link is listed as a file.
    pub symlink_target: Option<String>,
}

/// What a file written by path is made with.
pub const FILE_MODE: u32 = 0o644;
/// What a directory made by path is made with.
pub const DIR_MODE: u32 = 0o755;

/// The most entries one listing returns.
pub const MAX_LISTED: usize = 10_000;

impl SessionFiles {
    /// The host path of `relative` (`""` or `.` is the session directory),
    /// checked: a valid relative path none of whose existing components is a
    /// symlink. The last component need not exist.
    pub fn resolve(&self, relative: &str) -> Result<PathBuf, InterpreterError> {
        let trimmed = relative.trim_end_matches('/');
        if trimmed.is_empty() || trimmed == "." {
            return Ok(self.dir().to_path_buf());
        }
        let rel = names::relative_path(trimmed)?;
        let mut path = self.dir().to_path_buf();
        for part in rel.components() {
            path.push(part);
            match fs::symlink_metadata(&path) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    return Err(InterpreterError::Invalid(format!("{relative:?} passes through a symbolic link; it is not followed")));
                }
                _ => {}
            }
        }
        Ok(path)
    }

    /// [`Self::resolve`], except that the last component may itself be a
    /// symlink: the path of the link, not of what it names.
    fn resolve_link(&self, relative: &str) -> Result<PathBuf, InterpreterError> {
        let trimmed = relative.trim_end_matches('/');
        match trimmed.rsplit_once('/') {
            _ if trimmed.is_empty() || trimmed == "." => Ok(self.dir().to_path_buf()),
            Some((parent, last)) => Ok(self.resolve(parent)?.join(names::relative_path(last)?)),
            None => Ok(self.dir().join(names::relative_path(trimmed)?)),
        }
    }

    /// The entry at `relative` (a symlink's own, when it is one).
    pub fn stat(&self, relative: &str) -> Result<Entry, InterpreterError> {
        let path = self.resolve_link(relative)?;
        self.entry(&path).ok_or_else(|| InterpreterError::NoSuchFile(relative.to_owned()))
    }

    /// The entries under the directory `relative`, `depth` levels deep (1:
    /// its children), directories before what they hold, at most
    /// [`MAX_LISTED`].
    pub fn list_dir(&self, relative: &str, depth: u32) -> Result<Vec<Entry>, InterpreterError> {
        let path = self.resolve(relative)?;
        match fs::symlink_metadata(&path) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => return Err(InterpreterError::Invalid(format!("{relative:?} is not a directory"))),
            Err(_) => return Err(InterpreterError::NoSuchFile(relative.to_owned())),
        }
        let mut found = Vec::new();
        self.walk(&path, depth.max(1), &mut found).map_err(|e| InterpreterError::io("listing a directory", e))?;
        Ok(found)
    }

    fn walk(&self, dir: &Path, depth: u32, found: &mut Vec<Entry>) -> std::io::Result<()> {
        let mut children: Vec<_> = fs::read_dir(dir)?.filter_map(Result::ok).collect();
        children.sort_by_key(|c| c.file_name());
        for child in children {
            if found.len() >= MAX_LISTED {
                return Ok(());
            }
            let path = child.path();
            let Some(entry) = self.entry(&path) else { continue };
            let is_dir = entry.kind == EntryKind::Directory;
            found.push(entry);
            if is_dir && depth > 1 {
                self.walk(&path, depth - 1, found)?;
            }
        }
        Ok(())
    }

    /// Makes the directory `relative` and its parents; false when it was
    /// already there.
    pub fn make_dir(&self, relative: &str) -> Result<bool, InterpreterError> {
        let path = self.resolve(relative)?;
        match fs::symlink_metadata(&path) {
            Ok(meta) if meta.is_dir() => return Ok(false),
            Ok(_) => return Err(InterpreterError::Exists(relative.to_owned())),
            Err(_) => {}
        }
        make_dirs(self.dir(), &path)?;
        Ok(true)
    }

    /// Writes `bytes` at `relative` with `metadata`, replacing a file there
    /// (and its metadata) and making the parent directories, as an upload
    /// is written.
    pub fn write_path(&self, relative: &str, bytes: &[u8], metadata: &BTreeMap<String, String>) -> Result<Entry, InterpreterError> {
        crate::directory::file_metadata::check(metadata)?;
        let path = self.resolve(relative)?;
        if path == self.dir() || fs::symlink_metadata(&path).is_ok_and(|m| !m.is_file()) {
            return Err(InterpreterError::NotAFile(relative.to_owned()));
        }
        let parent = path.parent().unwrap_or(self.dir());
        make_dirs(self.dir(), parent)?;
        crate::directory::session_files::write_replacing_as(&path, bytes, FILE_MODE, |new| crate::directory::file_metadata::write(new, metadata))?;
        self.stat(relative)
    }

    /// Removes the file or the whole directory at `relative`; the session
    /// directory itself is refused.
    pub fn remove(&self, relative: &str) -> Result<(), InterpreterError> {
        // A symlink itself may be removed (never what it names).
        let link = self.resolve_link(relative)?;
        if fs::symlink_metadata(&link).is_ok_and(|m| m.file_type().is_symlink()) {
            return fs::remove_file(&link).map_err(|e| InterpreterError::io("removing", e));
        }
        let path = self.resolve(relative)?;
        if path == self.dir() {
            return Err(InterpreterError::Invalid("the session directory itself cannot be removed".to_owned()));
        }
        let meta = fs::symlink_metadata(&path).map_err(|_| InterpreterError::NoSuchFile(relative.to_owned()))?;
        let removed = if meta.is_dir() { fs::remove_dir_all(&path) } else { fs::remove_file(&path) };
        removed.map_err(|e| InterpreterError::io("removing", e))
    }

    /// Moves `from` to `to` (replacing a file there), making `to`'s parents.
    pub fn move_path(&self, from: &str, to: &str) -> Result<Entry, InterpreterError> {
        let source = self.resolve(from)?;
        let target = self.resolve(to)?;
        if source == self.dir() || target == self.dir() {
            return Err(InterpreterError::Invalid("the session directory itself cannot be moved or replaced".to_owned()));
        }
        fs::symlink_metadata(&source).map_err(|_| InterpreterError::NoSuchFile(from.to_owned()))?;
        if let Some(parent) = target.parent() {
            make_dirs(self.dir(), parent)?;
        }
        fs::rename(&source, &target).map_err(|e| InterpreterError::io("moving", e))?;
        self.stat(to)
    }

    /// The entry at a host path inside the directory (a symlink's own);
    /// None for a special file or a path that is gone.
    fn entry(&self, path: &Path) -> Option<Entry> {
        let meta = fs::symlink_metadata(path).ok()?;
        let symlink_target = if meta.file_type().is_symlink() { Some(fs::read_link(path).ok()?.to_string_lossy().into_owned()) } else { None };
        let kind = if meta.is_dir() {
            EntryKind::Directory
        } else if meta.is_file() || symlink_target.is_some() {
            EntryKind::File
        } else {
            return None;
        };
        let relative = path.strip_prefix(self.dir()).ok()?.to_string_lossy().into_owned();
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let name = if relative.is_empty() { String::new() } else { name };
        Some(Entry {
            name,
            path: relative,
            kind,
            size: meta.len(),
            mode: meta.permissions().mode() & 0o777,
            modified: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
            metadata: if meta.is_file() { crate::directory::file_metadata::read(path) } else { BTreeMap::new() },
            symlink_target,
        })
    }
}

/// Makes `path` and the directories above it, up to `root`, each missing
/// one with [`DIR_MODE`].
fn make_dirs(root: &Path, path: &Path) -> Result<(), InterpreterError> {
    let io = |e| InterpreterError::io("making a directory", e);
    let mut missing = Vec::new();
    let mut at = path;
    while at != root && fs::symlink_metadata(at).is_err() {
        missing.push(at);
        match at.parent() {
            Some(parent) => at = parent,
            None => break,
        }
    }
    for dir in missing.into_iter().rev() {
        match fs::create_dir(dir) {
            Ok(()) => fs::set_permissions(dir, fs::Permissions::from_mode(DIR_MODE)).map_err(io)?,
            // Made by someone else (a cell, another call) in between.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io(e)),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files() -> (tempfile::TempDir, SessionFiles) {
        let dir = tempfile::tempdir().expect("a temp dir");
        let files = SessionFiles::new(dir.path().to_path_buf());
        (dir, files)
    }

    #[test]
    fn a_tree_is_written_listed_moved_and_removed_by_path() {
        let (_dir, files) = files();
        files.write_path("src/app/main.py", b"print(1)", &BTreeMap::new()).expect("written with parents");
        assert!(files.make_dir("docs").expect("made"));
        assert!(!files.make_dir("docs").expect("already there"));
        let shallow: Vec<String> = files.list_dir("", 1).expect("listed").into_iter().map(|e| e.path).collect();
        assert_eq!(shallow, ["docs", "src"]);
        let deep: Vec<String> = files.list_dir("", 3).expect("listed").into_iter().map(|e| e.path).collect();
        assert_eq!(deep, ["docs", "src", "src/app", "src/app/main.py"]);
        let moved = files.move_path("src/app/main.py", "docs/main.py").expect("moved");
        assert_eq!((moved.kind, moved.size, moved.name.as_str()), (EntryKind::File, 8, "main.py"));
        files.remove("src").expect("a whole directory removed");
        assert!(matches!(files.stat("src/app"), Err(InterpreterError::NoSuchFile(_))));
        assert_eq!(files.stat("").expect("the root").kind, EntryKind::Directory);
    }

    /// What a write makes has a user's permissions whatever the umask, and
    /// its metadata: kept on a move, gone when the file is written again.
    #[test]
    fn writes_make_user_modes_and_keep_metadata_until_rewritten() {
        let (_dir, files) = files();
        let metadata: BTreeMap<String, String> = [("author".to_owned(), "mish".to_owned())].into();
        let written = files.write_path("a/b/c.txt", b"x", &metadata).expect("written");
        assert_eq!((written.mode, written.metadata.clone()), (FILE_MODE, metadata.clone()));
        for dir in ["a", "a/b"] {
            assert_eq!(files.stat(dir).expect("a folder").mode, DIR_MODE, "{dir}");
        }
        assert!(files.make_dir("m/n").expect("made"));
        assert_eq!(files.stat("m").expect("a folder").mode, DIR_MODE);
        assert_eq!(files.move_path("a/b/c.txt", "d.txt").expect("moved").metadata, metadata);
        let listed = files.list_dir("", 1).expect("listed");
        assert_eq!(listed.iter().find(|e| e.path == "d.txt").map(|e| e.metadata.clone()), Some(metadata));
        assert!(files.write_path("d.txt", b"y", &BTreeMap::new()).expect("rewritten").metadata.is_empty());
    }

    /// Boundary: a client path never leaves the session directory, through
    /// `..` or through a symlink the session's code made.
    #[test]
    fn paths_out_of_the_directory_are_refused() {
        let (dir, files) = files();
        let outside = tempfile::tempdir().expect("another dir");
        std::fs::write(outside.path().join("secret"), b"s").expect("written");
        std::os::unix::fs::symlink(outside.path(), dir.path().join("escape")).expect("a symlink");
        for path in ["../x", "a/../../x", "/etc/passwd", "escape/secret"] {
            assert!(files.stat(path).is_err(), "{path}");
            assert!(files.write_path(path, b"x", &BTreeMap::new()).is_err(), "{path}");
            assert!(files.remove(path).is_err(), "{path}");
        }
        assert!(files.write_path("escape", b"x", &BTreeMap::new()).is_err(), "a write through the link");
        assert!(files.list_dir("escape", 1).is_err());
        assert!(files.move_path("escape/secret", "got").is_err());
        // The link itself is seen as a link (never followed), and removing it removes only it.
        let link = files.stat("escape").expect("the link's own entry");
        assert_eq!((link.kind, link.size > 0, link.symlink_target.as_deref()), (EntryKind::File, true, outside.path().to_str()));
        files.remove("escape").expect("the link removed");
        assert!(!dir.path().join("escape").exists());
        assert!(outside.path().join("secret").exists(), "nothing outside was touched");
        assert!(files.remove("").is_err(), "the root stays");
    }
}
