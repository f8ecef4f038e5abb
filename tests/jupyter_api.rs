//! Jupyter's kernel gateway API as a raw client sees it: the REST routes'
//! statuses and models, and the kernel websocket's messages (protocol 5.3,
//! JSON text frames) down to the fields the real clients in
//! `jupyter_clients` depend on.
//!
//! Boundaries proved: without the token nothing is served, REST or
//! websocket (`every_route_needs_the_token`); another tenant's kernel is as
//! absent as one never started (`tenants_see_only_their_kernels`), and so
//! are the files another tenant's kernels share
//! (`a_tenants_kernels_share_files_that_outlive_them`); a cell reading
//! stdin fails at once instead of hanging the kernel
//! (`a_kernel_socket_speaks_the_protocol`).

use std::net::TcpStream;
use std::time::{Duration, Instant};

use reqwest::blocking::Client;
use serde_json::{Value, json};
use tungstenite::stream::MaybeTlsStream;
use tungstenite::{Message, WebSocket};

use crate::common;
use common::service::Service;

/// A kernel's websocket.
pub(crate) struct Socket {
    ws: WebSocket<MaybeTlsStream<TcpStream>>,
    /// Frames read while waiting for another request's.
    backlog: std::collections::VecDeque<Value>,
}

/// What one request brought: its reply and the iopub messages it parented.
pub(crate) struct Answer {
    pub(crate) reply: Value,
    pub(crate) iopub: Vec<Value>,
}

impl Answer {
    fn of_type(&self, msg_type: &str) -> Vec<&Value> {
        self.iopub.iter().filter(|m| m["msg_type"] == msg_type).collect()
    }

    pub(crate) fn stdout(&self) -> String {
        self.of_type("stream").iter().filter(|m| m["content"]["name"] == "stdout").filter_map(|m| m["content"]["text"].as_str()).collect()
    }
}

impl Socket {
    pub(crate) fn open(service: &Service, kernel: &str, token: &str) -> Self {
        let url = format!("{}/api/kernels/{kernel}/channels?token={token}", service.base.replace("http://", "ws://"));
        let (ws, _) = tungstenite::connect(url).expect("the websocket opens");
        if let MaybeTlsStream::Plain(stream) = ws.get_ref() {
            stream.set_read_timeout(Some(Duration::from_secs(60))).expect("a read timeout");
        }
        Self { ws, backlog: std::collections::VecDeque::new() }
    }

    /// Sends a request as clients do; `channel` None sends none (means shell).
    fn send(&mut self, msg_type: &str, channel: Option<&str>, content: Value) -> String {
        let msg_id = uuid::Uuid::new_v4().to_string();
        let mut frame = json!({
            "header": { "msg_id": msg_id, "msg_type": msg_type, "username": "test", "session": "client-1", "date": 1764190000.5, "version": "5.3" },
            "parent_header": {}, "metadata": {}, "content": content, "buffers": {},
        });
        if let Some(channel) = channel {
            frame["channel"] = json!(channel);
        }
        self.ws.send(Message::text(frame.to_string())).expect("sent");
        msg_id
    }

    fn next(&mut self) -> Value {
        loop {
            match self.ws.read().expect("a frame before the timeout") {
                Message::Text(text) => return serde_json::from_str(text.as_str()).expect("a JSON frame"),
                Message::Close(_) => panic!("the kernel closed the socket"),
                _ => continue,
            }
        }
    }

    /// Reads until `msg_id`'s reply and its iopub `idle` have both come.
    fn answer(&mut self, msg_id: &str) -> Answer {
        let (mut reply, mut iopub, mut idle) = (None, Vec::new(), false);
        let mut earlier = std::mem::take(&mut self.backlog);
        while reply.is_none() || !idle {
            let frame = earlier.pop_front().unwrap_or_else(|| self.next());
            if frame["parent_header"]["msg_id"] != msg_id {
                self.backlog.push_back(frame);
                continue;
            }
            if frame["channel"] == "iopub" {
                idle |= frame["msg_type"] == "status" && frame["content"]["execution_state"] == "idle";
                iopub.push(frame);
            } else {
                reply = Some(frame);
            }
        }
        self.backlog.extend(earlier);
        Answer { reply: reply.expect("a reply"), iopub }
    }

