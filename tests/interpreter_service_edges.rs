//! The code interpreter at its edges, as a user meets them over HTTP: files as
//! large as the quota allows, refusals that are always the JSON envelope,
//! reads that never write, the same report on both runtimes however much a
//! cell prints, and a restart that says what it lost.

use crate::common;

use std::time::Duration;

use anypath_sandbox::{CellReport, CellRequest, LimitOverrides, SessionRuntime};
use base64::Engine;
use reqwest::blocking::Client;
use serde_json::{Value, json};

use common::service::Service;

const MIB: usize = 1 << 20;

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A CSV of about `bytes` bytes.
fn csv(bytes: usize) -> Vec<u8> {
    let mut text = String::from("id,region,amount\n");
    let mut row = 0;
    while text.len() < bytes {
        text.push_str(&format!("{row},region-{},{}\n", row % 7, row * 3 % 1000));
        row += 1;
    }
    text.into_bytes()
}

/// `PUT` of raw bytes as a file of the session.
fn put(service: &Service, key: &str, path: &str, bytes: Vec<u8>) -> (u16, Value, Option<String>) {
    let response = Client::builder()
        .timeout(Duration::from_secs(120))
        .build()
        .expect("client")
        .put(format!("{}{path}", service.base))
        .header("x-api-key", key)
        .header("x-request-id", "edge-upload-1")
        .body(bytes)
        .send()
        .expect("request sent");
    let id = response.headers().get("x-request-id").and_then(|v| v.to_str().ok()).map(str::to_owned);
    let status = response.status().as_u16();
    (status, response.json().unwrap_or(Value::Null), id)
}

/// Boundary: the HTTP body limit of the routes that take a file. It follows
/// the upload quota: a 50 MB file passes raw and as base64 under the default
/// quota, a 2.6 MiB CSV and a 3 MB file pass under a 4 MiB quota, and a body
/// past the limit is refused with the JSON envelope and the request id, not
/// the framework's plain text.
#[test]
fn uploads_as_large_as_the_quota_allows_pass_and_larger_bodies_get_the_envelope() {
    let dir = tempfile::tempdir().expect("temp dir");
    let service = Service::start(dir.path());
    let large = vec![b'a'; 50 * 1_000_000];
    let (status, body, _) = put(&service, "key-alice", "/v1/sessions/big/files/raw.bin", large.clone());
    assert_eq!((status, body["size_bytes"].as_u64()), (201, Some(50_000_000)), "{body}");
    let (status, body) = service.json(
        "key-alice",
        "POST",
        "/v1/sessions/big/files",
        Some(json!({"filename": "encoded.bin", "content_base64": b64(&large)})),
    );
    assert_eq!((status, body["size_bytes"].as_u64()), (201, Some(50_000_000)), "{body}");
    let on_disk = std::fs::metadata(dir.path().join("sessions/alice/big/data/encoded.bin")).expect("stored").len();
    assert_eq!(on_disk, 50_000_000);

    let dir = tempfile::tempdir().expect("temp dir");
    let small = Service::start_with(dir.path(), &["--max-file-mb", "4"]);
    let sales = csv(2_726_297); // 2.6 MiB
    let (status, body) = small.json(
        "key-alice",
        "POST",
        "/v1/sessions/csv/files",
        Some(json!({"filename": "sales.csv", "content_base64": b64(&sales)})),
    );
    assert_eq!(status, 201, "{body}");
    let (status, body, _) = put(&small, "key-alice", "/v1/sessions/csv/files/three.bin", vec![b'x'; 3 * 1_000_000]);
    assert_eq!(status, 201, "{body}");
    let (status, body) = small.json("key-alice", "POST", "/v1/sessions/csv/run", Some(json!({"code": "import csv\nprint(sum(1 for _ in csv.DictReader(open('sales.csv'))))"})));
    assert_eq!((status, body["exit_code"].as_i64()), (200, Some(0)), "the uploaded CSV is whole: {body}");

    let (status, body, id) = put(&small, "key-alice", "/v1/sessions/csv/files/over.bin", vec![b'x'; 8 * MIB]);
    assert_eq!(status, 413, "{body}");
    assert_eq!(body["error"]["code"], "body_too_large", "{body}");
    assert_eq!(body["error"]["request_id"], "edge-upload-1", "{body}");
    assert_eq!(id.as_deref(), Some("edge-upload-1"));
    let (status, body, _) = put(&small, "key-alice", "/v1/sessions/csv/files/quota.bin", vec![b'x'; 4 * MIB + 1]);
    assert_eq!((status, &body["error"]["code"]), (507, &json!("quota_exceeded")), "under the body limit, over the quota: {body}");
}

