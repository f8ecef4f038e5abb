//! `POST /run` through `anypath up`: the agent component loops a scripted
//! fake LLM (real HTTP, OpenAI and Anthropic wire formats, reached only
//! through the planner) over file and test tools in a real sandbox session.

use crate::common;

use common::app::{App, json_of, temp_kv};
use common::fake_llm::{FakeLlm, Reply, tools};
use serde_json::{Value, json};

fn start(fake: &FakeLlm, provider: &str, name: &str) -> App {
    let env = fake.env(provider, "rules");
    let pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    App::start_with(&temp_kv(name), "spin.toml", &pairs)
}

fn run(app: &App, body: Value) -> (u16, Value) {
    let (status, body) = json_of(app.send("POST", "/run", Some(body)));
    (status.as_u16(), body)
}

fn observations(body: &Value) -> Vec<String> {
    body["steps"].as_array().into_iter().flatten().map(|s| s["observation"].as_str().unwrap_or("").to_owned()).collect()
}

/// The tool results the model got back on its last call, in its own wire format.
fn tool_results(fake: &FakeLlm) -> Vec<String> {
    let calls = fake.calls();
    let Some(last) = calls.last() else { return vec![] };
    let messages = last.body["messages"].as_array().cloned().unwrap_or_default();
    match last.api {
        "openai" => messages.iter().filter(|m| m["role"] == "tool").filter_map(|m| m["content"].as_str().map(str::to_owned)).collect(),
        _ => messages
            .iter()
            .filter_map(|m| m["content"].as_array())
            .flatten()
            .filter(|b| b["type"] == "tool_result")
            .filter_map(|b| b["content"].as_str().map(str::to_owned))
            .collect(),
    }
}

fn hello_world(provider: &str) {
    let fake = FakeLlm::start(vec![
        tools(&[("write_file", json!({"filePath": "hello.txt", "content": "Hello from the agent"}))]),
        Reply::Text("I wrote hello.txt.".into()),
        tools(&[("read_file", json!({"filePath": "hello.txt"})), ("list_files", json!({}))]),
        Reply::Text("It says hello.".into()),
    ]);
    let app = start(&fake, provider, &format!("agent-hello-{provider}"));
    let (status, body) = run(&app, json!({"input": "Write hello.txt", "includeSteps": true, "session_id": "hello"}));
    assert_eq!((status, body["output"].as_str(), body["session_id"].as_str()), (200, Some("I wrote hello.txt."), Some("hello")), "{body}");
    assert_eq!(body["steps"][0]["tool"], "write_file", "{body}");
    assert_eq!(body["steps"][0]["input"]["filePath"], "hello.txt");
    assert!(observations(&body)[0].contains("wrote 20 bytes"), "{body}");
    assert!(tool_results(&fake)[0].contains("wrote 20 bytes"), "the result went back in the provider's own format");
    assert_eq!(fake.calls()[0].body["temperature"], json!(0.0));
    let (_, again) = run(&app, json!({"input": "What does hello.txt say?", "includeSteps": true, "session_id": "hello"}));
    let seen = observations(&again);
    assert_eq!(seen[0], "Hello from the agent", "the file is in the session: {again}");
    assert!(seen[1].contains("hello.txt (20 bytes)"), "{again}");
    let (_, plain) = run(&app, json!({"input": "no steps", "session_id": "hello"}));
    assert!(plain.get("steps").is_none(), "steps only when asked: {plain}");
}

#[test]
fn write_hello_txt_over_openai() {
    hello_world("openai");
}

#[test]
fn write_hello_txt_over_anthropic() {
    hello_world("anthropic");
}

const BROKEN: &str = "def add(a, b):\n    return a - b\n";
const FIXED: &str = "def add(a, b):\n    return a + b\n";
const TEST: &str = "import unittest\nfrom calc import add\n\nclass AddTest(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n";

