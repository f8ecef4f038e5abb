//! The operator's guards on the code interpreter, against the real binary:
//! the audit trail (one JSON line per operation on the `anypath::audit`
//! target, on every transport, never holding contents, code, credentials or
//! signatures), the allowlist of a run's environment names and the cap on
//! artifacts one run keeps.

use crate::common;

use std::collections::BTreeMap;

use common::service::Service;
use reqwest::blocking::{Client, RequestBuilder};
use serde::Deserialize;
use serde_json::{Value, json};

const KEY: &str = "key-alice";
/// Markers that must never reach the log: a file's bytes, code, an env value.
const CONTENT: &str = "file-bytes-7c1e-never-logged";
const CODE: &str = "code_marker_93ab_never_logged";
const ENV_VALUE: &str = "env-value-5d20-never-logged";

/// An audit line as the binary writes it (JSON, flattened event fields).
#[derive(Debug, Deserialize)]
struct AuditLine {
    target: String,
    operation: String,
    request_id: String,
    tenant: Option<String>,
    session: Option<String>,
    outcome: String,
    #[serde(default)]
    duration_ms: f64,
    run_id: Option<String>,
    exit_code: Option<i32>,
    subject: Option<String>,
    status: Option<u16>,
    limit_fuel: Option<u64>,
    limit_memory_bytes: Option<u64>,
    limit_timeout_ms: Option<u64>,
}

/// One request of the scripted session, with its own request id.
fn call(service: &Service, method: &str, path: &str, id: &str) -> RequestBuilder {
    Client::new()
        .request(method.parse().expect("a method"), format!("{}{path}", service.base))
        .header("x-api-key", KEY)
        .header("x-request-id", id)
}

fn json_of(request: RequestBuilder) -> (u16, Value) {
    let response = request.send().expect("answers");
    let status = response.status().as_u16();
    (status, response.json().unwrap_or(Value::Null))
}

/// Every audit line the process wrote so far, by request id.
fn audit_lines(service: &Service) -> BTreeMap<String, Vec<AuditLine>> {
    let mut by_request: BTreeMap<String, Vec<AuditLine>> = BTreeMap::new();
    for line in service.process.log_lines() {
        let Ok(entry) = serde_json::from_str::<AuditLine>(&line) else { continue };
        if entry.target == "anypath::audit" {
            by_request.entry(entry.request_id.clone()).or_default().push(entry);
        }
    }
    by_request
}