    fn request(&mut self, msg_type: &str, content: Value) -> Answer {
        let id = self.send(msg_type, Some("shell"), content);
        self.answer(&id)
    }

    pub(crate) fn execute(&mut self, code: &str) -> Answer {
        self.request("execute_request", json!({ "code": code, "silent": false, "store_history": true, "user_expressions": {}, "allow_stdin": false, "stop_on_error": true }))
    }
}

fn client() -> Client {
    Client::builder().timeout(Duration::from_secs(60)).build().expect("a client")
}

/// Starts a kernel of `spec` for the holder of `token`.
pub(crate) fn start_kernel(service: &Service, token: &str, spec: &str) -> Value {
    let response = client().post(format!("{}/api/kernels", service.base)).header("authorization", format!("token {token}")).json(&json!({ "name": spec })).send().expect("sent");
    assert_eq!(response.status(), 201, "a kernel starts with 201");
    response.json().expect("a kernel model")
}

pub(crate) fn kernel_id(model: &Value) -> &str {
    model["id"].as_str().expect("a kernel id")
}

#[test]
fn kernelspecs_and_the_kernel_lifecycle() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let service = Service::start_with(dir.path(), &[]);
    let get = |path: &str| client().get(format!("{}{path}", service.base)).header("authorization", "Bearer key-alice").send().expect("sent");
    let specs: Value = get("/api/kernelspecs").json().expect("kernelspecs");
    assert_eq!(specs["default"], "python3");
    let python3 = &specs["kernelspecs"]["python3"];
    assert!(python3["spec"]["argv"].is_array() && python3["spec"]["language"] == "python" && python3["resources"].is_object(), "{python3}");
    assert!(specs["kernelspecs"]["python3-stdlib"].is_object(), "the standard-library runtime is offered too: {specs}");
    assert_eq!(get("/api/kernelspecs/python3-stdlib").status(), 200);
    assert_eq!(get("/api/kernelspecs/ruby").status(), 404);

    let model = start_kernel(&service, "key-alice", "python3-stdlib");
    let id = kernel_id(&model);
    assert!(uuid::Uuid::parse_str(id).is_ok(), "kernel ids are UUIDs: {id}");
    assert_eq!(model["name"], "python3-stdlib");
    assert_eq!(model["execution_state"], "idle");
    assert_eq!(model["connections"], 0);
    let last_activity = model["last_activity"].as_str().expect("a date");
    assert!(chrono::NaiveDateTime::parse_from_str(last_activity, "%Y-%m-%dT%H:%M:%S%.6fZ").is_ok(), "{last_activity}");
    let listed: Value = get("/api/kernels").json().expect("kernels");
    assert_eq!(listed.as_array().map(Vec::len), Some(1));
    assert_eq!(get(&format!("/api/kernels/{id}")).status(), 200);

    let refused = client().post(format!("{}/api/kernels", service.base)).header("authorization", "token key-alice").body("{not json").send().expect("sent");
    assert_eq!(refused.status(), 400);
    assert!(refused.headers().contains_key("x-request-id"));
    let body: Value = refused.json().expect("Jupyter's error shape");
    assert!(body["message"].as_str().is_some_and(|m| m.contains("not a kernel to start")), "{body}");
    let unknown = client().post(format!("{}/api/kernels", service.base)).header("authorization", "token key-alice").json(&json!({"name": "ruby"})).send().expect("sent");
    assert_eq!(unknown.status(), 404);

    let restarted = client().post(format!("{}/api/kernels/{id}/restart", service.base)).header("authorization", "token key-alice").send().expect("sent");
    assert_eq!(restarted.status(), 200, "restart answers 200 with the model");
    let interrupted = client().post(format!("{}/api/kernels/{id}/interrupt", service.base)).header("authorization", "token key-alice").send().expect("sent");
    assert_eq!(interrupted.status(), 204);
    let deleted = client().delete(format!("{}/api/kernels/{id}", service.base)).header("authorization", "token key-alice").send().expect("sent");
    assert_eq!(deleted.status(), 204);
    assert_eq!(get(&format!("/api/kernels/{id}")).status(), 404);
}

