//! Code-interpreter cells in a live instance: state that persists between
//! runs, the session directory at /mnt/data, and a trap that resets state
//! but keeps files. The instance is the only boundary here (no gate).

use crate::common;

use anypath_sandbox::{CellReport, CellRequest, LimitOverrides, LiveInstance};

fn live(dir: &std::path::Path) -> LiveInstance {
    common::python_sessions().live_instance(Some(dir.to_path_buf()), &LimitOverrides::default())
}

fn run(instance: &mut LiveInstance, code: &str) -> CellReport {
    common::block_on(instance.run(CellRequest { code: code.into(), ..CellRequest::default() }))
}

/// A fresh session directory, removed when the returned value is dropped.
fn temp_dir(name: &str) -> tempfile::TempDir {
    common::scratch(&format!("anypath-cells-{name}-"))
}

#[test]
fn variables_imports_and_functions_survive_between_runs() {
    let dir = temp_dir("state");
    let mut session = live(dir.path());
    let first = run(&mut session, "import statistics\nx = 41\ndef double(v):\n    return v * 2\nprint('defined')");
    assert_eq!((first.exit_code, first.output.stdout.as_str(), first.state_reset), (0, "defined\n", false), "{first:?}");
    let second = run(&mut session, "print(double(x + 1), statistics.mean([1, 2, 3]))");
    assert_eq!(second.output.stdout, "84 2\n", "{second:?}");
    assert!(second.metrics.warm, "the second run reuses the live instance");
    let other_dir = temp_dir("state-other");
    let mut other = live(other_dir.path());
    let isolated = run(&mut other, "print(x)");
    assert_eq!(isolated.error.as_ref().map(|e| e.kind()), Some("exception"), "two sessions never share state");
    assert!(isolated.traceback.as_deref().unwrap_or("").contains("NameError"), "{isolated:?}");
}

/// As in Jupyter and plain Python run from a folder, on both runtimes: a
/// module a cell wrote next to the code imports in the next cell, one
/// written into `src/` between cells (an upload) imports too, a module a
/// later cell rewrote is what `importlib.reload` gives, and no compiled
/// copy lands among the session's files.
#[test]
fn a_module_next_to_the_code_imports_on_both_runtimes() {
    for (name, runtime) in [("python", common::python_sessions()), ("python-data", common::data_sandbox())] {
        let tmp = temp_dir(&format!("modules-{name}"));
        let dir = tmp.path();
        let mut session = runtime.live_instance(Some(dir.to_path_buf()), &LimitOverrides::default());
        let wrote = run(&mut session, "open('calc.py', 'w').write('def add(a, b):\\n    return a + b\\n')");
        assert_eq!(wrote.exit_code, 0, "{name}: {wrote:?}");
        let imported = run(&mut session, "from calc import add\nprint(add(2, 3))");
        assert_eq!((imported.exit_code, imported.output.stdout.as_str()), (0, "5\n"), "{name}: {imported:?}");
        std::fs::create_dir_all(dir.join("src")).expect("src");
        std::fs::write(dir.join("src/helpers.py"), "NAME = 'from src'\n").expect("an upload");
        let from_src = run(&mut session, "import helpers\nprint(helpers.NAME)");
        assert_eq!(from_src.output.stdout, "from src\n", "{name}: {from_src:?}");
        let rewritten = run(&mut session, "open('calc.py', 'w').write('def add(a, b):\\n    return a + b + 100\\n')\nimport importlib, calc\nimportlib.reload(calc)\nprint(calc.add(2, 3))");
        assert_eq!(rewritten.output.stdout, "105\n", "{name}: {rewritten:?}");
        assert!(!dir.join("__pycache__").exists(), "{name}: no compiled copy among the session's files");
    }
}