/// A scripted session over HTTP, one MCP call and one E2B run: each
/// operation writes exactly one audit line with its fields, failures name
/// their error code, and nothing secret is ever in the log.
#[test]
fn every_operation_writes_one_audit_line_and_nothing_secret() {
    let dir = common::scratch("anypath-audit-");
    let service = Service::start_with(dir.path(), &["--e2b-listen", "127.0.0.1:0"]);
    use base64::Engine;
    let encoded = base64::engine::general_purpose::STANDARD.encode(CONTENT);

    let (status, _) = json_of(call(&service, "POST", "/v1/sessions", "op-open").json(&json!({"session_id": "audited"})));
    assert_eq!(status, 201);
    let upload = json!({"filename": "data.txt", "content_base64": encoded});
    assert_eq!(json_of(call(&service, "POST", "/v1/sessions/audited/files", "op-upload").json(&upload)).0, 201);
    let code = format!("{CODE} = open('data.txt').read()\nimport os\nopen('out.txt', 'w').write(os.environ['REGION'] + {CODE})\nprint(len({CODE}))");
    let (status, run) = json_of(call(&service, "POST", "/v1/sessions/audited/run", "op-run").json(&json!({"code": code, "env": {"REGION": ENV_VALUE}})));
    assert_eq!((status, run["exit_code"].as_i64()), (200, Some(0)), "{run}");
    let run_id = run["run_id"].as_str().expect("a run id").to_owned();
    let artifact = run["artifacts"].as_array().and_then(|a| a.first()).cloned().expect("out.txt kept");
    let read = call(&service, "GET", "/v1/sessions/audited/files/data.txt", "op-read").send().expect("answers");
    assert_eq!(read.text().expect("text"), CONTENT);
    let link = artifact["download_url"].as_str().expect("a signed link").to_owned();
    let signature = url::Url::parse(&link).expect("a URL").query_pairs().find(|(k, _)| k == "signature").map(|(_, v)| v.into_owned()).expect("signed");
    let downloaded = Client::new().get(&link).header("x-request-id", "op-download").send().expect("answers");
    assert_eq!(downloaded.status().as_u16(), 200);
    let artifact_id = artifact["id"].as_str().expect("an id");
    assert_eq!(json_of(call(&service, "GET", &format!("/v1/artifacts/{artifact_id}"), "op-artifact")).0, 200);
    let load = json!({"artifact_id": artifact_id, "filename": "again.txt"});
    assert_eq!(json_of(call(&service, "POST", "/v1/sessions/audited/files/from-artifact", "op-load").json(&load)).0, 201);
    assert_eq!(json_of(call(&service, "POST", "/v1/sessions/audited/fork", "op-fork").json(&json!({"session_id": "audited-copy"}))).0, 201);
    let staged = call(&service, "PUT", "/v1/datasets/sales.csv", "op-stage").header("content-type", "text/csv").body("region,total\nnorth,1\n");
    assert_eq!(json_of(staged).0, 201);
    assert_eq!(json_of(call(&service, "POST", "/v1/sessions/audited/datasets", "op-attach").json(&json!({"name": "sales.csv"}))).0, 201);
    let (status, missing) = json_of(call(&service, "GET", "/v1/sessions/audited/files/absent.txt", "op-missing"));
    assert_eq!(status, 404, "{missing}");
    let refused_env = json!({"code": "print(1)", "env": {"PYTHONPATH": ENV_VALUE}});
    let (status, refused) = json_of(call(&service, "POST", "/v1/sessions/audited/run", "op-env").json(&refused_env));
    assert_eq!((status, refused["error"]["code"].as_str()), (400, Some("env_not_allowed")), "{refused}");
    assert_eq!(refused["error"]["request_id"], "op-env");
    assert_eq!(json_of(call(&service, "DELETE", "/v1/sessions/audited", "op-close")).0, 200);
    let unauthorised = Client::new().get(format!("{}/v1/sessions/audited/files", service.base)).header("x-request-id", "op-nokey");
    assert_eq!(json_of(unauthorised).0, 401);

    // MCP: another transport, the same facade and the same trail.
    let mcp = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "list_files", "arguments": {"session_id": "audited-copy"}}});
    let answer = call(&service, "POST", "/mcp", "op-mcp")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18")
        .json(&mcp)
        .send()
        .expect("MCP answers");
    assert_eq!(answer.status().as_u16(), 200);
    let answer: Value = answer.json().expect("JSON-RPC");
    assert!(answer["result"]["isError"] != json!(true) && answer.to_string().contains("again.txt"), "{answer}");

    // E2B: a run with a refused env name is refused in E2B's shape; an allowed one runs.
    let e2b = E2b::new(&service);
    let sandbox = e2b.create();
    let refused = e2b.execute(&sandbox, "e2b-env", json!({"code": "print(2)", "env_vars": {"HOME": "/"}}));
    assert_eq!(refused.status().as_u16(), 400);
    let body: Value = refused.json().expect("E2B's error");
    assert!(body["message"].as_str().is_some_and(|m| m.contains("HOME") && m.contains("reserved")), "{body}");
    let ran = e2b.execute(&sandbox, "e2b-run", json!({"code": format!("{CODE} = 3\nprint({CODE})")}));
    assert_eq!(ran.status().as_u16(), 200);
    assert!(ran.text().expect("the stream").contains("\"3"), "the E2B run printed");

    let expected: &[(&str, &str, &str, Option<&str>)] = &[
        ("op-open", "open", "ok", Some("audited")),
        ("op-upload", "upload", "ok", Some("audited")),
        ("op-run", "run", "ok", Some("audited")),
        ("op-read", "read", "ok", Some("audited")),
        ("op-download", "download", "ok", Some("audited")),
        ("op-artifact", "artifact", "ok", None),
        ("op-load", "load_artifact", "ok", Some("audited")),
        ("op-fork", "fork", "ok", Some("audited")),
        ("op-stage", "stage_dataset", "ok", None),
        ("op-attach", "attach_dataset", "ok", Some("audited")),
        ("op-missing", "read", "no_such_file", Some("audited")),
        ("op-env", "run", "env_not_allowed", Some("audited")),
        ("op-close", "close", "ok", Some("audited")),
        ("op-nokey", "authenticate", "unauthorized", None),
        ("op-mcp", "list_files", "ok", Some("audited-copy")),
        ("e2b-env", "run", "env_not_allowed", None),
        ("e2b-run", "run", "ok", None),
    ];
    let found = wait_for_lines(&service, expected.iter().map(|(id, ..)| *id));
    for (id, operation, outcome, session) in expected {
        let lines = &found[*id];
        assert_eq!(lines.len(), 1, "one line for {id}: {lines:?}");
        let line = &lines[0];
        assert_eq!((line.operation.as_str(), line.outcome.as_str()), (*operation, *outcome), "{id}: {line:?}");
        if let Some(session) = session {
            assert_eq!(line.session.as_deref(), Some(*session), "{id}: {line:?}");
        }
        let tenant = line.tenant.as_deref();
        if *operation == "authenticate" {
            assert_eq!(tenant, None, "a refused caller has no tenant");
        } else {
            assert_eq!(tenant, Some("alice"), "{id}: {line:?}");
        }
        assert!(line.duration_ms >= 0.0);
    }
    let run_line = &found["op-run"][0];
    assert_eq!((run_line.run_id.as_deref(), run_line.exit_code), (Some(run_id.as_str()), Some(0)));
    assert!(run_line.limit_fuel.is_some_and(|f| f > 0) && run_line.limit_memory_bytes.is_some_and(|m| m > 0), "{run_line:?}");
    assert!(run_line.limit_timeout_ms.is_some_and(|t| t > 0), "{run_line:?}");
    assert!(found["e2b-run"][0].run_id.is_some(), "the E2B run's line names its run");
    assert_eq!(found["op-env"][0].run_id, None, "a refused run never ran");

    let log = service.process.log_lines().join("\n");
    for secret in [CONTENT, encoded.as_str(), CODE, ENV_VALUE, KEY, signature.as_str(), "signature=", e2b.token(&sandbox)] {
        assert!(!log.contains(secret), "the log holds {secret:?}");
    }
}

