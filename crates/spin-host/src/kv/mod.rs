//! Key-value on SQLite in the layout of Spin's default store
//! (`.spin/sqlite_key_value.db`, table `spin_key_value`), so `spin up` and
//! `anypath up` see the same data.

mod readers;
mod writer;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, params};

use readers::Readers;
pub use writer::CommitStats;
use writer::{Op, Outcome, Writer};

/// How long a connection waits for another process's lock on the file.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// A key-value failure, before it is mapped to a WIT error.
#[derive(Debug, thiserror::Error)]
pub enum KvError {
    #[error("no such store {0:?}")]
    NoSuchStore(String),
    #[error("access to store {0:?} is not granted to this component")]
    AccessDenied(String),
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// The transaction of the batch this write was in failed as a whole, so
    /// none of the batch's writes is stored.
    #[error("key-value batch failed: {0}")]
    Batch(String),
    #[error("{0}")]
    Other(String),
}

/// The SQLite database behind every key-value store label: writes go through
/// one writer thread that commits them in batches (group commit), reads
/// through connections of their own.
pub struct KvDatabase {
    writer: Writer,
    readers: Readers,
}

impl KvDatabase {
    /// Opens (creating if needed) the database at `path`.
    pub fn open(path: &Path) -> Result<Arc<Self>, KvError> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| KvError::Other(format!("creating {}: {e}", dir.display())))?;
        }
        let conn = prepared(Connection::open(path)?)?;
        let writer = Writer::start(Arc::new(Mutex::new(conn)))?;
        Ok(Arc::new(Self { writer, readers: Readers::pool(path.to_owned()) }))
    }

    /// A database that lives as long as the app: a store without a `path`.
    /// Its one connection serves the writer and the readers.
    pub fn in_memory() -> Result<Arc<Self>, KvError> {
        let conn = Arc::new(Mutex::new(prepared(Connection::open_in_memory()?)?));
        let writer = Writer::start(conn.clone())?;
        Ok(Arc::new(Self { writer, readers: Readers::Shared(conn) }))
    }

    /// The value under `key`.
    pub fn get(&self, store: &str, key: &str) -> Result<Option<Vec<u8>>, KvError> {
        blocking(|| self.readers.read(|conn| conn.prepare_cached(writer::SELECT)?.query_row(params![store, key], |r| r.get(0)).optional()))
    }

    /// The values of `keys`, in order, read in one transaction.
    pub fn get_many(&self, store: &str, keys: &[String]) -> Result<Vec<Option<Vec<u8>>>, KvError> {
        blocking(|| {
            self.readers.read(|conn| {
                let tx = conn.unchecked_transaction()?;
                let values = {
                    let mut statement = tx.prepare_cached(writer::SELECT)?;
                    keys.iter().map(|key| statement.query_row(params![store, key], |r| r.get(0)).optional()).collect::<Result<Vec<_>, _>>()?
                };
                tx.commit()?;
                Ok(values)
            })
        })
    }

    /// Every key of `store`.
    pub fn keys(&self, store: &str) -> Result<Vec<String>, KvError> {
        blocking(|| {
            self.readers.read(|conn| {
                let mut statement = conn.prepare_cached("SELECT key FROM spin_key_value WHERE store = ?1 ORDER BY key")?;
                statement.query_map(params![store], |r| r.get(0))?.collect()
            })
        })
    }

    /// Stores `value` under `key`.
    pub fn set(&self, store: &str, key: &str, value: &[u8]) -> Result<(), KvError> {
        self.write(Op::Set { store: store.to_owned(), key: key.to_owned(), value: value.to_vec() }).map(|_| ())
    }

    /// Removes `key` (absent is fine).
    pub fn delete(&self, store: &str, key: &str) -> Result<(), KvError> {
        self.write(Op::Delete { store: store.to_owned(), key: key.to_owned() }).map(|_| ())
    }

    /// Adds `delta` to the 8-byte little-endian integer under `key` (absent counts as 0).
    pub fn increment(&self, store: &str, key: &str, delta: i64) -> Result<i64, KvError> {
        match self.write(Op::Increment { store: store.to_owned(), key: key.to_owned(), delta })? {
            Outcome::Counter(value) => Ok(value),
            other => Err(unexpected(&other)),
        }
    }

    /// Writes `value` only if `key` still holds `expected` (`None`: still absent).
    pub fn swap_if(&self, store: &str, key: &str, expected: Option<&[u8]>, value: &[u8]) -> Result<bool, KvError> {
        let op = Op::SwapIf {
            store: store.to_owned(),
            key: key.to_owned(),
            expected: expected.map(<[u8]>::to_vec),
            value: value.to_vec(),
        };
        match self.write(op)? {
            Outcome::Swapped(swapped) => Ok(swapped),
            other => Err(unexpected(&other)),
        }
    }

    /// How many batches the writer committed so far and how many writes they held.
    pub fn commit_stats(&self) -> CommitStats {
        self.writer.stats()
    }

    /// Hands `op` to the writer and waits until its batch is durable.
    fn write(&self, op: Op) -> Result<Outcome, KvError> {
        blocking(|| self.writer.write(op))
    }
}

fn unexpected(outcome: &Outcome) -> KvError {
    KvError::Other(format!("key-value writer answered {outcome:?}"))
}

/// Sets `conn` up as Spin's store: WAL (readers beside the writer) with
/// SQLite's default `synchronous = FULL`, pinned so every commit is durable
/// before it is acknowledged, and Spin's table.
fn prepared(conn: Connection) -> Result<Connection, KvError> {
    conn.busy_timeout(BUSY_TIMEOUT)?;
    conn.execute_batch(
        "PRAGMA journal_mode = WAL;
         PRAGMA synchronous = FULL;
         CREATE TABLE IF NOT EXISTS spin_key_value (
             store TEXT NOT NULL,
             key   TEXT NOT NULL,
             value BLOB NOT NULL,
             PRIMARY KEY (store, key)
         );",
    )?;
    Ok(conn)
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
mod tests;
