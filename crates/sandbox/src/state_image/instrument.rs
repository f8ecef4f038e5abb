//! Gives the host read and write access to a component's internal state.
//!
//! A component keeps its core modules' memories and globals to itself; the
//! host can only call the functions it exports. This pass, modelled on
//! `wasmtime-wizer`'s component instrumentation, rewrites the component so
//! that every instantiated core module exports its memories and mutable
//! globals, and appends an accessor module, instantiated with those
//! instances, whose functions the component exports as the instance
//! [`ACCESS_INSTANCE`]:
//!
//! - `m{M}-get-g{G}` / `m{M}-set-g{G}`: read and write a mutable global;
//! - `m{M}-read-mem{K}`: the whole memory as `list<u8>`, lifted from the
//!   memory itself, so the host reads it in place. The list's pointer and
//!   length are stored just below the module's stack pointer, which between
//!   calls is at its base: that space belongs to no live frame;
//! - `m{M}-grow-mem{K}`: `memory.grow`;
//! - `m{M}-seek-mem{K}` then `m{M}-write-mem{K}`: the written list lands at
//!   the sought offset, because the lift's `realloc` returns that offset.
//!
//! Only the host can call these exports: nothing inside the component
//! imports them. The guest's own code is unchanged.

use std::collections::HashMap;

use wasm_encoder::reencode::{Reencode, RoundtripReencoder};
use wasmparser::{CanonicalFunction, ComponentAlias, ComponentExternalKind, ComponentOuterAliasKind, Encoding, Instance, KnownCustom, Name, Parser, Payload, TypeRef};

use super::layout::{GlobalKind, GlobalSlot, Layout, MemorySlot};

/// The component instance export holding the accessors.
pub(crate) const ACCESS_INSTANCE: &str = "anypath-state-access";
/// The name of a module's shadow stack pointer (wasm-ld's convention).
const STACK_POINTER: &str = "__stack_pointer";

/// The component cannot be instrumented.
#[derive(Debug, thiserror::Error)]
pub enum InstrumentError {
    #[error("the component cannot be parsed: {0}")]
    Parse(#[from] wasmparser::BinaryReaderError),
    #[error("state images do not support this component: {0}")]
    Unsupported(String),
    #[error("cannot re-encode a module: {0}")]
    Encode(String),
}

fn unsupported(what: impl Into<String>) -> InstrumentError {
    InstrumentError::Unsupported(what.into())
}

/// Index spaces of the top-level component that the appended sections extend.
#[derive(Default)]
struct Counts {
    types: u32,
    funcs: u32,
    instances: u32,
    core_instances: u32,
    core_funcs: u32,
    core_memories: u32,
    modules: u32,
}

impl Counts {
    fn component_item(&mut self, kind: ComponentExternalKind) -> Result<(), InstrumentError> {
        match kind {
            ComponentExternalKind::Type => self.types += 1,
            ComponentExternalKind::Func => self.funcs += 1,
            ComponentExternalKind::Instance => self.instances += 1,
            ComponentExternalKind::Component => {}
            ComponentExternalKind::Module => return Err(unsupported("imported or aliased core modules")),
            ComponentExternalKind::Value => return Err(unsupported("component values")),
        }
        Ok(())
    }

