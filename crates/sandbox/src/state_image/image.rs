//! A session instance's state as bytes, and back.
//!
//! Captured between runs: every mutable global, and each memory as the
//! 4 KiB chunks that differ from the baseline (a bare instance of the same
//! component, its memory exactly the compiled image's), each stored as its
//! bytes XOR the baseline's (a chunk that differs from the baseline only in
//! a few reference counts is then almost all zeros, which compresses to
//! almost nothing), compressed, under a
//! checksum (XXH3-128: the image is written and read only by the host, so
//! the checksum finds damage, not forgery, and is checked at memory speed),
//! with the component's identity and the baseline's hash.
//!
//! Restored into a fresh instance of the same component: the chunks where
//! the fresh instance differs from the baseline are put back to the
//! baseline's bytes, then the image's chunks are written and the globals
//! set, so memory and globals are provably the captured ones, except:
//! - the preview-1 adapter keeps the fresh instance's globals and state page:
//!   they hold host handles (streams, preopened directories) that only the
//!   fresh instance's handle table knows. Restoring is refused unless the
//!   adapter's allocations sit where the image's did (or are not made yet);
//! - files the code held open are closed before the capture (by the cell
//!   code): their handles would not exist in the new instance.

use sha2::{Digest, Sha256};
use wasmtime::Store;
use wasmtime::component::Instance;

use super::access::{Access, GlobalValue, MemoryAccess};
use super::adapter::adapter_kept;
use super::ranges::{differing_chunks, intersect, merged, outside, uncovered, union};
use super::blocks::decompress;
use super::reader::Reader;
use super::segments::{self, Segment, SegmentMemo};
use crate::guest::GuestState;

/// Leading bytes of every image: its body compressed in segments by window
/// of memory ([`super::segments`]).
pub(super) const MAGIC: &[u8; 8] = b"APSTATE4";
/// Leading bytes of the images of the format before: the body compressed in
/// blocks of at least a megabyte, one per core. Still read.
pub(super) const BLOCKS_MAGIC: &[u8; 8] = b"APSTATE3";
/// Leading bytes of the images of the format before that: as
/// [`BLOCKS_MAGIC`], but each chunk stored as its own bytes rather than XOR
/// the baseline's. Still read.
const RAW_CHUNKS_MAGIC: &[u8; 8] = b"APSTATE2";
/// Leading bytes of the images of an earlier format (the chunks' places
/// inside the compressed body).
const OLDER_MAGIC: &[u8; 8] = b"APSTATE1";
/// Bytes of one global in the body: module, index, value.
const GLOBAL_BYTES: usize = 16;
/// Length of the trailing checksum.
pub(super) const CHECKSUM_BYTES: usize = 16;
/// Granularity of the memory comparison.
pub(super) const CHUNK: usize = 4096;
const WASM_PAGE: usize = 64 * 1024;

/// A state image could not be made or used.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("the state image is damaged: {0}")]
    Corrupt(String),
    #[error("the state image was made for another runtime build ({0})")]
    OtherBuild(String),
    #[error("the instance's adapter state is not where the image expects it; state cannot be restored safely")]
    AdapterMoved,
    #[error("the runtime cannot capture state: {0}")]
    Unsupported(String),
    #[error("a new instance to restore the state into did not start: {0}")]
    Start(String),
    #[error("reaching the instance's state failed: {0:#}")]
    Instance(wasmtime::Error),
}

impl From<wasmtime::Error> for StateError {
    fn from(error: wasmtime::Error) -> Self {
        Self::Instance(error)
    }
}

/// Which component and baseline an image belongs to.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Identity {
    /// The compiled component's cache key: its bytes and the engine settings.
    pub(crate) component: String,
    /// SHA-256 of the baseline's memories.
    pub(crate) baseline: String,
}

#[derive(serde::Serialize, serde::Deserialize)]
pub(super) struct Header {
    identity: Identity,
    /// Each memory's size in pages, in the layout's order.
    pub(super) pages: Vec<u32>,
    /// Per memory, where its chunks go: `[offset, length]`, ascending. Kept
    /// outside the compressed body so a resume can make those pages ready
    /// while the body is still being checked and decompressed.
    pub(super) runs: Vec<Vec<[u32; 2]>>,
    /// Length of the decompressed body.
    body_bytes: u64,
    /// Files the code held open, closed before the capture.
    #[serde(default)]
    closed_files: Vec<String>,
    /// The body's segments, in order (none in the formats before).
    #[serde(default)]
    pub(super) segments: Vec<Segment>,
}

