//! The body format images had before segments: compressed in LZ4 blocks
//! of at least a megabyte, one per core. Still read; written only by tests.

use super::image::{StateError, spare_body};
#[cfg(test)]
use super::image::{BLOCKS_MAGIC, Header, checksum};
use super::reader::Reader;

/// Bodies of the format before were compressed in blocks of at least this
/// size, one per core.
#[cfg(test)]
const MIN_BLOCK: usize = 1 << 20;

/// The body as LZ4 blocks compressed side by side: `u32` count, then per
/// block its `u64` raw and compressed lengths and its bytes.
#[cfg(test)]
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
pub(super) fn decompress(payload: &[u8], body_bytes: usize) -> Result<Vec<u8>, StateError> {
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


/// An image of the format before (blocks of at least a megabyte).
#[cfg(test)]
pub(super) fn encode_blocks(header: &Header, body: &[u8]) -> Vec<u8> {
    let header = serde_json::to_vec(header).unwrap_or_default();
    let payload = compress(body);
    let mut out = Vec::new();
    out.extend_from_slice(BLOCKS_MAGIC);
    out.extend_from_slice(&(header.len() as u32).to_le_bytes());
    out.extend_from_slice(&header);
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(&payload);
    let checksum = checksum(&out);
    out.extend_from_slice(&checksum);
    out
}
