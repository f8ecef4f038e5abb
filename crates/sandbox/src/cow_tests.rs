//! Copy-on-write memories on real wasmtime instances: children of one
//! frozen state read it, write only their own pages, and never see each
//! other's writes or the parent's later ones.

use std::os::unix::fs::FileExt;
use std::sync::Arc;

use wasm_encoder::{CodeSection, ExportKind, ExportSection, Function, FunctionSection, Instruction, MemArg, MemorySection, MemoryType as EncodedMemory, Module, TypeSection, ValType};
use wasmtime::{Config, Engine, Instance, Store, TypedFunc};

use super::{CowMemories, Frozen};
use crate::state_image::pagemap::private_bytes;

const PAGES: u64 = 16;
const WASM_PAGE: usize = 64 * 1024;

/// A module with one memory of [`PAGES`] pages (exported as `m`),
/// `store(addr, byte)` and `load(addr) -> byte`.
fn module() -> Vec<u8> {
    let mut types = TypeSection::new();
    types.ty().function([ValType::I32, ValType::I32], []);
    types.ty().function([ValType::I32], [ValType::I32]);
    let mut functions = FunctionSection::new();
    functions.function(0);
    functions.function(1);
    let mut memories = MemorySection::new();
    memories.memory(EncodedMemory { minimum: PAGES, maximum: None, memory64: false, shared: false, page_size_log2: None });
    let mut exports = ExportSection::new();
    exports.export("store", ExportKind::Func, 0).export("load", ExportKind::Func, 1).export("m", ExportKind::Memory, 0);
    let byte = MemArg { offset: 0, align: 0, memory_index: 0 };
    let mut code = CodeSection::new();
    let mut store = Function::new([]);
    store.instruction(&Instruction::LocalGet(0)).instruction(&Instruction::LocalGet(1)).instruction(&Instruction::I32Store8(byte)).instruction(&Instruction::End);
    code.function(&store);
    let mut load = Function::new([]);
    load.instruction(&Instruction::LocalGet(0)).instruction(&Instruction::I32Load8U(byte)).instruction(&Instruction::End);
    code.function(&load);
    let mut module = Module::new();
    module.section(&types).section(&functions).section(&memories).section(&exports).section(&code);
    module.finish()
}

struct Guest {
    store: Store<()>,
    instance: Instance,
    put: TypedFunc<(i32, i32), ()>,
    get: TypedFunc<i32, i32>,
}

impl Guest {
    fn start(engine: &Engine, module: &wasmtime::Module) -> Self {
        let mut store = Store::new(engine, ());
        let instance = Instance::new(&mut store, module, &[]).expect("instantiates");
        let put = instance.get_typed_func(&mut store, "store").expect("store");
        let get = instance.get_typed_func(&mut store, "load").expect("load");
        Self { store, instance, put, get }
    }

    fn put(&mut self, at: usize, byte: u8) {
        self.put.call(&mut self.store, (at as i32, i32::from(byte))).expect("stores");
    }

    fn get(&mut self, at: usize) -> u8 {
        self.get.call(&mut self.store, at as i32).expect("loads") as u8
    }

    fn memory(&mut self) -> wasmtime::Memory {
        self.instance.get_memory(&mut self.store, "m").expect("the memory")
    }

    fn bytes(&mut self) -> Vec<u8> {
        let memory = self.memory();
        memory.data(&self.store).to_vec()
    }

    fn base(&mut self) -> *const u8 {
        let memory = self.memory();
        memory.data_ptr(&self.store)
    }

    /// Bytes of the memory that are this instance's own pages.
    fn owned(&mut self) -> u64 {
        let base = self.base() as usize;
        private_bytes(base, PAGES as usize * WASM_PAGE).expect("the page tables read")
    }
}

fn engine(creator: Arc<CowMemories>) -> Engine {
    let mut config = Config::new();
    config.memory_init_cow(false).with_host_memory(creator);
    Engine::new(&config).expect("an engine")
}

/// Every page the parent wrote before the freeze is read by each child;
/// a child's write is its own page only (the others stay shared), and no
/// write, the parent's after the freeze nor a sibling's, reaches another
/// instance, on a page both wrote too.
#[test]
fn children_share_the_frozen_state_and_keep_their_writes() {
    let creator = Arc::new(CowMemories::default());
    let engine = engine(creator.clone());
    let module = wasmtime::Module::new(&engine, module()).expect("compiles");

    let mut parent = Guest::start(&engine, &module);
    for page in 0..PAGES as usize * 16 {
        parent.put(page * 4096, (page % 250) as u8 + 1);
    }
    let frozen = Frozen::of(&parent.bytes()).expect("frozen");
    // The parent maps its own state too, giving up its private copies.
    let base = parent.base();
    // SAFETY: no call runs on the parent's memory.
    unsafe { creator.remap(base, frozen.clone()) }.expect("the parent remapped");
    assert_eq!(parent.owned(), 0, "the parent's pages are the frozen image's now");
    assert_eq!(parent.get(5 * 4096), 6, "and read the same");

    let mut children: Vec<Guest> = (0..3).map(|_| Guest::start(&engine, &module)).collect();
    for child in &mut children {
        let base = child.base();
        // SAFETY: no call runs on the child's memory.
        unsafe { creator.remap(base, frozen.clone()) }.expect("the child remapped");
        assert_eq!(child.get(7 * 4096), 8, "a child reads its parent's state");
        assert_eq!(child.owned(), 0, "reading owns nothing");
    }

    // The same page written by the parent and by two children.
    let shared_page = 9 * 4096;
    parent.put(shared_page, 200);
    children[0].put(shared_page, 201);
    children[1].put(shared_page + 1, 202);
    assert_eq!((parent.get(shared_page), children[0].get(shared_page), children[1].get(shared_page), children[2].get(shared_page)), (200, 201, 10, 10));
    assert_eq!((children[0].get(shared_page + 1), children[1].get(shared_page + 1), children[2].get(shared_page + 1)), (0, 202, 0));
    assert_eq!(children[0].owned(), 4096, "a write owns its page and nothing more");
    assert_eq!(children[2].owned(), 0, "a child that wrote nothing owns nothing");
}