/// A baseline instance's memories, read once.
pub(crate) struct Baseline {
    pub(crate) memories: Vec<Vec<u8>>,
    pub(crate) hash: String,
    /// Per memory, the pages the bare instance wrote as it started: there
    /// the baseline may differ from the component's initial image.
    pub(crate) written_at_start: Vec<Vec<(usize, usize)>>,
    /// Per memory, per [`CHUNK`], whether the baseline's bytes there are all
    /// zeros: a chunk's delta from zeros is the chunk, so those are skipped.
    zero_chunks: Vec<Vec<bool>>,
}

impl Baseline {
    /// Reads every memory of `instance`, a bare instance of the component.
    pub(crate) async fn read(access: &Access, store: &mut Store<GuestState>, instance: &Instance) -> Result<Self, StateError> {
        let mut memories = Vec::new();
        let mut written_at_start = Vec::new();
        let mut digest = Sha256::new();
        for memory in &access.memories {
            let bytes = memory.read(store, instance).await?;
            written_at_start.push(possibly_written(bytes));
            let bytes = bytes.to_vec();
            digest.update((bytes.len() as u64).to_le_bytes());
            digest.update(&bytes);
            memories.push(bytes);
        }
        let mut baseline = Self::new(memories, hex::encode(digest.finalize()));
        baseline.written_at_start = written_at_start;
        Ok(baseline)
    }

    fn new(memories: Vec<Vec<u8>>, hash: String) -> Self {
        let zero_chunks = memories.iter().map(|memory| memory.chunks(CHUNK).map(|chunk| chunk.iter().all(|b| *b == 0)).collect()).collect();
        let written_at_start = memories.iter().map(|memory| vec![(0, memory.len())]).collect();
        Self { memories, hash, zero_chunks, written_at_start }
    }

    /// XORs `target`, the bytes of memory `memory` from `start` (a multiple
    /// of [`CHUNK`]) on, with the baseline's bytes there. Its own inverse: a
    /// chunk's delta from the baseline on capture, the chunk again on
    /// restore. Past the baseline's end, and where it holds zeros, the bytes
    /// stay as they are; a chunk at a time, so the bytes are still in the
    /// cache when a caller has just written them.
    fn xor(&self, memory: usize, start: usize, target: &mut [u8]) {
        let (Some(base), Some(zeros)) = (self.memories.get(memory), self.zero_chunks.get(memory)) else {
            return;
        };
        for (index, piece) in target.chunks_mut(CHUNK).enumerate() {
            let at = start + index * CHUNK;
            if zeros.get(at / CHUNK).is_none_or(|zero| *zero) {
                continue;
            }
            for (byte, base) in piece.iter_mut().zip(&base[at..]) {
                *byte ^= base;
            }
        }
    }
}

/// A capture's image, and what it read to make it.
pub(crate) struct Captured {
    pub(crate) image: Vec<u8>,
    /// Every global's value, in the accessors' order.
    pub(crate) globals: Vec<GlobalValue>,
    /// Per memory, where it differs from the baseline (whole chunks).
    pub(crate) runs: Vec<Vec<(usize, usize)>>,
    pub(crate) closed_files: Vec<String>,
}

