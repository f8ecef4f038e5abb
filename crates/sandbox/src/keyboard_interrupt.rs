//! A Jupyter-style interrupt: the host does what CPython's C signal handler
//! does for SIGINT, so the running cell raises `KeyboardInterrupt` at its
//! next eval-breaker check and the instance, with its state, survives.
//!
//! WASI has no signals, and the guest cannot be called while it runs. But
//! the epoch deadline callback runs on the guest's own thread at a safe
//! point, and CPython's signal state lives at fixed places in its linear
//! memory. The callback sets what `trip_signal(SIGINT)` sets:
//! `Handlers[SIGINT].tripped`, `is_tripped` and the "signals pending" bit
//! of the main thread state's `eval_breaker`.
//!
//! Where those words are is found once per component ([`calibrate`]), by
//! running probe cells in a throwaway instance and comparing its memory:
//! - the handler slot: the word that changes from `id(f1)` to `id(f2)` when
//!   the SIGINT handler is changed from `f1` to `f2` (`id` is an address);
//! - `tripped` precedes it (`{int tripped; PyObject *func}`), `is_tripped`
//!   follows the `handlers[NSIG]` array and the `wakeup` pair, checked by
//!   the values around it (wakeup fd -1, `warn_on_full_buffer` 1, then the
//!   `SIG_DFL` and `SIG_IGN` objects);
//! - the thread state: the only place holding two neighbouring words equal
//!   to the recursion limit (`py_recursion_remaining`, `py_recursion_limit`)
//!   after `sys.setrecursionlimit`, between calls; its `eval_breaker` is the
//!   word just before them whose upper bits (the instrumentation version)
//!   change when `sys.monitoring` events are set, its low byte unchanged.
//!
//! The result is then checked end to end: a probe loop must end with
//! `KeyboardInterrupt` when tripped. Static data and the main thread state
//! sit at the same addresses in every instance of a component (no ASLR,
//! every instance starts from the same image), so the offsets hold for all.
//! When anything does not match, interrupts keep trapping the instance.

use std::time::{Duration, Instant};

use wasmtime::component::{Linker, Resource};
use wasmtime_wasi::WasiView;
use wasmtime_wasi::p2::DynPollable;
use wasmtime_wasi::p2::bindings::io::poll::{Host as _, HostPollable as _};

use crate::interrupt::Interrupt;

/// SIGINT's number (WASI's emulated signals follow Linux).
const SIGINT: u32 = 2;
/// `_PY_SIGNALS_PENDING_BIT` in `tstate->eval_breaker` (CPython 3.13 and later).
const SIGNALS_PENDING_BIT: u32 = 1 << 1;
/// The eval breaker's event bits; the rest is the instrumentation version.
const EVENT_BITS_MASK: u32 = 0xff;
/// How far before the recursion limit pair the eval breaker may sit in the thread state.
const THREAD_STATE_WINDOW: u32 = 64;
/// Recursion limits the probe sets, unlikely to appear elsewhere in pairs.
const PROBE_LIMITS: [u32; 2] = [190_001, 170_003];
/// How long the end-to-end check lets its loop run before it is tripped.
const CHECK_AFTER: Duration = Duration::from_millis(100);
/// The end-to-end check must end its loop within this.
const CHECK_WITHIN: Duration = Duration::from_secs(1);

/// Where CPython keeps its SIGINT state in one memory of a component's
/// instances: byte offsets into that linear memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SignalLayout {
    /// Which of the instrumented component's memories (its accessor index).
    pub(crate) memory: usize,
    /// `Handlers[SIGINT].tripped`.
    tripped: u32,
    /// `Handlers[SIGINT].func`.
    func: u32,
    /// `is_tripped`; `default_handler` and `ignore_handler` follow it.
    is_tripped: u32,
    /// The main thread state's `eval_breaker`.
    eval_breaker: u32,
}

impl SignalLayout {
    /// One past the last byte the trip reads or writes.
    fn end(&self) -> usize {
        [self.tripped, self.func, self.is_tripped, self.eval_breaker].into_iter().max().unwrap_or(0) as usize + 8 + 4
    }
}

/// Why calibration found no usable layout.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CalibrationError {
    #[error("a probe cell failed: {0}")]
    Probe(String),
    #[error("the probe printed no usable values: {0:?}")]
    Values(String),
    #[error("reading the probe's memory failed: {0}")]
    Memory(String),
    #[error("{0}")]
    NotFound(String),
    #[error("the end-to-end check failed: {0}")]
    Check(String),
}

