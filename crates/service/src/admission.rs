//! Fair admission of executions across tenants.
//!
//! One process and a few cores serve every tenant, so the host is the
//! scheduler, and a work-conserving one: a request is refused only when it
//! would take a place another tenant needs now. A tenant runs at most
//! `tenant_running` executions at once (half of that while another tenant
//! is running or waiting) and may fill the whole queue while no other tenant
//! is; while one is, it keeps at most `tenant_queued` waiting, past that its
//! requests are refused (429). When the queue is full, the newest waiter of
//! the tenant holding the most places makes way for a lighter tenant's
//! request. The service as a whole runs `max_running` at once, more than one
//! tenant may take, so a tenant whose code never ends cannot fill every slot;
//! waiting requests are served round robin across tenants, not first come
//! first served.
//!
//! The same mechanism schedules the app's public requests under `anypath up`
//! ([`AdmissionConfig::for_requests`]): there most work waits on storage
//! rather than on a core, so a lone tenant runs many requests at once (group
//! commit needs them), and a tenant counts as contending for a moment after
//! its last request ended (`linger`), so a client sending one request after
//! another holds a flooding tenant to its contended share between them too.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::sync::oneshot;

/// The bounds of admission.
#[derive(Debug, Clone, Copy)]
pub struct AdmissionConfig {
    /// Executions running at once, over all tenants.
    pub max_running: usize,
    /// Executions one tenant may run at once when alone.
    pub tenant_running: usize,
    /// Executions one tenant may run at once while another tenant is
    /// running or waiting (at least one, at most `tenant_running`).
    pub contended_running: usize,
    /// How long after its last execution ended a tenant still holds the
    /// others to their contended share (zero: only while it runs or waits).
    /// Queue places are never held this way: a burst is not refused because
    /// another tenant was here a moment ago.
    pub linger: Duration,
    /// Requests waiting at once, over all tenants.
    pub max_queued: usize,
    /// Requests one tenant may keep waiting while another tenant is
    /// running or waiting.
    pub tenant_queued: usize,
}

impl AdmissionConfig {
    /// The defaults for a machine with `cpus` cores: a lone tenant runs as
    /// many executions as there are cores (what a single queue gave), and as
    /// many slots again stay for everyone else; a tenant sending one run
    /// after another keeps the others to half their share between its runs.
    pub fn for_cpus(cpus: usize) -> Self {
        let cpus = cpus.max(1);
        Self {
            max_running: 2 * cpus,
            tenant_running: cpus,
            contended_running: Self::half(cpus),
            linger: Duration::from_millis(250),
            max_queued: 64,
            tenant_queued: 8,
        }
    }

    /// The defaults for an app's public requests on `cpus` cores: most of a
    /// REST request's time is a storage write or a sandbox's answer, not a
    /// core, so a lone tenant runs eight per core at once (creates share one
    /// durable commit) and may fill a long queue (a burst waits, it is not
    /// refused); while another tenant is here it runs one per two cores and
    /// keeps eight waiting, past that its requests are refused (429).
    pub fn for_requests(cpus: usize) -> Self {
        let cpus = cpus.max(1);
        Self {
            max_running: 16 * cpus,
            tenant_running: 8 * cpus,
            contended_running: Self::half(cpus),
            linger: Duration::from_millis(500),
            max_queued: 4096,
            tenant_queued: 8,
        }
    }

    /// Half of `running`, at least one: a tenant's share while contended
    /// when nothing else says otherwise.
    pub fn half(running: usize) -> usize {
        (running / 2).max(1)
    }
}

/// Why a request was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// The tenant already has its share running and waiting (429).
    #[error("this tenant has {running} executions running and {queued} waiting, its share; retry later")]
    TenantBusy { running: usize, queued: usize },
    /// Every place in the queue is taken (503).
    #[error("the service has {0} requests waiting; retry later")]
    Overloaded(usize),
    /// The service is stopping.
    #[error("the service is stopping")]
    Closed,
}

impl Refused {
    /// The stable code of the refusal, as the HTTP envelope and MCP tool errors name it.
    pub fn code(&self) -> &'static str {
        match self {
            Self::TenantBusy { .. } => "tenant_busy",
            Self::Overloaded(_) => "overloaded",
            Self::Closed => "shutting_down",
        }
    }
}

