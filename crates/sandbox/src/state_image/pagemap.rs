//! Which pages of an instance's memory it may have written, from the
//! kernel's page tables, so a capture or a restore compares only those with
//! the baseline instead of reading every page, and the memory budget counts
//! what a session really holds.
//!
//! An instance's memory is a private mapping of the component's
//! compiled memory image (or of zeros past it). A page it has not written
//! is either not present (never touched) or present as the shared source
//! page; either way it holds the source's bytes, which the baseline (a bare
//! instance of the same component) holds too. A page it wrote became a
//! private copy: present, and not a file page. Swapped pages are counted as
//! written, and so is every page when the page tables cannot be read.
//!
//! The kernel's `PAGEMAP_SCAN` ioctl (Linux 6.7) answers with runs of the
//! pages asked for, walking the page tables once; older kernels are read
//! through `/proc/self/pagemap`, eight bytes a page sorted here, which for a
//! data session's 140 MiB of memory was most of a warm cell's time.

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
    written_runs(memory).unwrap_or_else(|| vec![(0, memory.len())])
}

/// Bytes of the pages in `[at, at + length)` that are the process's own
/// (written since they were mapped, or swapped out), counted from the page
/// tables; `None` when they cannot be read. Nothing in the range is
/// dereferenced: a range unmapped meanwhile counts as nothing.
pub(crate) fn private_bytes(at: usize, length: usize) -> Option<u64> {
    if !at.is_multiple_of(PAGE) {
        return None;
    }
    let pagemap = pagemap()?;
    // Neither a page of the mapped file nor the shared zero page: a copy
    // this process wrote (the read below also asks that no other process
    // maps it, which only a fork() could make so, and anypath never forks).
    match scan::runs(pagemap, at, length, scan::FILE | scan::PFNZERO) {
        Some(runs) => Some(runs.iter().map(|(start, end)| (end - start) as u64).sum()),
        None => read_private_bytes(pagemap, at, length),
    }
}

/// [`possibly_written`]'s ranges, `None` when the page tables cannot be read.
fn written_runs(memory: &[u8]) -> Option<Vec<(usize, usize)>> {
    let pagemap = pagemap()?;
    let at = memory.as_ptr() as usize;
    if !at.is_multiple_of(PAGE) {
        return None;
    }
    match scan::runs(pagemap, at, memory.len(), scan::FILE) {
        Some(runs) => Some(runs.into_iter().map(|(start, end)| (start - at, (end - at).min(memory.len()))).collect()),
        None => read_written(pagemap, memory),
    }
}

fn pagemap() -> Option<&'static File> {
    static PAGEMAP: OnceLock<Option<File>> = OnceLock::new();
    PAGEMAP.get_or_init(|| File::open("/proc/self/pagemap").ok()).as_ref()
}

/// Appends `[start, end)` to `runs`, merged with the last run it continues.
fn push_run(runs: &mut Vec<(usize, usize)>, start: usize, end: usize) {
    match runs.last_mut() {
        Some(last) if last.1 == start => last.1 = end,
        _ => runs.push((start, end)),
    }
}

/// The `PAGEMAP_SCAN` ioctl on `/proc/self/pagemap`
/// (`Documentation/admin-guide/mm/pagemap.rst`, "PAGEMAP_SCAN").
mod scan {
    use std::fs::File;
    use std::os::fd::AsRawFd;

    use super::{PAGE, push_run};

    /// `_IOWR('f', 16, struct pm_scan_arg)`.
    const PAGEMAP_SCAN: libc::c_ulong = 0xC060_6610;
    /// Page categories (`PAGE_IS_*`).
    pub(super) const FILE: u64 = 1 << 2;
    const PRESENT: u64 = 1 << 3;
    const SWAPPED: u64 = 1 << 4;
    pub(super) const PFNZERO: u64 = 1 << 5;

    /// `struct page_region`.
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct PageRegion {
        start: u64,
        end: u64,
        categories: u64,
    }

    /// `struct pm_scan_arg`.
    #[repr(C)]
    struct ScanArg {
        size: u64,
        flags: u64,
        start: u64,
        end: u64,
        walk_end: u64,
        vec: u64,
        vec_len: u64,
        max_pages: u64,
        category_inverted: u64,
        category_mask: u64,
        category_anyof_mask: u64,
        return_mask: u64,
    }

