//! The E2B API's edges as raw HTTP sees them, where E2B's SDKs would hide
//! them: every bad input is E2B's error shape (`{"code", "message"}`, or
//! Connect's for the Connect services) with its status and a request id,
//! never a 500 or a hang.
//!
//! Boundaries proved: a sandbox call without the sandbox's access token is
//! 401 (`a_secure_sandbox_needs_its_token`); another tenant's sandbox is as
//! absent as one never made (`tenants_see_only_their_sandboxes`); a path,
//! `..` and all, never leaves the sandbox's own tree, and the host's files
//! are neither read nor written (`paths_stay_in_the_sandboxs_tree`).

use crate::common;

use reqwest::blocking::{Client, RequestBuilder, Response};
use serde_json::{Value, json};

use common::service::Service;

const KEYS: &str = "e2b_a11ce:alice,e2b_b0b:bob";

/// The service and its E2B address.
struct E2b {
    _service: Service,
    url: String,
    client: Client,
}

impl E2b {
    fn start(dir: &tempfile::TempDir) -> Self {
        Self::start_on(dir.path())
    }

    fn start_on(dir: &std::path::Path) -> Self {
        let service = Service::start_open(dir, &["--api-keys", KEYS, "--e2b-listen", "127.0.0.1:0"]);
        let line = service.process.wait_for_log(|line| line.contains("E2B API serving")).expect("the E2B listener is announced");
        let entry: Value = serde_json::from_str(&line).expect("a JSON log line");
        let url = format!("http://{}", entry["listen"].as_str().expect("an address"));
        Self { _service: service, url, client: Client::new() }
    }

    fn control(&self, method: &str, path: &str, key: &str) -> RequestBuilder {
        self.client.request(method.parse().expect("a method"), format!("{}{path}", self.url)).header("x-api-key", key)
    }

    /// A sandbox call, with the sandbox's headers and its token.
    fn envd(&self, method: &str, path: &str, sandbox: &Value) -> RequestBuilder {
        let mut request = self.client.request(method.parse().expect("a method"), format!("{}{path}", self.url)).header("e2b-sandbox-id", id(sandbox));
        if let Some(token) = sandbox["envdAccessToken"].as_str() {
            request = request.header("x-access-token", token);
        }
        request
    }

    /// A new sandbox of `key`'s tenant, through the second API (secure).
    fn create(&self, key: &str) -> Value {
        let response = self.control("POST", "/v2/sandboxes", key).json(&json!({"templateID": "code-interpreter-v1", "timeout": 60})).send().expect("sent");
        assert_eq!(response.status(), 201);
        response.json().expect("a sandbox")
    }
}

fn id(sandbox: &Value) -> &str {
    sandbox["sandboxID"].as_str().expect("a sandbox id")
}

/// Asserts E2B's error shape with `status`, and returns its message.
fn e2b_error(response: Response, status: u16) -> String {
    assert_eq!(response.status().as_u16(), status);
    assert!(response.headers().contains_key("x-request-id"), "every answer names its request");
    let body: Value = response.json().expect("a JSON error");
    assert_eq!(body["code"], status, "{body}");
    body["message"].as_str().expect("a message").to_owned()
}

/// Asserts Connect's error shape with `code`, and returns its message.
fn connect_error(response: Response, status: u16, code: &str) -> String {
    assert_eq!(response.status().as_u16(), status);
    let body: Value = response.json().expect("a JSON error");
    assert_eq!(body["code"], code, "{body}");
    body["message"].as_str().expect("a message").to_owned()
}

#[test]
fn a_sandbox_carries_every_field_the_sdk_requires() {
    let dir = common::scratch("anypath-e2b-api-");
    let e2b = E2b::start(&dir);
    let sandbox = e2b.create("e2b_a11ce");
    for field in ["templateID", "sandboxID", "clientID", "envdVersion", "envdAccessToken"] {
        assert!(sandbox[field].is_string(), "{field} in {sandbox}");
    }
    let detail: Value = e2b.control("GET", &format!("/sandboxes/{}", id(&sandbox)), "e2b_a11ce").send().expect("sent").json().expect("json");
    for field in ["templateID", "sandboxID", "clientID", "startedAt", "endAt", "envdVersion", "state", "cpuCount", "memoryMB", "diskSizeMB"] {
        assert!(!detail[field].is_null(), "{field} in {detail}");
    }
    assert_eq!(detail["state"], "running");
}