/// Refusals given before a request names an operation leave an audit line
/// too, exactly one each (`refused`, with the method and path, the status
/// and the error's code, never the query): a body that is not JSON, an
/// unknown route, a multipart body cut short, E2B's wrong access token,
/// Jupyter's wrong token. An operation's own refusal still writes its one
/// line, and a refusal's line holds no credential.
#[test]
fn every_refusal_leaves_one_audit_line() {
    let dir = common::scratch("anypath-audit-refusals-");
    let service = Service::start_with(dir.path(), &["--e2b-listen", "127.0.0.1:0"]);
    let (status, body) = json_of(call(&service, "POST", "/v1/sessions", "refused-json").header("content-type", "application/json").body("{not json"));
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("invalid_json")), "{body}");
    let (status, body) = json_of(call(&service, "GET", "/v1/nowhere?signature=secret-query-5e1f", "refused-route"));
    assert_eq!((status, body["error"]["code"].as_str()), (404, Some("not_found")), "{body}");
    let cut = "--b\r\ncontent-disposition: form-data; name=\"f\"; filename=\"a.csv\"\r\n\r\nx,y\r\n1,2";
    let staged = call(&service, "PUT", "/v1/datasets/cut", "refused-multipart").header("content-type", "multipart/form-data; boundary=b").body(cut);
    let (status, body) = json_of(staged);
    assert_eq!(status, 400, "a cut multipart body is refused: {body}");
    let (status, body) = json_of(call(&service, "GET", "/v1/sessions/never-opened", "refused-describe"));
    assert_eq!((status, body["error"]["code"].as_str()), (404, Some("no_such_session")), "{body}");
    let e2b = E2b::new(&service);
    let sandbox = e2b.create();
    let forged = Client::new()
        .post(format!("{}/execute", e2b.url))
        .header("e2b-sandbox-id", sandbox["sandboxID"].as_str().expect("an id"))
        .header("x-access-token", "forged-token-77aa")
        .header("x-request-id", "refused-e2b")
        .json(&json!({"code": "print(1)"}))
        .send()
        .expect("answers");
    assert_eq!(forged.status().as_u16(), 401);
    let jupyter = Client::new()
        .post(format!("{}/api/kernels", service.base))
        .header("authorization", "token forged-token-88bb")
        .header("x-request-id", "refused-jupyter")
        .json(&json!({"name": "python3"}))
        .send()
        .expect("answers");
    assert!(matches!(jupyter.status().as_u16(), 401 | 403), "{}", jupyter.status());

    let ids = ["refused-json", "refused-route", "refused-multipart", "refused-describe", "refused-e2b", "refused-jupyter"];
    let found = wait_for_lines(&service, ids.iter().copied());
    for id in ids {
        assert_eq!(found[id].len(), 1, "one line for {id}: {:?}", found[id]);
    }
    let line = |id: &str| &found[id][0];
    let refused = |id: &str| (line(id).operation.as_str(), line(id).outcome.as_str(), line(id).status);
    assert_eq!(refused("refused-json"), ("refused", "invalid_json", Some(400)));
    assert_eq!(line("refused-json").subject.as_deref(), Some("POST /v1/sessions"));
    assert_eq!(refused("refused-route"), ("refused", "not_found", Some(404)));
    assert_eq!(line("refused-route").subject.as_deref(), Some("GET /v1/nowhere"), "the path, never the query");
    assert_ne!(line("refused-multipart").outcome, "ok", "{:?}", line("refused-multipart"));
    assert_eq!((line("refused-describe").operation.as_str(), line("refused-describe").outcome.as_str()), ("describe", "no_such_session"));
    for id in ["refused-e2b", "refused-jupyter"] {
        assert!(matches!(line(id).outcome.as_str(), "unauthorized" | "forbidden"), "{id}: {:?}", line(id));
    }
    let log = service.process.log_lines().join("\n");
    for secret in ["secret-query-5e1f", "forged-token-77aa", "forged-token-88bb", KEY] {
        assert!(!log.contains(secret), "the log holds {secret:?}");
    }
}

