//! Group commit: one thread owns the database's write connection, takes every
//! write queued while the previous batch was committing, applies them in
//! arrival order inside one transaction and commits once, so concurrent
//! writers share one fsync. Each write still computes its own answer inside
//! that transaction (an increment's value, a swap's outcome), and a caller
//! hears back only once its batch is durable.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::sync::{Arc, Mutex};

use rusqlite::{Connection, OptionalExtension, params};

use super::KvError;

/// Inserts or overwrites one value.
const UPSERT: &str = "INSERT INTO spin_key_value (store, key, value) VALUES (?1, ?2, ?3)
     ON CONFLICT (store, key) DO UPDATE SET value = excluded.value";
/// The value under one key.
pub(super) const SELECT: &str = "SELECT value FROM spin_key_value WHERE store = ?1 AND key = ?2";
const DELETE: &str = "DELETE FROM spin_key_value WHERE store = ?1 AND key = ?2";

/// The most writes one transaction takes, so a batch's latency stays bounded.
const MAX_BATCH: usize = 256;

/// One write, as its caller asked for it.
pub(super) enum Op {
    Set { store: String, key: String, value: Vec<u8> },
    Delete { store: String, key: String },
    /// Adds `delta` to the 8-byte little-endian integer under `key` (absent counts as 0).
    Increment { store: String, key: String, delta: i64 },
    /// Writes `value` only if `key` still holds `expected` (`None`: still absent).
    SwapIf { store: String, key: String, expected: Option<Vec<u8>>, value: Vec<u8> },
}

/// What a write answers once it is durable.
#[derive(Debug)]
pub(super) enum Outcome {
    Done,
    Counter(i64),
    Swapped(bool),
}

type Answer = Result<Outcome, KvError>;

struct Request {
    op: Op,
    reply: SyncSender<Answer>,
}

/// How many batches the writer committed and how many writes they held.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CommitStats {
    /// Transactions the writer ran, one per batch (committed or failed).
    pub batches: u64,
    /// Writes those batches held, each answered on its own.
    pub writes: u64,
}

#[derive(Default)]
struct Counters {
    batches: AtomicU64,
    writes: AtomicU64,
}

/// The queue into the writer thread; the thread ends when this is dropped.
pub(super) struct Writer {
    queue: Sender<Request>,
    counters: Arc<Counters>,
}

impl Writer {
    /// Starts the thread that writes through `conn`.
    pub(super) fn start(conn: Arc<Mutex<Connection>>) -> Result<Self, KvError> {
        let (queue, requests) = mpsc::channel();
        let counters = Arc::new(Counters::default());
        let shared = counters.clone();
        std::thread::Builder::new()
            .name("kv-writer".into())
            .spawn(move || run(&conn, &requests, &shared))
            .map_err(|e| KvError::Other(format!("starting the key-value writer: {e}")))?;
        Ok(Self { queue, counters })
    }

    /// Queues `op` and waits until the batch it joined is committed (a
    /// blocking wait: callers on async workers go through `blocking`).
    pub(super) fn write(&self, op: Op) -> Answer {
        let (reply, answer) = mpsc::sync_channel(1);
        self.queue.send(Request { op, reply }).map_err(|_| stopped())?;
        answer.recv().map_err(|_| stopped())?
    }

    pub(super) fn stats(&self) -> CommitStats {
        CommitStats {
            batches: self.counters.batches.load(Ordering::Relaxed),
            writes: self.counters.writes.load(Ordering::Relaxed),
        }
    }
}

fn stopped() -> KvError {
    KvError::Other("the key-value writer stopped".into())
}

/// The writer thread: a batch is whatever queued while the last one committed.
fn run(conn: &Mutex<Connection>, requests: &Receiver<Request>, counters: &Counters) {
    while let Ok(first) = requests.recv() {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match requests.try_recv() {
                Ok(request) => batch.push(request),
                Err(_) => break,
            }
        }
        let (ops, replies): (Vec<Op>, Vec<SyncSender<Answer>>) = batch.into_iter().map(|r| (r.op, r.reply)).unzip();
        let answers = match conn.lock() {
            Ok(mut conn) => commit(&mut conn, &ops),
            Err(_) => failed_batch(ops.len(), "key-value connection lock poisoned"),
        };
        counters.batches.fetch_add(1, Ordering::Relaxed);
        counters.writes.fetch_add(ops.len() as u64, Ordering::Relaxed);
        let refused = answers.iter().filter(|a| a.is_err()).count();
        tracing::debug!(writes = ops.len(), refused, "key-value batch committed");
        for (reply, answer) in replies.into_iter().zip(answers) {
            // A caller that went away needs no answer.
            let _ = reply.send(answer);
        }
    }
}

