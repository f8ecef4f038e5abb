//! The database through its public calls, under concurrent callers.

use std::sync::{Arc, Barrier};

use super::*;

const THREADS: usize = 8;

fn file_database() -> (tempfile::TempDir, Arc<KvDatabase>) {
    let dir = tempfile::Builder::new().prefix("anypath-kv-").tempdir().unwrap();
    let db = KvDatabase::open(&dir.path().join("kv.db")).unwrap();
    (dir, db)
}

/// Runs `work(thread)` on [`THREADS`] threads released together; their answers in thread order.
fn together<T: Send + 'static>(work: impl Fn(usize) -> T + Send + Sync + 'static) -> Vec<T> {
    let (work, start) = (Arc::new(work), Arc::new(Barrier::new(THREADS)));
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let (work, start) = (work.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                work(t)
            })
        })
        .collect();
    threads.into_iter().map(|t| t.join().expect("a worker thread")).collect()
}

#[test]
fn increment_and_compare_and_swap_are_atomic_per_call() {
    for (_dir, db) in [file_database(), (tempfile::tempdir().unwrap(), KvDatabase::in_memory().unwrap())] {
        assert_eq!(db.increment("default", "t", 1).unwrap(), 1);
        assert_eq!(db.increment("default", "t", 1).unwrap(), 2);
        assert!(db.swap_if("default", "k", None, b"a").unwrap());
        assert!(!db.swap_if("default", "k", None, b"b").unwrap(), "an absent-key swap is not an upsert");
        assert!(!db.swap_if("default", "k", Some(b"x"), b"b").unwrap());
        assert!(db.swap_if("default", "k", Some(b"a"), b"b").unwrap());
        assert_eq!(db.get("default", "k").unwrap().as_deref(), Some(&b"b"[..]));
        db.set("default", "bad", b"123").unwrap();
        assert!(db.increment("default", "bad", 1).is_err(), "a non-counter errors instead of panicking");
        db.delete("default", "bad").unwrap();
        assert_eq!(db.keys("default").unwrap(), ["k", "t"]);
        assert_eq!(db.keys("other").unwrap(), Vec::<String>::new(), "stores are apart");
    }
}

#[test]
fn concurrent_increments_get_distinct_values_in_fewer_commits_than_writes() {
    const EACH: usize = 25;
    for (_dir, db) in [file_database(), (tempfile::tempdir().unwrap(), KvDatabase::in_memory().unwrap())] {
        let shared = db.clone();
        let mut values: Vec<i64> = together(move |_| (0..EACH).map(|_| shared.increment("default", "ids", 1).unwrap()).collect::<Vec<_>>())
            .into_iter()
            .flatten()
            .collect();
        values.sort_unstable();
        let expected: Vec<i64> = (1..=(THREADS * EACH) as i64).collect();
        assert_eq!(values, expected, "every caller got its own value, none lost");
        let stored = db.get("default", "ids").unwrap().expect("the counter");
        assert_eq!(i64::from_le_bytes(stored.try_into().unwrap()), (THREADS * EACH) as i64);
        let stats = db.commit_stats();
        assert_eq!(stats.writes, (THREADS * EACH) as u64);
        assert!(stats.batches < stats.writes, "concurrent writes shared commits: {stats:?}");
    }
}

#[test]
fn concurrent_swaps_from_one_value_have_exactly_one_winner() {
    let (_dir, db) = file_database();
    for round in 0..10u8 {
        let start = [b'v', round];
        db.set("default", "index", &start).unwrap();
        let shared = db.clone();
        let won = together(move |t| shared.swap_if("default", "index", Some(&start), &[b'w', round, t as u8]).unwrap());
        let winners: Vec<usize> = won.iter().enumerate().filter(|(_, w)| **w).map(|(t, _)| t).collect();
        assert_eq!(winners.len(), 1, "round {round}: {won:?}");
        let stored = db.get("default", "index").unwrap();
        assert_eq!(stored, Some(vec![b'w', round, winners[0] as u8]), "the winner's value stands");
    }
}

#[test]
fn a_bad_write_among_concurrent_writes_fails_only_its_caller() {
    let (_dir, db) = file_database();
    db.set("default", "bad", b"123").unwrap();
    let shared = db.clone();
    let outcomes = together(move |t| {
        (0..20)
            .map(|_| if t == 0 { shared.increment("default", "bad", 1).is_err() } else { shared.increment("default", &format!("c{t}"), 1).is_ok() })
            .collect::<Vec<bool>>()
    });
    assert!(outcomes.iter().flatten().all(|ok| *ok), "the bad counter always failed, every good one always worked: {outcomes:?}");
    for t in 1..THREADS {
        let stored = db.get("default", &format!("c{t}")).unwrap().expect("a counter");
        assert_eq!(i64::from_le_bytes(stored.try_into().unwrap()), 20);
    }
    assert_eq!(db.get("default", "bad").unwrap().as_deref(), Some(&b"123"[..]), "the bad value is untouched");
}

#[test]
fn reads_see_committed_data_without_waiting_for_the_writer() {
    let (dir, db) = file_database();
    db.set("default", "k", b"committed").unwrap();
    // Another process holds the write lock with a change it has not committed.
    let other = Connection::open(dir.path().join("kv.db")).unwrap();
    other.execute_batch("BEGIN IMMEDIATE; UPDATE spin_key_value SET value = x'00' WHERE key = 'k';").unwrap();
    let (writer_db, (done, written)) = (db.clone(), std::sync::mpsc::channel());
    let blocked = std::thread::spawn(move || {
        let result = writer_db.set("default", "later", b"1");
        done.send(()).unwrap();
        result
    });
    // Give the write time to reach the writer, which now waits for the lock.
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(db.get("default", "k").unwrap().as_deref(), Some(&b"committed"[..]), "only committed data is read");
    assert_eq!(db.keys("default").unwrap(), ["k"]);
    assert!(written.try_recv().is_err(), "the reads answered while the write was still waiting");
    other.execute_batch("ROLLBACK").unwrap();
    blocked.join().unwrap().expect("the write goes through once the lock is free");
    assert_eq!(db.get("default", "later").unwrap().as_deref(), Some(&b"1"[..]), "a read after an acknowledged write sees it");
}

#[test]
fn every_commit_is_durable_before_it_is_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let conn = prepared(Connection::open(dir.path().join("kv.db")).unwrap()).unwrap();
    let journal: String = conn.query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap();
    let synchronous: i64 = conn.query_row("PRAGMA synchronous", [], |r| r.get(0)).unwrap();
    assert_eq!((journal.as_str(), synchronous), ("wal", 2), "WAL with synchronous = FULL: an fsync per commit");
}

#[test]
fn many_values_are_read_in_order_with_the_absent_ones_none() {
    let (_dir, file) = file_database();
    for db in [file, KvDatabase::in_memory().unwrap()] {
        db.set("default", "a", b"1").unwrap();
        db.set("default", "c", b"3").unwrap();
        db.set("other", "b", b"x").unwrap();
        let keys: Vec<String> = ["c", "b", "a", "c"].iter().map(|k| k.to_string()).collect();
        assert_eq!(db.get_many("default", &keys).unwrap(), vec![Some(b"3".to_vec()), None, Some(b"1".to_vec()), Some(b"3".to_vec())]);
        assert_eq!(db.get_many("default", &[]).unwrap(), Vec::<Option<Vec<u8>>>::new());
    }
}