/// Captures `instance`'s state against `baseline`. `mapped` names the
/// ranges of its first memory where the image that memory is mapped from
/// differs from the baseline (an instance started from a shared state):
/// pages there hold the state's bytes though the instance never wrote them.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn capture(
    access: &Access,
    component: &str,
    baseline: &Baseline,
    store: &mut Store<GuestState>,
    instance: &Instance,
    closed_files: Vec<String>,
    memo: &mut Option<SegmentMemo>,
    mapped: &[(usize, usize)],
) -> Result<Captured, StateError> {
    let mut body = Vec::new();
    let mut globals = Vec::with_capacity(access.globals.len());
    for global in &access.globals {
        let value = global.get(&mut *store, instance).await?;
        body.extend_from_slice(&global.slot.module.to_le_bytes());
        body.extend_from_slice(&global.slot.index.to_le_bytes());
        body.extend_from_slice(&value.0.to_le_bytes());
        globals.push(value);
    }
    let mut pages = Vec::new();
    let mut places = Vec::new();
    let mut differing = Vec::with_capacity(access.memories.len());
    for (index, (memory, base)) in access.memories.iter().zip(&baseline.memories).enumerate() {
        let current = memory.read(store, instance).await?;
        pages.push((current.len() / WASM_PAGE) as u32);
        // Pages the instance never wrote hold the baseline's bytes (or,
        // where its memory maps a shared state, that state's): only the
        // others are compared.
        let written = possibly_written(current);
        let compared = if index == 0 && !mapped.is_empty() { union(&written, mapped) } else { written };
        let runs = merged(compared.into_iter().flat_map(|(from, to)| differing_chunks(current, base, from, to.min(current.len()))));
        for (start, end) in &runs {
            for piece in (*start..*end).step_by(CHUNK) {
                let at = body.len();
                body.extend_from_slice(&current[piece..(piece + CHUNK).min(*end)]);
                baseline.xor(index, piece, &mut body[at..]);
            }
        }
        places.push(runs.iter().map(|(start, end)| [*start as u32, (end - start) as u32]).collect());
        differing.push(runs);
    }
    let mut header = Header {
        identity: Identity { component: component.to_owned(), baseline: baseline.hash.clone() },
        pages,
        runs: places,
        body_bytes: body.len() as u64,
        closed_files,
        segments: Vec::new(),
    };
    let keyed = segments::cut_keyed(access.globals.len() * GLOBAL_BYTES, &header.runs);
    let made = segments::compress_remembering(&body, &keyed, memo);
    header.segments = made.iter().map(|(segment, _)| segment.clone()).collect();
    let stored: Vec<&[u8]> = made.iter().map(|(_, bytes)| bytes.as_ref()).collect();
    let image = assemble(&header, &stored);
    Ok(Captured { image, globals, runs: differing, closed_files: header.closed_files })
}


/// Decoded bodies kept for the next decode: a body of a few MB is thousands
/// of pages, and a buffer fresh from the allocator faults in every one of
/// them while it is filled (on a VM, several milliseconds of a resume).
static SPARE_BODIES: std::sync::Mutex<Vec<Vec<u8>>> = std::sync::Mutex::new(Vec::new());
/// At most this many bodies are kept, each at most [`SPARE_BODY_BYTES`].
const SPARE_BODIES_KEPT: usize = 2;
const SPARE_BODY_BYTES: usize = 64 << 20;

/// A buffer of `len` zero bytes, reusing a kept one when there is one.
pub(super) fn spare_body(len: usize) -> Vec<u8> {
    let kept = SPARE_BODIES.lock().unwrap_or_else(std::sync::PoisonError::into_inner).pop();
    let mut body = kept.unwrap_or_default();
    body.clear();
    body.resize(len, 0);
    body
}

/// Keeps `body` for the next decode, unless enough are kept or it is large.
fn keep_spare_body(body: Vec<u8>) {
    if body.capacity() > SPARE_BODY_BYTES {
        return;
    }
    let mut kept = SPARE_BODIES.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if kept.len() < SPARE_BODIES_KEPT {
        kept.push(body);
    }
}

/// The image of `body` (`globals_bytes` of globals, then the chunks of
/// `header.runs`): its segments compressed and named into the header.
#[cfg(test)]
fn encode(header: &mut Header, body: &[u8], globals_bytes: usize) -> Vec<u8> {
    let compressed = segments::compress(body, &segments::cut(globals_bytes, &header.runs));
    header.segments = compressed.iter().map(|(segment, _)| segment.clone()).collect();
    let stored: Vec<&[u8]> = compressed.iter().map(|(_, bytes)| bytes.as_slice()).collect();
    assemble(header, &stored)
}

/// An image of this format from its header and its segments' stored bytes.
pub(super) fn assemble(header: &Header, stored: &[&[u8]]) -> Vec<u8> {
    let header = serde_json::to_vec(header).unwrap_or_default();
    let payload: usize = stored.iter().map(|s| s.len()).sum();
    let mut out = Vec::with_capacity(MAGIC.len() + 12 + header.len() + payload + CHECKSUM_BYTES);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(header.len() as u32).to_le_bytes());
    out.extend_from_slice(&header);
    out.extend_from_slice(&(payload as u64).to_le_bytes());
    for bytes in stored {
        out.extend_from_slice(bytes);
    }
    let checksum = checksum(&out);
    out.extend_from_slice(&checksum);
    out
}


