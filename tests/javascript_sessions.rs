//! JavaScript sessions on the runtime's own live instances: a REPL's live
//! state from cell to cell, results, output and errors as the Python
//! runtime reports them, the session's files, the limits, and the state
//! hibernated, resumed and shared copy-on-write with a fork's children.
//!
//! Boundaries these attack: the instance's files are the session's tree
//! and nothing above it (`fs` over WASI preopens); a cell cannot reach the
//! host through the engine (`eval`, `Function`, prototype pollution of the
//! objects the runtime reports through); fuel, time, memory and output caps
//! stop a cell that would run, grow or print without end; a fork's child
//! never sees its siblings' or its parent's later writes.

use std::sync::Arc;

use crate::common;

use anypath_sandbox::{CellReport, CellRequest, ExecError, LimitOverrides, LiveInstance, StateOrigin};
use common::cells::{live, ok, run};

fn js() -> &'static anypath_sandbox::SessionRuntime {
    common::javascript_sessions()
}

/// The text of the cell's value (its `text/plain`).
fn value(report: &CellReport) -> String {
    assert_eq!((report.exit_code, &report.error), (0, &None), "{report:?}");
    let result = report.results.first().unwrap_or_else(|| panic!("no result: {report:?}"));
    result.mime.get("text/plain").cloned().unwrap_or_default()
}

/// The exception a cell raised: its name and message.
fn raised(report: &CellReport) -> (String, String) {
    match &report.error {
        Some(ExecError::Exception { type_name, message, .. }) => (type_name.clone(), message.clone()),
        other => panic!("expected an exception, got {other:?} in {report:?}"),
    }
}

#[test]
fn top_level_declarations_persist_and_the_last_value_is_the_result() {
    let home = common::scratch("anypath-js-repl-");
    let mut session = live(js(), home.path());
    let first = run(&mut session, "let x = 40; const y = 1; var v = 3; function add(a, b) { return a + b } class Point { constructor(x) { this.x = x } }\nx + 2");
    assert_eq!(value(&first), "42");
    assert_eq!(value(&run(&mut session, "add(x, y) + v + new Point(5).x")), "49");
    let object = run(&mut session, "({ name: 'ada', tags: ['a', 'b'], nested: { n: 1 } })");
    assert_eq!(value(&object), "{ name: 'ada', tags: [ 'a', 'b' ], nested: { n: 1 } }");
    let json = object.results[0].mime.get("application/json").expect("an object's JSON");
    assert_eq!(serde_json::from_str::<serde_json::Value>(json).ok(), Some(serde_json::json!({ "name": "ada", "tags": ["a", "b"], "nested": { "n": 1 } })));
    assert_eq!(value(&run(&mut session, "'text'")), "'text'");
    let nothing = run(&mut session, "let unused = 1;");
    assert!(nothing.results.is_empty(), "a declaration has no value: {nothing:?}");
    assert_eq!(value(&run(&mut session, "let later = await new Promise(r => setTimeout(() => r(7), 5)); later * 6")), "42");
    assert_eq!(value(&run(&mut session, "later")), "7");
}

#[test]
fn console_output_errors_and_the_state_after_an_error() {
    let home = common::scratch("anypath-js-console-");
    let mut session = live(js(), home.path());
    let printed = run(&mut session, "console.log('hi', 1, { a: [1, 2] }); console.error('oops'); const kept = 5;");
    assert_eq!(ok(&printed), "hi 1 { a: [ 1, 2 ] }\n");
    assert_eq!(printed.output.stderr, "oops\n");

    let thrown = run(&mut session, "function deep() { throw new TypeError('bad input') }\ndeep()");
    assert_eq!(raised(&thrown), ("TypeError".to_owned(), "bad input".to_owned()));
    assert_eq!(thrown.exit_code, 1);
    let traceback = thrown.traceback.clone().unwrap_or_default();
    assert!(traceback.contains("TypeError: bad input") && traceback.contains("deep"), "the stack names the function: {traceback}");
    assert_eq!(raised(&run(&mut session, "missing + 1")).0, "ReferenceError");
    assert_eq!(raised(&run(&mut session, "let = = 2")).0, "SyntaxError");
    assert_eq!(raised(&run(&mut session, "await Promise.reject(new RangeError('no'))")), ("RangeError".to_owned(), "no".to_owned()));
    let report = run(&mut session, "kept");
    assert_eq!((value(&report), report.state), ("5".to_owned(), StateOrigin::Kept), "an error keeps the state");
}