/// Boundary: the framework's own refusals (a method a route does not take, a
/// run body over the default limit) are the envelope too, naming the
/// caller's request id.
#[test]
fn framework_refusals_are_the_envelope_with_the_request_id() {
    let dir = tempfile::tempdir().expect("temp dir");
    let service = Service::start(dir.path());
    let client = Client::new();
    let response = client
        .patch(format!("{}/v1/sessions/s1", service.base))
        .header("x-api-key", "key-alice")
        .header("x-request-id", "edge-method-1")
        .send()
        .expect("sent");
    assert_eq!(response.status().as_u16(), 405);
    assert!(response.headers().contains_key("allow"), "the Allow header stays");
    let body: Value = response.json().expect("a JSON body");
    assert_eq!((&body["error"]["code"], &body["error"]["request_id"]), (&json!("method_not_allowed"), &json!("edge-method-1")), "{body}");

    let code = format!("x = '{}'", "y".repeat(3 * MIB));
    let (status, body) = service.json("key-alice", "POST", "/v1/sessions/s1/run", Some(json!({"code": code})));
    assert_eq!((status, &body["error"]["code"]), (413, &json!("body_too_large")), "{body}");
    assert!(body["error"]["request_id"].as_str().is_some_and(|id| !id.is_empty()), "{body}");
}

/// Reading a file over the read cap writes nothing: two reads name the one
/// artifact the run kept, the listing still holds one artifact, and a large
/// uploaded file (never an artifact) is named by its download route.
#[test]
fn reads_over_the_cap_name_the_existing_artifact_and_write_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let service = Service::start_with(dir.path(), &["--read-cap-kib", "64"]);
    let (status, run) = service.json("key-alice", "POST", "/v1/sessions/r/run", Some(json!({"code": "open('large.bin', 'wb').write(b'x' * 100_000)"})));
    assert_eq!(status, 200, "{run}");
    let kept = run["artifacts"][0]["download_url"].as_str().expect("the run kept an artifact").to_owned();
    let mut links = Vec::new();
    for _ in 0..2 {
        let (status, refused) = service.json("key-alice", "GET", "/v1/sessions/r/artifacts/large.bin", None);
        assert_eq!((status, &refused["error"]["code"]), (413, &json!("over_read_cap")), "{refused}");
        let message = refused["error"]["message"].as_str().expect("message");
        links.push(message.split_whitespace().find(|w| w.starts_with("http")).expect("a link").to_owned());
    }
    assert_eq!(links, [kept.clone(), kept.clone()], "both reads name the run's artifact");
    let (_, listing) = service.json("key-alice", "GET", "/v1/sessions/r/artifacts", None);
    assert_eq!(listing["artifacts"].as_array().map(Vec::len), Some(1), "{listing}");
    let fetched = reqwest::blocking::get(&kept).expect("download").bytes().expect("bytes");
    assert_eq!(fetched.len(), 100_000);

    let (status, _, _) = put(&service, "key-alice", "/v1/sessions/r/files/upload.bin", vec![b'u'; 200_000]);
    assert_eq!(status, 201);
    let (status, refused) = service.json("key-alice", "GET", "/v1/sessions/r/artifacts/upload.bin", None);
    assert_eq!(status, 413, "{refused}");
    let message = refused["error"]["message"].as_str().expect("message");
    let link = message.split_whitespace().find(|w| w.starts_with("http")).expect("a link");
    assert!(link.ends_with("/v1/sessions/r/files/upload.bin"), "{link}");
    let fetched = Client::new().get(link).header("x-api-key", "key-alice").send().expect("download").bytes().expect("bytes");
    assert_eq!(fetched.len(), 200_000);
    let (_, listing) = service.json("key-alice", "GET", "/v1/sessions/r/artifacts", None);
    assert_eq!(listing["artifacts"].as_array().map(Vec::len), Some(1), "the read kept nothing: {listing}");
}

