//! Linear memories mapped copy-on-write from a frozen image, so instances
//! started from one state share its pages the way `fork(2)` shares them.
//!
//! A [`Frozen`] image is a memory's bytes written once into a sealed
//! `memfd`. A [`CowMemory`] is a linear memory (wasmtime's
//! [`LinearMemory`], made by [`CowMemories`], the engine's
//! [`MemoryCreator`]) whose pages are a private mapping of such an image:
//! reading a page maps the image's page, shared with every other mapping
//! of it; writing one makes the instance its own copy of that page only.
//! A live memory can be mapped onto another image between runs
//! ([`CowMemories::remap`]): a fork's child then holds its parent's state
//! at the cost of a few system calls, and owns only the pages it writes.
//!
//! The memories are wasmtime's extension point for host-managed memory,
//! not a change to wasmtime: the engine is configured without its own
//! copy-on-write images (`memory_init_cow(false)`), so a module's data
//! segments are the creator's to provide.

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::fs::FileExt;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use wasmtime::{LinearMemory, MemoryCreator, MemoryType};

const PAGE: usize = 4096;
/// What a memory reserves when wasmtime leaves the size to the creator:
/// the whole 32-bit space, so growing never moves it.
const DEFAULT_RESERVATION: usize = 4 << 30;

/// A memory's bytes, written once into a sealed `memfd` and mapped
/// privately under every memory started from them.
#[derive(Debug)]
pub(crate) struct Frozen {
    file: File,
    len: usize,
    /// For an overlay ([`Self::over`]): the image under it, and the page
    /// ranges this file holds; elsewhere the memory reads the image under
    /// it (zeros past its end).
    layer: Option<(Arc<Frozen>, Vec<(usize, usize)>)>,
    /// The file mapped shared and read-only, for reading its bytes.
    view: OnceLock<Option<View>>,
}

impl Frozen {
    /// Freezes `bytes` (a whole number of pages or not: the tail of the
    /// last page reads as zeros).
    #[cfg(test)]
    pub(crate) fn of(bytes: &[u8]) -> io::Result<Arc<Self>> {
        let file = memfd(bytes.len())?;
        file.write_all_at(bytes, 0)?;
        seal(&file)?;
        Ok(Arc::new(Self { file, len: bytes.len(), layer: None, view: OnceLock::new() }))
    }

    /// Freezes `memory` as `under` plus `memory`'s bytes in `regions`
    /// (page-aligned, ascending ranges, each inside `memory`): only those
    /// are written, and a memory mapping it maps `under` elsewhere. The
    /// caller vouches that `memory` holds `under`'s bytes (zeros past its
    /// end) outside `regions`.
    pub(crate) fn over(under: Arc<Frozen>, memory: &[u8], regions: Vec<(usize, usize)>) -> io::Result<Arc<Self>> {
        if under.layer.is_some() {
            return Err(io::Error::other("an overlay cannot lie over another overlay"));
        }
        let file = memfd(memory.len())?;
        for &(start, end) in &regions {
            let bytes = memory.get(start..end).filter(|_| start.is_multiple_of(PAGE)).ok_or_else(|| io::Error::other("a region outside the memory"))?;
            file.write_all_at(bytes, start as u64)?;
        }
        seal(&file)?;
        Ok(Arc::new(Self { file, len: memory.len(), layer: Some((under, regions)), view: OnceLock::new() }))
    }

    /// The bytes a memory mapping this image reads at `start..end` (inside
    /// one page), or `None` when they cannot be read here.
    pub(crate) fn page_bytes(&self, start: usize, end: usize) -> Option<&[u8]> {
        static ZEROS: [u8; PAGE] = [0; PAGE];
        if start >= self.len.next_multiple_of(PAGE) {
            return ZEROS.get(..end - start);
        }
        match &self.layer {
            Some((under, regions)) if !regions.iter().any(|&(from, to)| from <= start && end <= to) => under.page_bytes(start, end),
            _ => self.view()?.bytes().get(start..end),
        }
    }

    fn view(&self) -> Option<&View> {
        self.view.get_or_init(|| View::of(&self.file, self.len.next_multiple_of(PAGE)).ok()).as_ref()
    }

    /// A memory of `len` bytes holding `segments` (`(offset, bytes)`) and
    /// zeros elsewhere (holes in the file: they cost nothing).
    pub(crate) fn of_segments(len: usize, segments: &[(u32, Vec<u8>)]) -> io::Result<Arc<Self>> {
        let file = memfd(len)?;
        for (offset, bytes) in segments {
            if *offset as usize + bytes.len() > len {
                return Err(io::Error::other("a data segment ends past its memory"));
            }
            file.write_all_at(bytes, u64::from(*offset))?;
        }
        seal(&file)?;
        Ok(Arc::new(Self { file, len, layer: None, view: OnceLock::new() }))
    }

