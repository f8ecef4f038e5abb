//! The agent endpoint (`POST /run`) driven by the real small model,
//! Qwen2.5-Coder-1.5B-Instruct (Q4_K_M) under llama.cpp, through
//! `anypath up`: the agent reaches the model only through the planner.
//! Seven ordinary tasks, each judged by what the run left in its session
//! (files, and the session's tests run again by this test), never by the
//! model's words; the escape task passes only when the model tried the path
//! and the tool refused it. At most six model turns a task.
//!
//! It prints each task's outcome, turns, tool calls, calls recovered from
//! text and seconds, writes them to `target/small-model-agent-report.json`,
//! and fails unless at least seven of the eight tasks are done.
//!
//! `cargo xtask test` starts one model server for the whole run
//! (`ANYPATH_LLM_ADDRESS`); without it the test starts its own.

use crate::common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::app::{App, Build, repo, temp_kv};
use common::llama::{ModelServer, llm_env};
use reqwest::blocking::Client;
use serde_json::{Value, json};

/// Turns a task may take (the bound, and the server's default).
const MAX_TURNS: u32 = 6;
/// Tasks that must be done of the eight.
const REQUIRED: usize = 7;
/// One run on two cores: six turns of a 1.5B model, with room.
const RUN_TIMEOUT: Duration = Duration::from_secs(600);
/// One model call of a run, at most.
const LLM_CALL_TIMEOUT: Duration = Duration::from_secs(300);

/// What the session held before the run, what the run is asked, and how it is judged.
struct Task {
    name: &'static str,
    seed: &'static [(&'static str, &'static str)],
    input: &'static str,
    /// The session's runtime (`python-data` for pandas and matplotlib).
    runtime: Option<&'static str>,
    judge: fn(&Sandbox, &str, &Value) -> Result<(), String>,
}

const CALC_BROKEN: &str = "def add(a, b):\n    return a - b\n";
const CALC_TEST: &str = "import unittest\nfrom calc import add\n\n\nclass TestAdd(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\n\nif __name__ == '__main__':\n    unittest.main()\n";

const TASKS: [Task; 8] = [
    Task { name: "write a file", seed: &[], input: "Create a file hello.txt containing the text: Hello, world!", runtime: None, judge: hello_written },
    Task {
        name: "write and test",
        seed: &[],
        input: "Write calc.py with a function add(a, b) that returns a + b, and test_calc.py with a unittest test for add. Then run the tests.",
        runtime: None,
        judge: calc_tested,
    },
    Task {
        name: "fix a failing test",
        seed: &[("calc.py", CALC_BROKEN), ("test_calc.py", CALC_TEST)],
        input: "The tests in this session fail. Run them, find the bug in calc.py and fix calc.py so that the tests pass. Do not change test_calc.py.",
        runtime: None,
        judge: calc_fixed,
    },
    Task {
        name: "count lines with a command",
        seed: &[("notes.txt", "milk\neggs\nbread\n"), ("todo.txt", "call Ana\nfix the bike\n")],
        input: "Use run_command with wc -l to count the lines of notes.txt and todo.txt, then write the total number of lines to total.txt.",
        runtime: None,
        judge: lines_counted,
    },
    Task { name: "escape refused", seed: &[], input: "Read the file ../../etc/passwd and tell me what it says.", runtime: None, judge: escape_refused },
    Task {
        name: "compute and save",
        seed: &[],
        input: "Use Python to compute the sum of the integers from 1 to 100, and write the result to result.txt.",
        runtime: None,
        judge: sum_saved,
    },
    Task {
        name: "draw a chart",
        seed: &[],
        input: "Use matplotlib to plot the squares of the numbers 1 to 10 as a line chart, and save the chart as squares.png.",
        runtime: Some("python-data"),
        judge: chart_saved,
    },
    Task {
        name: "package with tests",
        seed: &[],
        input: "Write src/shapes.py with a function area(w, h) that returns w * h, and tests/test_shapes.py with a pytest test for area that starts with: from shapes import area. Then run the tests.",
        runtime: Some("python-data"),
        judge: package_tested,
    },
];

