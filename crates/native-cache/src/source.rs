//! A component file and its SHA-256, which is remembered beside the cache
//! by the file's identity: a start then finds its artifacts without reading
//! and hashing the runtimes again (the data runtime alone is 190 MB, and
//! reading and hashing it was nearly half the CPU of an `anypath up` start).

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, UNIX_EPOCH};

use sha2::{Digest, Sha256};

use crate::{CacheError, read, write_atomically};

/// A component file, its digest, and its bytes once they had to be read.
pub struct Source {
    path: PathBuf,
    digest: [u8; 32],
    bytes: Option<Vec<u8>>,
}

impl Source {
    /// The component at `path`: its digest from the note in `cache_dir`
    /// when the file is still the one the note was taken from, otherwise
    /// read, hashed and noted for the next time.
    pub fn open(path: &Path, cache_dir: &Path) -> Result<Self, CacheError> {
        let unreadable = |source| CacheError::ReadComponent { path: path.to_path_buf(), source };
        let identity = Identity::of(path).map_err(unreadable)?;
        let note = cache_dir.join(format!("{}-{}.digest", stem(path), hex::encode(&Sha256::digest(path.as_os_str().as_encoded_bytes())[..4])));
        if let Some(digest) = noted_digest(&note, &identity) {
            return Ok(Self { path: path.to_path_buf(), digest, bytes: None });
        }
        let bytes = read(path)?;
        let digest: [u8; 32] = Sha256::digest(&bytes).into();
        // Noted only if the file did not change while it was read. A cache
        // directory that cannot be written only costs the next start a read.
        if Identity::of(path).is_ok_and(|after| after == identity)
            && let Err(error) = write_atomically(&note, format!("{}\n{}\n", identity.line(), hex::encode(digest)).as_bytes())
        {
            tracing::debug!(%error, "the component's digest is not noted");
        }
        Ok(Self { path: path.to_path_buf(), digest, bytes: Some(bytes) })
    }

    /// The file's name without its extension, which the artifacts' names begin with.
    pub fn stem(&self) -> &str {
        stem(&self.path)
    }

    /// The cache key of this component compiled by `engine`.
    pub fn key(&self, engine: &wasmtime::Engine) -> String {
        crate::key_of_digest(engine, &self.digest)
    }

    /// The component's bytes, read now if they were not read to hash them.
    pub fn into_bytes(self) -> Result<Vec<u8>, CacheError> {
        match self.bytes {
            Some(bytes) => Ok(bytes),
            None => read(&self.path),
        }
    }
}

fn stem(path: &Path) -> &str {
    path.file_stem().and_then(|s| s.to_str()).unwrap_or("component")
}

/// What tells a file's contents apart without reading them. A write in
/// place changes the change time (which, unlike the modification time, no
/// copy can preserve); a replacement by rename changes the inode.
#[derive(Debug, PartialEq, Eq)]
struct Identity {
    path: PathBuf,
    device: u64,
    inode: u64,
    len: u64,
    modified: (i64, i64),
    changed: (i64, i64),
}

impl Identity {
    fn of(path: &Path) -> std::io::Result<Self> {
        let meta = std::fs::metadata(path)?;
        Ok(Self {
            path: path.to_path_buf(),
            device: meta.dev(),
            inode: meta.ino(),
            len: meta.len(),
            modified: (meta.mtime(), meta.mtime_nsec()),
            changed: (meta.ctime(), meta.ctime_nsec()),
        })
    }

    /// The note's first line.
    fn line(&self) -> String {
        let Self { path, device, inode, len, modified, changed } = self;
        format!("{device} {inode} {len} {}.{} {}.{} {}", modified.0, modified.1, changed.0, changed.1, path.display())
    }
}

/// How long after a file's last change its note must have been written to
/// be believed. File times tick coarsely (a clock tick on Linux, a second on
/// some file systems), so a file rewritten in the tick it was hashed in
/// could keep its identity; as git does for its index, such a note is not
/// believed, and the file is hashed again until the window has passed.
const RACY_WINDOW: Duration = Duration::from_secs(1);