/// Where an image's chunks go, read from its header before the image is
/// checked: only ever used to make pages ready, never to write them.
pub(crate) struct Plan {
    pages: Vec<u32>,
    runs: Vec<Vec<[u32; 2]>>,
}

/// A checked, decompressed image.
pub(crate) struct Decoded {
    identity: Identity,
    pages: Vec<u32>,
    pub(super) runs: Vec<Vec<[u32; 2]>>,
    pub(super) body: Vec<u8>,
    /// Whether the body's chunks are still their XOR with the baseline
    /// (this format's images, until [`restore`] turns them back).
    delta: bool,
    /// Files the code held open, closed before the capture.
    pub(crate) closed_files: Vec<String>,
    /// Its segments by where they lie, for the restored instance's next
    /// capture (an image of this format, large enough).
    pub(crate) memo: Option<SegmentMemo>,
}

impl Drop for Decoded {
    fn drop(&mut self) {
        keep_spare_body(std::mem::take(&mut self.body));
    }
}

/// The checksum of an image's content.
pub(super) fn checksum(content: &[u8]) -> [u8; CHECKSUM_BYTES] {
    xxhash_rust::xxh3::xxh3_128(content).to_le_bytes()
}

/// How an image's body is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    /// Segments by window of memory, chunks XOR the baseline.
    Segments,
    /// Blocks of a megabyte, chunks XOR the baseline.
    Blocks,
    /// Blocks of a megabyte, chunks as they are.
    RawBlocks,
}

/// The header of `bytes`, unchecked, how its body is kept, and what
/// follows the header.
fn read_header(bytes: &[u8]) -> Result<(Header, Format, Reader<'_>), StateError> {
    let corrupt = |what: &str| StateError::Corrupt(what.to_owned());
    if bytes.len() >= MAGIC.len() && &bytes[..MAGIC.len()] == OLDER_MAGIC {
        return Err(StateError::OtherBuild("an image of an earlier format".into()));
    }
    if bytes.len() < MAGIC.len() + 12 + CHECKSUM_BYTES {
        return Err(corrupt("not a state image"));
    }
    let format = match &bytes[..MAGIC.len()] {
        magic if magic == MAGIC => Format::Segments,
        magic if magic == BLOCKS_MAGIC => Format::Blocks,
        magic if magic == RAW_CHUNKS_MAGIC => Format::RawBlocks,
        _ => return Err(corrupt("not a state image")),
    };
    let mut reader = Reader { bytes: &bytes[MAGIC.len()..bytes.len() - CHECKSUM_BYTES] };
    let header = parse_header(&mut reader)?;
    Ok((header, format, reader))
}

/// The JSON header at `reader` (after its `u32` length).
pub(super) fn parse_header(reader: &mut Reader<'_>) -> Result<Header, StateError> {
    let header_len = reader.u32()? as usize;
    serde_json::from_slice(reader.take(header_len)?).map_err(|e| StateError::Corrupt(format!("header: {e}")))
}

/// The most bytes of globals an image's body may open with.
const MAX_GLOBALS_BYTES: usize = 1 << 20;
/// The most pages a memory of an image may have (a 32-bit memory's all).
const MAX_PAGES: u32 = 65_536;

/// Refuses a header whose places and lengths cannot belong to an image this
/// host made, before anything is allocated for it: the image may come from
/// a store other processes write to.
pub(super) fn check_header(header: &Header) -> Result<(), StateError> {
    let corrupt = |what: &str| Err(StateError::Corrupt(what.to_owned()));
    if header.pages.len() != header.runs.len() {
        return corrupt("chunk places per memory");
    }
    let mut chunk_bytes = 0u64;
    for (pages, runs) in header.pages.iter().zip(&header.runs) {
        if *pages > MAX_PAGES {
            return corrupt("a memory larger than any instance's");
        }
        let limit = u64::from(*pages) * WASM_PAGE as u64;
        let mut previous_end = 0u64;
        for [start, len] in runs {
            let (start, end) = (u64::from(*start), u64::from(*start) + u64::from(*len));
            if start < previous_end || end > limit || !start.is_multiple_of(CHUNK as u64) {
                return corrupt("a chunk out of place");
            }
            previous_end = end;
            chunk_bytes += u64::from(*len);
        }
    }
    let globals = header.body_bytes.checked_sub(chunk_bytes);
    if globals.is_none_or(|g| g > MAX_GLOBALS_BYTES as u64 || !g.is_multiple_of(GLOBAL_BYTES as u64)) {
        return corrupt("the body's length does not match its chunks");
    }
    if !header.segments.is_empty() {
        let mut raw = 0u64;
        for segment in &header.segments {
            if segment.raw as usize > segments::MAX_RAW || segment.stored as usize > lz4_flex::block::get_maximum_output_size(segment.raw as usize) {
                return corrupt("a segment larger than any capture makes");
            }
            raw += u64::from(segment.raw);
        }
        if raw != header.body_bytes {
            return corrupt("segments do not fill the body");
        }
    }
    Ok(())
}

