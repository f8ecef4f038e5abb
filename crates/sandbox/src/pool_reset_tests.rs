//! Boundary: a pool slot comes back as the image, whatever the instance
//! before wrote. The runner's engine (`runner_engine_config`: the pooling
//! allocator, copy-on-write images, pages kept resident and found by the
//! kernel's page-table scan) has one instance slot and four memory slots
//! here, so six instances in a row reuse slots earlier ones wrote (as a
//! rule the very one before, which the pool keeps for the same module).
//! Each writes a marker into
//! hundreds of separate page runs, in and past its data image (a CPython
//! block writes more than the 32 runs the scan's buffer holds at once), and
//! the next must read exactly the image and zeros, at every byte.
//!
//! And the other side of the same reset: the pages an instance wrote stay
//! resident for the next one in the slot (reset in place, not dropped), so a
//! block that writes the same heap as the one before does not fault it back
//! in page by page.

use wasm_encoder::{ConstExpr, DataSection, ExportKind, ExportSection, MemorySection, MemoryType, Module as EncodedModule};
use wasmtime::{Engine, Instance, Module, Store};

use crate::engine::runner_engine_config;

const PAGE: usize = 4096;
/// The module's initial memory: 4 MiB (64 wasm pages).
const MEMORY_BYTES: usize = 4 << 20;
/// Its data image: the first 2 MiB, a pattern no page repeats.
const IMAGE_BYTES: usize = 2 << 20;

/// The image's byte at `offset`.
fn image_byte(offset: usize) -> u8 {
    (offset % 251) as u8 ^ (offset / PAGE) as u8
}

/// A module exporting `memory`, whose first [`IMAGE_BYTES`] are the pattern.
fn module_bytes() -> Vec<u8> {
    let mut module = EncodedModule::new();
    let mut memories = MemorySection::new();
    let pages = (MEMORY_BYTES / 65536) as u64;
    memories.memory(MemoryType { minimum: pages, maximum: Some(pages), memory64: false, shared: false, page_size_log2: None });
    module.section(&memories);
    let mut exports = ExportSection::new();
    exports.export("memory", ExportKind::Memory, 0);
    module.section(&exports);
    let mut data = DataSection::new();
    data.active(0, &ConstExpr::i32_const(0), (0..IMAGE_BYTES).map(image_byte));
    module.section(&data);
    module.finish()
}

/// The first byte where `memory` differs from the image and zeros after it.
fn first_difference(memory: &[u8]) -> Option<usize> {
    memory.iter().enumerate().position(|(offset, &byte)| byte != if offset < IMAGE_BYTES { image_byte(offset) } else { 0 })
}

#[test]
fn a_reused_slot_is_the_image_again_after_hundreds_of_written_runs() {
    let engine = Engine::new(&runner_engine_config(1, MEMORY_BYTES as u64)).expect("the runner's engine");
    let module = Module::new(&engine, module_bytes()).expect("the module compiles");
    for round in 0..6u8 {
        let mut store = Store::new(&engine, ());
        let instance = Instance::new(&mut store, &module, &[]).expect("an instance from the pool");
        let memory = instance.get_memory(&mut store, "memory").expect("the exported memory");
        let data = memory.data_mut(&mut store);
        assert_eq!(data.len(), MEMORY_BYTES);
        assert_eq!(first_difference(data), None, "round {round}: the slot still held what an earlier instance wrote");
        // Every third page, one byte each, a different stride per round:
        // about 340 separate runs, in the image and past it.
        let marker = 0xA0 | round;
        for page in (usize::from(round % 3)..MEMORY_BYTES / PAGE).step_by(3) {
            data[page * PAGE + usize::from(round) * 7] = marker;
        }
    }
}

/// This thread's minor page faults so far.
fn minor_faults() -> i64 {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `getrusage` fills the struct it is given; RUSAGE_THREAD is Linux's.
    let status = unsafe { libc::getrusage(libc::RUSAGE_THREAD, usage.as_mut_ptr()) };
    assert_eq!(status, 0, "getrusage failed");
    // SAFETY: filled above (zeroed before, so initialised either way).
    unsafe { usage.assume_init() }.ru_minflt
}

/// Writes a marker into every third page of the image's part of `data`
/// (171 separate runs; the image's pages are copied on write one by one,
/// where zero-filled memory might be given huge pages); returns the minor
/// faults the writes took.
fn faults_writing_every_third_page(data: &mut [u8]) -> i64 {
    let before = minor_faults();
    for page in (0..IMAGE_BYTES / PAGE).step_by(3) {
        data[page * PAGE + 11] = 0x5A;
    }
    minor_faults() - before
}

#[test]
fn a_reused_slot_keeps_the_pages_its_instance_wrote_resident() {
    let engine = Engine::new(&runner_engine_config(1, MEMORY_BYTES as u64)).expect("the runner's engine");
    let module = Module::new(&engine, module_bytes()).expect("the module compiles");
    let mut faults = Vec::new();
    for _ in 0..3 {
        let mut store = Store::new(&engine, ());
        let instance = Instance::new(&mut store, &module, &[]).expect("an instance from the pool");
        let memory = instance.get_memory(&mut store, "memory").expect("the exported memory");
        faults.push(faults_writing_every_third_page(memory.data_mut(&mut store)));
    }
    // The first instance faults each page in (copy on write, or zero fill).
    // Had the reset dropped every run past the scan's 32-region buffer, the
    // next ones would fault about as many again (171 runs, 32 kept).
    let runs = (IMAGE_BYTES / PAGE).div_ceil(3) as i64;
    assert!(faults[0] >= runs / 2, "the first instance faulted only {} times for {runs} written pages: the measure is broken", faults[0]);
    for (round, &count) in faults.iter().enumerate().skip(1) {
        assert!(count < runs / 10, "instance {round} faulted {count} times writing the {runs} pages the one before it wrote: the reset dropped them (faults per instance: {faults:?})");
    }
}