    fn core_item(&mut self, kind: wasmparser::ExternalKind) {
        match kind {
            wasmparser::ExternalKind::Func | wasmparser::ExternalKind::FuncExact => self.core_funcs += 1,
            wasmparser::ExternalKind::Memory => self.core_memories += 1,
            _ => {}
        }
    }
}

/// What the instrumentation learned about one core module.
struct ModuleFacts {
    imported_globals: u32,
    imported_memories: u32,
    /// Defined globals: (value type, mutable).
    globals: Vec<wasmparser::GlobalType>,
    memories: Vec<wasmparser::MemoryType>,
    /// Names of globals by index, from the name section and exports.
    global_names: HashMap<u32, String>,
    /// The active data segments of the module's one memory, taken out of
    /// it (`(offset, bytes)`): the memory's creator maps them instead.
    initial: Vec<(u32, Vec<u8>)>,
}

/// A component's one linear memory as its data segments would leave it,
/// moved out of the component: the sessions' memory creator maps it under
/// each new instance copy-on-write instead of wasmtime copying them in.
#[derive(Debug, Clone, Default)]
pub(crate) struct InitialMemory {
    /// The memory's declared minimum, in bytes.
    pub(crate) minimum_bytes: u64,
    /// `(offset, bytes)`, as the segments wrote them.
    pub(crate) segments: Vec<(u32, Vec<u8>)>,
}

/// Rewrites `wasm` as described in the module documentation; returns the
/// new component and where each piece of state is reached.
pub(crate) fn instrument(wasm: &[u8]) -> Result<(Vec<u8>, Layout, Option<InitialMemory>), InstrumentError> {
    let mut counts = Counts::default();
    let mut sections: Vec<Section> = Vec::new();
    let mut modules: Vec<(Vec<u8>, ModuleFacts)> = Vec::new();
    let mut module_ranges: Vec<std::ops::Range<usize>> = Vec::new();
    let mut instantiations: HashMap<u32, u32> = HashMap::new();
    // Nested modules and components: their payloads are skipped, their bytes copied.
    let mut nested = 0u32;
    for payload in Parser::new(0).parse_all(wasm) {
        let payload = payload?;
        if nested > 0 {
            match payload {
                Payload::ModuleSection { .. } | Payload::ComponentSection { .. } => nested += 1,
                Payload::End(_) => nested -= 1,
                _ => {}
            }
            continue;
        }
        match &payload {
            Payload::Version { encoding: Encoding::Module, .. } => return Err(unsupported("a core module, not a component")),
            Payload::ModuleSection { unchecked_range, .. } => {
                let (bytes, facts) = instrument_module(&wasm[unchecked_range.clone()], true)?;
                sections.push(Section::Module(modules.len()));
                module_ranges.push(unchecked_range.clone());
                modules.push((bytes, facts));
                counts.modules += 1;
                nested += 1;
                continue;
            }
            Payload::ComponentSection { .. } => nested += 1,
            _ => {}
        }
        if let Some((id, range)) = payload.as_section() {
            sections.push(Section::Raw(id, range));
        }
        match payload {
            Payload::InstanceSection(reader) => {
                for instance in reader {
                    let index = counts.core_instances;
                    counts.core_instances += 1;
                    if let Instance::Instantiate { module_index, .. } = instance?
                        && instantiations.insert(module_index, index).is_some()
                    {
                        return Err(unsupported("a core module instantiated twice"));
                    }
                }
            }
            Payload::ComponentInstanceSection(reader) => {
                for instance in reader {
                    instance?;
                    counts.instances += 1;
                }
            }
            Payload::ComponentAliasSection(reader) => {
                for alias in reader {
                    match alias? {
                        ComponentAlias::CoreInstanceExport { kind, .. } => counts.core_item(kind),
                        ComponentAlias::InstanceExport { kind, .. } => counts.component_item(kind)?,
                        ComponentAlias::Outer { kind, .. } => match kind {
                            ComponentOuterAliasKind::CoreType => {}
                            ComponentOuterAliasKind::Type => counts.types += 1,
                            ComponentOuterAliasKind::CoreModule | ComponentOuterAliasKind::Component => {
                                return Err(unsupported("outer aliases of modules or components"));
                            }
                        },
                    }
                }
            }
            Payload::ComponentCanonicalSection(reader) => {
                for function in reader {
                    match function? {
                        CanonicalFunction::Lift { .. } => counts.funcs += 1,
                        _ => counts.core_funcs += 1,
                    }
                }
            }
            Payload::ComponentImportSection(reader) => {
                for import in reader {
                    counts.component_item(import?.ty.kind())?;
                }
            }
            Payload::ComponentExportSection(reader) => {
                for export in reader {
                    counts.component_item(export?.kind)?;
                }
            }
            Payload::ComponentTypeSection(reader) => {
                for ty in reader {
                    ty?;
                    counts.types += 1;
                }
            }
            Payload::ComponentStartSection { .. } => return Err(unsupported("a component start function")),
            _ => {}
        }
    }

    let mut accessors = AccessorBuilder::new(&counts);
    let mut order: Vec<(u32, u32)> = instantiations.iter().map(|(m, i)| (*m, *i)).collect();
    order.sort_unstable();
    for (module_index, instance_index) in order {
        let Some((_, facts)) = modules.get(module_index as usize) else { continue };
        accessors.add_module(module_index, instance_index, facts)?;
    }

    // Only a component with one memory in all has it made by the creator:
    // otherwise every module keeps its data segments.
    let memories: Vec<_> = modules.iter().flat_map(|(_, facts)| facts.memories.iter().map(move |memory| (*memory, facts.initial.clone()))).collect();
    let initial = match memories.as_slice() {
        [(memory, segments)] if !segments.is_empty() => Some(InitialMemory { minimum_bytes: memory.initial * 65536, segments: segments.clone() }),
        _ => {
            for (module, range) in modules.iter_mut().zip(&module_ranges) {
                if !module.1.initial.is_empty() {
                    *module = instrument_module(&wasm[range.clone()], false)?;
                }
            }
            None
        }
    };

    let mut encoder = wasm_encoder::Component::new();
    for section in &sections {
        match section {
            Section::Raw(id, range) => {
                encoder.section(&wasm_encoder::RawSection { id: *id, data: &wasm[range.clone()] });
            }
            Section::Module(at) => {
                let bytes = &modules[*at].0;
                encoder.section(&wasm_encoder::RawSection { id: wasm_encoder::ComponentSectionId::CoreModule as u8, data: bytes });
            }
        }
    }
    let layout = accessors.finish(&mut encoder);
    Ok((encoder.finish(), layout, initial))
}

enum Section {
    Raw(u8, std::ops::Range<usize>),
    Module(usize),
}

/// The export name of a module's defined global or memory, by its index.
fn global_export(index: u32) -> String {
    format!("__anypath_global_{index}")
}

fn memory_export(index: u32) -> String {
    format!("__anypath_memory_{index}")
}

/// Adds exports of every defined memory and mutable global to a core module.
fn instrument_module(bytes: &[u8], strip: bool) -> Result<(Vec<u8>, ModuleFacts), InstrumentError> {
    let mut facts = ModuleFacts { imported_globals: 0, imported_memories: 0, globals: Vec::new(), memories: Vec::new(), global_names: HashMap::new(), initial: Vec::new() };
    let mut data: Option<wasm_encoder::DataSection> = None;
    let mut raw: Vec<(u8, std::ops::Range<usize>)> = Vec::new();
    let mut exports: Vec<wasmparser::Export> = Vec::new();
    for payload in Parser::new(0).parse_all(bytes) {
        let payload = payload?;
        if let Some((id, range)) = payload.as_section() {
            raw.push((id, range));
        }
        match payload {
            Payload::ImportSection(reader) => {
                for import in reader.into_imports() {
                    match import?.ty {
                        TypeRef::Global(_) => facts.imported_globals += 1,
                        TypeRef::Memory(_) => facts.imported_memories += 1,
                        _ => {}
                    }
                }
            }
            Payload::GlobalSection(reader) => {
                for global in reader {
                    facts.globals.push(global?.ty);
                }
            }
            Payload::MemorySection(reader) => {
                for memory in reader {
                    facts.memories.push(memory?);
                }
            }
            Payload::ExportSection(reader) => {
                for export in reader {
                    let export = export?;
                    if export.kind == wasmparser::ExternalKind::Global {
                        facts.global_names.entry(export.index).or_insert_with(|| export.name.to_owned());
                    }
                    exports.push(export);
                }
            }
            Payload::DataSection(reader) if strip && facts.imported_memories == 0 && facts.memories.len() == 1 => {
                data = strip_active_segments(reader, &mut facts.initial)?;
            }
            Payload::CustomSection(custom) => {
                if let KnownCustom::Name(names) = custom.as_known() {
                    for name in names {
                        if let Ok(Name::Global(map)) = name {
                            for naming in map.into_iter().flatten() {
                                facts.global_names.insert(naming.index, naming.name.to_owned());
                            }
                        }
                    }
                }
            }
            _ => {}
        }
    }
    if facts.memories.iter().any(|m| m.memory64 || m.shared) {
        return Err(unsupported("64-bit or shared memories"));
    }

    let mut export_section = wasm_encoder::ExportSection::new();
    for export in &exports {
        RoundtripReencoder.parse_export(&mut export_section, *export).map_err(|e| InstrumentError::Encode(e.to_string()))?;
    }
    for (at, global) in facts.globals.iter().enumerate() {
        if global.mutable {
            let index = facts.imported_globals + at as u32;
            export_section.export(&global_export(index), wasm_encoder::ExportKind::Global, index);
        }
    }
    for at in 0..facts.memories.len() as u32 {
        let index = facts.imported_memories + at;
        export_section.export(&memory_export(index), wasm_encoder::ExportKind::Memory, index);
    }

    let mut module = wasm_encoder::Module::new();
    let mut exported = false;
    for (id, range) in raw {
        if id == wasm_encoder::SectionId::Export as u8 {
            module.section(&export_section);
            exported = true;
            continue;
        }
        if !exported && comes_after_exports(id) {
            module.section(&export_section);
            exported = true;
        }
        if let (true, Some(data)) = (id == wasm_encoder::SectionId::Data as u8, &data) {
            module.section(data);
            continue;
        }
        module.section(&wasm_encoder::RawSection { id, data: &bytes[range] });
    }
    if !exported {
        module.section(&export_section);
    }
    Ok((module.finish(), facts))
}

/// The data section with every active segment's bytes taken out into
/// `initial` (each segment kept, empty, so indices stay), when every
/// active one writes the module's memory 0 at a constant offset; `None`
/// (the section kept as it is) otherwise.
fn strip_active_segments(reader: wasmparser::DataSectionReader<'_>, initial: &mut Vec<(u32, Vec<u8>)>) -> Result<Option<wasm_encoder::DataSection>, InstrumentError> {
    let mut section = wasm_encoder::DataSection::new();
    let mut taken = Vec::new();
    for segment in reader {
        let segment = segment?;
        match segment.kind {
            wasmparser::DataKind::Passive => {
                section.passive(segment.data.iter().copied());
            }
            wasmparser::DataKind::Active { memory_index: 0, offset_expr } => {
                let mut ops = offset_expr.get_operators_reader();
                let (Ok(wasmparser::Operator::I32Const { value }), Ok(wasmparser::Operator::End)) = (ops.read(), ops.read()) else {
                    return Ok(None);
                };
                let offset = value as u32;
                section.active(0, &wasm_encoder::ConstExpr::i32_const(value), std::iter::empty());
                taken.push((offset, segment.data.to_vec()));
            }
            wasmparser::DataKind::Active { .. } => return Ok(None),
        }
    }
    *initial = taken;
    Ok(Some(section))
}

/// Whether a section of id `id` must follow the export section.
fn comes_after_exports(id: u8) -> bool {
    use wasm_encoder::SectionId;
    [SectionId::Start, SectionId::Element, SectionId::DataCount, SectionId::Code, SectionId::Data]
        .iter()
        .any(|s| *s as u8 == id)
}

/// Builds the accessor module and the component sections that lift and export it.
struct AccessorBuilder {
    base_types: u32,
    base_funcs: u32,
    base_instances: u32,
    base_core_funcs: u32,
    base_core_memories: u32,
    accessor_module_index: u32,
    accessor_instance_index: u32,