/// Where `bytes`' chunks go, read without checking the image.
pub(crate) fn plan(bytes: &[u8]) -> Result<Plan, StateError> {
    let (header, _, _) = read_header(bytes)?;
    Ok(Plan { pages: header.pages, runs: header.runs })
}

/// Checks `bytes`' checksum and decompresses it.
pub(crate) fn decode(bytes: &[u8]) -> Result<Decoded, StateError> {
    let corrupt = |what: &str| StateError::Corrupt(what.to_owned());
    let (header, format, mut reader) = read_header(bytes)?;
    let (content, expected) = bytes.split_at(bytes.len() - CHECKSUM_BYTES);
    if checksum(content) != expected {
        return Err(corrupt("its checksum does not match its contents"));
    }
    check_header(&header)?;
    let payload_len = usize::try_from(reader.u64()?).map_err(|_| corrupt("payload length"))?;
    let payload = reader.take(payload_len)?;
    if !reader.bytes.is_empty() {
        return Err(corrupt("bytes past the payload"));
    }
    let body_bytes = usize::try_from(header.body_bytes).map_err(|_| corrupt("body length"))?;
    let body = match format {
        Format::Segments => {
            let mut stored = Vec::with_capacity(header.segments.len());
            let mut rest = Reader { bytes: payload };
            for segment in &header.segments {
                stored.push(rest.take(segment.stored as usize)?);
            }
            if !rest.bytes.is_empty() {
                return Err(corrupt("bytes past the last segment"));
            }
            let mut body = spare_body(body_bytes);
            segments::decompress(&header.segments, &stored, &mut body)?;
            let chunk_bytes: usize = header.runs.iter().flatten().map(|[_, len]| *len as usize).sum();
            let keyed = segments::cut_keyed(body_bytes - chunk_bytes, &header.runs);
            let memo = SegmentMemo::of(&body, &keyed, &header.segments, &stored);
            (body, memo)
        }
        Format::Blocks | Format::RawBlocks => (decompress(payload, body_bytes)?, None),
    };
    let (body, memo) = body;
    let delta = format != Format::RawBlocks;
    Ok(Decoded { identity: header.identity, pages: header.pages, runs: header.runs, body, delta, closed_files: header.closed_files, memo })
}

/// [`decode`], and when `baseline` is the image's, its chunks turned back
/// from their deltas too: blocking work, which a resume does beside the
/// start of the instance it restores into ([`restore`] does what is left).
pub(crate) fn decode_against(bytes: &[u8], baseline: Option<&Baseline>, globals: usize) -> Result<Decoded, StateError> {
    let mut image = decode(bytes)?;
    if let Some(baseline) = baseline.filter(|baseline| baseline.hash == image.identity.baseline) {
        undo_delta(&mut image, baseline, globals)?;
    }
    Ok(image)
}

/// Turns `image`'s chunks from their XOR with `baseline` back into the
/// bytes they stand for (once; an image of the older format has them
/// already). `globals` is how many globals open the body.
fn undo_delta(image: &mut Decoded, baseline: &Baseline, globals: usize) -> Result<(), StateError> {
    if !image.delta {
        return Ok(());
    }
    let mut at = globals.checked_mul(GLOBAL_BYTES).ok_or_else(|| StateError::Corrupt("globals".into()))?;
    for (memory, runs) in image.runs.iter().enumerate() {
        for [start, len] in runs {
            let end = at.checked_add(*len as usize).filter(|end| *end <= image.body.len()).ok_or_else(|| StateError::Corrupt("truncated".into()))?;
            if !(*start as usize).is_multiple_of(CHUNK) {
                return Err(StateError::Corrupt("a chunk out of place".into()));
            }
            baseline.xor(memory, *start as usize, &mut image.body[at..end]);
            at = end;
        }
    }
    image.delta = false;
    Ok(())
}

