//! Live instances for code-interpreter sessions: one runner instance kept
//! between runs, so the session's Python globals persist, with fuel, memory
//! cap and deadline applied afresh to every run.
//!
//! A trap (fuel, deadline, memory) leaves a component instance unusable, so
//! the instance is then dropped and the next run starts a fresh one on the
//! same directory: the files stay, the in-memory state is reset, as when a
//! notebook kernel restarts. Both reports say so. A run stopped from
//! outside through its [`Interrupt`] ends by a `KeyboardInterrupt` raised
//! in its code and keeps the state, or, when the code does not stop by it,
//! the same way as a trap.
//!
//! A session's directory may be put under a write quota (`with_quota`),
//! enforced inside the guest as it writes and recounted from the directory
//! at the start of a run when it may have changed since the last count.
//!
//! Between runs the instance's state can be captured as an image
//! ([`LiveInstance::capture`], [`LiveInstance::hibernate`]) and the
//! instance dropped; the next run starts a fresh instance and restores the
//! image into it ([`LiveInstance::with_saved_state`]). A run's report says
//! where its state came from: `kept`, `resumed` or `fresh`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

pub use anypath_wire::{CellReport, StateOrigin};
use anypath_wire::{CellResult, FigureFormat};
use futures_util::future::BoxFuture;

use crate::bindings::anypath::runner::types as wit;
use crate::limits::{LimitOverrides, Limits};
use crate::outcome::{ExecError, Metrics, Output};
use crate::quota_fs::{FileQuota, QuotaState, Usage};
use crate::engine::{self, Instance, internal, output_of};
use crate::footprint::MemoryRegions;
use crate::interrupt::Interrupt;
use crate::layout::FilesLayout;
use crate::live_frames::{LiveSink, result_of};
use crate::seam::{CellExports, NOT_ITS_RUNTIME, RunCell, SessionGuest, StartFor};
use crate::session::SessionRuntime;
use crate::state_image::StateError;

/// Asks the cell code, with no code to run, to close the file objects it
/// holds open (named on its stderr) before the state is captured: their
/// host handles would not exist in the instance the state is restored into.
const PARK_MARK: &str = "ANYPATH_STATE_PARK";

/// Asks the cell code, with no code to run, to take the host handles a
/// first cell takes (its stdout, then the preopened directories, in that
/// order) and to do nothing else: a restored or mapped state refers to them
/// by number, and replaces the rest of the instance's memory at once.
const PROLOGUE_MARK: &str = "ANYPATH_STATE_PROLOGUE";

/// The next run's note when the session's state was handed out as an image
/// that never came back (its save or its reading was cut short).
const STATE_NOT_HANDED_BACK: &str = "the session's saved state did not reach this run (its saving or its reading was cut short); the session starts fresh with its files";

/// What an instance started ahead runs: it sets the cell counter back, so
/// the session's first cell is still `<cell-1>`, and its value is `None`.
const PRESTART_CELL: &str = "setattr(__import__('cell'), '_cells_run', 0)";

/// One run of code in a session.
#[derive(Debug, Clone, Default)]
pub struct CellRequest {
    pub code: String,
    /// The environment the code sees; nothing of the host's reaches it.
    pub env: Vec<(String, String)>,
    /// Lower limits for this run (never higher than the session's).
    pub limits: LimitOverrides,
    /// The forms figures are rendered in (PNG when empty).
    pub figure_formats: Vec<FigureFormat>,
    /// Also give results' data as JSON forms (a DataFrame's columns, what
    /// a figure plots).
    pub result_data: bool,
    /// Where output and results go as they are made, when the caller
    /// streams; the report holds them all again.
    pub live: Option<LiveSink>,
    /// Stops the run when raised, from any task, as a notebook's interrupt
    /// does: a `KeyboardInterrupt` is raised in the code (running code at
    /// the next epoch tick, a sleep woken at once), reported as the run's
    /// exception, and the session keeps its state. When that cannot be done
    /// (SIGINT ignored, the runtime's signal state unknown) or the code has
    /// not ended half a second later, the run is trapped: the report then
    /// carries `ExecError::Interrupted` and `state_reset`, and the next run
    /// starts a fresh instance on the same files. Raised before the run
    /// starts, it runs nothing and the instance and its state stay.
    pub interrupt: Option<Interrupt>,
}

