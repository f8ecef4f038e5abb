//! `anypath sandbox serve` over real HTTP: the API, its errors, admission and logs.

use crate::common;

use std::process::Command;
use std::time::Duration;

use reqwest::StatusCode;
use reqwest::blocking::Client;
use serde_json::{Value, json};

/// A running `anypath sandbox serve`.
struct Server {
    process: common::Spawned,
    base: String,
}

impl Server {
    fn start(extra: &[&str], env: &[(&str, &str)]) -> Self {
        let mut command = Command::new(env!("CARGO_BIN_EXE_anypath"));
        command
            .args(["sandbox", "serve", "--listen", "127.0.0.1:0", "--runner"])
            .arg(common::runner_path())
            .args(extra)
            .env_remove("ANYPATH_SANDBOX_TOKEN")
            .envs(env.iter().copied());
        let process = common::Spawned::start(&mut command, "sandbox serving");
        let base = format!("http://{}", process.address);
        Server { process, base }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn exec(&self, body: &Value) -> reqwest::blocking::Response {
        Client::new().post(self.url("/v1/exec")).json(body).send().expect("request sent")
    }

    fn log_lines(&self) -> Vec<String> {
        self.process.log_lines()
    }
}

fn assert_envelope(response: reqwest::blocking::Response, status: StatusCode, code: &str) -> Value {
    assert_eq!(response.status(), status);
    let request_id = response.headers().get("x-request-id").expect("x-request-id").to_str().unwrap().to_owned();
    let body: Value = response.json().expect("JSON error body");
    assert_eq!(body["error"]["code"], code, "{body}");
    assert!(body["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{body}");
    assert_eq!(body["error"]["request_id"], request_id.as_str());
    body
}

#[test]
fn healthz_reports_ok_and_the_limits() {
    let server = Server::start(&[], &[]);
    let health: Value = reqwest::blocking::get(server.url("/healthz")).unwrap().json().unwrap();
    assert_eq!(health["status"], "ok");
    assert_eq!(health["limits"]["timeout_ms"], 5000);
}

#[test]
fn exec_returns_reply_journal_and_metrics_and_echoes_the_request_id() {
    let server = Server::start(&[], &[]);
    let response = Client::new()
        .post(server.url("/v1/exec"))
        .header("x-request-id", "req-123")
        .json(&json!({
            "code": "new_id = store.insert(dict(ctx['body_json']))\nREPLY = {'status': 201, 'headers': {'Location': f'/members/{new_id}'}, 'body': store.get(new_id)}",
            "ctx": {"body_json": {"name": "Alice"}},
            "collections": [{"name": "members", "version": 4, "documents": [{"id": 1, "name": "x"}]}]
        }))
        .send()
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["x-request-id"], "req-123");
    let report: Value = response.json().unwrap();
    assert_eq!(report["ok"], true);
    assert_eq!(report["reply"], json!({"status": 201, "headers": [["Location", "/members/2"]], "body": {"name": "Alice", "id": 2}}));
    assert_eq!(report["mutations"], json!([{"collection": "members", "op": "insert", "id": 2, "document": {"name": "Alice", "id": 2}}]));
    assert!(report["metrics"]["fuel_consumed"].as_u64().unwrap() > 0);
}

#[test]
fn a_failed_block_is_a_typed_error_in_the_report() {
    let server = Server::start(&[], &[]);
    let report: Value = server.exec(&json!({"code": "import os"})).json().unwrap();
    assert_eq!(report["ok"], false);
    assert_eq!(report["error"]["kind"], "policy");
    assert_eq!(report["error"]["node"], "Import");
    assert_eq!(report["error"]["line"], 1);
}

#[test]
fn malformed_json_and_missing_code_are_400() {
    let server = Server::start(&[], &[]);
    let response = Client::new().post(server.url("/v1/exec")).body("{not json").send().unwrap();
    assert_envelope(response, StatusCode::BAD_REQUEST, "invalid_json");
    assert_envelope(server.exec(&json!({"ctx": {}})), StatusCode::BAD_REQUEST, "invalid_json");
}

/// Boundary: the HTTP API cannot reach the test-only switch that disables the policy gate.
#[test]
fn the_policy_gate_cannot_be_switched_off_over_http() {
    let server = Server::start(&[], &[]);
    for field in ["policy_gate", "gate"] {
        let body = assert_envelope(
            server.exec(&json!({"code": "import os\nREPLY = {'status': 200}", field: false})),
            StatusCode::BAD_REQUEST,
            "invalid_json",
        );
        assert!(body["error"]["message"].as_str().unwrap().contains("unknown field"), "{body}");
    }
}

#[test]
fn a_request_cannot_raise_a_limit_over_http() {
    let server = Server::start(&[], &[]);
    let report: Value = server
        .exec(&json!({"code": "while True:\n    pass", "limits": {"timeout_ms": 600000, "fuel": 30000000}}))
        .json()
        .unwrap();
    assert_eq!(report["error"]["kind"], "fuel_exhausted");
    let report: Value = server.exec(&json!({"code": "x = 1", "limits": {"max_code_bytes": 1}})).json().unwrap();
    assert_eq!(report["error"]["kind"], "code_too_large");
}

#[test]
fn body_over_the_limit_is_413() {
    let server = Server::start(&[], &[]);
    let huge = "x".repeat(33 << 20);
    let response = Client::new().post(server.url("/v1/exec")).body(huge).send().unwrap();
    assert_envelope(response, StatusCode::PAYLOAD_TOO_LARGE, "body_too_large");
}

#[test]
fn unknown_paths_are_404_with_the_envelope() {
    let server = Server::start(&[], &[]);
    assert_envelope(reqwest::blocking::get(server.url("/v2/nothing")).unwrap(), StatusCode::NOT_FOUND, "not_found");
}

/// Boundary: the shared secret. Without the right bearer token nothing runs.
#[test]
fn a_configured_token_is_required() {
    let server = Server::start(&[], &[("ANYPATH_SANDBOX_TOKEN", "s3cret")]);
    let body = json!({"code": "REPLY = {'status': 200}"});
    assert_envelope(server.exec(&body), StatusCode::UNAUTHORIZED, "unauthorized");
    let wrong = Client::new().post(server.url("/v1/exec")).bearer_auth("s3cre").json(&body).send().unwrap();
    assert_envelope(wrong, StatusCode::UNAUTHORIZED, "unauthorized");
    let right = Client::new().post(server.url("/v1/exec")).bearer_auth("s3cret").json(&body).send().unwrap();
    assert_eq!(right.status(), StatusCode::OK);
    assert!(!server.log_lines().iter().any(|l| l.contains("s3cret")), "the token is never logged");
}

/// Boundary: bounded admission. Overload is refused at once, never queued without bound.
#[test]
fn overload_is_503_with_retry_after() {
    let server = Server::start(&["--max-concurrent", "1", "--queue-depth", "0"], &[]);
    let busy_url = server.url("/v1/exec");
    let busy = std::thread::spawn(move || {
        Client::new()
            .post(busy_url)
            .json(&json!({"code": "while True:\n    pass", "limits": {"timeout_ms": 3000}}))
            .send()
            .unwrap()
            .json::<Value>()
            .unwrap()
    });
    // Wait until the slow execution holds the only slot, asking the probe,
    // which takes no slot (a probing execution could take it first).
    let probe_url = server.url("/v1/admission");
    let held = (0..200).any(|_| {
        std::thread::sleep(Duration::from_millis(50));
        Client::new().get(&probe_url).send().is_ok_and(|r| r.status() == StatusCode::SERVICE_UNAVAILABLE)
    });
    assert!(held, "the slow execution took the only slot");
    let refused = server.exec(&json!({"code": "REPLY = {'status': 200}"}));
    assert_eq!(refused.headers()["retry-after"], "1");
    assert_envelope(refused, StatusCode::SERVICE_UNAVAILABLE, "overloaded");
    let busy_kind = busy.join().unwrap()["error"]["kind"].clone();
    assert!(busy_kind == "timeout" || busy_kind == "fuel_exhausted", "{busy_kind}");
    // Once the slot is free, work is admitted again.
    assert_eq!(server.exec(&json!({"code": "REPLY = {'status': 200}"})).status(), StatusCode::OK);
}

#[test]
fn one_log_line_per_execution_without_the_codes_data() {
    let server = Server::start(&[], &[]);
    let marker = "zq-private-7731";
    let response = Client::new()
        .post(server.url("/v1/exec"))
        .header("x-request-id", "log-check-1")
        .json(&json!({
            "code": format!("secret = '{marker}'\nprint(secret)\nREPLY = {{'status': 200, 'body': ctx['v']}}"),
            "ctx": {"v": marker},
        }))
        .send()
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert!(server.process.wait_for_log(|l| l.contains("log-check-1")).is_some(), "no exec log line");
    let lines = server.log_lines();
    let exec_lines: Vec<Value> = lines
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["message"] == "exec")
        .collect();
    assert_eq!(exec_lines.len(), 1, "{lines:?}");
    let line = &exec_lines[0];
    assert_eq!(line["request_id"], "log-check-1");
    assert_eq!(line["outcome"], "ok");
    assert!(line["fuel"].as_u64().unwrap() > 0 && line["duration_us"].as_u64().unwrap() > 0);
    assert!(!lines.iter().any(|l| l.contains(marker)), "data leaked into the log");
}