#[test]
fn the_session_directory_is_the_working_directory() {
    let tmp = temp_dir("files");
    let dir = tmp.path();
    std::fs::write(dir.join("in.csv"), "region,amount\nnorth,3\nsouth,4\nnorth,5\n").expect("upload");
    let mut session = live(dir);
    let code = "import csv, os\nrows = list(csv.DictReader(open('in.csv')))\ntotal = sum(int(r['amount']) for r in rows if r['region'] == 'north')\nopen('out.txt', 'w').write(str(total))\nprint(os.getcwd(), total)";
    let report = run(&mut session, code);
    assert_eq!(report.output.stdout, "/mnt/data 8\n", "{report:?}");
    assert_eq!(std::fs::read_to_string(dir.join("out.txt")).expect("written by the code"), "8");
}

/// Boundary: the WebAssembly instance's WASI context. Code without a gate
/// reaches no host file outside its directory, no network and no host
/// environment.
#[test]
fn code_reaches_nothing_outside_its_directory() {
    let dir = temp_dir("escape");
    let mut session = live(dir.path());
    for (code, what) in [
        ("open('/etc/passwd').read()", "an absolute host path"),
        ("open('../../etc/passwd').read()", "a relative path upward"),
        ("open('/mnt/data/../../etc/hostname').read()", "dot-dot from the session directory"),
        ("import os\nos.listdir('/proc/self')", "/proc"),
        ("import os\nos.symlink('/etc/passwd', 'link')\nopen('link').read()", "a symlink it made"),
        ("import socket\nsocket.create_connection(('127.0.0.1', 22))", "a socket"),
        ("import urllib.request\nurllib.request.urlopen('http://127.0.0.1:1/')", "urllib"),
        ("import http.client\nhttp.client.HTTPConnection('127.0.0.1', 1).request('GET', '/')", "http.client"),
    ] {
        let report = run(&mut session, code);
        assert_ne!(report.exit_code, 0, "{what}: {report:?}");
        // The module is there; the instance refuses the access itself.
        assert!(!report.traceback.as_deref().unwrap_or("").contains("ModuleNotFoundError"), "{what}: {report:?}");
    }
    let env = run(&mut session, "import os\nprint(sorted(os.environ))");
    assert_eq!(env.output.stdout, "[]\n", "no host environment: {env:?}");
    let passed = common::block_on(session.run(CellRequest {
        code: "import os\nprint(os.environ['MODE'])".into(),
        env: vec![("MODE".into(), "test".into())],
        ..CellRequest::default()
    }));
    assert_eq!(passed.output.stdout, "test\n");
}

#[test]
fn a_fuel_bomb_resets_state_and_keeps_files() {
    let dir = temp_dir("reset");
    let mut session = live(dir.path());
    run(&mut session, "kept = 1\nopen('notes.txt', 'w').write('still here')");
    let bomb = common::block_on(session.run(CellRequest {
        code: "while True:\n    pass".into(),
        limits: LimitOverrides { fuel: Some(200_000_000), ..LimitOverrides::default() },
        ..CellRequest::default()
    }));
    assert_eq!(bomb.error.as_ref().map(|e| e.kind()), Some("fuel_exhausted"), "{bomb:?}");
    assert!(bomb.state_reset);
    let after = run(&mut session, "print(open('notes.txt').read(), 'kept' in globals())");
    assert_eq!((after.output.stdout.as_str(), after.state_reset), ("still here False\n", true), "{after:?}");
    let next = run(&mut session, "print(1)");
    assert!(!next.state_reset, "only the first run after the trap reports the reset");
}

#[test]
fn the_usual_standard_library_is_there() {
    let dir = temp_dir("stdlib");
    let mut session = live(dir.path());
    let code = "import cell_stdlib\nmissing = [m for m in ('csv', 'json', 'statistics', 'pathlib', 'io', 'zipfile', 're', 'datetime', 'decimal', 'random') if m not in cell_stdlib.AVAILABLE]\nprint(missing, len(cell_stdlib.AVAILABLE), sorted(set(cell_stdlib.MODULES) - set(cell_stdlib.AVAILABLE)))";
    let report = run(&mut session, code);
    assert!(report.output.stdout.starts_with("[] "), "{report:?}");
    eprintln!("{}", report.output.stdout);
}

