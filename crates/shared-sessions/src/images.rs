//! Sessions' state images in the object store as manifests and packs of
//! content-addressed segments (see `anypath_sandbox::state_image::chunked`).
//!
//! Saving an image writes only the segments the session's image before did
//! not hold, all in one new pack object (one write however many changed),
//! and a small manifest naming every segment by SHA-256 and where it lies.
//! Reading one fetches only the segments this host does not hold already
//! (its cache keeps every segment it wrote or read), one ranged read per
//! pack. A fork or a snapshot writes a manifest naming its source's packs.
//!
//! Removing packs no manifest names is the sweep's ([`crate::sweep`]); the
//! two agree through Redis: a manifest's packs are noted as named before it
//! is written, and a pack the sweep is removing is never named again (its
//! segments go into the new pack instead).
//!
//! Everything read from the store is checked before use: a manifest must be
//! the session's own, of its runtime, and parse within its bounds, and each
//! segment must hash to its name.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anypath_sandbox::state_image::chunked::{self, ChunkName, MAX_MANIFEST_BYTES};
use bytes::Bytes;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use serde::{Deserialize, Serialize};

use crate::coordination::Coordination;
use crate::error::SharedStoreError;

/// Leading bytes of a stored manifest.
const STORED_MAGIC: &[u8; 8] = b"APSHARE1";
/// A manifest naming more packs than this is written as one new pack: a
/// resume then reads a few objects, not one per run the session ever had.
const MAX_PACKS: usize = 8;
/// The most bytes of segments one ranged read of a pack may ask for.
const MAX_PACK_READ: u64 = 4 << 30;

/// Where each of a manifest's segments lies.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Placement {
    /// Whose image this is: a manifest found under another session's
    /// record is refused.
    tenant: String,
    session: String,
    /// The runtime the session ran when the image was made.
    #[serde(default)]
    runtime: Option<String>,
    /// The pack objects the segments lie in.
    packs: Vec<String>,
    /// Per segment, in the order the image's manifest names them (each
    /// once): its pack's index in `packs` and its offset there.
    segments: Vec<(u32, u64)>,
}

/// Where a segment lies: its pack and offset there.
#[derive(Debug, Clone)]
struct Place {
    pack: Arc<str>,
    offset: u64,
}

/// How long a place this host saw is named again without seeing it anew:
/// well within the week the sweep's marks of removed packs are kept (see
/// `DOOM` in [`crate::coordination`]), so a pack removed since is known as such.
const PLACE_TRUSTED_FOR: Duration = Duration::from_secs(24 * 3600);

/// The most segments whose places this host remembers (about 150 bytes
/// each): past it, the older half is forgotten.
const MAX_PLACES: usize = 200_000;

/// What a save or a share wrote.
pub(crate) struct Saved {
    pub(crate) manifest: String,
    pub(crate) packs: Vec<String>,
    /// The image's bytes (its segments'), for the session's quota.
    pub(crate) image_bytes: u64,
}

/// Counts since the process started, for `/metrics`.
#[derive(Default)]
pub(crate) struct ImageCounters {
    pub(crate) manifests_written: AtomicU64,
    pub(crate) segments_written: AtomicU64,
    pub(crate) segment_bytes_written: AtomicU64,
    pub(crate) segments_reused: AtomicU64,
    pub(crate) segments_fetched: AtomicU64,
    pub(crate) segment_bytes_fetched: AtomicU64,
    pub(crate) segments_cached: AtomicU64,
    pub(crate) refused: AtomicU64,
}

/// Segments this host wrote or checked, by SHA-256, kept up to a number of
/// bytes (the least recently used go first).
struct SegmentCache {
    held: HashMap<String, (Bytes, u64)>,
    bytes: usize,
    budget: usize,
    tick: u64,
}

impl SegmentCache {
    fn get(&mut self, sha256: &str) -> Option<Bytes> {
        self.tick += 1;
        let tick = self.tick;
        self.held.get_mut(sha256).map(|(bytes, used)| {
            *used = tick;
            bytes.clone()
        })
    }

