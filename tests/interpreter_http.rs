//! The code interpreter over HTTP, as a client would drive it: `anypath
//! sandbox serve` with API keys for two tenants, a session's files and runs,
//! and what survives a restart.

use crate::common;

use std::path::PathBuf;

use base64::Engine;
use reqwest::blocking::Client;
use serde_json::{Value, json};

use common::service::Service;

/// A fresh data directory, removed when the returned value is dropped: bind
/// it before the service started on it, so it outlives the service.
fn data_dir(name: &str) -> tempfile::TempDir {
    common::scratch(&format!("anypath-interp-{name}-"))
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

const SALES: &str = "region,amount\nnorth,120\nsouth,80\nnorth,30\neast,50\nsouth,20\n";

const REPORT: &str = r#"
import csv, statistics
rows = list(csv.DictReader(open('sales.csv')))
totals = {}
for row in rows:
    totals.setdefault(row['region'], []).append(int(row['amount']))
summary = {region: sum(v) for region, v in sorted(totals.items())}
with open('report.md', 'w') as out:
    out.write('| region | total | mean |\n| --- | --- | --- |\n')
    for region, values in sorted(totals.items()):
        out.write(f'| {region} | {sum(values)} | {statistics.mean(values)} |\n')
top = max(summary.values())
bars = ''.join(f'<rect x="{i * 40}" y="{100 - 100 * v // top}" width="30" height="{100 * v // top}"><title>{r}</title></rect>' for i, (r, v) in enumerate(summary.items()))
open('chart.svg', 'w').write(f'<svg xmlns="http://www.w3.org/2000/svg" width="120" height="100">{bars}</svg>')
print(summary)
"#;

/// The workflow of a user: upload a CSV, compute totals per region, write a
/// report and an SVG chart, download both, and keep state for the next run.
#[test]
fn a_csv_becomes_a_report_and_a_chart_with_state_kept() {
    let dir = data_dir("workflow");
    let service = Service::start(dir.path());
    let (status, uploaded) = service.json(
        "key-alice",
        "POST",
        "/v1/sessions/analysis-1/files",
        Some(json!({"filename": "sales.csv", "content_base64": b64(SALES.as_bytes())})),
    );
    assert_eq!((status, &uploaded["path"]), (201, &json!("/mnt/data/sales.csv")), "{uploaded}");
    let (status, run) = service.json("key-alice", "POST", "/v1/sessions/analysis-1/run", Some(json!({"code": REPORT})));
    assert_eq!(status, 200, "{run}");
    assert_eq!((run["exit_code"].as_i64(), run["stdout"].as_str()), (Some(0), Some("{'east': 50, 'north': 150, 'south': 100}\n")), "{run}");
    let artifacts: Vec<&str> = run["artifacts"].as_array().expect("artifacts").iter().filter_map(|a| a["filename"].as_str()).collect();
    assert_eq!(artifacts, ["chart.svg", "report.md"], "created files are reported, the unchanged upload is not");
    // Downloaded as a workflow tool would: the signed URL alone, no header.
    let fetch = |name: &str| {
        let artifact = run["artifacts"].as_array().expect("artifacts").iter().find(|a| a["filename"] == name).expect("artifact").clone();
        let response = reqwest::blocking::get(artifact["download_url"].as_str().expect("download_url")).expect("download");
        assert_eq!(response.status().as_u16(), 200, "{artifact}");
        let mime = response.headers()["content-type"].to_str().expect("type").to_owned();
        (artifact, mime, response.bytes().expect("bytes").to_vec())
    };
    let (report_artifact, report_mime, report) = fetch("report.md");
    let report = String::from_utf8(report).expect("utf-8");
    assert!(report.contains("| north | 150 | 75 |"), "{report}");
    assert_eq!((report_mime.as_str(), report_artifact["size_bytes"].as_u64()), ("text/markdown; charset=utf-8", Some(report.len() as u64)));
    let (chart_artifact, chart_mime, chart) = fetch("chart.svg");
    assert!(chart.starts_with(b"<svg") && chart.ends_with(b"</svg>"));
    assert_eq!(chart_mime, "image/svg+xml");
    assert_eq!(chart_artifact["sha256"].as_str(), Some(hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&chart)).as_str()));
    let (_, again) = service.json("key-alice", "POST", "/v1/sessions/analysis-1/run", Some(json!({"code": "print(summary['north'] * 2)"})));
    assert_eq!((again["stdout"].as_str(), again["artifacts"].as_array().map(Vec::len)), (Some("300\n"), Some(0)), "{again}");
    let log = service.process.wait_for_log(|l| l.contains("\"message\":\"run\"") && l.contains("analysis-1")).expect("a run log line");
    assert!(!log.contains("csv.DictReader") && !log.contains("north"), "the log carries no code or output: {log}");
}

