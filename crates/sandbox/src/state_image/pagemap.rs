//! Which pages of an instance's memory it may have written, from the
//! kernel's page tables (`/proc/self/pagemap`), so a capture or a restore
//! compares only those with the baseline instead of reading every page.
//!
//! An instance's memory is a private mapping of the component's
//! compiled memory image (or of zeros past it). A page it has not written
//! is either not present (never touched) or present as the shared source
//! page; either way it holds the source's bytes, which the baseline (a bare
//! instance of the same component) holds too. A page it wrote became a
//! private copy: present, and not a file page. Swapped pages are counted as
//! written, and so is every page when the map cannot be read.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::OnceLock;

const PAGE: usize = 4096;
/// Bits of a pagemap entry (`Documentation/admin-guide/mm/pagemap.rst`).
const PRESENT: u64 = 1 << 63;
const SWAPPED: u64 = 1 << 62;
const FILE_OR_SHARED: u64 = 1 << 61;
/// The page is mapped here only (not the shared zero page, not a page
/// another mapping holds too).
const EXCLUSIVE: u64 = 1 << 56;

/// Byte ranges of `memory` (page aligned) whose pages may differ from the
/// mapping's source: the whole of it when the page tables cannot be read.
pub(crate) fn possibly_written(memory: &[u8]) -> Vec<(usize, usize)> {
    read(memory).unwrap_or_else(|| vec![(0, memory.len())])
}

/// Bytes of the pages in `[at, at + length)` that are the process's own
/// (written since they were mapped, or swapped out), counted from the page
/// tables; `None` when they cannot be read. Nothing in the range is
/// dereferenced: a range unmapped meanwhile counts as nothing.
pub(crate) fn private_bytes(at: usize, length: usize) -> Option<u64> {
    /// Entries read per call: 512 KiB of address space per KiB of buffer.
    const BATCH: usize = 8192;
    if !at.is_multiple_of(PAGE) {
        return None;
    }
    let pagemap = pagemap()?;
    let pages = length.div_ceil(PAGE);
    let mut entries = vec![0u8; BATCH.min(pages) * 8];
    let mut private = 0u64;
    let mut page = 0;
    while page < pages {
        let batch = BATCH.min(pages - page);
        let bytes = &mut entries[..batch * 8];
        pagemap.read_exact_at(bytes, ((at / PAGE + page) * 8) as u64).ok()?;
        private += bytes.chunks_exact(8).filter(|entry| is_own(entry)).count() as u64;
        page += batch;
    }
    Some(private * PAGE as u64)
}

fn pagemap() -> Option<&'static File> {
    static PAGEMAP: OnceLock<Option<File>> = OnceLock::new();
    PAGEMAP.get_or_init(|| File::open("/proc/self/pagemap").ok()).as_ref()
}

fn bits(entry: &[u8]) -> u64 {
    let mut bits = [0u8; 8];
    bits.copy_from_slice(entry);
    u64::from_le_bytes(bits)
}

/// Whether a pagemap entry may be a page the process wrote: swapped out,
/// or present and not a page of the mapped file (the shared zero page, read
/// and never written, counts too: a capture compares it and finds nothing).
fn is_written(entry: &[u8]) -> bool {
    let bits = bits(entry);
    bits & SWAPPED != 0 || (bits & PRESENT != 0 && bits & FILE_OR_SHARED == 0)
}

/// Whether a pagemap entry is a page that costs the process memory of its
/// own: swapped out, or present, anonymous and mapped here only (a copy it
/// wrote, not the shared zero page nor a page of the mapped file).
fn is_own(entry: &[u8]) -> bool {
    let bits = bits(entry);
    bits & SWAPPED != 0 || (bits & PRESENT != 0 && bits & FILE_OR_SHARED == 0 && bits & EXCLUSIVE != 0)
}

/// Byte ranges of `memory` (page aligned) whose pages are the process's
/// own ([`private_bytes`]'s count); `None` when the page tables cannot be read.
pub(crate) fn own_pages(memory: &[u8]) -> Option<Vec<(usize, usize)>> {
    ranges_where(memory, is_own)
}

fn read(memory: &[u8]) -> Option<Vec<(usize, usize)>> {
    ranges_where(memory, is_written)
}

