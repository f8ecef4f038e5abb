//! Artifacts of the code interpreter over HTTP: what a run reports, the
//! content-addressed blobs behind it, signed download links and the inline
//! read cap, driven through `anypath sandbox serve` like a client would.

use crate::common;

use base64::Engine;
use common::service::Service;
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// The signing key the service is started with, so a test can make links of its own.
const KEY: &str = "a-test-signing-key-of-thirty-two-bytes";

/// A fresh data directory, removed when the returned value is dropped: bind
/// it before the service started on it, so it outlives the service.
fn data_dir(name: &str) -> tempfile::TempDir {
    common::scratch(&format!("anypath-artifacts-{name}-"))
}

fn sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

fn run(service: &Service, key: &str, session: &str, code: &str) -> Value {
    let (status, report) = service.json(key, "POST", &format!("/v1/sessions/{session}/run"), Some(json!({"code": code})));
    assert_eq!(status, 200, "{report}");
    report
}

fn artifact<'a>(report: &'a Value, filename: &str) -> &'a Value {
    report["artifacts"].as_array().and_then(|a| a.iter().find(|a| a["filename"] == filename)).unwrap_or_else(|| panic!("no artifact {filename}: {report}"))
}

/// A link signed with `KEY` as the service signs it: length-prefixed fields.
fn sign(fields: &[&str]) -> String {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(KEY.as_bytes()).expect("key");
    for field in fields {
        mac.update(&(field.len() as u64).to_be_bytes());
        mac.update(field.as_bytes());
    }
    hex::encode(mac.finalize().into_bytes())
}

fn get_status(url: &str) -> (u16, Value) {
    let response = reqwest::blocking::get(url).expect("request");
    (response.status().as_u16(), response.json().unwrap_or(Value::Null))
}

const PNG: &str = "bytes([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13, 0x49, 0x48, 0x44, 0x52] + [0] * 48)";

/// Created and changed files are artifacts with the right hash, size and
/// media type; an unchanged file is not; a failed run keeps nothing.
#[test]
fn created_and_changed_files_are_artifacts_and_a_failed_run_keeps_none() {
    let dir = data_dir("report");
    let service = Service::start(dir.path());
    for (name, bytes) in [("notes.txt", b"first\n".as_slice()), ("same.csv", b"a,b\n1,2\n")] {
        let body = json!({"filename": name, "content_base64": base64::engine::general_purpose::STANDARD.encode(bytes)});
        assert_eq!(service.json("key-alice", "POST", "/v1/sessions/art-1/files", Some(body)).0, 201);
    }
    let report = run(
        &service,
        "key-alice",
        "art-1",
        &format!("import os\nopen('notes.txt', 'a').write('second\\n')\nopen('chart.png', 'wb').write({PNG})\nos.makedirs('out', exist_ok=True)\nopen('out/data.json', 'w').write('{{\"n\": 1}}')"),
    );
    let names: Vec<&str> = report["artifacts"].as_array().expect("artifacts").iter().filter_map(|a| a["filename"].as_str()).collect();
    assert_eq!(names, ["chart.png", "notes.txt", "out/data.json"], "the unchanged same.csv is not an artifact: {report}");
    let notes = artifact(&report, "notes.txt");
    assert_eq!(notes["sha256"].as_str(), Some(sha256(b"first\nsecond\n").as_str()));
    assert_eq!((notes["size_bytes"].as_u64(), notes["mime_type"].as_str(), notes["path"].as_str()), (Some(13), Some("text/plain; charset=utf-8"), Some("/mnt/data/notes.txt")));
    assert_eq!(artifact(&report, "chart.png")["mime_type"], "image/png");
    assert_eq!(artifact(&report, "out/data.json")["mime_type"], "application/json");
    for a in report["artifacts"].as_array().expect("artifacts") {
        for field in ["id", "path", "filename", "size_bytes", "mime_type", "sha256", "download_url"] {
            assert!(!a[field].is_null(), "descriptor field {field}: {a}");
        }
    }
    let (_, listed) = service.json("key-alice", "GET", "/v1/sessions/art-1/artifacts", None);
    let listed_before = listed["artifacts"].as_array().map(Vec::len);
    let failed = run(&service, "key-alice", "art-1", "open('partial.txt', 'w').write('half')\nraise ValueError('stop')");
    assert_eq!((failed["exit_code"].as_i64(), failed["artifacts"].as_array().map(Vec::len)), (Some(1), Some(0)), "{failed}");
    let (_, listed) = service.json("key-alice", "GET", "/v1/sessions/art-1/artifacts", None);
    assert_eq!(listed["artifacts"].as_array().map(Vec::len), listed_before, "a failed run indexes nothing");
    let (status, described) = service.json("key-alice", "GET", &format!("/v1/artifacts/{}", notes["id"].as_str().expect("id")), None);
    assert_eq!((status, &described["sha256"]), (200, &notes["sha256"]));
    assert_eq!(service.json("key-bob", "GET", &format!("/v1/artifacts/{}", notes["id"].as_str().expect("id")), None).0, 404, "another tenant's artifact does not exist for bob");
}