/// Boundary: the per-run limits hold in a live instance too, and the session
/// keeps serving after each breach.
#[test]
fn output_floods_and_memory_bombs_are_cut_and_the_session_recovers() {
    let dir = temp_dir("abuse");
    let mut session = live(dir.path());
    let flood = run(&mut session, "print('x' * 10_000_000)");
    assert!(flood.output.stdout_truncated, "{:?}", flood.error);
    let bomb = common::block_on(session.run(CellRequest {
        code: "blocks = []\nwhile True:\n    blocks.append(bytearray(8 << 20))".into(),
        limits: LimitOverrides { memory_bytes: Some(96 << 20), ..LimitOverrides::default() },
        ..CellRequest::default()
    }));
    assert_eq!(bomb.error.as_ref().map(|e| e.kind()), Some("memory_limit"), "{bomb:?}");
    assert!(bomb.state_reset);
    let after = run(&mut session, "print('alive')");
    assert_eq!(after.output.stdout, "alive\n");
}

/// Live instances bounded by memory: past the budget the least recently
/// used idle session is hibernated; its next run resumes its state and
/// finds its files.
#[test]
fn the_least_recently_used_session_is_hibernated_and_resumes_with_its_state() {
    use anypath_interpreter::{Interpreter, InterpreterConfig, RunRequest, StateOrigin};
    let dir = temp_dir("lru");
    let mut config = InterpreterConfig::new(dir.path());
    // Room for two live instances of the default runtime, not three: the
    // budget counts what each holds of its own, measured here first.
    config.session_memory_bytes = one_session_bytes() * 5 / 2;
    let interpreter = std::sync::Arc::new(Interpreter::new(vec![common::python_sessions().clone()], config).expect("interpreter"));
    let run_in = |session: &str, code: &str| {
        common::block_on(interpreter.runs().run_python("t", session, RunRequest { code: code.into(), ..RunRequest::default() }, "http://127.0.0.1:3001")).expect("run")
    };
    run_in("s1", "v = 1\nopen('f.txt', 'w').write('one')");
    run_in("s2", "v = 2");
    run_in("s3", "v = 3");
    assert_eq!(interpreter.live_count(), 2);
    assert!(interpreter.sessions().info("t", "s1").expect("s1").hibernated, "the least recently used session was hibernated");
    let first = run_in("s1", "print(open('f.txt').read(), v)");
    assert_eq!((first.cell.output.stdout.as_str(), first.cell.state_reset, first.cell.state), ("one 1\n", false, StateOrigin::Resumed), "{first:?}");
    let third = run_in("s3", "print(v)");
    assert_eq!(third.cell.output.stdout, "3\n", "a recently used session kept its state");
}

/// What one live `python` session holding a variable costs: the pages
/// its instance made its own, as the interpreter measures them.
fn one_session_bytes() -> u64 {
    use anypath_interpreter::{Interpreter, InterpreterConfig, RunRequest};
    let dir = temp_dir("one-session");
    let interpreter = std::sync::Arc::new(Interpreter::new(vec![common::python_sessions().clone()], InterpreterConfig::new(dir.path())).expect("interpreter"));
    let report =
        common::block_on(interpreter.runs().run_python("t", "s", RunRequest { code: "v = 1".into(), ..RunRequest::default() }, "http://127.0.0.1:3001"))
            .expect("run");
    assert_eq!(report.cell.exit_code, 0, "{report:?}");
    let stats = interpreter.stats();
    assert_eq!(stats.sessions_live, 1);
    stats.sessions_live_bytes
}