/// A session's runner instance, started on first use.
pub struct LiveInstance {
    runtime: SessionRuntime,
    /// How a cell runs on `runtime` (its exports known).
    run_cell: RunCell,
    dir: Option<PathBuf>,
    /// How the code sees `dir`.
    layout: FilesLayout,
    /// What the code sees at `/data`, read-only.
    datasets: Option<PathBuf>,
    /// What the code sees at `/wheelhouse`, read-only (a command's instance).
    wheelhouse: Option<PathBuf>,
    limits: Limits,
    instance: Option<Instance<SessionGuest>>,
    /// Runs have been made and then their state lost.
    lost_state: bool,
    /// Why, said once in the next run's report.
    lost_note: Option<String>,
    /// A state image the next start restores.
    saved: Option<Saved>,
    /// The state was handed out as an image ([`Self::hibernate`], or kept
    /// by the caller: [`Self::expect_saved_state`]) and not handed back: a
    /// run that starts without it says the state was lost.
    away: bool,
    /// Write quota on `dir`, shared by every instance this session starts.
    quota: Option<Arc<QuotaState>>,
    /// The instance was started ahead and has run no code yet: its first
    /// run reports a fresh start, not kept state.
    adopted: bool,
    /// The saved image is older than the state the session last had (runs
    /// after it were lost with the host that made them): the run that
    /// resumes it says so, as a reset.
    older_image: Option<String>,
}

#[path = "live_state.rs"]
mod state;
use state::Saved;

/// Tells a session's instances that its directory changed from outside
/// them: the next run recounts the quota. Cheap to clone.
#[derive(Clone, Default)]
pub struct ChangeNotice(Option<Arc<QuotaState>>);

impl ChangeNotice {
    /// The directory changed (an upload, a delete, a move).
    pub fn changed(&self) {
        if let Some(quota) = &self.0 {
            quota.invalidate();
        }
    }
}

/// An instance started ahead of the session it will serve, on directories
/// made ahead (`/mnt/data` and `/data`), with the cell code's session
/// set-up done: a new session adopts it ([`LiveInstance::adopt`]) instead of
/// starting one on its first run. Its preopens are open descriptors, so the
/// directories may be renamed into the session's place in between.
pub struct PreStarted {
    instance: Instance<SessionGuest>,
}

impl SessionRuntime {
    /// Starts an instance ahead of its session, seeing `dir` at /mnt/data
    /// and `datasets` at /data (see [`PreStarted`]). Only the default
    /// runtime: the data runtime keeps a private /tmp beside the session
    /// directory by path, which a rename would leave behind (the runtime says
    /// whether its instances may be: [`crate::seam::RuntimeImage::starts_ahead`]).
    pub fn prestart(&self, dir: PathBuf, datasets: PathBuf) -> BoxFuture<'_, Result<PreStarted, StateError>> {
        Box::pin(async move {
            if !self.starts_ahead() {
                return Err(StateError::Unsupported(format!("{} instances are not started ahead", self.runtime())));
            }
            let mut live = self.live_instance(Some(dir), &LimitOverrides::default()).with_datasets(datasets);
            // The first run starts the instance. Its cell leaves nothing behind
            // (no name, no value, and the cell counter back at zero) but runs
            // the cell code's whole path once: the session set-up, parsing,
            // compiling, the report. The pages it touches are copied from the
            // image now rather than during the session's first run.
            let warmed = live.run(CellRequest { code: PRESTART_CELL.into(), ..CellRequest::default() }).await;
            match (warmed.error, live.instance.take()) {
                (None, Some(instance)) => Ok(PreStarted { instance }),
                (error, _) => Err(StateError::Unsupported(format!("the instance failed its set-up: {error:?}"))),
            }
        })
    }

    /// A live instance whose code sees `dir` (when given) at `/mnt/data`,
    /// under `limits` (narrowed to the runtime's own). Nothing starts yet.
    pub fn live_instance(&self, dir: Option<PathBuf>, limits: &LimitOverrides) -> LiveInstance {
        let limits = self.limits().narrowed_by(limits);
        LiveInstance { runtime: self.clone(), run_cell: self.cell_runner(), dir, layout: FilesLayout::MntData, datasets: None, wheelhouse: None, limits, instance: None, lost_state: false, lost_note: None, saved: None, away: false, quota: None, adopted: false, older_image: None }
    }
}

