//! How a collection's [`Index`] is stored: a small head, swapped on every
//! commit, and sealed chunks of its entries, immutable values written once
//! under tags of their own (beside the document values).
//!
//! The entries are the sealed chunks in order, then the head's open chunk.
//! A journal only updates entries in place, removes them, or appends new
//! ones at the end, so a commit rewrites only the chunks whose entries it
//! changed: a create swaps a head of at most [`OPEN_LIMIT`] entries instead
//! of the whole collection's index, and its cost no longer grows with the
//! collection. An index stored before chunks existed is a head with no
//! chunks, read as it always was.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use crate::journal::{Index, integer_key};

/// The most entries the head keeps before they are sealed into a chunk.
pub const OPEN_LIMIT: usize = 256;

/// A collection's part in a multi-collection commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lock {
    /// The transaction, whose decision (`pending`, `commit`, `abort`) is stored apart.
    pub tx: String,
    /// The stored index once the transaction commits.
    pub next: Box<StoredIndex>,
    /// Wall-clock milliseconds when the lock was taken; a lock left pending
    /// for too long may be aborted by anyone.
    pub since_ms: u64,
}

/// What is stored under a collection's index key.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredIndex {
    /// Bumped by every applied journal.
    pub version: u64,
    /// The highest integer id ever stored; reserved ids start above it.
    pub max_int_id: i64,
    /// Tags of the sealed chunks, in entry order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub chunks: Vec<String>,
    /// The open chunk: the newest entries, id key to document tag.
    pub docs: IndexMap<String, String>,
    /// Set while a journal over several collections is being committed:
    /// the fields above stay the committed state until the transaction's
    /// decision says `commit`, then `next` replaces them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lock: Option<Lock>,
}

impl StoredIndex {
    /// Whether the head alone knows the entry of each of `ids`: it is in
    /// the open chunk, or an integer above every id ever stored and so in
    /// no chunk. A lookup or a journal of only such ids needs no chunk read.
    pub fn knows<'a>(&self, mut ids: impl Iterator<Item = &'a str>) -> bool {
        ids.all(|id| self.docs.contains_key(id) || integer_key(id).is_some_and(|n| n > self.max_int_id))
    }
}

/// One sealed chunk as stored: id key to document tag, in entry order.
pub type Chunk = IndexMap<String, String>;

/// A head whose chunks were given in a number other than it names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the index names {named} chunks but {given} were read")]
pub struct ChunkCountError {
    named: usize,
    given: usize,
}

/// A head with its sealed chunks read, or only the head.
#[derive(Debug, Clone, PartialEq)]
pub struct Layout {
    /// The head as stored, without a lock.
    pub head: StoredIndex,
    /// None: unread, for ids the head [`StoredIndex::knows`].
    chunks: Option<Vec<Chunk>>,
}

/// The stored form of a new index: the head to swap in, the chunks to
/// write before it and the chunk tags it no longer names (removed after).
#[derive(Debug, Clone, PartialEq)]
pub struct Restored {
    pub head: StoredIndex,
    pub chunks: Vec<(String, Chunk)>,
    pub superseded: Vec<String>,
}

impl Layout {
    /// `chunks` are the values of `head.chunks`, in that order.
    pub fn new(mut head: StoredIndex, chunks: Vec<Chunk>) -> Result<Self, ChunkCountError> {
        if chunks.len() != head.chunks.len() {
            return Err(ChunkCountError { named: head.chunks.len(), given: chunks.len() });
        }
        head.lock = None;
        Ok(Self { head, chunks: Some(chunks) })
    }

    /// The head alone, its chunks unread. Its [`Layout::index`] holds only
    /// the open chunk's entries: right for the ids the head
    /// [`StoredIndex::knows`] and for nothing else; [`Layout::restore`]
    /// keeps every chunk as it is.
    pub fn head_only(mut head: StoredIndex) -> Self {
        head.lock = None;
        // A head without chunks is the whole index.
        let chunks = head.chunks.is_empty().then(Vec::new);
        Self { head, chunks }
    }

