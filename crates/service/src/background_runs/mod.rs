//! Runs that outlive their caller. Every run asked over `/v1` is tracked
//! here by its id: it runs on a task of its own, its live events are kept
//! as it makes them, and its report once it ends, so a client that went
//! away (a timeout, a laptop asleep, a proxy that cut the request) finds it
//! again by its id, re-reads its events from any point (SSE's
//! `Last-Event-ID`), or stops it. A background run answers at once and is
//! written to disk when it starts and when it ends: a graceful stop lets it
//! finish (up to a deadline) and keeps its report; after a kill the next
//! process marks it `lost`, never silently missing. Its callback, when it
//! asked for one, is sent when it ends ([`callback`]).
//!
//! The registry runs nothing itself: whoever starts a run hands it the start
//! function (the facade's, `InterpreterService::start_tracked`), and a
//! graceful stop hands it what stops a run, so the registry knows neither
//! the facade nor the state that owns it.

pub mod callback;
mod records;
mod tracked;

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anypath_interpreter::{RunRequest, Signer};
use anypath_wire::RunControl;

pub use self::callback::CallbackPolicy;
use self::records::RunRecords;
pub(crate) use self::tracked::{Followed, Tracked};
use crate::caller::Caller;
use crate::live_run::{LiveRun, Window};
use crate::service_error::ServiceError;

/// How long a finished run stays in memory (a background run stays on
/// disk longer: [`records::KEPT_FOR`]).
const FINISHED_IN_MEMORY: Duration = Duration::from_secs(15 * 60);
/// Finished runs kept in memory at most, the oldest forgotten first.
const MAX_FINISHED_IN_MEMORY: usize = 10_000;

/// A run just started: tracked, and its outcome for a caller that waits.
pub(crate) struct Started {
    pub tracked: Arc<Tracked>,
    pub outcome: tokio::sync::oneshot::Receiver<Result<anypath_interpreter::RunReport, ServiceError>>,
}

/// A run's key: its tenant and its id.
type Key = (String, String);

/// The runs of one service.
pub(crate) struct RunRegistry {
    inner: Mutex<Inner>,
    records: Option<Arc<RunRecords>>,
    callbacks: CallbackPolicy,
    signer: Option<Signer>,
    /// Told whenever a run ends, for [`Self::drain`].
    ended: tokio::sync::Notify,
}

#[derive(Default)]
struct Inner {
    runs: HashMap<Key, Arc<Tracked>>,
    /// Finished runs in the order they ended, to forget the oldest.
    finished: VecDeque<(Instant, Key)>,
}

