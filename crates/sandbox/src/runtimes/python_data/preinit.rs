//! Pre-initialising the data runtime: the reactor's core module is started
//! once at build time, made to import numpy, pandas, matplotlib (Agg, pyplot,
//! the font list), seaborn and the cell code and to draw one chart in memory
//! (`preimport.py`), and its memory and globals are written back into the
//! module as its initial state (wasmtime's pre-initialiser, `wasmtime-wizer`).
//! A session's instance then starts with all of that done.
//!
//! The scratch instance runs on wasmtime's own WASI preview 1 with the same
//! six directories, in the same order, as every session's instance
//! ([`GuestDirs`]): wasi-libc keeps its table of preopened directories by
//! descriptor number, and the image carries that table, so the numbers
//! must mean the same directories later. Its `/tmp`, `/mnt/data`, `/data`
//! and `/` are empty scratch directories, its environment is the base one, and the build
//! refuses an image that still holds an open descriptor past the six
//! directories (the font cache's font files are closed first), so nothing of
//! the build machine or of a session is in it. What instances must not
//! share (random state) is made anew when each one starts. The scratch
//! instance alone may write under `/usr/local/lib`: it compiles the
//! site-packages' bytecode there (`preimport.py`), which sessions then read.

use std::path::Path;

use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};
use wasmtime::{Config, Engine, Instance, Linker, Module, OptLevel, Store, Val};
use wasmtime_wasi::WasiCtxBuilder;
use wasmtime_wasi::p1::WasiP1Ctx;
use wasmtime_wizer::{InstanceState, SnapshotVal, ValType, Wizer};

use super::reactor::{FIRST_FREE_FD, GuestDirs, NO_HOST, bootstrap_source, layout_dirs, pip_module_source, python_str};
use crate::drain_pipe::DrainPipe;

/// The pre-import script (see its docstring).
const PREIMPORT: &str = include_str!("preimport.py");
/// Precedes the summary on stdout (`preimport.py`).
const SUMMARY_MARKER: &[u8] = b"\x1eanypath-preimport ";
/// Output kept from the scratch instance: import warnings and the summary.
const OUTPUT_CAP: usize = 16 << 20;
/// How much of the scratch instance's output an error quotes.
const ERROR_TAIL: usize = 4000;

/// What a pre-initialised image holds, written beside it for health reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageSummary {
    /// The modules a session can count on being imported.
    pub preimported: Vec<String>,
    /// How many modules `sys.modules` held when the image was taken.
    pub module_count: usize,
    /// Descriptors still open past the preopened directories (empty in an image that was kept).
    pub open_descriptors: Vec<u32>,
    /// The linear memory the image starts with.
    pub memory_bytes: u64,
}

/// A pre-initialised core module and what it holds.
pub struct Preinitialised {
    /// The core module with its initialised state as data segments.
    pub module: Vec<u8>,
    /// What the image holds.
    pub summary: ImageSummary,
}

/// Pre-initialising the data runtime failed.
#[derive(Debug, thiserror::Error)]
pub enum PreinitError {
    /// The reactor module could not be read.
    #[error("reading the reactor module {path}: {source}")]
    Read { path: String, source: std::io::Error },
    /// The layout lacks the stdlib zip or matplotlib's data.
    #[error("the data runtime's files are incomplete: {0}")]
    Layout(String),
    /// The scratch `/tmp` and `/mnt/data` could not be made.
    #[error("making the scratch directories: {0}")]
    Scratch(std::io::Error),
    /// The pre-initialiser refused the module.
    #[error("instrumenting the reactor for the snapshot: {0:#}")]
    Instrument(wasmtime::Error),
    /// Compiling, linking or starting the scratch instance failed.
    #[error("starting the scratch instance: {0:#}")]
    Start(wasmtime::Error),
    /// The pre-import script failed; `output` is the end of what it printed.
    #[error("importing the data stack failed (status {status}): {output}")]
    Import { status: i32, output: String },
    /// The pre-import ended without its summary line.
    #[error("the pre-import printed no summary; its output ended with: {tail}")]
    NoSummary { tail: String },
    /// Descriptors past the preopened directories were still open.
    #[error("the image would hold open descriptors {0:?}: a session's instance would not have them")]
    OpenDescriptors(Vec<u32>),
    /// Writing the instance's state into the module failed.
    #[error("taking the snapshot: {0:#}")]
    Snapshot(wasmtime::Error),
}

/// The scratch instance's host state.
struct Scratch {
    wasi: WasiP1Ctx,
}

