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
