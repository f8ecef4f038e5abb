//! Documents held in a collection's index head.
//!
//! A commit writes each new document version as a value of its own, then
//! swaps the head; on a key-value store where every write is its own
//! durable transaction (Spin's SQLite store) a create paid for both. The
//! head instead holds the newest small documents itself, so a create swaps
//! the head alone.
//!
//! The head holds a document only while its index entry is in the head's
//! open chunk, and at most [`INLINE_DOCS`] documents or [`INLINE_BYTES`] of
//! them. A commit that would pass either moves every document the head
//! holds out to values of their own, written in one batch with its other
//! values, and the head starts empty again: one commit in many pays for the
//! batch; so does a commit whose entries are sealed into a chunk. A
//! document moved out gets a tag of this commit attempt's own, its entry
//! re-tagged in the open chunk or in a chunk the commit writes anyway: two
//! commits racing to move the same document never share a value, so one
//! that retries or gives up removes only what it wrote itself. A reader
//! holding an older head still finds the documents in that head.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::journal::id_key;
use crate::stored_index::Restored;

/// The most documents a head holds itself.
pub const INLINE_DOCS: usize = 64;
/// The most bytes of JSON a head holds in documents.
pub const INLINE_BYTES: usize = 16 * 1024;

/// Where a commit's documents go.
#[derive(Debug, Default, PartialEq)]
pub struct Placed {
    /// What the new head holds itself.
    pub inline: BTreeMap<String, Value>,
    /// What is written as values of their own, by tag.
    pub values: Vec<(String, Value)>,
}

/// Places the documents of a commit whose new index is `stored`: `held` is
/// what the head it applies to holds, `superseded` the tags the commit
/// replaced or removed, `written` its new documents by tag. A held document
/// moved out is re-tagged `{move_prefix}-s{n}` in `stored`; `move_prefix`
/// must be unique to the commit attempt.
pub fn place(held: &BTreeMap<String, Value>, superseded: &[String], written: Vec<(String, Value)>, stored: &mut Restored, move_prefix: &str) -> Placed {
    let kept: Vec<(&String, &Value)> = held.iter().filter(|(tag, _)| !superseded.contains(tag)).collect();
    let count = kept.len() + written.len();
    let bytes: usize = kept.iter().map(|(_, doc)| encoded_len(doc)).chain(written.iter().map(|(_, doc)| encoded_len(doc))).sum();
    let room = count <= INLINE_DOCS && bytes <= INLINE_BYTES;
    let mut placed = Placed::default();
    for (tag, doc) in written {
        if room && in_open_chunk(stored, &tag, &doc) {
            placed.inline.insert(tag, doc);
        } else {
            // A tag of this commit's own already.
            placed.values.push((tag, doc));
        }
    }
    for (n, (tag, doc)) in kept.into_iter().enumerate() {
        if room && in_open_chunk(stored, tag, doc) {
            placed.inline.insert(tag.clone(), doc.clone());
            continue;
        }
        let moved = format!("{move_prefix}-s{n}");
        let tag = if retag(stored, doc, tag, &moved) { moved } else { tag.clone() };
        placed.values.push((tag, doc.clone()));
    }
    placed
}

/// Whether `doc`'s entry is in the head's open chunk under `tag`.
fn in_open_chunk(stored: &Restored, tag: &str, doc: &Value) -> bool {
    id_key(&doc["id"]).is_some_and(|id| stored.head.docs.get(&id).is_some_and(|named| named == tag))
}

/// Names `doc` by `moved` instead of `tag` in the open chunk or in a chunk
/// the commit writes; false when neither holds its entry.
fn retag(stored: &mut Restored, doc: &Value, tag: &str, moved: &str) -> bool {
    let Some(id) = id_key(&doc["id"]) else { return false };
    let entries = std::iter::once(&mut stored.head.docs).chain(stored.chunks.iter_mut().map(|(_, chunk)| chunk));
    for entries in entries {
        if let Some(named) = entries.get_mut(&id).filter(|named| named.as_str() == tag) {
            moved.clone_into(named);
            return true;
        }
    }
    false
}