#[test]
fn every_route_needs_the_token() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let service = Service::start_with(dir.path(), &[]);
    let model = start_kernel(&service, "key-alice", "python3-stdlib");
    let id = kernel_id(&model);
    for path in ["/api/kernelspecs".to_owned(), "/api/kernels".to_owned(), format!("/api/kernels/{id}")] {
        let response = client().get(format!("{}{path}", service.base)).send().expect("sent");
        assert_eq!(response.status(), 401, "{path} without a token");
        let wrong = client().get(format!("{}{path}", service.base)).header("authorization", "token nope").send().expect("sent");
        assert_eq!(wrong.status(), 401, "{path} with an unknown token");
    }
    let url = format!("{}/api/kernels/{id}/channels", service.base.replace("http://", "ws://"));
    match tungstenite::connect(url) {
        Err(tungstenite::Error::Http(response)) => assert_eq!(response.status(), 401),
        other => panic!("a websocket without the token must be refused: {:?}", other.map(|_| ())),
    }
    let by_query: Value = client().get(format!("{}/api/kernels?token=key-alice", service.base)).send().expect("sent").json().expect("kernels");
    assert_eq!(by_query.as_array().map(Vec::len), Some(1), "?token= is a credential too");
}

#[test]
fn tenants_see_only_their_kernels() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let service = Service::start_with(dir.path(), &[]);
    let model = start_kernel(&service, "key-alice", "python3-stdlib");
    let id = kernel_id(&model);
    let as_bob = |method: reqwest::Method, path: String| client().request(method, format!("{}{path}", service.base)).header("authorization", "token key-bob").send().expect("sent");
    assert_eq!(as_bob(reqwest::Method::GET, format!("/api/kernels/{id}")).status(), 404);
    assert_eq!(as_bob(reqwest::Method::POST, format!("/api/kernels/{id}/interrupt")).status(), 404);
    assert_eq!(as_bob(reqwest::Method::POST, format!("/api/kernels/{id}/restart")).status(), 404);
    assert_eq!(as_bob(reqwest::Method::DELETE, format!("/api/kernels/{id}")).status(), 404);
    let listed: Value = as_bob(reqwest::Method::GET, "/api/kernels".to_owned()).json().expect("kernels");
    assert_eq!(listed, json!([]));
    let url = format!("{}/api/kernels/{id}/channels?token=key-bob", service.base.replace("http://", "ws://"));
    match tungstenite::connect(url) {
        Err(tungstenite::Error::Http(response)) => assert_eq!(response.status(), 404),
        other => panic!("another tenant's kernel socket must be absent: {:?}", other.map(|_| ())),
    }
    let still: Value = client().get(format!("{}/api/kernels/{id}", service.base)).header("authorization", "token key-alice").send().expect("sent").json().expect("the model");
    assert_eq!(still["id"], id, "bob's attempts left alice's kernel alone");
}

