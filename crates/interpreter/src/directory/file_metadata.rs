//! A file's metadata as E2B's envd keeps it: string pairs in the file's
//! extended attributes, under `user.e2b.`. Being the file's own, they move
//! with it on a rename and go with the file a write replaces (a write puts
//! a new file in place), exactly as envd's do; and code that rewrites the
//! file in place keeps them.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::error::InterpreterError;

/// The attribute namespace the pairs live in.
const PREFIX: &str = "user.e2b.";
/// The most bytes of metadata (keys and values) one file may carry.
pub const MAX_METADATA_BYTES: usize = 4096;

/// Checks `metadata` before anything is written: keys are HTTP header
/// tokens (they travel as `X-Metadata-<key>` headers), values printable ASCII.
pub fn check(metadata: &BTreeMap<String, String>) -> Result<(), InterpreterError> {
    let token = |c: u8| c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&c);
    let mut total = 0;
    for (key, value) in metadata {
        if key.is_empty() || !key.bytes().all(token) {
            return Err(InterpreterError::Invalid(format!("metadata key {key:?} must be letters, digits or !#$%&'*+-.^_`|~")));
        }
        if !value.bytes().all(|c| (0x20..=0x7e).contains(&c)) {
            return Err(InterpreterError::Invalid(format!("the value of metadata key {key:?} must be printable ASCII")));
        }
        total += key.len() + value.len();
    }
    if total > MAX_METADATA_BYTES {
        return Err(InterpreterError::Invalid(format!("a file's metadata may hold {MAX_METADATA_BYTES} bytes, not {total}")));
    }
    Ok(())
}

/// Writes `metadata` on the file at `path` (not following a symlink).
pub(crate) fn write(path: &Path, metadata: &BTreeMap<String, String>) -> Result<(), InterpreterError> {
    let file = c_path(path)?;
    for (key, value) in metadata {
        let name = CString::new(format!("{PREFIX}{key}")).map_err(|_| InterpreterError::Invalid(format!("metadata key {key:?} holds NUL")))?;
        // SAFETY: both strings are NUL-terminated and live through the call;
        // the value is read for exactly its length.
        let set = unsafe { libc::lsetxattr(file.as_ptr(), name.as_ptr(), value.as_ptr().cast(), value.len(), 0) };
        if set != 0 {
            return Err(InterpreterError::io("keeping a file's metadata", std::io::Error::last_os_error()));
        }
    }
    Ok(())
}

/// The metadata of the file at `path`; empty when it has none (or its
/// filesystem keeps no extended attributes).
pub(crate) fn read(path: &Path) -> BTreeMap<String, String> {
    let Ok(file) = c_path(path) else { return BTreeMap::new() };
    let names = attribute_bytes(|buf, len| unsafe {
        // SAFETY: `buf` holds `len` writable bytes (or is null with len 0).
        libc::llistxattr(file.as_ptr(), buf.cast(), len)
    });
    let mut found = BTreeMap::new();
    for name in names.split(|&b| b == 0).filter(|n| !n.is_empty()) {
        let Some(key) = std::str::from_utf8(name).ok().and_then(|n| n.strip_prefix(PREFIX)) else { continue };
        let Ok(c_name) = CString::new(name) else { continue };
        let value = attribute_bytes(|buf, len| unsafe {
            // SAFETY: as above; both names are NUL-terminated.
            libc::lgetxattr(file.as_ptr(), c_name.as_ptr(), buf.cast(), len)
        });
        if let Ok(value) = String::from_utf8(value) {
            found.insert(key.to_owned(), value);
        }
    }
    found
}

/// The bytes a size-then-fill xattr call gives (empty on any error). The
/// size is asked first; a list that grew in between is asked once more.
fn attribute_bytes(call: impl Fn(*mut u8, usize) -> libc::ssize_t) -> Vec<u8> {
    for _ in 0..2 {
        let size = call(std::ptr::null_mut(), 0);
        let Ok(size) = usize::try_from(size) else { return Vec::new() };
        if size == 0 {
            return Vec::new();
        }
        let mut buf = vec![0u8; size];
        if let Ok(got) = usize::try_from(call(buf.as_mut_ptr(), buf.len())) {
            buf.truncate(got);
            return buf;
        }
    }
    Vec::new()
}

fn c_path(path: &Path) -> Result<CString, InterpreterError> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| InterpreterError::Invalid("a path holds NUL".to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_is_kept_on_the_file_and_checked_before() {
        let dir = tempfile::tempdir().expect("a directory");
        let path = dir.path().join("a.txt");
        std::fs::write(&path, b"x").expect("written");
        assert!(read(&path).is_empty());
        let pairs: BTreeMap<String, String> = [("author".to_owned(), "mish".to_owned()), ("purpose".to_owned(), "upload".to_owned())].into();
        write(&path, &pairs).expect("kept");
        assert_eq!(read(&path), pairs);
        std::fs::rename(&path, dir.path().join("b.txt")).expect("moved");
        assert_eq!(read(&dir.path().join("b.txt")), pairs, "a rename keeps it");
        for bad in [("bad key", "v"), ("", "v"), ("good", "bad\nvalue")] {
            let one: BTreeMap<String, String> = [(bad.0.to_owned(), bad.1.to_owned())].into();
            assert!(check(&one).is_err(), "{bad:?}");
        }
        assert!(check(&pairs).is_ok());
    }
}
