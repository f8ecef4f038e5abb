//! Session state that outlives its instance: a live instance's memory and
//! globals captured between runs, the instance dropped, and the state
//! restored into a fresh instance of the same component.
//!
//! Boundary: a state image is only ever restored into the runtime build it
//! was made from, and a damaged one is refused by its checksum.

use crate::common;

use anypath_sandbox::{CellReport, CellRequest, LimitOverrides, LiveInstance, SessionRuntime, StateOrigin};

fn live(runtime: &SessionRuntime, dir: &std::path::Path) -> LiveInstance {
    runtime.live_instance(Some(dir.to_path_buf()), &LimitOverrides::default())
}

fn run(instance: &mut LiveInstance, code: &str) -> CellReport {
    common::block_on(instance.run(CellRequest { code: code.into(), ..CellRequest::default() }))
}

fn ok(report: &CellReport) -> &str {
    assert_eq!((report.exit_code, &report.error), (0, &None), "{report:?}");
    &report.output.stdout
}

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
