//! The image decoder against bytes from a hostile store: valid images and
//! manifests mutated at random (with their checksums made right again, so
//! the parser behind the checksum is reached), and bytes made up whole.
//! Every case must come back as an error or a decoded image whose places
//! lie inside its memories; none may panic or allocate past what its bytes
//! could hold. Runs for a bounded time.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::chunked::{chunk_names, join, split};
use super::image::tests::header;
use super::image::{CHECKSUM_BYTES, CHUNK, assemble, checksum, decode};
use super::segments;

/// How long the decoder is fuzzed in each test.
const BUDGET: Duration = Duration::from_secs(3);

/// A small deterministic generator (the failures it finds must repeat).
struct Noise(u64);

impl Noise {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// A valid image of two windows of chunks.
fn sample() -> Vec<u8> {
    let body: Vec<u8> = (0..16 + 3 * CHUNK).map(|i| ((i * i + 3 * i) % 253) as u8).collect();
    let mut header = header(vec![vec![[0, 2 * CHUNK as u32], [segments::WINDOW as u32, CHUNK as u32]]], body.len());
    header.pages = vec![2];
    let compressed = segments::compress(&body, &segments::cut(16, &header.runs));
    header.segments = compressed.iter().map(|(s, _)| s.clone()).collect();
    let stored: Vec<&[u8]> = compressed.iter().map(|(_, b)| b.as_slice()).collect();
    assemble(&header, &stored)
}

/// `bytes` changed in one of the ways damage or an attacker would.
fn mutate(noise: &mut Noise, mut bytes: Vec<u8>) -> Vec<u8> {
    match noise.below(6) {
        0 => {
            for _ in 0..=noise.below(8) {
                let at = noise.below(bytes.len());
                bytes[at] ^= 1 << noise.below(8);
            }
        }
        1 => bytes.truncate(noise.below(bytes.len())),
        2 => bytes.extend((0..noise.below(64)).map(|_| noise.next() as u8)),
        3 => {
            // A number in the JSON header made large, small or negative.
            let digits: Vec<usize> = bytes.iter().enumerate().filter(|(_, b)| b.is_ascii_digit()).map(|(i, _)| i).collect();
            if !digits.is_empty() {
                let at = digits[noise.below(digits.len())];
                let replacement = ["4294967295", "0", "18446744073709551615", "-1", "65537"][noise.below(5)];
                bytes.splice(at..at + 1, replacement.bytes());
            }
        }
        4 => {
            let at = noise.below(bytes.len());
            let len = noise.below(bytes.len() - at);
            bytes.drain(at..at + len);
        }
        _ => {
            let at = noise.below(bytes.len());
            let value = [0u8, 0xff, 0x7f, 0x80][noise.below(4)];
            bytes[at] = value;
        }
    }
    bytes
}

/// `bytes` with its trailing checksum made right for what it holds now.
fn resealed(mut bytes: Vec<u8>) -> Vec<u8> {
    if bytes.len() > CHECKSUM_BYTES {
        let content = bytes.len() - CHECKSUM_BYTES;
        let sum = checksum(&bytes[..content]);
        bytes[content..].copy_from_slice(&sum);
    }
    bytes
}

#[test]
fn the_decoder_refuses_mutated_and_made_up_images_without_a_panic() {
    let valid = sample();
    assert!(decode(&valid).is_ok());
    let mut noise = Noise(0x9e37_79b9_7f4a_7c15);
    let (started, mut cases, mut refused) = (Instant::now(), 0u64, 0u64);
    while started.elapsed() < BUDGET {
        let bytes = match noise.below(3) {
            0 => mutate(&mut noise, valid.clone()),
            1 => resealed(mutate(&mut noise, valid.clone())),
            _ => (0..noise.below(256)).map(|_| noise.next() as u8).collect(),
        };
        match decode(&bytes) {
            Ok(image) => {
                // What decodes is an image whose body its header accounts for.
                let chunks: u64 = image.runs.iter().flatten().map(|[_, len]| u64::from(*len)).sum();
                let globals = (image.body.len() as u64).checked_sub(chunks).expect("a body holding its chunks");
                assert_eq!(globals % 16, 0);
            }
            Err(_) => refused += 1,
        }
        let _ = split(&bytes);
        cases += 1;
    }
    assert!(cases > 1_000, "only {cases} cases in the budget");
    assert!(refused > cases / 2, "{refused} of {cases} refused");
}

#[test]
fn manifests_and_segments_from_a_store_are_checked_before_use() {
    let valid = sample();
    let chunked = split(&valid).expect("splits").expect("of this format");
    let segments: HashMap<String, bytes::Bytes> = chunked.chunks.iter().map(|(n, b)| (n.sha256.clone(), bytes::Bytes::copy_from_slice(b))).collect();
    assert_eq!(join(&chunked.manifest, &segments, &|_| false).expect("joins"), valid);
    let mut noise = Noise(0x2545_f491_4f6c_dd1d);
    let started = Instant::now();
    let mut cases = 0u64;
    while started.elapsed() < BUDGET {
        let manifest = match noise.below(2) {
            0 => mutate(&mut noise, chunked.manifest.clone()),
            _ => resealed(mutate(&mut noise, chunked.manifest.clone())),
        };
        let _ = chunk_names(&manifest);
        // Segments swapped, damaged or missing under their names.
        let mut held = segments.clone();
        let names: Vec<String> = held.keys().cloned().collect();
        let victim = names[noise.below(names.len())].clone();
        match noise.below(3) {
            0 => {
                let damaged = mutate(&mut noise, held[&victim].to_vec());
                held.insert(victim, damaged.into());
            }
            1 => {
                let other = held[&names[noise.below(names.len())]].clone();
                held.insert(victim, other);
            }
            _ => {
                held.remove(&victim);
            }
        }
        if let Ok(image) = join(&manifest, &held, &|_| false) {
            // A join only ever gives back an image whose segments are the
            // ones named: it decodes to the valid image's body, or not at all.
            if let (Ok(joined), Ok(original)) = (decode(&image), decode(&valid)) {
                assert_eq!(joined.body, original.body);
            }
        }
        cases += 1;
    }
    assert!(cases > 1_000, "only {cases} cases in the budget");
}
