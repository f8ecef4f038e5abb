//! Runs generated Python inside a WebAssembly component under fuel, memory and
//! time limits.
//!
//! The runner component (CPython built with componentize-py) gates each block
//! with an AST allowlist, runs it against `store` and `ctx`, and returns the
//! block's `REPLY`. Its `store` calls come back to the host, where
//! `anypath-collections` runs them over the request's collections and keeps
//! the journal of mutations and the read sets. This crate owns the wasmtime
//! side: a fresh instance per execution, an empty WASI context (no files,
//! environment, network or stdio), a fuel budget, a memory cap and an epoch
//! deadline that also cuts calls blocked in the host: the [`BlockRunner`].
//! Code-interpreter sessions keep one instance alive between runs (`live`),
//! with a directory of their own at `/mnt/data`, optionally under a write
//! quota, their datasets read-only at `/data`, and no gate, on a [`SessionRuntime`]:
//! any runtime registered in `runtimes` (`python`, `python-data`), each one
//! implementation of the seam in `seam`.
//!
//! Public async functions return a boxed future ([`BoxFuture`]) made here:
//! an `async fn`'s body is compiled again in every crate that awaits it,
//! with all the generic code it reaches (wasmtime's bindings, hyper, axum),
//! so each binary and test harness above would compile it anew; boxed, it
//! compiles once, in this crate.
//!
//! [`BoxFuture`]: futures_util::future::BoxFuture

mod artifact;
mod bindings;
mod block;
mod config;
mod cow;
mod drain_pipe;
mod feed_pipe;
mod engine;
mod footprint;
mod guest;
#[cfg(test)]
mod host_gate_tests;
mod host_store;
#[cfg(test)]
mod host_store_tests;
mod interrupt;
#[cfg(test)]
mod interrupt_tests;
mod keyboard_interrupt;
pub mod layout;
#[cfg(test)]
mod layout_tests;
pub mod limits;
pub mod live;
mod live_frames;
pub mod outcome;
mod pool;
#[cfg(test)]
mod pool_reset_tests;
mod profile;
mod quota_fs;
mod recycler;
pub mod request;
mod runtimes;
mod seam;
mod session;
pub mod shell;
#[cfg(test)]
mod shell_tests;
pub mod state_image;
mod template;
#[cfg(test)]
mod wasm_layer_tests;

pub use anypath_wire::{Runtime, UnknownRuntime};
pub use artifact::ArtifactError;
pub use block::BlockRunner;
pub use config::RunnerConfig;
pub use engine::StartError;
pub use footprint::MemoryRegions;
pub use guest::{DATASETS_DIR, SESSION_DIR};
pub use interrupt::Interrupt;
pub use layout::FilesLayout;
pub use limits::{LimitOverrides, Limits, Policy, PolicyError};
pub use live::{CellReport, CellRequest, ChangeNotice, LiveInstance, PreStarted, StateOrigin};
pub use live_frames::LiveSink;
pub use outcome::{
    ExecError, Failure, Metrics, Mutation, MutationOp, Output, ReadSet, Reply, Report, Success,
};
pub use quota_fs::{FileQuota, Usage, directory_usage};
pub use request::{CollectionInput, ExecRequest};
pub use runtimes::RuntimeConfig;
pub use runtimes::javascript::JavascriptConfig;
pub use runtimes::python_data::{DataVariant, PREIMPORTED_SUMMARY, PythonDataConfig, preinit};
pub use session::SessionRuntime;