    core_types: wasm_encoder::TypeSection,
    core_type_indices: HashMap<(Vec<wasm_encoder::ValType>, Vec<wasm_encoder::ValType>), u32>,
    imports: wasm_encoder::ImportSection,
    imported_globals: u32,
    imported_memories: u32,
    own_globals: Vec<wasm_encoder::GlobalType>,
    functions: wasm_encoder::FunctionSection,
    code: Vec<wasm_encoder::Function>,
    exports: wasm_encoder::ExportSection,
    instantiate_with: Vec<(String, u32)>,

    component_types: wasm_encoder::ComponentTypeSection,
    component_type_indices: HashMap<&'static str, u32>,
    aliases: wasm_encoder::ComponentAliasSection,
    extra_core_funcs: u32,
    extra_core_memories: u32,
    canonicals: wasm_encoder::CanonicalFunctionSection,
    lifted: u32,
    instance_items: Vec<(String, u32)>,

    layout: Layout,
    /// Cursor globals (own, by memory), defined after every import.
    pending_functions: Vec<PendingFunction>,
}

/// An accessor function whose body refers to own globals, whose indices are
/// known only once every import is declared.
enum PendingFunction {
    Read { memory: u32, stack_pointer: u32 },
    Seek { cursor: usize },
    Realloc { cursor: usize },
}

impl AccessorBuilder {
    fn new(counts: &Counts) -> Self {
        Self {
            base_types: counts.types,
            base_funcs: counts.funcs,
            base_instances: counts.instances,
            base_core_funcs: counts.core_funcs,
            base_core_memories: counts.core_memories,
            accessor_module_index: counts.modules,
            accessor_instance_index: counts.core_instances,
            core_types: wasm_encoder::TypeSection::new(),
            core_type_indices: HashMap::new(),
            imports: wasm_encoder::ImportSection::new(),
            imported_globals: 0,
            imported_memories: 0,
            own_globals: Vec::new(),
            functions: wasm_encoder::FunctionSection::new(),
            code: Vec::new(),
            exports: wasm_encoder::ExportSection::new(),
            instantiate_with: Vec::new(),
            component_types: wasm_encoder::ComponentTypeSection::new(),
            component_type_indices: HashMap::new(),
            aliases: wasm_encoder::ComponentAliasSection::new(),
            extra_core_funcs: 0,
            extra_core_memories: 0,
            canonicals: wasm_encoder::CanonicalFunctionSection::new(),
            lifted: 0,
            instance_items: Vec::new(),
            layout: Layout::default(),
            pending_functions: Vec::new(),
        }
    }