#[test]
fn a_kernel_socket_speaks_the_protocol() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let service = Service::start_with(dir.path(), &[]);
    let model = start_kernel(&service, "key-alice", "python3-stdlib");
    let id = kernel_id(&model);
    let mut socket = Socket::open(&service, id, "key-alice");

    // A request without a channel is shell's; its reply comes on shell.
    let asked = socket.send("kernel_info_request", None, json!({}));
    let info = socket.answer(&asked);
    assert_eq!(info.reply["msg_type"], "kernel_info_reply");
    assert_eq!(info.reply["channel"], "shell");
    assert_eq!(info.reply["content"]["protocol_version"], "5.3");
    assert_eq!(info.reply["content"]["language_info"]["name"], "python");
    assert!(info.reply["content"]["language_info"]["version"].as_str().is_some_and(|v| v.starts_with("3.")), "{}", info.reply);
    for key in ["username", "version", "session", "msg_id", "msg_type", "date"] {
        assert!(info.reply["header"][key].is_string(), "header.{key}: {}", info.reply);
    }
    let header_session = info.reply["header"]["session"].clone();

    let first = socket.execute("print('hello')\nx = 41\nx + 1");
    assert_eq!(first.reply["content"]["status"], "ok");
    assert_eq!(first.reply["content"]["execution_count"], 1);
    assert_eq!(first.stdout(), "hello\n", "print's text and newline come as one stream");
    assert_eq!(first.of_type("execute_input")[0]["content"]["code"], "print('hello')\nx = 41\nx + 1");
    let result = first.of_type("execute_result");
    assert_eq!(result[0]["content"]["data"]["text/plain"], "42");
    assert_eq!(result[0]["content"]["execution_count"], 1);
    let states: Vec<_> = first.of_type("status").iter().map(|m| m["content"]["execution_state"].clone()).collect();
    assert_eq!(states, [json!("busy"), json!("idle")]);

    // An error, and the cell queued behind it aborted (stop_on_error).
    let failing = socket.send("execute_request", Some("shell"), json!({ "code": "import time\ntime.sleep(0.5)\n1/0", "stop_on_error": true }));
    let queued = socket.send("execute_request", Some("shell"), json!({ "code": "y = 1" }));
    let failed = socket.answer(&failing);
    assert_eq!(failed.reply["content"]["status"], "error");
    assert_eq!(failed.reply["content"]["ename"], "ZeroDivisionError");
    let error = failed.of_type("error");
    assert_eq!(error[0]["content"]["ename"], "ZeroDivisionError");
    assert!(error[0]["content"]["traceback"].as_array().is_some_and(|t| !t.is_empty()));
    assert_eq!(socket.answer(&queued).reply["content"]["status"], "aborted");

    // input() fails at once: the kernel has no stdin.
    let reading = socket.execute("input('name? ')");
    assert_eq!(reading.reply["content"]["ename"], "StdinNotImplementedError", "{}", reading.reply);
    assert!(reading.reply["content"]["evalue"].as_str().is_some_and(|v| v.contains("no stdin")), "{}", reading.reply);

    // Introspection from the session's namespace.
    socket.execute("my_value = [1, 2, 3]");
    let completed = socket.request("complete_request", json!({ "code": "my_va", "cursor_pos": 5 }));
    assert_eq!(completed.reply["content"]["matches"], json!(["my_value"]));
    assert_eq!(completed.reply["content"]["cursor_start"], 0);
    let methods = socket.request("complete_request", json!({ "code": "my_value.app", "cursor_pos": 12 }));
    assert_eq!(methods.reply["content"]["matches"], json!(["my_value.append"]));
    let inspected = socket.request("inspect_request", json!({ "code": "len(my_value)", "cursor_pos": 6, "detail_level": 0 }));
    assert_eq!(inspected.reply["content"]["found"], true);
    assert!(inspected.reply["content"]["data"]["text/plain"].as_str().is_some_and(|t| t.contains("Type: list")), "{}", inspected.reply);
    let incomplete = socket.request("is_complete_request", json!({ "code": "for i in range(3):" }));
    assert_eq!(incomplete.reply["content"]["status"], "incomplete");
    assert_eq!(incomplete.reply["content"]["indent"], "    ");
    let complete = socket.request("is_complete_request", json!({ "code": "x = 1" }));
    assert_eq!(complete.reply["content"]["status"], "complete");
    let invalid = socket.request("is_complete_request", json!({ "code": "x = = 1" }));
    assert_eq!(invalid.reply["content"]["status"], "invalid");
    let namespace = socket.execute("sorted(k for k in globals() if not k.startswith('_'))");
    let names = namespace.of_type("execute_result")[0]["content"]["data"]["text/plain"].as_str().unwrap_or_default().to_owned();
    assert!(!names.contains("'ns'") && !names.contains("MARK"), "helpers leave the namespace as it was: {names}");

    let history = socket.request("history_request", json!({ "hist_access_type": "tail", "n": 2, "output": false, "raw": true }));
    assert_eq!(history.reply["content"]["history"].as_array().map(Vec::len), Some(2));
    let comms = socket.request("comm_info_request", json!({}));
    assert_eq!(comms.reply["content"]["comms"], json!({}));
    socket.send("comm_open", Some("shell"), json!({ "comm_id": "c1", "target_name": "jupyter.widget", "data": {} }));
    let closed = loop {
        let frame = socket.next();
        if frame["msg_type"] == "comm_close" {
            break frame;
        }
    };
    assert_eq!(closed["content"]["comm_id"], "c1", "an unknown comm target is closed politely");

    // A second socket sees iopub, never the first socket's replies.
    let mut other = Socket::open(&service, id, "key-alice");
    let asked = socket.send("execute_request", Some("shell"), json!({ "code": "print('both')" }));
    socket.answer(&asked);
    let mut seen_stream = false;
    loop {
        let frame = other.next();
        if frame["parent_header"]["msg_id"] != asked {
            continue;
        }
        assert_eq!(frame["channel"], "iopub", "a reply reached the wrong socket: {frame}");
        seen_stream |= frame["msg_type"] == "stream";
        if frame["content"]["execution_state"] == "idle" {
            break;
        }
    }
    assert!(seen_stream, "the other socket saw the output");
    let connections: Value = client().get(format!("{}/api/kernels/{id}", service.base)).header("authorization", "token key-alice").send().expect("sent").json().expect("a model");
    assert_eq!(connections["connections"], 2);
    assert_eq!(socket.execute("1").reply["header"]["session"], header_session, "the header session stays until a restart");
}