    /// Whether the chunks were read (the index is whole).
    pub fn is_whole(&self) -> bool {
        self.chunks.is_some()
    }

    /// The index these entries make.
    pub fn index(&self) -> Index {
        let chunks = self.chunks.as_deref().unwrap_or_default();
        let size = chunks.iter().map(IndexMap::len).sum::<usize>() + self.head.docs.len();
        let mut docs = IndexMap::with_capacity(size);
        for chunk in chunks {
            docs.extend(chunk.iter().map(|(k, t)| (k.clone(), t.clone())));
        }
        docs.extend(self.head.docs.iter().map(|(k, t)| (k.clone(), t.clone())));
        Index { version: self.head.version, max_int_id: self.head.max_int_id, docs }
    }

    /// How to store `next`, an index this layout's was turned into by
    /// [`Index::apply`]. Chunks whose entries did not change stay as they
    /// are; a changed one is written anew as `{tag_prefix}-v{version}-c{n}`.
    /// The version makes a tag name one content: a commit that retries on a
    /// newer head (a higher version) never reuses the tag of a chunk it
    /// wrote for an older one.
    pub fn restore(&self, next: &Index, tag_prefix: &str) -> Restored {
        let entries: Vec<(&String, &String)> = next.docs.iter().collect();
        let prefix = format!("{tag_prefix}-v{}", next.version);
        let mut tags = ChunkTags { prefix: &prefix, next: 0 };
        let mut stored = Restored {
            head: StoredIndex { version: next.version, max_int_id: next.max_int_id, ..StoredIndex::default() },
            chunks: Vec::new(),
            superseded: Vec::new(),
        };
        let position = match &self.chunks {
            Some(chunks) => self.restore_chunks(chunks, next, &entries, &mut tags, &mut stored),
            // Only the open chunk was read, so only it changed.
            None => {
                stored.head.chunks = self.head.chunks.clone();
                0
            }
        };
        // The open chunk, sealing full chunks off its front.
        let mut rest = &entries[position..];
        while rest.len() > OPEN_LIMIT {
            let tag = tags.next();
            stored.chunks.push((tag.clone(), owned(&rest[..OPEN_LIMIT])));
            stored.head.chunks.push(tag);
            rest = &rest[OPEN_LIMIT..];
        }
        stored.head.docs = owned(rest);
        stored
    }

    /// Keeps each unchanged chunk and rewrites each changed one into
    /// `stored`; answers where the entries after the chunks begin.
    fn restore_chunks(&self, chunks: &[Chunk], next: &Index, entries: &[(&String, &String)], tags: &mut ChunkTags<'_>, stored: &mut Restored) -> usize {
        // Every key that spells an integer counts, so `knows` stays true to
        // indexes written before string keys raised `max_int_id`.
        stored.head.max_int_id = entries.iter().filter_map(|(k, _)| integer_key(k)).fold(stored.head.max_int_id, i64::max);
        let mut position = 0;
        for (tag, chunk) in self.head.chunks.iter().zip(chunks) {
            let kept: Vec<&String> = chunk.keys().filter(|k| next.docs.contains_key(*k)).collect();
            let now = match entries.get(position..position + kept.len()) {
                Some(now) if now.iter().map(|(k, _)| *k).eq(kept.iter().copied()) => now,
                // An order the chunks cannot express: chunk everything anew.
                _ => return self.rechunk(stored),
            };
            position += kept.len();
            if kept.len() == chunk.len() && now.iter().zip(chunk.values()).all(|((_, t), old)| *t == old) {
                stored.head.chunks.push(tag.clone());
                continue;
            }
            stored.superseded.push(tag.clone());
            if !now.is_empty() {
                let tag = tags.next();
                stored.chunks.push((tag.clone(), owned(now)));
                stored.head.chunks.push(tag);
            }
        }
        // Deletes thinned the chunks out: chunk everything anew.
        if stored.head.chunks.len() > 2 * (entries.len() / OPEN_LIMIT) + 4 {
            return self.rechunk(stored);
        }
        position
    }