/// Boundary: the tenant of the API key scopes every session; one tenant's
/// session of the same name is another session, and unreachable to others.
#[test]
fn tenants_never_meet_and_callers_need_a_key() {
    let dir = data_dir("tenants");
    let service = Service::start(dir.path());
    service.json("key-alice", "POST", "/v1/sessions/shared-name/run", Some(json!({"code": "secret = 'alice'\nopen('a.txt', 'w').write('alice')"})));
    let (status, _) = service.json("key-bob", "GET", "/v1/sessions/shared-name/files/a.txt", None);
    assert_eq!(status, 404, "bob's session of that name does not exist");
    let (_, run) = service.json("key-bob", "POST", "/v1/sessions/shared-name/run", Some(json!({"code": "import os\nprint('secret' in globals(), os.listdir('.'))"})));
    assert_eq!(run["stdout"], "False []\n", "{run}");
    let (status, body) = service.json("", "GET", "/v1/sessions/shared-name/files", None);
    assert_eq!((status, &body["error"]["code"]), (401, &json!("unauthorized")));
    assert_eq!(service.json("wrong-key", "GET", "/v1/sessions/shared-name/files", None).0, 401);
}

#[test]
fn files_refuse_bad_names_and_keep_the_overwrite_rule() {
    let dir = data_dir("files");
    let service = Service::start(dir.path());
    let path = "/v1/sessions/files-1/files";
    for name in ["../x", "/etc/passwd", "a/b", "..", "", "a\u{0}b", "a\nb"] {
        let (status, body) = service.json("key-alice", "POST", path, Some(json!({"filename": name, "content_base64": b64(b"x")})));
        assert_eq!((status, &body["error"]["code"]), (400, &json!("invalid_name")), "{name:?}: {body}");
    }
    let (status, listed) = service.json("key-alice", "GET", path, None);
    assert_eq!((status, &listed["error"]["code"]), (404, &json!("no_such_session")), "a refused upload creates nothing");
    let binary: Vec<u8> = (0..=255u8).rev().collect();
    let raw = Client::new().put(format!("{}{path}/blob.bin", service.base)).header("x-api-key", "key-alice").body(binary.clone()).send().expect("put");
    assert_eq!(raw.status().as_u16(), 201);
    let again = Client::new().put(format!("{}{path}/blob.bin", service.base)).header("x-api-key", "key-alice").body("x").send().expect("put");
    assert_eq!(again.status().as_u16(), 409, "overwrite defaults to false");
    let forced = Client::new().put(format!("{}{path}/blob.bin?overwrite=true", service.base)).header("x-api-key", "key-alice").body(binary.clone()).send().expect("put");
    assert_eq!(forced.status().as_u16(), 201);
    let down = service.call("key-alice", "GET", &format!("{path}/blob.bin"), None);
    assert_eq!(down.bytes().expect("bytes").to_vec(), binary);
    assert_eq!(service.call("key-alice", "DELETE", &format!("{path}/blob.bin"), None).status().as_u16(), 204);
    assert_eq!(service.json("key-alice", "GET", &format!("{path}/blob.bin"), None).0, 404);
    let (status, body) = service.json("key-alice", "POST", path, Some(json!({"filename": "a.txt", "content_base64": "%%%"})));
    assert_eq!((status, &body["error"]["code"]), (400, &json!("invalid_base64")));
}

