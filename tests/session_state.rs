//! Session state that outlives its instance: a live instance's memory and
//! globals captured between runs, the instance dropped, and the state
//! restored into a fresh instance of the same component.
//!
//! Boundary: a state image is only ever restored into the runtime build it
//! was made from, and a damaged one is refused by its checksum.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use crate::common;
use common::service::Service;

use anypath_sandbox::{LiveInstance, StateOrigin};
use common::cells::{live, ok, run};

fn hibernate(instance: &mut LiveInstance) -> Vec<u8> {
    common::block_on(instance.hibernate()).expect("captured").expect("a live instance")
}

const PYTHON_KINDS: &str = r#"
import collections, itertools
n = 41
s = "snow ☃"
items = [1, 2.5, None, ("t", b"\x00\xff")]
table = {"a": {1, 2}, "b": collections.OrderedDict(z=1)}
def add(a, b=1):
    return a + b
class Point:
    def __init__(self, x, y):
        self.x, self.y = x, y
    def norm2(self):
        return self.x * self.x + self.y * self.y
def counter():
    count = 0
    def bump():
        nonlocal count
        count += 1
        return count
    return bump
bump = counter(); bump()
gen = itertools.count(10)
next(gen)
def fails():
    raise ValueError("from an earlier cell")
p = Point(3, 4)
print("defined")
"#;

const PYTHON_CHECK: &str = r#"
print(add(n), s, items[3][1].hex(), sorted(table["a"]), dict(table["b"]), p.norm2(), bump(), next(gen), type(p).__name__)
"#;

#[test]
fn python_values_of_every_common_kind_survive_hibernation() {
    let runtime = common::python_sessions();
    let home = common::scratch("anypath-state-kinds-");
    let mut session = live(runtime, home.path());
    assert_eq!(ok(&run(&mut session, PYTHON_KINDS)), "defined\n");
    let image = hibernate(&mut session);
    assert!(!session.is_live(), "hibernating drops the instance");

    let mut resumed = live(runtime, home.path()).with_saved_state(image);
    let report = run(&mut resumed, PYTHON_CHECK);
    assert_eq!(ok(&report), "42 snow ☃ 00ff [1, 2] {'z': 1} 25 2 11 Point\n");
    assert_eq!((report.state, report.state_reset), (StateOrigin::Resumed, false), "{report:?}");
    let next = run(&mut resumed, "print(bump())");
    assert_eq!((ok(&next), next.state), ("3\n", StateOrigin::Kept));

    let traced = run(&mut resumed, "fails()");
    let traceback = traced.traceback.clone().unwrap_or_default();
    eprintln!("{traced:?}");
    assert!(traceback.contains("raise ValueError(\"from an earlier cell\")"), "an earlier cell's line is shown: {traceback}");
}

#[test]
fn a_damaged_image_is_refused_and_the_session_starts_fresh_with_its_files() {
    let runtime = common::python_sessions();
    let home = common::scratch("anypath-state-damaged-");
    let mut session = live(runtime, home.path());
    ok(&run(&mut session, "x = 1\nopen('kept.txt', 'w').write('file')"));
    let mut image = hibernate(&mut session);
    let middle = image.len() / 2;
    image[middle] ^= 0x01;
    let mut resumed = live(runtime, home.path()).with_saved_state(image);
    let report = run(&mut resumed, "print(open('kept.txt').read(), 'x' in globals())");
    assert_eq!(ok(&report), "file False\n");
    assert_eq!((report.state, report.state_reset), (StateOrigin::Fresh, true), "{report:?}");
    let note = report.state_note.unwrap_or_default();
    assert!(note.contains("checksum"), "the report says why: {note}");
}

#[test]
fn a_file_left_open_is_closed_when_the_state_is_saved_and_the_report_names_it() {
    let runtime = common::python_sessions();
    let home = common::scratch("anypath-state-open-");
    let mut session = live(runtime, home.path());
    ok(&run(&mut session, "log = open('log.txt', 'w')\nlog.write('kept before the save')"));
    let image = hibernate(&mut session);
    let mut resumed = live(runtime, home.path()).with_saved_state(image);
    let report = run(&mut resumed, "print(log.closed, open('log.txt').read())");
    assert_eq!(ok(&report), "True kept before the save\n", "closing flushed what was written");
    let note = report.state_note.unwrap_or_default();
    assert!(note.contains("log.txt"), "the report names the file: {note}");
}