    fn core_type(&mut self, params: &[wasm_encoder::ValType], results: &[wasm_encoder::ValType]) -> u32 {
        let key = (params.to_vec(), results.to_vec());
        if let Some(index) = self.core_type_indices.get(&key) {
            return *index;
        }
        let index = self.core_types.len();
        self.core_types.ty().function(params.iter().copied(), results.iter().copied());
        self.core_type_indices.insert(key, index);
        index
    }

    /// A component function type, by a short name of its shape.
    fn component_type(&mut self, shape: &'static str) -> u32 {
        use wasm_encoder::{ComponentValType as V, PrimitiveValType as P};
        if let Some(index) = self.component_type_indices.get(shape) {
            return *index;
        }
        let list = if shape == "read" || shape == "write" { Some(self.component_type("list-u8")) } else { None };
        let index = self.base_types + self.component_types.len();
        let types = &mut self.component_types;
        match shape {
            "list-u8" => types.defined_type().list(V::Primitive(P::U8)),
            "read" => {
                types.function().params::<_, V>([]).result(list.map(V::Type));
            }
            "write" => {
                types.function().params(list.map(|l| ("bytes", V::Type(l)))).result(None);
            }
            "grow" => {
                types.function().params([("pages", V::Primitive(P::U32))]).result(Some(V::Primitive(P::S32)));
            }
            "seek" => {
                types.function().params([("offset", V::Primitive(P::U32))]).result(None);
            }
            other => {
                let (verb, kind) = other.split_once('-').unwrap_or((other, "s32"));
                let prim = match kind {
                    "s64" => P::S64,
                    "f32" => P::F32,
                    "f64" => P::F64,
                    _ => P::S32,
                };
                if verb == "get" {
                    types.function().params::<_, V>([]).result(Some(V::Primitive(prim)));
                } else {
                    types.function().params([("value", V::Primitive(prim))]).result(None);
                }
            }
        }
        self.component_type_indices.insert(shape, index);
        index
    }