#[test]
fn bad_control_plane_input_is_e2bs_error_shape() {
    let dir = common::scratch("anypath-e2b-api-");
    let e2b = E2b::start(&dir);
    let message = e2b_error(e2b.control("POST", "/v2/sandboxes", "e2b_a11ce").json(&json!({"templateID": "node"})).send().expect("sent"), 404);
    assert!(message.contains("code-interpreter-v1") && message.contains("base"), "{message}");
    e2b_error(e2b.control("POST", "/v2/sandboxes", "e2b_a11ce").body("{not json").send().expect("sent"), 400);
    e2b_error(e2b.control("POST", "/v2/sandboxes", "e2b_a11ce").json(&json!({"timeout": 5})).send().expect("sent"), 400);
    e2b_error(e2b.control("POST", "/v2/sandboxes", "e2b_0").json(&json!({"templateID": "base"})).send().expect("sent"), 401);
    e2b_error(e2b.control("GET", "/sandboxes/nosuchsandbox", "e2b_a11ce").send().expect("sent"), 404);
    e2b_error(e2b.control("GET", "/v2/sandboxes?state=sleeping", "e2b_a11ce").send().expect("sent"), 400);
    e2b_error(e2b.control("GET", "/v2/sandboxes?limit=x", "e2b_a11ce").send().expect("sent"), 400);
    e2b_error(e2b.control("GET", "/no/such/route", "e2b_a11ce").send().expect("sent"), 404);
    let sandbox = e2b.create("e2b_a11ce");
    e2b_error(e2b.control("POST", &format!("/sandboxes/{}/timeout", id(&sandbox)), "e2b_a11ce").json(&json!({})).send().expect("sent"), 400);
    e2b_error(e2b.control("POST", &format!("/sandboxes/{}/fork", id(&sandbox)), "e2b_a11ce").json(&json!({"count": 0})).send().expect("sent"), 400);
    e2b_error(e2b.control("POST", &format!("/sandboxes/{}/fork", id(&sandbox)), "e2b_a11ce").json(&json!({"count": 101})).send().expect("sent"), 400);
    assert_eq!(e2b.control("POST", &format!("/sandboxes/{}/pause", id(&sandbox)), "e2b_a11ce").send().expect("sent").status(), 204);
    e2b_error(e2b.control("POST", &format!("/sandboxes/{}/pause", id(&sandbox)), "e2b_a11ce").send().expect("sent"), 409);
    // A paused sandbox's envd is 502, as E2B's proxy answers it.
    assert_eq!(e2b.envd("GET", "/health", &sandbox).send().expect("sent").status(), 502);
    e2b_error(e2b.envd("POST", "/execute", &sandbox).json(&json!({"code": "1"})).send().expect("sent"), 502);
}

#[test]
fn tenants_see_only_their_sandboxes() {
    let dir = common::scratch("anypath-e2b-api-");
    let e2b = E2b::start(&dir);
    let alices = e2b.create("e2b_a11ce");
    let path = format!("/sandboxes/{}", id(&alices));
    e2b_error(e2b.control("GET", &path, "e2b_b0b").send().expect("sent"), 404);
    e2b_error(e2b.control("DELETE", &path, "e2b_b0b").send().expect("sent"), 404);
    e2b_error(e2b.control("POST", &format!("{path}/fork"), "e2b_b0b").json(&json!({})).send().expect("sent"), 404);
    let bobs: Value = e2b.control("GET", "/v2/sandboxes", "e2b_b0b").send().expect("sent").json().expect("json");
    assert_eq!(bobs, json!([]));
    // The key's `e2b_` prefix is optional: `a11ce` is Alice's key too.
    let listed: Value = e2b.control("GET", "/v2/sandboxes", "a11ce").send().expect("sent").json().expect("json");
    assert_eq!(listed.as_array().map(Vec::len), Some(1));
}

