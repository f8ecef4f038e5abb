//! The seam a runtime fills: what differs between the runtimes a session
//! can run on (how it starts an instance, how a cell runs in it and
//! reports, what the runtime says of itself) as one trait,
//! [`RuntimeImage`], that each runtime implements under `runtimes/`. The
//! session, its live instance and its state images reach a runtime only
//! through it, as wasmtime-wasi's embedders reach their state through one
//! view trait.
//!
//! The session holds a runtime as `Arc<dyn SessionImage>`, the same trait
//! with its types erased (implemented for every [`RuntimeImage`] here). A
//! warm cell's path stays as direct as before: the live instance takes from
//! the runtime, once, a function that runs a cell with the runtime's exports
//! known ([`RunCell`]), so the one boxed future a run already makes is the
//! only indirection.

use std::any::Any;
use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use futures_util::future::BoxFuture;
use wasmtime::Store;
use wasmtime::component::Instance as Handle;

use crate::bindings::anypath::runner::types as wit;
use crate::drain_pipe::DrainPipe;
use crate::engine::Instance;
use crate::guest::GuestState;
use crate::layout::FilesLayout;
use crate::live::{CellReport, CellRequest, LiveInstance};
use crate::profile::Profile;
use crate::quota_fs::QuotaState;

/// What a session instance runs between its instantiation and its use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StartFor {
    /// Nothing: the baseline state images are taken against.
    Baseline,
    /// A session's runs from a fresh state: the instance-start code (new
    /// random state), and for a runtime that enters its layout at start
    /// ([`RuntimeImage::enters_layout_at_start`]) the layout's working
    /// directory, in the same turn.
    Runs,
    /// A saved image about to be restored: only what the image's memory
    /// cannot bring (see [`RuntimeImage::restores_without_prologue`]).
    Restore,
}

/// Where and under what an instance starts.
pub(crate) struct Placement<'a> {
    /// What the code sees at `/mnt/data` (or as its tree, in the sandbox
    /// `layout`), when given.
    pub(crate) dir: Option<&'a Path>,
    pub(crate) layout: FilesLayout,
    /// What the code sees at `/data`, read-only, when given.
    pub(crate) datasets: Option<&'a Path>,
    /// What the code sees at `/wheelhouse`, read-only, when given: the
    /// wheels `pip` installs from (see [`crate::shell::PythonHost`]).
    pub(crate) wheelhouse: Option<&'a Path>,
    /// The session's write quota, shared by every instance it starts.
    pub(crate) quota: Option<Arc<QuotaState>>,
    /// The most linear memory the instance may grow to.
    pub(crate) memory_cap: u64,
    /// When starting must be over (no tenant code runs then).
    pub(crate) deadline: Instant,
}

/// A runtime's started instance.
pub(crate) struct Started<E> {
    pub(crate) store: Store<GuestState>,
    pub(crate) exports: E,
    /// The component instance, through which its state is captured and restored.
    pub(crate) handle: Handle,
    /// Its stdout, which carries a streaming run's live frames.
    pub(crate) stdout: DrainPipe,
}

/// A started instance's exports: how a cell runs in it and reports.
pub(crate) trait CellExports: Send + Sync + 'static {
    /// Runs one cell under the caps `input` gives: its output, or the trap
    /// that ended it. The limits are armed on `store` by the caller.
    fn run_cell(&self, store: &mut Store<GuestState>, input: &wit::CellInput) -> impl Future<Output = wasmtime::Result<wit::CellOutput>> + Send;

    /// A directory of the instance's own on the host that counts toward the
    /// session's quota beside the session's directory.
    fn private_tmp(&self) -> Option<&Path> {
        None
    }
}

/// One runtime a session can run on: the component it loaded, and what
/// differs between runtimes. Loading it (and its configuration) is the
/// runtime's own; `runtimes.rs` registers it.
pub(crate) trait RuntimeImage: Send + Sync + 'static {
    /// What a started instance exports.
    type Exports: CellExports;

    /// What the runtime is, for health reports, and the limits every run starts from.
    fn profile(&self) -> &Profile;

    /// Starts an instance `at` its place; what it runs before it is handed
    /// out depends on what it is `for`.
    fn start(&self, at: Placement<'_>, start_for: StartFor) -> impl Future<Output = wasmtime::Result<Started<Self::Exports>>> + Send;

    /// Whether its instances start in their layout's working directory
    /// (entered in their start turn); otherwise a first cell, the layout's
    /// Python set-up cell (`FilesLayout::setup_cell`), enters it: a runtime
    /// that does not run Python must enter it itself.
    fn enters_layout_at_start(&self) -> bool {
        false
    }

    /// Whether an image can be restored into an instance that ran nothing
    /// yet; otherwise a first call that takes the host handles must come
    /// before the restore.
    fn restores_without_prologue(&self) -> bool {
        false
    }

    /// Whether its instances may be started ahead of their session, on
    /// directories renamed into the session's place later.
    fn starts_ahead(&self) -> bool {
        false
    }

    /// Whether an interrupt can raise CPython's `KeyboardInterrupt` in its
    /// instances (their signal state found on first use,
    /// `keyboard_interrupt.rs`); otherwise an interrupt traps the run, unless
    /// the runtime's instances stop a cell themselves (`GuestState::stops_itself`).
    fn keyboard_interrupts(&self) -> bool;

    /// Whether a new session maps a template (an instance whose first cell
    /// made the runtime's engine, frozen once: `template.rs`) instead of
    /// starting an instance that makes it in its first cell.
    fn starts_from_template(&self) -> bool {
        false
    }
}

