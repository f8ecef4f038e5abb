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
use super::layout::{ADAPTER_ALLOCATION_STATE, ADAPTER_STATE_POINTER};
use super::ranges::{differing_chunks, intersect, merged, outside, uncovered};
use crate::guest::GuestState;

/// Leading bytes of every image.
const MAGIC: &[u8; 8] = b"APSTATE3";
/// Leading bytes of the images of the format before: the same, but each
/// chunk stored as its own bytes rather than XOR the baseline's. Still read.
const RAW_CHUNKS_MAGIC: &[u8; 8] = b"APSTATE2";
/// Leading bytes of the images of an earlier format (the chunks' places
/// inside the compressed body).
const OLDER_MAGIC: &[u8; 8] = b"APSTATE1";
/// Bytes of one global in the body: module, index, value.
const GLOBAL_BYTES: usize = 16;
/// Length of the trailing checksum.
const CHECKSUM_BYTES: usize = 16;
/// Granularity of the memory comparison.
pub(super) const CHUNK: usize = 4096;
/// The adapter's state is one wasm page.
const ADAPTER_STATE_BYTES: usize = 64 * 1024;
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
struct Header {
    identity: Identity,
    /// Each memory's size in pages, in the layout's order.
    pages: Vec<u32>,
    /// Per memory, where its chunks go: `[offset, length]`, ascending. Kept
    /// outside the compressed body so a resume can make those pages ready
    /// while the body is still being checked and decompressed.
    runs: Vec<Vec<[u32; 2]>>,
    /// Length of the decompressed body.
    body_bytes: u64,
    /// Files the code held open, closed before the capture.
    #[serde(default)]
    closed_files: Vec<String>,
}

/// A baseline instance's memories, read once.
pub(crate) struct Baseline {
    pub(crate) memories: Vec<Vec<u8>>,
    pub(crate) hash: String,
    /// Per memory, per [`CHUNK`], whether the baseline's bytes there are all
    /// zeros: a chunk's delta from zeros is the chunk, so those are skipped.
    zero_chunks: Vec<Vec<bool>>,
}

impl Baseline {
    /// Reads every memory of `instance`, a bare instance of the component.
    pub(crate) async fn read(access: &Access, store: &mut Store<GuestState>, instance: &Instance) -> Result<Self, StateError> {
        let mut memories = Vec::new();
        let mut digest = Sha256::new();
        for memory in &access.memories {
            let bytes = memory.read(store, instance).await?.to_vec();
            digest.update((bytes.len() as u64).to_le_bytes());
            digest.update(&bytes);
            memories.push(bytes);
        }
        Ok(Self::new(memories, hex::encode(digest.finalize())))
    }