/// The budget counts the pages each live instance made its own, not its
/// linear memory (nearly all of it the runtime's image, shared by every
/// instance): a budget of fewer linear memories than sessions keeps them all
/// live; and a session that really grows pushes the others out.
#[test]
fn the_budget_counts_real_memory_and_a_growing_session_still_pushes_others_out() {
    use anypath_interpreter::{Interpreter, InterpreterConfig, RunRequest};
    const SMALL: u64 = 16;
    let dir = temp_dir("real-bytes");
    let mut config = InterpreterConfig::new(dir.path());
    let one = one_session_bytes();
    let run_in = |interpreter: &std::sync::Arc<Interpreter>, session: &str, code: &str| {
        let report =
            common::block_on(interpreter.runs().run_python("t", session, RunRequest { code: code.into(), ..RunRequest::default() }, "http://127.0.0.1:3001"))
                .expect("run");
        assert_eq!(report.cell.exit_code, 0, "{report:?}");
        report
    };
    // A session's linear memory: what the budget counted per session before.
    let mut probe = common::python_sessions().live_instance(None, &anypath_sandbox::LimitOverrides::default());
    let ran = common::block_on(probe.run(anypath_sandbox::CellRequest { code: "v = 1".into(), ..Default::default() }));
    assert_eq!(ran.error, None);
    let linear = probe.memory_bytes();
    drop(probe);
    assert!(one * 4 <= linear, "a live session holds {one} bytes of its own: far less than its linear memory's {linear}");
    let budget = one * (SMALL + SMALL / 2);
    assert!(budget < SMALL * linear / 2, "{SMALL} sessions' real bytes fit where half as many linear memories do not");
    config.session_memory_bytes = budget;
    let interpreter = std::sync::Arc::new(Interpreter::new(vec![common::python_sessions().clone()], config).expect("interpreter"));
    for i in 0..SMALL {
        run_in(&interpreter, &format!("s{i}"), &format!("v = {i}"));
    }
    let stats = interpreter.stats();
    assert_eq!(stats.sessions_live, SMALL, "every small session fits the budget ({one} bytes each): {stats:?}");
    assert!(stats.sessions_live_bytes <= budget, "{stats:?}");
    // One session writes the whole budget's worth of pages.
    run_in(&interpreter, "big", &format!("blob = b'x' * {budget}"));
    let stats = interpreter.stats();
    assert!(stats.sessions_hibernated >= SMALL, "every idle session was pushed out for the one that grew: {stats:?}");
    assert!(interpreter.sessions().info("t", "big").expect("big").memory_bytes >= budget, "the big session counts what it wrote");
    let back = run_in(&interpreter, "s0", "print(v)");
    assert_eq!((back.cell.output.stdout.as_str(), back.cell.state_reset), ("0\n", false), "{back:?}");
}

/// Runs `code` in session `session` of tenant `t`, asserts it exited 0,
/// and returns its stdout.
fn run_ok(interpreter: &std::sync::Arc<anypath_interpreter::Interpreter>, session: &str, code: &str) -> String {
    let request = anypath_interpreter::RunRequest { code: code.into(), ..Default::default() };
    let report = common::block_on(interpreter.runs().run_python("t", session, request, "http://127.0.0.1:3001")).expect("run");
    assert_eq!(report.cell.exit_code, 0, "{report:?}");
    report.cell.output.stdout
}

/// A fork captures the parent's state once and the parent keeps that image
/// for the next fork of the same state: host memory the budget counts as
/// the parent's until its next run drops it.
#[test]
fn a_forks_held_image_counts_toward_the_budget_until_the_parent_runs_again() {
    use anypath_interpreter::{Interpreter, InterpreterConfig};
    const STATE: u64 = 8 << 20;
    let dir = temp_dir("held-image");
    let interpreter = std::sync::Arc::new(Interpreter::new(vec![common::python_sessions().clone()], InterpreterConfig::new(dir.path())).expect("interpreter"));
    let run_in = |session: &str, code: &str| drop(run_ok(&interpreter, session, code));
    let counted = |session: &str| interpreter.sessions().info("t", session).expect("info").memory_bytes;
    // Random bytes: the image cannot compress them away.
    run_in("parent", &format!("import os\nblob = os.urandom({STATE})"));
    let before = counted("parent");
    common::block_on(interpreter.sessions().fork("t", "parent", "child")).expect("fork");
    let holding = counted("parent");
    // (Less an eighth: pages the runs left as the image had them may be
    // given back meanwhile.)
    assert!(holding >= before + STATE * 7 / 8, "the parent holds its {STATE}-byte state's image after the fork: counted {before} before, {holding} after");
    run_in("parent", "x = 1");
    let after = counted("parent");
    assert!(after < before + STATE / 2, "the next run dropped the image, and the count with it: {before} before the fork, {after} now");
    run_in("child", &format!("assert len(blob) == {STATE}"));
}