/// The blob store is content-addressed: the same bytes made by two sessions
/// of two tenants are stored once, under two artifact ids.
#[test]
fn the_same_bytes_from_two_sessions_are_one_blob() {
    let tmp = data_dir("dedup");
    let dir = tmp.path();
    let service = Service::start(dir);
    let code = "open('same.bin', 'wb').write(bytes(range(256)) * 64)";
    let alice = run(&service, "key-alice", "one", code);
    let bob = run(&service, "key-bob", "two", code);
    let (a, b) = (artifact(&alice, "same.bin"), artifact(&bob, "same.bin"));
    assert_eq!(a["sha256"], b["sha256"]);
    assert_ne!(a["id"], b["id"]);
    let sha = a["sha256"].as_str().expect("sha256");
    let shard = dir.join("artifacts/blobs").join(&sha[..2]);
    let blobs: Vec<_> = std::fs::read_dir(&shard).expect("shard").flatten().collect();
    assert_eq!(blobs.len(), 1, "one blob for both");
    assert_eq!(std::fs::read(blobs[0].path()).expect("blob").len(), 256 * 64);
}

/// Boundary: the HMAC-SHA256 signature of a download link. The link works
/// with no header at all; a changed signature, another artifact's id, a
/// missing or expired signature are each a 403 that reveals nothing.
#[test]
fn signed_links_work_without_headers_and_refuse_tampering_and_expiry() {
    let dir = data_dir("links");
    let service = Service::start_with(dir.path(), &["--signing-key", KEY]);
    let mine = run(&service, "key-alice", "linked", "open('secret.txt', 'w').write('alice only')");
    let theirs = run(&service, "key-bob", "linked", "open('secret.txt', 'w').write('bob only')");
    let (mine, theirs) = (artifact(&mine, "secret.txt"), artifact(&theirs, "secret.txt"));
    let url = mine["download_url"].as_str().expect("url");
    assert!(url.starts_with(&service.base), "an absolute URL: {url}");
    let response = reqwest::blocking::get(url).expect("download");
    assert_eq!(response.status().as_u16(), 200);
    assert_eq!(response.headers()["content-disposition"], "attachment; filename=\"secret.txt\"");
    assert_eq!(response.text().expect("text"), "alice only");
    let by_name = reqwest::blocking::get(mine["file_url"].as_str().expect("file_url")).expect("download");
    assert_eq!((by_name.status().as_u16(), by_name.text().expect("text")), (200, "alice only".to_owned()), "the /files/{{session}}/{{name}} shape");

    let (id, their_id) = (mine["id"].as_str().expect("id"), theirs["id"].as_str().expect("id"));
    let query = url.split_once('?').expect("query").1;
    let signature = query.split("signature=").nth(1).expect("signature");
    let flipped = format!("{}{}", if signature.starts_with('0') { '1' } else { '0' }, &signature[1..]);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_secs();
    let past = (now - 10).to_string();
    let future = (now + 600).to_string();
    let content = |id: &str, expires: &str, signature: &str| format!("{}/v1/artifacts/{id}/content?expires={expires}&signature={signature}", service.base);
    // The test signs like the service does: a fresh link with a future expiry works...
    assert_eq!(get_status(&content(id, &future, &sign(&["artifact", id, &future]))).0, 200);
    let refused = [
        (url.replace(signature, &flipped), "a changed signature"),
        (url.replace(id, their_id), "another artifact's id under this signature"),
        (format!("{}/v1/artifacts/{id}/content", service.base), "no signature"),
        (content(id, &past, &sign(&["artifact", id, &past])), "...and the same with an expiry in the past"),
        (mine["file_url"].as_str().expect("file_url").replace("tenant=alice", "tenant=bob"), "another tenant under a file link's signature"),
        (mine["file_url"].as_str().expect("file_url").replace("secret.txt", "other.txt"), "another file name"),
    ];
    for (link, what) in refused {
        let (status, body) = get_status(&link);
        assert_eq!(status, 403, "{what}: {link}");
        assert_eq!(body["error"]["message"], "the link is invalid or has expired", "{what} reveals nothing else");
    }
}

