//! Signed download links: HMAC-SHA256 over what a link names and when it
//! expires, so a plain GET with no header (n8n, curl, a browser) can fetch an
//! artifact and nothing else. The key comes from configuration, or is
//! generated once and kept beside the data (mode 0600).

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::error::InterpreterError;

/// Bytes of a generated key.
const KEY_BYTES: usize = 32;

/// Signs and checks links.
#[derive(Clone)]
pub struct Signer {
    key: Vec<u8>,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Signer { key: <secret> }")
    }
}

impl Signer {
    /// A signer over `key` (any length; at least 32 bytes is advisable).
    pub fn new(key: impl Into<Vec<u8>>) -> Self {
        Self { key: key.into() }
    }

    /// The key kept in `path`, created with fresh random bytes when absent.
    pub fn load_or_create(path: &Path) -> Result<Self, InterpreterError> {
        match std::fs::read(path) {
            Ok(key) if key.len() >= KEY_BYTES => return Ok(Self::new(key)),
            Ok(_) => return Err(InterpreterError::io("reading the signing key", std::io::Error::other("the key file is shorter than 32 bytes"))),
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(InterpreterError::io("reading the signing key", e)),
            Err(_) => {}
        }
        let mut key = [0u8; KEY_BYTES];
        getrandom::fill(&mut key).map_err(|e| InterpreterError::io("generating the signing key", std::io::Error::other(e.to_string())))?;
        // Written whole beside the key, then linked into place: a process
        // starting at the same time never reads a half-written key, and the
        // first link wins (a link never replaces an existing file).
        let staged = path.with_extension(format!("{}.partial", uuid::Uuid::new_v4().simple()));
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&staged)
            .and_then(|mut file| file.write_all(&key).and_then(|()| file.sync_all()))
            .and_then(|()| std::fs::hard_link(&staged, path));
        let _ = std::fs::remove_file(&staged);
        match written {
            Ok(()) => Ok(Self::new(key.to_vec())),
            // Another process placed its key first: use theirs.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Self::load_or_create(path),
            Err(e) => Err(InterpreterError::io("writing the signing key", e)),
        }
    }

    /// The hex signature of `fields`, joined unambiguously.
    pub fn sign(&self, fields: &[&str]) -> String {
        hex::encode(self.mac(fields).finalize().into_bytes())
    }

    /// Whether `signature` (hex) is the signature of `fields`, compared in constant time.
    pub fn verify(&self, fields: &[&str], signature: &str) -> bool {
        let Ok(bytes) = hex::decode(signature) else { return false };
        self.mac(fields).verify_slice(&bytes).is_ok()
    }

    /// The hex HMAC-SHA256 of `bytes` as they are, for receivers that check
    /// it with any HMAC library (a run's callback).
    pub fn sign_bytes(&self, bytes: &[u8]) -> String {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.key).unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
        mac.update(bytes);
        hex::encode(mac.finalize().into_bytes())
    }

    fn mac(&self, fields: &[&str]) -> Hmac<Sha256> {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.key).unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
        for field in fields {
            // Length-prefixed, so ("ab", "c") and ("a", "bc") differ.
            mac.update(&(field.len() as u64).to_be_bytes());
            mac.update(field.as_bytes());
        }
        mac
    }
}

#[cfg(test)]
mod tests {
    use super::Signer;

    #[test]
    fn a_signature_covers_every_field_and_only_the_key_makes_it() {
        let signer = Signer::new(b"k".repeat(32));
        let sig = signer.sign(&["artifact", "abc", "1700000000"]);
        assert!(signer.verify(&["artifact", "abc", "1700000000"], &sig));
        assert!(!signer.verify(&["artifact", "abd", "1700000000"], &sig));
        assert!(!signer.verify(&["artifact", "abc", "1700000001"], &sig));
        assert!(!signer.verify(&["artifactabc", "", "1700000000"], &sig));
        assert!(!Signer::new(b"x".repeat(32)).verify(&["artifact", "abc", "1700000000"], &sig));
        assert!(!signer.verify(&["artifact", "abc", "1700000000"], "zz"));
    }

    #[test]
    fn processes_starting_together_agree_on_one_key() {
        let dir = tempfile::Builder::new().prefix("anypath-signing-race-").tempdir().unwrap();
        let path = dir.path().join("signing.key");
        let signers: Vec<Signer> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..8).map(|_| scope.spawn(|| Signer::load_or_create(&path).unwrap())).collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(signers.iter().all(|s| s.sign(&["x"]) == signers[0].sign(&["x"])));
    }

    #[test]
    fn a_generated_key_is_kept_and_reused() {
        let dir = tempfile::Builder::new().prefix("anypath-signing-").tempdir().unwrap();
        let path = dir.path().join("signing.key");
        let first = Signer::load_or_create(&path).unwrap();
        let second = Signer::load_or_create(&path).unwrap();
        assert_eq!(first.sign(&["x"]), second.sign(&["x"]));
    }
}
