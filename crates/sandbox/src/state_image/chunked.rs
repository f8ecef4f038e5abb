//! A state image as a store keeps it: a small manifest and the segments it
//! names by SHA-256, each kept once however many images name it.
//!
//! [`split`] takes an image apart; [`join`] puts one back from a manifest
//! and the segments' bytes, checking each against its name, so segments
//! read from a store other processes write to are never trusted.

use std::collections::HashMap;

use super::image::{self, CHECKSUM_BYTES, Header, MAGIC, StateError};
use super::reader::Reader;
use super::segments;

/// Leading bytes of a manifest.
const MANIFEST_MAGIC: &[u8; 8] = b"APIMAGE4";
/// The most bytes a manifest may have: one of a 4 GiB memory's windows
/// would take about 6 MiB.
pub const MAX_MANIFEST_BYTES: usize = 16 << 20;

/// One segment a manifest names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkName {
    /// SHA-256 of its bytes, hex.
    pub sha256: String,
    /// How many bytes it has.
    pub bytes: u32,
}

/// An image taken apart.
pub struct ChunkedImage<'a> {
    /// The manifest: the image's header, naming its segments in order.
    pub manifest: Vec<u8>,
    /// Each distinct segment once, with its bytes (borrowed from the image).
    pub chunks: Vec<(ChunkName, &'a [u8])>,
}

/// Takes `image` apart; `None` for an image of a format before segments,
/// which a store keeps whole.
pub fn split(image: &[u8]) -> Result<Option<ChunkedImage<'_>>, StateError> {
    if image.len() < MAGIC.len() || &image[..MAGIC.len()] != MAGIC {
        return Ok(None);
    }
    if image.len() < MAGIC.len() + 12 + CHECKSUM_BYTES {
        return Err(StateError::Corrupt("truncated".into()));
    }
    let mut reader = Reader { bytes: &image[MAGIC.len()..image.len() - CHECKSUM_BYTES] };
    let header_start = MAGIC.len();
    let header = image::parse_header(&mut reader)?;
    image::check_header(&header)?;
    let header_end = image.len() - CHECKSUM_BYTES - reader.bytes.len();
    let payload_len = usize::try_from(reader.u64()?).map_err(|_| StateError::Corrupt("payload length".into()))?;
    let mut payload = Reader { bytes: reader.take(payload_len)? };
    let mut seen = std::collections::HashSet::new();
    let mut chunks = Vec::new();
    for segment in &header.segments {
        let bytes = payload.take(segment.stored as usize)?;
        if seen.insert(segment.sha256.as_str()) {
            chunks.push((ChunkName { sha256: segment.sha256.clone(), bytes: segment.stored }, bytes));
        }
    }
    let mut manifest = Vec::with_capacity(header_end - header_start + MAGIC.len() + CHECKSUM_BYTES);
    manifest.extend_from_slice(MANIFEST_MAGIC);
    manifest.extend_from_slice(&image[header_start..header_end]);
    let checksum = image::checksum(&manifest);
    manifest.extend_from_slice(&checksum);
    Ok(Some(ChunkedImage { manifest, chunks }))
}

/// Whether `bytes` are a manifest (rather than a whole image).
pub fn is_manifest(bytes: &[u8]) -> bool {
    bytes.starts_with(MANIFEST_MAGIC)
}

/// The manifest's header, checked.
fn read_manifest(manifest: &[u8]) -> Result<Header, StateError> {
    if manifest.len() > MAX_MANIFEST_BYTES {
        return Err(StateError::Corrupt("a manifest larger than any capture makes".into()));
    }
    if !is_manifest(manifest) || manifest.len() < MANIFEST_MAGIC.len() + 4 + CHECKSUM_BYTES {
        return Err(StateError::Corrupt("not an image manifest".into()));
    }
    let (content, expected) = manifest.split_at(manifest.len() - CHECKSUM_BYTES);
    if image::checksum(content) != expected {
        return Err(StateError::Corrupt("the manifest's checksum does not match its contents".into()));
    }
    let mut reader = Reader { bytes: &content[MANIFEST_MAGIC.len()..] };
    let header = image::parse_header(&mut reader)?;
    if !reader.bytes.is_empty() {
        return Err(StateError::Corrupt("bytes past the manifest's header".into()));
    }
    if header.segments.is_empty() {
        return Err(StateError::Corrupt("a manifest naming no segment".into()));
    }
    image::check_header(&header)?;
    Ok(header)
}

