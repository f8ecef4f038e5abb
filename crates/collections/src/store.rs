//! `store`: the collections one request may read and change.
//!
//! Documents live in memory for one request. Every change is recorded in a
//! journal, and every read in a read set; the journal, not the caller, is
//! what reaches durable storage, after the read set is checked against what
//! is stored then. Reads return copies, so data changes only through these
//! operations.

use std::collections::{BTreeSet, HashSet};

use anypath_wire::{Documents, Loaded, MutationRecord, Op, ReadSet};
use indexmap::IndexMap;
use serde_json::{Map, Value};

use crate::error::OpError;
use crate::ids;
use crate::list::{Filters, ListPlan, Relation};
use crate::python;

/// Deepest nesting of lists and objects accepted in a document.
pub const MAX_DEPTH: usize = 100;

/// One collection of the request.
#[derive(Debug)]
struct Collection {
    name: String,
    raw: Option<Documents>,
    docs: IndexMap<String, Value>,
    complete: bool,
    absent: HashSet<String>,
    reserved: Option<i64>,
    scanned: bool,
    read_ids: BTreeSet<String>,
}

impl Collection {
    fn new(loaded: Loaded) -> Self {
        Self {
            name: loaded.name,
            raw: Some(loaded.documents),
            docs: IndexMap::new(),
            complete: loaded.complete,
            absent: loaded.absent_ids.into_iter().collect(),
            reserved: loaded.reserved_id,
            scanned: false,
            read_ids: BTreeSet::new(),
        }
    }

    fn missing(&self, what: &str) -> OpError {
        OpError::NeedsData(format!("{what} in '{}' was not loaded", self.name))
    }

    fn documents(&mut self) -> Result<&mut IndexMap<String, Value>, OpError> {
        if let Some(raw) = self.raw.take() {
            let parsed = match raw {
                Documents::Parsed(docs) => docs,
                Documents::Json(text) if text.trim().is_empty() => Vec::new(),
                Documents::Json(text) => serde_json::from_str::<Vec<Value>>(&text)
                    .map_err(|e| OpError::Value(format!("collection '{}' is not a JSON array of documents: {e}", self.name)))?,
            };
            for doc in parsed {
                if let Some(key) = doc.get("id").and_then(|id| ids::key(id).ok()) {
                    self.docs.insert(key, doc);
                }
            }
        }
        Ok(&mut self.docs)
    }

    /// Every document, for an operation that depends on the whole collection.
    fn scan(&mut self) -> Result<&mut IndexMap<String, Value>, OpError> {
        if !self.complete {
            return Err(self.missing("the whole collection"));
        }
        self.scanned = true;
        self.documents()
    }

    /// The key of `id`, recording the lookup; fails past a partial load.
    fn point(&mut self, id: &Value) -> Result<String, OpError> {
        let key = ids::key(id)?;
        let complete = self.complete;
        let known = self.documents()?.contains_key(&key);
        if !complete && !known && !self.absent.contains(&key) {
            return Err(self.missing(&format!("id {}", python::repr(id))));
        }
        self.read_ids.insert(key.clone());
        Ok(key)
    }

    fn new_id(&mut self) -> Result<Value, OpError> {
        if let Some(reserved) = self.reserved.take() {
            let key = reserved.to_string();
            if !self.documents()?.contains_key(&key) && !self.read_ids.contains(&key) {
                self.read_ids.insert(key);
                return Ok(Value::from(reserved));
            }
        }
        let docs = self.scan()?;
        let highest = docs.values().filter_map(|d| d.get("id").and_then(Value::as_i64)).filter(|i| *i > 0).max().unwrap_or(0);
        let mut candidate = highest + 1;
        // A client-supplied string id may hold the text of the next number.
        while docs.contains_key(&candidate.to_string()) {
            candidate += 1;
        }
        Ok(Value::from(candidate))
    }
}

/// The collections of one request, the default first, with the journal
/// and read sets they keep.
#[derive(Debug)]
pub struct Store {
    collections: Vec<Collection>,
    journal: Vec<MutationRecord>,
    /// Set once an operation reached past a partial load: whatever the
    /// caller does with that error, its answer must not be used.
    needs_data: Option<String>,
}

/// A page of a list: `{"items": [...], "page": {"limit", "offset", "total"}}`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Page {
    pub items: Vec<Value>,
    pub page: PageInfo,
}