#[test]
fn only_files_still_open_are_closed_and_named_when_the_state_is_saved() {
    let runtime = common::python_sessions();
    let home = common::scratch("anypath-state-counted-");
    let mut session = live(runtime, home.path());
    let code = "with open('done.txt', 'w') as f:\n    f.write('x')\nshort = open('short.txt', 'w')\nshort.close()\nkept = open('kept.txt', 'w')";
    ok(&run(&mut session, code));
    let image = hibernate(&mut session);
    let mut resumed = live(runtime, home.path()).with_saved_state(image);
    let report = run(&mut resumed, "print(kept.closed, short.closed)");
    assert_eq!(ok(&report), "True True\n");
    let note = report.state_note.unwrap_or_default();
    assert!(note.contains("kept.txt") && !note.contains("done.txt") && !note.contains("short.txt"), "only the open file is named: {note}");
    // Nothing open now: the next save closes and names nothing.
    let image = hibernate(&mut resumed);
    let mut again = live(runtime, home.path()).with_saved_state(image);
    let report = run(&mut again, "print(open('done.txt').read())");
    assert_eq!(ok(&report), "x\n");
    let note = report.state_note.unwrap_or_default();
    assert!(!note.contains(".txt"), "no file was open: {note}");
}

#[test]
fn numpy_arrays_and_dataframes_survive_hibernation() {
    let runtime = common::data_sandbox();
    let home = common::scratch("anypath-state-data-");
    let dir = home.path().join("data");
    std::fs::create_dir_all(&dir).expect("session dir");
    let mut session = live(runtime, &dir);
    let built = run(&mut session, "import numpy as np, pandas as pd\na = np.arange(100_000, dtype='int64')\ndf = pd.DataFrame({'k': a % 7, 'v': a})\nrng = np.random.default_rng(5)\nprint(int(df.v.sum()))");
    assert_eq!(ok(&built), "4999950000\n");
    let image = hibernate(&mut session);
    let mut resumed = live(runtime, &dir).with_saved_state(image);
    let report = run(&mut resumed, "print(int(a[-1]), len(df), int(df.groupby('k').v.sum()[3]), type(rng).__name__)");
    assert_eq!(ok(&report), "99999 100000 714307143 Generator\n");
    assert_eq!(report.state, StateOrigin::Resumed, "{report:?}");
}

/// Once an instance has handed its state out as an image, a run that
/// starts without it back says the state was lost, and why: the image
/// never reached its keeper, or was never read back (a caller that went
/// away halfway), and the session must not look as if it held none.
#[test]
fn a_state_handed_out_and_never_handed_back_is_reported_lost() {
    let runtime = common::python_sessions();
    let home = common::scratch("anypath-state-away-");
    let mut session = live(runtime, home.path());
    ok(&run(&mut session, "x = 1\nopen('kept.txt', 'w').write('file')"));
    drop(hibernate(&mut session));
    let report = run(&mut session, "print(open('kept.txt').read(), 'x' in globals())");
    assert_eq!(ok(&report), "file False\n");
    assert_eq!((report.state, report.state_reset), (StateOrigin::Fresh, true), "{report:?}");
    let note = report.state_note.unwrap_or_default();
    assert!(note.contains("did not reach this run"), "the report says why: {note}");
    let next = run(&mut session, "x = 2\nprint(x)");
    assert_eq!((ok(&next), next.state_reset), ("2\n", false), "said once");

    // Handed back, it is resumed as it was.
    let image = hibernate(&mut session);
    session.resume_with(image);
    let report = run(&mut session, "print(x)");
    assert_eq!((ok(&report), report.state, report.state_reset), ("2\n", StateOrigin::Resumed, false), "{report:?}");
}