    fn put(&mut self, sha256: &str, bytes: Bytes) {
        self.tick += 1;
        if let Some((old, _)) = self.held.insert(sha256.to_owned(), (bytes.clone(), self.tick)) {
            self.bytes -= old.len();
        }
        self.bytes += bytes.len();
        if self.bytes > self.budget {
            // Down to nine tenths at once: one sort per many insertions.
            let mut by_use: Vec<(u64, String)> = self.held.iter().map(|(k, (_, used))| (*used, k.clone())).collect();
            by_use.sort_unstable();
            for (_, key) in by_use {
                if self.bytes <= self.budget / 10 * 9 {
                    break;
                }
                if let Some((gone, _)) = self.held.remove(&key) {
                    self.bytes -= gone.len();
                }
            }
        }
    }
}

/// Images of this fleet's sessions in the object store.
pub(crate) struct SharedImages {
    pub(crate) objects: Arc<dyn ObjectStore>,
    pub(crate) coordination: Arc<Coordination>,
    cache: Mutex<SegmentCache>,
    /// Where each segment this host wrote or read lies, by SHA-256: a save
    /// names a segment already in the store instead of writing it again,
    /// whichever session's image it came from (a fork's, a snapshot's).
    places: Mutex<HashMap<String, (Place, Instant)>>,
    pub(crate) counters: ImageCounters,
    /// How long a pack no manifest names is kept (see [`crate::sweep`]):
    /// a save that took half of it starts over.
    grace: Duration,
}

impl SharedImages {
    pub(crate) fn new(objects: Arc<dyn ObjectStore>, coordination: Arc<Coordination>, cache_bytes: usize, grace: Duration) -> Self {
        Self {
            objects,
            coordination,
            cache: Mutex::new(SegmentCache { held: HashMap::new(), bytes: 0, budget: cache_bytes, tick: 0 }),
            places: Mutex::new(HashMap::new()),
            counters: ImageCounters::default(),
            grace,
        }
    }

    /// Remembers where the manifest `placement` puts its segments.
    fn remember(&self, placement: &Placement, names: &[ChunkName]) {
        let tick = Instant::now();
        let packs: Vec<Arc<str>> = placement.packs.iter().map(|p| Arc::from(p.as_str())).collect();
        let mut places = self.places.lock().unwrap_or_else(PoisonError::into_inner);
        for (name, (pack, offset)) in names.iter().zip(&placement.segments) {
            if let Some(pack) = packs.get(*pack as usize) {
                places.insert(name.sha256.clone(), (Place { pack: pack.clone(), offset: *offset }, tick));
            }
        }
        if places.len() > MAX_PLACES {
            let mut ticks: Vec<Instant> = places.values().map(|(_, t)| *t).collect();
            ticks.sort_unstable();
            let median = ticks[ticks.len() / 2];
            places.retain(|_, (_, t)| *t > median);
        }
    }

    /// Bytes of segments this host holds now, and how many.
    pub(crate) fn cached(&self) -> (usize, usize) {
        let cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        (cache.bytes, cache.held.len())
    }

    /// Whether `bytes` are a stored manifest (an image kept whole is not).
    pub(crate) fn is_stored_manifest(bytes: &[u8]) -> bool {
        bytes.starts_with(STORED_MAGIC)
    }