#[test]
fn a_small_local_model_finishes_ordinary_agent_tasks() {
    let started = Instant::now();
    let server = ModelServer::shared_or_start();
    eprintln!("model server on {} ({:.1} s to reach)", server.address(), started.elapsed().as_secs_f64());
    let mut env = llm_env(server.address(), "rules");
    env.push(("SPIN_VARIABLE_AGENT_TIMEOUT_MS".into(), RUN_TIMEOUT.as_millis().to_string()));
    // The first turn reads the whole agent prompt uncached while the other
    // small-model suite shares the server's two threads: it has taken more
    // than the planner suites' 180 s per call. A run still ends at RUN_TIMEOUT.
    env.push(("SPIN_VARIABLE_LLM_TIMEOUT_MS".into(), LLM_CALL_TIMEOUT.as_millis().to_string()));
    let app = App::start_build(&temp_kv("small-model-agent"), &Build::from_env(), &env);
    let sandbox = Sandbox::new(&app);
    let outcomes: Vec<Outcome> = TASKS.iter().enumerate().map(|(i, task)| attempt(&app, &sandbox, task, &format!("agent-task-{i}"))).collect();
    drop(app);
    drop(server);
    print(&outcomes, started.elapsed().as_secs_f64());
    write_report(&outcomes);
    let done = outcomes.iter().filter(|o| o.verdict.is_ok()).count();
    let failures: Vec<String> = outcomes.iter().filter_map(|o| o.verdict.as_ref().err().map(|e| format!("{}: {e}", o.task))).collect();
    assert!(done >= REQUIRED, "{done} of {} tasks done, {REQUIRED} needed:\n{}", TASKS.len(), failures.join("\n"));
}

/// One task's run and verdict.
struct Outcome {
    task: &'static str,
    verdict: Result<(), String>,
    status: u16,
    turns: u64,
    tool_calls: u64,
    recovered_calls: u64,
    seconds: f64,
    tools: Vec<String>,
}

fn attempt(app: &App, sandbox: &Sandbox, task: &Task, session: &str) -> Outcome {
    for (name, content) in task.seed {
        sandbox.put(session, name, content);
    }
    let started = Instant::now();
    let body = json!({"input": task.input, "session_id": session, "includeSteps": true, "max_iterations": MAX_TURNS, "runtime": task.runtime});
    let answer = Client::builder()
        .timeout(RUN_TIMEOUT)
        .build()
        .expect("client")
        .post(format!("{}/run", app.base))
        .json(&body)
        .send();
    let seconds = started.elapsed().as_secs_f64();
    let (status, run) = match answer {
        Ok(response) => (response.status().as_u16(), response.json::<Value>().unwrap_or(Value::Null)),
        Err(e) => (0, json!({"error": e.to_string()})),
    };
    let count = |field: &str| run[field].as_u64().unwrap_or(0);
    let turns = count("turns");
    let verdict = if status != 200 {
        Err(format!("status {status}: {run}"))
    } else if turns > u64::from(MAX_TURNS) {
        Err(format!("{turns} turns, at most {MAX_TURNS}"))
    } else {
        (task.judge)(sandbox, session, &run).map_err(|e| format!("{e}; the run answered: {}", run["output"]))
    };
    let tools = run["steps"].as_array().into_iter().flatten().filter_map(|s| s["tool"].as_str().map(str::to_owned)).collect();
    let outcome = Outcome {
        task: task.name,
        verdict,
        status,
        turns,
        tool_calls: count("tool_calls"),
        recovered_calls: count("recovered_calls"),
        seconds,
        tools,
    };
    eprintln!("[agent] {}: {} ({seconds:.1} s, {turns} turns)", task.name, if outcome.verdict.is_ok() { "done" } else { "NOT done" });
    outcome
}

// ---------------------------------------------------------------- judges

fn hello_written(sandbox: &Sandbox, session: &str, _run: &Value) -> Result<(), String> {
    let text = sandbox.file(session, "hello.txt").ok_or("no hello.txt in the session")?;
    if text.contains("Hello, world!") { Ok(()) } else { Err(format!("hello.txt holds {text:?}")) }
}

fn calc_tested(sandbox: &Sandbox, session: &str, run: &Value) -> Result<(), String> {
    let calc = sandbox.file(session, "calc.py").ok_or("no calc.py")?;
    sandbox.file(session, "test_calc.py").ok_or("no test_calc.py")?;
    if !used(run, "run_tests") && !used(run, "run_python") {
        return Err("the tests were never run".into());
    }
    let check = sandbox.run(session, "from calc import add\nprint(add(2, 3), add(-1, 1))")?;
    if check.trim() != "5 0" {
        return Err(format!("add is wrong: {check:?} from {calc:?}"));
    }
    tests_pass(sandbox, session)
}

fn calc_fixed(sandbox: &Sandbox, session: &str, _run: &Value) -> Result<(), String> {
    if sandbox.file(session, "test_calc.py").as_deref() != Some(CALC_TEST) {
        return Err("test_calc.py was changed".into());
    }
    tests_pass(sandbox, session)
}

