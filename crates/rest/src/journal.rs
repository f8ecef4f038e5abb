//! A stored collection and how a block's mutation journal is applied to it.
//!
//! The journal is checked entry by entry against the collection it names;
//! any inconsistency rejects the whole journal, so a collection is either
//! fully updated (and its version bumped) or left exactly as it was.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A tenant collection as stored: its documents and a version that every
/// applied journal increments.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Collection {
    pub version: u64,
    pub documents: Vec<Value>,
}

/// One journal entry, as the sandbox reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MutationRecord {
    pub collection: String,
    pub op: Op,
    pub id: Value,
    pub document: Option<Value>,
}

/// Kind of journal entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    Insert,
    Replace,
    Patch,
    Delete,
}

/// Why a journal was not applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JournalError {
    #[error("collection {collection:?} changed: expected version {expected}, found {found}")]
    VersionConflict { collection: String, expected: u64, found: u64 },
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

impl Collection {
    /// Applies `entries` (all naming this collection) if `expected_version`
    /// still matches; on any error the collection is unchanged.
    pub fn apply(&mut self, expected_version: u64, entries: &[&MutationRecord]) -> Result<(), JournalError> {
        let Some(first) = entries.first() else { return Ok(()) };
        if self.version != expected_version {
            return Err(JournalError::VersionConflict {
                collection: first.collection.clone(),
                expected: expected_version,
                found: self.version,
            });
        }
        let mut documents = self.documents.clone();
        for (index, entry) in entries.iter().enumerate() {
            apply_one(&mut documents, entry).map_err(|reason| JournalError::Inconsistent { index, reason })?;
        }
        self.documents = documents;
        self.version += 1;
        Ok(())
    }
}

fn position(documents: &[Value], key: &str) -> Option<usize> {
    documents.iter().position(|d| d.get("id").and_then(id_key).as_deref() == Some(key))
}

fn apply_one(documents: &mut Vec<Value>, entry: &MutationRecord) -> Result<(), String> {
    let key = id_key(&entry.id).ok_or_else(|| format!("id {} is not an integer or string", entry.id))?;
    let found = position(documents, &key);
    let document = || -> Result<Value, String> {
        let doc = entry.document.clone().ok_or("a document is missing")?;
        match doc.get("id").and_then(id_key) {
            Some(k) if k == key && doc.is_object() => Ok(doc),
            _ => Err(format!("the document does not carry id {key}")),
        }
    };
    match (entry.op, found) {
        (Op::Insert, None) => documents.push(document()?),
        (Op::Insert, Some(_)) => return Err(format!("id {key} already exists")),
        (Op::Replace | Op::Patch, Some(i)) => documents[i] = document()?,
        (Op::Delete, Some(i)) => {
            documents.remove(i);
        }
        (_, None) => return Err(format!("id {key} does not exist")),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entry(op: Op, id: Value, document: Option<Value>) -> MutationRecord {
        MutationRecord { collection: "m".into(), op, id, document }
    }

    #[test]
    fn a_journal_applies_in_order_and_bumps_the_version() {
        let mut c = Collection { version: 3, documents: vec![json!({"id": 1, "a": 1})] };
        let e = [
            entry(Op::Insert, json!(2), Some(json!({"id": 2}))),
            entry(Op::Patch, json!(1), Some(json!({"id": 1, "a": 2}))),
            entry(Op::Delete, json!("2"), None),
        ];
        c.apply(3, &e.iter().collect::<Vec<_>>()).unwrap();
        assert_eq!(c, Collection { version: 4, documents: vec![json!({"id": 1, "a": 2})] });
    }

    #[test]
    fn a_stale_version_or_bad_entry_changes_nothing() {
        let original = Collection { version: 1, documents: vec![json!({"id": 1})] };
        let mut c = original.clone();
        let ok = entry(Op::Insert, json!(2), Some(json!({"id": 2})));
        assert!(matches!(c.apply(0, &[&ok]), Err(JournalError::VersionConflict { .. })));
        let bad = entry(Op::Replace, json!(9), Some(json!({"id": 9})));
        assert!(matches!(c.apply(1, &[&ok, &bad]), Err(JournalError::Inconsistent { index: 1, .. })));
        let mismatched = entry(Op::Insert, json!(3), Some(json!({"id": 4})));
        assert!(c.apply(1, &[&mismatched]).is_err());
        assert_eq!(c, original);
    }
}