    /// Keeps `image` for the session: its new segments in one new pack at
    /// `new_pack`, its manifest at `new_manifest`. `None` for an image of a
    /// format before segments (kept whole by the caller).
    ///
    /// A segment this host knows to lie in the store already (it wrote or
    /// read it, for this session or another) is named where it lies, in at
    /// most [`MAX_PACKS`] packs (those holding the most of them).
    pub(crate) async fn save(
        &self,
        tenant: &str,
        session: &str,
        runtime: Option<String>,
        image: &[u8],
        new_pack: object_store::path::Path,
        new_manifest: object_store::path::Path,
    ) -> Result<Option<Saved>, SharedStoreError> {
        let Some(split) = chunked::split(image).map_err(|e| SharedStoreError::corrupt(format!("the image to save: {e}")))? else {
            return Ok(None);
        };
        // The distinct segments, in the order the manifest names them first.
        let names: Vec<ChunkName> = split.chunks.iter().map(|(name, _)| name.clone()).collect();
        let image_bytes: u64 = split.chunks.iter().map(|(name, _)| u64::from(name.bytes)).sum();
        let mut reuse: HashMap<&str, Place> = {
            let places = self.places.lock().unwrap_or_else(PoisonError::into_inner);
            split
                .chunks
                .iter()
                .filter_map(|(name, _)| places.get(&name.sha256).filter(|(_, seen)| seen.elapsed() < PLACE_TRUSTED_FOR).map(|(place, _)| (name.sha256.as_str(), place.clone())))
                .collect()
        };
        let mut per_pack: HashMap<Arc<str>, usize> = HashMap::new();
        for place in reuse.values() {
            *per_pack.entry(place.pack.clone()).or_default() += 1;
        }
        if per_pack.len() > MAX_PACKS {
            let mut ranked: Vec<(usize, Arc<str>)> = per_pack.into_iter().map(|(pack, n)| (n, pack)).collect();
            ranked.sort_unstable_by(|a, b| b.cmp(a));
            let kept: HashSet<Arc<str>> = ranked.into_iter().take(MAX_PACKS).map(|(_, pack)| pack).collect();
            reuse.retain(|_, place| kept.contains(&place.pack));
        }
        for attempt in 1..=3 {
            let started = Instant::now();
            let mut naming: Vec<String> = reuse.values().map(|place| place.pack.to_string()).collect();
            naming.sort_unstable();
            naming.dedup();
            let fresh = split.chunks.iter().any(|(name, _)| !reuse.contains_key(name.sha256.as_str()));
            if fresh {
                naming.push(new_pack.to_string());
            }
            let doomed = self.coordination.refer_packs(&naming).await?;
            if !doomed.is_empty() {
                // Being removed: their segments go into the new pack.
                let doomed: HashSet<&str> = doomed.iter().map(String::as_str).collect();
                if doomed.contains(new_pack.as_ref()) {
                    return Err(SharedStoreError::corrupt("a new pack's name is marked as removed".into()));
                }
                reuse.retain(|_, place| !doomed.contains(&*place.pack));
                continue;
            }
            let index_of: HashMap<&str, u32> = naming.iter().enumerate().map(|(i, pack)| (pack.as_str(), i as u32)).collect();
            let new_index = index_of.get(new_pack.as_ref()).copied().unwrap_or(u32::MAX);
            let mut pack_bytes = Vec::new();
            let mut placed: HashMap<&str, (u32, u64)> = HashMap::new();
            for (name, bytes) in &split.chunks {
                match reuse.get(name.sha256.as_str()) {
                    Some(place) => {
                        placed.insert(name.sha256.as_str(), (index_of[&*place.pack], place.offset));
                    }
                    None => {
                        placed.insert(name.sha256.as_str(), (new_index, pack_bytes.len() as u64));
                        pack_bytes.extend_from_slice(bytes);
                    }
                }
            }
            let written = (split.chunks.len() - reuse.len()) as u64;
            let placement = Placement {
                tenant: tenant.to_owned(),
                session: session.to_owned(),
                runtime: runtime.clone(),
                packs: naming.clone(),
                segments: names.iter().map(|n| placed[n.sha256.as_str()]).collect(),
            };
            let stored = stored_manifest(&placement, &split.manifest)?;
            if fresh {
                self.objects.put(&new_pack, PutPayload::from(pack_bytes.clone())).await?;
            }
            if started.elapsed() > self.grace / 2 && attempt < 3 {
                // The sweep may have taken packs named at the start: name them again.
                continue;
            }
            self.objects.put(&new_manifest, PutPayload::from(stored)).await?;
            let counters = &self.counters;
            counters.manifests_written.fetch_add(1, Relaxed);
            counters.segments_written.fetch_add(written, Relaxed);
            counters.segment_bytes_written.fetch_add(pack_bytes.len() as u64, Relaxed);
            counters.segments_reused.fetch_add(reuse.len() as u64, Relaxed);
            {
                let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
                for (name, bytes) in &split.chunks {
                    if !reuse.contains_key(name.sha256.as_str()) {
                        cache.put(&name.sha256, Bytes::copy_from_slice(bytes));
                    }
                }
            }
            self.remember(&placement, &names);
            return Ok(Some(Saved { manifest: new_manifest.to_string(), packs: naming, image_bytes }));
        }
        Err(SharedStoreError::corrupt("the store kept removing the packs this image needs".into()))
    }