#[test]
fn a_failing_test_is_fixed_and_rerun() {
    let fake = FakeLlm::start(vec![
        tools(&[("write_file", json!({"filePath": "calc.py", "content": BROKEN})), ("write_file", json!({"filePath": "test_calc.py", "content": TEST}))]),
        tools(&[("run_tests", json!({}))]),
        tools(&[("write_file", json!({"filePath": "calc.py", "content": FIXED}))]),
        tools(&[("run_tests", json!({}))]),
        Reply::Text("add is fixed and its test passes.".into()),
    ]);
    let app = start(&fake, "anthropic", "agent-tests");
    let (status, body) = run(&app, json!({"input": "Write add with a test and make it pass", "includeSteps": true}));
    assert_eq!((status, body["output"].as_str()), (200, Some("add is fixed and its test passes.")), "{body}");
    let runs: Vec<String> = body["steps"].as_array().into_iter().flatten().filter(|s| s["tool"] == "run_tests").map(|s| s["observation"].as_str().unwrap_or("").to_owned()).collect();
    assert!(runs[0].contains("FAILED: 0 passed, 1 failed, 0 errors") && runs[0].contains("AssertionError"), "{}", runs[0]);
    assert!(runs[1].contains("OK: 1 passed, 0 failed, 0 errors"), "{}", runs[1]);
    assert_eq!(fake.calls().len(), 5, "fewer turns than the limit of 6");
}

const SHAPES: &str = "def area(w, h):\n    return w * h\n";
const SHAPES_TESTS: &str = "from shapes import area\nfrom src.shapes import area as same_area\nfrom geometry.units import CM\n\n\ndef test_area():\n    assert area(2, 3) == 6\n\n\ndef test_area_in_cm():\n    print('checking units')\n    assert same_area(2, 3) * CM == 7\n";

/// A project with folders: the model writes `src/` (a module and a
/// package) and `tests/`, `list_files` shows the tree, and `run_tests`
/// runs pytest in the session, reporting the counts and the failure.
#[test]
fn a_project_in_src_and_tests_folders_is_tested_with_pytest() {
    let fake = FakeLlm::start(vec![
        tools(&[
            ("write_file", json!({"filePath": "src/shapes.py", "content": SHAPES})),
            ("write_file", json!({"filePath": "src/geometry/__init__.py", "content": ""})),
            ("write_file", json!({"filePath": "/mnt/data/src/geometry/units.py", "content": "CM = 1\n"})),
            ("write_file", json!({"filePath": "./tests/test_shapes.py", "content": SHAPES_TESTS})),
        ]),
        tools(&[("list_files", json!({})), ("run_tests", json!({}))]),
        tools(&[("read_file", json!({"filePath": "tests/test_shapes.py"}))]),
        tools(&[("final_answer", json!({"text": "One test passes and one fails."}))]),
    ]);
    let app = start(&fake, "openai", "agent-folders");
    let body = json!({"input": "Write shapes with tests", "includeSteps": true, "session_id": "folders", "runtime": "python-data"});
    let (status, body) = run(&app, body);
    assert_eq!((status, body["output"].as_str()), (200, Some("One test passes and one fails.")), "{body}");
    let seen = observations(&body);
    for (i, path) in ["src/shapes.py", "src/geometry/__init__.py", "src/geometry/units.py", "tests/test_shapes.py"].iter().enumerate() {
        assert!(seen[i].starts_with("wrote ") && seen[i].ends_with(&format!(" to {path}")), "{}", seen[i]);
    }
    let listing: Vec<&str> = seen[4].lines().collect();
    assert_eq!(
        listing,
        [
            "src/geometry/__init__.py (0 bytes)",
            "src/geometry/units.py (7 bytes)",
            &format!("src/shapes.py ({} bytes)", SHAPES.len()),
            &format!("tests/test_shapes.py ({} bytes)", SHAPES_TESTS.len()),
        ],
        "{}",
        seen[4]
    );
    let tests = &seen[5];
    assert!(tests.contains("FAILED: 1 passed, 1 failed, 0 errors, 0 skipped (pytest 9."), "the counts come first: {tests}");
    assert!(tests.contains("tests/test_shapes.py::test_area_in_cm") && tests.contains("assert (6 * 1) == 7"), "the failure, as pytest shows it: {tests}");
    assert!(tests.contains("checking units"), "the failing test's output: {tests}");
    assert!(!tests.contains("test_area PASSED") && !tests.contains("::test_area -"), "the passing test is only counted: {tests}");
    assert_eq!(seen[6], SHAPES_TESTS, "read back through its folder");
    // The files are in the session's folders, as the code-interpreter API sees them.
    let listed = reqwest::blocking::Client::new()
        .get(format!("http://{}/v1/sessions/folders/files/src/geometry/units.py", app.sandbox))
        .bearer_auth(common::app::SANDBOX_TOKEN)
        .send()
        .and_then(|r| r.text());
    assert_eq!(listed.ok().as_deref(), Some("CM = 1\n"));
}