/// Reading an artifact inline returns base64 up to the read cap; above it the
/// error names a download link that works.
#[test]
fn inline_reads_stop_at_the_cap_and_point_to_the_link() {
    let dir = data_dir("cap");
    let service = Service::start_with(dir.path(), &["--read-cap-kib", "64"]);
    run(&service, "key-alice", "big", "open('small.bin', 'wb').write(bytes(range(256)) * 40)\nopen('large.bin', 'wb').write(b'x' * 100_000)");
    let (status, small) = service.json("key-alice", "GET", "/v1/sessions/big/artifacts/small.bin", None);
    assert_eq!(status, 200, "{small}");
    let bytes = base64::engine::general_purpose::STANDARD.decode(small["content_base64"].as_str().expect("base64")).expect("decodes");
    assert_eq!((bytes.len(), small["sha256"].as_str()), (10_240, Some(sha256(&bytes).as_str())));
    let (status, large) = service.json("key-alice", "GET", "/v1/sessions/big/artifacts/large.bin", None);
    assert_eq!((status, &large["error"]["code"]), (413, &json!("over_read_cap")), "{large}");
    let message = large["error"]["message"].as_str().expect("message");
    let link = message.split_whitespace().find(|w| w.starts_with("http")).expect("the message names the download_url");
    let fetched = reqwest::blocking::get(link).expect("download").bytes().expect("bytes");
    assert_eq!(fetched.len(), 100_000);
}

/// A tenant's artifact bytes are bounded: past the quota a changed file is
/// not kept, and the report says why, while the run itself succeeds.
#[test]
fn the_tenant_quota_bounds_artifact_bytes() {
    let dir = data_dir("quota");
    let service = Service::start_with(dir.path(), &["--artifact-quota-mb", "1"]);
    let first = run(&service, "key-alice", "q", "open('a.bin', 'wb').write(b'a' * 700_000)");
    assert_eq!(first["artifacts"].as_array().map(Vec::len), Some(1), "{first}");
    let second = run(&service, "key-alice", "q", "open('b.bin', 'wb').write(b'b' * 700_000)");
    assert_eq!((second["exit_code"].as_i64(), second["artifacts"].as_array().map(Vec::len)), (Some(0), Some(0)), "{second}");
    let reason = second["artifact_errors"][0]["error"].as_str().unwrap_or_default();
    assert!(reason.contains("quota"), "{second}");
    let other = run(&service, "key-bob", "q", "open('b.bin', 'wb').write(b'b' * 700_000)");
    assert_eq!(other["artifacts"].as_array().map(Vec::len), Some(1), "another tenant has its own quota: {other}");
}

/// A run that changes no file walks no directory; a run that changes one,
/// by any write path the guest has, still lists it. Each change follows a
/// run that changed nothing, so it is the filesystem layer's own record of
/// the change that makes the next walk happen.
#[test]
fn every_write_path_lists_its_file_after_a_run_that_changed_nothing() {
    let dir = data_dir("write-paths");
    let service = Service::start(dir.path());
    let setup = "import os\nfor name in ['append.txt', 'pwrite.bin', 'truncate.txt', 'sparse.bin', 'renamed-from.txt', 'utime.txt']:\n    open(name, 'wb').write(b'0123456789')\nheld = open('held.bin', 'wb', buffering=0)\n";
    let report = run(&service, "key-alice", "paths", setup);
    assert_eq!(report["exit_code"], 0, "{report}");
    for (code, expected) in [
        ("open('created.txt', 'w').write('new')", "created.txt"),
        ("open('append.txt', 'a').write('more')", "append.txt"),
        ("fd = os.open('pwrite.bin', os.O_WRONLY)\nos.pwrite(fd, b'X', 3)\nos.close(fd)", "pwrite.bin"),
        ("os.truncate('truncate.txt', 4)", "truncate.txt"),
        ("f = open('sparse.bin', 'r+b')\nf.seek(1 << 16)\nf.write(b'!')\nf.close()", "sparse.bin"),
        ("os.rename('renamed-from.txt', 'renamed-to.txt')", "renamed-to.txt"),
        ("os.utime('utime.txt', (1, 1))", "utime.txt"),
        // Through a file object an earlier run opened and kept.
        ("held.write(b'late')", "held.bin"),
        ("os.makedirs('sub', exist_ok=True)\nopen('sub/deep.txt', 'w').write('x')", "sub/deep.txt"),
    ] {
        let quiet = run(&service, "key-alice", "paths", "x = 1");
        assert_eq!(quiet["artifacts"], json!([]), "a run that changes nothing keeps nothing: {quiet}");
        let changed = run(&service, "key-alice", "paths", code);
        assert_eq!(changed["exit_code"], 0, "{code}: {changed}");
        let names: Vec<&str> = changed["artifacts"].as_array().expect("artifacts").iter().filter_map(|a| a["filename"].as_str()).collect();
        assert_eq!(names, [expected], "{code}");
    }
}