/// Counters of one tenant, as `/healthz` reports them.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct TenantCounts {
    pub running: usize,
    pub queued: usize,
    pub admitted_total: u64,
    /// Requests that had to wait for a slot before they ran.
    pub waited_total: u64,
    pub refused_total: u64,
    /// Executions that ended on a limit (fuel, time, memory, output).
    pub limit_breaches_total: u64,
}

/// The admission state shared by every route of a service.
pub struct Admission {
    config: AdmissionConfig,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    running: usize,
    queued: usize,
    next_ticket: u64,
    tenants: HashMap<Arc<str>, Tenant>,
    /// Tenants with waiting requests, in the order they are next served.
    turn: VecDeque<Arc<str>>,
}

/// What admission does with a request arriving now.
enum Decision {
    /// A slot is free within the tenant's share: it runs at once.
    Run,
    /// It waits for a slot; `shed` when the queue is full and a heavier
    /// tenant's newest waiter makes way for it.
    Wait { shed: bool },
    Refuse(Refused),
}

/// What a waiter is told: a slot, or that it made way for a lighter tenant.
type Answer = Result<(), Refused>;

#[derive(Default)]
struct Tenant {
    counts: TenantCounts,
    waiting: VecDeque<(u64, oneshot::Sender<Answer>)>,
    /// When its last execution ended, kept only under a `linger`.
    last_ended: Option<Instant>,
}

/// A running execution's slot, given back when dropped.
pub struct Permit {
    admission: Arc<Admission>,
    tenant: Arc<str>,
}

impl Admission {
    /// Admission under `config` (every bound at least 1, queues may be 0).
    pub fn new(config: AdmissionConfig) -> Arc<Self> {
        let max_running = config.max_running.max(1);
        let tenant_running = config.tenant_running.clamp(1, max_running);
        let config = AdmissionConfig {
            max_running,
            tenant_running,
            contended_running: config.contended_running.clamp(1, tenant_running),
            ..config
        };
        Arc::new(Self { config, state: Mutex::new(State::default()) })
    }

    /// The bounds in force.
    pub fn config(&self) -> AdmissionConfig {
        self.config
    }

    /// Waits for a slot for `tenant`, or refuses at once when its share (or
    /// the whole queue) is taken. Dropping the future gives its place up.
    pub async fn admit(self: &Arc<Self>, tenant: &str) -> Result<Permit, Refused> {
        let (ticket, tenant, granted) = {
            let mut state = self.lock();
            let key = state.key(tenant);
            let shed = match self.decide(&state, &key) {
                Decision::Run => {
                    let entry = state.tenants.entry(key.clone()).or_default();
                    entry.counts.running += 1;
                    entry.counts.admitted_total += 1;
                    state.running += 1;
                    return Ok(Permit { admission: self.clone(), tenant: key });
                }
                Decision::Refuse(refused) => {
                    state.tenants.entry(key).or_default().counts.refused_total += 1;
                    return Err(refused);
                }
                Decision::Wait { shed } => shed,
            };
            if shed {
                state.shed_heaviest(&key);
            }
            let (tx, rx) = oneshot::channel();
            let ticket = state.next_ticket;
            state.next_ticket += 1;
            let entry = state.tenants.entry(key.clone()).or_default();
            entry.waiting.push_back((ticket, tx));
            entry.counts.queued = entry.waiting.len();
            entry.counts.waited_total += 1;
            state.queued += 1;
            if !state.turn.contains(&key) {
                state.turn.push_back(key.clone());
            }
            (ticket, key, rx)
        };
        let mut waiting = Waiting { admission: self, tenant: tenant.clone(), ticket, done: false };
        let result = granted.await;
        waiting.done = true;
        match result {
            Ok(Ok(())) => Ok(Permit { admission: self.clone(), tenant }),
            Ok(Err(refused)) => Err(refused),
            Err(_) => Err(Refused::Closed),
        }
    }

    /// Whether a request of `tenant` arriving now would be refused, without
    /// taking or keeping any place: lets a caller refuse before it spends
    /// work on a request the executor would turn away. A refusal counts as one.
    pub fn probe(&self, tenant: &str) -> Result<(), Refused> {
        let mut state = self.lock();
        let key = state.key(tenant);
        match self.decide(&state, &key) {
            Decision::Refuse(refused) => {
                state.tenants.entry(key).or_default().counts.refused_total += 1;
                Err(refused)
            }
            Decision::Run | Decision::Wait { .. } => Ok(()),
        }
    }