fn cell(sandbox: &SessionRuntime, code: &str) -> CellReport {
    let mut session = sandbox.live_instance(None, &LimitOverrides::default());
    common::block_on(session.run(CellRequest { code: code.into(), ..CellRequest::default() }))
}

/// A cell printing 3 MB gets the same report on both runtimes: the run
/// succeeds, stdout is cut at the cap and says so.
#[test]
fn both_runtimes_report_a_cell_that_prints_past_the_cap() {
    for (name, sandbox) in [("python", common::python_sessions()), ("python-data", common::data_sandbox())] {
        let cap = sandbox.limits().stdout_bytes as usize;
        let report = cell(sandbox, "print('x' * 3_000_000)\nprint('\\x1f' * 3_000_000)");
        assert!(report.error.is_none(), "{name}: {:?}", report.error);
        assert_eq!(report.exit_code, 0, "{name}");
        assert!(report.output.stdout_truncated, "{name}");
        assert_eq!(report.output.stdout.len(), cap, "{name}");
    }
}

/// A crash (SIGKILL) loses the live instances: a session whose variables are
/// gone says `state_reset: true` on its first run, and only then; a session
/// that never ran code has lost nothing and says false.
#[test]
fn a_crash_reports_the_state_it_lost() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut service = Service::start(dir.path());
    let (_, run) = service.json("key-alice", "POST", "/v1/sessions/kept/run", Some(json!({"code": "x = 41"})));
    assert_eq!((run["exit_code"].as_i64(), run["state_reset"].as_bool()), (Some(0), Some(false)), "{run}");
    let (status, _, _) = put(&service, "key-alice", "/v1/sessions/files-only/files/a.txt", b"a".to_vec());
    assert_eq!(status, 201);
    service.process.kill();

    let service = Service::start(dir.path());
    let (_, run) = service.json("key-alice", "POST", "/v1/sessions/kept/run", Some(json!({"code": "print(x + 1)"})));
    assert_eq!(run["error"]["kind"], "exception", "{run}");
    assert_eq!(run["state_reset"], true, "the variables are gone and the run says so: {run}");
    let (_, run) = service.json("key-alice", "POST", "/v1/sessions/kept/run", Some(json!({"code": "x = 1\nprint(x)"})));
    assert_eq!((run["stdout"].as_str(), run["state_reset"].as_bool()), (Some("1\n"), Some(false)), "{run}");
    let (_, run) = service.json("key-alice", "POST", "/v1/sessions/files-only/run", Some(json!({"code": "print(open('a.txt').read())"})));
    assert_eq!((run["stdout"].as_str(), run["state_reset"].as_bool()), (Some("a\n"), Some(false)), "{run}");
}

/// A graceful stop (SIGTERM) hibernates every live session: after the next
/// start each session's variables are back on its next run, which says
/// `resumed`; two tenants' sessions of the same name keep their own.
#[test]
fn a_graceful_restart_keeps_every_sessions_variables() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut service = Service::start(dir.path());
    for (key, session, code) in [("key-alice", "one", "x = 41"), ("key-alice", "two", "def f():\n    return 'two'"), ("key-bob", "one", "x = 'bob'")] {
        let (_, run) = service.json(key, "POST", &format!("/v1/sessions/{session}/run"), Some(json!({"code": code})));
        assert_eq!(run["exit_code"], 0, "{run}");
    }
    let stopped = service.process.terminate();
    assert!(stopped.success(), "a graceful stop exits cleanly: {stopped:?}");

    let service = Service::start(dir.path());
    for (key, session, code, expected) in [("key-alice", "one", "print(x + 1)", "42\n"), ("key-alice", "two", "print(f())", "two\n"), ("key-bob", "one", "print(x)", "bob\n")] {
        let (_, run) = service.json(key, "POST", &format!("/v1/sessions/{session}/run"), Some(json!({"code": code})));
        assert_eq!((run["stdout"].as_str(), run["state"].as_str(), run["state_reset"].as_bool()), (Some(expected), Some("resumed"), Some(false)), "{run}");
    }
}

