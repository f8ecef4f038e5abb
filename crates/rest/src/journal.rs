//! How a collection is stored and how a block's mutation journal is applied.
//!
//! A collection is an [`Index`] (version, highest integer id, and for each
//! document id the tag of an immutable document value) plus one stored value
//! per tag; the index itself is stored as a head and sealed chunks
//! ([`crate::stored_index`]). A commit writes the new values first, then
//! swaps the head in one compare-and-swap: readers always see a whole
//! journal or none of it, and a reader holding an old head still finds every
//! value it names until the superseded ones are removed (then it reloads).
//!
//! Concurrency is checked against what the block actually read (a
//! [`ReadCheck`]): a block that scanned the collection needs the version to
//! be unchanged; one that only looked up ids needs those ids unchanged. So
//! two requests creating or updating different documents both commit.

use indexmap::IndexMap;
use serde_json::Value;

pub use anypath_wire::{MutationRecord, Op, ReadCheck};

/// Why a journal was not applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JournalError {
    /// What the block read has changed since it was loaded: re-run it.
    #[error("collection {collection:?} changed since it was read: {reason}")]
    Conflict { collection: String, reason: String },
    /// The journal contradicts itself or the collection it names.
    #[error("journal entry {index} is inconsistent: {reason}")]
    Inconsistent { index: usize, reason: String },
}

/// The canonical key of an id: `7` and `"7"` are the same document, as in the runner.
pub fn id_key(id: &Value) -> Option<String> {
    match id {
        Value::Number(n) if n.is_i64() || n.is_u64() => Some(n.to_string()),
        Value::String(s) => Some(s.clone()),
        _ => None,
    }
}

/// The integer a key spells canonically (`"7"`, not `"07"`): the key of
/// integer id 7 and of string id "7" alike, so reserved ids, which start
/// above every such key, never meet a stored one.
pub fn integer_key(key: &str) -> Option<i64> {
    key.parse::<i64>().ok().filter(|n| n.to_string() == key)
}

/// A collection's index, whole: what its stored head and chunks make.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Index {
    /// Bumped by every applied journal.
    pub version: u64,
    /// The highest integer id ever stored; reserved ids start above it.
    pub max_int_id: i64,
    /// Document id key to the tag of its stored value, in insertion order.
    pub docs: IndexMap<String, String>,
}

/// The result of applying a journal to an index: the index to swap in, the
/// document values to write first, and the values it no longer names.
#[derive(Debug, Clone, PartialEq)]
pub struct Applied {
    pub index: Index,
    /// (tag, document) pairs, written before the index swap.
    pub writes: Vec<(String, Value)>,
    /// Tags of values the new index no longer names; removed after the swap.
    pub superseded: Vec<String>,
}

impl Index {
    /// Fails with a conflict when anything the block read has changed.
    pub fn check(&self, collection: &str, read: &ReadCheck) -> Result<(), JournalError> {
        let conflict = |reason: String| JournalError::Conflict { collection: collection.to_owned(), reason };
        if read.scanned && self.version != read.expected_version {
            return Err(conflict(format!("version {} became {}", read.expected_version, self.version)));
        }
        for (id, seen) in &read.reads {
            if self.docs.get(id) != seen.as_ref() {
                return Err(conflict(format!("document {id:?} changed")));
            }
        }
        Ok(())
    }