    /// What admission does with a request of `key` arriving now.
    fn decide(&self, state: &State, key: &Arc<str>) -> Decision {
        let config = self.config;
        let others_active = state.others_active(key);
        let queue_share = if others_active { config.tenant_queued } else { config.max_queued };
        let running_share = self.running_share(state, key);
        let (running, queued) = state.tenants.get(key).map_or((0, 0), |t| (t.counts.running, t.waiting.len()));
        if queued == 0 && running < running_share && state.running < config.max_running {
            return Decision::Run;
        }
        let over_share = queued >= queue_share;
        let queue_full = state.queued >= config.max_queued;
        // A full queue makes way only for a request that may then take the place.
        let shed = queue_full && !over_share && state.heavier_than(key).is_some();
        if over_share || (queue_full && !shed) {
            // Alone at a full queue, the service is what is full, not a share.
            return Decision::Refuse(if queue_full && !others_active {
                Refused::Overloaded(state.queued)
            } else {
                Refused::TenantBusy { running, queued }
            });
        }
        Decision::Wait { shed }
    }

    /// Counts an execution of `tenant` that ended on a limit.
    pub fn record_limit_breach(&self, tenant: &str) {
        let mut state = self.lock();
        let key = state.key(tenant);
        state.tenants.entry(key).or_default().counts.limit_breaches_total += 1;
    }