/// The first probe cell: two handler objects, the first installed, a first
/// recursion limit; prints what the host looks for.
pub(crate) fn first_probe() -> String {
    format!(
        "import signal as _s, _signal as _c, sys as _y\n\
         _anypath_f = (lambda *a: None, lambda *a: None, _y.getrecursionlimit())\n\
         _s.signal(_s.SIGINT, _anypath_f[0])\n\
         _y.setrecursionlimit({})\n\
         print(id(_anypath_f[0]), id(_anypath_f[1]), _s.NSIG, id(_c.SIG_DFL), id(_c.SIG_IGN))",
        PROBE_LIMITS[0]
    )
}

/// The second probe cell: the second handler, the second limit.
pub(crate) fn second_probe() -> String {
    format!("_s.signal(_s.SIGINT, _anypath_f[1])\n_y.setrecursionlimit({})", PROBE_LIMITS[1])
}

/// The third probe cell: setting monitoring events bumps the instrumentation version.
pub(crate) const THIRD_PROBE: &str = "_m = _y.monitoring\n_m.use_tool_id(4, 'anypath')\n_m.set_events(4, _m.events.PY_START)\n_m.set_events(4, 0)\n_m.free_tool_id(4)";

/// The check cell: the default SIGINT handler back, the limit back, then a
/// loop that only a `KeyboardInterrupt` ends early.
pub(crate) const CHECK_PROBE: &str = "_s.signal(_s.SIGINT, _s.default_int_handler)\n_y.setrecursionlimit(_anypath_f[2])\nimport time as _t\n_e = _t.monotonic() + 3\nwhile _t.monotonic() < _e:\n    pass";

/// What the first probe printed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Probed {
    f1: u32,
    f2: u32,
    nsig: u32,
    default_handler: u32,
    ignore_handler: u32,
}

impl Probed {
    pub(crate) fn parse(stdout: &str) -> Result<Self, CalibrationError> {
        let values: Vec<u32> = stdout.split_whitespace().map(str::parse).collect::<Result<_, _>>().map_err(|_| CalibrationError::Values(stdout.to_owned()))?;
        match values[..] {
            [f1, f2, nsig, default_handler, ignore_handler] if f1 != f2 && nsig > SIGINT && nsig < 1024 => Ok(Self { f1, f2, nsig, default_handler, ignore_handler }),
            _ => Err(CalibrationError::Values(stdout.to_owned())),
        }
    }
}