/// Applies `ops` in order in one transaction and commits it: one answer per
/// op. An op that fails is undone alone (its savepoint); a failure of the
/// transaction itself (begin, savepoint handling, commit) fails every op.
fn commit(conn: &mut Connection, ops: &[Op]) -> Vec<Answer> {
    match try_commit(conn, ops) {
        Ok(answers) => answers,
        Err(e) => {
            if !conn.is_autocommit() {
                // Nothing of a failed batch may stay: the next batch starts clean.
                let _ = conn.execute_batch("ROLLBACK");
            }
            failed_batch(ops.len(), &e.to_string())
        }
    }
}

fn try_commit(conn: &Connection, ops: &[Op]) -> rusqlite::Result<Vec<Answer>> {
    conn.execute_batch("BEGIN IMMEDIATE")?;
    let mut answers = Vec::with_capacity(ops.len());
    for op in ops {
        conn.execute_batch("SAVEPOINT op")?;
        let answer = apply(conn, op);
        if answer.is_err() {
            conn.execute_batch("ROLLBACK TO op")?;
        }
        conn.execute_batch("RELEASE op")?;
        answers.push(answer);
    }
    conn.execute_batch("COMMIT")?;
    Ok(answers)
}

fn failed_batch(len: usize, reason: &str) -> Vec<Answer> {
    (0..len).map(|_| Err(KvError::Batch(reason.to_owned()))).collect()
}

/// One op inside the open transaction, seeing the ops before it.
fn apply(conn: &Connection, op: &Op) -> Answer {
    match op {
        Op::Set { store, key, value } => {
            conn.prepare_cached(UPSERT)?.execute(params![store, key, value])?;
            Ok(Outcome::Done)
        }
        Op::Delete { store, key } => {
            conn.prepare_cached(DELETE)?.execute(params![store, key])?;
            Ok(Outcome::Done)
        }
        Op::Increment { store, key, delta } => {
            let current = match current(conn, store, key)? {
                None => 0,
                Some(bytes) => i64::from_le_bytes(
                    bytes.try_into().map_err(|_| KvError::Other(format!("{key} does not hold an 8-byte counter")))?,
                ),
            };
            let next = current.checked_add(*delta).ok_or_else(|| KvError::Other("counter overflow".into()))?;
            conn.prepare_cached(UPSERT)?.execute(params![store, key, next.to_le_bytes()])?;
            Ok(Outcome::Counter(next))
        }
        Op::SwapIf { store, key, expected, value } => {
            let matches = current(conn, store, key)? == *expected;
            if matches {
                conn.prepare_cached(UPSERT)?.execute(params![store, key, value])?;
            }
            Ok(Outcome::Swapped(matches))
        }
    }
}

