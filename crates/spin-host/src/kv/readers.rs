//! Read connections. A database file is read through connections of its own
//! (WAL lets them read beside the writer), so a read never waits behind a
//! batch's fsync and sees only committed data. An in-memory database has one
//! connection, shared with the writer.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use rusqlite::{Connection, OpenFlags};

use super::{BUSY_TIMEOUT, KvError};

/// Idle read connections kept for reuse; more are opened under load.
const MAX_IDLE: usize = 8;

pub(super) enum Readers {
    /// An in-memory database: its only connection, which the writer holds
    /// for the length of a batch (no fsync, so briefly).
    Shared(Arc<Mutex<Connection>>),
    /// A database file, opened again for each concurrent reader.
    Pool { path: PathBuf, idle: Mutex<Vec<Connection>> },
}

impl Readers {
    pub(super) fn pool(path: PathBuf) -> Self {
        Readers::Pool { path, idle: Mutex::new(Vec::new()) }
    }

    /// Runs `read` on a connection outside any write transaction.
    pub(super) fn read<T>(&self, read: impl FnOnce(&Connection) -> rusqlite::Result<T>) -> Result<T, KvError> {
        match self {
            Readers::Shared(conn) => Ok(read(&*conn.lock().map_err(|_| poisoned())?)?),
            Readers::Pool { path, idle } => {
                let taken = idle.lock().map_err(|_| poisoned())?.pop();
                let conn = match taken {
                    Some(conn) => conn,
                    None => open_reader(path)?,
                };
                let result = read(&conn)?;
                let mut idle = idle.lock().map_err(|_| poisoned())?;
                if idle.len() < MAX_IDLE {
                    idle.push(conn);
                }
                Ok(result)
            }
        }
    }
}

fn poisoned() -> KvError {
    KvError::Other("key-value reader lock poisoned".into())
}

/// A connection that only reads the file the writer created.
fn open_reader(path: &std::path::Path) -> Result<Connection, KvError> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_URI | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags)?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    conn.execute_batch("PRAGMA query_only = ON")?;
    Ok(conn)
}
