//! An image's body cut into segments by where its bytes lie in memory, each
//! compressed on its own and named by the SHA-256 of what is stored.
//!
//! A segment holds the captured chunks of one [`WINDOW`] of one memory (the
//! globals are a segment of their own). A run that changes a few pages
//! changes the segments of those windows only: every other segment comes
//! out byte for byte as in the image before, with the same name, so a store
//! that already holds it keeps it instead of writing it again.

use std::collections::HashMap;

use bytes::Bytes;
use sha2::{Digest, Sha256};

use super::image::{CHUNK, StateError};

/// Bytes of memory address space one segment covers.
pub(crate) const WINDOW: usize = 16 * CHUNK;
/// The most a segment's bytes may be before compression: a window, or the
/// globals (a few thousand at most).
pub(crate) const MAX_RAW: usize = 1 << 20;

/// One stored segment: its length before and after compression and the
/// SHA-256 of its stored bytes, hex.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Segment {
    pub(crate) raw: u32,
    pub(crate) stored: u32,
    pub(crate) sha256: String,
}

/// Where a segment's bytes lie: memory `.0`'s window `.1`, or the
/// globals ([`GLOBALS`]).
pub(crate) type SegmentKey = (u32, u32);
/// The key of the globals' segment.
pub(crate) const GLOBALS: SegmentKey = (u32::MAX, 0);

/// The raw lengths of the segments of a body that starts with
/// `globals_bytes` of globals, then the chunks of `runs` (per memory,
/// `[offset, length]`, ascending) in order.
#[cfg(test)]
pub(crate) fn cut(globals_bytes: usize, runs: &[Vec<[u32; 2]>]) -> Vec<usize> {
    cut_keyed(globals_bytes, runs).into_iter().map(|(_, len)| len).collect()
}

/// [`cut`], each length with where its segment lies.
pub(crate) fn cut_keyed(globals_bytes: usize, runs: &[Vec<[u32; 2]>]) -> Vec<(SegmentKey, usize)> {
    let mut keyed = vec![(GLOBALS, globals_bytes)];
    for (index, memory) in runs.iter().enumerate() {
        let mut window = usize::MAX;
        for [start, len] in memory {
            let (mut at, end) = (*start as usize, *start as usize + *len as usize);
            while at < end {
                let this = at / WINDOW;
                let upto = ((this + 1) * WINDOW).min(end);
                match keyed.last_mut() {
                    Some((_, last)) if this == window => *last += upto - at,
                    _ => keyed.push(((index as u32, this as u32), upto - at)),
                }
                window = this;
                at = upto;
            }
        }
    }
    keyed
}

/// A live session's segments as its last image held them, by where they
/// lie: a capture compresses and hashes only the windows that changed since
/// (each raw window is compared by its XXH3-128, which only this session's
/// own bytes ever feed).
#[derive(Default)]
pub struct SegmentMemo {
    held: HashMap<SegmentKey, (u128, Segment, Bytes)>,
    bytes: usize,
}

/// Below this many stored bytes a session's segments are not remembered:
/// compressing a small image again is cheaper than keeping it.
pub(crate) const MEMO_FROM: usize = 512 << 10;

impl SegmentMemo {
    /// The stored bytes it holds.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// The memo of segments `keyed` (raw pieces of `body`) stored as
    /// `stored`; `None` below [`MEMO_FROM`].
    pub(crate) fn of(body: &[u8], keyed: &[(SegmentKey, usize)], segments: &[Segment], stored: &[&[u8]]) -> Option<Self> {
        let total: usize = stored.iter().map(|s| s.len()).sum();
        if total < MEMO_FROM || keyed.len() != segments.len() || keyed.len() != stored.len() {
            return None;
        }
        let mut items = Vec::with_capacity(keyed.len());
        let mut at = 0;
        for ((key, len), (segment, bytes)) in keyed.iter().zip(segments.iter().zip(stored)) {
            items.push((*key, body.get(at..at + len)?, segment, *bytes));
            at += len;
        }
        // Hashed side by side on the cores: this is on a resume's path.
        let held = on_cores(&items, |(key, piece, segment, bytes)| (*key, (xxhash_rust::xxh3::xxh3_128(piece), (*segment).clone(), Bytes::copy_from_slice(bytes))));
        Some(Self { held: held.into_iter().collect(), bytes: total })
    }
}

