//! The store's two calls as the gateway makes them: `POST /load` (what a plan
//! needs of each collection, with each document's tag) and `POST /commit`
//! (a block's journal with what it read, re-checked before it lands).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::exec::{MutationRecord, ReadSet};
use crate::exec_request::CollectionInput;

/// What to load of one collection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadSpec {
    pub name: String,
    /// Only these ids (keys as strings); none loads the whole collection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ids: Option<Vec<String>>,
    /// Reserve a fresh integer id for an insert without one.
    #[serde(default)]
    pub reserve_id: bool,
}

impl LoadSpec {
    /// The whole collection.
    pub fn whole(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            ids: None,
            reserve_id: false,
        }
    }
}

/// The body of `POST /load`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LoadRequest {
    pub tenant: String,
    pub collections: Vec<LoadSpec>,
}

/// The answer of `POST /load`: each requested collection, in request order.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LoadAnswer {
    pub collections: Vec<LoadedCollection>,
}

/// One collection as loaded.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LoadedCollection {
    pub name: String,
    /// The index version read.
    pub version: u64,
    /// Every document was loaded (no ids were asked for).
    pub complete: bool,
    pub documents: Vec<Value>,
    /// Ids asked for and not found.
    pub absent_ids: Vec<String>,
    /// A fresh integer id, when the load asked to reserve one.
    pub reserved_id: Option<i64>,
    /// Tag of each loaded document, echoed back in the commit's read check.
    pub tags: BTreeMap<String, String>,
}

impl LoadedCollection {
    /// What the sandbox is handed of this collection (the tags stay with the caller).
    pub fn exec_input(&self) -> Result<CollectionInput, serde_json::Error> {
        Ok(CollectionInput {
            name: self.name.clone(),
            version: self.version,
            documents: serde_json::value::to_raw_value(&self.documents)?,
            complete: self.complete,
            absent_ids: self.absent_ids.clone(),
            reserved_id: self.reserved_id,
        })
    }

    /// The read check for a commit: the version loaded, whether the block
    /// scanned the collection, and each id it looked up with the tag that id
    /// had when loaded (none: absent).
    pub fn read_check(&self, read: Option<&ReadSet>) -> ReadCheck {
        ReadCheck {
            expected_version: self.version,
            scanned: read.is_some_and(|r| r.scanned),
            reads: read
                .into_iter()
                .flat_map(|r| &r.ids)
                .map(|id| (id.clone(), self.tags.get(id).cloned()))
                .collect(),
        }
    }
}

/// What a block read of one collection, with the tags it saw.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadCheck {
    /// The index version that was loaded.
    pub expected_version: u64,
    /// The block depended on the whole collection.
    #[serde(default)]
    pub scanned: bool,
    /// Each id looked up, with the tag it had (none: it was absent).
    #[serde(default)]
    pub reads: BTreeMap<String, Option<String>>,
}

/// The body of `POST /commit`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CommitRequest {
    pub tenant: String,
    pub changes: Vec<Change>,
}

/// One collection's part of a commit: what the block read of it and its mutations.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Change {
    pub name: String,
    #[serde(flatten)]
    pub check: ReadCheck,
    #[serde(default)]
    pub mutations: Vec<MutationRecord>,
}

impl Change {
    /// What one run commits: for each loaded collection it changed or read,
    /// its mutations and a check of exactly what it read.
    pub fn for_run(loaded: &[LoadedCollection], mutations: &[MutationRecord], reads: &[ReadSet]) -> Vec<Self> {
        loaded
            .iter()
            .filter_map(|collection| {
                let mutations: Vec<_> = mutations.iter().filter(|m| m.collection == collection.name).cloned().collect();
                let read = reads.iter().find(|r| r.collection == collection.name);
                if mutations.is_empty() && read.is_none() {
                    return None;
                }
                Some(Self { name: collection.name.clone(), check: collection.read_check(read), mutations })
            })
            .collect()
    }
}

/// The answer of a landed `POST /commit`: the new version of each collection written.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CommitAnswer {
    pub versions: BTreeMap<String, u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loaded() -> LoadedCollection {
        LoadedCollection {
            name: "members".into(),
            version: 4,
            complete: false,
            documents: vec![serde_json::json!({"id": 1})],
            absent_ids: vec!["2".into()],
            reserved_id: None,
            tags: BTreeMap::from([("1".to_owned(), "t1".to_owned())]),
        }
    }

    #[test]
    fn a_read_check_carries_each_looked_up_id_with_its_loaded_tag() {
        let read = ReadSet {
            collection: "members".into(),
            scanned: false,
            ids: vec!["1".into(), "2".into()],
        };
        let check = loaded().read_check(Some(&read));
        assert_eq!(check.expected_version, 4);
        assert!(!check.scanned);
        assert_eq!(check.reads.get("1"), Some(&Some("t1".to_owned())));
        assert_eq!(check.reads.get("2"), Some(&None));
    }

    #[test]
    fn a_change_is_flat_on_the_wire() {
        let change = Change {
            name: "members".into(),
            check: loaded().read_check(None),
            mutations: Vec::new(),
        };
        let json = serde_json::to_value(&change).expect("serialises");
        assert_eq!(json["expected_version"], 4);
        assert_eq!(json["scanned"], false);
        let back: Change = serde_json::from_value(json).expect("parses");
        assert_eq!(back.check, change.check);
    }

    #[test]
    fn the_sandbox_view_leaves_the_tags_out() {
        let input = loaded().exec_input().expect("serialises");
        let json = serde_json::to_value(&input).expect("serialises");
        assert!(json.get("tags").is_none());
        assert_eq!(json["documents"], serde_json::json!([{"id": 1}]));
        assert_eq!(json["complete"], false);
    }
}