/// A live instance's run, with the runtime's exports known: what
/// [`LiveInstance::run`] calls.
pub(crate) type RunCell = for<'a> fn(&'a mut LiveInstance, CellRequest) -> BoxFuture<'a, CellReport>;

/// Said when an instance's exports are not its session's runtime's (never,
/// as every instance is started by its session's runtime).
pub(crate) const NOT_ITS_RUNTIME: &str = "the instance was not started by its session's runtime";

/// A session's started instance, whatever its runtime: its exports (the
/// runtime's [`RuntimeImage::Exports`]), the component instance and its stdout.
pub(crate) struct SessionGuest {
    pub(crate) exports: Box<dyn Any + Send + Sync>,
    pub(crate) handle: Handle,
    pub(crate) stdout: DrainPipe,
    /// Where its memories lie, as last found, with the memory guard's
    /// growth count then: found again only after a memory grew.
    pub(crate) regions: Option<(u64, crate::footprint::MemoryRegions)>,
    /// The state image captured since its last run, if one was: the state
    /// has not changed since, so a second fork or snapshot reuses it.
    pub(crate) captured: Option<Arc<crate::state_image::SharedState>>,
    /// The shared state its memory was mapped on, if it was: pages it has
    /// not written read that state's bytes.
    pub(crate) source: Option<Arc<crate::state_image::shared::MappedState>>,
    /// Its segments as its last image (captured or restored) held them.
    pub(crate) memo: Option<crate::state_image::SegmentMemo>,
}

impl SessionGuest {
    /// The exports, as the runtime `E` made them (`None` for another's).
    pub(crate) fn exports<E: CellExports>(&self) -> Option<&E> {
        self.exports.downcast_ref::<E>()
    }
}

/// [`RuntimeImage`] with its types erased, as a session holds its runtime.
pub(crate) trait SessionImage: Send + Sync {
    fn profile(&self) -> &Profile;
    fn enters_layout_at_start(&self) -> bool;
    fn restores_without_prologue(&self) -> bool;
    fn starts_ahead(&self) -> bool;
    fn keyboard_interrupts(&self) -> bool;
    fn starts_from_template(&self) -> bool;
    /// [`RuntimeImage::start`].
    fn start<'a>(&'a self, at: Placement<'a>, start_for: StartFor) -> BoxFuture<'a, wasmtime::Result<Instance<SessionGuest>>>;
    /// [`CellExports::run_cell`], for the host's own cells (probes, set-up,
    /// parking files), whose path is not a warm run's.
    fn run_cell<'a>(&self, store: &'a mut Store<GuestState>, guest: &'a SessionGuest, input: &'a wit::CellInput) -> BoxFuture<'a, wasmtime::Result<wit::CellOutput>>;
    /// How a live instance of this runtime runs a cell.
    fn cell_runner(&self) -> RunCell;
}

impl<R: RuntimeImage> SessionImage for R {
    fn profile(&self) -> &Profile {
        RuntimeImage::profile(self)
    }

    fn enters_layout_at_start(&self) -> bool {
        RuntimeImage::enters_layout_at_start(self)
    }

    fn restores_without_prologue(&self) -> bool {
        RuntimeImage::restores_without_prologue(self)
    }

    fn starts_ahead(&self) -> bool {
        RuntimeImage::starts_ahead(self)
    }

    fn keyboard_interrupts(&self) -> bool {
        RuntimeImage::keyboard_interrupts(self)
    }

    fn starts_from_template(&self) -> bool {
        RuntimeImage::starts_from_template(self)
    }

    fn start<'a>(&'a self, at: Placement<'a>, start_for: StartFor) -> BoxFuture<'a, wasmtime::Result<Instance<SessionGuest>>> {
        Box::pin(async move {
            let Started { store, exports, handle, stdout } = RuntimeImage::start(self, at, start_for).await?;
            Ok(Instance { store, guest: SessionGuest { exports: Box::new(exports), handle, stdout, regions: None, captured: None, source: None, memo: None } })
        })
    }

    fn run_cell<'a>(&self, store: &'a mut Store<GuestState>, guest: &'a SessionGuest, input: &'a wit::CellInput) -> BoxFuture<'a, wasmtime::Result<wit::CellOutput>> {
        Box::pin(async move {
            match guest.exports::<R::Exports>() {
                Some(exports) => exports.run_cell(store, input).await,
                None => Err(wasmtime::format_err!("{NOT_ITS_RUNTIME}")),
            }
        })
    }

    fn cell_runner(&self) -> RunCell {
        run_on::<R::Exports>
    }
}

/// Runs `request` in `live`, whose instances export `E`.
fn run_on<E: CellExports>(live: &mut LiveInstance, request: CellRequest) -> BoxFuture<'_, CellReport> {
    Box::pin(live.run_on::<E>(request))
}