/// A memory grows past its image with zeros; an image larger than the
/// memory is refused rather than mapped past its end; a pointer the
/// creator never made is refused.
#[test]
fn growth_reads_zeros_and_misfits_are_refused() {
    let creator = Arc::new(CowMemories::default());
    let engine = engine(creator.clone());
    let module = wasmtime::Module::new(&engine, module()).expect("compiles");
    let mut guest = Guest::start(&engine, &module);
    let small = Frozen::of(&[7u8; 3 * 4096]).expect("frozen");
    let base = guest.base();
    // SAFETY: nothing runs on the memory.
    unsafe { creator.remap(base, small) }.expect("remapped");
    assert_eq!((guest.get(0), guest.get(3 * 4096 - 1), guest.get(3 * 4096)), (7, 7, 0), "past the image, zeros");
    let memory = guest.memory();
    memory.grow(&mut guest.store, 1).expect("grows");
    guest.put(PAGES as usize * WASM_PAGE + 10, 5);
    assert_eq!(guest.get(PAGES as usize * WASM_PAGE + 10), 5);

    let too_big = Frozen::of(&vec![1u8; (PAGES as usize + 4) * WASM_PAGE]).expect("frozen");
    let base = guest.base();
    // SAFETY: nothing runs on the memory.
    assert!(unsafe { creator.remap(base, too_big) }.is_err(), "an image larger than the memory is refused");
    let elsewhere = [0u8; 16];
    // SAFETY: the pointer is not a memory; the call must refuse it.
    assert!(unsafe { creator.remap(elsewhere.as_ptr(), Frozen::of(&[1]).expect("frozen")) }.is_err());
}

/// A creator with an image starts every memory as that image, shared.
#[test]
fn a_creators_image_is_every_new_memorys_start() {
    let initial = Frozen::of_segments(PAGES as usize * WASM_PAGE, &[(0, vec![3u8; 2 * 4096])]).expect("frozen");
    let creator = Arc::new(CowMemories::starting_as(initial));
    let engine = engine(creator);
    let module = wasmtime::Module::new(&engine, module()).expect("compiles");
    let mut first = Guest::start(&engine, &module);
    let mut second = Guest::start(&engine, &module);
    first.put(0, 9);
    assert_eq!((first.get(0), second.get(0), second.get(4096), second.get(2 * 4096)), (9, 3, 3, 0));
    assert_eq!(second.owned(), 0);
}

/// On the real runner: instrumenting moves every active data segment of
/// its one memory out of the component (none is left in it), and the
/// segments moved rebuild, as a frozen image, exactly the memory a bare
/// instance of the original component starts with.
#[test]
fn the_runners_memory_image_moves_out_of_the_component_whole() {
    let runner = std::fs::read(crate::wasm_layer_tests::runner_path()).expect("the runner component");
    let (instrumented, _, initial) = crate::state_image::instrument::instrument(&runner).expect("instruments");
    let initial = initial.expect("the runner has one memory with data");
    assert!(initial.segments.len() > 1000 && initial.segments.iter().map(|(_, d)| d.len()).sum::<usize>() > 10 << 20, "{} segments", initial.segments.len());
    let active_bytes_left = active_data_bytes(&instrumented);
    assert_eq!(active_bytes_left, 0, "no active data is left for wasmtime to copy");
    assert!(active_data_bytes(&runner) > 10 << 20, "the original carries it");

    let size = usize::try_from(initial.minimum_bytes).expect("fits");
    let frozen = Frozen::of_segments(size, &initial.segments).expect("frozen");
    // What the segments write, placed by hand, is what the image maps.
    let mut expected = vec![0u8; size];
    for (offset, data) in &initial.segments {
        expected[*offset as usize..*offset as usize + data.len()].copy_from_slice(data);
    }
    let mut mapped = vec![0u8; size];
    frozen.file.read_exact_at(&mut mapped, 0).expect("reads back");
    assert!(mapped == expected, "the frozen image is the segments' memory");
}

/// Bytes of active data segments in every core module of `component`.
fn active_data_bytes(component: &[u8]) -> usize {
    let mut total = 0;
    for payload in wasmparser::Parser::new(0).parse_all(component) {
        if let Ok(wasmparser::Payload::DataSection(reader)) = payload {
            for segment in reader.into_iter().flatten() {
                if matches!(segment.kind, wasmparser::DataKind::Active { .. }) {
                    total += segment.data.len();
                }
            }
        }
    }
    total
}