/// Lifecycle: close removes the session and its directory; a restart finds a
/// live session's files and removes one past its TTL, leaving no orphan.
#[test]
fn close_and_restart_leave_no_orphans() {
    let tmp = data_dir("lifecycle");
    let dir = tmp.path();
    let service = Service::start(dir);
    for (session, ttl) in [("keep", 600), ("brief", 1), ("closing", 600)] {
        assert_eq!(service.json("key-alice", "POST", "/v1/sessions", Some(json!({"session_id": session, "ttl_seconds": ttl}))).0, 201);
        // Not into "brief" over HTTP: a second's stall would find it expired,
        // and the upload would open a fresh session under its name.
        if session != "brief" {
            service.json("key-alice", "POST", &format!("/v1/sessions/{session}/files"), Some(json!({"filename": "f.txt", "content_base64": b64(b"data")})));
        }
    }
    std::fs::write(dir.join("sessions/alice/brief/data/f.txt"), "data").expect("a file in the brief session");
    let (status, closed) = service.json("key-alice", "DELETE", "/v1/sessions/closing", None);
    assert_eq!((status, closed), (200, json!({"status": "closed"})));
    assert_eq!(service.json("key-alice", "GET", "/v1/sessions/closing", None).0, 404);
    assert!(!dir.join("sessions/alice/closing").exists(), "close removes the directory");
    drop(service);
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let restarted = Service::start(dir);
    let (status, files) = restarted.json("key-alice", "GET", "/v1/sessions/keep/files", None);
    assert_eq!((status, files["files"][0]["filename"].as_str()), (200, Some("f.txt")), "{files}");
    assert_eq!(restarted.json("key-alice", "GET", "/v1/sessions/brief/files", None).0, 404);
    let left: Vec<String> = std::fs::read_dir(dir.join("sessions/alice")).expect("tenant dir").flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(left, ["keep"], "0 orphans: only the live session's directory remains");
}

/// `anypath up` offers both faces: the app, and the code interpreter on the
/// sandbox service's own listener.
#[test]
fn anypath_up_serves_the_interpreter_beside_the_app() {
    let kv = common::app::temp_kv("interpreter-up");
    let app = common::app::App::start(&kv);
    let line = app.process.wait_for_log(|l| l.contains("app serving")).expect("the serving line");
    let entry: Value = serde_json::from_str(&line).expect("JSON log line");
    let sandbox = entry["sandbox"].as_str().expect("the sandbox address").to_owned();
    let run = Client::new()
        .post(format!("http://{sandbox}/v1/sessions/up-1/run"))
        .json(&json!({"code": "x = 6 * 7\nprint(x)"}))
        .send()
        .expect("run");
    let report: Value = run.json().expect("report");
    assert_eq!(report["stdout"], "42\n", "{report}");
    assert_eq!(app.send("POST", "/members/", Some(json!({"name": "Ada"}))).status().as_u16(), 201, "the app serves beside it");
}

/// Memory storage: sessions and artifacts live in a RAM-backed directory,
/// nothing lands in the data directory, and a clean stop removes it all.
#[test]
fn memory_storage_touches_no_disk_and_leaves_nothing() {
    // A data directory that does not exist yet, in a directory removed at the end.
    let tmp = data_dir("memory");
    let dir = tmp.path().join("data");
    let mut service = Service::start_with(&dir, &["--storage", "memory"]);
    let (_, run) = service.json("key-alice", "POST", "/v1/sessions/ram/run", Some(json!({"code": "open('a.txt', 'w').write('in memory')"})));
    assert_eq!(run["artifacts"][0]["filename"], "a.txt", "{run}");
    let download = reqwest::blocking::get(run["artifacts"][0]["download_url"].as_str().expect("url")).expect("download");
    assert_eq!(download.text().expect("text"), "in memory");
    assert!(!dir.exists(), "the data directory is never created");
    let line = service.process.wait_for_log(|l| l.contains("interpreter storage")).expect("storage log line");
    let root = PathBuf::from(serde_json::from_str::<Value>(&line).expect("JSON")["root"].as_str().expect("root").to_owned());
    assert!(root.starts_with("/dev/shm") && root.join("sessions/alice/ram/data/a.txt").is_file(), "{}", root.display());
    assert!(service.process.terminate().success());
    assert!(!root.exists(), "stopping removes the in-memory root");
}