#[test]
fn a_secure_sandbox_needs_its_token() {
    let dir = common::scratch("anypath-e2b-api-");
    let e2b = E2b::start(&dir);
    let sandbox = e2b.create("e2b_a11ce");
    let bare = |path: &str| e2b.client.post(format!("{}{path}", e2b.url)).header("e2b-sandbox-id", id(&sandbox));
    e2b_error(bare("/execute").json(&json!({"code": "1"})).send().expect("sent"), 401);
    e2b_error(bare("/files?path=a.txt").body("x").header("content-type", "application/octet-stream").send().expect("sent"), 401);
    connect_error(bare("/filesystem.Filesystem/ListDir").json(&json!({"path": "/home/user"})).send().expect("sent"), 401, "unauthenticated");
    let wrong = e2b.client.get(format!("{}/files?path=a.txt", e2b.url)).header("e2b-sandbox-id", id(&sandbox)).header("x-access-token", "nope");
    e2b_error(wrong.send().expect("sent"), 401);
    // A forged signature opens nothing.
    e2b_error(e2b.client.get(format!("{}/files?path=a.txt&signature=v1_forged", e2b.url)).send().expect("sent"), 401);
    // With the token the same calls work.
    let upload = e2b.envd("POST", "/files?path=a.txt", &sandbox).header("content-type", "application/octet-stream").body("x").send().expect("sent");
    assert_eq!(upload.status(), 200);
}

#[test]
fn paths_stay_in_the_sandboxs_tree() {
    let dir = common::scratch("anypath-e2b-api-");
    let e2b = E2b::start(&dir);
    let sandbox = e2b.create("e2b_a11ce");
    let host_passwd = std::fs::read("/etc/passwd").expect("the host's file");
    // `..` stops at the sandbox's root: these name the sandbox's own /etc/passwd, which it does not have.
    for path in ["/etc/passwd", "/home/user/../../etc/passwd", "../../../../etc/passwd"] {
        let response = e2b.envd("GET", &format!("/files?path={}", urlencode(path)), &sandbox).send().expect("sent");
        assert!(e2b_error(response, 404).contains(path));
        let stat = e2b.envd("POST", "/filesystem.Filesystem/Stat", &sandbox).json(&json!({"path": path})).send().expect("sent");
        connect_error(stat, 404, "not_found");
    }
    let written = e2b.envd("POST", &format!("/files?path={}", urlencode("/home/user/../../../etc/passwd")), &sandbox).header("content-type", "application/octet-stream").body("the sandbox's").send().expect("sent");
    assert_eq!(written.status(), 200);
    let written: Value = written.json().expect("the written files");
    assert_eq!(written[0]["path"], "/etc/passwd", "{written}");
    let read = e2b.envd("GET", "/files?path=/etc/passwd", &sandbox).send().expect("sent");
    assert_eq!(read.text().expect("a body"), "the sandbox's");
    assert_eq!(std::fs::read("/etc/passwd").expect("the host's file"), host_passwd, "the host's file is untouched");
    let tmp = e2b.envd("POST", "/filesystem.Filesystem/Stat", &sandbox).json(&json!({"path": "/tmp"})).send().expect("sent");
    assert_eq!(tmp.json::<Value>().expect("an entry")["entry"]["type"], "FILE_TYPE_DIRECTORY");
    let missing = e2b.envd("GET", "/files?path=/home/user/missing.txt", &sandbox).send().expect("sent");
    assert!(e2b_error(missing, 404).contains("/home/user/missing.txt"));
    let stat = e2b.envd("POST", "/filesystem.Filesystem/Stat", &sandbox).json(&json!({"path": "/home/user/missing.txt"})).send().expect("sent");
    connect_error(stat, 404, "not_found");
    connect_error(e2b.envd("POST", "/filesystem.Filesystem/Stat", &sandbox).body("{").send().expect("sent"), 400, "invalid_argument");
    connect_error(e2b.envd("POST", "/filesystem.Filesystem/Frobnicate", &sandbox).json(&json!({})).send().expect("sent"), 501, "unimplemented");
}