    /// Applies `entries` in order. Only each id's final state is written; its
    /// value is tagged `{tag_prefix}-{n}` (n counts the ids in journal order),
    /// so retrying with the same prefix writes the same values.
    pub fn apply(&self, entries: &[&MutationRecord], tag_prefix: &str) -> Result<Applied, JournalError> {
        let mut finals: IndexMap<String, Option<Value>> = IndexMap::new();
        let mut max_int_id = self.max_int_id;
        for (index, entry) in entries.iter().enumerate() {
            let inconsistent = |reason: String| JournalError::Inconsistent { index, reason };
            let key = id_key(&entry.id).ok_or_else(|| inconsistent(format!("id {} is not an integer or string", entry.id)))?;
            let present = match finals.get(&key) {
                Some(state) => state.is_some(),
                None => self.docs.contains_key(&key),
            };
            let document = || -> Result<Value, JournalError> {
                let doc = entry.document.clone().ok_or_else(|| inconsistent("a document is missing".into()))?;
                match doc.get("id").and_then(id_key) {
                    Some(k) if k == key && doc.is_object() => Ok(doc),
                    _ => Err(inconsistent(format!("the document does not carry id {key}"))),
                }
            };
            let state = match (entry.op, present) {
                (Op::Insert, false) => {
                    if let Some(n) = integer_key(&key) {
                        max_int_id = max_int_id.max(n);
                    }
                    Some(document()?)
                }
                (Op::Insert, true) => return Err(inconsistent(format!("id {key} already exists"))),
                (Op::Replace | Op::Patch, true) => Some(document()?),
                (Op::Delete, true) => None,
                (_, false) => return Err(inconsistent(format!("id {key} does not exist"))),
            };
            finals.insert(key, state);
        }

        let mut index = self.clone();
        index.version += 1;
        index.max_int_id = max_int_id;
        let mut writes = Vec::new();
        let mut superseded = Vec::new();
        for (n, (key, state)) in finals.into_iter().enumerate() {
            let old = match state {
                Some(doc) => {
                    let tag = format!("{tag_prefix}-{n}");
                    writes.push((tag.clone(), doc));
                    index.docs.insert(key, tag)
                }
                None => index.docs.shift_remove(&key),
            };
            superseded.extend(old);
        }
        Ok(Applied { index, writes, superseded })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::BTreeMap;

    fn entry(op: Op, id: Value, document: Option<Value>) -> MutationRecord {
        MutationRecord { collection: "m".into(), op, id, document }
    }

    fn index(docs: &[(&str, &str)], version: u64) -> Index {
        Index {
            version,
            max_int_id: 1,
            docs: docs.iter().map(|(k, t)| (k.to_string(), t.to_string())).collect(),
        }
    }

    #[test]
    fn only_final_states_are_written_and_old_values_superseded() {
        let base = index(&[("1", "old-a")], 3);
        let e = [
            entry(Op::Insert, json!(2), Some(json!({"id": 2}))),
            entry(Op::Patch, json!(1), Some(json!({"id": 1, "a": 2}))),
            entry(Op::Patch, json!(2), Some(json!({"id": 2, "b": 1}))),
            entry(Op::Delete, json!("1"), None),
        ];
        let applied = base.apply(&e.iter().collect::<Vec<_>>(), "t").unwrap();
        assert_eq!(applied.index.version, 4);
        assert_eq!(applied.index.max_int_id, 2);
        assert_eq!(applied.index.docs.iter().collect::<Vec<_>>(), vec![(&"2".to_string(), &"t-0".to_string())]);
        assert_eq!(applied.writes, vec![("t-0".to_string(), json!({"id": 2, "b": 1}))]);
        assert_eq!(applied.superseded, vec!["old-a".to_string()]);
    }

    #[test]
    fn an_inconsistent_journal_is_refused_whole() {
        let base = index(&[("1", "a")], 1);
        let ok = entry(Op::Insert, json!(2), Some(json!({"id": 2})));
        let missing = entry(Op::Replace, json!(9), Some(json!({"id": 9})));
        assert!(matches!(base.apply(&[&ok, &missing], "t"), Err(JournalError::Inconsistent { index: 1, .. })));
        let duplicate = entry(Op::Insert, json!("1"), Some(json!({"id": "1"})));
        assert!(base.apply(&[&duplicate], "t").is_err());
        let mismatched = entry(Op::Insert, json!(3), Some(json!({"id": 4})));
        assert!(base.apply(&[&mismatched], "t").is_err());
    }

    #[test]
    fn reads_conflict_only_when_what_was_read_changed() {
        let now = index(&[("1", "a"), ("2", "b2")], 7);
        let mut read = ReadCheck { expected_version: 5, scanned: false, reads: BTreeMap::new() };
        read.reads.insert("1".into(), Some("a".into()));
        read.reads.insert("3".into(), None);
        assert_eq!(now.check("m", &read), Ok(()), "other documents changed, not these");
        read.reads.insert("2".into(), Some("b1".into()));
        assert!(matches!(now.check("m", &read), Err(JournalError::Conflict { .. })));
        let scan = ReadCheck { expected_version: 5, scanned: true, reads: BTreeMap::new() };
        assert!(now.check("m", &scan).is_err(), "a scan needs the same version");
        assert_eq!(now.check("m", &ReadCheck { expected_version: 7, ..scan }), Ok(()));
    }
}