fn word(memory: &[u8], offset: u32) -> Option<u32> {
    let at = offset as usize;
    memory.get(at..at.checked_add(4)?).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

/// Offsets of the aligned words equal to `value`.
fn words_equal(memory: &[u8], value: u32) -> Vec<u32> {
    let needle = value.to_le_bytes();
    memory.chunks_exact(4).enumerate().filter(|(_, w)| *w == needle).map(|(i, _)| (i * 4) as u32).collect()
}

/// Candidates the first snapshot of one memory leaves.
#[derive(Debug, Default)]
pub(crate) struct FirstScan {
    funcs: Vec<u32>,
    /// Offsets of `py_recursion_limit` candidates (the word before is equal too).
    limits: Vec<u32>,
}

impl FirstScan {
    pub(crate) fn new(memory: &[u8], probed: &Probed) -> Self {
        let limits = words_equal(memory, PROBE_LIMITS[0]).into_iter().filter(|&at| at >= 4 && word(memory, at - 4) == Some(PROBE_LIMITS[0])).collect();
        Self { funcs: words_equal(memory, probed.f1), limits }
    }

    /// The candidates still standing in the second snapshot: the handler
    /// slot and the thread state's limit, when each is unique.
    pub(crate) fn narrow(&self, memory: &[u8], probed: &Probed) -> (Vec<u32>, Vec<u32>) {
        let funcs = self.funcs.iter().copied().filter(|&at| word(memory, at) == Some(probed.f2)).collect();
        let limits = self.limits.iter().copied().filter(|&at| word(memory, at) == Some(PROBE_LIMITS[1]) && word(memory, at - 4) == Some(PROBE_LIMITS[1])).collect();
        (funcs, limits)
    }
}

/// The window of words before the thread state's recursion limit pair, where its eval breaker is.
pub(crate) fn breaker_window(memory: &[u8], limit: u32) -> Vec<(u32, u32)> {
    let start = limit.saturating_sub(4 + THREAD_STATE_WINDOW);
    (start..limit.saturating_sub(4)).step_by(4).filter_map(|at| word(memory, at).map(|w| (at, w))).collect()
}

/// Builds the layout from the handler slot, the eval breaker (the one word
/// of `before` whose version bits changed, event bits kept, in `memory`),
/// checked against the values around `is_tripped`.
pub(crate) fn layout(memory_index: usize, memory: &[u8], probed: &Probed, func: u32, before: &[(u32, u32)]) -> Result<SignalLayout, CalibrationError> {
    let bumped: Vec<u32> = before
        .iter()
        .filter(|&&(at, old)| word(memory, at).is_some_and(|new| new != old && new & EVENT_BITS_MASK == old & EVENT_BITS_MASK && new > old))
        .map(|&(at, _)| at)
        .collect();
    let [eval_breaker] = bumped[..] else {
        return Err(CalibrationError::NotFound(format!("{} eval breaker candidates", bumped.len())));
    };
    let tripped = func.checked_sub(4).ok_or_else(|| CalibrationError::NotFound("handler slot at 0".into()))?;
    let handlers = tripped.checked_sub(8 * SIGINT).ok_or_else(|| CalibrationError::NotFound("handler array before 0".into()))?;
    // handlers[NSIG] of {int, pointer}, then wakeup {fd, warn_on_full_buffer}.
    let is_tripped = handlers.checked_add(8 * probed.nsig + 8).filter(|at| at.checked_add(12).is_some()).ok_or_else(|| CalibrationError::NotFound("signal state past 4 GiB".into()))?;
    let expected = [(is_tripped - 8, u32::MAX), (is_tripped - 4, 1), (is_tripped, 0), (is_tripped + 4, probed.default_handler), (is_tripped + 8, probed.ignore_handler), (tripped, 0)];
    if let Some((at, value)) = expected.iter().find(|&&(at, value)| word(memory, at) != Some(value)) {
        return Err(CalibrationError::NotFound(format!("the signal state does not match at {at:#x}: expected {value:#x}, found {:?}", word(memory, *at))));
    }
    Ok(SignalLayout { memory: memory_index, tripped, func, is_tripped, eval_breaker })
}

/// Checks the end-to-end probe's outcome: a `KeyboardInterrupt` soon after the trip.
pub(crate) fn check_outcome(error_type: Option<&str>, tripped_at: Instant) -> Result<(), CalibrationError> {
    let waited = tripped_at.elapsed();
    match error_type {
        Some("KeyboardInterrupt") if waited < CHECK_WITHIN => Ok(()),
        other => Err(CalibrationError::Check(format!("the loop ended with {other:?} {waited:?} after the trip"))),
    }
}

/// How long the end-to-end check waits before tripping.
pub(crate) fn check_after() -> Duration {
    CHECK_AFTER
}

/// The `wasi:io/poll` instance whose `poll` [`add_to_linker`] shadows (as wasmtime-wasi names it).
const POLL_INSTANCE: &str = "wasi:io/poll@0.2.12";

/// What the interruptible `wasi:io/poll` needs of an instance's state,
/// besides its WASI resources; the embedder's store data implements it (as
/// wasmtime-wasi's `WasiView`).
pub(crate) trait KeyboardView {
    /// The instance's state as the interruptible `poll` sees it.
    fn keyboard_ctx(&mut self) -> KeyboardCtx<'_>;
}

/// The part of an instance's state an interrupt raised during a host call works on.
pub(crate) struct KeyboardCtx<'a> {
    /// Stops the call in progress when raised (armed for one run).
    pub(crate) interrupt: Option<&'a Interrupt>,
    /// The instance's trip, when its signal state was found.
    pub(crate) trip: Option<KeyboardTrip>,
    /// When this run's interrupt was turned into a `KeyboardInterrupt`.
    pub(crate) tripped_at: &'a mut Option<Instant>,
}

/// Serves `wasi:io/poll`'s `poll` and `pollable.block` so that an
/// interrupt wakes a guest blocked in them (a sleep), which is then
/// tripped: the sleep returns early and the cell raises `KeyboardInterrupt`
/// at its next eval-breaker check. Only when the guest would raise it;
/// otherwise they wait as before (the interrupt then drops the call after
/// the grace). A woken `poll` reports every pollable ready: in a session
/// only clocks and files are polled, and a file is always ready.
pub(crate) fn add_to_linker<T: WasiView + KeyboardView + Send + 'static>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    let mut poll = linker.instance(POLL_INSTANCE)?;
    poll.func_wrap_async("poll", |mut store, (pollables,): (Vec<Resource<DynPollable>>,)| {
        Box::new(async move {
            let count = pollables.len() as u32;
            let interrupt = waking_interrupt(store.data_mut().keyboard_ctx());
            let table = store.data_mut().ctx().table;
            match woken(interrupt, table.poll(pollables)).await {
                Some(ready) => Ok((ready?,)),
                None => {
                    trip_now(store.data_mut().keyboard_ctx());
                    Ok(((0..count).collect(),))
                }
            }
        })
    })?;
    poll.func_wrap_async("[method]pollable.block", |mut store, (pollable,): (Resource<DynPollable>,)| {
        Box::new(async move {
            let interrupt = waking_interrupt(store.data_mut().keyboard_ctx());
            let table = store.data_mut().ctx().table;
            match woken(interrupt, table.block(pollable)).await {
                Some(blocked) => blocked,
                None => {
                    trip_now(store.data_mut().keyboard_ctx());
                    Ok(())
                }
            }
        })
    })
}