    /// Bytes frozen.
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

/// A frozen file mapped shared and read-only.
#[derive(Debug)]
struct View {
    at: usize,
    len: usize,
}

impl View {
    fn of(file: &File, len: usize) -> io::Result<Self> {
        if len == 0 {
            return Ok(Self { at: 0, len: 0 });
        }
        // SAFETY: a new read-only mapping of a sealed file: no one can change
        // its bytes, so slices of it stay valid while it is mapped.
        let at = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED, file.as_raw_fd(), 0) };
        if at == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Self { at: at as usize, len })
    }

    fn bytes(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: mapped readable for `len` bytes until dropped, and sealed.
        unsafe { std::slice::from_raw_parts(self.at as *const u8, self.len) }
    }
}

impl Drop for View {
    fn drop(&mut self) {
        if self.len > 0 {
            // SAFETY: the mapping this view made, unmapped once.
            unsafe { libc::munmap(self.at as *mut libc::c_void, self.len) };
        }
    }
}

/// A new sealable `memfd` of `len` bytes (whole pages) of zeros.
fn memfd(len: usize) -> io::Result<File> {
    // SAFETY: a plain system call with a NUL-terminated name; the
    // descriptor it returns is owned by the `File` below.
    let fd = unsafe { libc::memfd_create(c"anypath-frozen".as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by the kernel and nothing else owns it.
    let file = unsafe { File::from_raw_fd(fd) };
    file.set_len(len.next_multiple_of(PAGE) as u64)?;
    Ok(file)
}

/// Seals `file`: no mapping of it can ever see it change.
fn seal(file: &File) -> io::Result<()> {
    let seals = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_WRITE | libc::F_SEAL_SEAL;
    // SAFETY: fcntl on a descriptor the caller owns.
    if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_ADD_SEALS, seals) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Where a memory lives and what it maps; shared between the memory
/// wasmtime holds and the creator's index of live memories.
#[derive(Debug)]
struct Mapping {
    base: usize,
    /// Bytes reserved for the memory, not counting the guard after it.
    capacity: usize,
    guard: usize,
    /// Bytes accessible now (the wasm memory's size, page aligned).
    size: usize,
    maximum: Option<usize>,
    /// The image its pages map (none: zeros).
    source: Option<Arc<Frozen>>,
}

impl Mapping {
    fn reserve(minimum: usize, maximum: Option<usize>, reserved: Option<usize>, guard: usize) -> io::Result<Self> {
        let capacity = reserved.unwrap_or_else(|| maximum.unwrap_or(DEFAULT_RESERVATION).max(minimum)).next_multiple_of(PAGE);
        // SAFETY: a new anonymous reservation, inaccessible until made so.
        let base = unsafe {
            libc::mmap(std::ptr::null_mut(), capacity + guard, libc::PROT_NONE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE, -1, 0)
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let mut mapping = Self { base: base as usize, capacity, guard, size: 0, maximum, source: None };
        mapping.grow_to(minimum)?;
        Ok(mapping)
    }

    /// Makes `[size, new_size)` readable and writable (zeros).
    fn grow_to(&mut self, new_size: usize) -> io::Result<()> {
        let new_size = new_size.next_multiple_of(PAGE);
        if new_size > self.capacity || self.maximum.is_some_and(|max| new_size > max.next_multiple_of(PAGE)) {
            return Err(io::Error::other("the memory cannot grow past its reservation"));
        }
        if new_size > self.size {
            // SAFETY: inside this memory's own reservation.
            let done = unsafe { libc::mprotect((self.base + self.size) as *mut libc::c_void, new_size - self.size, libc::PROT_READ | libc::PROT_WRITE) };
            if done != 0 {
                return Err(io::Error::last_os_error());
            }
            self.size = new_size;
        }
        Ok(())
    }

    /// Maps `source` privately over the memory's first pages (an
    /// overlay: the image under it, then its regions), and fresh zeros over
    /// the rest of its size: what the memory held is gone.
    fn map(&mut self, source: Arc<Frozen>) -> io::Result<()> {
        let (whole, regions) = match &source.layer {
            Some((under, regions)) => (under, regions.as_slice()),
            None => (&source, &[][..]),
        };
        let mapped = whole.len.next_multiple_of(PAGE).min(self.size);
        self.map_at(0, mapped, Some(&whole.file))?;
        self.map_at(mapped, self.size - mapped, None)?;
        for &(start, end) in regions {
            let end = end.next_multiple_of(PAGE).min(self.size);
            if start < end {
                self.map_at(start, end - start, Some(&source.file))?;
            }
        }
        self.source = Some(source);
        Ok(())
    }

    /// Maps `len` bytes at `offset` of the memory privately onto the same
    /// offset of `file` (`None`: fresh zeros).
    fn map_at(&self, offset: usize, len: usize, file: Option<&File>) -> io::Result<()> {
        if len == 0 {
            return Ok(());
        }
        let (flags, fd) = match file {
            Some(file) => (libc::MAP_PRIVATE | libc::MAP_FIXED, file.as_raw_fd()),
            None => (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED, -1),
        };
        // SAFETY: replaces pages inside this memory's own reservation (the
        // callers keep `offset + len` within its size); the caller of
        // `map` guarantees no code runs on the memory meanwhile.
        let at = unsafe { libc::mmap((self.base + offset) as *mut libc::c_void, len, libc::PROT_READ | libc::PROT_WRITE, flags, fd, offset as libc::off_t) };
        if at == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the whole reservation this mapping made, unmapped once.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.capacity + self.guard) };
    }
}

/// A linear memory whose pages map a [`Frozen`] image copy-on-write.
struct CowMemory(Arc<Mutex<Mapping>>);

impl CowMemory {
    fn mapping(&self) -> std::sync::MutexGuard<'_, Mapping> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

// SAFETY: the memory is one reservation that never moves (its capacity is
// reserved up front), accessible up to `byte_size`, with `guard` bytes of
// inaccessible pages after the capacity as wasmtime asked.
unsafe impl LinearMemory for CowMemory {
    fn byte_size(&self) -> usize {
        self.mapping().size
    }

    fn byte_capacity(&self) -> usize {
        self.mapping().capacity
    }

    fn grow_to(&mut self, new_size: usize) -> wasmtime::Result<()> {
        self.mapping().grow_to(new_size).map_err(wasmtime::Error::msg)
    }

    fn as_ptr(&self) -> *mut u8 {
        self.mapping().base as *mut u8
    }
}

/// The session engine's memory creator: each memory starts as `initial`
/// (the component's image of its memory; zeros without one), and a live
/// memory can be mapped onto another image ([`Self::remap`]).
#[derive(Default)]
pub(crate) struct CowMemories {
    /// The image new memories start as, and the minimum size (bytes) of
    /// the memory it is for: other memories of the engine (a GC heap) start
    /// as zeros.
    initial: OnceLock<(Arc<Frozen>, usize)>,
    /// Live memories by base address, for [`Self::remap`].
    live: Mutex<HashMap<usize, Weak<Mutex<Mapping>>>>,
}

impl CowMemories {
    /// A creator whose memories of `initial`'s size start as `initial`.
    #[cfg(test)]
    pub(crate) fn starting_as(initial: Arc<Frozen>) -> Self {
        let creator = Self::default();
        creator.start_as(initial.clone(), initial.len());
        creator
    }

    /// From now on, new memories of `minimum` bytes start as `initial`
    /// (once: the component's image is set when it is loaded, before any
    /// instance).
    pub(crate) fn start_as(&self, initial: Arc<Frozen>, minimum: usize) {
        let _ = self.initial.set((initial, minimum));
    }

    /// The image new memories of its size start as, if one was set.
    pub(crate) fn initial(&self) -> Option<&Arc<Frozen>> {
        self.initial.get().map(|(initial, _)| initial)
    }

    /// Maps the live memory at `base` (a memory this creator made, between
    /// runs) onto `source`: its state is then `source`'s, read from pages
    /// shared with every other mapping of it. The memory must already be
    /// at least `source`'s size.
    ///
    /// # Safety
    /// No code may run on the memory, and no slice of it may be held,
    /// while it is remapped.
    pub(crate) unsafe fn remap(&self, base: *const u8, source: Arc<Frozen>) -> io::Result<()> {
        let mapping = self.live.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(&(base as usize)).and_then(Weak::upgrade);
        let Some(mapping) = mapping else {
            return Err(io::Error::other("the memory is not one this engine made"));
        };
        let mut mapping = mapping.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if mapping.size < source.len() {
            return Err(io::Error::other(format!("the memory holds {} bytes, the image {}", mapping.size, source.len())));
        }
        mapping.map(source)
    }
}

// SAFETY: every memory is reserved whole (never moves), accessible only up
// to its size, followed by the guard wasmtime asked for, and starts as the
// creator's image: the session engine's components carry no data segments
// for it (the image is what they would have written).
unsafe impl MemoryCreator for CowMemories {
    fn new_memory(&self, _ty: MemoryType, minimum: usize, maximum: Option<usize>, reserved: Option<usize>, guard: usize) -> Result<Box<dyn LinearMemory>, String> {
        let mut mapping = Mapping::reserve(minimum, maximum, reserved, guard).map_err(|e| format!("reserving a linear memory: {e}"))?;
        if let Some((initial, size)) = self.initial.get()
            && *size == minimum
        {
            mapping.map(initial.clone()).map_err(|e| format!("mapping a linear memory's image: {e}"))?;
        }
        let base = mapping.base;
        let mapping = Arc::new(Mutex::new(mapping));
        let mut live = self.live.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        live.retain(|_, memory| memory.strong_count() > 0);
        live.insert(base, Arc::downgrade(&mapping));
        Ok(Box::new(CowMemory(mapping)))
    }
}

#[cfg(test)]
#[path = "cow_tests.rs"]
mod tests;