/// Where a page lies in the matching documents.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PageInfo {
    pub limit: Option<u64>,
    pub offset: u64,
    /// How many documents matched, before paging.
    pub total: usize,
}

/// Names a collection of the store: the default, or another loaded one.
#[derive(Debug, Clone, Copy)]
pub enum Which<'a> {
    Default,
    Named(&'a str),
}

impl Store {
    /// The store over `loaded`; the first collection is the default.
    pub fn new(loaded: Vec<Loaded>) -> Self {
        Self { collections: loaded.into_iter().map(Collection::new).collect(), journal: Vec::new(), needs_data: None }
    }

    /// Names of the loaded collections, the default first.
    pub fn names(&self) -> Vec<&str> {
        self.collections.iter().map(|c| c.name.as_str()).collect()
    }

    fn index(&self, which: Which<'_>) -> Result<usize, OpError> {
        match which {
            Which::Default if self.collections.is_empty() => Err(OpError::NoCollection),
            Which::Default => Ok(0),
            Which::Named(name) => self
                .collections
                .iter()
                .position(|c| c.name == name)
                .ok_or_else(|| OpError::NotLoaded(format!("collection '{name}' was not loaded for this request"))),
        }
    }

    fn collection(&mut self, which: Which<'_>) -> Result<&mut Collection, OpError> {
        let index = self.index(which)?;
        Ok(&mut self.collections[index])
    }

    fn record(&mut self, which: usize, op: Op, id: Value, document: Option<Value>) {
        let collection = self.collections[which].name.clone();
        self.journal.push(MutationRecord { collection, op, id, document });
    }

    /// Every document, in insertion order.
    pub fn get_all(&mut self, which: Which<'_>) -> Result<Vec<Value>, OpError> {
        Ok(self.collection(which)?.scan()?.values().cloned().collect())
    }

    /// The document with this id, or `None`.
    pub fn get(&mut self, which: Which<'_>, id: &Value) -> Result<Option<Value>, OpError> {
        let collection = self.collection(which)?;
        let key = collection.point(id)?;
        Ok(collection.documents()?.get(&key).cloned())
    }

    /// Adds `document`, with the next integer id when it has none. Returns
    /// the document as stored (its id set).
    pub fn insert(&mut self, which: Which<'_>, document: Value) -> Result<Value, OpError> {
        let mut document = check_document(document, "document")?;
        let index = self.index(which)?;
        let collection = &mut self.collections[index];
        let id = match document.get("id").filter(|id| !id.is_null()) {
            None => {
                let id = collection.new_id()?;
                document.insert("id".into(), id.clone());
                id
            }
            Some(id) => {
                let id = id.clone();
                ids::check_new(&id)?;
                let key = collection.point(&id)?;
                if collection.documents()?.contains_key(&key) {
                    return Err(OpError::Exists(format!("id {} already exists in '{}'", python::repr(&id), collection.name)));
                }
                id
            }
        };
        let stored = Value::Object(document);
        let key = ids::key(&id)?;
        collection.documents()?.insert(key, stored.clone());
        self.record(index, Op::Insert, id, Some(stored.clone()));
        Ok(stored)
    }

    /// Replaces the whole document (its id stays); `None` when there is none.
    pub fn replace(&mut self, which: Which<'_>, id: &Value, document: Value) -> Result<Option<Value>, OpError> {
        let mut document = check_document(document, "document")?;
        let index = self.index(which)?;
        let collection = &mut self.collections[index];
        let key = collection.point(id)?;
        let docs = collection.documents()?;
        let Some(current_id) = docs.get(&key).and_then(|d| d.get("id")).cloned() else { return Ok(None) };
        document.insert("id".into(), current_id.clone());
        let stored = Value::Object(document);
        docs.insert(key, stored.clone());
        self.record(index, Op::Replace, current_id, Some(stored.clone()));
        Ok(Some(stored))
    }

    /// Merges `delta` into the document (the id never changes); `None` when absent.
    pub fn patch(&mut self, which: Which<'_>, id: &Value, delta: Value) -> Result<Option<Value>, OpError> {
        let delta = check_document(delta, "delta")?;
        let index = self.index(which)?;
        let collection = &mut self.collections[index];
        let key = collection.point(id)?;
        let docs = collection.documents()?;
        let Some(Value::Object(mut stored)) = docs.get(&key).cloned() else { return Ok(None) };
        let current_id = stored.get("id").cloned().unwrap_or(Value::Null);
        for (field, value) in delta {
            if field != "id" {
                stored.insert(field, value);
            }
        }
        let stored = Value::Object(stored);
        docs.insert(key, stored.clone());
        self.record(index, Op::Patch, current_id, Some(stored.clone()));
        Ok(Some(stored))
    }