    /// The image the stored manifest `stored` stands for, checked to be the
    /// session's own and of `runtime`.
    pub(crate) async fn read(&self, tenant: &str, session: &str, runtime: Option<&str>, stored: Bytes) -> Result<Vec<u8>, SharedStoreError> {
        let refuse = |what: String| {
            self.counters.refused.fetch_add(1, Relaxed);
            SharedStoreError::corrupt(what)
        };
        let (placement, image_manifest) = parse_stored(&stored).map_err(|e| refuse(e.to_string()))?;
        if placement.tenant != tenant || placement.session != session {
            return Err(refuse(format!("the record names the image of another session ({}/{})", placement.tenant, placement.session)));
        }
        if let (Some(has), Some(wanted)) = (placement.runtime.as_deref(), runtime)
            && has != wanted
        {
            return Err(SharedStoreError::Conflict(format!("the stored image is of the {has} runtime; the session runs {wanted}")));
        }
        let names = chunked::chunk_names(image_manifest).map_err(|e| refuse(format!("its manifest: {e}")))?;
        if names.len() != placement.segments.len() {
            return Err(refuse(format!("its manifest names {} segments and places {}", names.len(), placement.segments.len())));
        }
        let places: HashMap<&str, (u32, u64)> = names.iter().zip(&placement.segments).map(|(name, place)| (name.sha256.as_str(), *place)).collect();
        let mut have: HashMap<String, Bytes> = HashMap::with_capacity(names.len());
        let mut wanted: HashMap<u32, Vec<(&ChunkName, u64)>> = HashMap::new();
        {
            let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
            for name in &names {
                match cache.get(&name.sha256) {
                    Some(bytes) => {
                        have.insert(name.sha256.clone(), bytes);
                    }
                    None => {
                        let (pack, offset) = *places.get(name.sha256.as_str()).ok_or_else(|| refuse(format!("segment {} has no place", name.sha256)))?;
                        if pack as usize >= placement.packs.len() {
                            return Err(refuse(format!("segment {} lies in a pack the manifest does not name", name.sha256)));
                        }
                        wanted.entry(pack).or_default().push((name, offset));
                    }
                }
            }
        }
        let cached: HashSet<String> = have.keys().cloned().collect();
        self.counters.segments_cached.fetch_add(cached.len() as u64, Relaxed);
        let reads = wanted.into_iter().map(|(pack, segments)| {
            let path = object_store::path::Path::from(placement.packs[pack as usize].as_str());
            async move {
                let ranges: Vec<std::ops::Range<u64>> = segments.iter().map(|(name, offset)| *offset..offset.saturating_add(u64::from(name.bytes))).collect();
                if ranges.iter().any(|r| r.end > MAX_PACK_READ) {
                    return Err(SharedStoreError::corrupt("a segment beyond any pack's length".into()));
                }
                // One read from the first segment to the end of the last: a
                // save writes its new segments side by side.
                let start = ranges.iter().map(|r| r.start).min().unwrap_or(0);
                let end = ranges.iter().map(|r| r.end).max().unwrap_or(0);
                let span = match self.objects.get_range(&path, start..end).await {
                    Ok(span) => span,
                    Err(object_store::Error::NotFound { .. }) => return Err(SharedStoreError::corrupt(format!("{path}, a pack its manifest names, is not in the store"))),
                    Err(error) => match self.objects.head(&path).await {
                        Ok(meta) if meta.size < end => return Err(SharedStoreError::corrupt(format!("{path} is {} bytes, shorter than its manifest says", meta.size))),
                        _ => return Err(error.into()),
                    },
                };
                if span.len() as u64 != end - start {
                    return Err(SharedStoreError::corrupt(format!("{path} gave {} bytes where its manifest names {}", span.len(), end - start)));
                }
                let got = ranges.iter().map(|r| span.slice((r.start - start) as usize..(r.end - start) as usize));
                Ok::<_, SharedStoreError>(segments.into_iter().zip(got).map(|((name, _), bytes)| (name.sha256.clone(), bytes)).collect::<Vec<_>>())
            }
        });
        let mut fetched = 0u64;
        let mut fetched_bytes = 0u64;
        let packs = futures_util::future::try_join_all(reads).await.inspect_err(|error| {
            if matches!(error, SharedStoreError::Corrupt(_)) {
                self.counters.refused.fetch_add(1, Relaxed);
            }
        })?;
        for pack in packs {
            for (sha, bytes) in pack {
                fetched += 1;
                fetched_bytes += bytes.len() as u64;
                have.insert(sha, bytes);
            }
        }
        self.counters.segments_fetched.fetch_add(fetched, Relaxed);
        self.counters.segment_bytes_fetched.fetch_add(fetched_bytes, Relaxed);
        let image = chunked::join(image_manifest, &have, &|sha| cached.contains(sha)).map_err(|e| refuse(e.to_string()))?;
        {
            let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
            for (sha, bytes) in &have {
                if !cached.contains(sha) {
                    cache.put(sha, bytes.clone());
                }
            }
        }
        self.remember(&placement, &names);
        Ok(image)
    }