    fn add_module(&mut self, module_index: u32, instance_index: u32, facts: &ModuleFacts) -> Result<(), InstrumentError> {
        let import_module = format!("m{module_index}");
        let mut stack_pointer = None;
        for (at, global) in facts.globals.iter().enumerate() {
            if !global.mutable {
                continue;
            }
            let index = facts.imported_globals + at as u32;
            let kind = match global.content_type {
                wasmparser::ValType::I32 => GlobalKind::I32,
                wasmparser::ValType::I64 => GlobalKind::I64,
                wasmparser::ValType::F32 => GlobalKind::F32,
                wasmparser::ValType::F64 => GlobalKind::F64,
                _ => return Err(unsupported("a mutable global of a vector or reference type")),
            };
            let ty = RoundtripReencoder.global_type(*global).map_err(|e| InstrumentError::Encode(e.to_string()))?;
            self.imports.import(&import_module, &global_export(index), ty);
            let accessor_global = self.imported_globals;
            self.imported_globals += 1;
            let name = facts.global_names.get(&index).cloned();
            if name.as_deref() == Some(STACK_POINTER) && kind == GlobalKind::I32 {
                stack_pointer = Some(accessor_global);
            }
            let val = kind.core();
            let get_type = self.core_type(&[], &[val]);
            let mut get = wasm_encoder::Function::new([]);
            get.instructions().global_get(accessor_global).end();
            let get = self.add_function(get_type, get, &format!("m{module_index}-get-g{index}"), kind.shape("get"), &[]);
            let set_type = self.core_type(&[val], &[]);
            let mut set = wasm_encoder::Function::new([]);
            set.instructions().local_get(0).global_set(accessor_global).end();
            let set = self.add_function(set_type, set, &format!("m{module_index}-set-g{index}"), kind.shape("set"), &[]);
            self.layout.globals.push(GlobalSlot { module: module_index, index, name, kind, get, set });
        }
        for (at, memory) in facts.memories.iter().enumerate() {
            let index = facts.imported_memories + at as u32;
            let Some(stack_pointer) = stack_pointer else {
                return Err(unsupported(format!("module {module_index} defines a memory but no mutable `{STACK_POINTER}`")));
            };
            let ty = RoundtripReencoder.memory_type(*memory).map_err(|e| InstrumentError::Encode(e.to_string()))?;
            self.imports.import(&import_module, &memory_export(index), ty);
            let accessor_memory = self.imported_memories;
            self.imported_memories += 1;
            // The same memory as the lifts' `memory` option, aliased from the module's instance.
            self.aliases.alias(wasm_encoder::Alias::CoreInstanceExport {
                instance: instance_index,
                kind: wasm_encoder::ExportKind::Memory,
                name: &memory_export(index),
            });
            let component_memory = self.base_core_memories + self.extra_core_memories;
            self.extra_core_memories += 1;
            let cursor = self.own_globals.len();
            self.own_globals.push(wasm_encoder::GlobalType { val_type: wasm_encoder::ValType::I32, mutable: true, shared: false });
            let prefix = format!("m{module_index}");
            use wasm_encoder::ValType::I32;
            let read_type = self.core_type(&[], &[I32]);
            let read = self.add_pending(read_type, PendingFunction::Read { memory: accessor_memory, stack_pointer }, &format!("{prefix}-read-mem{index}"), "read", &[wasm_encoder::CanonicalOption::Memory(component_memory)]);
            let grow_type = self.core_type(&[I32], &[I32]);
            let mut grow_body = wasm_encoder::Function::new([]);
            grow_body.instructions().local_get(0).memory_grow(accessor_memory).end();
            let grow = self.add_function(grow_type, grow_body, &format!("{prefix}-grow-mem{index}"), "grow", &[]);
            let seek_type = self.core_type(&[I32], &[]);
            let seek = self.add_pending(seek_type, PendingFunction::Seek { cursor }, &format!("{prefix}-seek-mem{index}"), "seek", &[]);
            // The realloc is a core function only: exported for the write's lift.
            let realloc_type = self.core_type(&[I32, I32, I32, I32], &[I32]);
            let realloc_name = format!("{prefix}-realloc-mem{index}");
            let realloc_core = self.add_core_only(realloc_type, PendingFunction::Realloc { cursor }, &realloc_name);
            let write_type = self.core_type(&[I32, I32], &[]);
            let mut write_body = wasm_encoder::Function::new([]);
            write_body.instructions().end();
            let write = self.add_function(
                write_type,
                write_body,
                &format!("{prefix}-write-mem{index}"),
                "write",
                &[wasm_encoder::CanonicalOption::Memory(component_memory), wasm_encoder::CanonicalOption::Realloc(realloc_core)],
            );
            self.layout.memories.push(MemorySlot { module: module_index, index, read, grow, seek, write });
        }
        self.instantiate_with.push((import_module, instance_index));
        Ok(())
    }

