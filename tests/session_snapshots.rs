//! Snapshots of code-interpreter sessions over `/v1`, as a client drives
//! them: keep a session's state and files, start new sessions from it (by
//! id or name), list, delete, and what survives a restart; with the
//! quota, the retention and the tenants' boundary.
//!
//! Boundaries proved: another tenant neither lists, reads, starts from nor
//! deletes a snapshot (`another_tenant_never_reaches_a_snapshot`); the
//! session a snapshot is kept in cannot be named by a client, so its state
//! never changes after it was taken (`a_snapshots_stored_session_is_out_of_a_clients_reach`).

use crate::common;

use serde_json::{Value, json};

use common::service::Service;

fn run(service: &Service, key: &str, session: &str, code: &str) -> Value {
    let (status, report) = service.json(key, "POST", &format!("/v1/sessions/{session}/run"), Some(json!({"code": code})));
    assert_eq!(status, 200, "{report}");
    report
}

fn stdout(report: &Value) -> &str {
    report["stdout"].as_str().unwrap_or_default()
}

/// Alice's session `source` holding `state = 41` and a file, snapshotted
/// (named `name` when given); the snapshot's answer.
fn snapshot_of_a_session(service: &Service, name: Option<&str>) -> Value {
    run(service, "key-alice", "source", "state = 41\nopen('notes.txt', 'w').write('kept')");
    let body = name.map(|name| json!({"name": name}));
    let (status, snapshot) = service.json("key-alice", "POST", "/v1/sessions/source/snapshots", body);
    assert_eq!(status, 201, "{snapshot}");
    snapshot
}

#[test]
fn a_snapshot_starts_sessions_with_its_state_and_files() {
    let dir = common::scratch("anypath-snapshots-");
    let service = Service::start(dir.path());
    let snapshot = snapshot_of_a_session(&service, Some("base"));
    let id = snapshot["snapshot_id"].as_str().expect("an id").to_owned();
    assert_eq!((snapshot["names"].clone(), snapshot["session_id"].clone()), (json!(["base"]), json!("source")), "{snapshot}");
    assert!(snapshot["size_bytes"].as_u64().is_some_and(|b| b > 0), "{snapshot}");
    assert!(snapshot["expires_unix"].as_u64() > snapshot["created_unix"].as_u64(), "{snapshot}");
    // The source goes on; what it does next is not in the snapshot.
    assert_eq!(stdout(&run(&service, "key-alice", "source", "state = 0\nopen('notes.txt', 'w').write('changed')\nprint(state)")), "0\n");
    for (session, by) in [("from-id", id.as_str()), ("from-name", "base")] {
        let (status, opened) = service.json("key-alice", "POST", "/v1/sessions", Some(json!({"session_id": session, "from_snapshot": by})));
        assert_eq!((status, opened["session_id"].as_str()), (201, Some(session)), "{opened}");
        let report = run(&service, "key-alice", session, "print(state + 1, open('notes.txt').read())");
        assert_eq!(stdout(&report), "42 kept\n", "{report}");
    }
    // Each started session is its own.
    run(&service, "key-alice", "from-id", "state = -1");
    assert_eq!(stdout(&run(&service, "key-alice", "from-name", "print(state)")), "41\n");
    let (status, again) = service.json("key-alice", "POST", "/v1/sessions", Some(json!({"session_id": "from-id", "from_snapshot": id})));
    assert_eq!((status, again["error"]["code"].as_str()), (409, Some("session_exists")), "{again}");
    // Listed newest first, by session and by name.
    let later = service.json("key-alice", "POST", "/v1/sessions/from-id/snapshots", None).1;
    let (_, listed) = service.json("key-alice", "GET", "/v1/snapshots", None);
    let ids: Vec<&str> = listed["snapshots"].as_array().expect("snapshots").iter().filter_map(|s| s["snapshot_id"].as_str()).collect();
    assert_eq!(ids, [later["snapshot_id"].as_str().expect("an id"), id.as_str()], "{listed}");
    let (_, of_source) = service.json("key-alice", "GET", "/v1/snapshots?session_id=source", None);
    assert_eq!(of_source["snapshots"].as_array().map(Vec::len), Some(1), "{of_source}");
    let (status, by_name) = service.json("key-alice", "GET", "/v1/snapshots/base", None);
    assert_eq!((status, by_name["snapshot_id"].as_str()), (200, Some(id.as_str())), "{by_name}");
    // Deleted once; then it is gone, for new sessions too.
    assert_eq!(service.call("key-alice", "DELETE", &format!("/v1/snapshots/{id}"), None).status().as_u16(), 204);
    let (status, gone) = service.json("key-alice", "DELETE", &format!("/v1/snapshots/{id}"), None);
    assert_eq!((status, gone["error"]["code"].as_str()), (404, Some("no_such_snapshot")), "{gone}");
    let (status, refused) = service.json("key-alice", "POST", "/v1/sessions", Some(json!({"session_id": "too-late", "from_snapshot": "base"})));
    assert_eq!((status, refused["error"]["code"].as_str()), (404, Some("no_such_snapshot")), "{refused}");
    // Sessions started from it live on.
    assert_eq!(stdout(&run(&service, "key-alice", "from-name", "print(state)")), "41\n");
}