fn current(conn: &Connection, store: &str, key: &str) -> rusqlite::Result<Option<Vec<u8>>> {
    conn.prepare_cached(SELECT)?.query_row(params![store, key], |r| r.get(0)).optional()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file database as `KvDatabase::open` prepares it, with a trigger that
    /// makes SQLite itself refuse writes to chosen keys.
    fn database(dir: &tempfile::TempDir) -> Connection {
        let conn = super::super::prepared(Connection::open(dir.path().join("kv.db")).unwrap()).unwrap();
        conn.execute_batch(
            "CREATE TRIGGER refuse BEFORE INSERT ON spin_key_value WHEN NEW.key = 'refused'
                 BEGIN SELECT RAISE(ABORT, 'refused by trigger'); END;
             CREATE TABLE parent (id INTEGER PRIMARY KEY);
             CREATE TABLE child (parent INTEGER REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED);
             CREATE TRIGGER orphan AFTER INSERT ON spin_key_value WHEN NEW.key = 'orphan'
                 BEGIN INSERT INTO child (parent) VALUES (42); END;
             PRAGMA foreign_keys = ON;",
        )
        .unwrap();
        conn
    }

    fn set(key: &str, value: &[u8]) -> Op {
        Op::Set { store: "default".into(), key: key.into(), value: value.to_vec() }
    }

    fn increment(key: &str) -> Op {
        Op::Increment { store: "default".into(), key: key.into(), delta: 1 }
    }

    fn stored(conn: &Connection, key: &str) -> Option<Vec<u8>> {
        current(conn, "default", key).unwrap()
    }

    #[test]
    fn a_failing_write_fails_only_its_caller_and_later_writes_see_earlier_ones() {
        let dir = tempfile::tempdir().unwrap();
        let mut conn = database(&dir);
        let ops = [
            set("a", b"1"),
            set("bad", b"123"),
            increment("bad"),
            set("refused", b"x"),
            increment("n"),
            increment("n"),
            Op::SwapIf { store: "default".into(), key: "a".into(), expected: Some(b"1".to_vec()), value: b"2".to_vec() },
            Op::SwapIf { store: "default".into(), key: "a".into(), expected: Some(b"1".to_vec()), value: b"3".to_vec() },
            Op::Delete { store: "default".into(), key: "bad".into() },
        ];
        let answers: Vec<String> = commit(&mut conn, &ops).iter().map(|a| format!("{a:?}")).collect();
        assert_eq!(answers[0], "Ok(Done)");
        assert_eq!(answers[1], "Ok(Done)");
        assert!(answers[2].contains("does not hold an 8-byte counter"), "{}", answers[2]);
        assert!(answers[3].contains("refused by trigger"), "{}", answers[3]);
        assert_eq!(answers[4..], ["Ok(Counter(1))", "Ok(Counter(2))", "Ok(Swapped(true))", "Ok(Swapped(false))", "Ok(Done)"]);
        assert!(conn.is_autocommit(), "the batch's transaction is closed");
        assert_eq!(stored(&conn, "a").as_deref(), Some(&b"2"[..]), "the first swap won, the second saw its write");
        assert_eq!(stored(&conn, "n"), Some(2i64.to_le_bytes().to_vec()));
        assert_eq!(stored(&conn, "refused"), None);
        assert_eq!(stored(&conn, "bad"), None, "deleted after the refused increment");
    }

    #[test]
    fn a_failing_commit_fails_every_caller_and_stores_nothing_of_the_batch() {
        let dir = tempfile::tempdir().unwrap();
        let mut conn = database(&dir);
        assert_eq!(format!("{:?}", commit(&mut conn, &[set("before", b"1")])), "[Ok(Done)]");
        // The deferred foreign key breaks only at COMMIT.
        let answers = commit(&mut conn, &[set("a", b"1"), set("orphan", b"x"), increment("n")]);
        assert_eq!(answers.len(), 3);
        for answer in &answers {
            match answer {
                Err(KvError::Batch(reason)) => assert!(reason.contains("FOREIGN KEY"), "{reason}"),
                other => panic!("every write of the batch fails: {other:?}"),
            }
        }
        assert!(conn.is_autocommit(), "the failed transaction was rolled back");
        assert_eq!((stored(&conn, "a"), stored(&conn, "orphan"), stored(&conn, "n")), (None, None, None));
        assert_eq!(stored(&conn, "before").as_deref(), Some(&b"1"[..]), "earlier batches stay");
        assert_eq!(format!("{:?}", commit(&mut conn, &[increment("n")])), "[Ok(Counter(1))]", "the next batch starts clean");
    }

    #[test]
    fn a_write_that_rolls_back_the_transaction_fails_the_whole_batch() {
        let dir = tempfile::tempdir().unwrap();
        let mut conn = database(&dir);
        conn.execute_batch(
            "CREATE TRIGGER abandon BEFORE INSERT ON spin_key_value WHEN NEW.key = 'abandon'
                 BEGIN SELECT RAISE(ROLLBACK, 'whole transaction abandoned'); END;",
        )
        .unwrap();
        let answers = commit(&mut conn, &[set("a", b"1"), set("abandon", b"x"), set("c", b"1")]);
        assert!(answers.iter().all(|a| matches!(a, Err(KvError::Batch(_)))), "{answers:?}");
        assert_eq!((stored(&conn, "a"), stored(&conn, "c")), (None, None), "no write ran outside the transaction");
    }
}