impl LiveInstance {
    /// Puts writes into the directory under `quota`, checked inside the guest
    /// as the code writes, for this and every later instance of the session.
    /// An instance already running is reset so that none escapes it.
    pub fn with_quota(mut self, quota: FileQuota) -> Self {
        self.reset();
        self.quota = Some(Arc::new(QuotaState::new(quota)));
        self
    }

    /// Shows the code its directory as `layout` says, in this and every
    /// later instance of the session. An instance already running is reset,
    /// so that its preopens match.
    pub fn with_layout(mut self, layout: FilesLayout) -> Self {
        self.reset();
        self.layout = layout;
        self
    }

    /// Takes `started` as this session's instance, made for the directories
    /// now at this session's `/mnt/data` and `/data` (renamed there), and
    /// puts it under the session's quota. Not for a session with state to
    /// keep: whatever it held is dropped.
    pub fn adopt(&mut self, started: PreStarted) {
        let mut instance = started.instance;
        instance.store.data_mut().quota = self.quota.clone();
        self.directory_changed();
        self.saved = None;
        self.instance = Some(instance);
        self.adopted = true;
    }

    /// Shows the code `dir` at `/wheelhouse`, read-only: the wheels `pip`
    /// installs from. Only for the fresh instance of a command (a session's
    /// own instances never need it, and their saved images know only the
    /// folders they were taken with).
    pub fn with_wheelhouse(mut self, dir: PathBuf) -> Self {
        self.reset();
        self.wheelhouse = Some(dir);
        self
    }

    /// Shows the code `dir` at `/data`, read-only, in this and every later
    /// instance of the session; what is added to `dir` later shows at once.
    /// An instance already running is reset, so that its preopens match.
    pub fn with_datasets(mut self, dir: PathBuf) -> Self {
        self.reset();
        self.datasets = Some(dir);
        self
    }

    /// What the quota counts as used: the directory at the start of the last
    /// run plus what that run has written since (zero before the first run).
    /// `None` without a quota.
    pub fn quota_usage(&self) -> Option<Usage> {
        self.quota.as_ref().map(|q| q.usage())
    }

    /// The session's directory was changed from outside the guest (an
    /// upload, a delete): the next run recounts its quota.
    pub fn directory_changed(&self) {
        if let Some(quota) = &self.quota {
            quota.invalidate();
        }
    }

    /// A handle that says the session's directory changed from outside the
    /// guest ([`Self::directory_changed`]) without holding this instance:
    /// file calls that run beside a cell use it.
    pub fn change_notice(&self) -> ChangeNotice {
        ChangeNotice(self.quota.clone())
    }

    /// Whether code has tried to change a file or directory since the
    /// quota was last counted (true without a quota: nobody watched). When
    /// false after a run, the run left the session's files as it found them.
    pub fn files_touched(&self) -> bool {
        self.quota.as_ref().is_none_or(|q| q.touched())
    }

    /// Whether an instance is running and holds state (one started ahead
    /// that has run no code holds none: a saved state may replace it).
    pub fn is_live(&self) -> bool {
        self.instance.is_some() && !self.adopted
    }

    /// The largest linear memory the instance holds now, in bytes (0 when
    /// none is live): what it could touch, not what it costs
    /// ([`Self::memory_regions`]).
    pub fn memory_bytes(&self) -> u64 {
        self.instance.as_ref().map_or(0, |i| i.store.data().memory.largest)
    }

    /// Host memory beside the instance's own pages: the image kept after a
    /// capture for more forks of the state ([`Self::capture`]) until its next
    /// run, and the segments remembered for its next capture.
    pub fn held_image_bytes(&self) -> u64 {
        let held = |i: &Instance<SessionGuest>| {
            let captured = i.guest.captured.as_ref().map_or(0, |c| c.image().len() as u64 + c.frozen_bytes());
            captured + i.guest.memo.as_ref().map_or(0, |m| m.bytes() as u64)
        };
        self.instance.as_ref().map_or(0, held)
    }

