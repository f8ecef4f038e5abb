//! Pages a live instance wrote that hold the baseline's bytes again, given
//! back to the kernel between runs.
//!
//! A run writes many pages of the runtime's image only to leave them as
//! they were: a reference count raised and dropped, a free list pushed and
//! popped, a buffer zeroed again. Each such page became the instance's own
//! copy when it was first written, and stays one: about a third of what a
//! `python-data` session holds of its own after a DataFrame and a read.
//! `MADV_DONTNEED` drops the copy, and the next read maps the image's page
//! (or zeros past the image) again, shared with every instance.
//!
//! That is only right where the mapping's source holds the baseline's
//! bytes, which is what wasmtime's copy-on-write images give. Each page
//! given back is read again and compared; one that did not come back as
//! the baseline's bytes is written back and never given back again (the
//! runtime remembers it in [`Unreturnable`]).

use std::collections::HashSet;
use std::sync::Mutex;

use wasmtime::Store;
use wasmtime::component::Instance;

use super::access::Access;
use super::image::{Baseline, StateError};
use super::pagemap::own_pages;
use super::ranges::merged;
use super::shared::MappedState;
use crate::guest::GuestState;

const PAGE: usize = 4096;

/// Pages (memory, offset) whose mapping did not come back as the
/// baseline's bytes: never given back again.
#[derive(Default)]
pub(crate) struct Unreturnable(Mutex<HashSet<(usize, usize)>>);

impl Unreturnable {
    fn contains(&self, memory: usize, page: usize) -> bool {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).contains(&(memory, page))
    }

    fn insert(&self, memory: usize, page: usize) {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert((memory, page));
    }
}

/// Gives back the pages of `instance`'s memories that are its own and hold
/// the baseline's bytes: the bytes given back. The instance must be
/// between runs; its memories read the same before and after. A memory
/// that cannot be read is left as it is; an error means a page that came
/// back different could not be written back: the memory is not what it was.
pub(crate) async fn give_back(
    access: &Access,
    baseline: &Baseline,
    source: Option<&MappedState>,
    unreturnable: &Unreturnable,
    store: &mut Store<GuestState>,
    instance: &Instance,
) -> Result<u64, StateError> {
    let mut given = 0u64;
    for (index, (memory, base)) in access.memories.iter().zip(&baseline.memories).enumerate() {
        // A memory mapped on a shared state reads that state's pages where
        // it has none of its own: those are what its pages are compared with.
        let source = source.filter(|_| index == 0);
        let (at, length, same) = {
            let bytes = match memory.read(store, instance).await {
                Ok(bytes) => bytes,
                Err(error) => {
                    tracing::debug!(%error, "a memory to give pages back from could not be read");
                    return Ok(given);
                }
            };
            let Some(own) = own_pages(bytes) else { return Ok(given) };
            let same = merged(own.iter().flat_map(|&(from, to)| (from..to).step_by(PAGE).map(move |page| (page, (page + PAGE).min(to)))).filter(
                |&(page, end)| !unreturnable.contains(index, page) && &bytes[page..end] == expected(base, source, page, end),
            ));
            (bytes.as_ptr() as usize, bytes.len(), same)
        };
        // SAFETY: the memory is mapped for `length` bytes from `at`, and
        // nothing runs in it or resizes it while the store is borrowed here.
        let (returned, wrong) = unsafe { drop_and_check(at, length, base, source, &same) };
        given += returned;
        for (page, end) in wrong {
            unreturnable.insert(index, page);
            memory.write(store, instance, page as u32, expected(base, source, page, end)).await?;
        }
    }
    Ok(given)
}

/// Drops the pages of `same` (ranges of the memory at `at`, `length` bytes
/// long, whose bytes are `base`'s) and reads each back: the bytes given
/// back, and the pages that did not come back as `base`'s bytes (their
/// mapping's source is not the baseline), which the caller must put right.
///
/// # Safety
/// `at..at + length` must be mapped, private, and neither written nor
/// unmapped by anything else during the call.
unsafe fn drop_and_check(at: usize, length: usize, base: &[u8], source: Option<&MappedState>, same: &[(usize, usize)]) -> (u64, Vec<(usize, usize)>) {
    for &(from, to) in same {
        // SAFETY: inside the mapping (the caller's promise); the bytes the
        // range holds are the baseline's, as its source's should be.
        unsafe { libc::madvise((at + from) as *mut libc::c_void, to - from, libc::MADV_DONTNEED) };
    }
    // SAFETY: mapped for `length` bytes, and no one writes it meanwhile.
    let now = unsafe { std::slice::from_raw_parts(at as *const u8, length) };
    let (mut given, mut wrong) = (0u64, Vec::new());
    for &(from, to) in same {
        for page in (from..to).step_by(PAGE) {
            let end = (page + PAGE).min(to);
            if &now[page..end] == expected(base, source, page, end) {
                given += (end - page) as u64;
            } else {
                wrong.push((page, end));
            }
        }
    }
    (given, wrong)
}

/// The bytes the memory's source holds at `page..end`: the shared state's
/// when it is mapped on one, else the baseline's (zeros past its end).
fn expected<'a>(base: &'a [u8], source: Option<&'a MappedState>, page: usize, end: usize) -> &'a [u8] {
    static ZEROS: [u8; PAGE] = [0; PAGE];
    if let Some(bytes) = source.and_then(|source| source.page_bytes(page, end)) {
        return bytes;
    }
    base.get(page..end).unwrap_or(&ZEROS[..end - page])
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::super::pagemap::tests::Mapping;
    use super::*;

    /// The boundary: giving pages back never changes what the instance
    /// reads. A page whose bytes are the baseline's and its source's comes
    /// back the same and counts; a page that a wrong baseline calls
    /// unchanged (its source holds other bytes) is reported, so the caller
    /// writes it back, rather than silently taking the source's bytes.
    #[test]
    fn a_page_comes_back_as_its_source_and_one_whose_source_differs_is_reported() {
        let image: Vec<u8> = (0..3 * PAGE).map(|i| (i % 251) as u8).collect();
        let mut file = tempfile::tempfile().expect("a file");
        file.write_all(&image).expect("written");
        let mut memory = Mapping::of_file(&file, 3);
        let at = memory.address();
        // Page 0 written back to the source's bytes; page 1 changed, and the
        // baseline (wrongly) says the change is the image's.
        let page_zero = memory.memory()[..PAGE].to_vec();
        memory.memory()[..PAGE].copy_from_slice(&page_zero);
        memory.memory()[PAGE + 9] ^= 0xff;
        let mut base = image.clone();
        base[PAGE + 9] ^= 0xff;
        // SAFETY: the mapping is this test's, and nothing else touches it.
        let (given, wrong) = unsafe { drop_and_check(at, 3 * PAGE, &base, None, &[(0, 2 * PAGE)]) };
        assert_eq!(given, PAGE as u64, "the page that holds the source's bytes is given back");
        assert_eq!(wrong, vec![(PAGE, 2 * PAGE)], "the page whose source differs from the baseline is reported");
        assert_eq!(&memory.memory()[..PAGE], &image[..PAGE]);
    }

    #[test]
    fn past_the_baseline_the_expected_bytes_are_zeros() {
        let base = vec![7u8; PAGE];
        assert_eq!(expected(&base, None, 0, PAGE), &base[..]);
        assert!(expected(&base, None, PAGE, 2 * PAGE).iter().all(|b| *b == 0));
    }
}