#[test]
fn a_snapshot_survives_a_restart_and_its_source() {
    let dir = common::scratch("anypath-snapshots-restart-");
    let id = {
        let service = Service::start(dir.path());
        let snapshot = snapshot_of_a_session(&service, None);
        assert_eq!(service.call("key-alice", "DELETE", "/v1/sessions/source", None).status().as_u16(), 200);
        snapshot["snapshot_id"].as_str().expect("an id").to_owned()
    };
    let service = Service::start(dir.path());
    let (status, opened) = service.json("key-alice", "POST", "/v1/sessions", Some(json!({"session_id": "after", "from_snapshot": id})));
    assert_eq!(status, 201, "{opened}");
    assert_eq!(stdout(&run(&service, "key-alice", "after", "print(state, open('notes.txt').read())")), "41 kept\n");
}

#[test]
fn another_tenant_never_reaches_a_snapshot() {
    let dir = common::scratch("anypath-snapshots-tenants-");
    let service = Service::start(dir.path());
    let snapshot = snapshot_of_a_session(&service, Some("alices"));
    let id = snapshot["snapshot_id"].as_str().expect("an id");
    let (_, theirs) = service.json("key-bob", "GET", "/v1/snapshots", None);
    assert_eq!(theirs["snapshots"], json!([]), "{theirs}");
    for path in [format!("/v1/snapshots/{id}"), "/v1/snapshots/alices".to_owned()] {
        assert_eq!(service.json("key-bob", "GET", &path, None).0, 404, "{path}");
        assert_eq!(service.json("key-bob", "DELETE", &path, None).0, 404, "{path}");
    }
    let (status, refused) = service.json("key-bob", "POST", "/v1/sessions", Some(json!({"session_id": "stolen", "from_snapshot": id})));
    assert_eq!((status, refused["error"]["code"].as_str()), (404, Some("no_such_snapshot")), "{refused}");
    assert_eq!(service.json("key-alice", "GET", &format!("/v1/snapshots/{id}"), None).0, 200, "still alice's");
}

#[test]
fn a_snapshots_stored_session_is_out_of_a_clients_reach() {
    let dir = common::scratch("anypath-snapshots-hidden-");
    let service = Service::start(dir.path());
    let snapshot = snapshot_of_a_session(&service, None);
    let stored = format!("__snapshot_{}", snapshot["snapshot_id"].as_str().expect("an id"));
    // Attacks on the stored state by its session's name: a run, a file, a fork into it, a close.
    let attempts = [
        ("POST", format!("/v1/sessions/{stored}/run"), Some(json!({"code": "state = 'tampered'"}))),
        ("POST", format!("/v1/sessions/{stored}/files"), Some(json!({"filename": "x.txt", "content_base64": "eA=="}))),
        ("POST", "/v1/sessions/source/fork".to_owned(), Some(json!({"session_id": stored}))),
        ("POST", "/v1/sessions".to_owned(), Some(json!({"session_id": stored}))),
        ("DELETE", format!("/v1/sessions/{stored}"), None),
    ];
    for (method, path, body) in attempts {
        let (status, refused) = service.json("key-alice", method, &path, body);
        assert_eq!((status, refused["error"]["code"].as_str()), (400, Some("invalid_name")), "{method} {path}: {refused}");
    }
    let (status, opened) = service.json("key-alice", "POST", "/v1/sessions", Some(json!({"session_id": "check", "from_snapshot": snapshot["snapshot_id"]})));
    assert_eq!(status, 201, "{opened}");
    assert_eq!(stdout(&run(&service, "key-alice", "check", "print(state)")), "41\n", "the snapshot is as it was taken");
}

#[test]
fn snapshots_keep_to_their_quota_and_retention() {
    let dir = common::scratch("anypath-snapshots-quota-");
    let service = Service::start_with(dir.path(), &["--max-snapshots", "2", "--snapshot-retention-seconds", "3"]);
    run(&service, "key-alice", "source", "state = 41");
    for _ in 0..2 {
        assert_eq!(service.json("key-alice", "POST", "/v1/sessions/source/snapshots", None).0, 201);
    }
    let (status, refused) = service.json("key-alice", "POST", "/v1/sessions/source/snapshots", None);
    assert_eq!((status, refused["error"]["code"].as_str()), (507, Some("snapshot_quota_exceeded")), "{refused}");
    run(&service, "key-bob", "theirs", "state = 1");
    assert_eq!(service.json("key-bob", "POST", "/v1/sessions/theirs/snapshots", None).0, 201, "the quota is per tenant");
    let listed = service.json("key-alice", "GET", "/v1/snapshots", None).1;
    let first = listed["snapshots"][0]["snapshot_id"].as_str().expect("an id").to_owned();
    std::thread::sleep(std::time::Duration::from_millis(3500));
    let (_, expired) = service.json("key-alice", "GET", "/v1/snapshots", None);
    assert_eq!(expired["snapshots"], json!([]), "past their retention: {expired}");
    let (status, refused) = service.json("key-alice", "POST", "/v1/sessions", Some(json!({"session_id": "late", "from_snapshot": first})));
    assert_eq!(status, 404, "{refused}");
    assert_eq!(service.json("key-alice", "POST", "/v1/sessions/source/snapshots", None).0, 201, "expired ones leave room");
}