    /// Adds a core function with its body, exports it, and lifts it as `name`.
    fn add_function(&mut self, core_type: u32, body: wasm_encoder::Function, name: &str, shape: &'static str, options: &[wasm_encoder::CanonicalOption]) -> String {
        self.functions.function(core_type);
        self.code.push(body);
        self.pending_functions.push(PendingFunction::Seek { cursor: usize::MAX });
        self.export_and_lift(name, shape, options)
    }

    /// As [`Self::add_function`], for a body written once own globals are placed.
    fn add_pending(&mut self, core_type: u32, pending: PendingFunction, name: &str, shape: &'static str, options: &[wasm_encoder::CanonicalOption]) -> String {
        self.functions.function(core_type);
        self.code.push(wasm_encoder::Function::new([]));
        self.pending_functions.push(pending);
        self.export_and_lift(name, shape, options)
    }

    /// A core function exported and aliased into the component's core function space, not lifted.
    fn add_core_only(&mut self, core_type: u32, pending: PendingFunction, name: &str) -> u32 {
        self.functions.function(core_type);
        self.code.push(wasm_encoder::Function::new([]));
        self.pending_functions.push(pending);
        self.exports.export(name, wasm_encoder::ExportKind::Func, self.functions.len() - 1);
        self.alias_core_func(name)
    }