/// The scratch instance's imports: WASI preview 1 and the refused host door.
/// A plain function so its generic bindings compile once, in this crate,
/// rather than in every crate that awaits [`preinitialise`].
fn scratch_linker(engine: &Engine) -> wasmtime::Result<Linker<Scratch>> {
    let mut linker = Linker::<Scratch>::new(engine);
    wasmtime_wasi::p1::add_to_linker_async(&mut linker, |s| &mut s.wasi)?;
    linker.func_wrap("host", "call", |_: i32, _: i32, _: i32, _: i32| NO_HOST)?;
    Ok(linker)
}

/// Pre-initialises the reactor `core` (a WASI preview-1 core module) over
/// the runtime's `layout` (`lib/`, `mpl-data/`). Takes a minute and a few
/// GiB of memory, and reads and compiles a large module: run it on a thread
/// that may block.
pub fn preinitialise<'f>(core: &'f Path, layout: &'f Path) -> BoxFuture<'f, Result<Preinitialised, PreinitError>> {
    Box::pin(async move {
        let wasm = std::fs::read(core).map_err(|source| PreinitError::Read { path: core.display().to_string(), source })?;
        let (library, mpl_data) = layout_dirs(layout).map_err(PreinitError::Layout)?;
        let scratch = tempfile::Builder::new().prefix("anypath-preinit-").tempdir().map_err(PreinitError::Scratch)?;
        let (tmp, data, datasets, root) = (scratch.path().join("tmp"), scratch.path().join("data"), scratch.path().join("datasets"), scratch.path().join("root"));
        let wheelhouse = scratch.path().join("wheelhouse");
        for dir in [tmp.join("matplotlib"), data.clone(), datasets.clone(), root.clone(), wheelhouse.clone()] {
            std::fs::create_dir_all(dir).map_err(PreinitError::Scratch)?;
        }

        let wizer = Wizer::new();
        let (context, instrumented) = wizer.instrument(&wasm).map_err(PreinitError::Instrument)?;
        let mut config = Config::new();
        // Run once: compiling fast matters more than running fast, and one
        // instance needs no copy-on-write image of its initial memory (making
        // one seals a memfd, which the kernel has been seen to refuse at random).
        config.wasm_exceptions(true).cranelift_opt_level(OptLevel::None).memory_init_cow(false);
        let engine = Engine::new(&config).map_err(PreinitError::Start)?;
        let module = Module::new(&engine, &instrumented).map_err(PreinitError::Start)?;

        let stdout = DrainPipe::new(OUTPUT_CAP);
        let stderr = DrainPipe::new(OUTPUT_CAP);
        let mut builder = WasiCtxBuilder::new();
        GuestDirs { library: (&library, wasmtime_wasi::FsPerms::ReadWrite), mpl_data: &mpl_data, tmp: &tmp, data: &data, datasets: &datasets, root: (&root, wasmtime_wasi::FsPerms::ReadOnly), wheelhouse: &wheelhouse }
            .configure(&mut builder)
            .map_err(PreinitError::Start)?;
        builder.stdout(stdout.clone()).stderr(stderr.clone());
        let mut store = Store::new(&engine, Scratch { wasi: builder.build_p1() });
        let linker = scratch_linker(&engine).map_err(PreinitError::Start)?;
        let instance = linker.instantiate_async(&mut store, &module).await.map_err(PreinitError::Start)?;
        if let Some(initialize) = instance.get_func(&mut store, "_initialize") {
            initialize.call_async(&mut store, &[], &mut []).await.map_err(PreinitError::Start)?;
        }

        let source = format!(
            "{bootstrap}_ns = {{'__name__': 'anypath_preimport'}}\n\
             exec(compile({code}, '<anypath:preimport>', 'exec'), _ns)\n\
             _ns['finish']({FIRST_FREE_FD})\n\
             del _ns\n",
            bootstrap = bootstrap_source() + &pip_module_source(),
            code = python_str(PREIMPORT),
        );
        let status = turn(&mut store, &instance, &source).await.map_err(PreinitError::Start)?;
        let (out, _) = stdout.drain();
        let (err, _) = stderr.drain();
        if status & 0xff != 0 {
            let output = format!("{}{}", String::from_utf8_lossy(&out), String::from_utf8_lossy(&err));
            return Err(PreinitError::Import { status, output: tail(&output) });
        }
        let mut summary = read_summary(&out)?;
        if !summary.open_descriptors.is_empty() {
            return Err(PreinitError::OpenDescriptors(summary.open_descriptors));
        }
        let memory = instance.get_memory(&mut store, "memory").ok_or_else(|| PreinitError::Start(wasmtime::Error::msg("the reactor exports no memory")))?;
        summary.memory_bytes = memory.data_size(&store) as u64;

        let module = wizer.snapshot(&context, &mut Snapshotted { store: &mut store, instance }).await.map_err(PreinitError::Snapshot)?;
        Ok(Preinitialised { module, summary })
    })
}

