//! What a live instance costs the host: the pages of its memories it has
//! made its own, not its linear memory's size.
//!
//! A session's memories are private mappings of its runtime's compiled
//! image (and zeros past it): every instance reads the same image pages,
//! shared through the page cache, and only the pages it writes are copied
//! for it. A `python-data` instance's linear memory is about 140 MiB, nearly
//! all of it image it never writes; counting the size would keep a tenth of
//! the sessions a host can hold. The kernel's page tables say which pages
//! are the instance's own; reading them is blocking work, proportional to
//! the memories' size, so the caller does it off the async workers.

/// Where a live instance's memories lie in the host's address space. The
/// addresses are only read about, never dereferenced: a set kept after its
/// instance was dropped counts nothing (or, at worst, another instance's
/// pages until it is measured again).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemoryRegions {
    /// Start and length in bytes of each memory.
    regions: Vec<(usize, usize)>,
}

impl MemoryRegions {
    pub(crate) fn new(regions: Vec<(usize, usize)>) -> Self {
        Self { regions }
    }

    /// The memories' sizes together: what the instance could touch.
    pub fn mapped_bytes(&self) -> u64 {
        self.regions.iter().map(|&(_, length)| length as u64).sum()
    }

    /// The bytes of pages the instance has made its own (written, or
    /// swapped out), from the page tables; where they cannot be read (not
    /// Linux, no `/proc`), the memories' whole size. Blocking: call it on
    /// the blocking pool.
    pub fn private_bytes(&self) -> u64 {
        self.regions
            .iter()
            .map(|&(at, length)| own_bytes(at, length).unwrap_or(length as u64))
            .sum()
    }
}

#[cfg(target_os = "linux")]
fn own_bytes(at: usize, length: usize) -> Option<u64> {
    crate::state_image::private_bytes(at, length)
}

#[cfg(not(target_os = "linux"))]
fn own_bytes(_at: usize, _length: usize) -> Option<u64> {
    None
}