#[test]
fn interrupt_keeps_the_namespace_and_restart_clears_it() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let service = Service::start_with(dir.path(), &[]);
    let model = start_kernel(&service, "key-alice", "python3-stdlib");
    let id = kernel_id(&model).to_owned();
    let mut socket = Socket::open(&service, &id, "key-alice");
    let before = socket.execute("x = 41\nopen('/mnt/data/kept.txt', 'w').write('kept')");
    assert_eq!(before.reply["content"]["status"], "ok");
    let header_session = before.reply["header"]["session"].clone();

    let looping = socket.send("execute_request", Some("shell"), json!({ "code": "while True:\n    pass" }));
    std::thread::sleep(Duration::from_millis(500));
    let asked = Instant::now();
    let interrupted = client().post(format!("{}/api/kernels/{id}/interrupt", service.base)).header("authorization", "token key-alice").send().expect("sent");
    assert_eq!(interrupted.status(), 204);
    let ended = socket.answer(&looping);
    // Far below the run's time limit: the interrupt ended it, not the deadline.
    assert!(asked.elapsed() < Duration::from_secs(5), "the cell ended {:?} after the interrupt", asked.elapsed());
    assert_eq!(ended.reply["content"]["status"], "error");
    assert_eq!(ended.reply["content"]["ename"], "KeyboardInterrupt");
    let kept = socket.execute("x + 1");
    assert_eq!(kept.of_type("execute_result")[0]["content"]["data"]["text/plain"], "42", "the interrupt kept the namespace: {}", kept.reply);

    let restarted = client().post(format!("{}/api/kernels/{id}/restart", service.base)).header("authorization", "token key-alice").send().expect("sent");
    assert_eq!(restarted.status(), 200);
    let after = socket.execute("print(open('/mnt/data/kept.txt').read())\nx");
    assert_ne!(after.reply["header"]["session"], header_session, "a restart changes the header session");
    assert_eq!(after.stdout(), "kept\n", "the files stay");
    assert_eq!(after.reply["content"]["ename"], "NameError", "the namespace starts afresh");
    assert_eq!(after.reply["content"]["execution_count"], 1, "the count starts afresh");
}