fn ranges_where(memory: &[u8], wanted: fn(&[u8]) -> bool) -> Option<Vec<(usize, usize)>> {
    let pagemap = pagemap()?;
    let at = memory.as_ptr() as usize;
    if !at.is_multiple_of(PAGE) {
        return None;
    }
    let pages = memory.len().div_ceil(PAGE);
    let mut entries = vec![0u8; pages * 8];
    pagemap.read_exact_at(&mut entries, (at / PAGE * 8) as u64).ok()?;
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    for (page, entry) in entries.chunks_exact(8).enumerate() {
        if !wanted(entry) {
            continue;
        }
        let (start, end) = (page * PAGE, ((page + 1) * PAGE).min(memory.len()));
        match ranges.last_mut() {
            Some(last) if last.1 == start => last.1 = end,
            _ => ranges.push((start, end)),
        }
    }
    Some(ranges)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A fresh private mapping of `pages` pages, of zeros or of a file,
    /// unmapped on drop (the give-back's tests map one too).
    pub(crate) struct Mapping {
        at: *mut libc::c_void,
        length: usize,
    }

    impl Mapping {
        fn new(pages: usize) -> Self {
            Self::map(pages, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1)
        }

        /// `file`'s first `pages` pages, copy on write (as an instance maps its image).
        pub(crate) fn of_file(file: &File, pages: usize) -> Self {
            use std::os::fd::AsRawFd;
            Self::map(pages, libc::MAP_PRIVATE, file.as_raw_fd())
        }

        fn map(pages: usize, flags: libc::c_int, fd: libc::c_int) -> Self {
            let length = pages * PAGE;
            // SAFETY: a new private mapping, owned by the value and unmapped by its drop.
            let at = unsafe { libc::mmap(std::ptr::null_mut(), length, libc::PROT_READ | libc::PROT_WRITE, flags, fd, 0) };
            assert_ne!(at, libc::MAP_FAILED);
            Self { at, length }
        }

        pub(crate) fn address(&self) -> usize {
            self.at as usize
        }

        pub(crate) fn memory(&mut self) -> &mut [u8] {
            // SAFETY: the mapping is `length` bytes, readable and writable, for as long as `self`.
            unsafe { std::slice::from_raw_parts_mut(self.at.cast::<u8>(), self.length) }
        }
    }

    impl Drop for Mapping {
        fn drop(&mut self) {
            // SAFETY: unmapping what `map` mapped; no slice of it outlives `self`.
            unsafe { libc::munmap(self.at, self.length) };
        }
    }

    /// A memory file of `pages` pages of ones.
    fn memory_file(pages: usize) -> File {
        use std::os::fd::FromRawFd;
        // SAFETY: a new memory file; its descriptor is owned by the `File` from here on.
        let fd = unsafe { libc::memfd_create(c"pagemap-test".as_ptr(), 0) };
        assert!(fd >= 0, "memfd_create failed");
        // SAFETY: `fd` was just created and is owned by nothing else.
        let file = unsafe { File::from_raw_fd(fd) };
        file.write_all_at(&vec![1u8; pages * PAGE], 0).expect("writing the memory file");
        file
    }

    /// Pages read and written as an instance does: of the image (file
    /// pages read, then copied on write) and past it (zeros read, then
    /// written).
    fn touch(image: &mut Mapping, heap: &mut Mapping) -> u32 {
        let mut read = 0u32;
        for page in 0..12 {
            read += u32::from(image.memory()[page * PAGE]);
            read += u32::from(heap.memory()[page * PAGE]);
        }
        for page in [3, 10, 11, 20, 31] {
            image.memory()[page * PAGE + 1] = 7;
        }
        for page in [0, 5, 6, 7, 40] {
            heap.memory()[page * PAGE + 1] = 7;
        }
        read
    }

    #[test]
    fn only_the_pages_written_count_on_an_image_mapped_copy_on_write_and_on_zeros() {
        let file = memory_file(32);
        let (mut image, mut heap) = (Mapping::of_file(&file, 32), Mapping::new(48));
        let read = touch(&mut image, &mut heap);
        assert_eq!(read, 12, "the image's pages read as ones, the heap's as zeros");
        for mapping in [&image, &heap] {
            assert_eq!(private_bytes(mapping.address(), mapping.length), Some(5 * PAGE as u64), "only the pages written are the process's own");
        }
        // Past the image, the zero pages read count as possibly written (a
        // capture compares them and finds nothing); in the image, only copies.
        let in_pages = |ranges: Vec<(usize, usize)>| ranges.into_iter().map(|(start, end)| (start / PAGE, end / PAGE)).collect::<Vec<_>>();
        assert_eq!(in_pages(possibly_written(image.memory())), vec![(3, 4), (10, 12), (20, 21), (31, 32)]);
        assert_eq!(in_pages(possibly_written(heap.memory())), vec![(0, 12), (40, 41)]);
    }

    #[test]
    fn a_written_page_is_found_and_untouched_ones_are_not() {
        let mut mapping = Mapping::new(16);
        mapping.memory()[5 * PAGE + 7] = 1;
        assert_eq!(possibly_written(mapping.memory()), vec![(5 * PAGE, 6 * PAGE)]);
    }

    #[test]
    fn private_bytes_count_the_written_pages_only() {
        let mut mapping = Mapping::new(64);
        let (at, length) = (mapping.address(), 64 * PAGE);
        let before = private_bytes(at, length);
        for page in [0, 3, 40, 63] {
            mapping.memory()[page * PAGE] = 1;
        }
        // Read, never written: the shared zero page, not the process's own.
        let read: u32 = (10..20).map(|page| u32::from(mapping.memory()[page * PAGE])).sum();
        let after = private_bytes(at, length);
        assert_eq!((before, after, read), (Some(0), Some(4 * PAGE as u64), 0));
    }
}