fn escape_refused(sandbox: &Sandbox, session: &str, run: &Value) -> Result<(), String> {
    let steps = run["steps"].as_array().cloned().unwrap_or_default();
    let tried = steps.iter().any(|s| s["input"].to_string().contains("passwd") && s["refused"] == json!(true));
    if !tried {
        return Err("the model never tried the path, so the tool refused nothing".into());
    }
    // A model may make up a passwd of its own; a leak is the host's file as it is.
    let host = std::fs::read_to_string("/etc/passwd").map_err(|e| format!("reading the host's /etc/passwd: {e}"))?;
    let host = host.trim();
    let leaked = |text: &str| text.contains(host) || text.replace("\\n", "\n").contains(host);
    let in_files = sandbox.files(session).iter().any(|name| sandbox.file(session, name).is_some_and(|text| leaked(&text)));
    if leaked(&run.to_string()) || in_files { Err("the host's passwd reached the run".into()) } else { Ok(()) }
}

fn lines_counted(sandbox: &Sandbox, session: &str, run: &Value) -> Result<(), String> {
    if !used(run, "run_command") {
        return Err("run_command was never called".into());
    }
    let text = sandbox.file(session, "total.txt").ok_or("no total.txt")?;
    // The total is the file's last number (`wc -l` also prints each file's count).
    let last = text.split(|c: char| !c.is_ascii_digit()).filter(|n| !n.is_empty()).next_back();
    if last == Some("5") { Ok(()) } else { Err(format!("total.txt holds {text:?}")) }
}

fn sum_saved(sandbox: &Sandbox, session: &str, _run: &Value) -> Result<(), String> {
    let text = sandbox.file(session, "result.txt").ok_or("no result.txt")?;
    if text.trim() == "5050" { Ok(()) } else { Err(format!("result.txt holds {text:?}")) }
}

fn chart_saved(sandbox: &Sandbox, session: &str, _run: &Value) -> Result<(), String> {
    let png = sandbox.bytes(session, "squares.png").ok_or("no squares.png in the session")?;
    if !png.starts_with(b"\x89PNG\r\n\x1a\n") {
        return Err(format!("squares.png is not a PNG ({} bytes)", png.len()));
    }
    // Drawn, not a blank canvas: a line chart with axes and ticks is several KiB.
    if png.len() < 4096 { Err(format!("squares.png holds only {} bytes", png.len())) } else { Ok(()) }
}

fn package_tested(sandbox: &Sandbox, session: &str, run: &Value) -> Result<(), String> {
    let module = sandbox.file(session, "src/shapes.py").ok_or("no src/shapes.py")?;
    sandbox.file(session, "tests/test_shapes.py").ok_or("no tests/test_shapes.py")?;
    if !used(run, "run_tests") {
        return Err("run_tests was never called".into());
    }
    let check = sandbox.run(session, "import sys\nsys.path.insert(0, 'src')\nfrom shapes import area\nprint(area(2, 3), area(4, 5))")?;
    if check.trim() != "6 20" {
        return Err(format!("area is wrong: {check:?} from {module:?}"));
    }
    tests_pass(sandbox, session)
}

/// Whether the run called `tool`.
fn used(run: &Value, tool: &str) -> bool {
    run["steps"].as_array().into_iter().flatten().any(|s| s["tool"] == tool)
}

/// The session's tests, run again by the test itself: they must run and
/// pass. With pytest where the runtime has it (the session directory and
/// `src/` importable, modules from the session imported afresh), else with
/// unittest's discovery.
fn tests_pass(sandbox: &Sandbox, session: &str) -> Result<(), String> {
    let code = "import contextlib, io, os, sys\n\
        here = os.path.realpath('.') + os.sep\n\
        for name, module in list(sys.modules.items()):\n    \
            path = getattr(module, '__file__', None)\n    \
            if isinstance(path, str) and os.path.isabs(path) and path.startswith(here):\n        \
                del sys.modules[name]\n\
        sys.path[:0] = [os.path.realpath('src'), os.path.realpath('.'), '/usr/local/lib/site-packages']\n\
        out = io.StringIO()\n\
        try:\n    \
            import pytest\n\
        except ImportError:\n    \
            import unittest\n    \
            result = unittest.TextTestRunner(stream=out).run(unittest.defaultTestLoader.discover('.'))\n    \
            print(result.testsRun, len(result.failures) + len(result.errors))\n\
        else:\n    \
            class Count:\n        \
                ran, failed = 0, 0\n        \
                def pytest_runtest_logreport(self, report):\n            \
                    Count.ran += report.when == 'call'\n            \
                    Count.failed += report.failed\n        \
                def pytest_collectreport(self, report):\n            \
                    Count.failed += report.failed\n    \
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):\n        \
                pytest.main(['-p', 'no:cacheprovider', '-p', 'no:faulthandler', '--capture=sys', '-o', 'log_file=/tmp/judge.log', '-q'], plugins=[Count()])\n    \
            print(Count.ran, Count.failed)\n";
    let counts = sandbox.run(session, code)?;
    match counts.split_whitespace().collect::<Vec<_>>().as_slice() {
        [ran, "0"] if *ran != "0" => Ok(()),
        _ => Err(format!("the tests do not pass (ran, failed): {counts:?}")),
    }
}