    /// Gives back to the kernel the pages the live instance wrote that hold
    /// the runtime image's bytes again (written and then restored, as
    /// reference counts and free lists are), so they are shared with every
    /// instance again and no longer count as its own; the bytes given back.
    /// The instance's memory reads the same before and after. Should a page
    /// not come back as those bytes and not be put right, the instance is
    /// dropped and the next run says its state was reset.
    pub fn give_back_unchanged_pages(&mut self) -> BoxFuture<'_, u64> {
        Box::pin(async move {
            if self.adopted {
                return 0;
            }
            let runtime = self.runtime.clone();
            let Some(instance) = self.instance.as_mut() else { return 0 };
            match runtime.give_back(instance).await {
                Ok(given) => given,
                Err(error) => {
                    tracing::warn!(%error, "giving back a live instance's unchanged pages failed: its state is dropped");
                    self.instance = None;
                    self.lost_state = true;
                    self.lost_note = Some("the session's memory could not be checked after the host trimmed it; its state was dropped".into());
                    0
                }
            }
        })
    }

    /// Where the live instance's memories lie, to count the pages it made
    /// its own ([`MemoryRegions::private_bytes`]); `None` without a live
    /// instance, or when the runtime cannot say.
    pub fn memory_regions(&mut self) -> BoxFuture<'_, Option<MemoryRegions>> {
        Box::pin(async move {
            let runtime = self.runtime.clone();
            let instance = self.instance.as_mut()?;
            match runtime.memory_regions(instance).await {
                Ok(regions) => Some(regions),
                Err(error) => {
                    tracing::debug!(%error, "a live instance's memories could not be found");
                    None
                }
            }
        })
    }

    /// Marks the session as having had state this instance does not hold
    /// (an earlier process ran it): the next run reports `state_reset`.
    pub fn with_state_lost(mut self) -> Self {
        self.lost_state = true;
        self
    }

    /// As [`Self::with_state_lost`], with `reason` said in the next run's
    /// report (`state_note`).
    pub fn with_state_lost_for(mut self, reason: impl Into<String>) -> Self {
        self.lost_state = true;
        self.lost_note = Some(reason.into());
        self
    }

    /// The saved image the next run resumes is not the newest state the
    /// session had, for `reason`: that run reports `state_reset` and says why.
    pub fn with_older_image(mut self, reason: impl Into<String>) -> Self {
        self.older_image = Some(reason.into());
        self
    }

    /// Drops the instance and its state; the next run starts fresh.
    pub fn reset(&mut self) {
        // An instance started ahead that has run nothing holds no state.
        let held = self.instance.take().is_some() && !std::mem::take(&mut self.adopted);
        let saved = self.saved.take().is_some();
        let away = std::mem::take(&mut self.away);
        if held || saved || away {
            self.lost_state = true;
        }
    }

    /// Forgets the segments remembered from the last image (a capture's
    /// shortcut): memory not worth holding where captures are rare.
    pub fn forget_segments(&mut self) {
        self.instance.iter_mut().for_each(|instance| instance.guest.memo = None);
    }

    /// Drops the instance as if its runs had not happened (a session with
    /// no state before them): unlike [`Self::reset`], nothing was lost.
    pub fn roll_back_to_fresh(&mut self) {
        (self.instance, self.adopted, self.saved, self.away) = (None, false, None, false);
    }

    /// The session's state waits outside this instance (an image the caller
    /// keeps): until it is handed back with [`Self::resume_with`], the next
    /// run says the state was lost rather than start fresh as if none had
    /// been. No effect while an instance is live.
    pub fn expect_saved_state(&mut self) {
        if self.instance.is_none() {
            self.away = true;
        }
    }

    /// Marks the state as lost for `reason`, said in the next run's report
    /// (a saved image that could not be read or kept).
    pub fn lose_state(&mut self, reason: impl Into<String>) {
        self.reset();
        self.lost_state = true;
        self.lost_note = Some(reason.into());
    }


    /// Has the live instance's cell code close its open file objects; their
    /// names. Nothing to do without an instance, or when the instance holds
    /// no file open (the filesystem layer counts them): then the cell code's
    /// walk of every object is skipped.
    async fn park(&mut self) -> Result<Vec<String>, StateError> {
        if self.instance.as_ref().is_none_or(|instance| instance.store.data().open_files == 0) {
            return Ok(Vec::new());
        }
        let output = self.call_cell(String::new(), vec![(PARK_MARK.to_owned(), "1".to_owned())]).await?;
        Ok(output.output.stderr.lines().map(str::to_owned).collect())
    }

    /// Has a just-started instance take the host handles a saved state
    /// refers to, in the order the saved instance took them, before that
    /// state is restored or mapped into it. Nothing to do for a runtime
    /// whose instances hold them from instantiation on.
    async fn take_host_handles(&mut self) -> Result<(), StateError> {
        if self.runtime.restores_without_prologue() {
            return Ok(());
        }
        self.call_cell(String::new(), vec![(PROLOGUE_MARK.to_owned(), "1".to_owned())]).await.map(drop)
    }

    /// Calls the cell code of the live instance outside a user's run, under
    /// the session's limits.
    async fn call_cell(&mut self, code: String, env: Vec<(String, String)>) -> Result<wit::CellOutput, StateError> {
        let limits = self.limits;
        let Some(instance) = self.instance.as_mut() else {
            return Err(StateError::Unsupported("no live instance".into()));
        };
        engine::arm(&mut instance.store, &limits).map_err(|e| StateError::Unsupported(e.to_string()))?;
        // Code runs: the state may change, and an image of it before is stale.
        instance.guest.captured = None;
        let input = wit::CellInput {
            code,
            env,
            stdout_bytes: limits.stdout_bytes,
            stderr_bytes: limits.stderr_bytes,
            result_bytes: 0,
            figure_formats: Vec::new(),
            live: false,
        };
        let called = engine::call(&limits, self.runtime.host_cell(instance, &input)).await;
        let mut metrics = Metrics::default();
        match engine::settle(&instance.store, &limits, &mut metrics, called) {
            Ok((output, false)) => Ok(output),
            Ok((_, true)) | Err(_) => {
                self.instance = None;
                Err(StateError::Unsupported("the instance failed while preparing its state".into()))
            }
        }
    }

    /// Runs `request`. Never panics on guest behaviour.
    pub fn run(&mut self, request: CellRequest) -> BoxFuture<'_, CellReport> {
        (self.run_cell)(self, request)
    }

    /// [`Self::run`] on a runtime whose instances export `E`: the runtime's
    /// [`RunCell`] boxes it, the one boxed future of a run.
    pub(crate) async fn run_on<E: CellExports>(&mut self, request: CellRequest) -> CellReport {
        let started = Instant::now();
        let limits = self.limits.narrowed_by(&request.limits);
        let kept = self.instance.is_some() && !std::mem::take(&mut self.adopted);
        let mut metrics = Metrics { warm: kept, ..Metrics::default() };
        let mut origin = if kept { StateOrigin::Kept } else { StateOrigin::Fresh };
        let mut note = self.lost_note.take();
        let mut older_resumed = false;
        if self.instance.is_none()
            && let Some(saved) = self.saved.take()
        {
            match self.resume(saved).await {
                Ok(closed) => {
                    origin = StateOrigin::Resumed;
                    let mut said = "the session's state was restored from its saved image".to_owned();
                    if !closed.is_empty() {
                        said.push_str(&format!("; these files were open when it was saved and are closed now: {}", closed.join(", ")));
                    }
                    if let Some(older) = self.older_image.take() {
                        said = format!("{older}; {said}");
                        older_resumed = true;
                    }
                    note = Some(said);
                }
                Err(error) => {
                    tracing::warn!(%error, "a saved session state could not be restored");
                    self.lost_state = true;
                    note = Some(format!("the saved state could not be restored ({error}); the session starts fresh with its files"));
                }
            }
        } else if std::mem::take(&mut self.away) && self.instance.is_none() {
            // The state was handed out and never came back.
            self.lost_state = true;
            note = Some(STATE_NOT_HANDED_BACK.to_owned());
        }
        let state_reset = (self.lost_state && origin == StateOrigin::Fresh) || older_resumed;
        let mut report = match self.run_in_instance::<E>(request, &limits, &mut metrics).await {
            Ok(report) => report,
            Err(error) => failed(error, Output::default()),
        };
        report.state = origin;
        report.state_note = note;
        if self.instance.is_none() {
            // A trap dropped the instance: whatever this run built is gone too.
            self.lost_state = true;
            report.state_reset = true;
        } else {
            self.lost_state = false;
        }
        report.state_reset |= state_reset;
        report.quota_exceeded = self.quota.as_ref().is_some_and(|q| q.refused());
        metrics.duration_us = started.elapsed().as_micros() as u64;
        report.metrics = metrics;
        report
    }

    async fn run_in_instance<E: CellExports>(&mut self, request: CellRequest, limits: &Limits, metrics: &mut Metrics) -> Result<CellReport, ExecError> {
        let code_bytes = request.code.len() as u64;
        if code_bytes > limits.max_code_bytes {
            return Err(ExecError::CodeTooLarge { size_bytes: code_bytes, limit_bytes: limits.max_code_bytes });
        }
        if self.instance.is_none() && !crate::template::is_warming(&request.env) {
            self.start_from_template().await;
        }
        if self.instance.is_none() {
            // Owned arguments: a borrow of `self` held across the await would
            // make the future require `LiveInstance: Sync`, which a Store is not.
            let quota = self.quota.clone();
            // A new instance: a fresh private /tmp, no files held open.
            self.directory_changed();
            self.instance = Some(start(self.runtime.clone(), self.dir.clone(), self.layout, (self.datasets.clone(), self.wheelhouse.clone()), quota, self.limits.memory_bytes, StartFor::Runs).await?);
            if let Some(setup) = self.layout.setup_cell().filter(|_| !self.runtime.enters_layout_at_start()) {
                // The layout's working directory, before the session's first code.
                let entered = self.call_cell(setup, Vec::new()).await;
                if !entered.as_ref().is_ok_and(|output| output.error.is_none()) {
                    self.instance = None;
                    return Err(ExecError::Internal { message: format!("entering the sandbox's working directory: {entered:?}") });
                }
            }
        }
        let Some(instance) = self.instance.as_mut() else {
            return Err(ExecError::Internal { message: "no instance after start".into() });
        };
        if instance.guest.exports::<E>().is_none() {
            return Err(ExecError::Internal { message: NOT_ITS_RUNTIME.into() });
        }
        if let (Some(quota), Some(dir)) = (&self.quota, &self.dir)
            && quota.needs_recount()
        {
            // Files changed since the last count (the last run's writes and
            // deletions, an upload, a new instance): start the run from what
            // the directories really hold. A run after one that changed
            // nothing skips the walk. Inline: the quota bounds the walk to
            // `max_files` entries, and a hop to the blocking pool would cost
            // more than a small directory's walk.
            match instance.guest.exports::<E>().and_then(CellExports::private_tmp) {
                Some(tmp) => quota.recount(&[dir, tmp]),
                None => quota.recount(&[dir]),
            }
        }
        if request.interrupt.as_ref().is_some_and(Interrupt::is_interrupted) {
            // Stopped before any code ran: the instance and its state stay.
            return Err(ExecError::Interrupted {});
        }
        if request.interrupt.is_some() {
            // An interrupt then raises KeyboardInterrupt in the cell, which keeps the state.
            let runtime = self.runtime.clone();
            runtime.arm_keyboard(instance).await;
        }
        engine::arm(&mut instance.store, limits)?;
        // Code runs: the state may change, and an image of it before is stale.
        instance.guest.captured = None;
        let graceful = instance.store.data().keyboard.is_some() || instance.store.data().stops_itself;
        instance.store.data_mut().interrupt = request.interrupt.clone();
        let input = wit::CellInput {
            code: request.code,
            env: request.env,
            stdout_bytes: limits.stdout_bytes,
            stderr_bytes: limits.stderr_bytes,
            result_bytes: limits.result_bytes,
            figure_formats: result_forms(&request.figure_formats, request.result_data),
            live: request.live.is_some(),
        };
        let _ = instance.guest.stdout.drain();
        if let Some(sink) = request.live {
            instance.guest.stdout.attach(sink, live_budget(limits));
        }
        let Instance { store, guest } = instance;
        let Some(exports) = guest.exports::<E>() else {
            return Err(ExecError::Internal { message: NOT_ITS_RUNTIME.into() });
        };
        let call = exports.run_cell(store, &input);
        let called = engine::call_interruptible(limits, request.interrupt.as_ref(), graceful, call).await;
        guest.stdout.detach();
        // Settled while the interrupt is still armed, so an epoch trap it caused reads as an interrupt.
        let settled = engine::settle(store, limits, metrics, called);
        store.data_mut().interrupt = None;
        let tripped = store.data_mut().tripped_at.take().is_some();
        if tripped
            && settled.is_ok()
            && let Some(trip) = store.data().keyboard
        {
            // The run may have ended before reaching the trip: the next must not start interrupted.
            trip.withdraw();
        }
        let (output, memory_refused) = match settled {
            Ok(settled) => settled,
            Err(error) => {
                // A trap or a dropped call leaves the instance unusable.
                self.instance = None;
                return Err(error);
            }
        };
        let captured = output_of(&output.output);
        if memory_refused {
            // The code caught MemoryError; the cap was still breached, and
            // CPython may be left in a state nobody should build on.
            self.instance = None;
            return Ok(failed(ExecError::MemoryLimit { limit_bytes: limits.memory_bytes }, captured));
        }
        if captured.stdout.len() > limits.stdout_bytes as usize || captured.stderr.len() > limits.stderr_bytes as usize {
            return Ok(failed(ExecError::OutputLimit { message: "captured output exceeds its cap".into() }, captured));
        }
        let results: Vec<CellResult> = output.results.iter().map(result_of).collect();
        // The cell code keeps the cap, but the code it runs could change it.
        let result_bytes: usize = results.iter().flat_map(|r| r.mime.values()).map(String::len).sum();
        if result_bytes > limits.result_bytes as usize {
            return Ok(failed(ExecError::OutputLimit { message: format!("the run's results take {result_bytes} bytes, over their cap of {}", limits.result_bytes) }, captured));
        }
        Ok(match output.error {
            None => CellReport {
                exit_code: output.exit_code,
                output: captured,
                results,
                traceback: None,
                error: None,
                state_reset: false,
                quota_exceeded: false,
                state: StateOrigin::Fresh,
                state_note: None,
                metrics: Metrics::default(),
            },
            Some(e) => CellReport {
                exit_code: if output.exit_code == 0 { 1 } else { output.exit_code },
                output: captured,
                results,
                traceback: Some(e.traceback.clone()),
                error: Some(ExecError::Exception { type_name: e.type_name, message: e.message, traceback: e.traceback }),
                state_reset: false,
                quota_exceeded: false,
                state: StateOrigin::Fresh,
                state_note: None,
                metrics: Metrics::default(),
            },
        })
    }
}