/// The OpenAPI document served at `/openapi.json` describes the routes the
/// service has: every documented operation is answered by a handler (never
/// the catch-all 404 or a 405), and every route a test here uses is in it.
#[test]
fn the_openapi_document_matches_the_routes() {
    let dir = data_dir("openapi");
    let service = Service::start(dir.path());
    let (status, spec) = service.json("", "GET", "/openapi.json", None);
    assert_eq!(status, 200);
    let paths = spec["paths"].as_object().expect("paths");
    for used in ["/v1/sessions/{session_id}/run", "/v1/sessions/{session_id}/files/{path}", "/v1/artifacts/{artifact_id}/content", "/files/{session_id}/{filename}", "/v1/exec"] {
        assert!(paths.contains_key(used), "{used} is documented");
    }
    service.json("key-alice", "POST", "/v1/sessions/doc/run", Some(json!({"code": "open('f.txt', 'w').write('x')"})));
    for (template, operations) in paths {
        let path = template.replace("{session_id}", "doc").replace("{path}", "f.txt").replace("{filename}", "f.txt").replace("{artifact_id}", "none").replace("{name}", "none.csv");
        for method in operations.as_object().expect("operations").keys() {
            let response = service.call("key-alice", &method.to_uppercase(), &path, None);
            let status = response.status().as_u16();
            let body: Value = response.json().unwrap_or(Value::Null);
            assert_ne!(status, 405, "{method} {template} has a handler");
            assert_ne!(body["error"]["message"], "no such endpoint", "{method} {template} is routed");
            let documented = operations[method]["responses"].as_object().expect("responses");
            assert!(documented.contains_key(&status.to_string()), "{method} {template} answered {status}, which the document does not list: {body}");
        }
    }
}

/// Boundary: the session quota, enforced by the host's filesystem layer
/// while code writes and on every upload. Code writing past it gets an
/// OSError inside the guest; the directory never holds more than the quota.
#[test]
fn writes_past_the_session_quota_fail_inside_the_guest_and_uploads_are_refused() {
    let tmp = data_dir("quota");
    let dir = tmp.path();
    let service = Service::start_with(dir, &["--max-session-mb", "1", "--max-file-mb", "1", "--max-session-files", "4"]);
    let code = "import errno\nwritten = 0\ntry:\n    with open('big.bin', 'wb') as f:\n        for _ in range(64):\n            f.write(b'x' * 65536)\n            f.flush()\n            written += 65536\nexcept OSError as e:\n    print(errno.errorcode.get(e.errno), written)";
    let (_, run) = service.json("key-alice", "POST", "/v1/sessions/full/run", Some(json!({"code": code})));
    let stdout = run["stdout"].as_str().unwrap_or_default();
    // The write crossing the quota on an open stream reaches Python as EIO
    // (the runner's libc reports stream failures so); the report names the quota.
    assert!(["EDQUOT", "EFBIG", "EIO"].iter().any(|e| stdout.starts_with(e)), "the write fails inside the guest: {run}");
    assert_eq!(run["quota_exceeded"], true, "{run}");
    let (_, again) = service.json("key-alice", "POST", "/v1/sessions/full/run", Some(json!({"code": "try:\n    with open('more.bin', 'wb') as f:\n        f.write(b'y')\nexcept OSError as e:\n    print(e)"})));
    assert!(again["stdout"].as_str().unwrap_or_default().contains("uota"), "a new write names the quota: {again}");
    let held = common_dir_bytes(&dir.join("sessions/alice/full/data"));
    assert!(held <= 1 << 20, "the directory holds {held} bytes, over the 1 MiB quota");
    let (_, files) = service.json("key-alice", "POST", "/v1/sessions/full/run", Some(json!({"code": "import os\nn = 0\ntry:\n    for i in range(10):\n        open(f'f{i}.txt', 'w').close()\n        n += 1\nexcept OSError as e:\n    print(e.errno == __import__('errno').EDQUOT, n)"})));
    assert!(files["stdout"].as_str().unwrap_or_default().starts_with("True"), "creating files past the count fails: {files}");
    let entries = std::fs::read_dir(dir.join("sessions/alice/full/data")).expect("dir").count();
    assert!(entries <= 4, "{entries} entries, over the quota of 4");
    let (status, body) = service.json("key-alice", "POST", "/v1/sessions/other/files", Some(json!({"filename": "big.bin", "content_base64": b64(&vec![0u8; (1 << 20) + 1])})));
    assert_eq!((status, &body["error"]["code"]), (507, &json!("quota_exceeded")), "{body}");
    let (_, listed) = service.json("key-alice", "GET", "/v1/sessions/other/files", None);
    assert_eq!(listed["files"], json!([]), "nothing was written");
}

fn common_dir_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir).expect("dir").flatten().filter_map(|e| e.metadata().ok()).filter(|m| m.is_file()).map(|m| m.len()).sum()
}