/// What envd 0.6 answers: metadata from `X-Metadata-*` headers, permission
/// bits as `mode`, a quiet removal of what is not there, envd's version.
#[test]
fn envd_answers_as_its_version_does() {
    let dir = common::scratch("anypath-e2b-api-");
    let e2b = E2b::start(&dir);
    let sandbox = e2b.create("e2b_a11ce");
    assert_eq!(sandbox["envdVersion"], "0.6.4");
    let upload = e2b
        .envd("POST", "/files?path=meta.txt", &sandbox)
        .header("content-type", "application/octet-stream")
        .header("x-metadata-author", "mish")
        .body("x")
        .send()
        .expect("sent");
    assert_eq!(upload.status(), 200);
    let written: Value = upload.json().expect("the written files");
    assert_eq!(written[0]["metadata"], json!({"author": "mish"}), "{written}");
    let stat: Value = e2b.envd("POST", "/filesystem.Filesystem/Stat", &sandbox).json(&json!({"path": "meta.txt"})).send().expect("sent").json().expect("an entry");
    assert_eq!((stat["entry"]["mode"].as_u64(), stat["entry"]["metadata"].clone()), (Some(0o644), json!({"author": "mish"})), "{stat}");
    let home: Value = e2b.envd("POST", "/filesystem.Filesystem/Stat", &sandbox).json(&json!({"path": "/home/user"})).send().expect("sent").json().expect("an entry");
    assert_eq!(home["entry"]["mode"].as_u64(), Some(0o755), "{home}");
    let removed = e2b.envd("POST", "/filesystem.Filesystem/Remove", &sandbox).json(&json!({"path": "/home/user/never.txt"})).send().expect("sent");
    assert_eq!(removed.status(), 200);
}

