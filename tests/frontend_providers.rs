//! The data providers frontends are built on, driven from Node as an admin
//! app drives them (`tests/frontends/providers.mjs`): react-admin's
//! `ra-data-json-server` and `ra-data-simple-rest`, and Refine's
//! `@refinedev/simple-rest`, at the versions `tests/frontends/
//! package-lock.json` pins (`cargo xtask test` installs them). Each runs its
//! whole call set against `anypath up` (with `delete_reply = record`, the
//! one setting these frameworks need) and against json-server 0.17.4 seeded
//! alike, the reference: every call answers the same records, in the same
//! order, with the same total. json-server cannot answer
//! ra-data-simple-rest (it sends no `Content-Range`), so that provider's
//! answers are held against ra-data-json-server's calls on json-server,
//! which ask for the same things.

use crate::common;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::app::{App, temp_kv};
use serde_json::{Value, json};

const POSTS: [(&str, u64); 5] = [("alpha snow", 5), ("beta", 10), ("gamma", 5), ("delta", 20), ("Alpine", 1)];
const COMMENTS: [(u64, &str); 3] = [(1, "first"), (1, "second"), (3, "third")];

/// Node and the installed providers (`cargo xtask test` installs both).
fn frontends() -> (PathBuf, PathBuf) {
    let required = |name: &str| -> PathBuf {
        std::env::var_os(name).map(PathBuf::from).unwrap_or_else(|| panic!("{name} is not set: run `cargo xtask test`, which installs Node and the pinned providers"))
    };
    (required("ANYPATH_NODE"), required("ANYPATH_FRONTENDS"))
}

/// The provider script's lines for `which` against `base`.
fn drive(node: &PathBuf, dir: &PathBuf, base: &str, which: &str) -> Vec<Value> {
    let output = Command::new(node).arg(dir.join("providers.mjs")).args([base, which]).current_dir(dir).output().expect("node runs");
    assert!(output.status.success(), "providers.mjs failed: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).lines().map(|line| serde_json::from_str(line).expect("a JSON line")).collect()
}

/// `anypath up` seeded with the posts and comments.
fn anypath(name: &str) -> App {
    let app = App::start_with(&temp_kv(name), "spin.toml", &[("SPIN_VARIABLE_DELETE_REPLY", "record")]);
    for (title, views) in POSTS {
        assert_eq!(app.send("POST", "/posts/", Some(json!({"title": title, "views": views}))).status(), 201);
    }
    for (post, body) in COMMENTS {
        assert_eq!(app.send("POST", "/comments/", Some(json!({"postId": post, "body": body}))).status(), 201);
    }
    app
}

/// json-server 0.17.4 on a fresh copy of the same data; killed on drop.
struct JsonServer {
    child: Child,
    base: String,
    _dir: tempfile::TempDir,
}

impl JsonServer {
    fn start(node: &PathBuf, dir: &PathBuf) -> Self {
        let data = tempfile::tempdir().expect("temp dir");
        let posts: Vec<Value> = POSTS.iter().enumerate().map(|(i, (title, views))| json!({"id": i + 1, "title": title, "views": views})).collect();
        let comments: Vec<Value> = COMMENTS.iter().enumerate().map(|(i, (post, body))| json!({"id": i + 1, "postId": post, "body": body})).collect();
        let db = data.path().join("db.json");
        // The instance mark tells this server from another test's on a reused port.
        let instance = data.path().display().to_string();
        std::fs::write(&db, json!({"posts": posts, "comments": comments, "instance": {"mark": instance}}).to_string()).expect("db.json");
        // A free port may be taken before json-server binds it: then it exits
        // (or another server answers), and another port is tried.
        for _ in 0..5 {
            let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
            let mut child = Command::new(node)
                .arg(dir.join("node_modules/json-server/lib/cli/bin.js"))
                .args(["--host", "127.0.0.1", "--port", &port.to_string(), "--quiet"])
                .arg(&db)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("json-server starts");
            let base = format!("http://127.0.0.1:{port}");
            if serves_seed(&mut child, &base, &instance) {
                return JsonServer { child, base, _dir: data };
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("json-server could not serve on a free port in five tries");
    }
}

/// Waits until `child` answers `GET /db` with this instance's mark:
/// json-server itself, not whatever else holds the port. False once it has
/// exited (it lost the port).
fn serves_seed(child: &mut Child, base: &str, instance: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if child.try_wait().ok().flatten().is_some() {
            return false;
        }
        let db = reqwest::blocking::get(format!("{base}/db")).and_then(|r| r.json::<Value>());
        if db.is_ok_and(|db| db["instance"]["mark"] == instance) {
            return true;
        }
        assert!(Instant::now() < deadline, "json-server did not serve {base}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

impl Drop for JsonServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What a call must answer alike: its records (ids and fields) and total.
fn comparable(line: &Value) -> Value {
    // Records compare field by field, whatever order their keys came in.
    json!({"call": line["call"], "data": line["data"], "total": line["total"]})
}

/// Calls whose answer json-server shapes differently by design: its DELETE
/// answers `{}` (so deleteMany's ids are null), where ours answers the
/// record asked for. Checked on their own.
const DELETES: [&str; 3] = ["delete", "deleteMany", "deleteOne"];

fn compare(ours: &[Value], reference: &[Value], provider: &str) {
    assert_eq!(ours.len(), reference.len(), "{provider}: the same calls ran");
    for (ours, reference) in ours.iter().zip(reference) {
        assert!(ours.get("error").is_none(), "{provider} {}: {}", ours["call"], ours["error"]);
        let call = ours["call"].as_str().unwrap_or_default();
        if DELETES.contains(&call) {
            continue;
        }
        assert_eq!(comparable(ours), comparable(reference), "{provider} {call}: anypath against json-server");
    }
}

fn answer<'a>(lines: &'a [Value], call: &str) -> &'a Value {
    &lines.iter().find(|l| l["call"] == call).unwrap_or_else(|| panic!("no {call} line"))["data"]
}

/// One provider's lines against a fresh `anypath up` (running `ours`) and
/// against json-server (running `reference`, the call set that asks the
/// same of a backend json-server can answer).
fn ours_and_reference(app: &str, ours: &str, reference: &str) -> (Vec<Value>, Vec<Value>) {
    let (node, dir) = frontends();
    let app = anypath(app);
    let ours = drive(&node, &dir, &app.base, ours);
    let reference = drive(&node, &dir, &JsonServer::start(&node, &dir).base, reference);
    (ours, reference)
}

#[test]
fn react_admins_json_server_provider_answers_as_on_json_server() {
    let (ours, reference) = ours_and_reference("providers-ra-json-server", "json-server", "json-server");
    compare(&ours, &reference, "ra-data-json-server");
    assert_eq!(answer(&ours, "delete")["id"], 5);
    assert_eq!(answer(&ours, "deleteMany"), &json!([3, 4]), "deleteMany reads each deleted record's id");
}

#[test]
fn react_admins_simple_rest_provider_answers_what_json_server_would() {
    let (ours, reference) = ours_and_reference("providers-ra-simple-rest", "simple-rest", "json-server");
    compare(&ours, &reference, "ra-data-simple-rest");
    assert_eq!(answer(&ours, "deleteMany"), &json!([3, 4]));
}

#[test]
fn refines_simple_rest_provider_answers_as_on_json_server() {
    let (ours, reference) = ours_and_reference("providers-refine", "refine", "refine");
    compare(&ours, &reference, "refine simple-rest");
    assert_eq!(answer(&ours, "deleteOne")["id"], 2);
}