    /// Removes the document; true when it existed.
    pub fn delete(&mut self, which: Which<'_>, id: &Value) -> Result<bool, OpError> {
        let index = self.index(which)?;
        let collection = &mut self.collections[index];
        let key = collection.point(id)?;
        let Some(current) = collection.documents()?.shift_remove(&key) else { return Ok(false) };
        let current_id = current.get("id").cloned().unwrap_or(Value::Null);
        self.record(index, Op::Delete, current_id, None);
        Ok(true)
    }

    /// Documents matching every filter of `filters` (`{"field" or "field__op": value}`).
    pub fn search(&mut self, which: Which<'_>, filters: &Value) -> Result<Vec<Value>, OpError> {
        let filters = Filters::keyed(filters)?;
        let docs = self.collection(which)?.scan()?;
        Ok(docs.values().filter(|d| filters.matches(d)).cloned().collect())
    }

    /// A page of the documents that pass the plan's filters and text,
    /// sorted, with embeds and expands filled in.
    pub fn list(&mut self, which: Which<'_>, plan: &ListPlan) -> Result<Page, OpError> {
        let index = self.index(which)?;
        let docs = self.collections[index].scan()?;
        let mut matching: Vec<&Value> = docs
            .values()
            .filter(|d| plan.filters.matches(d))
            .filter(|d| plan.q.as_deref().is_none_or(|q| crate::filter::mentions(d, q)))
            .collect();
        // Least significant key first: each sort is stable.
        for (field, descending) in plan.sort.iter().rev() {
            let (mut present, missing): (Vec<&Value>, Vec<&Value>) =
                matching.into_iter().partition(|d| d.get(field).is_some_and(|v| !v.is_null()));
            present.sort_by(|a, b| {
                let order = sort_order(&a[field.as_str()], &b[field.as_str()]);
                if *descending { order.reverse() } else { order }
            });
            present.extend(missing);
            matching = present;
        }
        let total = matching.len();
        let start = usize::try_from(plan.offset).unwrap_or(usize::MAX).min(total);
        let end = plan.limit.map_or(total, |limit| start.saturating_add(usize::try_from(limit).unwrap_or(usize::MAX)).min(total));
        let mut items: Vec<Value> = matching[start..end].iter().map(|d| (*d).clone()).collect();
        for relation in &plan.embed {
            self.embed(&mut items, relation)?;
        }
        for relation in &plan.expand {
            self.expand(&mut items, relation)?;
        }
        Ok(Page { items, page: PageInfo { limit: plan.limit, offset: plan.offset, total } })
    }

    /// Another loaded collection's documents (scanned), or none when it was not loaded.
    fn related(&mut self, name: &str) -> Result<Vec<Value>, OpError> {
        match self.collections.iter_mut().find(|c| c.name == name) {
            Some(other) => Ok(other.scan()?.values().cloned().collect()),
            None => Ok(Vec::new()),
        }
    }

    fn embed(&mut self, items: &mut [Value], relation: &Relation) -> Result<(), OpError> {
        // The children grouped by their key once, not searched per item.
        let mut by_parent: IndexMap<String, Vec<Value>> = IndexMap::new();
        for child in self.related(&relation.collection)? {
            if let Some(parent) = child.get(&relation.key).filter(|v| !v.is_null()) {
                by_parent.entry(python::str_of(parent)).or_default().push(child.clone());
            }
        }
        for item in items.iter_mut() {
            let id = python::str_of(item.get("id").unwrap_or(&Value::Null));
            let children = by_parent.get(&id).cloned().unwrap_or_default();
            if let Value::Object(map) = item {
                map.insert(relation.field.clone(), Value::Array(children));
            }
        }
        Ok(())
    }

    fn expand(&mut self, items: &mut [Value], relation: &Relation) -> Result<(), OpError> {
        let parents: IndexMap<String, Value> =
            self.related(&relation.collection)?.into_iter().map(|p| (python::str_of(p.get("id").unwrap_or(&Value::Null)), p)).collect();
        for item in items.iter_mut() {
            let key = python::str_of(item.get(&relation.key).unwrap_or(&Value::Null));
            if let (Some(found), Value::Object(map)) = (parents.get(&key), item) {
                map.insert(relation.field.clone(), found.clone());
            }
        }
        Ok(())
    }