/// Waits until every id has a line (they are written as answers leave).
fn wait_for_lines<'a>(service: &Service, ids: impl Iterator<Item = &'a str> + Clone) -> BTreeMap<String, Vec<AuditLine>> {
    let all_there = || {
        let found = audit_lines(service);
        ids.clone().all(|id| found.contains_key(id))
    };
    let complete = common::eventually(std::time::Duration::from_secs(10), all_there);
    let found = audit_lines(service);
    let missing: Vec<&str> = ids.filter(|id| !found.contains_key(*id)).collect();
    assert!(complete, "no audit line for {missing:?}");
    found
}

/// A run that changes more files than the cap keeps the first ones by
/// name and names each of the rest in `artifact_errors`; the files stay.
#[test]
fn a_run_keeps_at_most_the_artifact_cap() {
    let dir = common::scratch("anypath-artifact-cap-");
    let service = Service::start_with(dir.path(), &["--max-artifacts-per-run", "3"]);
    let code = "for i in range(5):\n    open(f'figure-{i}.txt', 'w').write(str(i))";
    let (status, run) = service.json(KEY, "POST", "/v1/sessions/capped/run", Some(json!({"code": code})));
    assert_eq!(status, 200, "{run}");
    let kept: Vec<&str> = run["artifacts"].as_array().expect("artifacts").iter().filter_map(|a| a["filename"].as_str()).collect();
    assert_eq!(kept, ["figure-0.txt", "figure-1.txt", "figure-2.txt"], "{run}");
    let dropped = run["artifact_errors"].as_array().expect("the dropped files are named");
    let names: Vec<&str> = dropped.iter().filter_map(|d| d["filename"].as_str()).collect();
    assert_eq!(names, ["figure-3.txt", "figure-4.txt"]);
    let message = dropped[0]["error"].as_str().unwrap_or_default();
    assert!(message.contains("changed 5 files") && message.contains("at most 3"), "{message}");
    let (_, files) = service.json(KEY, "GET", "/v1/sessions/capped/files", None);
    assert!(files.to_string().contains("figure-4.txt"), "a file not kept stays in the session: {files}");
    let (_, under) = service.json(KEY, "POST", "/v1/sessions/capped/run", Some(json!({"code": "open('one.txt', 'w').write('1')"})));
    assert_eq!((under["artifacts"].as_array().map(Vec::len), under.get("artifact_errors")), (Some(1), None), "{under}");
}

