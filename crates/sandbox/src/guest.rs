//! Per-instance host state: an empty WASI context, the memory guard and the
//! session directory's write quota, with the views the host's imports are
//! served through (WASI, the quota filesystem, `store`, the interruptible poll).

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use wasmtime::ResourceLimiter;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::filesystem::WasiFilesystemCtxView;
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use crate::drain_pipe::DrainPipe;
use crate::host_store::{HostStoreCtx, HostStoreView, RequestStore};
use crate::interrupt::Interrupt;
use crate::keyboard_interrupt::{KeyboardCtx, KeyboardTrip, KeyboardView};
use crate::layout::FilesLayout;
use crate::quota_fs::{QuotaFsView, QuotaState};

/// Where a session's directory appears inside the guest.
pub const SESSION_DIR: &str = "/mnt/data";

/// Where a session's datasets appear inside the guest, read-only.
pub const DATASETS_DIR: &str = "/data";

/// Where the operator's wheelhouse appears to `pip`, read-only.
pub const WHEELHOUSE_DIR: &str = "/wheelhouse";

/// Largest table a guest may grow to; CPython needs tens of thousands of entries.
const MAX_TABLE_ELEMENTS: usize = 1 << 20;

/// State owned by one wasmtime `Store`, which serves exactly one execution.
pub(crate) struct GuestState {
    wasi: WasiCtx,
    table: ResourceTable,
    pub(crate) memory: MemoryGuard,
    /// Past this instant the epoch callback traps the guest.
    pub(crate) deadline: Instant,
    /// Write quota on the session directory, if any.
    pub(crate) quota: Option<Arc<QuotaState>>,
    /// File descriptors the guest holds open (directories not counted): when
    /// none, no file object needs closing before the state is captured.
    pub(crate) open_files: usize,
    /// Stops the call in progress when raised (armed for one run).
    pub(crate) interrupt: Option<Interrupt>,
    /// Raises `KeyboardInterrupt` in the guest instead, when its signal
    /// state was found (a session instance whose run has an interrupt).
    pub(crate) keyboard: Option<KeyboardTrip>,
    /// When this run's interrupt was turned into a `KeyboardInterrupt`, or
    /// first seen by a guest that stops by itself.
    pub(crate) tripped_at: Option<Instant>,
    /// The guest stops a cell itself when the interrupt is raised (it asks
    /// the host): the interrupt waits for it, within the grace, instead of
    /// trapping the call.
    pub(crate) stops_itself: bool,
    /// The collections the guest's `store` calls reach: set for one
    /// execution (or the warm-up) and taken right after it, so no other
    /// call ever sees them.
    pub(crate) store: Option<RequestStore>,
    /// What a shell command asked of the host (unused by other runtimes).
    pub(crate) shell: crate::shell::ShellCtx,
}

impl GuestState {
    /// A WASI context with no preopened directories, no environment, no
    /// arguments, no stdio and no network: the guest can reach nothing outside.
    pub(crate) fn new(memory_cap: u64, deadline: Instant) -> Self {
        Self::from_builder(WasiCtxBuilder::new(), memory_cap, deadline)
    }