/// Compresses each segment of `body` (lengths from [`cut`]), side by side
/// on the cores, and names it.
#[cfg(test)]
pub(crate) fn compress(body: &[u8], lengths: &[usize]) -> Vec<(Segment, Vec<u8>)> {
    let mut pieces = Vec::with_capacity(lengths.len());
    let mut at = 0;
    for len in lengths {
        pieces.push(&body[at..at + len]);
        at += len;
    }
    on_cores(&pieces, |piece| {
        let stored = lz4_flex::block::compress(piece);
        let sha256 = hex::encode(Sha256::digest(&stored));
        (Segment { raw: piece.len() as u32, stored: stored.len() as u32, sha256 }, stored)
    })
}

/// [`compress`], reusing from `memo` every segment whose raw bytes are
/// those it remembers at the same place, and leaving in it this capture's
/// segments (none when they are too few bytes to be worth it).
pub(crate) fn compress_remembering(body: &[u8], keyed: &[(SegmentKey, usize)], memo: &mut Option<SegmentMemo>) -> Vec<(Segment, Bytes)> {
    let mut pieces = Vec::with_capacity(keyed.len());
    let mut at = 0;
    for (key, len) in keyed {
        pieces.push((*key, &body[at..at + len]));
        at += len;
    }
    let known = memo.as_ref();
    let made: Vec<(u128, Segment, Bytes)> = on_cores(&pieces, |(key, piece)| {
        let hash = xxhash_rust::xxh3::xxh3_128(piece);
        if let Some((seen, segment, stored)) = known.and_then(|memo| memo.held.get(key))
            && *seen == hash
            && segment.raw as usize == piece.len()
        {
            return (hash, segment.clone(), stored.clone());
        }
        let stored = lz4_flex::block::compress(piece);
        let sha256 = hex::encode(Sha256::digest(&stored));
        (hash, Segment { raw: piece.len() as u32, stored: stored.len() as u32, sha256 }, Bytes::from(stored))
    });
    let total: usize = made.iter().map(|(_, _, stored)| stored.len()).sum();
    *memo = (total >= MEMO_FROM).then(|| SegmentMemo {
        held: keyed.iter().zip(&made).map(|((key, _), (hash, segment, stored))| (*key, (*hash, segment.clone(), stored.clone()))).collect(),
        bytes: total,
    });
    made.into_iter().map(|(_, segment, stored)| (segment, stored)).collect()
}

/// Decompresses `stored` (each segment's stored bytes, in order) into one
/// body of `body_bytes`, side by side on the cores.
pub(crate) fn decompress(segments: &[Segment], stored: &[&[u8]], body: &mut [u8]) -> Result<(), StateError> {
    let mut targets: Vec<(&Segment, &[u8], &mut [u8])> = Vec::with_capacity(segments.len());
    let mut rest: &mut [u8] = body;
    for (segment, bytes) in segments.iter().zip(stored) {
        if segment.raw as usize > rest.len() {
            return Err(StateError::Corrupt("segments exceed the body".into()));
        }
        let (head, tail) = rest.split_at_mut(segment.raw as usize);
        targets.push((segment, bytes, head));
        rest = tail;
    }
    if !rest.is_empty() || targets.len() != segments.len() {
        return Err(StateError::Corrupt("segments do not fill the body".into()));
    }
    let cores = cores().min(targets.len().max(1));
    let per = targets.len().div_ceil(cores).max(1);
    let results: Vec<Result<(), StateError>> = std::thread::scope(|scope| {
        let mut handles = Vec::new();
        let mut targets = targets;
        while !targets.is_empty() {
            let group: Vec<_> = targets.drain(..per.min(targets.len())).collect();
            handles.push(scope.spawn(move || {
                for (segment, input, target) in group {
                    match lz4_flex::block::decompress_into(input, target) {
                        Ok(written) if written == segment.raw as usize => {}
                        Ok(_) => return Err(StateError::Corrupt("a segment decompressed short".into())),
                        Err(e) => return Err(StateError::Corrupt(format!("a segment: {e}"))),
                    }
                }
                Ok(())
            }));
        }
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err(StateError::Corrupt("a decompression thread failed".into())))).collect()
    });
    results.into_iter().collect()
}