/// `runtime` reaches the run's session: on python-data the model draws a
/// chart, sees the figure (and the table it ended a cell with) in its tool
/// result, and the saved chart is a PNG in the session.
#[test]
fn a_run_on_python_data_draws_a_chart_and_the_model_sees_its_results() {
    let chart = "import pandas as pd\nimport matplotlib.pyplot as plt\ndf = pd.DataFrame({'x': [1, 2, 3], 'y': [2, 4, 8]})\nax = df.plot(x='x', y='y')\nax.figure.savefig('chart.png')\nplt.show()\ndf.describe()";
    let fake = FakeLlm::start(vec![
        tools(&[("run_python", json!({"code": chart}))]),
        tools(&[("list_files", json!({}))]),
        Reply::Text("The chart is in chart.png.".into()),
    ]);
    let app = start(&fake, "openai", "agent-chart");
    let (status, body) = run(&app, json!({"input": "Draw y against x", "includeSteps": true, "session_id": "charts", "runtime": "python-data"}));
    assert_eq!(status, 200, "{body}");
    let seen = observations(&body);
    assert!(seen[0].starts_with("exit_code: 0"), "{}", seen[0]);
    assert!(seen[0].contains("image (image/png): <Figure size"), "the model is told of the figure: {}", seen[0]);
    assert!(seen[0].contains("result:") && seen[0].contains("mean"), "the last expression's value: {}", seen[0]);
    assert!(seen[1].contains("chart.png ("), "{}", seen[1]);
    let png = reqwest::blocking::Client::new()
        .get(format!("http://{}/v1/sessions/charts/files/chart.png", app.sandbox))
        .bearer_auth(common::app::SANDBOX_TOKEN)
        .send()
        .and_then(|r| r.bytes());
    assert!(png.is_ok_and(|bytes| bytes.starts_with(b"\x89PNG\r\n\x1a\n")), "chart.png is a PNG in the session");
    let (status, answer) = run(&app, json!({"input": "x", "runtime": "cobol"}));
    assert_eq!((status, &answer["error"]["code"]), (400, &json!("invalid_request")), "{answer}");
}

#[test]
fn a_model_that_never_stops_ends_at_max_iterations() {
    // Never the same calls twice in a row: that ends a run before its limit.
    let fake = FakeLlm::start(vec![tools(&[("list_files", json!({}))]), tools(&[("read_file", json!({"filePath": "a.txt"}))])])
        .otherwise(tools(&[("list_files", json!({}))]));
    let app = start(&fake, "openai", "agent-forever");
    let (status, body) = run(&app, json!({"input": "loop", "max_iterations": 3, "includeSteps": true}));
    assert_eq!(status, 200, "{body}");
    assert!(body["output"].as_str().unwrap_or("").contains("all 3 of its turns"), "{body}");
    assert_eq!((fake.calls().len(), body["steps"].as_array().map(Vec::len)), (3, Some(3)));
}

/// Boundary: the session directory. A model naming paths outside it gets a
/// tool error saying why, and nothing is read or written anywhere.
#[test]
fn traversal_unknown_tools_and_malformed_arguments_are_tool_errors() {
    let fake = FakeLlm::start(vec![
        tools(&[
            ("read_file", json!({"filePath": "../../etc/passwd"})),
            ("write_file", json!({"filePath": "/etc/passwd", "content": "x"})),
            ("write_file", json!({"filePath": "../../package.json", "content": "{}"})),
            ("write_file", json!({"filePath": "tests/../../../etc/passwd", "content": "x"})),
            ("format_disk", json!({})),
        ]),
        Reply::Tools(vec![("write_file".into(), "{\"filePath\": ".into())]),
        tools(&[("list_files", json!({}))]),
        Reply::Text("I could not do that.".into()),
    ]);
    let app = start(&fake, "openai", "agent-escape");
    let (status, body) = run(&app, json!({"input": "Read /etc/passwd", "includeSteps": true}));
    assert_eq!(status, 200, "{body}");
    let seen = observations(&body);
    for (i, path) in ["../../etc/passwd", "/etc/passwd", "../../package.json", "tests/../../../etc/passwd"].iter().enumerate() {
        assert!(seen[i].contains(&format!("path escapes the sandbox: {path}")), "{}", seen[i]);
    }
    assert!(seen[4].contains("unknown tool"), "{}", seen[4]);
    assert!(seen[5].contains("not a JSON object"), "{}", seen[5]);
    assert_eq!(seen[6], "(no files)", "nothing was written");
    assert_eq!(body["output"], "I could not do that.", "the loop went on after the errors");
}