    /// The runs of pages in `[at, at + length)` that are present or swapped
    /// out and in none of the categories `excluded`, as absolute address
    /// ranges; `None` when the kernel has no such ioctl (or refuses it).
    pub(super) fn runs(pagemap: &File, at: usize, length: usize, excluded: u64) -> Option<Vec<(usize, usize)>> {
        /// Regions per call: the walk resumes where a full buffer stopped it.
        const REGIONS: usize = 256;
        let mut regions = [PageRegion::default(); REGIONS];
        let end = at.checked_add(length.div_ceil(PAGE) * PAGE)?;
        let mut runs = Vec::new();
        let mut start = at;
        while start < end {
            let mut arg = ScanArg {
                size: size_of::<ScanArg>() as u64,
                flags: 0,
                start: start as u64,
                end: end as u64,
                walk_end: 0,
                vec: regions.as_mut_ptr() as u64,
                vec_len: REGIONS as u64,
                max_pages: 0,
                // A page qualifies when it has none of `excluded` (inverted,
                // then all required) and is present or swapped out.
                category_inverted: excluded,
                category_mask: excluded,
                category_anyof_mask: PRESENT | SWAPPED,
                // No categories back: neighbouring pages merge into one region.
                return_mask: 0,
            };
            // SAFETY: `arg` is a `pm_scan_arg` of the size it names, and `vec`
            // points at `REGIONS` writable `page_region`s that outlive the call.
            // The kernel only reads the page tables of the range; nothing in
            // it is dereferenced.
            let found = unsafe { libc::ioctl(pagemap.as_raw_fd(), PAGEMAP_SCAN, &mut arg) };
            let found = usize::try_from(found).ok()?;
            for region in regions.get(..found)? {
                push_run(&mut runs, region.start as usize, region.end as usize);
            }
            let walked_to = arg.walk_end as usize;
            // A walk that did not move would loop for ever: read instead.
            if walked_to <= start {
                return None;
            }
            start = walked_to;
        }
        Some(runs)
    }
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

/// [`private_bytes`] from `/proc/self/pagemap` read page by page.
fn read_private_bytes(pagemap: &File, at: usize, length: usize) -> Option<u64> {
    /// Entries read per call: 512 KiB of address space per KiB of buffer.
    const BATCH: usize = 8192;
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

/// [`written_runs`] from `/proc/self/pagemap` read page by page.
fn read_written(pagemap: &File, memory: &[u8]) -> Option<Vec<(usize, usize)>> {
    let at = memory.as_ptr() as usize;
    let pages = memory.len().div_ceil(PAGE);
    let mut entries = vec![0u8; pages * 8];
    pagemap.read_exact_at(&mut entries, (at / PAGE * 8) as u64).ok()?;
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    for (page, entry) in entries.chunks_exact(8).enumerate() {
        if is_written(entry) {
            push_run(&mut ranges, page * PAGE, ((page + 1) * PAGE).min(memory.len()));
        }
    }
    Some(ranges)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh private mapping of `pages` pages, of zeros or of a file,
    /// unmapped on drop.
    struct Mapping {
        at: *mut libc::c_void,
        length: usize,
    }

    impl Mapping {
        fn new(pages: usize) -> Self {
            Self::map(pages, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1)
        }

        /// `file`'s first `pages` pages, copy on write (as an instance maps its image).
        fn of_file(file: &File, pages: usize) -> Self {
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

        fn address(&self) -> usize {
            self.at as usize
        }

        fn memory(&mut self) -> &mut [u8] {
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
    fn the_page_table_scan_finds_what_the_page_by_page_read_finds() {
        let file = memory_file(32);
        let (mut image, mut heap) = (Mapping::of_file(&file, 32), Mapping::new(48));
        let read = touch(&mut image, &mut heap);
        assert_eq!(read, 12, "the image's pages read as ones, the heap's as zeros");
        let pagemap = pagemap().expect("/proc/self/pagemap");
        let runs = |mapping: &Mapping, excluded: u64| scan::runs(pagemap, mapping.address(), mapping.length, excluded).expect("PAGEMAP_SCAN (Linux 6.7)");
        let bytes = |runs: Vec<(usize, usize)>| runs.iter().map(|(start, end)| (end - start) as u64).sum::<u64>();
        for (mapping, written) in [(&mut image, 5u64), (&mut heap, 5)] {
            let own = bytes(runs(mapping, scan::FILE | scan::PFNZERO));
            assert_eq!(own, written * PAGE as u64, "only the pages written are the process's own");
            assert_eq!(Some(own), read_private_bytes(pagemap, mapping.address(), mapping.length));
            let scanned: Vec<(usize, usize)> =
                runs(mapping, scan::FILE).into_iter().map(|(start, end)| (start - mapping.address(), end - mapping.address())).collect();
            assert_eq!(Some(scanned), read_written(pagemap, mapping.memory()));
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