/// Sessions holding a function, an object, a list and a generator, under a
/// memory budget so small that every run hibernates others, while many
/// other sessions exist and are looked up all the time: each run's answer
/// arrives (one lost to the service would make a client's retry run the
/// code twice), every state reads back, and after a graceful restart every
/// session resumes as it was. Parameters: the scale at which the budget's
/// eviction order, read while sessions were touched, broke the sort (its
/// panic closed the connection of the run that asked).
#[test]
fn under_a_tight_memory_budget_every_run_answers_and_every_state_survives_a_restart() {
    const SESSIONS: usize = 200;
    const OTHER_SESSIONS: usize = 3000;
    const CLIENTS: usize = 8;
    const LOOKERS: usize = 8;
    let dir = tempfile::tempdir().expect("temp dir");
    let args = ["--session-memory-mb", "64", "--hibernate-after-idle-seconds", "2", "--max-concurrent", "8", "--queue-depth", "256"];
    let mut service = Service::start_with(dir.path(), &args);
    let client = || reqwest::blocking::Client::builder().timeout(Duration::from_secs(120)).build().expect("client");
    let opened = at_once(OTHER_SESSIONS, CLIENTS * 2, |i, http| {
        let body = serde_json::json!({"session_id": format!("other-{i}"), "runtime": "python"});
        send(http, &service.base, "/v1/sessions", &body).map(drop)
    });
    assert_eq!(opened, Vec::<String>::new(), "every other session opened");

    // Lookups touch sessions all the time, as clients polling them do.
    let looking = AtomicBool::new(true);
    let lost = std::thread::scope(|scope| {
        for looker in 0..LOOKERS {
            let (looking, base) = (&looking, &service.base);
            scope.spawn(move || {
                let http = client();
                let mut i = looker;
                while looking.load(Ordering::Relaxed) {
                    i = (i + 7919) % (SESSIONS + OTHER_SESSIONS);
                    let id = if i < SESSIONS { format!("s{i}") } else { format!("other-{}", i - SESSIONS) };
                    let _ = http.get(format!("{base}/v1/sessions/{id}")).header("x-api-key", "key-alice").send();
                }
            });
        }
        let mut lost = at_once(SESSIONS, CLIENTS, |i, http| checked_run(http, &service.base, i, &defining(i), 0));
        lost.extend(at_once(SESSIONS, CLIENTS, |i, http| {
            let i = (i * 7919) % SESSIONS;
            checked_run(http, &service.base, i, &reading(i, 1), 1)
        }));
        looking.store(false, Ordering::Relaxed);
        lost
    });
    assert_eq!(lost, Vec::<String>::new(), "every run answered and read its state back");
    assert!(service.process.log_lines().iter().all(|l| !l.contains("panicked")), "no task panicked");
    let stopped = service.process.terminate();
    assert!(stopped.success(), "a graceful stop exits cleanly: {stopped:?}");

    let service = Service::start_with(dir.path(), &args);
    let after = at_once(SESSIONS, CLIENTS, |i, http| {
        let i = (i * 104_729) % SESSIONS;
        checked_run(http, &service.base, i, &reading(i, 2), 2)
    });
    assert_eq!(after, Vec::<String>::new(), "every state resumed after the restart");
}