/// `--run-env-allow` lists the names runs may set: a listed name and a
/// listed prefix reach the code, any other is a typed 400 (HTTP) and a tool
/// error (MCP), and nothing runs.
#[test]
fn only_allowlisted_env_names_reach_a_run() {
    let dir = common::scratch("anypath-env-allow-");
    let service = Service::start_with(dir.path(), &["--run-env-allow", "REGION,APP_*"]);
    let code = "import os\nprint(os.environ.get('REGION'), os.environ.get('APP_MODE'))";
    let (status, run) = service.json(KEY, "POST", "/v1/sessions/env/run", Some(json!({"code": code, "env": {"REGION": "eu", "APP_MODE": "x"}})));
    assert_eq!((status, run["stdout"].as_str()), (200, Some("eu x\n")), "{run}");
    let marker = "open('ran.txt', 'w').write('ran')";
    let (status, refused) = service.json(KEY, "POST", "/v1/sessions/env/run", Some(json!({"code": marker, "env": {"SECRET_KEY": "v"}})));
    assert_eq!((status, refused["error"]["code"].as_str()), (400, Some("env_not_allowed")), "{refused}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("SECRET_KEY") && message.contains("--run-env-allow"), "{message}");
    assert!(refused["error"]["request_id"].is_string());
    let (_, files) = service.json(KEY, "GET", "/v1/sessions/env/files", None);
    assert!(!files.to_string().contains("ran.txt"), "the refused run never ran: {files}");

    let mcp = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "run_python", "arguments": {"session_id": "env", "code": marker, "env": {"OTHER": "v"}}}});
    let answer: Value = Client::new()
        .post(format!("{}/mcp", service.base))
        .header("x-api-key", KEY)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18")
        .json(&mcp)
        .send()
        .expect("MCP answers")
        .json()
        .expect("JSON-RPC");
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    assert!(answer["result"].to_string().contains("env_not_allowed"), "the tool error names the code: {answer}");
}

/// E2B's API beside the service, as raw HTTP.
struct E2b {
    url: String,
}

impl E2b {
    fn new(service: &Service) -> Self {
        let line = service.process.wait_for_log(|line| line.contains("E2B API serving")).expect("the E2B listener is announced");
        let entry: Value = serde_json::from_str(&line).expect("a JSON log line");
        Self { url: format!("http://{}", entry["listen"].as_str().expect("an address")) }
    }

    fn create(&self) -> Value {
        let response = Client::new()
            .post(format!("{}/v2/sandboxes", self.url))
            .header("x-api-key", KEY)
            .json(&json!({"templateID": "code-interpreter-v1", "timeout": 60}))
            .send()
            .expect("sent");
        assert_eq!(response.status().as_u16(), 201);
        response.json().expect("a sandbox")
    }

    fn token<'a>(&self, sandbox: &'a Value) -> &'a str {
        sandbox["envdAccessToken"].as_str().expect("a secure sandbox has a token")
    }

    fn execute(&self, sandbox: &Value, request_id: &str, body: Value) -> reqwest::blocking::Response {
        Client::new()
            .post(format!("{}/execute", self.url))
            .header("e2b-sandbox-id", sandbox["sandboxID"].as_str().expect("an id"))
            .header("x-access-token", self.token(sandbox))
            .header("x-request-id", request_id)
            .json(&body)
            .send()
            .expect("sent")
    }
}