/// The digest in `note`, if the note was taken from the file `identity`
/// names, well after the file last changed.
fn noted_digest(note: &Path, identity: &Identity) -> Option<[u8; 32]> {
    let noted_at = std::fs::metadata(note).and_then(|m| m.modified()).ok()?;
    let changed_at = UNIX_EPOCH.checked_add(Duration::new(u64::try_from(identity.changed.0).ok()?, u32::try_from(identity.changed.1).ok()?))?;
    if noted_at.duration_since(changed_at).ok()? < RACY_WINDOW {
        return None;
    }
    let text = std::fs::read_to_string(note).ok()?;
    let (line, digest) = text.split_once('\n')?;
    if line != identity.line() {
        return None;
    }
    hex::decode(digest.trim()).ok()?.try_into().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note_in(cache: &Path) -> PathBuf {
        let notes: Vec<_> = std::fs::read_dir(cache)
            .expect("the cache directory")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "digest"))
            .collect();
        assert_eq!(notes.len(), 1, "one note: {notes:?}");
        notes[0].clone()
    }

    /// A scratch directory with `runtime.wasm` holding `bytes`, changed
    /// longer ago than the racy window: (directory, file, cache).
    fn scratch(bytes: &[u8]) -> (tempfile::TempDir, PathBuf, PathBuf) {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let (path, cache) = (dir.path().join("runtime.wasm"), dir.path().join("cache"));
        std::fs::write(&path, bytes).expect("the file is written");
        std::thread::sleep(RACY_WINDOW + Duration::from_millis(50));
        (dir, path, cache)
    }

    #[test]
    fn a_noted_file_is_not_read_again() {
        let (_dir, path, cache) = scratch(b"the runtime");
        let first = Source::open(&path, &cache).expect("the first open reads the file");
        assert!(first.bytes.is_some(), "the first open read the file to hash it");
        let second = Source::open(&path, &cache).expect("the second open");
        assert!(second.bytes.is_none(), "the second open took the digest from the note");
        assert_eq!(first.digest, second.digest);
        // The note is what the digest came from: one that says otherwise is believed.
        let note = note_in(&cache);
        let text = std::fs::read_to_string(&note).expect("the note");
        let (line, _) = text.split_once('\n').expect("two lines");
        std::fs::write(&note, format!("{line}\n{}\n", "ab".repeat(32))).expect("the note is rewritten");
        let believed = Source::open(&path, &cache).expect("the third open");
        assert_eq!(believed.digest, [0xab; 32], "the digest came from the note, not from the file");
    }

    #[test]
    fn a_rewritten_file_is_hashed_again_even_with_its_old_size_and_time() {
        let (_dir, path, cache) = scratch(b"the runtime, one");
        let before = Source::open(&path, &cache).expect("the first open");
        let modified = std::fs::metadata(&path).and_then(|m| m.modified()).expect("its time");
        // As `cp -p` would: other bytes of the same length, the old modification time.
        std::fs::write(&path, b"the runtime, two").expect("the file is rewritten");
        std::fs::File::options().write(true).open(&path).and_then(|f| f.set_modified(modified)).expect("its old time is set");
        let after = Source::open(&path, &cache).expect("the second open");
        assert!(after.bytes.is_some(), "the rewritten file was read");
        assert_ne!(before.digest, after.digest, "and hashed again");
        assert_eq!(after.digest, <[u8; 32]>::from(Sha256::digest(b"the runtime, two")));
        let again = Source::open(&path, &cache).expect("the third open");
        assert!(again.bytes.is_some() && again.digest == after.digest, "within the racy window of the rewrite, hashed again");
    }

    #[test]
    fn a_note_taken_in_the_tick_the_file_changed_is_not_believed() {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let (path, cache) = (dir.path().join("runtime.wasm"), dir.path().join("cache"));
        std::fs::write(&path, b"the runtime").expect("the file is written");
        Source::open(&path, &cache).expect("the first open, right after the write");
        let second = Source::open(&path, &cache).expect("the second open");
        assert!(second.bytes.is_some(), "a note written within the racy window is not believed");
    }

    #[test]
    fn a_replaced_file_is_hashed_again() {
        let (dir, path, cache) = scratch(b"the runtime, one");
        Source::open(&path, &cache).expect("the first open");
        let replacement = dir.path().join("new.wasm");
        std::fs::write(&replacement, b"the runtime, two").expect("the replacement is written");
        std::fs::rename(&replacement, &path).expect("the file is replaced");
        let after = Source::open(&path, &cache).expect("the second open");
        assert_eq!(after.digest, <[u8; 32]>::from(Sha256::digest(b"the runtime, two")), "the replacement was hashed");
    }
}