/// An idle session is hibernated after `--hibernate-after-idle-seconds`:
/// the session says so, and its next run resumes its variables.
#[test]
fn an_idle_session_is_hibernated_and_its_next_run_resumes_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let service = Service::start_with(dir.path(), &["--hibernate-after-idle-seconds", "1"]);
    let (_, run) = service.json("key-alice", "POST", "/v1/sessions/idle/run", Some(json!({"code": "x = [1, 2, 3]"})));
    assert_eq!(run["exit_code"], 0, "{run}");
    // Watched on disk: asking the service about the session would use it.
    let image = dir.path().join("sessions/alice/idle/state.img");
    assert!(common::eventually(Duration::from_secs(20), || image.is_file()), "never hibernated");
    // The image lands a moment before the sweep marks the session and lets it go.
    assert!(service.process.wait_for_log(|l| l.contains("idle sessions hibernated")).is_some(), "the sweep finished");
    let (_, info) = service.json("key-alice", "GET", "/v1/sessions/idle", None);
    assert_eq!((info["hibernated"].as_bool(), info["live"].as_bool()), (Some(true), Some(false)), "{info}");
    let (_, run) = service.json("key-alice", "POST", "/v1/sessions/idle/run", Some(json!({"code": "print(sum(x))"})));
    assert_eq!((run["stdout"].as_str(), run["state"].as_str()), (Some("6\n"), Some("resumed")), "{run}");
    assert!(!dir.path().join("sessions/alice/idle/state.img").exists(), "a resumed session's image is gone: its state lives in the instance");
}

/// A fork copies the files and the state; afterwards neither session's
/// changes reach the other. A fork to an existing id is refused, and
/// another tenant cannot fork a session it cannot see.
#[test]
fn a_fork_copies_files_and_state_and_the_two_sessions_part() {
    let dir = tempfile::tempdir().expect("temp dir");
    let service = Service::start(dir.path());
    let (_, run) = service.json("key-alice", "POST", "/v1/sessions/parent/run", Some(json!({"code": "data = [1]\nopen('notes.txt', 'w').write('base')"})));
    assert_eq!(run["exit_code"], 0, "{run}");
    let (status, forked) = service.json("key-alice", "POST", "/v1/sessions/parent/fork", Some(json!({"session_id": "child"})));
    assert_eq!((status, forked["session_id"].as_str(), forked["hibernated"].as_bool()), (201, Some("child"), Some(true)), "{forked}");
    let (_, run) = service.json("key-alice", "POST", "/v1/sessions/child/run", Some(json!({"code": "data.append(2)\nopen('notes.txt', 'a').write('+child')\nprint(data)"})));
    assert_eq!((run["stdout"].as_str(), run["state"].as_str()), (Some("[1, 2]\n"), Some("resumed")), "{run}");
    let (_, run) = service.json("key-alice", "POST", "/v1/sessions/parent/run", Some(json!({"code": "print(data, open('notes.txt').read())"})));
    assert_eq!(run["stdout"], "[1] base\n", "the child's changes never reach the parent: {run}");
    let (status, refused) = service.json("key-alice", "POST", "/v1/sessions/parent/fork", Some(json!({"session_id": "child"})));
    assert_eq!((status, refused["error"]["code"].as_str()), (409, Some("session_exists")), "{refused}");
    let (status, _) = service.json("key-bob", "POST", "/v1/sessions/parent/fork", Some(json!({"session_id": "stolen"})));
    assert_eq!(status, 404, "another tenant's session cannot be forked");
}