/// The run's interrupt, when raising it would make the guest raise `KeyboardInterrupt`.
fn waking_interrupt(state: KeyboardCtx<'_>) -> Option<Interrupt> {
    state.interrupt.cloned().filter(|_| state.trip.is_some_and(|trip| trip.handled()))
}

/// What `waiting` gives, or `None` when `interrupt` is raised first.
async fn woken<T>(interrupt: Option<Interrupt>, waiting: impl std::future::Future<Output = T>) -> Option<T> {
    match interrupt {
        None => Some(waiting.await),
        Some(interrupt) => tokio::select! {
            done = waiting => Some(done),
            () = interrupt.raised() => None,
        },
    }
}

/// Trips the guest, stopped in a host call, unless this run already did.
fn trip_now(state: KeyboardCtx<'_>) {
    if state.tripped_at.is_none() && state.trip.is_some_and(|trip| trip.trip()) {
        *state.tripped_at = Some(Instant::now());
    }
}

/// One instance's view of its signal state: the host address and length of
/// the memory the layout is in.
#[derive(Debug, Clone, Copy)]
pub(crate) struct KeyboardTrip {
    base: usize,
    len: usize,
    layout: SignalLayout,
}

impl KeyboardTrip {
    /// The trip for the instance whose memory `memory` is (as the state
    /// accessor lifted it, from offset 0), or `None` when the layout's words
    /// lie outside it.
    ///
    /// # Safety
    ///
    /// `memory` must be the whole linear memory of an instance whose base
    /// never moves (the session engine reserves the full 4 GiB a 32-bit
    /// memory can reach, on 64-bit hosts), and the returned value must live
    /// in that instance's store, used only while the guest is stopped (in
    /// the epoch callback, or between calls) and no host reference to that
    /// memory is live.
    pub(crate) unsafe fn new(memory: &[u8], layout: SignalLayout) -> Option<Self> {
        // The address is kept as an integer: wasmtime hands this base to the
        // compiled guest, which writes through it, so it is exposed with
        // write provenance, which `word_ptr` takes up again.
        (layout.end() <= memory.len()).then(|| Self { base: memory.as_ptr().expose_provenance(), len: memory.len(), layout })
    }

    fn word_ptr(&self, offset: u32) -> *mut [u8; 4] {
        let at = offset as usize;
        assert!(at.checked_add(4).is_some_and(|end| end <= self.len), "signal state word out of the memory");
        std::ptr::with_exposed_provenance_mut::<u8>(self.base).wrapping_add(at).cast()
    }

    fn read(&self, offset: u32) -> u32 {
        // SAFETY: in bounds of the memory (checked by `word_ptr`; a linear
        // memory never shrinks) whose base never moves, and the guest is
        // stopped with no other reference to the memory live (contract of
        // `new`). A byte array: the host address need not be aligned.
        u32::from_le_bytes(unsafe { std::ptr::read_volatile(self.word_ptr(offset)) })
    }

    fn write(&self, offset: u32, value: u32) {
        // SAFETY: as for `read`.
        unsafe { std::ptr::write_volatile(self.word_ptr(offset), value.to_le_bytes()) }
    }

    /// Whether a Python callable handles SIGINT (not `SIG_DFL`, `SIG_IGN`,
    /// or nothing): only then does a trip raise anything.
    pub(crate) fn handled(&self) -> bool {
        let func = self.read(self.layout.func);
        func != 0 && func != self.read(self.layout.is_tripped + 4) && func != self.read(self.layout.is_tripped + 8)
    }

    /// Trips SIGINT as CPython's C handler would; false (nothing written)
    /// when no Python handler would run.
    pub(crate) fn trip(&self) -> bool {
        if !self.handled() {
            return false;
        }
        self.write(self.layout.tripped, 1);
        self.write(self.layout.is_tripped, 1);
        let breaker = self.read(self.layout.eval_breaker);
        self.write(self.layout.eval_breaker, breaker | SIGNALS_PENDING_BIT);
        true
    }