/// The image a state's first fork was given stays in the parent's home as
/// its fork source: a later fork of the same state links to it (one inode,
/// no bytes written again) even after every earlier child resumed and
/// dropped its own, and a fork of a changed state is given a new one.
#[test]
fn forks_of_one_state_link_to_one_stored_image_after_their_siblings_resumed() {
    use anypath_interpreter::{Interpreter, InterpreterConfig};
    use std::os::unix::fs::MetadataExt;
    let dir = temp_dir("fork-source");
    let interpreter = std::sync::Arc::new(Interpreter::new(vec![common::python_sessions().clone()], InterpreterConfig::new(dir.path())).expect("interpreter"));
    let run_in = |session: &str, code: &str| run_ok(&interpreter, session, code);
    let sessions = dir.path().join("sessions/t");
    let inode = |path: std::path::PathBuf| std::fs::metadata(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())).ino();
    run_in("parent", "x = 'first'");
    common::block_on(interpreter.sessions().fork("t", "parent", "a")).expect("fork a");
    assert_eq!(run_in("a", "print(x)"), "first\n");
    assert!(!sessions.join("a/state.img").exists(), "the resumed child dropped its image");
    common::block_on(interpreter.sessions().fork("t", "parent", "b")).expect("fork b");
    let source = inode(sessions.join("parent/fork-source.img"));
    assert_eq!(inode(sessions.join("b/state.img")), source, "the second fork links to the parent's fork source");
    assert_eq!(run_in("b", "print(x)"), "first\n");
    run_in("parent", "x = 'second'");
    common::block_on(interpreter.sessions().fork("t", "parent", "c")).expect("fork c");
    assert_ne!(inode(sessions.join("c/state.img")), source, "a changed state is stored anew");
    assert_eq!(inode(sessions.join("parent/fork-source.img")), inode(sessions.join("c/state.img")), "and becomes the fork source");
    common::block_on(interpreter.sessions().fork("t", "parent", "d")).expect("fork d");
    assert_eq!(run_in("d", "print(x)"), "second\n");
    assert_eq!(run_in("c", "print(x)"), "second\n");
}

/// Pages a run wrote and then left as the runtime's image had them (a
/// buffer zeroed again, a count raised and dropped) are given back between
/// runs, on both runtimes: what the instance holds of its own falls by
/// them, and its memory reads exactly as before: the variables, a
/// buffer's bytes, a DataFrame.
#[test]
fn pages_written_back_to_the_images_bytes_are_given_back_and_the_state_is_intact() {
    const BUFFER: u64 = 4 << 20;
    let set_up = format!(
        "import hashlib\nb = bytearray({BUFFER})\nfor i in range(0, len(b), 4096): b[i] = 1\nfor i in range(0, len(b), 4096): b[i] = 0\nx = 41\ndigest = hashlib.sha256(bytes(range(256)) * 64).hexdigest()"
    );
    let check = "print(sum(b), len(b), x + 1, digest == hashlib.sha256(bytes(range(256)) * 64).hexdigest())";
    for (runtime, extra_set_up, extra_check, extra_out) in [
        (common::python_sessions(), "", "", ""),
        (common::data_sandbox(), "\nimport pandas as pd\ndf = pd.DataFrame({'k': [1, 2, 3], 'v': [0.5, 1.5, 2.5]})", "\nprint(df.v.sum(), list(df.k))", "4.5 [1, 2, 3]\n"),
    ] {
        let dir = temp_dir("give-back");
        let mut session = runtime.live_instance(Some(dir.path().to_path_buf()), &LimitOverrides::default());
        let ran = run(&mut session, &format!("{set_up}{extra_set_up}"));
        assert_eq!(ran.error, None, "{ran:?}");
        let regions = common::block_on(session.memory_regions()).expect("the memories' places");
        let before = regions.private_bytes();
        let given = common::block_on(session.give_back_unchanged_pages());
        let after = regions.private_bytes();
        assert!(given >= BUFFER, "the zeroed buffer's pages were given back: {given} bytes");
        assert!(after + BUFFER <= before, "the instance's own bytes fell by them: {before} before, {after} after");
        let checked = run(&mut session, &format!("{check}{extra_check}"));
        assert_eq!((checked.output.stdout.as_str(), checked.state_reset), (format!("0 {BUFFER} 42 True\n{extra_out}").as_str(), false), "{checked:?}");
    }
}