/// The most bytes of live frames a run may send: its output and results at
/// their caps, JSON-escaped (up to six bytes a byte), plus framing.
fn live_budget(limits: &Limits) -> usize {
    let content = limits.stdout_bytes as usize + limits.stderr_bytes as usize + limits.result_bytes as usize;
    content.saturating_mul(6).saturating_add(1 << 20)
}

/// Starts an instance seeing `dir` at /mnt/data (or as its tree, in the
/// sandbox `layout`), `datasets` at /data and a wheelhouse at /wheelhouse,
/// under `quota` and `memory_cap`.
async fn start(
    runtime: SessionRuntime,
    dir: Option<PathBuf>,
    layout: FilesLayout,
    (datasets, wheelhouse): (Option<PathBuf>, Option<PathBuf>),
    quota: Option<Arc<QuotaState>>,
    memory_cap: u64,
    start_for: StartFor,
) -> Result<Instance<SessionGuest>, ExecError> {
    runtime
        .start_instance(dir.as_deref(), layout, (datasets.as_deref(), wheelhouse.as_deref()), quota, memory_cap, start_for)
        .await
        .map_err(|e| internal("starting a session instance", &e))
}

fn failed(error: ExecError, output: Output) -> CellReport {
    CellReport { exit_code: 1, output, results: Vec::new(), traceback: None, error: Some(error), state_reset: false, quota_exceeded: false, state: StateOrigin::Fresh, state_note: None, metrics: Metrics::default() }
}

/// The forms the cell code renders results in: the figure formats, and
/// `data` when results' data is asked for as well.
fn result_forms(figure_formats: &[FigureFormat], result_data: bool) -> Vec<String> {
    let mut forms: Vec<String> = figure_formats.iter().map(|format| format.as_str().to_owned()).collect();
    if result_data {
        forms.push("data".to_owned());
    }
    forms
}