/// Runs `code` in a new kernel of `spec` for the holder of `token`, then
/// deletes the kernel, as Open WebUI does for each code block.
fn run_in_a_new_kernel(service: &Service, token: &str, spec: &str, code: &str) -> Answer {
    let model = start_kernel(service, token, spec);
    let id = kernel_id(&model);
    let answer = Socket::open(service, id, token).execute(code);
    let deleted = client().delete(format!("{}/api/kernels/{id}", service.base)).header("authorization", format!("token {token}")).send().expect("sent");
    assert_eq!(deleted.status(), 204);
    answer
}

/// Boundary: tenants. A tenant's kernels work in one directory that
/// outlives them, as a Jupyter server's kernels share its root directory:
/// a file written by a kernel since deleted is read by the next, on either
/// kernelspec. Another tenant's kernels never see it, and what they write
/// under the same name is their own.
#[test]
fn a_tenants_kernels_share_files_that_outlive_them() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let python_data = common::python_data_dir().display().to_string();
    let service = Service::start_with(dir.path(), &["--python-data", &python_data]);
    let written = run_in_a_new_kernel(&service, "key-alice", "python3-stdlib", "open('notes.txt', 'w').write('alice wrote this')");
    assert_eq!(written.reply["content"]["status"], "ok", "{}", written.reply);
    let read = run_in_a_new_kernel(&service, "key-alice", "python3", "print(open('/mnt/data/notes.txt').read())");
    assert_eq!(read.stdout(), "alice wrote this\n", "the next kernel, on the data runtime, reads it: {}", read.reply);

    // The same directory over `/v1`, as the tenant's session `jupyter-files`:
    // what the kernels wrote downloads, and an upload is read by the next kernel.
    let downloaded = service.call("key-alice", "GET", "/v1/sessions/jupyter-files/files/notes.txt", None);
    assert_eq!(downloaded.status(), 200);
    assert_eq!(downloaded.text().expect("a body"), "alice wrote this");
    let uploaded = client()
        .put(format!("{}/v1/sessions/jupyter-files/files/sales.csv?overwrite=true", service.base))
        .header("x-api-key", "key-alice")
        .body("region,total\nnorth,7\n")
        .send()
        .expect("sent");
    assert!(uploaded.status().is_success(), "the upload: {}", uploaded.status());
    let totals = run_in_a_new_kernel(&service, "key-alice", "python3-stdlib", "import csv\nprint([row['total'] for row in csv.DictReader(open('sales.csv'))])");
    assert_eq!(totals.stdout(), "['7']\n", "a kernel reads the upload: {}", totals.reply);
    assert_eq!(service.call("key-bob", "GET", "/v1/sessions/jupyter-files/files/sales.csv", None).status(), 404, "bob's kernel files are his own");

    let unseen = run_in_a_new_kernel(&service, "key-bob", "python3-stdlib", "import os\nprint(os.path.exists('notes.txt'), os.listdir('/mnt/data'))");
    assert_eq!(unseen.stdout(), "False []\n", "another tenant's kernel sees none of it: {}", unseen.reply);
    run_in_a_new_kernel(&service, "key-bob", "python3-stdlib", "open('notes.txt', 'w').write('bob wrote this')");
    let still = run_in_a_new_kernel(&service, "key-alice", "python3-stdlib", "print(open('notes.txt').read())");
    assert_eq!(still.stdout(), "alice wrote this\n", "bob's file of the same name is his own");
}