/// A fork receives its parent's state, so it never takes one of the
/// instances started ahead for new sessions: its state would replace that
/// instance, and the pool would start another for nothing (which cost
/// each of a hundred forks about a millisecond). A new session still takes
/// one, and each fork comes back with the parent's variables.
#[test]
fn forks_leave_the_instances_started_ahead_to_new_sessions() {
    use anypath_interpreter::{Interpreter, InterpreterConfig, RunRequest};
    let dir = temp_dir("forks-ahead");
    let interpreter = std::sync::Arc::new(Interpreter::new(vec![common::python_sessions().clone()], InterpreterConfig::new(dir.path())).expect("interpreter"));
    let run_in = |session: &str, code: &str| {
        common::block_on(interpreter.runs().run_python("t", session, RunRequest { code: code.into(), ..RunRequest::default() }, "http://127.0.0.1:3001"))
            .expect("run")
    };
    let ready = dir.path().join("ready-sessions");
    let waiting = || std::fs::read_dir(&ready).map_or(0, |entries| entries.count());
    let wait_for_two = || {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while waiting() < 2 {
            assert!(std::time::Instant::now() < deadline, "the pool never made two homes ahead");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    };
    // The first new session starts the pool's refill.
    assert_eq!(run_in("parent", "x = 7").cell.exit_code, 0);
    wait_for_two();
    let ahead = interpreter.stats().sessions_started_ahead;
    assert_eq!(run_in("new", "pass").cell.exit_code, 0);
    assert_eq!(interpreter.stats().sessions_started_ahead, ahead + 1, "a new session takes an instance started ahead");
    wait_for_two();
    for i in 0..3 {
        common::block_on(interpreter.sessions().fork("t", "parent", &format!("child-{i}"))).expect("fork");
    }
    assert_eq!(interpreter.stats().sessions_started_ahead, ahead + 1, "no fork took an instance started ahead");
    assert_eq!(waiting(), 2, "both homes made ahead still wait");
    for i in 0..3 {
        let report = run_in(&format!("child-{i}"), "print(x)");
        assert_eq!((report.cell.output.stdout.as_str(), report.cell.state_reset), ("7\n", false), "{report:?}");
    }
}

/// Many more sessions than fit in memory at once: each keeps its variable
/// through hibernation, read back in a shuffled order, none reset.
#[test]
fn two_hundred_sessions_each_keep_their_variable_under_a_small_memory_budget() {
    use anypath_interpreter::{Interpreter, InterpreterConfig, RunRequest};
    let dir = temp_dir("many");
    let mut config = InterpreterConfig::new(dir.path());
    // About a tenth of the sessions' real memory together.
    config.session_memory_bytes = one_session_bytes() * 20;
    let interpreter = std::sync::Arc::new(Interpreter::new(vec![common::python_sessions().clone()], config).expect("interpreter"));
    let run_in = |session: &str, code: &str| {
        common::block_on(interpreter.runs().run_python("t", session, RunRequest { code: code.into(), ..RunRequest::default() }, "http://127.0.0.1:3001")).expect("run")
    };
    const SESSIONS: usize = 200;
    for i in 0..SESSIONS {
        let report = run_in(&format!("s{i}"), &format!("x = {i}"));
        assert_eq!(report.cell.exit_code, 0, "{report:?}");
    }
    assert!(interpreter.live_count() < SESSIONS / 4, "most sessions are hibernated: {} live", interpreter.live_count());
    // 73 is coprime with 200: every session once, in a scattered order.
    for step in 0..SESSIONS {
        let i = (step * 73 + 11) % SESSIONS;
        let report = run_in(&format!("s{i}"), "print(x)");
        assert_eq!((report.cell.output.stdout.clone(), report.cell.state_reset), (format!("{i}\n"), false), "session s{i}: {report:?}");
    }
}

/// A state image is the tenant's data: it counts toward the session's
/// quota, and one that does not fit is not kept; the next run says why.
#[test]
fn a_state_image_that_does_not_fit_the_quota_is_not_kept() {
    use anypath_interpreter::{Interpreter, InterpreterConfig, RunRequest};
    let dir = temp_dir("image-quota");
    let mut config = InterpreterConfig::new(dir.path());
    config.quota.max_session_bytes = 1 << 20;
    let interpreter = std::sync::Arc::new(Interpreter::new(vec![common::python_sessions().clone()], config).expect("interpreter"));
    let run_in = |code: &str| {
        common::block_on(interpreter.runs().run_python("t", "big", RunRequest { code: code.into(), ..RunRequest::default() }, "http://127.0.0.1:3001")).expect("run")
    };
    // Random bytes do not compress: the image is larger than the quota.
    assert_eq!(run_in("import os\nblob = os.urandom(3 << 20)").cell.exit_code, 0);
    assert_eq!(common::block_on(interpreter.hibernation().hibernate_all()), 0, "the image was not kept");
    assert!(!dir.path().join("sessions/t/big/state.img").exists());
    let after = run_in("print('blob' in globals())");
    assert_eq!((after.cell.output.stdout.as_str(), after.cell.state_reset), ("False\n", true), "{after:?}");
    let note = after.cell.state_note.unwrap_or_default();
    assert!(note.contains("quota") || note.contains("exceed"), "the report says why: {note}");
}

// Notebook semantics: what a cell shows besides what it prints.

fn results(report: &CellReport) -> Vec<(anypath_wire::ResultOrigin, String)> {
    report.results.iter().map(|r| (r.origin, r.text.clone())).collect()
}

#[test]
fn the_last_expression_is_a_result_unless_a_semicolon_hides_it() {
    use anypath_wire::ResultOrigin::Value;
    let dir = temp_dir("last-expression");
    let mut session = live(dir.path());
    let shown = run(&mut session, "x = 41\nx + 1");
    assert_eq!(results(&shown), vec![(Value, "42".to_owned())], "{shown:?}");
    assert_eq!(shown.results[0].mime.get("text/plain").map(String::as_str), Some("42"));
    assert_eq!(shown.results[0].kind, anypath_wire::ResultKind::Text);
    let hidden = run(&mut session, "x;  # a notebook hides this");
    assert!(hidden.results.is_empty(), "{hidden:?}");
    let none = run(&mut session, "print('p')\nNone");
    assert!(none.results.is_empty() && none.output.stdout == "p\n", "{none:?}");
    // `_` holds the last value shown, as in a notebook.
    let underscore = run(&mut session, "_ * 2");
    assert_eq!(results(&underscore), vec![(Value, "84".to_owned())], "{underscore:?}");
    let statement = run(&mut session, "y = 1");
    assert!(statement.results.is_empty(), "{statement:?}");
}

#[test]
fn display_calls_are_results_in_order_and_rich_forms_come_along() {
    use anypath_wire::ResultOrigin::{Display, Value};
    let dir = temp_dir("display");
    let mut session = live(dir.path());
    let code = "class Table:\n    def __repr__(self):\n        return 'Table()'\n    def _repr_html_(self):\n        return '<table></table>'\n    def _repr_markdown_(self):\n        return '| a |'\ndisplay(1, 'two')\nprint('between')\ndisplay(Table())\n'last'";
    let report = run(&mut session, code);
    assert_eq!(report.exit_code, 0, "{report:?}");
    assert_eq!(
        results(&report),
        vec![(Display, "1".into()), (Display, "'two'".into()), (Display, "Table()".into()), (Value, "'last'".into())],
        "{report:?}"
    );
    let table = &report.results[2].mime;
    assert_eq!((table.get("text/html").map(String::as_str), table.get("text/markdown").map(String::as_str)), (Some("<table></table>"), Some("| a |")));
}

#[test]
fn a_repr_that_raises_is_reported_and_the_run_goes_on() {
    let dir = temp_dir("bad-repr");
    let mut session = live(dir.path());
    let code = "class Broken:\n    def __repr__(self):\n        raise ValueError('no repr')\n    def _repr_html_(self):\n        raise KeyError('no html')\nBroken()";
    let report = run(&mut session, code);
    assert_eq!((report.exit_code, report.error.is_none()), (0, true), "{report:?}");
    let [result] = report.results.as_slice() else { panic!("one result: {report:?}") };
    let error = result.error.as_deref().unwrap_or_default();
    assert!(error.contains("ValueError: no repr") && error.contains("KeyError"), "{result:?}");
    assert!(result.text.contains("Broken") && !result.mime.contains_key("text/html"), "{result:?}");
    assert_eq!(run(&mut session, "print('still here')").output.stdout, "still here\n");
}

#[test]
fn a_huge_repr_is_cut_to_the_output_cap_and_flagged() {
    let dir = temp_dir("huge-repr");
    let mut session = live(dir.path());
    let limits = LimitOverrides { stdout_bytes: Some(1000), ..LimitOverrides::default() };
    let report = common::block_on(session.run(CellRequest { code: "'x' * 10_000_000".into(), limits, ..CellRequest::default() }));
    let [result] = report.results.as_slice() else { panic!("one result: {report:?}") };
    assert!(result.truncated && result.text.len() <= 1000 && result.text.starts_with("'xxx"), "{} bytes", result.text.len());
    // The results' own cap: several large values share it.
    let limits = LimitOverrides { result_bytes: Some(3000), ..LimitOverrides::default() };
    let report = common::block_on(session.run(CellRequest { code: "for _ in range(5): display('y' * 1000)".into(), limits, ..CellRequest::default() }));
    let total: usize = report.results.iter().map(|r| r.text.len()).sum();
    assert!(total <= 3000 && report.results.iter().any(|r| r.truncated), "{total} bytes in {} results", report.results.len());
}

#[test]
fn top_level_await_runs_on_the_sessions_loop() {
    let dir = temp_dir("await");
    let mut session = live(dir.path());
    let code = "import asyncio\nasync def twice(v):\n    await asyncio.sleep(0.01)\n    return 2 * v\nawait asyncio.sleep(0)\nvalues = await asyncio.gather(twice(1), twice(2))\nvalues";
    let report = run(&mut session, code);
    assert_eq!((report.exit_code, results(&report)), (0, vec![(anypath_wire::ResultOrigin::Value, "[2, 4]".to_owned())]), "{report:?}");
    // A wait on something nothing will finish is an error, not a hang.
    let stuck = run(&mut session, "await asyncio.get_event_loop().create_future()");
    assert!(stuck.error.is_some() && stuck.traceback.as_deref().unwrap_or_default().contains("nothing will ever finish"), "{stuck:?}");
    assert_eq!(run(&mut session, "print(values)").output.stdout, "[2, 4]\n");
}

#[test]
fn magics_are_refused_with_the_python_to_write_instead() {
    let dir = temp_dir("magics");
    let mut session = live(dir.path());
    for (code, wanted) in [
        ("%pip install requests", "packages cannot be installed; these are available:"),
        ("%timeit sum(range(10))", "timeit"),
        ("!ls", "shell commands cannot run"),
        ("import os\n%cd /tmp", "os.chdir"),
    ] {
        let report = run(&mut session, code);
        let Some(anypath_wire::ExecError::Exception { type_name, message, .. }) = &report.error else { panic!("{code}: {report:?}") };
        assert_eq!(type_name, "UnsupportedMagic", "{code}: {report:?}");
        assert!(message.contains(wanted), "{code}: {message}");
    }
}