    /// A code-interpreter session's instance: the same, plus the directory
    /// (when given) the guest sees at `/mnt/data` (or as its whole tree, in
    /// the sandbox `layout`), read and write (nothing above it is reachable), the datasets directory (when given) at
    /// `/data`, read-only, the wheelhouse (when given) at `/wheelhouse`,
    /// read-only, and a stdout the host drains (live frames).
    pub(crate) fn for_session(
        memory_cap: u64,
        deadline: Instant,
        dir: Option<&Path>,
        layout: FilesLayout,
        (datasets, wheelhouse): (Option<&Path>, Option<&Path>),
        stdout: DrainPipe,
    ) -> wasmtime::Result<Self> {
        let mut builder = WasiCtxBuilder::new();
        let dirs = dir.map(|dir| layout.guest_dirs(dir));
        // Always in this order: a saved state refers to the preopens by the
        // handles they were given. The sandbox layout's `/` comes last: its
        // sessions' images were all taken with it.
        if let Some(dirs) = &dirs {
            builder.preopened_dir(&dirs.mnt_data, SESSION_DIR, FsPerms::ReadWrite)?;
        }
        if let Some(datasets) = datasets {
            builder.preopened_dir(datasets, DATASETS_DIR, FsPerms::ReadOnly)?;
        }
        if let Some(root) = dirs.as_ref().and_then(|d| d.root.as_ref()) {
            builder.preopened_dir(root, "/", FsPerms::ReadWrite)?;
        }
        // After every folder a saved image may know of: only a command's
        // fresh instance is given one.
        if let Some(wheelhouse) = wheelhouse {
            builder.preopened_dir(wheelhouse, WHEELHOUSE_DIR, FsPerms::ReadOnly)?;
        }
        builder.stdout(stdout);
        Ok(Self::from_builder(builder, memory_cap, deadline))
    }

    /// The state over a context the caller prepared (preopens, arguments,
    /// environment, stdio); networking is switched off here whatever it says.
    pub(crate) fn from_builder(mut builder: WasiCtxBuilder, memory_cap: u64, deadline: Instant) -> Self {
        let wasi = builder.allow_tcp(false).allow_udp(false).allow_ip_name_lookup(false).build();
        Self { wasi, table: ResourceTable::new(), memory: MemoryGuard::new(memory_cap), deadline, quota: None, open_files: 0, interrupt: None, keyboard: None, tripped_at: None, stops_itself: false, store: None, shell: Default::default() }
    }

    /// The view `wasi:filesystem/types` is served through: wasmtime-wasi's,
    /// checked against the quota.
    pub(crate) fn quota_fs(&mut self) -> QuotaFsView<'_> {
        let quota = self.quota.clone();
        QuotaFsView { inner: WasiFilesystemCtxView { ctx: self.wasi.filesystem(), table: &mut self.table }, quota, open_files: &mut self.open_files }
    }
}

impl WasiView for GuestState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

impl HostStoreView for GuestState {
    fn host_store_ctx(&mut self) -> HostStoreCtx<'_> {
        HostStoreCtx { deadline: self.deadline, store: self.store.as_mut() }
    }
}

impl KeyboardView for GuestState {
    fn keyboard_ctx(&mut self) -> KeyboardCtx<'_> {
        KeyboardCtx { interrupt: self.interrupt.as_ref(), trip: self.keyboard, tripped_at: &mut self.tripped_at }
    }
}

/// Caps linear memory growth and remembers the peak and any refusal.
pub(crate) struct MemoryGuard {
    pub(crate) cap: u64,
    /// Largest size granted this accounting period.
    pub(crate) peak: u64,
    /// Largest size granted over the instance's life (memory never shrinks).
    pub(crate) largest: u64,
    pub(crate) refused: bool,
    /// Growths granted over the instance's life: where its memories end
    /// changes only when this does.
    pub(crate) growths: u64,
}

impl MemoryGuard {
    fn new(cap: u64) -> Self {
        Self { cap, peak: 0, largest: 0, refused: false, growths: 0 }
    }

    /// Starts a new accounting period under `cap`; the memory already held counts toward the peak.
    pub(crate) fn reset(&mut self, cap: u64) {
        self.cap = cap;
        self.peak = self.largest;
        self.refused = false;
    }
}

impl ResourceLimiter for MemoryGuard {
    fn memory_growing(&mut self, current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        let desired = desired as u64;
        if desired > self.cap {
            self.refused = true;
            return Ok(false);
        }
        let size = desired.max(current as u64);
        self.peak = self.peak.max(size);
        self.largest = self.largest.max(size);
        self.growths += 1;
        Ok(true)
    }

    fn table_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }
}