    /// After a run: withdraws a trip the guest never got to handle (the run
    /// ended first), so that the next run does not start interrupted. The
    /// eval breaker bit alone only makes CPython look and find nothing.
    pub(crate) fn withdraw(&self) {
        self.write(self.layout.is_tripped, 0);
        self.write(self.layout.tripped, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn memory_with(words: &[(u32, u32)], len: usize) -> Vec<u8> {
        let mut memory = vec![0u8; len];
        for &(at, value) in words {
            memory[at as usize..at as usize + 4].copy_from_slice(&value.to_le_bytes());
        }
        memory
    }

    #[test]
    fn probe_values_parse_and_nonsense_is_refused() {
        let probed = Probed::parse("100 200 65 300 400\n").expect("parses");
        assert_eq!((probed.f1, probed.nsig), (100, 65));
        assert!(Probed::parse("100 100 65 300 400").is_err());
        assert!(Probed::parse("1 2 3").is_err());
        assert!(Probed::parse("a b c d e").is_err());
    }

    #[test]
    fn the_layout_is_found_from_two_snapshots_and_checked() {
        let probed = Probed { f1: 0x1000, f2: 0x2000, nsig: 65, default_handler: 0x50, ignore_handler: 0x60 };
        let handlers = 0x400;
        let func = handlers + 8 * SIGINT + 4;
        let is_tripped = handlers + 8 * 65 + 8;
        let limit = 0x900;
        let around = [(is_tripped - 8, u32::MAX), (is_tripped - 4, 1), (is_tripped + 4, 0x50), (is_tripped + 8, 0x60)];
        let breaker_at = limit - 20;
        let mut first: Vec<(u32, u32)> = around.to_vec();
        first.extend([(func, 0x1000), (0x40, 0x1000), (limit - 4, PROBE_LIMITS[0]), (limit, PROBE_LIMITS[0]), (0x800, PROBE_LIMITS[0]), (breaker_at, 0x300)]);
        let memory = memory_with(&first, 0x1000);
        let scan = FirstScan::new(&memory, &probed);
        assert_eq!(scan.limits, vec![limit]);
        let mut second: Vec<(u32, u32)> = around.to_vec();
        second.extend([(func, 0x2000), (0x40, 0x1000), (limit - 4, PROBE_LIMITS[1]), (limit, PROBE_LIMITS[1]), (breaker_at, 0x300)]);
        let memory = memory_with(&second, 0x1000);
        let (funcs, limits) = scan.narrow(&memory, &probed);
        assert_eq!((funcs, limits.clone()), (vec![func], vec![limit]));
        let before = breaker_window(&memory, limits[0]);
        second.push((breaker_at, 0x500));
        let bumped = memory_with(&second, 0x1000);
        let layout = layout(0, &bumped, &probed, func, &before).expect("a layout");
        assert_eq!(layout, SignalLayout { memory: 0, tripped: func - 4, func, is_tripped, eval_breaker: breaker_at });
        // A memory whose values around is_tripped differ is refused.
        second.push((is_tripped + 4, 0x51));
        assert!(super::layout(0, &memory_with(&second, 0x1000), &probed, func, &before).is_err());
    }

    #[test]
    fn a_trip_sets_the_three_words_only_when_a_handler_would_run_and_is_withdrawn() {
        let layout = SignalLayout { memory: 0, tripped: 0x10, func: 0x14, is_tripped: 0x40, eval_breaker: 0x80 };
        let mut memory = memory_with(&[(0x44, 0x50), (0x48, 0x60), (0x80, 0x300), (0x14, 0x50)], 0x100);
        // As wasmtime does with a memory's base: exposed with write provenance.
        memory.as_mut_ptr().expose_provenance();
        // SAFETY: the vector outlives the trip and nothing else references it while the trip is used.
        let trip = unsafe { KeyboardTrip::new(&memory, layout) }.expect("in bounds");
        assert!(!trip.trip(), "SIG_DFL handles SIGINT: nothing to raise");
        assert_eq!(trip.read(0x10), 0);
        trip.write(0x14, 0x7000);
        assert!(trip.trip());
        assert_eq!((trip.read(0x10), trip.read(0x40), trip.read(0x80)), (1, 1, 0x302));
        trip.withdraw();
        assert_eq!((trip.read(0x10), trip.read(0x40)), (0, 0));
        memory.truncate(0x20);
        // SAFETY: as above.
        assert!(unsafe { KeyboardTrip::new(&memory, layout) }.is_none(), "words past the memory's end");
    }
}