    /// Why the request must run again on whole collections, if an
    /// operation reached past a partial load (even one whose error was caught).
    pub fn needs_data(&self) -> Option<&str> {
        self.needs_data.as_deref()
    }

    /// Remembers `error` when it asks for more data; returns it unchanged.
    pub fn note(&mut self, error: OpError) -> OpError {
        if let OpError::NeedsData(message) = &error {
            self.needs_data.get_or_insert_with(|| message.clone());
        }
        error
    }

    /// The changes made, in order.
    pub fn journal(&self) -> &[MutationRecord] {
        &self.journal
    }

    /// Takes the journal out of the store.
    pub fn take_journal(&mut self) -> Vec<MutationRecord> {
        std::mem::take(&mut self.journal)
    }

    /// What was read of each collection: only those scanned or looked into.
    pub fn reads(&self) -> Vec<ReadSet> {
        self.collections
            .iter()
            .filter(|c| c.scanned || !c.read_ids.is_empty())
            .map(|c| ReadSet { collection: c.name.clone(), scanned: c.scanned, ids: c.read_ids.iter().cloned().collect() })
            .collect()
    }
}

/// Python's sort key of a field value: numbers, then text, then anything
/// else by its `json.dumps(sort_keys=True)` text.
fn sort_order(a: &Value, b: &Value) -> std::cmp::Ordering {
    fn group(v: &Value) -> u8 {
        match v {
            Value::Number(_) => 0,
            Value::String(_) => 1,
            _ => 2,
        }
    }
    match (group(a), group(b)) {
        (0, 0) => python::compare(a, b).unwrap_or(std::cmp::Ordering::Equal),
        (1, 1) => a.as_str().cmp(&b.as_str()),
        (2, 2) => python::dumps_sorted(a).cmp(&python::dumps_sorted(b)),
        (x, y) => x.cmp(&y),
    }
}

/// A document as a block may store it: an object, nested at most [`MAX_DEPTH`] levels.
fn check_document(value: Value, what: &str) -> Result<Map<String, Value>, OpError> {
    if too_deep(&value) {
        return Err(OpError::Value(format!("{what} nests deeper than {MAX_DEPTH} levels")));
    }
    match value {
        Value::Object(map) => Ok(map),
        other => Err(OpError::Type(format!("{what} must be a dict, not {}", python::type_name(&other)))),
    }
}