/// `count` makes several children in one call, each with the parent's
/// state and its own from then on, runnable at once; a name already taken
/// refuses the whole call and leaves no child behind; a count out of range
/// is a 400 saying so.
#[test]
fn a_fork_with_count_makes_every_child_or_none() {
    let dir = tempfile::tempdir().expect("temp dir");
    let service = Service::start(dir.path());
    let (_, run) = service.json("key-alice", "POST", "/v1/sessions/root/run", Some(json!({"code": "seen = ['root']"})));
    assert_eq!(run["exit_code"], 0, "{run}");
    let (status, forked) = service.json("key-alice", "POST", "/v1/sessions/root/fork", Some(json!({"session_id": "branch", "count": 4})));
    assert_eq!(status, 201, "{forked}");
    let names: Vec<&str> = forked["sessions"].as_array().expect("the children").iter().filter_map(|s| s["session_id"].as_str()).collect();
    assert_eq!(names, ["branch-1", "branch-2", "branch-3", "branch-4"], "{forked}");

    // Every child runs at once, each appending its own name.
    let runs: Vec<_> = names
        .iter()
        .map(|name| {
            let (base, name) = (service.base.clone(), name.to_string());
            std::thread::spawn(move || {
                let code = format!("seen.append('{name}')\nprint(seen)");
                Client::new()
                    .post(format!("{base}/v1/sessions/{name}/run"))
                    .header("x-api-key", "key-alice")
                    .json(&json!({"code": code}))
                    .send()
                    .and_then(|r| r.json::<serde_json::Value>())
            })
        })
        .collect();
    for (name, run) in names.iter().zip(runs) {
        let report = run.join().expect("joined").expect("a report");
        assert_eq!(report["stdout"].as_str(), Some(format!("['root', '{name}']\n").as_str()), "each child has the parent's state and only its own writes: {report}");
    }
    let (_, run) = service.json("key-alice", "POST", "/v1/sessions/root/run", Some(json!({"code": "print(seen)"})));
    assert_eq!(run["stdout"], "['root']\n", "no child's writes reach the parent: {run}");

    // Without a name, the children get one of their own.
    let (status, unnamed) = service.json("key-alice", "POST", "/v1/sessions/root/fork", Some(json!({"count": 2})));
    assert_eq!(status, 201, "{unnamed}");
    let unnamed: Vec<&str> = unnamed["sessions"].as_array().expect("the children").iter().filter_map(|s| s["session_id"].as_str()).collect();
    assert_eq!(unnamed.len(), 2);
    assert!(unnamed.iter().all(|n| n.starts_with("fork-")) && unnamed[0] != unnamed[1], "{unnamed:?}");

    // `clash-2` exists: the call is refused and `clash-1`, made first, is gone again.
    let (_, run) = service.json("key-alice", "POST", "/v1/sessions/clash-2/run", Some(json!({"code": "x = 1"})));
    assert_eq!(run["exit_code"], 0, "{run}");
    let (status, refused) = service.json("key-alice", "POST", "/v1/sessions/root/fork", Some(json!({"session_id": "clash", "count": 3})));
    assert_eq!((status, refused["error"]["code"].as_str()), (409, Some("session_exists")), "{refused}");
    let (status, _) = service.json("key-alice", "GET", "/v1/sessions/clash-1", None);
    assert_eq!(status, 404, "a refused fork leaves no child behind");

    for bad in [json!({"count": 0}), json!({"count": 101}), json!({})] {
        let (status, refused) = service.json("key-alice", "POST", "/v1/sessions/root/fork", Some(bad.clone()));
        assert_eq!(status, 400, "{bad}: {refused}");
        assert!(refused["error"]["message"].as_str().is_some_and(|m| m.contains("count") || m.contains("session_id")), "{refused}");
    }
}

/// Deleting a file does not wait for a run, nor is it refused: files and
/// code are independent, and the running cell sees the file go, as it would
/// on a machine of its own.
#[test]
fn a_delete_during_a_run_goes_through_at_once() {
    let dir = tempfile::tempdir().expect("temp dir");
    let service = Service::start(dir.path());
    let (status, _, _) = put(&service, "key-alice", "/v1/sessions/busy/files/a.txt", b"a".to_vec());
    assert_eq!(status, 201);
    let base = service.base.clone();
    let code = "import os, time\nopen('started', 'w').close()\ndeadline = time.time() + 20\nwhile os.path.exists('a.txt') and time.time() < deadline:\n    time.sleep(0.05)\nprint(os.path.exists('a.txt'))";
    let running = std::thread::spawn(move || {
        Client::new()
            .post(format!("{base}/v1/sessions/busy/run"))
            .header("x-api-key", "key-alice")
            .json(&json!({"code": code}))
            .send()
            .and_then(|r| r.json::<serde_json::Value>())
    });
    // The run has the session once its first line has run.
    let started = dir.path().join("sessions/alice/busy/data/started");
    assert!(common::eventually(Duration::from_secs(20), || started.exists()), "the run never started");
    let asked = std::time::Instant::now();
    let (status, _) = service.json("key-alice", "DELETE", "/v1/sessions/busy/files/a.txt", None);
    assert_eq!(status, 204, "the delete goes through while the cell runs");
    assert!(asked.elapsed() < Duration::from_secs(2), "the delete waited {:?}", asked.elapsed());
    let report = running.join().expect("joined").expect("the run's report");
    assert_eq!(report["stdout"], "False\n", "the cell saw the file go: {report}");
}