/// Grows `instance`'s memories to the plan's sizes and makes the pages its
/// chunks go to ready for writing: what a resume can do before the image is
/// decoded. Best effort: the plan is unchecked, so a place outside memory
/// is skipped here and refused by [`restore`].
pub(crate) async fn prepare(access: &Access, plan: &Plan, store: &mut Store<GuestState>, instance: &Instance) -> Result<(), StateError> {
    for ((memory, pages), runs) in access.memories.iter().zip(&plan.pages).zip(&plan.runs) {
        grow_to(memory, *pages, store, instance).await?;
        prefault_for_writing(memory.read(store, instance).await?, runs);
    }
    Ok(())
}

/// Restores `image` into `instance`, a fresh instance of the component it
/// was captured from.
pub(crate) async fn restore(
    access: &Access,
    component: &str,
    baseline: &Baseline,
    image: &mut Decoded,
    store: &mut Store<GuestState>,
    instance: &Instance,
) -> Result<(), StateError> {
    let expected = Identity { component: component.to_owned(), baseline: baseline.hash.clone() };
    if image.identity != expected {
        return Err(StateError::OtherBuild(format!("image for {}, runtime {}", image.identity.component, expected.component)));
    }
    undo_delta(image, baseline, access.globals.len())?;
    if image.pages.len() != access.memories.len() {
        return Err(StateError::Corrupt("memory count".into()));
    }
    let mut reader = Reader { bytes: &image.body };
    let mut saved = Vec::with_capacity(access.globals.len());
    for global in &access.globals {
        let (module, index, bits) = (reader.u32()?, reader.u32()?, reader.u64()?);
        if (module, index) != (global.slot.module, global.slot.index) {
            return Err(StateError::Corrupt("globals out of order".into()));
        }
        saved.push(GlobalValue(bits));
    }
    let (adapter, protected) = adapter_kept(access, &saved, store, instance).await?;
    if image.runs.len() != access.memories.len() {
        return Err(StateError::Corrupt("chunk places per memory".into()));
    }
    for (((memory, base), pages), places) in access.memories.iter().zip(&baseline.memories).zip(&image.pages).zip(&image.runs) {
        let mut runs = Vec::with_capacity(places.len());
        let mut previous_end = 0usize;
        for [start, len] in places {
            let start = *start as usize;
            if start < previous_end {
                return Err(StateError::Corrupt("chunks out of order".into()));
            }
            previous_end = start + *len as usize;
            runs.push((start, reader.take(*len as usize)?));
        }
        restore_memory(memory, base, *pages, &runs, &protected, store, instance).await?;
    }
    if !reader.bytes.is_empty() {
        return Err(StateError::Corrupt("bytes past the last chunk".into()));
    }
    for (global, value) in access.globals.iter().zip(saved) {
        if Some(global.slot.module) == adapter {
            continue;
        }
        global.set(&mut *store, instance, value).await?;
    }
    Ok(())
}

