//! Key-value on SQLite in the layout of Spin's default store
//! (`.spin/sqlite_key_value.db`, table `spin_key_value`), so `spin up` and
//! `anypath up` see the same data.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use rusqlite::{Connection, OptionalExtension, params};

/// Inserts or overwrites one value.
const UPSERT: &str = "INSERT INTO spin_key_value (store, key, value) VALUES (?1, ?2, ?3)
     ON CONFLICT (store, key) DO UPDATE SET value = excluded.value";

/// A key-value failure, before it is mapped to a WIT error.
#[derive(Debug, thiserror::Error)]
pub enum KvError {
    #[error("no such store {0:?}")]
    NoSuchStore(String),
    #[error("access to store {0:?} is not granted to this component")]
    AccessDenied(String),
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("{0}")]
    Other(String),
}

/// The SQLite database behind every key-value store label.
pub struct KvDatabase {
    conn: Mutex<Connection>,
}

impl KvDatabase {
    /// Opens (creating if needed) the database at `path`.
    pub fn open(path: &Path) -> Result<Arc<Self>, KvError> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| KvError::Other(format!("creating {}: {e}", dir.display())))?;
        }
        Self::with(Connection::open(path)?)
    }

    /// A database that lives as long as the app: a store without a `path`.
    pub fn in_memory() -> Result<Arc<Self>, KvError> {
        Self::with(Connection::open_in_memory()?)
    }

    fn with(conn: Connection) -> Result<Arc<Self>, KvError> {
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        conn.execute_batch(
            "PRAGMA journal_mode = WAL;
             CREATE TABLE IF NOT EXISTS spin_key_value (
                 store TEXT NOT NULL,
                 key   TEXT NOT NULL,
                 value BLOB NOT NULL,
                 PRIMARY KEY (store, key)
             );",
        )?;
        Ok(Arc::new(Self { conn: Mutex::new(conn) }))
    }

    fn lock(&self) -> Result<MutexGuard<'_, Connection>, KvError> {
        self.conn.lock().map_err(|_| KvError::Other("key-value lock poisoned".into()))
    }

    /// The value under `key`.
    pub fn get(&self, store: &str, key: &str) -> Result<Option<Vec<u8>>, KvError> {
        blocking(|| {
            let conn = self.lock()?;
            Ok(conn
                .query_row("SELECT value FROM spin_key_value WHERE store = ?1 AND key = ?2", params![store, key], |r| r.get(0))
                .optional()?)
        })
    }

    /// Stores `value` under `key`.
    pub fn set(&self, store: &str, key: &str, value: &[u8]) -> Result<(), KvError> {
        blocking(|| {
            self.lock()?.execute(UPSERT, params![store, key, value])?;
            Ok(())
        })
    }

    /// Removes `key` (absent is fine).
    pub fn delete(&self, store: &str, key: &str) -> Result<(), KvError> {
        blocking(|| {
            self.lock()?.execute("DELETE FROM spin_key_value WHERE store = ?1 AND key = ?2", params![store, key])?;
            Ok(())
        })
    }

    /// Every key of `store`.
    pub fn keys(&self, store: &str) -> Result<Vec<String>, KvError> {
        blocking(|| {
            let conn = self.lock()?;
            let mut statement = conn.prepare("SELECT key FROM spin_key_value WHERE store = ?1 ORDER BY key")?;
            let keys = statement.query_map(params![store], |r| r.get(0))?.collect::<Result<Vec<String>, _>>()?;
            Ok(keys)
        })
    }

    /// Adds `delta` to the 8-byte little-endian integer under `key` (absent counts as 0).
    pub fn increment(&self, store: &str, key: &str, delta: i64) -> Result<i64, KvError> {
        self.update(store, key, |current| {
            let current = match current {
                None => 0,
                Some(bytes) => i64::from_le_bytes(
                    bytes.try_into().map_err(|_| KvError::Other(format!("{key} does not hold an 8-byte counter")))?,
                ),
            };
            let next = current.checked_add(delta).ok_or_else(|| KvError::Other("counter overflow".into()))?;
            Ok((Some(next.to_le_bytes().to_vec()), next))
        })
    }

    /// Writes `value` only if `key` still holds `expected` (`None`: still absent).
    pub fn swap_if(&self, store: &str, key: &str, expected: Option<&[u8]>, value: &[u8]) -> Result<bool, KvError> {
        self.update(store, key, |current| {
            let matches = current.as_deref() == expected;
            Ok((matches.then(|| value.to_vec()), matches))
        })
    }

    /// Reads `key` and writes what `decide` returns, in one transaction
    /// (`None`: write nothing).
    fn update<T>(
        &self,
        store: &str,
        key: &str,
        decide: impl FnOnce(Option<Vec<u8>>) -> Result<(Option<Vec<u8>>, T), KvError>,
    ) -> Result<T, KvError> {
        blocking(|| {
            let mut conn = self.lock()?;
            let tx = conn.transaction()?;
            let current: Option<Vec<u8>> = tx
                .query_row("SELECT value FROM spin_key_value WHERE store = ?1 AND key = ?2", params![store, key], |r| r.get(0))
                .optional()?;
            let (write, answer) = decide(current)?;
            if let Some(value) = write {
                tx.execute(UPSERT, params![store, key, value])?;
                tx.commit()?;
            }
            Ok(answer)
        })
    }
}

/// Runs a database call. On a multi-threaded runtime the worker first hands
/// its other tasks to its peers (as Spin does), so a commit's fsync never
/// stalls them.
fn blocking<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

/// One component's view: the stores that exist and the labels it was granted.
#[derive(Clone)]
pub struct KvAccess {
    /// The database behind each label that exists (those in the runtime
    /// configuration; `default` always), opened when some component uses it.
    pub stores: Arc<BTreeMap<String, Arc<KvDatabase>>>,
    pub granted: Arc<Vec<String>>,
}

impl KvAccess {
    /// Checks `label` before a bucket is opened.
    pub fn open(&self, label: &str) -> Result<Arc<KvDatabase>, KvError> {
        let db = self.stores.get(label).ok_or_else(|| KvError::NoSuchStore(label.to_owned()))?;
        if !self.granted.iter().any(|l| l == label) {
            return Err(KvError::AccessDenied(label.to_owned()));
        }
        Ok(db.clone())
    }
}

/// An open bucket resource.
pub struct Bucket {
    pub label: String,
    pub db: Arc<KvDatabase>,
}

/// A compare-and-swap handle: the value seen when it was created.
pub struct Cas {
    pub label: String,
    pub key: String,
    pub db: Arc<KvDatabase>,
    pub seen: Option<Vec<u8>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn increment_and_compare_and_swap_are_atomic_per_call() {
        let dir = tempfile::Builder::new().prefix("anypath-kv-").tempdir().unwrap();
        let db = KvDatabase::open(&dir.path().join("kv.db")).unwrap();
        assert_eq!(db.increment("default", "t", 1).unwrap(), 1);
        assert_eq!(db.increment("default", "t", 1).unwrap(), 2);
        assert!(db.swap_if("default", "k", None, b"a").unwrap());
        assert!(!db.swap_if("default", "k", None, b"b").unwrap(), "an absent-key swap is not an upsert");
        assert!(!db.swap_if("default", "k", Some(b"x"), b"b").unwrap());
        assert!(db.swap_if("default", "k", Some(b"a"), b"b").unwrap());
        assert_eq!(db.get("default", "k").unwrap().as_deref(), Some(&b"b"[..]));
        db.set("default", "bad", b"123").unwrap();
        assert!(db.increment("default", "bad", 1).is_err(), "a non-counter errors instead of panicking");
    }
}