#[test]
fn bad_bodies_are_400_and_an_unreachable_llm_is_502() {
    let fake = FakeLlm::start(vec![]);
    let app = start(&fake, "openai", "agent-errors");
    for (body, code) in [
        (json!({}), "invalid_request"),
        (json!({"input": 42}), "invalid_request"),
        (json!({"input": ""}), "invalid_request"),
    ] {
        let (status, answer) = run(&app, body);
        assert_eq!((status, &answer["error"]["code"]), (400, &json!(code)), "{answer}");
        assert!(answer["error"]["request_id"].is_string(), "{answer}");
    }
    let big = json!({"input": "x".repeat(1 << 20)});
    let (status, answer) = run(&app, big);
    assert_eq!(status, 400, "{answer}");
    let (status, _) = json_of(app.send("GET", "/run", None));
    assert_eq!(status.as_u16(), 405);

    let (_, spec) = json_of(app.send("GET", "/openapi.json", None));
    assert!(spec["paths"].get("/run").is_some(), "a configured agent is in the spec");

    let down = [("SPIN_VARIABLE_LLM_PROVIDER", "openai"), ("SPIN_VARIABLE_LLM_SCHEME", "http"), ("SPIN_VARIABLE_LLM_HOST", "127.0.0.1:9"), ("SPIN_VARIABLE_LLM_MODEL", "m")];
    let app = App::start_with(&temp_kv("agent-llm-down"), "spin.toml", &down);
    let (status, answer) = run(&app, json!({"input": "anything"}));
    assert_eq!((status, &answer["error"]["code"]), (502, &json!("llm_failed")), "{answer}");
    assert!(answer["error"]["message"].as_str().unwrap_or("").contains("unreachable"), "{answer}");
}

/// Without an LLM the agent cannot work: the spec does not offer `POST /run`,
/// and a call is a 503 naming the settings (a server's configuration, not a
/// bad gateway).
#[test]
fn an_app_without_an_llm_neither_offers_nor_fails_the_agent_as_a_bad_gateway() {
    let app = App::start(&temp_kv("agent-unconfigured"));
    let (_, spec) = json_of(app.send("GET", "/openapi.json", None));
    assert!(spec["paths"].get("/run").is_none(), "the spec offers /run: {}", spec["paths"]);
    assert!(spec["paths"].get("/{collection}/").is_some(), "the rest of the spec is there");
    let (status, answer) = run(&app, json!({"input": "Write hello.txt"}));
    assert_eq!((status, &answer["error"]["code"]), (503, &json!("agent_unavailable")), "{answer}");
    assert!(answer["error"]["message"].as_str().unwrap_or("").contains("llm_host"), "{answer}");
}

/// Boundary: `allowed_outbound_hosts`, live. The agent component, pointed
/// at the LLM host itself instead of the planner, is refused by the same
/// enforcement `anypath up` applies to every outbound call: the run fails
/// with the denial and the LLM never hears of it.
#[test]
fn the_agent_cannot_reach_the_llm_host_itself() {
    let fake = FakeLlm::start(vec![Reply::Text("never asked".into())]);
    let app = App::start_with(&temp_kv("agent-egress"), "tests/fixtures/agent-llm-egress.toml", &[("SPIN_VARIABLE_LLM_HOST", fake.address.as_str())]);
    let (status, answer) = run(&app, json!({"input": "Write hello.txt"}));
    assert_eq!((status, &answer["error"]["code"]), (502, &json!("llm_failed")), "{answer}");
    assert!(answer["error"]["message"].as_str().unwrap_or("").contains("HttpRequestDenied"), "{answer}");
    assert!(fake.calls().is_empty(), "the LLM was not reached");
}