    /// Every tenant seen so far and its counters, and the totals running and waiting.
    pub fn snapshot(&self) -> (usize, usize, BTreeMap<String, TenantCounts>) {
        let state = self.lock();
        let tenants = state.tenants.iter().map(|(name, t)| (name.to_string(), t.counts)).collect();
        (state.running, state.queued, tenants)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves consistent counters (every
        // update is a few integer steps); keep serving rather than poison every caller.
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The executions `key` may run at once: `tenant_running` alone,
    /// `contended_running` while another tenant runs, waits or ended its
    /// last execution less than `linger` ago, so a tenant whose code never
    /// ends leaves most of the cores to the others.
    fn running_share(&self, state: &State, key: &Arc<str>) -> usize {
        let contended = state.others_active(key) || state.others_lingering(key, self.config.linger);
        if contended { self.config.contended_running } else { self.config.tenant_running }
    }

    /// Gives a slot back and hands free slots to waiting tenants in turn.
    fn release(&self, tenant: &str) {
        let mut state = self.lock();
        state.running = state.running.saturating_sub(1);
        if let Some(entry) = state.tenants.get_mut(tenant) {
            entry.counts.running = entry.counts.running.saturating_sub(1);
            if self.config.linger > Duration::ZERO {
                entry.last_ended = Some(Instant::now());
            }
        }
        self.dispatch(&mut state);
    }

    /// While slots are free, admits the first waiter of the next tenant in
    /// turn that is under its share; a tenant served goes to the back.
    fn dispatch(&self, state: &mut State) {
        while state.running < self.config.max_running {
            let eligible = |key: &Arc<str>| {
                let cap = self.running_share(state, key);
                state.tenants.get(key).is_some_and(|t| t.counts.running < cap && !t.waiting.is_empty())
            };
            let Some(position) = state.turn.iter().position(eligible) else { break };
            let Some(key) = state.turn.remove(position) else { break };
            let Some(entry) = state.tenants.get_mut(&key) else { continue };
            let Some((_, tx)) = entry.waiting.pop_front() else { continue };
            entry.counts.queued = entry.waiting.len();
            state.queued = state.queued.saturating_sub(1);
            // A waiter still queued is still listening (leaving removes it first).
            if tx.send(Ok(())).is_ok() {
                entry.counts.running += 1;
                entry.counts.admitted_total += 1;
                state.running += 1;
            }
            if !entry.waiting.is_empty() {
                state.turn.push_back(key);
            }
        }
        let tenants = &state.tenants;
        state.turn.retain(|key| tenants.get(key).is_some_and(|t| !t.waiting.is_empty()));
    }
}

impl State {
    /// Whether a tenant other than `key` is running or waiting right now.
    fn others_active(&self, key: &Arc<str>) -> bool {
        self.tenants.iter().any(|(name, t)| name != key && (t.counts.running > 0 || !t.waiting.is_empty()))
    }

    /// Whether a tenant other than `key` ended an execution less than
    /// `linger` ago.
    fn others_lingering(&self, key: &Arc<str>, linger: Duration) -> bool {
        if linger.is_zero() {
            return false;
        }
        let now = Instant::now();
        self.tenants.iter().any(|(name, t)| name != key && t.last_ended.is_some_and(|ended| now.duration_since(ended) < linger))
    }

    /// Frees a place in a full queue for `key`: the newest waiter of the
    /// tenant holding the most places is refused, when that tenant holds
    /// more than `key` would after taking the place. False when `key` is
    /// itself the heaviest (it is the one to refuse).
    fn shed_heaviest(&mut self, key: &Arc<str>) -> bool {
        let Some((heaviest, places)) = self.heavier_than(key) else { return false };
        let Some(entry) = self.tenants.get_mut(&heaviest) else { return false };
        let Some((_, tx)) = entry.waiting.pop_back() else { return false };
        entry.counts.queued = entry.waiting.len();
        entry.counts.refused_total += 1;
        let refused = Refused::TenantBusy { running: entry.counts.running, queued: places - 1 };
        self.queued = self.queued.saturating_sub(1);
        // A waiter that already left has nothing to be told.
        let _ = tx.send(Err(refused));
        true
    }

    /// The tenant holding the most waiting places, with how many, when it
    /// holds more than `key` would after taking one more.
    fn heavier_than(&self, key: &Arc<str>) -> Option<(Arc<str>, usize)> {
        let own = self.tenants.get(key).map_or(0, |t| t.waiting.len());
        let heaviest = self.tenants.iter().filter(|(name, _)| *name != key).max_by_key(|(_, t)| t.waiting.len());
        heaviest.map(|(name, t)| (name.clone(), t.waiting.len())).filter(|(_, places)| *places > own + 1)
    }

    /// The shared name of a tenant, so the map and the turn hold one copy.
    fn key(&self, tenant: &str) -> Arc<str> {
        self.tenants.get_key_value(tenant).map(|(k, _)| k.clone()).unwrap_or_else(|| Arc::from(tenant))
    }
}

/// A waiter's place in its tenant's queue; dropped before it is served (the
/// client went away), it leaves the queue, or gives back a slot granted meanwhile.
struct Waiting<'a> {
    admission: &'a Arc<Admission>,
    tenant: Arc<str>,
    ticket: u64,
    done: bool,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let mut state = self.admission.lock();
        let Some(entry) = state.tenants.get_mut(&self.tenant) else { return };
        let before = entry.waiting.len();
        entry.waiting.retain(|(ticket, _)| *ticket != self.ticket);
        if entry.waiting.len() < before {
            entry.counts.queued = entry.waiting.len();
            state.queued = state.queued.saturating_sub(1);
        } else {
            // Served while being dropped: the slot was counted; give it back.
            drop(state);
            self.admission.release(&self.tenant);
        }
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.admission.release(&self.tenant);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn config(max_running: usize, tenant_running: usize, tenant_queued: usize) -> AdmissionConfig {
        AdmissionConfig { max_running, tenant_running, contended_running: AdmissionConfig::half(tenant_running), linger: Duration::ZERO, max_queued: 32, tenant_queued }
    }

    /// Polls `future` once: `Some` when it is ready.
    fn poll_now<F: std::future::Future + Unpin>(future: &mut F) -> Option<F::Output> {
        let waker = std::task::Waker::noop();
        match std::pin::Pin::new(future).poll(&mut std::task::Context::from_waker(waker)) {
            std::task::Poll::Ready(output) => Some(output),
            std::task::Poll::Pending => None,
        }
    }

    #[tokio::test]
    async fn a_lone_tenant_runs_its_whole_share_and_queues_the_rest() {
        let admission = Admission::new(config(4, 2, 8));
        let first = admission.admit("a").await.expect("first");
        let second = admission.admit("a").await.expect("second");
        let mut third = Box::pin(admission.admit("a"));
        assert!(poll_now(&mut third).is_none(), "past its share a tenant waits");
        assert_eq!(admission.snapshot().2["a"].queued, 1);
        drop(first);
        let third = poll_now(&mut third).expect("served when a slot frees").expect("admitted");
        assert_eq!(admission.snapshot().0, 2);
        drop((second, third));
        assert_eq!(admission.snapshot().0, 0);
    }

    #[tokio::test]
    async fn a_lone_tenant_may_fill_the_whole_queue() {
        let admission = Admission::new(AdmissionConfig { max_running: 1, tenant_running: 1, contended_running: 1, linger: Duration::ZERO, max_queued: 5, tenant_queued: 1 });
        let _running = admission.admit("a").await.expect("running");
        let mut queued: Vec<_> = (0..5).map(|_| Box::pin(admission.admit("a"))).collect();
        for waiter in &mut queued {
            assert!(poll_now(waiter).is_none(), "alone, a tenant queues past its share");
        }
        assert_eq!(admission.admit("a").await.err(), Some(Refused::Overloaded(5)));
    }

    #[tokio::test]
    async fn a_tenant_past_its_share_is_refused_while_another_runs_at_once() {
        let admission = Admission::new(config(4, 2, 2));
        let _held: Vec<Permit> = vec![admission.admit("a").await.expect("1"), admission.admit("a").await.expect("2")];
        let other = admission.admit("b").await.expect("another tenant is admitted at once");
        let mut queued: Vec<_> = (0..2).map(|_| Box::pin(admission.admit("a"))).collect();
        for waiter in &mut queued {
            assert!(poll_now(waiter).is_none());
        }
        let refused = admission.admit("a").await.err();
        assert_eq!(refused, Some(Refused::TenantBusy { running: 2, queued: 2 }), "b runs, so a keeps its share");
        drop(other);
        let other = tokio::time::timeout(Duration::from_millis(100), admission.admit("b")).await;
        assert!(matches!(other, Ok(Ok(_))), "another tenant is admitted at once");
        assert_eq!(admission.snapshot().2["a"].refused_total, 1);
    }

    /// The probe refuses exactly what admission would, and takes no place:
    /// a tenant past its share while another runs is refused, the other
    /// tenant and a lone tenant are not, and nothing is queued by asking.
    #[tokio::test]
    async fn the_probe_refuses_what_admission_would_without_taking_a_place() {
        let admission = Admission::new(config(4, 2, 2));
        assert_eq!(admission.probe("a"), Ok(()), "a lone tenant with free slots");
        let _held: Vec<Permit> = vec![admission.admit("a").await.expect("1"), admission.admit("a").await.expect("2")];
        let other = admission.admit("b").await.expect("b runs");
        let mut queued: Vec<_> = (0..2).map(|_| Box::pin(admission.admit("a"))).collect();
        for waiter in &mut queued {
            assert!(poll_now(waiter).is_none());
        }
        assert_eq!(admission.probe("a"), Err(Refused::TenantBusy { running: 2, queued: 2 }));
        assert_eq!(admission.probe("b"), Ok(()), "the other tenant is under its share");
        let (running, waiting, tenants) = admission.snapshot();
        assert_eq!((running, waiting, tenants["a"].refused_total), (3, 2, 1), "asking took no place");
        drop(other);
        drop(queued);
        assert_eq!(admission.probe("a"), Ok(()), "alone again, a may queue");
    }

    /// The burst of issue: another tenant was here a moment ago but is
    /// neither running nor waiting, so the bursting tenant gets the whole
    /// queue and nothing is refused.
    #[tokio::test]
    async fn a_burst_after_another_tenants_request_is_not_refused() {
        let admission = Admission::new(config(4, 2, 8));
        drop(admission.admit("b").await.expect("b's request"));
        let running: Vec<Permit> = vec![admission.admit("a").await.expect("1"), admission.admit("a").await.expect("2")];
        let mut burst: Vec<_> = (0..30).map(|_| Box::pin(admission.admit("a"))).collect();
        for waiter in &mut burst {
            assert!(poll_now(waiter).is_none(), "queued, not refused");
        }
        assert_eq!(admission.snapshot().2["a"].refused_total, 0);
        drop(running);
    }

    /// Under a linger, a tenant that just ended its request still holds a
    /// flooding tenant to its contended share until the linger passes; then
    /// the flooding tenant has its whole share again. Queue places are not
    /// held: the flood waits, it is not refused.
    #[tokio::test]
    async fn a_tenant_that_just_left_holds_the_others_to_their_contended_share_for_its_linger() {
        let linger = Duration::from_millis(200);
        let admission = Admission::new(AdmissionConfig { max_running: 8, tenant_running: 4, contended_running: 1, linger, max_queued: 32, tenant_queued: 2 });
        drop(admission.admit("b").await.expect("b's request"));
        let first = admission.admit("a").await.expect("a runs its contended share");
        let mut burst: Vec<_> = (0..6).map(|_| Box::pin(admission.admit("a"))).collect();
        for waiter in &mut burst {
            assert!(poll_now(waiter).is_none(), "past its contended share a waits, and is not refused");
        }
        assert_eq!(admission.snapshot().0, 1, "b's linger keeps a at one running");
        tokio::time::sleep(linger + Duration::from_millis(50)).await;
        drop(first);
        let granted: Vec<Permit> = burst.iter_mut().filter_map(poll_now).filter_map(Result::ok).collect();
        assert_eq!(granted.len(), 4, "once b's linger passed, a has its whole share");
        assert_eq!(admission.snapshot().2["a"].refused_total, 0);
    }

    /// A full queue makes way for a lighter tenant: the heaviest tenant's
    /// newest waiter is refused (429) and the newcomer takes its place.
    #[tokio::test]
    async fn a_full_queue_sheds_the_heaviest_tenants_newest_waiter() {
        let admission = Admission::new(AdmissionConfig { max_running: 1, tenant_running: 1, contended_running: 1, linger: Duration::ZERO, max_queued: 3, tenant_queued: 8 });
        let _running = admission.admit("a").await.expect("running");
        let mut a_waiters: Vec<_> = (0..3).map(|_| Box::pin(admission.admit("a"))).collect();
        for waiter in &mut a_waiters {
            assert!(poll_now(waiter).is_none());
        }
        let mut b = Box::pin(admission.admit("b"));
        assert!(poll_now(&mut b).is_none(), "b waits in the place a gave up");
        let shed = poll_now(&mut a_waiters[2]).expect("a's newest waiter is answered");
        assert_eq!(shed.err(), Some(Refused::TenantBusy { running: 1, queued: 2 }));
        assert!(poll_now(&mut a_waiters[0]).is_none() && poll_now(&mut a_waiters[1]).is_none(), "a's older waiters keep their places");
        assert_eq!(admission.snapshot().1, 3);
        let refused = admission.admit("a").await.err();
        assert_eq!(refused, Some(Refused::TenantBusy { running: 1, queued: 2 }), "the heaviest tenant itself is refused");
    }

    #[tokio::test]
    async fn waiting_tenants_are_served_in_turn_not_in_arrival_order() {
        let admission = Admission::new(config(1, 1, 8));
        let running = admission.admit("a").await.expect("running");
        let mut a_waiters: Vec<_> = (0..3).map(|_| Box::pin(admission.admit("a"))).collect();
        for waiter in &mut a_waiters {
            assert!(poll_now(waiter).is_none());
        }
        let mut b_waiter = Box::pin(admission.admit("b"));
        assert!(poll_now(&mut b_waiter).is_none());
        drop(running);
        let a_first = poll_now(&mut a_waiters[0]).expect("a was first in turn").expect("admitted");
        assert!(poll_now(&mut b_waiter).is_none());
        drop(a_first);
        assert!(poll_now(&mut a_waiters[1]).is_none(), "a's second waits behind b");
        let b = poll_now(&mut b_waiter).expect("b's turn").expect("admitted");
        drop(b);
        assert!(poll_now(&mut a_waiters[1]).is_some());
    }

    #[tokio::test]
    async fn a_waiter_that_leaves_frees_its_place_and_no_slot_leaks() {
        let admission = Admission::new(AdmissionConfig { max_running: 1, tenant_running: 1, contended_running: 1, linger: Duration::ZERO, max_queued: 1, tenant_queued: 1 });
        let running = admission.admit("a").await.expect("running");
        let mut waiter = Box::pin(admission.admit("a"));
        assert!(poll_now(&mut waiter).is_none());
        assert!(admission.admit("a").await.is_err(), "the one queue place is taken");
        drop(waiter);
        assert_eq!(admission.snapshot().1, 0);
        drop(running);
        assert_eq!(admission.snapshot().0, 0);
        let again = tokio::time::timeout(Duration::from_millis(100), admission.admit("a")).await;
        assert!(matches!(again, Ok(Ok(_))));
    }
}