impl RunRegistry {
    /// Runs kept in memory, and on disk under `dir` when given (the
    /// interpreter's data directory), with callbacks to `callbacks`' hosts
    /// signed by `signer`. Background runs an earlier process left running
    /// are marked `lost`.
    ///
    /// With `shared` (the fleet's records, on a shared session store) the
    /// records are the fleet's instead: a run is found, followed and
    /// stopped from any host.
    pub fn new(dir: Option<PathBuf>, shared: Option<Arc<dyn anypath_interpreter::shared_records::SharedRecords>>, callbacks: CallbackPolicy, signer: Option<Signer>) -> Arc<Self> {
        let records = match shared {
            Some(shared) if tokio::runtime::Handle::try_current().is_ok() => Some(Arc::new(RunRecords::shared(shared))),
            _ => dir.and_then(|dir| match RunRecords::open(dir) {
                Ok(records) => Some(Arc::new(records)),
                Err(error) => {
                    tracing::error!(%error, "the runs' directory cannot be used: background runs are kept in memory only");
                    None
                }
            }),
        };
        if let Some(records) = &records {
            Self::recover(records.clone());
        }
        let registry = Arc::new(Self { inner: Mutex::default(), records, callbacks, signer, ended: tokio::sync::Notify::new() });
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(prune_every_hour(Arc::downgrade(&registry)));
        }
        registry
    }

    /// Marks what an earlier process left running as lost, off the async
    /// workers (at once when there is no runtime, as in a plain test).
    fn recover(records: Arc<RunRecords>) {
        let recover = move || match records.recover() {
            Ok(0) => {}
            Ok(lost) => tracing::warn!(lost, "background runs of the last process never ended: marked lost"),
            Err(error) => tracing::error!(%error, "the runs an earlier process left could not be marked lost"),
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn_blocking(recover)),
            Err(_) => recover(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Starts `request` in `session_id` for `caller`, tracked under its id
    /// (the client's, else a new one), by `start` (the session, the request
    /// with its id, and whether its output is live: the run under way). A
    /// background run waits a moment first, for a refusal or a bad request,
    /// which come at once and are its answer rather than a run that failed;
    /// a foreground one returns at once, for its caller to wait on it. Its
    /// events are kept when it is `followed` (streamed, or in the
    /// background); a run answered with its report alone keeps none (the
    /// report holds its output).
    pub async fn start(
        self: &Arc<Self>,
        caller: &Caller,
        session_id: String,
        mut request: RunRequest,
        control: &RunControl,
        followed: bool,
        start: impl FnOnce(String, RunRequest, bool) -> LiveRun,
    ) -> Result<Started, ServiceError> {
        let given = request.run_id.take();
        let run_id = match &given {
            Some(given) => anypath_interpreter::names::run_id(given).map_err(anypath_interpreter::InterpreterError::from)?.to_owned(),
            None => anypath_interpreter::names::new_short_id(),
        };
        let callback = match &control.callback_url {
            Some(url) => Some(self.callbacks.check(url)?),
            None => None,
        };
        request.run_id = Some(run_id.clone());
        let key = (caller.tenant.clone(), run_id.clone());
        // Only an id the client chose can name a run kept on disk: a new
        // one is not looked for there (no file read on a warm cell's path).
        let exists = given.is_some() && self.find(&caller.tenant, &run_id).await.is_some();
        let tracked = {
            let mut inner = self.lock();
            if exists || inner.runs.contains_key(&key) {
                return Err(ServiceError::RunExists(run_id));
            }
            let tracked = Arc::new(Tracked::new(caller, session_id.clone(), run_id, control.background));
            inner.runs.insert(key, tracked.clone());
            tracked
        };
        if control.background {
            self.persist(&tracked).await;
        }
        let live = start(session_id, request, followed);
        tracked.set_abort(live.abort_handle());
        let live = if control.background {
            match live.unless_failed_early(Window::Brief).await {
                Ok(live) => live,
                Err(error) => {
                    self.forget(&tracked).await;
                    return Err(error);
                }
            }
        } else {
            live
        };
        let registry = self.clone();
        let pumped = tracked.clone();
        let (outcome_tx, outcome) = tokio::sync::oneshot::channel();
        tokio::spawn(async move { registry.pump(live, pumped, callback, outcome_tx).await });
        Ok(Started { tracked, outcome })
    }

    /// Keeps the run's events as they come, then its outcome; writes it,
    /// sends its callback.
    async fn pump(
        self: Arc<Self>,
        mut live: LiveRun,
        tracked: Arc<Tracked>,
        callback: Option<url::Url>,
        waiter: tokio::sync::oneshot::Sender<Result<anypath_interpreter::RunReport, ServiceError>>,
    ) {
        while let Some(event) = live.next_event().await {
            tracked.push_event(event);
        }
        let outcome = live.outcome().await;
        tracked.finish(&outcome);
        // A foreground caller still waiting gets the outcome itself (its
        // error answers with its own headers); one that left does not.
        let _ = waiter.send(outcome);
        if tracked.background() {
            self.persist(&tracked).await;
        }
        tracked.mark_settled();
        self.lock().finished.push_back((Instant::now(), (tracked.tenant().to_owned(), tracked.run_id().to_owned())));
        self.forget_old();
        self.ended.notify_waiters();
        if let (Some(url), Some(signer)) = (callback, self.signer.clone()) {
            callback::deliver(url, tracked.status(), signer).await;
        }
    }

    /// A run of `tenant` by its id: in memory, else a background run's record on disk.
    pub async fn find(&self, tenant: &str, run_id: &str) -> Option<Arc<Tracked>> {
        if let Some(tracked) = self.lock().runs.get(&(tenant.to_owned(), run_id.to_owned())) {
            return Some(tracked.clone());
        }
        let records = self.records.clone()?;
        let (tenant, run_id) = (tenant.to_owned(), run_id.to_owned());
        let stored = tokio::task::spawn_blocking(move || records.read(&tenant, &run_id)).await.ok()??;
        Some(Arc::new(Tracked::from_stored(stored)))
    }

    /// Run `run_id` of `tenant` when this host tracks it (started it here).
    pub(crate) fn tracked_here(&self, tenant: &str, run_id: &str) -> Option<Arc<Tracked>> {
        self.lock().runs.get(&(tenant.to_owned(), run_id.to_owned())).cloned()
    }

    /// The caller's run `run_id` in `session_id`, or `no_such_run`: what
    /// every transport that names a run by its id asks.
    pub async fn find_in(&self, tenant: &str, session_id: &str, run_id: &str) -> Result<Arc<Tracked>, ServiceError> {
        self.find(tenant, run_id).await.filter(|t| t.session_id() == session_id).ok_or_else(|| ServiceError::NoSuchRun(run_id.to_owned()))
    }

    /// Background runs still going on, or not yet written since they ended.
    fn running_background(&self) -> usize {
        self.lock().runs.values().filter(|t| t.background() && !t.settled()).count()
    }

    /// On a graceful stop: waits for the running background runs to end,
    /// up to `deadline`, then interrupts the rest by `stop` (as their
    /// tenant, under a request id of their own) and waits a moment for their
    /// reports. Every one of them is written as it ends.
    pub async fn drain(&self, deadline: Duration, stop: impl Fn(&Caller, &Tracked)) {
        let started = Instant::now();
        let waiting = self.running_background();
        if waiting == 0 {
            return;
        }
        tracing::info!(running = waiting, deadline_s = deadline.as_secs(), "waiting for background runs to end");
        self.wait_for_background(tokio::time::Instant::now() + deadline).await;
        let left: Vec<Arc<Tracked>> = self.lock().runs.values().filter(|t| t.background() && !t.state().is_final()).cloned().collect();
        for tracked in &left {
            let caller = Caller { tenant: tracked.tenant().to_owned(), request_id: uuid::Uuid::new_v4().to_string(), base_url: String::new() };
            stop(&caller, tracked);
        }
        self.wait_for_background(tokio::time::Instant::now() + Duration::from_secs(5)).await;
        tracing::info!(interrupted = left.len(), elapsed_ms = started.elapsed().as_millis() as u64, "background runs ended for the stop");
    }

    /// Waits until no background run is running, or `until`.
    async fn wait_for_background(&self, until: tokio::time::Instant) {
        loop {
            // Listening before looking: a run that ends in between still wakes the wait.
            let notified = self.ended.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.running_background() == 0 || tokio::time::timeout_at(until, notified).await.is_err() {
                return;
            }
        }
    }

    /// Writes a background run's record, on the blocking pool.
    async fn persist(&self, tracked: &Tracked) {
        let Some(records) = self.records.clone() else { return };
        let stored = tracked.stored();
        let run_id = tracked.run_id().to_owned();
        match tokio::task::spawn_blocking(move || records.write(&stored)).await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => tracing::error!(%error, run_id, "a background run's record could not be written"),
            Err(error) => tracing::error!(%error, run_id, "a background run's record was not written"),
        }
    }

    /// Forgets a run that never started (its start was refused).
    async fn forget(&self, tracked: &Tracked) {
        let (tenant, run_id) = (tracked.tenant().to_owned(), tracked.run_id().to_owned());
        self.lock().runs.remove(&(tenant.clone(), run_id.clone()));
        if let Some(records) = self.records.clone() {
            let _ = tokio::task::spawn_blocking(move || records.remove(&tenant, &run_id)).await;
        }
    }

    /// Forgets finished runs past their time in memory, or past the cap.
    fn forget_old(&self) {
        let mut inner = self.lock();
        while let Some((ended, _)) = inner.finished.front() {
            if ended.elapsed() < FINISHED_IN_MEMORY && inner.finished.len() <= MAX_FINISHED_IN_MEMORY {
                break;
            }
            if let Some((_, key)) = inner.finished.pop_front() {
                inner.runs.remove(&key);
            }
        }
    }

}

/// Removes background runs' records past their retention, every hour, on
/// the blocking pool, while the registry lives.
async fn prune_every_hour(registry: std::sync::Weak<RunRegistry>) {
    let mut tick = tokio::time::interval(Duration::from_secs(3600));
    loop {
        tick.tick().await;
        let Some(records) = registry.upgrade().and_then(|r| r.records.clone()) else { return };
        let _ = tokio::task::spawn_blocking(move || records.prune()).await;
    }
}