#[test]
fn files_are_the_sessions_tree_and_nothing_above_it() {
    let home = common::scratch("anypath-js-files-");
    std::fs::write(home.path().join("in.txt"), "from the host").expect("seeded");
    let mut session = live(js(), home.path());
    let read = run(&mut session, "const fs = require('fs'); fs.writeFileSync('out.json', JSON.stringify({ n: 1 })); fs.readFileSync('in.txt', 'utf8')");
    assert_eq!(value(&read), "'from the host'");
    assert_eq!(std::fs::read_to_string(home.path().join("out.json")).ok().as_deref(), Some(r#"{"n":1}"#));
    assert_eq!(value(&run(&mut session, "require('fs').readdirSync('.').sort().join(',')")), "'in.txt,out.json'");
    // Boundary: the session's tree. Above it there is nothing to read.
    for escape in ["/etc/passwd", "../../../../etc/passwd", "/proc/self/environ", "/mnt/data/../../etc/hostname"] {
        let report = run(&mut session, &format!("require('fs').readFileSync({escape:?}, 'utf8')"));
        let (name, message) = raised(&report);
        assert_eq!(name, "Error", "{escape}: {report:?}");
        assert!(message.starts_with("ENOENT") || message.starts_with("EPERM") || message.starts_with("EACCES") || message.starts_with("ENOTCAPABLE"), "{escape}: {message}");
    }
    let kinds = run(&mut session, "const st = require('fs').statSync('in.txt'); [st.isFile(), st.isDirectory(), st.size, require('fs').readdirSync('.', { withFileTypes: true }).map((d) => `${d.name}:${d.isFile()}`).sort().join(',')]");
    assert_eq!(value(&kinds), "[ true, false, 13, 'in.txt:true,out.json:true' ]");
    let missing = run(&mut session, "try { require('fs').readFileSync('nope.txt') } catch (e) { e.code }");
    assert_eq!(value(&missing), "'ENOENT'");
    assert_eq!(raised(&run(&mut session, "require('child_process')")).1, "Cannot find module 'child_process'");
}

#[test]
fn a_cell_cannot_reach_the_host_through_the_engine() {
    let home = common::scratch("anypath-js-escapes-");
    let mut session = live(js(), home.path());
    // eval and Function run in the same realm: nothing of the host is there.
    let globals = run(&mut session, "Function('return typeof std + typeof os + typeof process.binding + typeof Deno + typeof require(\"fs\").constructor.constructor(\"return this\")().std')()");
    assert_eq!(value(&globals), "'undefinedundefinedundefinedundefinedundefined'");
    // Prototype pollution of what the runtime reports through: the next
    // cells are still reported, their values as they are.
    let polluted = run(
        &mut session,
        "Object.prototype.toString = () => 'pwned'; JSON.stringify = () => 'pwned'; Array.prototype.join = () => 'pwned'; String.prototype.replace = () => 'pwned'; Object.defineProperty(Object.prototype, 'inspect', { get() { return () => 'pwned' } }); 1",
    );
    assert_eq!(value(&polluted), "1");
    let after = run(&mut session, "console.log([1, 2], { a: 'b' }); ({ k: [1, 2] })");
    assert_eq!(ok(&after), "[ 1, 2 ] { a: 'b' }\n");
    assert_eq!(value(&after), "{ k: [ 1, 2 ] }");
    assert_eq!(after.results[0].mime.get("application/json").map(String::as_str), Some(r#"{"k":[1,2]}"#));
    // An accessor named `value` on every object diverts the engine's own
    // completion record: the runtime never runs the cell's getter for it, so
    // no forged value is reported; the cell's value is lost until it goes.
    let diverted = run(&mut session, "Object.defineProperty(Object.prototype, 'value', { get() { return 'pwned' }, configurable: true }); 1");
    assert!(diverted.error.is_none() && diverted.results.iter().all(|r| !r.text.contains("pwned")), "{diverted:?}");
    let restored = run(&mut session, "delete Object.prototype.value; 2");
    assert!(restored.results.iter().all(|r| !r.text.contains("pwned")), "{restored:?}");
    assert_eq!(value(&run(&mut session, "3")), "3", "values show again once the accessor is gone");
    // A thrown object whose getters throw is still reported as an error.
    let hostile = run(&mut session, "throw { get name() { throw 1 }, get message() { throw 2 }, get stack() { throw 3 } }");
    assert!(hostile.error.is_some() && hostile.exit_code == 1, "{hostile:?}");
    assert_eq!(value(&run(&mut session, "2 + 2")), "4", "the session goes on");
}

#[test]
fn limits_stop_loops_growth_and_floods() {
    let home = common::scratch("anypath-js-limits-");
    let limits = LimitOverrides { fuel: Some(200_000_000), memory_bytes: Some(64 << 20), stdout_bytes: Some(1000), ..LimitOverrides::default() };
    let mut session = js().live_instance(Some(home.path().to_path_buf()), &limits);
    assert_eq!(value(&run(&mut session, "let survivor = 1; survivor")), "1");
    let flood = run(&mut session, "console.log('x'.repeat(1e6)); 'done'");
    assert!(flood.output.stdout_truncated && flood.output.stdout.len() <= 1000, "{:?}", flood.output.stdout.len());
    let looped = run(&mut session, "while (true) {}");
    assert!(matches!(looped.error, Some(ExecError::FuelExhausted { .. } | ExecError::Timeout { .. })), "{looped:?}");
    let mut session = js().live_instance(Some(home.path().to_path_buf()), &limits);
    let grown = run(&mut session, "const chunks = []; while (true) chunks.push(new Uint8Array(1 << 20).fill(1));");
    assert!(grown.error.is_some(), "growth past the cap is stopped: {grown:?}");
    let memory = common::block_on(session.memory_regions()).map(|r| r.private_bytes()).unwrap_or(0);
    assert!(memory <= 64 << 20, "the instance stayed under its cap: {memory}");
}

/// Recursion as deep as ordinary code goes runs; recursion without end
/// exhausts the WebAssembly stack (QuickJS has no stack check of its own
/// under WASI), which ends the instance: the cell says so and the next one
/// starts afresh, never on a half-unwound heap.
#[test]
fn recursion_without_end_ends_the_instance_and_the_next_cell_starts_afresh() {
    let home = common::scratch("anypath-js-recursion-");
    let mut session = live(js(), home.path());
    assert_eq!(value(&run(&mut session, "let before = 1; function depth(n) { return n === 0 ? 0 : 1 + depth(n - 1) } depth(500)")), "500");
    let endless = run(&mut session, "function forever(n) { return forever(n + 1) + 1 } forever(0)");
    assert!(matches!(endless.error, Some(ExecError::Trap { .. })), "{endless:?}");
    let next = run(&mut session, "typeof before");
    assert_eq!((value(&next), next.state_reset), ("'undefined'".to_owned(), true), "{next:?}");
}

#[test]
fn a_javascript_session_hibernates_resumes_and_forks_with_its_heap() {
    let home = common::scratch("anypath-js-state-");
    let mut session = live(js(), home.path());
    let setup = "const big = new Uint8Array(10 << 20).map((_, i) => i % 251); let counter = 0; function bump() { return ++counter } class Box { constructor(v) { this.v = v } } const boxed = new Box('kept'); const table = new Map([['a', 1]]); bump()";
    assert_eq!(value(&run(&mut session, setup)), "1");
    let image = common::block_on(session.hibernate()).expect("captured").expect("a live instance");
    assert!(!session.is_live());
    let mut resumed = live(js(), home.path()).with_saved_state(image);
    let report = run(&mut resumed, "[bump(), boxed.v, table.get('a'), big[1000], big.length]");
    assert_eq!(value(&report), "[ 2, 'kept', 1, 247, 10485760 ]");
    assert_eq!(report.state, StateOrigin::Resumed);

    // Shared copy-on-write: children see the state; their writes are their own.
    let state = common::block_on(resumed.share()).expect("shared").expect("a live instance");
    let children: Vec<(LiveInstance, tempfile::TempDir)> = (0..3)
        .map(|n| {
            let dir = common::scratch("anypath-js-child-");
            let mut child = live(js(), dir.path());
            child.resume_shared(Arc::clone(&state));
            let report = run(&mut child, &format!("big[0] = {n} + 100; bump(); globalThis.mine = {n}; [counter, big[0]]"));
            assert_eq!(value(&report), format!("[ 3, {} ]", n + 100));
            (child, dir)
        })
        .collect();
    assert_eq!(value(&run(&mut resumed, "[counter, big[0], typeof mine]")), "[ 2, 0, 'undefined' ]", "the parent sees no child's writes");
    for (n, (mut child, _dir)) in children.into_iter().enumerate() {
        assert_eq!(value(&run(&mut child, "[counter, big[0], mine]")), format!("[ 3, {}, {n} ]", n + 100), "child {n} keeps its own");
    }
}

#[test]
fn a_live_javascript_run_streams_its_output() {
    let home = common::scratch("anypath-js-live-");
    let mut session = live(js(), home.path());
    let (sink, mut events) = tokio::sync::mpsc::unbounded_channel();
    let report = common::block_on(session.run(CellRequest { code: "console.log('one'); console.error('two'); 3".into(), live: Some(sink), ..CellRequest::default() }));
    assert_eq!(value(&report), "3");
    let mut seen = Vec::new();
    while let Ok(event) = events.try_recv() {
        seen.push(format!("{event:?}"));
    }
    assert!(seen.len() >= 3 && seen[0].contains("one") && seen[1].contains("two") && seen[2].contains('3'), "{seen:?}");
}


/// An interrupt stops a running cell, whether it computes or waits on a
/// timer, with an `Interrupted` error, and the session's state stays: the
/// engine asks the host now and then, and a timer's wait between slices.
#[test]
fn an_interrupt_stops_the_cell_and_keeps_the_state() {
    use anypath_sandbox::Interrupt;
    let home = common::scratch("anypath-js-interrupt-");
    let mut session = live(js(), home.path());
    assert_eq!(value(&run(&mut session, "let kept = 41; kept")), "41");
    for code in ["let spins = 0; while (true) { spins++ }", "await new Promise((resolve) => setTimeout(resolve, 60000))"] {
        let interrupt = Interrupt::new();
        let raiser = interrupt.clone();
        let raising = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(300));
            raiser.interrupt();
        });
        let began = std::time::Instant::now();
        let report = common::block_on(session.run(CellRequest { code: code.into(), interrupt: Some(interrupt), ..CellRequest::default() }));
        raising.join().expect("the interrupt was raised");
        assert!(began.elapsed() < std::time::Duration::from_secs(3), "{code}: stopped soon after the interrupt: {:?}", began.elapsed());
        assert_eq!(raised(&report).0, "Interrupted", "{code}: {report:?}");
        let next = run(&mut session, "kept + 1");
        assert_eq!((value(&next), next.state_reset, next.state), ("42".to_owned(), false, StateOrigin::Kept), "{code}: the state stays");
    }
    assert_eq!(value(&run(&mut session, "typeof spins")), "'number'", "what the interrupted cell declared stays too");
}