    fn new(memories: Vec<Vec<u8>>, hash: String) -> Self {
        let zero_chunks = memories.iter().map(|memory| memory.chunks(CHUNK).map(|chunk| chunk.iter().all(|b| *b == 0)).collect()).collect();
        Self { memories, hash, zero_chunks }
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

/// The adapter's allocations as an instance's globals show them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct AdapterPlaces {
    state: u64,
    allocation: u64,
    stack: u64,
}

/// Captures `instance`'s state against `baseline`.
pub(crate) async fn capture(
    access: &Access,
    component: &str,
    baseline: &Baseline,
    store: &mut Store<GuestState>,
    instance: &Instance,
    closed_files: Vec<String>,
) -> Result<Vec<u8>, StateError> {
    let mut body = Vec::new();
    for global in &access.globals {
        let value = global.get(&mut *store, instance).await?;
        body.extend_from_slice(&global.slot.module.to_le_bytes());
        body.extend_from_slice(&global.slot.index.to_le_bytes());
        body.extend_from_slice(&value.0.to_le_bytes());
    }
    let mut pages = Vec::new();
    let mut places = Vec::new();
    for (index, (memory, base)) in access.memories.iter().zip(&baseline.memories).enumerate() {
        let current = memory.read(store, instance).await?;
        pages.push((current.len() / WASM_PAGE) as u32);
        // Pages the instance never wrote hold the baseline's bytes: only
        // the others are compared.
        let runs = merged(possibly_written(current).into_iter().flat_map(|(from, to)| differing_chunks(current, base, from, to)));
        for (start, end) in &runs {
            for piece in (*start..*end).step_by(CHUNK) {
                let at = body.len();
                body.extend_from_slice(&current[piece..(piece + CHUNK).min(*end)]);
                baseline.xor(index, piece, &mut body[at..]);
            }
        }
        places.push(runs.into_iter().map(|(start, end)| [start as u32, (end - start) as u32]).collect());
    }
    let header = Header {
        identity: Identity { component: component.to_owned(), baseline: baseline.hash.clone() },
        pages,
        runs: places,
        body_bytes: body.len() as u64,
        closed_files,
    };
    Ok(encode(&header, &body))
}

/// Bodies are compressed in blocks of at least this size, one per core.
const MIN_BLOCK: usize = 1 << 20;

/// The body as LZ4 blocks compressed side by side: `u32` count, then per
/// block its `u64` raw and compressed lengths and its bytes.
fn compress(body: &[u8]) -> Vec<u8> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()).min(8);
    let size = body.len().div_ceil(cores).max(MIN_BLOCK);
    let pieces: Vec<&[u8]> = body.chunks(size).collect();
    let blocks: Vec<Vec<u8>> = std::thread::scope(|scope| {
        let handles: Vec<_> = pieces.iter().map(|piece| scope.spawn(move || lz4_flex::block::compress(piece))).collect();
        handles.into_iter().map(|h| h.join().unwrap_or_default()).collect()
    });
    let mut out = Vec::with_capacity(4 + blocks.iter().map(|b| b.len() + 16).sum::<usize>());
    out.extend_from_slice(&(blocks.len() as u32).to_le_bytes());
    for (piece, block) in pieces.iter().zip(&blocks) {
        out.extend_from_slice(&(piece.len() as u64).to_le_bytes());
        out.extend_from_slice(&(block.len() as u64).to_le_bytes());
        out.extend_from_slice(block);
    }
    out
}

/// Reverses [`compress`] into a body of `body_bytes`, the blocks side by side.
fn decompress(payload: &[u8], body_bytes: usize) -> Result<Vec<u8>, StateError> {
    let mut reader = Reader { bytes: payload };
    let count = reader.u32()? as usize;
    let mut blocks = Vec::with_capacity(count.min(1024));
    let mut total = 0usize;
    for _ in 0..count {
        let raw = usize::try_from(reader.u64()?).map_err(|_| StateError::Corrupt("block length".into()))?;
        let compressed = usize::try_from(reader.u64()?).map_err(|_| StateError::Corrupt("block length".into()))?;
        total = total.checked_add(raw).filter(|t| *t <= body_bytes).ok_or_else(|| StateError::Corrupt("blocks exceed the body".into()))?;
        blocks.push((raw, reader.take(compressed)?));
    }
    if total != body_bytes {
        return Err(StateError::Corrupt("blocks do not fill the body".into()));
    }
    let mut body = spare_body(body_bytes);
    let mut rest: &mut [u8] = &mut body;
    let mut targets = Vec::with_capacity(blocks.len());
    for (raw, _) in &blocks {
        let (head, tail) = rest.split_at_mut(*raw);
        targets.push(head);
        rest = tail;
    }
    let results: Vec<Result<usize, String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = blocks
            .iter()
            .zip(targets)
            .map(|((_, input), target)| scope.spawn(move || lz4_flex::block::decompress_into(input, target).map_err(|e| e.to_string())))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("a decompression thread failed".into()))).collect()
    });
    for ((raw, _), result) in blocks.iter().zip(results) {
        match result {
            Ok(written) if written == *raw => {}
            Ok(_) => return Err(StateError::Corrupt("a block decompressed short".into())),
            Err(e) => return Err(StateError::Corrupt(format!("payload: {e}"))),
        }
    }
    Ok(body)
}