async fn restore_memory(
    memory: &MemoryAccess,
    base: &[u8],
    pages: u32,
    runs: &[(usize, &[u8])],
    protected: &[(usize, usize)],
    store: &mut Store<GuestState>,
    instance: &Instance,
) -> Result<(), StateError> {
    let current_pages = (memory.read(store, instance).await?.len() / WASM_PAGE) as u32;
    if current_pages > pages {
        return Err(StateError::Corrupt(format!("the image's memory ({pages} pages) is smaller than a fresh instance's ({current_pages})")));
    }
    grow_to(memory, pages, store, instance).await?;
    let limit = pages as usize * WASM_PAGE;
    for (start, bytes) in runs {
        if start.checked_add(bytes.len()).is_none_or(|end| end > limit) {
            return Err(StateError::Corrupt("a chunk lies outside memory".into()));
        }
    }
    // What the fresh instance changed since instantiation goes back to the
    // baseline, where the image's chunks will not cover it anyway. Only the
    // pages it may have written are compared.
    let fixes: Vec<(usize, usize)> = {
        let fresh = memory.read(store, instance).await?;
        let written = possibly_written(fresh);
        merged(intersect(&uncovered(fresh.len(), runs), &written).into_iter().flat_map(|(from, to)| differing_chunks(fresh, base, from, to)))
            .into_iter()
            .flat_map(|(from, to)| outside(from, to, protected))
            .collect()
    };
    for (start, end) in fixes {
        // Past the baseline's end a fresh instance's memory starts as zeros.
        let zeros;
        let bytes = match base.get(start..end) {
            Some(bytes) => bytes,
            None => {
                zeros = vec![0u8; end - start];
                &zeros
            }
        };
        memory.write(store, instance, start as u32, bytes).await?;
    }
    for (start, bytes) in runs {
        let end = start + bytes.len();
        for (from, to) in outside(*start, end, protected) {
            memory.write(store, instance, from as u32, &bytes[from - start..to - start]).await?;
        }
    }
    Ok(())
}

/// Grows `memory` to the image's `pages` when it is smaller.
async fn grow_to(memory: &MemoryAccess, pages: u32, store: &mut Store<GuestState>, instance: &Instance) -> Result<(), StateError> {
    let current_pages = (memory.read(store, instance).await?.len() / WASM_PAGE) as u32;
    if pages > current_pages && !memory.grow(store, instance, pages - current_pages).await? {
        return Err(StateError::Instance(wasmtime::format_err!("memory cannot grow to the image's {pages} pages")));
    }
    Ok(())
}