/// One server-sent event and when the client had it whole.
struct Received {
    event: String,
    data: Value,
    at: std::time::Instant,
}

/// Reads a `text/event-stream` answer event by event as the bytes arrive,
/// as a browser's `EventSource` does (comments and keep-alives skipped).
fn read_events(response: reqwest::blocking::Response) -> Vec<Received> {
    use std::io::BufRead;
    let mut events = Vec::new();
    let (mut event, mut data) = (String::new(), String::new());
    for line in std::io::BufReader::new(response).lines() {
        let line = line.expect("the stream reads");
        if line.is_empty() {
            if !data.is_empty() {
                let parsed = serde_json::from_str(&data).unwrap_or_else(|e| panic!("event data {data:?} is JSON: {e}"));
                events.push(Received { event: std::mem::take(&mut event), data: parsed, at: std::time::Instant::now() });
            }
            data.clear();
        } else if let Some(name) = line.strip_prefix("event:") {
            event = name.trim().to_owned();
        } else if let Some(piece) = line.strip_prefix("data:") {
            data.push_str(piece.strip_prefix(' ').unwrap_or(piece));
        }
    }
    events
}

fn streamed_run(service: &Service, session: &str, body: Value) -> reqwest::blocking::Response {
    Client::builder()
        .timeout(None)
        .build()
        .expect("client")
        .post(format!("{}/v1/sessions/{session}/run", service.base))
        .header("x-api-key", "key-alice")
        .header("accept", "text/event-stream")
        .json(&body)
        .send()
        .expect("request sent")
}

/// Output reaches a streaming client while the code still runs, and the
/// stream ends with the same report a JSON client gets.
#[test]
fn a_run_streams_its_output_as_server_sent_events() {
    let dir = data_dir("sse");
    let service = Service::start(dir.path());
    let code = "import time\nprint('first')\ntime.sleep(1)\nprint('second')\ndisplay({'k': 1})\n'done'";
    let response = streamed_run(&service, "streamed", json!({"code": code}));
    assert_eq!(response.status(), 200);
    assert!(response.headers()["content-type"].to_str().unwrap_or_default().starts_with("text/event-stream"));
    assert!(response.headers().contains_key("x-request-id"));
    let events = read_events(response);
    let names: Vec<&str> = events.iter().map(|e| e.event.as_str()).collect();
    let first = events.iter().find(|e| e.event == "stdout" && e.data["text"].as_str().is_some_and(|t| t.contains("first"))).expect("first line sent");
    let second = events.iter().find(|e| e.event == "stdout" && e.data["text"].as_str().is_some_and(|t| t.contains("second"))).expect("second line sent");
    // The first line was in the client's hands before the code had written the second.
    assert!(second.at.duration_since(first.at) >= std::time::Duration::from_millis(700), "the first line came with the second: {names:?}");
    let results: Vec<&Value> = events.iter().filter(|e| e.event == "result").map(|e| &e.data).collect();
    assert_eq!(results.iter().map(|r| r["text"].clone()).collect::<Vec<_>>(), vec![json!("{'k': 1}"), json!("'done'")], "{names:?}");
    let last = events.last().expect("events");
    assert_eq!(last.event, "report", "{names:?}");
    let streamed_text: String = events.iter().filter(|e| e.event == "stdout").filter_map(|e| e.data["text"].as_str()).collect();
    assert_eq!((streamed_text.as_str(), last.data["stdout"].as_str()), ("first\nsecond\n", Some("first\nsecond\n")));

    // The same code without the header: the same report, as JSON.
    let (status, plain) = service.json("key-alice", "POST", "/v1/sessions/plain/run", Some(json!({"code": code})));
    assert_eq!(status, 200, "{plain}");
    for field in ["stdout", "stderr", "exit_code", "results", "error", "stdout_truncated"] {
        assert_eq!(plain[field], last.data[field], "{field} differs between the streamed and the plain report");
    }
}

/// The caps hold on the stream: what is streamed is what the report keeps.
#[test]
fn a_streamed_run_keeps_its_output_cap() {
    let dir = data_dir("sse-cap");
    let service = Service::start(dir.path());
    let body = json!({"code": "for i in range(2000):\n    print('line', i)", "limits": {"stdout_bytes": 3000}});
    let events = read_events(streamed_run(&service, "capped", body));
    let streamed: String = events.iter().filter(|e| e.event == "stdout").filter_map(|e| e.data["text"].as_str()).collect();
    let report = &events.last().expect("events").data;
    assert_eq!((report["stdout_truncated"].as_bool(), report["stdout"].as_str().map(str::len)), (Some(true), Some(3000)), "{report}");
    assert_eq!(Some(streamed.as_str()), report["stdout"].as_str(), "the stream sent exactly what the report kept");
}