/// Whether `bytes` are the stored bytes `segment` names.
pub(crate) fn holds(segment: &Segment, bytes: &[u8]) -> bool {
    bytes.len() == segment.stored as usize && hex::encode(Sha256::digest(bytes)) == segment.sha256
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get()).min(8)
}

/// `work` over `items` in order, the items shared out over the cores.
pub(crate) fn on_cores<I: Sync, O: Send>(items: &[I], work: impl Fn(&I) -> O + Sync) -> Vec<O> {
    let per = items.len().div_ceil(cores()).max(1);
    let work = &work;
    std::thread::scope(|scope| {
        let handles: Vec<_> = items.chunks(per).map(|group| scope.spawn(move || group.iter().map(work).collect::<Vec<O>>())).collect();
        handles.into_iter().flat_map(|h| h.join().unwrap_or_default()).collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_follow_windows_of_memory_not_places_in_the_body() {
        let w = WINDOW as u32;
        let c = CHUNK as u32;
        // Globals, then a run that crosses a window's edge, then a run in a
        // later window, then a second memory.
        let runs = vec![vec![[w - c, 2 * c], [3 * w, c]], vec![[0, c]]];
        assert_eq!(cut(32, &runs), vec![32, CHUNK, CHUNK, CHUNK, CHUNK]);
        // Two runs in one window make one segment.
        assert_eq!(cut(0, &[vec![[0, c], [2 * c, c]]]), vec![0, 2 * CHUNK]);
    }

    #[test]
    fn a_capture_compresses_again_only_the_windows_that_changed() {
        let windows = 12;
        let runs = vec![vec![[0, (windows * WINDOW) as u32]]];
        let keyed = cut_keyed(16, &runs);
        // Incompressible bytes, so the segments are worth remembering.
        let mut body = super::super::image::tests::noise(16 + windows * WINDOW, 7);
        let mut memo = None;
        let first = compress_remembering(&body, &keyed, &mut memo);
        assert!(memo.as_ref().is_some_and(|m| m.bytes() >= MEMO_FROM));
        body[16 + 3 * WINDOW + 7] ^= 1;
        let second = compress_remembering(&body, &keyed, &mut memo);
        for (index, ((a, a_bytes), (b, b_bytes))) in first.iter().zip(&second).enumerate() {
            if index == 4 {
                assert_ne!(a.sha256, b.sha256, "the changed window is compressed again");
            } else {
                assert_eq!(a, b);
                // Remembered, not made again: the very same bytes.
                assert_eq!(a_bytes.as_ptr(), b_bytes.as_ptr(), "window {index}");
            }
        }
        let segments: Vec<Segment> = second.iter().map(|(s, _)| s.clone()).collect();
        let stored: Vec<&[u8]> = second.iter().map(|(_, b)| b.as_ref()).collect();
        let mut back = vec![0u8; body.len()];
        decompress(&segments, &stored, &mut back).expect("decompresses");
        assert_eq!(back, body);
    }

    #[test]
    fn a_segment_unchanged_keeps_its_name_when_another_changes() {
        let runs = vec![vec![[0, WINDOW as u32], [WINDOW as u32, WINDOW as u32]]];
        let lengths = cut(16, &runs);
        let mut body: Vec<u8> = (0..16 + 2 * WINDOW).map(|i| (i * 7 % 251) as u8).collect();
        let before = compress(&body, &lengths);
        body[16 + WINDOW + 5] ^= 1;
        let after = compress(&body, &lengths);
        assert_eq!(before[1].0, after[1].0);
        assert_ne!(before[2].0.sha256, after[2].0.sha256);
        let segments: Vec<Segment> = after.iter().map(|(s, _)| s.clone()).collect();
        let stored: Vec<&[u8]> = after.iter().map(|(_, b)| b.as_slice()).collect();
        let mut back = vec![0u8; body.len()];
        decompress(&segments, &stored, &mut back).expect("decompresses");
        assert_eq!(back, body);
        assert!(holds(&segments[2], stored[2]));
        assert!(!holds(&segments[2], stored[1]));
    }
}