/// Runs `source` as one reactor turn: the source is copied into memory the
/// reactor allocates (`host_alloc`), then `turn(ptr, len)`.
async fn turn(store: &mut Store<Scratch>, instance: &Instance, source: &str) -> wasmtime::Result<i32> {
    let len = i32::try_from(source.len())?;
    let alloc = instance.get_typed_func::<i32, i32>(&mut *store, "host_alloc")?;
    let run = instance.get_typed_func::<(i32, i32), i32>(&mut *store, "turn")?;
    let ptr = alloc.call_async(&mut *store, len).await?;
    let memory = instance.get_memory(&mut *store, "memory").ok_or_else(|| wasmtime::Error::msg("the reactor exports no memory"))?;
    memory.write(&mut *store, usize::try_from(ptr)?, source.as_bytes())?;
    run.call_async(&mut *store, (ptr, len)).await
}

/// The summary line `preimport.py` printed last.
fn read_summary(out: &[u8]) -> Result<ImageSummary, PreinitError> {
    let missing = || PreinitError::NoSummary { tail: tail(&String::from_utf8_lossy(out)) };
    let at = out.windows(SUMMARY_MARKER.len()).rposition(|w| w == SUMMARY_MARKER).ok_or_else(missing)?;
    let line = out[at + SUMMARY_MARKER.len()..].split(|&b| b == b'\n').next().unwrap_or_default();
    #[derive(Deserialize)]
    struct Printed {
        preimported: Vec<String>,
        module_count: usize,
        open_descriptors: Vec<u32>,
    }
    let printed: Printed = serde_json::from_slice(line).map_err(|_| missing())?;
    Ok(ImageSummary {
        preimported: printed.preimported,
        module_count: printed.module_count,
        open_descriptors: printed.open_descriptors,
        memory_bytes: 0,
    })
}

/// The last [`ERROR_TAIL`] bytes of `text`, on a character boundary.
fn tail(text: &str) -> String {
    let mut start = text.len().saturating_sub(ERROR_TAIL);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    text[start..].to_owned()
}

/// The scratch instance, read by the pre-initialiser through the exports
/// its instrumentation added.
struct Snapshotted<'a> {
    store: &'a mut Store<Scratch>,
    instance: Instance,
}

impl InstanceState for Snapshotted<'_> {
    async fn global_get(&mut self, name: &str, _type_hint: ValType) -> SnapshotVal {
        // The instrumentation exported every global under `name`; a missing
        // one is a defect of the pre-initialiser, which panics on it too.
        let Some(global) = self.instance.get_global(&mut *self.store, name) else {
            panic!("the instrumented module exports no global {name}");
        };
        match global.get(&mut *self.store) {
            Val::I32(x) => SnapshotVal::I32(x),
            Val::I64(x) => SnapshotVal::I64(x),
            Val::F32(x) => SnapshotVal::F32(x),
            Val::F64(x) => SnapshotVal::F64(x),
            Val::V128(x) => SnapshotVal::V128(x.as_u128()),
            other => panic!("global {name} holds {other:?}, which a snapshot cannot keep"),
        }
    }

    async fn memory_contents(&mut self, name: &str, contents: impl FnOnce(&[u8]) + Send) {
        let Some(memory) = self.instance.get_memory(&mut *self.store, name) else {
            panic!("the instrumented module exports no memory {name}");
        };
        contents(memory.data(&*self.store))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_is_the_last_marked_line() {
        let out = b"warning\n\x1eanypath-preimport {\"preimported\":[\"numpy\"],\"module_count\":9,\"open_descriptors\":[]}\n";
        let summary = read_summary(out).expect("summary");
        assert_eq!(summary.preimported, ["numpy"]);
        assert_eq!(summary.module_count, 9);
    }

    #[test]
    fn output_without_a_summary_is_an_error_quoting_it() {
        let error = read_summary(b"Traceback: ImportError").expect_err("no summary");
        assert!(error.to_string().contains("ImportError"), "{error}");
    }
}