    fn alias_core_func(&mut self, name: &str) -> u32 {
        self.aliases.alias(wasm_encoder::Alias::CoreInstanceExport {
            instance: self.accessor_instance_index,
            kind: wasm_encoder::ExportKind::Func,
            name,
        });
        let index = self.base_core_funcs + self.extra_core_funcs;
        self.extra_core_funcs += 1;
        index
    }

    fn export_and_lift(&mut self, name: &str, shape: &'static str, options: &[wasm_encoder::CanonicalOption]) -> String {
        self.exports.export(name, wasm_encoder::ExportKind::Func, self.functions.len() - 1);
        let core_func = self.alias_core_func(name);
        let ty = self.component_type(shape);
        self.canonicals.lift(core_func, ty, options.iter().copied());
        let func = self.base_funcs + self.lifted;
        self.lifted += 1;
        self.instance_items.push((name.to_owned(), func));
        name.to_owned()
    }

    fn finish(mut self, encoder: &mut wasm_encoder::Component) -> Layout {
        let mut globals = wasm_encoder::GlobalSection::new();
        for ty in &self.own_globals {
            globals.global(*ty, &wasm_encoder::ConstExpr::i32_const(0));
        }
        let own_base = self.imported_globals;
        let mut code = wasm_encoder::CodeSection::new();
        for (body, pending) in self.code.iter().zip(&self.pending_functions) {
            match pending {
                PendingFunction::Seek { cursor } if *cursor == usize::MAX => {
                    code.function(body);
                }
                PendingFunction::Read { memory, stack_pointer } => {
                    let memarg = |offset| wasm_encoder::MemArg { offset, align: 2, memory_index: *memory };
                    let mut f = wasm_encoder::Function::new([(1, wasm_encoder::ValType::I32)]);
                    f.instructions()
                        // The (pointer, length) pair goes just below the stack's base.
                        .global_get(*stack_pointer)
                        .i32_const(8)
                        .i32_sub()
                        .local_tee(0)
                        .i32_const(0)
                        .i32_store(memarg(0))
                        .local_get(0)
                        .memory_size(*memory)
                        .i32_const(16)
                        .i32_shl()
                        .i32_store(memarg(4))
                        .local_get(0)
                        .end();
                    code.function(&f);
                }
                PendingFunction::Seek { cursor } => {
                    let mut f = wasm_encoder::Function::new([]);
                    f.instructions().local_get(0).global_set(own_base + *cursor as u32).end();
                    code.function(&f);
                }
                PendingFunction::Realloc { cursor } => {
                    let mut f = wasm_encoder::Function::new([]);
                    f.instructions().global_get(own_base + *cursor as u32).end();
                    code.function(&f);
                }
            }
        }
        let mut module = wasm_encoder::Module::new();
        module.section(&self.core_types);
        module.section(&self.imports);
        module.section(&self.functions);
        module.section(&globals);
        module.section(&self.exports);
        module.section(&code);
        encoder.section(&wasm_encoder::ModuleSection(&module));

        let mut instances = wasm_encoder::InstanceSection::new();
        instances.instantiate(
            self.accessor_module_index,
            self.instantiate_with.iter().map(|(name, index)| (name.as_str(), wasm_encoder::ModuleArg::Instance(*index))),
        );
        encoder.section(&instances);
        encoder.section(&self.aliases);
        encoder.section(&self.component_types);
        encoder.section(&self.canonicals);
        let mut component_instances = wasm_encoder::ComponentInstanceSection::new();
        component_instances.export_items(self.instance_items.iter().map(|(name, index)| (name.as_str(), wasm_encoder::ComponentExportKind::Func, *index)));
        encoder.section(&component_instances);
        let mut exports = wasm_encoder::ComponentExportSection::new();
        exports.export(ACCESS_INSTANCE, wasm_encoder::ComponentExportKind::Instance, self.base_instances, None);
        encoder.section(&exports);
        std::mem::take(&mut self.layout)
    }
}

impl GlobalKind {
    fn core(self) -> wasm_encoder::ValType {
        match self {
            Self::I32 => wasm_encoder::ValType::I32,
            Self::I64 => wasm_encoder::ValType::I64,
            Self::F32 => wasm_encoder::ValType::F32,
            Self::F64 => wasm_encoder::ValType::F64,
        }
    }

    fn shape(self, verb: &str) -> &'static str {
        match (verb, self) {
            ("get", Self::I32) => "get-s32",
            ("get", Self::I64) => "get-s64",
            ("get", Self::F32) => "get-f32",
            ("get", Self::F64) => "get-f64",
            (_, Self::I32) => "set-s32",
            (_, Self::I64) => "set-s64",
            (_, Self::F32) => "set-f32",
            (_, Self::F64) => "set-f64",
        }
    }
}