/// Decoded bodies kept for the next decode: a body of a few MB is thousands
/// of pages, and a buffer fresh from the allocator faults in every one of
/// them while it is filled (on a VM, several milliseconds of a resume).
static SPARE_BODIES: std::sync::Mutex<Vec<Vec<u8>>> = std::sync::Mutex::new(Vec::new());
/// At most this many bodies are kept, each at most [`SPARE_BODY_BYTES`].
const SPARE_BODIES_KEPT: usize = 2;
const SPARE_BODY_BYTES: usize = 64 << 20;

/// A buffer of `len` zero bytes, reusing a kept one when there is one.
fn spare_body(len: usize) -> Vec<u8> {
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

fn encode(header: &Header, body: &[u8]) -> Vec<u8> {
    let header = serde_json::to_vec(header).unwrap_or_default();
    let payload = compress(body);
    let mut out = Vec::with_capacity(MAGIC.len() + 12 + header.len() + payload.len() + CHECKSUM_BYTES);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(header.len() as u32).to_le_bytes());
    out.extend_from_slice(&header);
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(&payload);
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
    runs: Vec<Vec<[u32; 2]>>,
    body: Vec<u8>,
    /// Whether the body's chunks are still their XOR with the baseline
    /// (this format's images, until [`restore`] turns them back).
    delta: bool,
    /// Files the code held open, closed before the capture.
    pub(crate) closed_files: Vec<String>,
}

impl Drop for Decoded {
    fn drop(&mut self) {
        keep_spare_body(std::mem::take(&mut self.body));
    }
}

/// The checksum of an image's content.
fn checksum(content: &[u8]) -> [u8; CHECKSUM_BYTES] {
    xxhash_rust::xxh3::xxh3_128(content).to_le_bytes()
}

/// The header of `bytes`, unchecked, whether its chunks are deltas from the
/// baseline, and what follows the header.
fn read_header(bytes: &[u8]) -> Result<(Header, bool, Reader<'_>), StateError> {
    let corrupt = |what: &str| StateError::Corrupt(what.to_owned());
    if bytes.len() >= MAGIC.len() && &bytes[..MAGIC.len()] == OLDER_MAGIC {
        return Err(StateError::OtherBuild("an image of an earlier format".into()));
    }
    if bytes.len() < MAGIC.len() + 12 + CHECKSUM_BYTES {
        return Err(corrupt("not a state image"));
    }
    let delta = match &bytes[..MAGIC.len()] {
        magic if magic == MAGIC => true,
        magic if magic == RAW_CHUNKS_MAGIC => false,
        _ => return Err(corrupt("not a state image")),
    };
    let mut reader = Reader { bytes: &bytes[MAGIC.len()..bytes.len() - CHECKSUM_BYTES] };
    let header_len = reader.u32()? as usize;
    let header: Header = serde_json::from_slice(reader.take(header_len)?).map_err(|e| StateError::Corrupt(format!("header: {e}")))?;
    Ok((header, delta, reader))
}

/// Where `bytes`' chunks go, read without checking the image.
pub(crate) fn plan(bytes: &[u8]) -> Result<Plan, StateError> {
    let (header, _, _) = read_header(bytes)?;
    Ok(Plan { pages: header.pages, runs: header.runs })
}