/// A run refused before it starts is a plain error with its status, even
/// for a client that asked for a stream.
#[test]
fn a_streamed_run_refused_up_front_is_a_plain_error() {
    let dir = data_dir("sse-refused");
    let service = Service::start(dir.path());
    let response = streamed_run(&service, "bad", json!({"code": "1", "env": {"1BAD": "x"}}));
    assert_eq!(response.status(), 400);
    let body: Value = response.json().expect("an envelope");
    assert!(body["error"]["code"].is_string(), "{body}");
}

/// An artifact comes back into a session by its id, in a new session after
/// its own was closed; another tenant cannot name it.
#[test]
fn an_artifact_is_loaded_back_into_a_new_session_by_id() {
    let dir = data_dir("from-artifact");
    let service = Service::start(dir.path());
    let (status, run) = service.json("key-alice", "POST", "/v1/sessions/draft/run", Some(json!({"code": "open('report.md', 'w').write('# Q3\\n')"})));
    assert_eq!(status, 200, "{run}");
    let id = run["artifacts"][0]["id"].as_str().expect("an artifact id").to_owned();
    let (status, _) = service.json("key-alice", "DELETE", "/v1/sessions/draft", None);
    assert_eq!(status, 200);

    let (status, loaded) = service.json("key-alice", "POST", "/v1/sessions/revise/files/from-artifact", Some(json!({"artifact_id": id})));
    assert_eq!((status, &loaded["path"]), (201, &json!("/mnt/data/report.md")), "{loaded}");
    let (_, read) = service.json("key-alice", "POST", "/v1/sessions/revise/run", Some(json!({"code": "print(open('report.md').read(), end='')"})));
    assert_eq!(read["stdout"], "# Q3\n", "{read}");
    let (status, again) = service.json("key-alice", "POST", "/v1/sessions/revise/files/from-artifact", Some(json!({"artifact_id": id})));
    assert_eq!((status, &again["error"]["code"]), (409, &json!("file_exists")), "no silent overwrite: {again}");
    let (status, renamed) = service.json("key-alice", "POST", "/v1/sessions/revise/files/from-artifact", Some(json!({"artifact_id": id, "filename": "old.md"})));
    assert_eq!((status, &renamed["path"]), (201, &json!("/mnt/data/old.md")), "{renamed}");

    // Boundary: tenants. Bob's session cannot load Alice's artifact, even by its id.
    let (status, refused) = service.json("key-bob", "POST", "/v1/sessions/theft/files/from-artifact", Some(json!({"artifact_id": id})));
    assert_eq!((status, &refused["error"]["code"]), (404, &json!("no_such_artifact")), "{refused}");
    let (status, bad) = service.json("key-alice", "POST", "/v1/sessions/revise/files/from-artifact", Some(json!({"artifact_id": id, "filename": "../x"})));
    assert_eq!(status, 400, "{bad}");
    // A file that is itself named from-artifact is still a file.
    let put = service.call("key-alice", "PUT", "/v1/sessions/revise/files/from-artifact", None);
    assert!(put.status().is_success() || put.status().as_u16() == 201, "{}", put.status());
    let got = service.call("key-alice", "GET", "/v1/sessions/revise/files/from-artifact", None);
    assert_eq!(got.status().as_u16(), 200);
}