/// envd's process service as Connect's JSON protocol carries it: `Start`
/// streams enveloped `start`, `data` (base64) and `end` events; what it
/// cannot do is Connect's own error, in the stream or as a unary answer.
#[test]
fn process_calls_speak_envds_protocol() {
    let dir = common::scratch("anypath-e2b-api-");
    let e2b = E2b::start(&dir);
    let sandbox = e2b.create("e2b_a11ce");
    let start = |message: &[u8]| {
        let mut framed = vec![0u8];
        framed.extend_from_slice(&(message.len() as u32).to_be_bytes());
        framed.extend_from_slice(message);
        let streamed = e2b.envd("POST", "/process.Process/Start", &sandbox).header("content-type", "application/connect+json").body(framed).send().expect("sent");
        assert_eq!(streamed.status(), 200);
        let body = streamed.bytes().expect("a body");
        let mut frames = Vec::new();
        let mut at = 0;
        while at + 5 <= body.len() {
            let len = u32::from_be_bytes([body[at + 1], body[at + 2], body[at + 3], body[at + 4]]) as usize;
            let message: Value = serde_json::from_slice(&body[at + 5..at + 5 + len]).expect("a JSON message");
            frames.push((body[at], message));
            at += 5 + len;
        }
        frames
    };
    let frames = start(br#"{"process":{"cmd":"/bin/bash","args":["-l","-c","echo hi; exit 4"]}}"#);
    assert!(frames[0].1["event"]["start"]["pid"].as_u64().is_some(), "{frames:?}");
    let data: Vec<&Value> = frames.iter().filter_map(|(_, m)| m["event"].get("data")).collect();
    assert_eq!(data, [&json!({"stdout": "aGkK"})], "stdout as base64: {frames:?}");
    let end = frames.iter().find_map(|(_, m)| m["event"].get("end")).expect("an end event");
    assert_eq!((end["exitCode"].as_i64(), end["exited"].as_bool()), (Some(4), Some(true)), "{end}");
    assert_eq!(frames.last().map(|(flag, _)| *flag), Some(2), "an end-of-stream envelope closes it");
    // A terminal is not there: the stream ends with Connect's error.
    let frames = start(br#"{"process":{"cmd":"/bin/bash"},"pty":{"size":{"cols":80,"rows":24}}}"#);
    assert_eq!((frames[0].0, frames[0].1["error"]["code"].as_str()), (2, Some("unimplemented")), "{frames:?}");
    // A command the service refuses before it starts ends its stream with
    // the refusal as Connect's error, as envd's does for a process that
    // cannot start (not with an exit code and no message).
    let frames = start(br#"{"process":{"cmd":"/bin/bash","args":["-c","ls"],"cwd":"relative/dir"}}"#);
    let refused = frames.last().expect("a frame");
    assert_eq!((refused.0, refused.1["error"]["code"].as_str()), (2, Some("invalid_argument")), "{frames:?}");
    assert!(refused.1["error"]["message"].as_str().is_some_and(|m| m.contains("cwd")), "{frames:?}");
    let listed = e2b.envd("POST", "/process.Process/List", &sandbox).json(&json!({})).send().expect("sent");
    assert_eq!(listed.status(), 200);
    assert_eq!(listed.json::<Value>().expect("JSON")["processes"], json!([]), "ended commands are not listed");
    let missing = e2b.envd("POST", "/process.Process/SendInput", &sandbox).json(&json!({"process": {"pid": 4242}, "input": {"stdin": "aGk="}})).send().expect("sent");
    assert!(connect_error(missing, 404, "not_found").contains("4242"));
    let resize = e2b.envd("POST", "/process.Process/Update", &sandbox).json(&json!({"process": {"pid": 1}})).send().expect("sent");
    assert!(connect_error(resize, 501, "unimplemented").contains("terminal"));
}

#[test]
fn execute_refuses_what_it_cannot_run() {
    let dir = common::scratch("anypath-e2b-api-");
    let e2b = E2b::start(&dir);
    let sandbox = e2b.create("e2b_a11ce");
    let ts = e2b.envd("POST", "/execute", &sandbox).json(&json!({"code": "1", "language": "typescript"})).send().expect("sent");
    assert!(e2b_error(ts, 400).contains("no TypeScript compiler"));
    let r = e2b.envd("POST", "/execute", &sandbox).json(&json!({"code": "1", "language": "r"})).send().expect("sent");
    assert!(e2b_error(r, 400).contains("runs Python and JavaScript"));
    e2b_error(e2b.envd("POST", "/execute", &sandbox).json(&json!({"code": "1", "context_id": "nope"})).send().expect("sent"), 404);
    e2b_error(e2b.envd("POST", "/execute", &sandbox).body("{").send().expect("sent"), 400);
    e2b_error(e2b.client.post(format!("{}/execute", e2b.url)).json(&json!({"code": "1"})).send().expect("sent"), 400);
    let ran = e2b.envd("POST", "/execute", &sandbox).json(&json!({"code": "print('hi')\n'done'"})).send().expect("sent");
    assert_eq!(ran.status(), 200);
    let lines: Vec<Value> = ran.text().expect("text").lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect();
    let kinds: Vec<&str> = lines.iter().filter_map(|l| l["type"].as_str()).collect();
    assert_eq!(kinds, ["number_of_executions", "stdout", "result", "end_of_execution"], "{lines:?}");
    assert_eq!(lines[2]["text"], "done", "a string's quotes come off, as E2B's do");
}

/// A paused sandbox outlives the service: a new process knows it by its
/// id, and connecting resumes the state it was paused with.
#[test]
fn a_paused_sandbox_survives_a_restart() {
    let dir = common::scratch("anypath-e2b-api-");
    let sandbox = {
        let e2b = E2b::start(&dir);
        let sandbox = e2b.create("e2b_a11ce");
        let ran = e2b.envd("POST", "/execute", &sandbox).json(&json!({"code": "kept = 6 * 7"})).send().expect("sent");
        assert_eq!(ran.status(), 200);
        assert!(ran.text().expect("text").contains("end_of_execution"));
        assert_eq!(e2b.control("POST", &format!("/sandboxes/{}/pause", id(&sandbox)), "e2b_a11ce").send().expect("sent").status(), 204);
        // The sandboxes' file is brought up to date once a second.
        std::thread::sleep(std::time::Duration::from_millis(1500));
        sandbox
    };
    let e2b = E2b::start_on(dir.path());
    let detail: Value = e2b.control("GET", &format!("/sandboxes/{}", id(&sandbox)), "e2b_a11ce").send().expect("sent").json().expect("json");
    assert_eq!(detail["state"], "paused", "{detail}");
    let connected = e2b.control("POST", &format!("/v2/sandboxes/{}/connect", id(&sandbox)), "e2b_a11ce").json(&json!({"timeout": 60})).send().expect("sent");
    assert_eq!(connected.status(), 201);
    let ran = e2b.envd("POST", "/execute", &sandbox).json(&json!({"code": "kept"})).send().expect("sent");
    let lines: Vec<Value> = ran.text().expect("text").lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect();
    assert!(lines.iter().any(|l| l["type"] == "result" && l["text"] == "42"), "{lines:?}");
}

/// The query-string encoding of `text`.
fn urlencode(text: &str) -> String {
    text.bytes().map(|b| if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) { (b as char).to_string() } else { format!("%{b:02X}") }).collect()
}