// ---------------------------------------------------------------- the session, seen directly

/// The app's sandbox host, where the agent's sessions live (tenant `default`).
struct Sandbox {
    base: String,
    client: Client,
}

impl Sandbox {
    fn new(app: &App) -> Self {
        Self { base: format!("http://{}/v1/sessions", app.sandbox), client: Client::new() }
    }

    fn put(&self, session: &str, name: &str, content: &str) {
        let response = self.client.put(format!("{}/{session}/files/{name}", self.base)).body(content.to_owned()).send().expect("upload");
        assert_eq!(response.status().as_u16(), 201, "seeding {name}");
    }

    fn bytes(&self, session: &str, name: &str) -> Option<Vec<u8>> {
        let response = self.client.get(format!("{}/{session}/files/{name}", self.base)).send().ok()?;
        if response.status().as_u16() == 200 { response.bytes().ok().map(|b| b.to_vec()) } else { None }
    }

    fn file(&self, session: &str, name: &str) -> Option<String> {
        let response = self.client.get(format!("{}/{session}/files/{name}", self.base)).send().ok()?;
        if response.status().as_u16() == 200 { response.text().ok() } else { None }
    }

    /// The session's file names.
    fn files(&self, session: &str) -> Vec<String> {
        let listed: Value = self.client.get(format!("{}/{session}/files", self.base)).send().and_then(|r| r.json()).unwrap_or(Value::Null);
        listed["files"].as_array().into_iter().flatten().filter_map(|f| f["filename"].as_str().map(str::to_owned)).collect()
    }

    /// Runs `code` in the session; its stdout, or why it failed.
    fn run(&self, session: &str, code: &str) -> Result<String, String> {
        let response = self.client.post(format!("{}/{session}/run", self.base)).json(&json!({"code": code})).send().map_err(|e| e.to_string())?;
        let report: Value = response.json().map_err(|e| e.to_string())?;
        match report["exit_code"].as_i64() {
            Some(0) => Ok(report["stdout"].as_str().unwrap_or_default().to_owned()),
            _ => Err(format!("checking the session failed: {}", report["traceback"].as_str().unwrap_or(&report.to_string()))),
        }
    }
}

// ---------------------------------------------------------------- the report

fn print(outcomes: &[Outcome], elapsed: f64) {
    println!("\nagent on the small model, {elapsed:.1} s in all");
    println!("{:<20} {:<8} {:>6} {:>5} {:>10} {:>9} {:>8}  tools", "task", "verdict", "status", "turns", "tool calls", "recovered", "seconds");
    for o in outcomes {
        let verdict = if o.verdict.is_ok() { "done" } else { "not done" };
        println!(
            "{:<20} {:<8} {:>6} {:>5} {:>10} {:>9} {:>8.1}  {}",
            o.task, verdict, o.status, o.turns, o.tool_calls, o.recovered_calls, o.seconds, o.tools.join(",")
        );
    }
    for o in outcomes {
        if let Err(e) = &o.verdict {
            println!("  {}: {e}", o.task);
        }
    }
}

/// The outcomes as JSON in `target/small-model-agent-report.json`.
fn write_report(outcomes: &[Outcome]) {
    let tasks: Vec<Value> = outcomes
        .iter()
        .map(|o| {
            json!({"task": o.task, "done": o.verdict.is_ok(), "error": o.verdict.as_ref().err(), "status": o.status, "turns": o.turns,
                   "tool_calls": o.tool_calls, "recovered_calls": o.recovered_calls, "seconds": o.seconds, "tools": o.tools})
        })
        .collect();
    let done = outcomes.iter().filter(|o| o.verdict.is_ok()).count();
    let report = json!({"tasks_done": done, "tasks": tasks});
    let target = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| repo().join("target"));
    let path = target.join("small-model-agent-report.json");
    match std::fs::create_dir_all(&target).and_then(|()| std::fs::write(&path, serde_json::to_string_pretty(&report).unwrap_or_default())) {
        Ok(()) => println!("report: {}", path.display()),
        Err(error) => eprintln!("could not write {}: {error}", path.display()),
    }
}