/// Readiness names each check: ready on a fresh service; a data directory
/// that is gone makes it 503 and says which check failed; back, ready again.
#[test]
fn readiness_names_the_check_that_fails() {
    let dir = data_dir("readyz");
    let service = Service::start(dir.path());
    let (status, ready) = service.json("", "GET", "/readyz", None);
    assert_eq!((status, &ready["status"]), (200, &json!("ready")), "{ready}");
    let names: Vec<&str> = ready["checks"].as_array().expect("checks").iter().filter_map(|c| c["name"].as_str()).collect();
    assert_eq!(names, ["rest_runtime", "session_runtimes", "data_directory", "artifact_store"], "{ready}");
    assert!(ready["checks"][1]["detail"].as_str().is_some_and(|d| d.contains("python")), "{ready}");

    let aside = dir.path().with_extension("aside");
    std::fs::rename(dir.path(), &aside).expect("data directory moved away");
    let (status, not_ready) = service.json("", "GET", "/readyz", None);
    std::fs::rename(&aside, dir.path()).expect("data directory back");
    assert_eq!((status, &not_ready["ready"]), (503, &json!(false)), "{not_ready}");
    let failed: Vec<&str> = not_ready["checks"].as_array().expect("checks").iter().filter(|c| c["ok"] == json!(false)).filter_map(|c| c["name"].as_str()).collect();
    assert!(failed.contains(&"data_directory"), "{not_ready}");
    let (status, _) = service.json("", "GET", "/readyz", None);
    assert_eq!(status, 200);
}

/// `/metrics` as a Prometheus scraper reads it: Prometheus's own Python
/// client parses the exposition; runs are counted by kind and outcome,
/// sessions and artifacts as they are; it needs the service's credentials.
#[test]
fn metrics_count_runs_sessions_and_artifacts_for_a_scraper() {
    let dir = data_dir("metrics");
    let service = Service::start(dir.path());
    service.json("key-alice", "POST", "/v1/sessions/m1/run", Some(json!({"code": "open('a.txt', 'w').write('abc')"})));
    service.json("key-alice", "POST", "/v1/sessions/m1/run", Some(json!({"code": "raise ValueError('no')"})));
    service.json("key-bob", "POST", "/v1/sessions/m2/run", Some(json!({"code": "x = 1"})));
    assert_eq!(service.call("", "GET", "/metrics", None).status().as_u16(), 401, "metrics need credentials");
    let response = service.call("key-alice", "GET", "/metrics", None);
    assert_eq!(response.status().as_u16(), 200);
    let text = response.text().expect("text");

    let python = std::env::var_os("ANYPATH_PYTHON").map(PathBuf::from).unwrap_or_else(|| common::app::repo().join(".venv/bin/python"));
    let parse = "import json, sys\nfrom prometheus_client.openmetrics.parser import text_string_to_metric_families\n\
                 samples = [(s.name, s.labels, s.value) for f in text_string_to_metric_families(sys.stdin.read()) for s in f.samples]\n\
                 print(json.dumps(samples))";
    let mut child = std::process::Command::new(&python)
        .args(["-c", parse])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python starts");
    std::io::Write::write_all(&mut child.stdin.take().expect("stdin"), text.as_bytes()).expect("written");
    let output = child.wait_with_output().expect("parsed");
    assert!(output.status.success(), "the exposition does not parse: {}\n{text}", String::from_utf8_lossy(&output.stderr));
    let samples: Vec<(String, std::collections::BTreeMap<String, String>, f64)> = serde_json::from_slice(&output.stdout).expect("samples");
    let value = |name: &str, labels: &[(&str, &str)]| {
        samples
            .iter()
            .find(|(n, l, _)| n == name && labels.iter().all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v)))
            .map(|(_, _, v)| *v)
    };
    assert_eq!(value("anypath_runs_total", &[("kind", "session"), ("outcome", "ok")]), Some(2.0), "{text}");
    assert_eq!(value("anypath_runs_total", &[("kind", "session"), ("outcome", "exception")]), Some(1.0), "{text}");
    assert_eq!(value("anypath_run_duration_seconds_count", &[("kind", "session")]), Some(3.0), "{text}");
    assert_eq!(value("anypath_sessions_created_total", &[]), Some(2.0), "{text}");
    assert_eq!(value("anypath_sessions_live", &[]), Some(2.0), "{text}");
    // Two live sessions hold some pages of their own, far fewer than their
    // linear memories (tens of MiB each, nearly all the shared image's).
    let live_bytes = value("anypath_sessions_live_bytes", &[]).unwrap_or(0.0);
    assert!(live_bytes > 0.0 && live_bytes < 2.0 * 24.0 * 1048576.0, "{live_bytes} bytes live: {text}");
    assert_eq!(value("anypath_artifacts_kept_total", &[]), Some(1.0), "{text}");
    assert_eq!(value("anypath_artifact_bytes_kept_total", &[]), Some(3.0), "{text}");
    assert!(value("anypath_running", &[]).is_some(), "{text}");
}