/// A session that expires while the service is down (its idle time runs
/// on across a restart, as it did for sessions read early before a stop of
/// 10,000 and late after it) is gone: the run that opens it again says its
/// state was lost and why, instead of reporting a fresh start as nothing.
#[test]
fn a_session_that_expires_across_a_restart_says_its_state_was_lost() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut service = Service::start(dir.path());
    let http = reqwest::blocking::Client::new();
    send(&http, &service.base, "/v1/sessions", &serde_json::json!({"session_id": "brief", "ttl_seconds": 2, "runtime": "python"})).expect("opened");
    checked_run(&http, &service.base, 0, &defining(0), 0).expect("defined in s0");
    send(&http, &service.base, "/v1/sessions/brief/run", &serde_json::json!({"code": "x = 1"})).expect("ran");
    assert!(service.process.terminate().success(), "a graceful stop");
    std::thread::sleep(Duration::from_millis(3100));

    let service = Service::start(dir.path());
    let bytes = send(&http, &service.base, "/v1/sessions/brief/run", &serde_json::json!({"code": "print('x' in globals())"})).expect("ran");
    let report: anypath_wire::RunReport = serde_json::from_slice(&bytes).expect("a run report");
    let cell = report.cell;
    assert_eq!((cell.output.stdout.as_str(), cell.state_reset), ("False\n", true), "{:?}", cell.state_note);
    assert!(cell.state_note.as_deref().is_some_and(|n| n.contains("expired")), "the report says why: {:?}", cell.state_note);
    checked_run(&http, &service.base, 0, &reading(0, 1), 1).expect("a session within its TTL resumes");
}

/// Runs `work(i, client)` for every `i` below `count` on `threads` threads;
/// the errors it returned.
fn at_once(count: usize, threads: usize, work: impl Fn(usize, &reqwest::blocking::Client) -> Result<(), String> + Sync) -> Vec<String> {
    let next = AtomicUsize::new(0);
    let errors = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                let http = reqwest::blocking::Client::builder().timeout(Duration::from_secs(120)).build().expect("client");
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= count {
                        break;
                    }
                    if let Err(error) = work(i, &http) {
                        errors.lock().expect("errors").push(error);
                    }
                }
            });
        }
    });
    errors.into_inner().expect("errors")
}

/// POSTs `body`; the answer's bytes. Retried only while admission asks to
/// (429, 503): a connection closed without an answer is an error.
fn send(http: &reqwest::blocking::Client, base: &str, path: &str, body: &serde_json::Value) -> Result<Vec<u8>, String> {
    for _ in 0..600 {
        let response = http.post(format!("{base}{path}")).header("x-api-key", "key-alice").json(body).send().map_err(|e| format!("{path}: no answer: {e}"))?;
        let status = response.status().as_u16();
        if status == 429 || status == 503 {
            std::thread::sleep(Duration::from_millis(100));
            continue;
        }
        let bytes = response.bytes().map_err(|e| format!("{path}: answer cut: {e}"))?.to_vec();
        return if status < 300 { Ok(bytes) } else { Err(format!("{path}: {status} {}", String::from_utf8_lossy(&bytes))) };
    }
    Err(format!("{path}: never admitted"))
}

/// Runs `code` in session `s{i}`: an error unless it ran cleanly (a lost
/// state must say `state_reset`, which is an error here too).
fn checked_run(http: &reqwest::blocking::Client, base: &str, i: usize, code: &str, round: usize) -> Result<(), String> {
    // `python`, whichever runtime the service defaults to: the scale is tuned to its instances.
    let bytes = send(http, base, &format!("/v1/sessions/s{i}/run"), &serde_json::json!({"code": code, "runtime": "python"}))?;
    let report: anypath_wire::RunReport = serde_json::from_slice(&bytes).map_err(|e| format!("s{i}: {e}"))?;
    let cell = report.cell;
    match (&cell.error, cell.state_reset) {
        (None, false) => Ok(()),
        (error, reset) => Err(format!("s{i} round {round}: {error:?}, state {:?}, state_reset {reset}, note {:?}", cell.state, cell.state_note)),
    }
}

/// A function, an object, a list and a generator advanced once.
fn defining(i: usize) -> String {
    format!(
        "def f(x):\n    return x * 2 + {i}\nclass O:\n    pass\no = O()\no.v = {i}\nitems = list(range({}))\ndef counting():\n    n = 0\n    while True:\n        yield n\n        n += 1\ng = counting()\nassert next(g) == 0\n",
        i % 37
    )
}

/// Checks what [`defining`] made; the generator yields `round` now.
fn reading(i: usize, round: usize) -> String {
    format!("assert f(1) == {}, 'f'\nassert o.v == {i}, 'o'\nassert items == list(range({})), 'items'\nassert next(g) == {round}, 'g'\n", 2 + i, i % 37)
}