/// Every turn asks for a tool call. Before the first, the planner probes
/// the server once with a short request of its own; a server that honours
/// the probe but refuses `tool_choice: required` later is asked again
/// without it, and later runs leave it out.
#[test]
fn a_refused_required_tool_call_is_asked_again_without_it_and_remembered() {
    let fake = FakeLlm::start(vec![
        Reply::Refuse(400, "tool_choice 'required' is not supported by this server".into()),
        tools(&[("write_file", json!({"filePath": "a.txt", "content": "A"}))]),
        Reply::Text("Wrote a.txt.".into()),
        tools(&[("list_files", json!({}))]),
        Reply::Text("One file.".into()),
    ]);
    let app = start(&fake, "openai", "agent-tool-choice");
    let (status, body) = run(&app, json!({"input": "Write a.txt", "includeSteps": true}));
    assert_eq!((status, body["output"].as_str()), (200, Some("Wrote a.txt.")), "{body}");
    let (status, body) = run(&app, json!({"input": "List the files", "includeSteps": true}));
    assert_eq!((status, body["output"].as_str()), (200, Some("One file.")), "{body}");
    let choices: Vec<Value> = fake.calls().iter().map(|c| c.body["tool_choice"].clone()).collect();
    assert_eq!(choices, [json!("required"), Value::Null, Value::Null, Value::Null, Value::Null], "asked once, then never again");
    assert_eq!(fake.probes().len(), 1, "probed once, before the first required turn");
}

/// A server that refuses the setting on the probe, and answers the same
/// probe without it, is never asked for a required call; the probes are
/// short (their answers capped at 64 tokens) and every turn gets the
/// configured cap.
#[test]
fn a_server_refusing_the_probe_is_never_asked_for_a_required_call() {
    let fake = FakeLlm::start(vec![tools(&[("write_file", json!({"filePath": "a.txt", "content": "A"}))]), Reply::Text("Wrote a.txt.".into())])
        .answering_probes(Reply::Refuse(400, "tool_choice 'required' is not supported by this server".into()));
    let app = start(&fake, "openai", "agent-probe-refused");
    let (status, body) = run(&app, json!({"input": "Write a.txt", "includeSteps": true}));
    assert_eq!((status, body["output"].as_str(), &body["steps"][0]["tool"]), (200, Some("Wrote a.txt."), &json!("write_file")), "{body}");
    let probes = fake.probes();
    let asked: Vec<(&Value, &Value)> = probes.iter().map(|p| (&p.body["tool_choice"], &p.body["max_tokens"])).collect();
    assert_eq!(asked, [(&json!("required"), &json!(64)), (&Value::Null, &json!(64))], "refused, then probed again without the setting");
    let calls = fake.calls();
    assert!(calls.iter().all(|c| c.body["tool_choice"].is_null()), "never asked for a required call");
    assert!(calls.iter().all(|c| c.body["max_tokens"] == json!(1500)), "every turn has the configured cap");
}

/// A model that writes its call as text (as small local models do, even
/// asked for a required call) has it run; the step says it was recovered.
/// Such a server answers the probe with text too, so no turn asks for a
/// required call, which would have it pad its answer to the cap.
#[test]
fn a_tool_call_written_as_text_is_run_and_marked_recovered() {
    let fenced = "```json\n{\"name\": \"write_file\", \"arguments\": {\"filePath\": \"hello.txt\", \"content\": \"Hi\"}}\n```\n\n\n";
    let fake = FakeLlm::start(vec![
        Reply::Text(fenced.into()),
        Reply::Text("<tool_call>\n{\"name\": \"final_answer\", \"arguments\": {\"text\": \"hello.txt written.\"}}\n</tool_call>".into()),
        tools(&[("read_file", json!({"filePath": "hello.txt"}))]),
        Reply::Text("It says Hi.".into()),
    ])
    .answering_probes(Reply::Text("<tool_call>\n{\"name\": \"tool_choice_probe\", \"arguments\": {}}\n</tool_call>".into()));
    let app = start(&fake, "openai", "agent-text-calls");
    let (status, body) = run(&app, json!({"input": "Write hello.txt", "includeSteps": true, "session_id": "text-calls"}));
    assert_eq!((status, body["output"].as_str()), (200, Some("hello.txt written.")), "{body}");
    assert_eq!((body["tool_calls"].as_u64(), body["recovered_calls"].as_u64(), body["turns"].as_u64()), (Some(1), Some(1), Some(2)), "{body}");
    assert_eq!((&body["steps"][0]["tool"], &body["steps"][0]["recovered"]), (&json!("write_file"), &json!(true)), "{body}");
    let (_, again) = run(&app, json!({"input": "What does hello.txt say?", "includeSteps": true, "session_id": "text-calls"}));
    assert_eq!(observations(&again)[0], "Hi", "the recovered call wrote the file: {again}");
    assert_eq!(fake.probes().len(), 1, "probed once");
    let choices: Vec<Value> = fake.calls().iter().map(|c| c.body["tool_choice"].clone()).collect();
    assert!(choices.iter().all(Value::is_null), "not honoured on the probe, never asked: {choices:?}");
}
