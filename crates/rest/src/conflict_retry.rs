//! The one loop that runs a request to a committed report: load what it
//! needs, run it, commit its journal with a check of what it read, and run
//! it again when that changed in between (or on whole collections when it
//! reached past a partial load). The gateway's blocks and the store's direct
//! path both go through [`run_to_commit`]; they differ only in the steps of
//! [`Attempt`].

use anypath_wire::{Change, CommitRequest, ExecReport, LoadSpec, LoadedCollection};

/// Runs after a conflict before the client hears 409.
pub const MAX_CONFLICT_RETRIES: usize = 64;

/// The pause before run `attempt` (1 is the first re-run), in nanoseconds:
/// a uniform share of `2 * attempt` ms, at most 20 ms, so writers that
/// conflicted spread out instead of colliding again. `random` is any
/// uniformly random number.
pub fn back_off_ns(attempt: usize, random: u64) -> u64 {
    let ceiling_ns = (2 * attempt as u64).min(20) * 1_000_000;
    random % (ceiling_ns + 1)
}

/// Waits out the pause before re-run `attempt`.
pub fn back_off(attempt: usize) {
    clock::pause_ns(back_off_ns(attempt, clock::random()));
}

/// What one run produced.
#[derive(Debug)]
pub enum Ran {
    /// A report to commit (when it changed anything) and answer.
    Report(Box<ExecReport>),
    /// The run touched data outside a partial load; the message says what.
    NeedsData(String),
}

/// How a commit ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Committed {
    /// The journal landed.
    Landed,
    /// What the run read changed before its journal landed: run it again.
    Conflict,
}

/// Why [`run_to_commit`] gave up; each caller answers it in its own terms.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GaveUp {
    /// Every re-run met another conflict.
    #[error("the data kept changing while this request ran; try again")]
    KeptChanging,
    /// The run asked for data although its collections were loaded whole:
    /// a fault of the run, not something a re-run mends.
    #[error("the run asked for data that was loaded whole: {0}")]
    LoadedWhole(String),
}

/// The steps of one attempt, as the caller takes them.
pub trait Attempt {
    /// The caller's error; the loop's own failures convert into it.
    type Error: From<GaveUp>;

    /// Loads each collection of `specs`, in order.
    fn load(&mut self, specs: &[LoadSpec]) -> Result<Vec<LoadedCollection>, Self::Error>;

    /// Runs the request on `loaded` (the run may take its documents; the
    /// name, version and tags must stay for the commit).
    fn run(&mut self, loaded: &mut [LoadedCollection]) -> Result<Ran, Self::Error>;

    /// Lands a journal whole, or reports the conflict that stopped it.
    fn commit(&mut self, request: CommitRequest) -> Result<Committed, Self::Error>;

    /// Waits before re-run `attempt`: by default the shared [`back_off`].
    fn pause(&mut self, attempt: usize) {
        back_off(attempt);
    }
}

/// Runs `attempt` for `tenant` from `specs` to a report whose journal (if
/// any) landed, re-running after each conflict up to
/// [`MAX_CONFLICT_RETRIES`] times. A run that reached past a partial load
/// counts as a re-run too, on whole collections.
pub fn run_to_commit<A: Attempt>(attempt: &mut A, tenant: &str, mut specs: Vec<LoadSpec>) -> Result<ExecReport, A::Error> {
    for round in 0..=MAX_CONFLICT_RETRIES {
        if round > 0 {
            attempt.pause(round);
        }
        let mut loaded = attempt.load(&specs)?;
        let report = match attempt.run(&mut loaded)? {
            Ran::Report(report) => *report,
            Ran::NeedsData(message) => {
                if specs.iter().all(|s| s.ids.is_none()) {
                    return Err(GaveUp::LoadedWhole(message).into());
                }
                specs = whole(specs);
                continue;
            }
        };
        if !report.mutations.is_empty() {
            let changes = Change::for_run(&loaded, &report.mutations, &report.reads);
            if attempt.commit(CommitRequest { tenant: tenant.to_owned(), changes })? == Committed::Conflict {
                continue;
            }
        }
        return Ok(report);
    }
    Err(GaveUp::KeptChanging.into())
}

/// The same collections, each loaded whole.
fn whole(specs: Vec<LoadSpec>) -> Vec<LoadSpec> {
    specs.into_iter().map(|s| LoadSpec { ids: None, ..s }).collect()
}

/// The clock and randomness the pause uses: the component's own WASI
/// imports in a Spin component, the standard library elsewhere (tests).
#[cfg(all(target_os = "wasi", target_env = "p2"))]
mod clock {
    pub fn random() -> u64 {
        wasi::random::random::get_random_u64()
    }

    pub fn pause_ns(ns: u64) {
        wasi::clocks::monotonic_clock::subscribe_duration(ns).block();
    }
}

#[cfg(not(all(target_os = "wasi", target_env = "p2")))]
mod clock {
    use std::hash::{BuildHasher, Hasher};
    use std::time::{Duration, SystemTime};

    /// The process's random hash keys, mixed with the time.
    pub fn random() -> u64 {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u128(SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().as_nanos());
        hasher.finish()
    }