/// The segments `manifest` names, each once, in order of first use.
pub fn chunk_names(manifest: &[u8]) -> Result<Vec<ChunkName>, StateError> {
    let header = read_manifest(manifest)?;
    let mut seen = std::collections::HashSet::new();
    Ok(header
        .segments
        .into_iter()
        .filter(|s| seen.insert(s.sha256.clone()))
        .map(|s| ChunkName { sha256: s.sha256, bytes: s.stored })
        .collect())
}

/// The image `manifest` stands for, from its segments' bytes by name.
/// `verified` names segments already checked (this host made or checked
/// them); every other one is hashed before it is used.
pub fn join(manifest: &[u8], chunks: &HashMap<String, bytes::Bytes>, verified: &dyn Fn(&str) -> bool) -> Result<Vec<u8>, StateError> {
    let header = read_manifest(manifest)?;
    let mut stored = Vec::with_capacity(header.segments.len());
    let mut unchecked = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for segment in &header.segments {
        let bytes = chunks.get(&segment.sha256).ok_or_else(|| StateError::Corrupt(format!("segment {} is missing", segment.sha256)))?;
        let trusted = verified(&segment.sha256) && bytes.len() == segment.stored as usize;
        if !trusted && seen.insert(segment.sha256.as_str()) {
            unchecked.push((segment, bytes.as_ref()));
        }
        stored.push(bytes.as_ref());
    }
    // Hashed side by side on the cores: a resume on a host that saw none of
    // the segments checks every byte of the image.
    if let Some((segment, _)) = segments::on_cores(&unchecked, |(segment, bytes)| (*segment, segments::holds(segment, bytes))).into_iter().find(|(_, holds)| !holds) {
        return Err(StateError::Corrupt(format!("segment {} does not match its name", segment.sha256)));
    }
    Ok(image::assemble(&header, &stored))
}

#[cfg(test)]
mod tests {
    use super::super::image::tests::header;
    use super::super::image::{CHUNK, decode};
    use super::*;

    fn image_of(body: &[u8], runs: Vec<Vec<[u32; 2]>>) -> Vec<u8> {
        let mut header = header(runs, body.len());
        header.pages = vec![2];
        let lengths = segments::cut(16, &header.runs);
        let compressed = segments::compress(body, &lengths);
        header.segments = compressed.iter().map(|(s, _)| s.clone()).collect();
        let stored: Vec<&[u8]> = compressed.iter().map(|(_, b)| b.as_slice()).collect();
        image::assemble(&header, &stored)
    }

    #[test]
    fn an_image_split_and_joined_is_the_same_image() {
        let body: Vec<u8> = (0..16 + 2 * CHUNK).map(|i| ((i * i + i) % 251) as u8).collect();
        let bytes = image_of(&body, vec![vec![[0, CHUNK as u32], [segments::WINDOW as u32, CHUNK as u32]]]);
        let chunked = split(&bytes).expect("splits").expect("of this format");
        assert_eq!(chunked.chunks.len(), 3);
        assert_eq!(chunk_names(&chunked.manifest).expect("names").len(), 3);
        let by_name: HashMap<String, bytes::Bytes> = chunked.chunks.iter().map(|(n, b)| (n.sha256.clone(), bytes::Bytes::copy_from_slice(b))).collect();
        let joined = join(&chunked.manifest, &by_name, &|_| false).expect("joins");
        assert_eq!(joined, bytes);
        assert_eq!(decode(&joined).expect("decodes").body, body);
    }

    #[test]
    fn a_segment_that_does_not_match_its_name_is_refused() {
        let body: Vec<u8> = (0..16 + CHUNK).map(|i| (i % 7) as u8).collect();
        let bytes = image_of(&body, vec![vec![[0, CHUNK as u32]]]);
        let chunked = split(&bytes).expect("splits").expect("of this format");
        let mut by_name: HashMap<String, bytes::Bytes> = chunked.chunks.iter().map(|(n, b)| (n.sha256.clone(), bytes::Bytes::copy_from_slice(b))).collect();
        let (name, _) = &chunked.chunks[1];
        let mut forged = by_name[&name.sha256].to_vec();
        forged[0] ^= 1;
        by_name.insert(name.sha256.clone(), forged.into());
        assert!(matches!(join(&chunked.manifest, &by_name, &|_| false), Err(StateError::Corrupt(_))));
        by_name.remove(&name.sha256);
        assert!(matches!(join(&chunked.manifest, &by_name, &|_| false), Err(StateError::Corrupt(_))));
    }
}
