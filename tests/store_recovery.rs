//! Recovery of multi-collection commits that stopped half-way, as a crash
//! would leave them: a lock whose transaction was decided `commit` is rolled
//! forward (readers already see its result), and a lock whose transaction
//! stayed `pending` past the timeout is rolled back by the next writer.
//! The states are written straight into the key-value file `anypath up` uses.

use crate::common;

use std::sync::Arc;

use anypath_rest::{Lock, StoredIndex};
use anypath_spin_host::kv::KvDatabase;
use common::app::{App, json_of, temp_kv};
use serde_json::json;

const INDEX: &str = "anypath/v2/t/default/c/acct/index";

fn index(db: &KvDatabase) -> StoredIndex {
    serde_json::from_slice(&db.get("default", INDEX).unwrap().expect("the collection exists")).unwrap()
}

/// Locks `acct` for transaction `tx`, whose result would have no documents.
fn lock_for_deleting_everything(db: &KvDatabase, tx: &str, since_ms: u64, decision: &str) {
    let mut current = index(db);
    let next = StoredIndex { version: current.version + 1, max_int_id: current.max_int_id, ..StoredIndex::default() };
    current.lock = Some(Lock { tx: tx.to_owned(), next: Box::new(next), since_ms });
    db.set("default", INDEX, &serde_json::to_vec(&current).unwrap()).unwrap();
    db.set("default", &format!("anypath/v2/t/default/tx/{tx}"), decision.as_bytes()).unwrap();
}

/// An app whose `acct` collection holds one document, and its key-value file opened beside it.
fn start(name: &str) -> (App, Arc<KvDatabase>) {
    let kv = temp_kv(name);
    let app = App::start(&kv);
    assert_eq!(app.send("POST", "/acct/", Some(json!({"id": 1, "balance": 5}))).status(), 201);
    (app, KvDatabase::open(&kv).unwrap())
}

#[test]
fn a_decided_commit_left_locked_is_seen_and_rolled_forward() {
    let (app, db) = start("recovery-commit");
    lock_for_deleting_everything(&db, "decided", 0, "commit");
    assert_eq!(app.send("GET", "/acct/1", None).status(), 404, "readers see the decided result");
    assert_eq!(app.send("POST", "/acct/", Some(json!({"id": 2, "balance": 1}))).status(), 201);
    let now = index(&db);
    assert!(now.lock.is_none(), "the writer finished the transaction: {now:?}");
    assert_eq!(now.docs.keys().collect::<Vec<_>>(), vec!["2"]);
}

#[test]
fn an_abandoned_pending_lock_is_rolled_back_by_the_next_writer() {
    let (app, db) = start("recovery-abort");
    lock_for_deleting_everything(&db, "abandoned", 0, "pending");
    assert_eq!(json_of(app.send("GET", "/acct/1", None)).1["balance"], 5, "an undecided transaction is invisible");
    let patched = app.send("PATCH", "/acct/1", Some(json!({"balance": 6})));
    assert_eq!(patched.status(), 200);
    assert_eq!(json_of(app.send("GET", "/acct/1", None)).1["balance"], 6);
    assert!(index(&db).lock.is_none());
    let decision = db.get("default", "anypath/v2/t/default/tx/abandoned").unwrap();
    assert_eq!(decision.as_deref(), Some(&b"abort"[..]), "the writer decided the abort");
}