    /// Gives session `to` a manifest naming the segments of the stored
    /// manifest `from` (bytes `stored`), at `new_manifest`. `None` when
    /// the sweep is removing a pack it names (the caller copies the image).
    pub(crate) async fn share(&self, tenant: &str, to: &str, stored: &[u8], new_manifest: object_store::path::Path) -> Result<Option<Saved>, SharedStoreError> {
        let (mut placement, image_manifest) = parse_stored(stored)?;
        let names = chunked::chunk_names(image_manifest).map_err(|e| SharedStoreError::corrupt(format!("its manifest: {e}")))?;
        if !self.coordination.refer_packs(&placement.packs).await?.is_empty() {
            return Ok(None);
        }
        placement.tenant = tenant.to_owned();
        placement.session = to.to_owned();
        self.objects.put(&new_manifest, PutPayload::from(stored_manifest(&placement, image_manifest)?)).await?;
        self.counters.manifests_written.fetch_add(1, Relaxed);
        self.counters.segments_reused.fetch_add(names.len() as u64, Relaxed);
        let image_bytes = names.iter().map(|n| u64::from(n.bytes)).sum();
        self.remember(&placement, &names);
        Ok(Some(Saved { manifest: new_manifest.to_string(), packs: placement.packs, image_bytes }))
    }
}

/// The placement of a stored manifest and the image manifest it carries,
/// checked for shape and bounds.
fn parse_stored(stored: &[u8]) -> Result<(Placement, &[u8]), SharedStoreError> {
    let bad = |what: &str| SharedStoreError::corrupt(format!("the stored manifest: {what}"));
    if stored.len() > MAX_MANIFEST_BYTES * 2 {
        return Err(bad("larger than any save writes"));
    }
    let rest = stored.strip_prefix(STORED_MAGIC.as_slice()).ok_or_else(|| bad("not a manifest"))?;
    let (length, rest) = rest.split_first_chunk::<4>().ok_or_else(|| bad("truncated"))?;
    let length = u32::from_le_bytes(*length) as usize;
    if length > rest.len() {
        return Err(bad("truncated"));
    }
    let (json, image_manifest) = rest.split_at(length);
    let placement: Placement = serde_json::from_slice(json).map_err(|e| bad(&e.to_string()))?;
    if placement.packs.len() > 4 * MAX_PACKS || placement.segments.iter().any(|(pack, _)| *pack as usize >= placement.packs.len()) {
        return Err(bad("segments in packs it does not name"));
    }
    Ok((placement, image_manifest))
}

fn stored_manifest(placement: &Placement, image_manifest: &[u8]) -> Result<Vec<u8>, SharedStoreError> {
    let json = serde_json::to_vec(placement)?;
    let mut out = Vec::with_capacity(STORED_MAGIC.len() + 4 + json.len() + image_manifest.len());
    out.extend_from_slice(STORED_MAGIC);
    out.extend_from_slice(&(json.len() as u32).to_le_bytes());
    out.extend_from_slice(&json);
    out.extend_from_slice(image_manifest);
    Ok(out)
}