/// Checks `bytes`' checksum and decompresses it.
pub(crate) fn decode(bytes: &[u8]) -> Result<Decoded, StateError> {
    let corrupt = |what: &str| StateError::Corrupt(what.to_owned());
    let (header, delta, mut reader) = read_header(bytes)?;
    let (content, expected) = bytes.split_at(bytes.len() - CHECKSUM_BYTES);
    if checksum(content) != expected {
        return Err(corrupt("its checksum does not match its contents"));
    }
    let payload_len = usize::try_from(reader.u64()?).map_err(|_| corrupt("payload length"))?;
    let payload = reader.take(payload_len)?;
    let body_bytes = usize::try_from(header.body_bytes).map_err(|_| corrupt("body length"))?;
    let body = decompress(payload, body_bytes)?;
    Ok(Decoded { identity: header.identity, pages: header.pages, runs: header.runs, body, delta, closed_files: header.closed_files })
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
    let adapter = access.globals.iter().find(|g| g.slot.name.as_deref() == Some(ADAPTER_STATE_POINTER)).map(|g| g.slot.module);
    let protected = match adapter {
        Some(adapter) => {
            let (state, allocation, stack) = adapter_globals(access, adapter)?;
            let mut fresh = [0u64; 3];
            for (value, at) in fresh.iter_mut().zip([state, allocation, stack]) {
                *value = access.globals[at].get(&mut *store, instance).await?.0;
            }
            let fresh = AdapterPlaces { state: fresh[0], allocation: fresh[1], stack: fresh[2] };
            let saved = AdapterPlaces { state: saved[state].0, allocation: saved[allocation].0, stack: saved[stack].0 };
            let state_fits = fresh.state == 0 || fresh.state == saved.state;
            // The adapter's stack: unallocated yet, or where the image has it.
            let stack_fits = fresh.allocation == 0 || fresh.stack == saved.stack;
            if !state_fits || !stack_fits {
                return Err(StateError::AdapterMoved);
            }
            (fresh.state != 0).then(|| (fresh.state as usize, fresh.state as usize + ADAPTER_STATE_BYTES))
        }
        None => None,
    };
    let protected: Vec<(usize, usize)> = protected.into_iter().collect();
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

/// Positions in `access.globals` of the adapter's state pointer, allocation state and stack pointer.
fn adapter_globals(access: &Access, adapter: u32) -> Result<(usize, usize, usize), StateError> {
    let find = |name: &str| access.globals.iter().position(|g| g.slot.module == adapter && g.slot.name.as_deref() == Some(name));
    match (find(ADAPTER_STATE_POINTER), find(ADAPTER_ALLOCATION_STATE), find("__stack_pointer")) {
        (Some(state), Some(allocation), Some(stack)) => Ok((state, allocation, stack)),
        _ => Err(StateError::Unsupported("the preview-1 adapter's globals are not all named".into())),
    }
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

/// Bounds-checked little-endian reads.
struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], StateError> {
        if self.bytes.len() < n {
            return Err(StateError::Corrupt("truncated".into()));
        }
        let (head, tail) = self.bytes.split_at(n);
        self.bytes = tail;
        Ok(head)
    }

    fn u32(&mut self) -> Result<u32, StateError> {
        let bytes = self.take(4)?;
        Ok(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
    }

    fn u64(&mut self) -> Result<u64, StateError> {
        let bytes = self.take(8)?;
        let mut array = [0u8; 8];
        array.copy_from_slice(bytes);
        Ok(u64::from_le_bytes(array))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_damaged_image_is_refused_by_its_checksum() {
        let header = Header { identity: Identity { component: "c".into(), baseline: "b".into() }, pages: vec![1], runs: vec![vec![]], body_bytes: 3, closed_files: vec![] };
        let mut bytes = encode(&header, &[1, 2, 3]);
        assert!(decode(&bytes).is_ok());
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0x40;
        assert!(matches!(decode(&bytes), Err(StateError::Corrupt(_))));
        assert!(matches!(decode(b"short"), Err(StateError::Corrupt(_))));
    }

    /// Random-looking bytes, as a page of a heap holds.
    fn noise(len: usize, seed: u64) -> Vec<u8> {
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
        let header = Header { identity: Identity { component: "c".into(), baseline: "b".into() }, pages: vec![1], runs: vec![vec![[CHUNK as u32, 3 * CHUNK as u32]]], body_bytes: body.len() as u64, closed_files: vec![] };
        let bytes = encode(&header, &body);
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
        let header = Header { identity: Identity { component: "c".into(), baseline: "b".into() }, pages: vec![1], runs: vec![vec![[0, CHUNK as u32]]], body_bytes: CHUNK as u64, closed_files: vec![] };
        let mut bytes = encode(&header, &chunk);
        bytes[..MAGIC.len()].copy_from_slice(RAW_CHUNKS_MAGIC);
        let content = bytes.len() - CHECKSUM_BYTES;
        let sum = checksum(&bytes[..content]);
        bytes[content..].copy_from_slice(&sum);
        let mut image = decode(&bytes).expect("decodes");
        undo_delta(&mut image, &baseline, 0).expect("nothing to undo");
        assert_eq!(image.body, chunk);
    }
}