    /// Drops every chunk of this layout from `stored`, so all entries are chunked anew.
    fn rechunk(&self, stored: &mut Restored) -> usize {
        stored.superseded = self.head.chunks.clone();
        stored.chunks.clear();
        stored.head.chunks.clear();
        0
    }
}

/// Hands out the tags of one commit's new chunks.
struct ChunkTags<'a> {
    prefix: &'a str,
    next: usize,
}

impl ChunkTags<'_> {
    fn next(&mut self) -> String {
        let tag = format!("{}-c{}", self.prefix, self.next);
        self.next += 1;
        tag
    }
}

fn owned(entries: &[(&String, &String)]) -> Chunk {
    entries.iter().map(|(k, t)| ((*k).clone(), (*t).clone())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::{MutationRecord, Op};
    use serde_json::json;
    use std::collections::HashMap;

    /// An in-memory value store, to write and read layouts back.
    #[derive(Default)]
    struct Values(HashMap<String, Chunk>);

    impl Values {
        fn read(&self, head: &StoredIndex) -> Layout {
            Layout::new(head.clone(), head.chunks.iter().map(|t| self.0[t].clone()).collect()).unwrap()
        }

        /// Stores `next` over `layout` and reads it back.
        fn store(&mut self, layout: &Layout, next: &Index, prefix: &str) -> (Layout, Restored) {
            let restored = layout.restore(next, prefix);
            for (tag, chunk) in &restored.chunks {
                assert!(self.0.insert(tag.clone(), chunk.clone()).is_none(), "a chunk tag is never reused");
            }
            for tag in &restored.superseded {
                assert!(!restored.head.chunks.contains(tag), "a superseded chunk is not named");
                self.0.remove(tag);
            }
            (self.read(&restored.head), restored)
        }
    }

    fn insert(id: i64) -> MutationRecord {
        MutationRecord { collection: "m".into(), op: Op::Insert, id: json!(id), document: Some(json!({ "id": id })) }
    }

    fn patch(id: i64) -> MutationRecord {
        MutationRecord { collection: "m".into(), op: Op::Patch, id: json!(id), document: Some(json!({ "id": id, "x": 1 })) }
    }

    fn delete(id: i64) -> MutationRecord {
        MutationRecord { collection: "m".into(), op: Op::Delete, id: json!(id), document: None }
    }

    /// Applies `journal` to what `layout` reads, stores it, and checks the
    /// stored form reads back as exactly the applied index.
    fn commit(values: &mut Values, layout: &Layout, journal: &[MutationRecord], prefix: &str) -> (Layout, Restored) {
        let applied = layout.index().apply(&journal.iter().collect::<Vec<_>>(), prefix).unwrap();
        let (back, restored) = values.store(layout, &applied.index, prefix);
        assert_eq!(back.index(), applied.index, "the stored form reads back as the applied index, in order");
        (back, restored)
    }

    #[test]
    fn creates_write_only_the_head_until_it_fills_then_seal_it() {
        let mut values = Values::default();
        let mut layout = Layout::new(StoredIndex::default(), Vec::new()).unwrap();
        for id in 1..=OPEN_LIMIT as i64 {
            let (next, restored) = commit(&mut values, &layout, &[insert(id)], &format!("p{id}"));
            assert!(restored.chunks.is_empty() && restored.superseded.is_empty());
            layout = next;
        }
        let (next, restored) = commit(&mut values, &layout, &[insert(OPEN_LIMIT as i64 + 1)], "seal");
        assert_eq!(restored.chunks.len(), 1, "the full head became a chunk");
        assert_eq!(restored.chunks[0].1.len(), OPEN_LIMIT);
        assert_eq!(next.head.docs.len(), 1);
        let (after, restored) = commit(&mut values, &next, &[insert(OPEN_LIMIT as i64 + 2)], "after");
        assert!(restored.chunks.is_empty(), "the next create writes the head alone again");
        assert_eq!(after.head.docs.len(), 2);
    }

    #[test]
    fn a_change_rewrites_only_its_chunk_and_keeps_every_position() {
        let mut values = Values::default();
        let mut layout = Layout::new(StoredIndex::default(), Vec::new()).unwrap();
        let batch: Vec<MutationRecord> = (1..=3 * OPEN_LIMIT as i64 + 5).map(insert).collect();
        layout = commit(&mut values, &layout, &batch, "load").0;
        assert_eq!(layout.head.chunks.len(), 3, "{:?}", layout.head.chunks);
        let before = layout.head.chunks.clone();
        let (next, restored) = commit(&mut values, &layout, &[patch(OPEN_LIMIT as i64 + 3)], "patch");
        assert_eq!(restored.superseded, vec![before[1].clone()]);
        assert_eq!(next.head.chunks[0], before[0]);
        assert_eq!(next.head.chunks[2], before[2]);
        let (next, restored) = commit(&mut values, &next, &[delete(1), delete(2 * OPEN_LIMIT as i64 + 7), insert(100_000)], "mixed");
        assert_eq!(restored.superseded.len(), 2, "the two chunks holding a deleted id");
        assert_eq!(next.index().docs.last().map(|(k, _)| k.as_str()), Some("100000"));
    }

    #[test]
    fn thinned_chunks_are_merged_and_a_legacy_head_reads_as_before() {
        let mut values = Values::default();
        let legacy: StoredIndex = serde_json::from_value(json!({ "version": 3, "max_int_id": 600, "docs": (1..=600).map(|i| (i.to_string(), format!("t{i}"))).collect::<IndexMap<_, _>>() })).unwrap();
        let layout = values.read(&legacy);
        assert_eq!(layout.index().docs.len(), 600);
        let (mut layout, restored) = commit(&mut values, &layout, &[patch(5)], "first");
        assert_eq!(restored.head.chunks.len(), 2, "an oversized legacy head is chunked on its first commit");
        assert_eq!(restored.head.docs.len(), 600 - 2 * OPEN_LIMIT);
        // Delete nearly everything, one commit per id: chunks thin out and merge.
        for id in 1..=590 {
            layout = commit(&mut values, &layout, &[delete(id)], &format!("d{id}")).0;
        }
        assert!(layout.head.chunks.len() <= 4, "{:?}", layout.head.chunks);
        assert_eq!(layout.index().docs.len(), 10);
    }

    #[test]
    fn a_wrong_number_of_chunks_is_refused() {
        let head = StoredIndex { chunks: vec!["a".into()], ..StoredIndex::default() };
        assert!(Layout::new(head, Vec::new()).is_err());
    }

    #[test]
    fn an_unlocked_head_stores_no_lock_field_and_keeps_insertion_order() {
        let mut head = StoredIndex { version: 2, docs: [("10", "a"), ("2", "b"), ("x", "c")].map(|(k, t)| (k.to_owned(), t.to_owned())).into_iter().collect(), ..StoredIndex::default() };
        let text = serde_json::to_string(&head).unwrap();
        assert!(!text.contains("lock") && !text.contains("chunks"), "{text}");
        let back: StoredIndex = serde_json::from_str(&text).unwrap();
        assert_eq!(back.docs.keys().collect::<Vec<_>>(), vec!["10", "2", "x"]);
        head.lock = Some(Lock { tx: "t".into(), next: Box::new(StoredIndex { version: 3, ..StoredIndex::default() }), since_ms: 0 });
        let back: StoredIndex = serde_json::from_str(&serde_json::to_string(&head).unwrap()).unwrap();
        assert_eq!(back, head);
        assert_eq!(Layout::new(head, Vec::new()).unwrap().head.lock, None, "a layout is of the committed state");
    }

    #[test]
    fn fresh_ids_append_on_the_head_alone_exactly_as_on_the_whole_index() {
        let mut values = Values::default();
        let empty = Layout::new(StoredIndex::default(), Vec::new()).unwrap();
        let batch: Vec<MutationRecord> = (1..=3 * OPEN_LIMIT as i64 - 1).map(insert).collect();
        let layout = commit(&mut values, &empty, &batch, "load").0;
        let head = layout.head.clone();
        assert!(head.knows(["100000", "768"].into_iter()), "above every id, or in the open chunk");
        assert!(!head.knows(["1"].into_iter()), "an id in a chunk");
        assert!(!head.knows(["abc"].into_iter()) && !head.knows(["0768"].into_iter()), "a string id the open chunk lacks");
        for journal in [vec![insert(100_000)], vec![insert(3 * OPEN_LIMIT as i64), insert(3 * OPEN_LIMIT as i64 + 1)]] {
            let entries: Vec<&MutationRecord> = journal.iter().collect();
            let whole = layout.restore(&layout.index().apply(&entries, "w").unwrap().index, "w");
            let alone = Layout::head_only(head.clone());
            let partial = alone.restore(&alone.index().apply(&entries, "w").unwrap().index, "w");
            assert_eq!(partial, whole);
        }
    }

    #[test]
    fn a_string_id_spelling_an_integer_raises_the_highest_id() {
        let record = MutationRecord { collection: "m".into(), op: Op::Insert, id: json!("5000"), document: Some(json!({ "id": "5000" })) };
        let applied = Index::default().apply(&[&record], "t").unwrap();
        assert_eq!(applied.index.max_int_id, 5000, "a reserved id never meets the stored \"5000\"");
        let padded = MutationRecord { id: json!("05000"), document: Some(json!({ "id": "05000" })), ..record };
        assert_eq!(Index::default().apply(&[&padded], "t").unwrap().index.max_int_id, 0);
    }

    #[test]
    fn a_retry_on_a_newer_head_writes_its_chunks_under_new_tags() {
        let mut values = Values::default();
        let empty = Layout::new(StoredIndex::default(), Vec::new()).unwrap();
        let full: Vec<MutationRecord> = (1..=OPEN_LIMIT as i64).map(insert).collect();
        let base = commit(&mut values, &empty, &full, "load").0;
        let sealing = [insert(OPEN_LIMIT as i64 + 1)];
        let first = base.restore(&base.index().apply(&sealing.iter().collect::<Vec<_>>(), "p").unwrap().index, "p");
        // Another commit lands first; the same journal, retried with the same prefix on the newer head.
        let newer = commit(&mut values, &base, &[patch(5)], "other").0;
        let retried = newer.restore(&newer.index().apply(&sealing.iter().collect::<Vec<_>>(), "p").unwrap().index, "p");
        assert_ne!(first.chunks[0].1, retried.chunks[0].1, "the chunks hold different entries");
        assert_ne!(first.chunks[0].0, retried.chunks[0].0, "so they are written under different tags");
    }

    #[test]
    fn a_legacy_head_counts_its_integer_string_ids_when_it_is_first_chunked() {
        let mut docs: IndexMap<String, String> = IndexMap::from([("9000".to_owned(), "t9000".to_owned())]);
        docs.extend((1..=OPEN_LIMIT as i64).map(|i| (i.to_string(), format!("t{i}"))));
        let legacy = StoredIndex { version: 1, max_int_id: OPEN_LIMIT as i64, docs, ..StoredIndex::default() };
        let layout = Layout::head_only(legacy);
        assert!(layout.is_whole(), "a head without chunks is the whole index");
        let applied = layout.index().apply(&[&insert(OPEN_LIMIT as i64 + 1)], "p").unwrap();
        let restored = layout.restore(&applied.index, "p");
        assert!(!restored.head.chunks.is_empty(), "the head was sealed");
        assert!(!restored.head.knows(["9000"].into_iter()), "\"9000\" sits in a chunk now, and the head knows it might");
    }
}