fn too_deep(value: &Value) -> bool {
    let mut pending = vec![(value, 1usize)];
    while let Some((current, depth)) = pending.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match current {
            Value::Object(map) => Box::new(map.values()),
            Value::Array(items) => Box::new(items.iter()),
            _ => continue,
        };
        if depth > MAX_DEPTH {
            return true;
        }
        pending.extend(children.map(|child| (child, depth + 1)));
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::list::ListArgs;
    use serde_json::json;

    fn whole(name: &str, docs: Value) -> Loaded {
        Loaded { name: name.into(), documents: Documents::Json(docs.to_string()), complete: true, absent_ids: vec![], reserved_id: None }
    }

    fn members() -> Store {
        Store::new(vec![whole(
            "members",
            json!([{"id": 1, "name": "ada", "age": 36}, {"id": 2, "name": "Bob", "age": 17}, {"id": "x", "name": "cy"}]),
        )])
    }

    #[test]
    fn crud_keeps_a_journal_and_the_reads() {
        let mut store = members();
        assert_eq!(store.get(Which::Default, &json!("1")).unwrap(), Some(json!({"id": 1, "name": "ada", "age": 36})));
        let created = store.insert(Which::Default, json!({"name": "dee"})).unwrap();
        assert_eq!(created["id"], json!(3), "one past the highest integer id");
        assert!(matches!(store.insert(Which::Default, json!({"id": "x"})), Err(OpError::Exists(m)) if m == "id 'x' already exists in 'members'"));
        assert_eq!(store.patch(Which::Default, &json!(2), json!({"age": 18, "id": 9})).unwrap().unwrap(), json!({"id": 2, "name": "Bob", "age": 18}));
        assert_eq!(store.replace(Which::Default, &json!("x"), json!({"name": "z"})).unwrap().unwrap(), json!({"id": "x", "name": "z"}));
        assert!(store.delete(Which::Default, &json!(1)).unwrap());
        assert!(!store.delete(Which::Default, &json!(1)).unwrap());
        assert_eq!(store.replace(Which::Default, &json!(42), json!({})).unwrap(), None);
        let ops: Vec<(Op, Value)> = store.journal().iter().map(|m| (m.op, m.id.clone())).collect();
        assert_eq!(ops, vec![(Op::Insert, json!(3)), (Op::Patch, json!(2)), (Op::Replace, json!("x")), (Op::Delete, json!(1))]);
        let reads = store.reads();
        assert!(reads[0].scanned, "the next id depended on every id");
        assert_eq!(reads[0].ids, vec!["1", "2", "42", "x"]);
    }

    #[test]
    fn a_partial_load_answers_its_ids_and_asks_for_more_past_them() {
        let partial = Loaded {
            name: "m".into(),
            documents: Documents::Parsed(vec![json!({"id": 7, "a": 1})]),
            complete: false,
            absent_ids: vec!["8".into()],
            reserved_id: Some(12),
        };
        let mut store = Store::new(vec![partial]);
        assert!(store.get(Which::Default, &json!(7)).unwrap().is_some());
        assert_eq!(store.get(Which::Default, &json!(8)).unwrap(), None);
        assert!(matches!(store.get(Which::Default, &json!(9)), Err(OpError::NeedsData(_))));
        assert_eq!(store.insert(Which::Default, json!({})).unwrap()["id"], json!(12), "the reserved id");
        assert!(matches!(store.insert(Which::Default, json!({})), Err(OpError::NeedsData(_))), "a second insert needs the highest id");
        assert!(matches!(store.get_all(Which::Default), Err(OpError::NeedsData(_))));
        assert!(matches!(store.get(Which::Named("n"), &json!(1)), Err(OpError::NotLoaded(_))));
        assert!(matches!(Store::new(vec![]).get(Which::Default, &json!(1)), Err(OpError::NoCollection)));
    }

    #[test]
    fn lists_filter_sort_page_and_relate() {
        let mut store = Store::new(vec![
            whole("posts", json!([{"id": 1, "t": "b", "n": 2}, {"id": 2, "t": "a"}, {"id": 3, "t": "c", "n": 1}, {"id": 4, "t": "A", "n": "z"}])),
            whole("comments", json!([{"id": 10, "postId": 1}, {"id": 11, "postId": "1"}, {"id": 12, "postId": 3}])),
        ]);
        let args = ListArgs { sort: vec![("n".into(), false)], limit: Some(3), ..ListArgs::default() };
        let page = store.list(Which::Default, &ListPlan::from_args(&args).unwrap()).unwrap();
        let ids: Vec<&Value> = page.items.iter().map(|d| &d["id"]).collect();
        assert_eq!(ids, vec![&json!(3), &json!(1), &json!(4)], "numbers, then text, missing last");
        assert_eq!(page.page, PageInfo { limit: Some(3), offset: 0, total: 4 });
        let args = ListArgs {
            filters: vec![("n".into(), "gte".into(), vec![json!("1")])],
            sort: vec![("t".into(), true)],
            embed: vec![Relation { field: "comments".into(), collection: "comments".into(), key: "postId".into() }],
            ..ListArgs::default()
        };
        let page = store.list(Which::Default, &ListPlan::from_args(&args).unwrap()).unwrap();
        assert_eq!(page.items.iter().map(|d| d["id"].clone()).collect::<Vec<_>>(), vec![json!(3), json!(1), json!(4)], "text against text orders as text");
        assert_eq!(page.items[1]["comments"].as_array().unwrap().len(), 2, "an id and its text join");
        let args = ListArgs { q: Some("A".into()), ..ListArgs::default() };
        assert_eq!(store.list(Which::Default, &ListPlan::from_args(&args).unwrap()).unwrap().page.total, 2);
        assert!(store.reads().iter().all(|r| r.scanned));
    }

    #[test]
    fn documents_must_be_objects_within_the_depth() {
        let mut store = members();
        assert!(matches!(store.insert(Which::Default, json!([1])), Err(OpError::Type(_))));
        let mut deep = json!(1);
        for _ in 0..=MAX_DEPTH {
            deep = json!({"a": deep});
        }
        assert!(matches!(store.insert(Which::Default, deep), Err(OpError::Value(_))));
        assert!(matches!(store.insert(Which::Default, json!({"id": true})), Err(OpError::Type(_))));
        assert!(store.journal().is_empty());
    }
}