    pub fn pause_ns(ns: u64) {
        std::thread::sleep(Duration::from_nanos(ns));
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use anypath_wire::{Documents, Loaded, Metrics, MutationRecord, Op, Output};
    use serde_json::{Value, json};

    use super::*;

    #[test]
    fn pauses_grow_with_the_attempt_and_stop_at_20_ms() {
        assert_eq!(back_off_ns(1, u64::MAX - 1), (u64::MAX - 1) % 2_000_001);
        assert!((0..1000u64).all(|r| back_off_ns(3, r.wrapping_mul(0x9e37_79b9_7f4a_7c15)) <= 6_000_000));
        assert_eq!(back_off_ns(50, 20_000_000), 20_000_000, "the ceiling is reachable");
        assert_eq!(back_off_ns(50, 20_000_001), 0, "and never passed");
        assert_eq!(back_off_ns(0, 12345), 0, "no pause before the first run");
    }

    /// A scripted attempt: what each run and commit answers, and what it was asked.
    #[derive(Default)]
    struct Script {
        runs: Vec<Ran>,
        commits: Vec<Committed>,
        loads: Vec<Vec<LoadSpec>>,
        committed: Vec<CommitRequest>,
        pauses: Vec<usize>,
    }

    impl Attempt for Script {
        type Error = GaveUp;

        fn load(&mut self, specs: &[LoadSpec]) -> Result<Vec<LoadedCollection>, GaveUp> {
            self.loads.push(specs.to_vec());
            Ok(specs.iter().map(|s| collection(&s.name)).collect())
        }

        fn run(&mut self, _loaded: &mut [LoadedCollection]) -> Result<Ran, GaveUp> {
            Ok(if self.runs.is_empty() { Ran::Report(Box::new(report(true))) } else { self.runs.remove(0) })
        }

        fn commit(&mut self, request: CommitRequest) -> Result<Committed, GaveUp> {
            self.committed.push(request);
            Ok(if self.commits.is_empty() { Committed::Conflict } else { self.commits.remove(0) })
        }

        fn pause(&mut self, attempt: usize) {
            self.pauses.push(attempt);
        }
    }

    fn collection(name: &str) -> LoadedCollection {
        let collection = Loaded { name: name.into(), documents: Documents::Parsed(Vec::new()), complete: true, absent_ids: Vec::new(), reserved_id: None };
        LoadedCollection { collection, version: 3, tags: BTreeMap::new() }
    }

    /// A report; `writes` gives it one insert into `members`.
    fn report(writes: bool) -> ExecReport {
        let mutations = if writes {
            vec![MutationRecord { collection: "members".into(), op: Op::Insert, id: json!(1), document: Some(json!({"id": 1})) }]
        } else {
            Vec::new()
        };
        ExecReport { ok: true, reply: Value::Null, mutations, reads: Vec::new(), error: None, output: Output::default(), metrics: Metrics::default() }
    }

    fn partial(name: &str) -> LoadSpec {
        LoadSpec { ids: Some(vec!["1".into()]), ..LoadSpec::whole(name) }
    }

    #[test]
    fn a_run_that_changes_nothing_commits_nothing() {
        let mut script = Script { runs: vec![Ran::Report(Box::new(report(false)))], ..Script::default() };
        let report = run_to_commit(&mut script, "acme", vec![LoadSpec::whole("members")]).expect("answers");
        assert!(report.mutations.is_empty());
        assert!(script.committed.is_empty() && script.pauses.is_empty());
    }

    #[test]
    fn a_conflict_runs_again_after_a_pause_and_the_journal_lands_once() {
        let mut script = Script { commits: vec![Committed::Conflict, Committed::Landed], ..Script::default() };
        let report = run_to_commit(&mut script, "acme", vec![LoadSpec::whole("members")]).expect("answers");
        assert_eq!(report.mutations.len(), 1);
        assert_eq!(script.pauses, [1]);
        assert_eq!(script.loads.len(), 2, "each run loads afresh");
        let request = &script.committed[1];
        assert_eq!((request.tenant.as_str(), request.changes.len()), ("acme", 1));
        assert_eq!((request.changes[0].name.as_str(), request.changes[0].check.expected_version), ("members", 3));
    }

    #[test]
    fn reaching_past_a_partial_load_runs_again_on_whole_collections() {
        let mut script = Script { runs: vec![Ran::NeedsData("id 2".into())], commits: vec![Committed::Landed], ..Script::default() };
        run_to_commit(&mut script, "acme", vec![partial("members")]).expect("answers");
        assert_eq!(script.loads, [vec![partial("members")], vec![LoadSpec::whole("members")]]);
        assert_eq!(script.pauses, [1], "the widened run is a re-run like any other");
    }

    #[test]
    fn needing_data_that_was_loaded_whole_is_the_runs_fault() {
        let mut script = Script { runs: vec![Ran::NeedsData("id 2".into())], ..Script::default() };
        let error = run_to_commit(&mut script, "acme", vec![LoadSpec::whole("members")]).expect_err("gives up");
        assert_eq!(error, GaveUp::LoadedWhole("id 2".into()));
        assert_eq!(script.loads.len(), 1);
    }

    #[test]
    fn conflicts_past_the_last_re_run_give_up() {
        let mut script = Script::default();
        let error = run_to_commit(&mut script, "acme", vec![LoadSpec::whole("members")]).expect_err("gives up");
        assert_eq!(error, GaveUp::KeptChanging);
        assert_eq!(error.to_string(), "the data kept changing while this request ran; try again");
        assert_eq!(script.committed.len(), MAX_CONFLICT_RETRIES + 1);
        assert_eq!(script.pauses, (1..=MAX_CONFLICT_RETRIES).collect::<Vec<_>>());
    }
}