/// The length of `doc` as JSON.
fn encoded_len(doc: &Value) -> usize {
    serde_json::to_vec(doc).map_or(INLINE_BYTES + 1, |bytes| bytes.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stored_index::StoredIndex;
    use serde_json::json;

    fn docs(range: std::ops::Range<usize>) -> Vec<(String, Value)> {
        range.map(|n| (format!("t-{n}"), json!({"id": n}))).collect()
    }

    /// A new index whose open chunk names each of `docs` by its tag.
    fn open(docs: &[(String, Value)]) -> Restored {
        let head = StoredIndex { docs: docs.iter().map(|(tag, doc)| (doc["id"].to_string(), tag.clone())).collect(), ..StoredIndex::default() };
        Restored { head, chunks: Vec::new(), superseded: Vec::new() }
    }

    #[test]
    fn new_documents_stay_in_the_head_while_it_has_room() {
        let held: BTreeMap<String, Value> = docs(0..3).into_iter().collect();
        let mut stored = open(&docs(0..4));
        let placed = place(&held, &[], docs(3..4), &mut stored, "p-v2");
        assert!(placed.values.is_empty());
        assert_eq!(placed.inline.keys().cloned().collect::<Vec<_>>(), vec!["t-0", "t-1", "t-2", "t-3"]);
    }

    #[test]
    fn a_replaced_or_removed_document_leaves_the_head() {
        let held: BTreeMap<String, Value> = docs(0..3).into_iter().collect();
        let mut all = docs(0..3);
        all[1] = ("t-9".into(), json!({"id": 1, "v": 2}));
        let mut stored = open(&all);
        let placed = place(&held, &["t-1".into()], vec![all[1].clone()], &mut stored, "p-v2");
        assert_eq!(placed.inline.keys().cloned().collect::<Vec<_>>(), vec!["t-0", "t-2", "t-9"]);
    }

    #[test]
    fn a_full_head_moves_every_document_out_under_tags_of_the_commit_and_renames_their_entries() {
        let held: BTreeMap<String, Value> = docs(0..INLINE_DOCS).into_iter().collect();
        let mut stored = open(&docs(1..INLINE_DOCS + 2));
        let placed = place(&held, &["t-0".into()], docs(INLINE_DOCS..INLINE_DOCS + 2), &mut stored, "p-v9");
        assert!(placed.inline.is_empty(), "the head starts empty again");
        assert_eq!(placed.values.len(), INLINE_DOCS + 1, "the held ones still named, and both new ones");
        for (tag, doc) in &placed.values {
            assert_eq!(stored.head.docs[&doc["id"].to_string()], *tag, "the entry names the value written");
        }
        let moved: Vec<&String> = placed.values.iter().map(|(tag, _)| tag).filter(|tag| tag.starts_with("p-v9-s")).collect();
        assert_eq!(moved.len(), INLINE_DOCS - 1, "every held document moved under a tag of this attempt");
        assert!(!placed.values.iter().any(|(tag, _)| tag == "t-0"), "a superseded one is not written");
    }

    #[test]
    fn a_document_whose_entry_was_sealed_into_a_chunk_moves_out() {
        let held: BTreeMap<String, Value> = docs(0..2).into_iter().collect();
        let mut stored = open(&docs(1..2));
        stored.chunks.push(("chunk".into(), [("0".to_owned(), "t-0".to_owned())].into_iter().collect()));
        let placed = place(&held, &[], Vec::new(), &mut stored, "p-v3");
        assert_eq!(placed.inline.keys().cloned().collect::<Vec<_>>(), vec!["t-1"]);
        assert_eq!(placed.values, vec![("p-v3-s0".to_owned(), json!({"id": 0}))]);
        assert_eq!(stored.chunks[0].1["0"], "p-v3-s0", "the new chunk names the moved value");
    }

    #[test]
    fn documents_too_large_together_are_values() {
        let large = vec![("big".to_owned(), json!({"id": 1, "text": "x".repeat(INLINE_BYTES)}))];
        let mut stored = open(&large);
        let placed = place(&BTreeMap::new(), &[], large, &mut stored, "p-v1");
        assert!(placed.inline.is_empty());
        assert_eq!(placed.values.len(), 1);
    }
}
