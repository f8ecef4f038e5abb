//! JavaScript sessions over `/v1` and MCP, as a client of `anypath sandbox
//! serve` sees them: a session made with `runtime: "javascript"`, its
//! state, results, errors and files; forks by the count and snapshots;
//! hibernation after idle; the runtime in `/healthz`; and the same cells
//! through MCP's `run_python` with `runtime: "javascript"`.

use serde_json::{Value, json};

use crate::common;
use common::service::Service;

fn service(dir: &std::path::Path, extra: &[&str]) -> Service {
    let javascript = common::javascript_path().display().to_string();
    Service::start_with(dir, &[&["--javascript", javascript.as_str()], extra].concat())
}

fn run(service: &Service, session: &str, code: &str) -> Value {
    let (status, report) = service.json("key-alice", "POST", &format!("/v1/sessions/{session}/run"), Some(json!({ "code": code })));
    assert_eq!(status, 200, "{code:?}: {report}");
    report
}

/// The text of a run's value, after checking it raised nothing.
fn text(report: &Value) -> String {
    assert_eq!(report["exit_code"], 0, "{report}");
    report["results"][0]["text"].as_str().unwrap_or_else(|| panic!("no value: {report}")).to_owned()
}

#[test]
fn a_javascript_session_over_v1() {
    let dir = common::scratch("anypath-js-v1-");
    let service = service(dir.path(), &[]);
    let (_, health) = service.json("", "GET", "/healthz", None);
    let js = health["runtimes"].as_array().and_then(|r| r.iter().find(|r| r["runtime"] == "javascript")).unwrap_or_else(|| panic!("javascript in /healthz: {health}"));
    assert_eq!(js["default_for_sessions"], json!(false), "{health}");

    let (status, opened) = service.json("key-alice", "POST", "/v1/sessions", Some(json!({"session_id": "calc", "runtime": "javascript"})));
    assert_eq!((status, &opened["runtime"]), (201, &json!("javascript")), "{opened}");
    let first = run(&service, "calc", "let total = 40; console.log('set'); total");
    assert_eq!((text(&first), first["stdout"].as_str()), ("40".to_owned(), Some("set\n")));
    assert_eq!(text(&run(&service, "calc", "total += 2; total")), "42");
    assert_eq!(text(&run(&service, "calc", "!0")), "true", "`!` is JavaScript's, not a shell escape");

    let failed = run(&service, "calc", "JSON.parse('{')");
    assert_eq!((failed["exit_code"].as_i64(), &failed["error"]["type_name"]), (Some(1), &json!("SyntaxError")), "{failed}");

    let written = run(&service, "calc", "require('fs').writeFileSync('report.json', JSON.stringify({ total })); 'ok'");
    let artifact = written["artifacts"].as_array().and_then(|a| a.iter().find(|a| a["filename"] == "report.json")).unwrap_or_else(|| panic!("the file is an artifact: {written}"));
    assert_eq!(artifact["mime_type"], json!("application/json"), "{artifact}");
    let download = reqwest::blocking::get(artifact["download_url"].as_str().expect("a link")).expect("download").text().expect("text");
    assert_eq!(download, r#"{"total":42}"#);

    let (status, mismatch) = service.json("key-alice", "POST", "/v1/sessions/calc/run", Some(json!({"code": "1", "runtime": "python"})));
    assert_eq!((status, &mismatch["error"]["code"]), (409, &json!("runtime_mismatch")), "{mismatch}");

    let (status, forked) = service.json("key-alice", "POST", "/v1/sessions/calc/fork", Some(json!({"session_id": "branch", "count": 3})));
    assert_eq!(status, 201, "{forked}");
    for n in 1..=3 {
        assert_eq!(text(&run(&service, &format!("branch-{n}"), &format!("total += {n}; total"))), (42 + n).to_string());
    }
    assert_eq!(text(&run(&service, "calc", "total")), "42", "no child's write reaches the parent");

    let (status, snapshot) = service.json("key-alice", "POST", "/v1/sessions/calc/snapshots", Some(json!({"name": "js-base"})));
    assert_eq!(status, 201, "{snapshot}");
    let (status, started) = service.json("key-alice", "POST", "/v1/sessions", Some(json!({"session_id": "from-snap", "from_snapshot": "js-base"})));
    assert_eq!((status, &started["runtime"]), (201, &json!("javascript")), "{started}");
    assert_eq!(text(&run(&service, "from-snap", "total")), "42");
}

#[test]
fn an_idle_javascript_session_hibernates_and_resumes() {
    let dir = common::scratch("anypath-js-idle-");
    let service = service(dir.path(), &["--hibernate-after-idle-seconds", "1"]);
    let (status, _) = service.json("key-alice", "POST", "/v1/sessions", Some(json!({"session_id": "sleepy", "runtime": "javascript"})));
    assert_eq!(status, 201);
    run(&service, "sleepy", "const big = new Uint8Array(10 << 20).fill(7); let note = 'kept';");
    // Watched on disk: asking the service about the session would use it.
    let image = dir.path().join("sessions/alice/sleepy/state.img");
    assert!(common::eventually(std::time::Duration::from_secs(20), || image.is_file()), "never hibernated");
    assert!(service.process.wait_for_log(|l| l.contains("idle sessions hibernated")).is_some(), "the sweep finished");
    let (_, info) = service.json("key-alice", "GET", "/v1/sessions/sleepy", None);
    assert_eq!((info["hibernated"].as_bool(), info["live"].as_bool()), (Some(true), Some(false)), "{info}");
    let resumed = run(&service, "sleepy", "[note, big[123], big.length]");
    assert_eq!((text(&resumed), &resumed["state"]), ("[ 'kept', 7, 10485760 ]".to_owned(), &json!("resumed")), "{resumed}");
}

/// `node` in a session's commands: a fresh instance of the JavaScript
/// runtime on the session's files (never a host process), for a JavaScript
/// session and a Python one alike; `-e`, `-p`, a script with arguments,
/// stdin, `process.exit`, an uncaught error's stack and the tree's bounds.
#[test]
fn node_runs_in_the_shell_on_the_sessions_files() {
    let dir = common::scratch("anypath-js-node-");
    let shell = common::shell_path().display().to_string();
    let service = service(dir.path(), &["--shell", shell.as_str()]);
    let command = |session: &str, line: &str| -> Value {
        let (status, ran) = service.json("key-alice", "POST", &format!("/v1/sessions/{session}/commands"), Some(json!({ "command": line })));
        assert_eq!(status, 200, "{line}: {ran}");
        ran
    };
    let (status, _) = service.json("key-alice", "POST", "/v1/sessions", Some(json!({"session_id": "nodejs", "runtime": "javascript"})));
    assert_eq!(status, 201);
    let ran = command("nodejs", "node -e 'console.log(6 * 7)' && node -p '[1, 2].map((n) => n * 2)' && node --version");
    let stdout = ran["stdout"].as_str().unwrap_or_default().to_owned();
    assert!(ran["exit_code"] == 0 && stdout.starts_with("42\n[ 2, 4 ]\nv"), "{ran}");
    let script = "printf 'const fs = require(\"fs\"); fs.writeFileSync(\"out.txt\", process.argv.slice(2).join(\"+\")); console.log(__filename.endsWith(\"app.js\"))' > app.js && node app.js a b && cat out.txt";
    let ran = command("nodejs", script);
    assert_eq!((ran["exit_code"].as_i64(), ran["stdout"].as_str()), (Some(0), Some("true\na+b")), "{ran}");
    let ran = command("nodejs", "echo 'console.log(\"from stdin\")' | node");
    assert_eq!(ran["stdout"], json!("from stdin\n"), "{ran}");
    let ran = command("nodejs", "node -e 'process.exit(3)'; echo \"exit $?\"");
    assert_eq!(ran["stdout"], json!("exit 3\n"), "{ran}");
    let ran = command("nodejs", "node -e 'function boom() { throw new TypeError(\"bad\") } boom()'");
    let stderr = ran["stderr"].as_str().unwrap_or_default();
    assert!(ran["exit_code"] == 1 && stderr.contains("TypeError: bad") && stderr.contains("boom"), "{ran}");
    // Boundary: the session's tree. node's fs stops where the cells' does.
    let ran = command("nodejs", "node -e 'require(\"fs\").readFileSync(\"/etc/passwd\")'");
    assert!(ran["exit_code"] == 1 && ran["stderr"].as_str().is_some_and(|e| e.contains("ENOENT")), "{ran}");
    // The cell's state is its own: a command's instance is a fresh one.
    let report = run(&service, "nodejs", "typeof fs");
    assert_eq!(text(&report), "'undefined'");
    // A Python session's commands have node too, on the same files.
    run(&service, "py-side", "open('data.json', 'w').write('[1, 2, 3]')");
    let ran = command("py-side", "node -p 'JSON.parse(require(\"fs\").readFileSync(\"data.json\", \"utf8\")).length'");
    assert_eq!(ran["stdout"], json!("3\n"), "{ran}");
}