/// `--jupyter-kernel-files per-kernel`: each kernel's files are its own,
/// even while both kernels live.
#[test]
fn per_kernel_files_are_each_kernels_own() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let service = Service::start_with(dir.path(), &["--jupyter-kernel-files", "per-kernel"]);
    let first = start_kernel(&service, "key-alice", "python3-stdlib");
    let mut socket = Socket::open(&service, kernel_id(&first), "key-alice");
    assert_eq!(socket.execute("open('mine.txt', 'w').write('first kernel')").reply["content"]["status"], "ok");
    let second = start_kernel(&service, "key-alice", "python3-stdlib");
    let seen = Socket::open(&service, kernel_id(&second), "key-alice").execute("import os\nprint(os.listdir('.'))");
    assert_eq!(seen.stdout(), "[]\n", "{}", seen.reply);
    assert_eq!(socket.execute("print(open('mine.txt').read())").stdout(), "first kernel\n");
}

/// `DELETE` of a kernel running a cell answers at once, as a Jupyter
/// server's does: the kernel is gone, its socket closes with 1000, and its
/// session (its Python state) follows once the interrupted cell let go.
#[test]
fn a_busy_kernel_is_shut_down_at_once() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let service = Service::start_with(dir.path(), &[]);
    let model = start_kernel(&service, "key-alice", "python3-stdlib");
    let id = kernel_id(&model).to_owned();
    let mut socket = Socket::open(&service, &id, "key-alice");
    let running = socket.send("execute_request", Some("shell"), json!({ "code": "import time\nprint('running', flush=True)\nwhile True:\n    time.sleep(0.01)" }));
    loop {
        let frame = socket.next();
        if frame["parent_header"]["msg_id"] == running && frame["msg_type"] == "stream" {
            break;
        }
    }
    let asked = Instant::now();
    let deleted = client().delete(format!("{}/api/kernels/{id}", service.base)).header("authorization", "token key-alice").send().expect("sent");
    let took = asked.elapsed();
    println!("DELETE of a busy kernel answered in {took:?}");
    assert_eq!(deleted.status(), 204);
    assert!(took < Duration::from_secs(2), "DELETE answered {took:?} after it was asked");
    let gone = client().get(format!("{}/api/kernels/{id}", service.base)).header("authorization", "token key-alice").send().expect("sent");
    assert_eq!(gone.status(), 404);
    let code = loop {
        match socket.ws.read() {
            Ok(Message::Close(frame)) => break frame.map(|f| u16::from(f.code)),
            Ok(_) => continue,
            Err(error) => panic!("the socket ended without a close frame: {error}"),
        }
    };
    assert_eq!(code, Some(1000), "the kernel's socket is closed as shut down");
    let session = format!("/v1/sessions/jupyter-{}", id.replace('-', ""));
    let deadline = Instant::now() + Duration::from_secs(15);
    while service.call("key-alice", "GET", &session, None).status() != 404 {
        assert!(Instant::now() < deadline, "the shut-down kernel's session was never removed");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// IPython's display API in a kernel: a raw MIME bundle and
/// `IPython.display`'s objects come with their own MIME types, JSON as JSON.
#[test]
fn display_data_carries_ipythons_mime_types() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let service = Service::start_with(dir.path(), &[]);
    let model = start_kernel(&service, "key-alice", "python3-stdlib");
    let mut socket = Socket::open(&service, kernel_id(&model), "key-alice");
    let shown = socket.execute("from IPython.display import Math, display\ndisplay({'text/latex': r'\\alpha', 'application/json': {'k': [1]}}, raw=True)\nMath('x^2')");
    assert_eq!(shown.reply["content"]["status"], "ok", "{}", shown.reply);
    let displayed = shown.of_type("display_data");
    assert_eq!(displayed[0]["content"]["data"], json!({ "text/latex": "\\alpha", "application/json": { "k": [1] } }));
    assert_eq!(shown.of_type("execute_result")[0]["content"]["data"]["text/latex"], "$\\displaystyle x^2$");
}
