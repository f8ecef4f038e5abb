//! The store's two calls as the gateway makes them: `POST /load` (what a plan
//! needs of each collection, with each document's tag) and `POST /commit`
//! (a block's journal with what it read, re-checked before it lands).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;

use crate::exec::{MutationRecord, ReadSet};
use crate::exec_request::CollectionInput;
use crate::loaded::{Documents, Loaded};

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

/// One collection as `POST /load` answers it: the collection a run works
/// on, with the index version and document tags the commit's read check
/// needs. On the wire it is one flat object (`name`, `version`, `complete`,
/// `documents`, `absent_ids`, `reserved_id`, `tags`).
#[derive(Debug, Clone, Deserialize)]
#[serde(from = "FlatCollection")]
pub struct LoadedCollection {
    pub collection: Loaded,
    /// The index version read.
    pub version: u64,
    /// Tag of each loaded document, echoed back in the commit's read check.
    pub tags: BTreeMap<String, String>,
}

/// A [`LoadedCollection`] as it is read off the wire.
#[derive(Deserialize)]
struct FlatCollection {
    name: String,
    version: u64,
    complete: bool,
    documents: Vec<Value>,
    absent_ids: Vec<String>,
    reserved_id: Option<i64>,
    tags: BTreeMap<String, String>,
}

/// A [`LoadedCollection`] as it is written, borrowed (documents can be megabytes).
#[derive(Serialize)]
struct FlatCollectionRef<'a> {
    name: &'a str,
    version: u64,
    complete: bool,
    documents: &'a Documents,
    absent_ids: &'a [String],
    reserved_id: Option<i64>,
    tags: &'a BTreeMap<String, String>,
}

impl From<FlatCollection> for LoadedCollection {
    fn from(flat: FlatCollection) -> Self {
        let collection = Loaded {
            name: flat.name,
            documents: Documents::Parsed(flat.documents),
            complete: flat.complete,
            absent_ids: flat.absent_ids,
            reserved_id: flat.reserved_id,
        };
        Self { collection, version: flat.version, tags: flat.tags }
    }
}

impl Serialize for LoadedCollection {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let Loaded { name, documents, complete, absent_ids, reserved_id } = &self.collection;
        FlatCollectionRef {
            name,
            version: self.version,
            complete: *complete,
            documents,
            absent_ids,
            reserved_id: *reserved_id,
            tags: &self.tags,
        }
        .serialize(serializer)
    }
}

impl LoadedCollection {
    /// What the sandbox is handed of this collection (the tags stay with the caller).
    pub fn exec_input(&self) -> Result<CollectionInput, serde_json::Error> {
        let collection = &self.collection;
        Ok(CollectionInput {
            name: collection.name.clone(),
            version: self.version,
            documents: serde_json::value::to_raw_value(&collection.documents)?,
            complete: collection.complete,
            absent_ids: collection.absent_ids.clone(),
            reserved_id: collection.reserved_id,
        })
    }

    /// The collection for the data operations, its documents moved out;
    /// the name, version and tags stay here for the commit's read check.
    pub fn take_collection(&mut self) -> Loaded {
        let documents = std::mem::replace(&mut self.collection.documents, Documents::Parsed(Vec::new()));
        Loaded { documents, ..self.collection.clone() }
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
                let name = &collection.collection.name;
                let mutations: Vec<_> = mutations.iter().filter(|m| &m.collection == name).cloned().collect();
                let read = reads.iter().find(|r| &r.collection == name);
                if mutations.is_empty() && read.is_none() {
                    return None;
                }
                Some(Self { name: name.clone(), check: collection.read_check(read), mutations })
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
            collection: Loaded {
                name: "members".into(),
                documents: Documents::Parsed(vec![serde_json::json!({"id": 1})]),
                complete: false,
                absent_ids: vec!["2".into()],
                reserved_id: None,
            },
            version: 4,
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

    #[test]
    fn a_loaded_collection_is_one_flat_object_on_the_wire() {
        let json = serde_json::to_value(loaded()).expect("serialises");
        let expected = serde_json::json!({
            "name": "members", "version": 4, "complete": false, "documents": [{"id": 1}],
            "absent_ids": ["2"], "reserved_id": null, "tags": {"1": "t1"},
        });
        assert_eq!(json, expected);
        let back: LoadedCollection = serde_json::from_value(json).expect("parses");
        assert_eq!(serde_json::to_value(&back).expect("serialises"), expected);
        assert!(matches!(back.collection.documents, Documents::Parsed(ref docs) if docs.len() == 1));
    }

    #[test]
    fn taking_the_collection_keeps_what_the_commit_checks() {
        let mut loaded = loaded();
        let collection = loaded.take_collection();
        assert!(matches!(collection.documents, Documents::Parsed(ref docs) if docs.len() == 1));
        assert_eq!((collection.name.as_str(), collection.absent_ids.as_slice()), ("members", ["2".to_owned()].as_slice()));
        assert_eq!(loaded.read_check(None).expected_version, 4);
        assert_eq!(loaded.tags.len(), 1);
    }
}
