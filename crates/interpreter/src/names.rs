//! What a client may call a session, a tenant and a file. Checked before
//! anything touches the disk, so a name can never leave its directory.

/// Longest session id.
pub const MAX_SESSION_ID: usize = 64;
/// Longest file name, in bytes (what common filesystems allow).
pub const MAX_FILENAME_BYTES: usize = 255;

/// A name was refused; the message says which rule it broke.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("session_id must be 1 to {MAX_SESSION_ID} characters of A-Z, a-z, 0-9, '-' and '_', not {0:?}")]
    SessionId(String),
    #[error("tenant must be 1 to 64 characters of A-Z, a-z, 0-9, '-' and '_', not {0:?}")]
    Tenant(String),
    #[error("filename {name:?} is refused: {reason}")]
    Filename { name: String, reason: &'static str },
    #[error("session ids starting with \"{HIDDEN_PREFIX}\" are kept for the service's own sessions (snapshots), not {0:?}")]
    Reserved(String),
    #[error("run_id must be 1 to 64 characters of A-Z, a-z, 0-9, '-' and '_', not {0:?}")]
    RunId(String),
    #[error("dataset name must be 1 to 128 characters of A-Z, a-z, 0-9, '-', '_' and '.', not starting with '.', not {0:?}")]
    Dataset(String),
}

fn small_alphabet(value: &str, max: usize) -> bool {
    (1..=max).contains(&value.len()) && value.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// A new random id of 20 lowercase letters and digits (about 103 bits), in
/// the form E2B gives its sandboxes' and snapshots' ids: every id the
/// service makes up for a client (sandboxes, snapshots) is one of these.
pub fn new_short_id() -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let (a, b) = (uuid::Uuid::new_v4().into_bytes(), uuid::Uuid::new_v4().into_bytes());
    a.iter().chain(b.iter()).take(20).map(|byte| ALPHABET[usize::from(*byte) % ALPHABET.len()] as char).collect()
}

/// A run id a client chose: `[A-Za-z0-9_-]{1,64}`, as a session id.
pub fn run_id(value: &str) -> Result<&str, NameError> {
    if small_alphabet(value, 64) { Ok(value) } else { Err(NameError::RunId(value.to_owned())) }
}

/// A session id: `[A-Za-z0-9_-]{1,64}`.
pub fn session_id(value: &str) -> Result<&str, NameError> {
    if small_alphabet(value, MAX_SESSION_ID) { Ok(value) } else { Err(NameError::SessionId(value.to_owned())) }
}

/// Session ids the service keeps for sessions of its own, which no client
/// opens, runs in or names as a fork's target: a snapshot's stored state is
/// the session `__snapshot_<id>` of its tenant.
pub const HIDDEN_PREFIX: &str = "__";

/// Whether `session_id` names one of the service's own sessions.
pub fn is_hidden(session_id: &str) -> bool {
    session_id.starts_with(HIDDEN_PREFIX)
}

/// A session id a client may use: a [`session_id`] outside the service's
/// own ([`is_hidden`]).
pub fn client_session_id(value: &str) -> Result<&str, NameError> {
    let value = session_id(value)?;
    if is_hidden(value) { Err(NameError::Reserved(value.to_owned())) } else { Ok(value) }
}

/// A tenant name, as the API key maps it: the same alphabet.
pub fn tenant(value: &str) -> Result<&str, NameError> {
    if small_alphabet(value, 64) { Ok(value) } else { Err(NameError::Tenant(value.to_owned())) }
}

/// A dataset's name, its directory (or file) under `/data`:
/// `[A-Za-z0-9._-]{1,128}`, not starting with a dot.
pub fn dataset(value: &str) -> Result<&str, NameError> {
    let allowed = value.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if (1..=128).contains(&value.len()) && allowed && !value.starts_with('.') { Ok(value) } else { Err(NameError::Dataset(value.to_owned())) }
}

/// A file name in the session directory: one path component, no control
/// characters, not `.` or `..`. A leading `/mnt/data/` (the path code sees)
/// is accepted and stripped; any other slash is refused rather than rewritten,
/// so the client never writes somewhere it did not name.
pub fn filename(value: &str) -> Result<&str, NameError> {
    let refuse = |reason| Err(NameError::Filename { name: value.to_owned(), reason });
    let name = value.strip_prefix("/mnt/data/").unwrap_or(value);
    if name.is_empty() {
        return refuse("it is empty");
    }
    if name.len() > MAX_FILENAME_BYTES {
        return refuse("it is longer than 255 bytes");
    }
    if name.chars().any(char::is_control) {
        return refuse("it holds a control character or NUL");
    }
    if name.contains('/') || name.contains('\\') {
        return refuse("it names a directory; files live directly in /mnt/data");
    }
    if name == "." || name == ".." {
        return refuse("it names a directory");
    }
    Ok(name)
}

/// A path relative to the session directory, as code may have made it
/// (`charts/q1.svg`): every component a valid [`filename`].
pub fn relative_path(value: &str) -> Result<std::path::PathBuf, NameError> {
    let inner = value.strip_prefix("/mnt/data/").unwrap_or(value);
    if inner.is_empty() || inner.starts_with('/') {
        return Err(NameError::Filename { name: value.to_owned(), reason: "it is not a path inside /mnt/data" });
    }
    let mut path = std::path::PathBuf::new();
    for part in inner.split('/') {
        path.push(filename(part).map_err(|_| NameError::Filename {
            name: value.to_owned(),
            reason: "a part of it is empty, '.', '..' or holds a control character",
        })?);
    }
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_ids_use_a_small_alphabet() {
        assert!(session_id("agent-7_a").is_ok());
        for bad in ["", "a b", "../x", "a/b", "é", &"x".repeat(65)] {
            assert!(session_id(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_services_own_session_ids_are_not_a_clients() {
        assert!(client_session_id("agent-7_a").is_ok());
        assert!(session_id("__snapshot_abc").is_ok());
        assert_eq!(client_session_id("__snapshot_abc"), Err(NameError::Reserved("__snapshot_abc".to_owned())));
        assert!(client_session_id("a__b").is_ok());
    }

    #[test]
    fn dataset_names_are_one_plain_segment() {
        assert_eq!(dataset("sales-2026.csv"), Ok("sales-2026.csv"));
        for bad in ["", ".", "..", ".hidden", "a/b", "../x", "a b", "é", &"x".repeat(129)] {
            assert!(dataset(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn filenames_stay_in_the_session_directory() {
        assert_eq!(filename("sales.csv"), Ok("sales.csv"));
        assert_eq!(filename("/mnt/data/report.md"), Ok("report.md"));
        assert_eq!(filename("résumé 2026.txt"), Ok("résumé 2026.txt"));
        for bad in ["", ".", "..", "../x", "/etc/passwd", "a/b", "a\\b", "a\0b", "a\nb", "/mnt/data/", "/mnt/data/../x"] {
            assert!(filename(bad).is_err(), "{bad:?}");
        }
        assert!(filename(&"x".repeat(256)).is_err());
    }

    #[test]
    fn relative_paths_stay_below_the_directory() {
        assert_eq!(relative_path("charts/q1.svg").unwrap(), std::path::PathBuf::from("charts/q1.svg"));
        assert_eq!(relative_path("/mnt/data/a.txt").unwrap(), std::path::PathBuf::from("a.txt"));
        for bad in ["", "/etc/passwd", "a/../b", "a//b", "./a", "a/\0"] {
            assert!(relative_path(bad).is_err(), "{bad:?}");
        }
    }
}