/// Has the kernel make the pages the image's chunks will be written to
/// private and writable in one call per chunk, rather than one page fault
/// per page as the writes reach them. An advice: the contents are unchanged,
/// and where the kernel cannot, the writes fault the pages in as before.
fn prefault_for_writing(memory: &[u8], runs: &[[u32; 2]]) {
    #[cfg(target_os = "linux")]
    {
        const PAGE: usize = 4096;
        let (at, length) = (memory.as_ptr() as usize, memory.len());
        for [start, len] in runs {
            let start = *start as usize;
            let Some(end) = start.checked_add(*len as usize).filter(|end| *end <= length) else { continue };
            let from = (at + start) & !(PAGE - 1);
            let to = (at + end).div_ceil(PAGE) * PAGE;
            // SAFETY: `madvise` with `MADV_POPULATE_WRITE` changes no byte of
            // the range, which lies inside the instance's accessible memory.
            unsafe { libc::madvise(from as *mut libc::c_void, to - from, libc::MADV_POPULATE_WRITE) };
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (memory, runs);
}

/// Byte ranges of `memory` a fresh instance may have changed.
fn possibly_written(memory: &[u8]) -> Vec<(usize, usize)> {
    #[cfg(target_os = "linux")]
    return super::pagemap::possibly_written(memory);
    #[cfg(not(target_os = "linux"))]
    vec![(0, memory.len())]
}


#[cfg(test)]
pub(super) mod tests {
    use super::super::blocks::encode_blocks;
    use super::*;

    /// A header for one memory of one wasm page.
    pub(in crate::state_image) fn header(runs: Vec<Vec<[u32; 2]>>, body_bytes: usize) -> Header {
        Header {
            identity: Identity { component: "c".into(), baseline: "b".into() },
            pages: vec![1],
            runs,
            body_bytes: body_bytes as u64,
            closed_files: vec![],
            segments: vec![],
        }
    }

    #[test]
    fn an_image_of_the_block_format_still_reads() {
        let chunk = noise(CHUNK, 5);
        let mut body = vec![9u8; GLOBAL_BYTES];
        body.extend_from_slice(&chunk);
        let bytes = encode_blocks(&header(vec![vec![[0, CHUNK as u32]]], body.len()), &body);
        let image = decode(&bytes).expect("decodes");
        assert!(image.delta);
        assert_eq!(image.body, body);
    }

    #[test]
    fn a_header_naming_places_outside_its_memory_is_refused_before_any_allocation() {
        // A chunk past the memory's one page, chunks out of order, and a
        // body claimed far longer than its chunks.
        for (runs, body) in [
            (vec![vec![[WASM_PAGE as u32, CHUNK as u32]]], CHUNK),
            (vec![vec![[CHUNK as u32, CHUNK as u32], [0, CHUNK as u32]]], 2 * CHUNK),
            (vec![vec![]], 1 << 40),
        ] {
            let mut header = header(runs, body);
            header.segments = vec![Segment { raw: 0, stored: 0, sha256: String::new() }];
            assert!(matches!(check_header(&header), Err(StateError::Corrupt(_))));
        }
    }

    #[test]
    fn a_damaged_image_is_refused_by_its_checksum() {
        let mut header = header(vec![vec![]], 16);
        let mut bytes = encode(&mut header, &[1; 16], 16);
        assert!(decode(&bytes).is_ok());
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0x40;
        assert!(matches!(decode(&bytes), Err(StateError::Corrupt(_))));
        assert!(matches!(decode(b"short"), Err(StateError::Corrupt(_))));
    }

    /// Random-looking bytes, as a page of a heap holds.
    pub(in crate::state_image) fn noise(len: usize, seed: u64) -> Vec<u8> {
        let mut state = seed;
        (0..len)
            .map(|_| {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (state >> 33) as u8
            })
            .collect()
    }

    #[test]
    fn chunks_are_stored_as_their_delta_from_the_baseline_and_restored_whole() {
        // A baseline of heap-like bytes whose third chunk is zeros.
        let mut base = noise(3 * CHUNK, 1);
        base[2 * CHUNK..].fill(0);
        let baseline = Baseline::new(vec![base.clone()], "b".into());
        // A chunk that differs by a reference count, new bytes where the
        // baseline held zeros, and a chunk past the baseline's end.
        let mut current = base.clone();
        current.resize(4 * CHUNK, 0);
        current[CHUNK + 40] = current[CHUNK + 40].wrapping_add(1);
        current[2 * CHUNK..].copy_from_slice(&noise(2 * CHUNK, 2));
        let runs = merged(differing_chunks(&current, &base, 0, current.len()));
        assert_eq!(runs, vec![(CHUNK, 4 * CHUNK)]);
        let global = [7u8; GLOBAL_BYTES];
        let mut body = global.to_vec();
        body.extend_from_slice(&current[CHUNK..]);
        baseline.xor(0, CHUNK, &mut body[GLOBAL_BYTES..]);
        // The reference count's chunk is all zeros but one byte; the others
        // are their own bytes.
        assert_eq!(body[GLOBAL_BYTES..GLOBAL_BYTES + CHUNK].iter().filter(|b| **b != 0).count(), 1);
        assert_eq!(&body[GLOBAL_BYTES + CHUNK..], &current[2 * CHUNK..]);
        let mut header = header(vec![vec![[CHUNK as u32, 3 * CHUNK as u32]]], body.len());
        let bytes = encode(&mut header, &body, GLOBAL_BYTES);
        // Compressed, the nearly-zero chunk costs next to nothing: the image
        // is about the two chunks of new bytes.
        assert!(bytes.len() < 2 * CHUNK + 512, "{} bytes", bytes.len());
        let mut image = decode(&bytes).expect("decodes");
        undo_delta(&mut image, &baseline, 1).expect("undone");
        assert_eq!(&image.body[..GLOBAL_BYTES], &global);
        assert_eq!(&image.body[GLOBAL_BYTES..], &current[CHUNK..]);
        // Undone once only: a second call leaves the bytes as they are.
        undo_delta(&mut image, &baseline, 1).expect("undone");
        assert_eq!(&image.body[GLOBAL_BYTES..], &current[CHUNK..]);
    }

    #[test]
    fn an_image_of_the_format_before_keeps_its_raw_chunks() {
        let base = noise(CHUNK, 3);
        let baseline = Baseline::new(vec![base], "b".into());
        let chunk = noise(CHUNK, 4);
        let header = header(vec![vec![[0, CHUNK as u32]]], CHUNK);
        let mut bytes = encode_blocks(&header, &chunk);
        bytes[..MAGIC.len()].copy_from_slice(RAW_CHUNKS_MAGIC);
        let content = bytes.len() - CHECKSUM_BYTES;
        let sum = checksum(&bytes[..content]);
        bytes[content..].copy_from_slice(&sum);
        let mut image = decode(&bytes).expect("decodes");
        undo_delta(&mut image, &baseline, 0).expect("nothing to undo");
        assert_eq!(image.body, chunk);
    }
}
