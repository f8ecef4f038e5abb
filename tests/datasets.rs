//! Datasets at `/data`, as a client drives them over HTTP: staged by a
//! tenant (raw or multipart) and attached to a session, or mounted by the
//! operator (`--datasets`, `--datasets-acl`), in both runtimes.
//!
//! Boundaries proven here: `/data` is read-only at the WASI layer (every
//! write path fails in the guest and the bytes on the host are unchanged),
//! a tenant never sees another tenant's staged dataset nor a mounted one its
//! access list leaves out, and a session's view is links, never copies.

use crate::common;

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use reqwest::blocking::{Client, multipart};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use common::service::Service;

const SALES: &str = "region,amount\nnorth,120\nsouth,80\nnorth,30\n";
const PEOPLE: &str = "name,age\nAda,36\nAlan,41\nGrace,45\n";

fn sha(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

fn put(service: &Service, key: &str, name: &str, body: &'static str) -> (u16, Value) {
    let response = Client::new().put(format!("{}/v1/datasets/{name}", service.base)).header("x-api-key", key).body(body).send().expect("sent");
    (response.status().as_u16(), response.json().unwrap_or(Value::Null))
}

fn run(service: &Service, key: &str, session: &str, code: &str) -> Value {
    let (status, report) = service.json(key, "POST", &format!("/v1/sessions/{session}/run"), Some(json!({"code": code})));
    assert_eq!(status, 200, "{report}");
    report
}

fn stdout(report: &Value) -> &str {
    assert_eq!(report["exit_code"], 0, "{report}");
    report["stdout"].as_str().expect("stdout")
}

/// Every way code could change a file under /data, each answered with the
/// errno name it got (or `written` when it got through).
const WRITE_ATTEMPTS: &str = r#"
import errno, os
target = TARGET
attempts = {
    'append': lambda: open(target, 'a').write('x'),
    'overwrite': lambda: open(target, 'w').write('x'),
    'truncate': lambda: os.truncate(target, 0),
    'remove': lambda: os.remove(target),
    'rename_out': lambda: os.rename(target, '/mnt/data/taken.csv'),
    'rename_in': lambda: (open('/mnt/data/mine.csv', 'w').write('1'), os.rename('/mnt/data/mine.csv', target)),
    'create': lambda: open(os.path.join(os.path.dirname(target), 'new.txt'), 'w').write('x'),
    'mkdir': lambda: os.mkdir(os.path.join(os.path.dirname(target), 'newdir')),
    'hard_link_out': lambda: os.link(target, '/mnt/data/linked.csv'),
    'chmod_times': lambda: os.utime(target, (0, 0)),
}
for name, attempt in attempts.items():
    try:
        attempt()
        print(name, 'written')
    except OSError as e:
        print(name, errno.errorcode.get(e.errno, e.errno))
"#;

/// Runs [`WRITE_ATTEMPTS`] against `target` and returns each attempt's outcome.
fn write_attempts(service: &Service, key: &str, session: &str, target: &str) -> Vec<(String, String)> {
    let code = WRITE_ATTEMPTS.replace("TARGET", &format!("{target:?}"));
    let report = run(service, key, session, &code);
    let outcomes: Vec<(String, String)> = stdout(&report)
        .lines()
        .filter_map(|line| line.split_once(' ').map(|(a, b)| (a.to_owned(), b.to_owned())))
        .collect();
    let kept: Vec<&str> = report["artifacts"].as_array().expect("artifacts").iter().filter_map(|a| a["filename"].as_str()).collect();
    assert!(kept.iter().all(|f| *f == "mine.csv"), "only the session's own file may become an artifact: {kept:?}");
    outcomes
}

fn assert_all_refused(outcomes: &[(String, String)]) {
    assert_eq!(outcomes.len(), 10, "{outcomes:?}");
    for (attempt, outcome) in outcomes {
        // A hard link out of /data is refused as any hard link under a
        // session quota is (EPERM): it would make a shared file writable.
        let allowed: &[&str] = if attempt == "hard_link_out" { &["EROFS", "EPERM"] } else { &["EROFS"] };
        assert!(allowed.contains(&outcome.as_str()), "{attempt}: {outcome} (expected {allowed:?})");
    }
}

/// Blob files of the content-addressed store under `data_dir`.
fn blob_files(data_dir: &Path) -> Vec<String> {
    let blobs = data_dir.join("artifacts/blobs");
    let mut found = Vec::new();
    for shard in std::fs::read_dir(blobs).expect("blob store").flatten().filter(|s| s.file_name() != "staging") {
        found.extend(std::fs::read_dir(shard.path()).expect("shard").flatten().map(|b| b.file_name().to_string_lossy().into_owned()));
    }
    found.sort();
    found
}

#[test]
fn staged_datasets_are_shared_read_only_and_kept_per_tenant() {
    let dir = common::scratch("anypath-datasets-staged-");
    let service = Service::start(dir.path());

    // One file, raw body: /data/sales.csv.
    let (status, staged) = put(&service, "key-alice", "sales.csv", SALES);
    assert_eq!(status, 201, "{staged}");
    assert_eq!((&staged["source"], &staged["path"]), (&json!("staged"), &json!("/data/sales.csv")), "{staged}");
    assert_eq!((staged["size_bytes"].as_u64(), staged["sha256"].as_str()), (Some(SALES.len() as u64), Some(sha(SALES.as_bytes()).as_str())));

    // Several files, a multipart form as a browser or curl -F sends it: /data/survey/<file>.
    let form = multipart::Form::new()
        .part("a", multipart::Part::text("q,answer\n1,yes\n").file_name("answers.csv"))
        .part("b", multipart::Part::text("id,label\n1,first\n").file_name("labels.csv"));
    let response = Client::new().put(format!("{}/v1/datasets/survey", service.base)).header("x-api-key", "key-alice").multipart(form).send().expect("sent");
    assert_eq!(response.status().as_u16(), 201);
    let survey: Value = response.json().expect("json");
    let paths: Vec<&str> = survey["files"].as_array().expect("files").iter().filter_map(|f| f["path"].as_str()).collect();
    assert_eq!(paths, ["/data/survey/answers.csv", "/data/survey/labels.csv"], "{survey}");

    // The same bytes under another name are one blob.
    let (status, copy) = put(&service, "key-alice", "sales-again.csv", SALES);
    assert_eq!((status, &copy["sha256"]), (201, &staged["sha256"]));
    assert_eq!(blob_files(dir.path()).len(), 3, "three contents, three blobs: {:?}", blob_files(dir.path()));

    let (_, listed) = service.json("key-alice", "GET", "/v1/datasets", None);
    let names: Vec<&str> = listed["datasets"].as_array().expect("datasets").iter().filter_map(|d| d["name"].as_str()).collect();
    assert_eq!(names, ["sales-again.csv", "sales.csv", "survey"], "{listed}");
    // Boundary: tenants. Bob sees none of Alice's datasets and cannot attach one by name.
    let (_, bobs) = service.json("key-bob", "GET", "/v1/datasets", None);
    assert_eq!(bobs["datasets"], json!([]), "{bobs}");
    let (status, refused) = service.json("key-bob", "POST", "/v1/sessions/theft/datasets", Some(json!({"name": "sales.csv"})));
    assert_eq!((status, &refused["error"]["code"]), (404, &json!("no_such_dataset")), "{refused}");

    // Attached to a session whose instance is live: the state stays, the data appears.
    assert_eq!(stdout(&run(&service, "key-alice", "analysis", "x = 41\nimport os\nprint(os.listdir('/data'))")), "[]\n");
    let (status, attached) = service.json("key-alice", "POST", "/v1/sessions/analysis/datasets", Some(json!({"name": "sales.csv"})));
    assert_eq!((status, &attached["path"]), (201, &json!("/data/sales.csv")), "{attached}");
    let (status, _) = service.json("key-alice", "POST", "/v1/sessions/analysis/datasets", Some(json!({"name": "survey"})));
    assert_eq!(status, 201);
    let read = run(&service, "key-alice", "analysis", "import csv\nrows = list(csv.DictReader(open('/data/sales.csv')))\nprint(x + 1, sum(int(r['amount']) for r in rows), sorted(os.listdir('/data/survey')))");
    assert_eq!(stdout(&read), "42 230 ['answers.csv', 'labels.csv']\n");
    assert_eq!(read["artifacts"], json!([]), "reading a dataset makes no artifact");

    // Not copied: the session's /data holds a link to the blob itself.
    let blob = dir.path().join("artifacts/blobs").join(&sha(SALES.as_bytes())[..2]).join(sha(SALES.as_bytes()));
    let seen = dir.path().join("sessions/alice/analysis/datasets/sales.csv");
    assert_eq!(std::fs::metadata(&seen).expect("view").ino(), std::fs::metadata(&blob).expect("blob").ino());

    // Boundary: /data is read-only at the WASI layer, for a single file and a directory's file.
    assert_all_refused(&write_attempts(&service, "key-alice", "analysis", "/data/sales.csv"));
    assert_all_refused(&write_attempts(&service, "key-alice", "analysis", "/data/survey/answers.csv"));
    assert_eq!(std::fs::read(&blob).expect("blob"), SALES.as_bytes(), "the shared bytes are unchanged");

    // list_files names the datasets beside the session's own files.
    let (_, files) = service.json("key-alice", "GET", "/v1/sessions/analysis/files", None);
    let shown: Vec<&str> = files["datasets"].as_array().expect("datasets").iter().filter_map(|d| d["path"].as_str()).collect();
    assert_eq!(shown, ["/data/sales.csv", "/data/survey"], "{files}");
    assert!(files["files"].as_array().expect("files").iter().all(|f| f["path"].as_str().is_some_and(|p| p.starts_with("/mnt/data/"))), "{files}");

    // A fork shows what its parent had attached.
    let (status, _) = service.json("key-alice", "POST", "/v1/sessions/analysis/fork", Some(json!({"session_id": "branch"})));
    assert_eq!(status, 201);
    assert_eq!(stdout(&run(&service, "key-alice", "branch", "print(len(open('/data/sales.csv').read()))")), format!("{}\n", SALES.len()));

    // Bad input: names that could leave /data, unknown datasets, bad JSON.
    for bad in ["..", ".hidden", "a%2Fb"] {
        let (status, refused) = put(&service, "key-alice", bad, SALES);
        assert!(status == 400 || status == 404 || status == 405, "{bad}: {status} {refused}");
    }
    let (status, missing) = service.json("key-alice", "POST", "/v1/sessions/analysis/datasets", Some(json!({"name": "nope"})));
    assert_eq!((status, &missing["error"]["code"]), (404, &json!("no_such_dataset")));
    let (status, _) = service.json("key-alice", "POST", "/v1/sessions/analysis/datasets", Some(json!({"dataset": "sales.csv"})));
    assert_eq!(status, 400);

    // Removed: no longer listed or attachable; the blob goes at the next sweep once nothing refers to it.
    let gone = service.call("key-alice", "DELETE", "/v1/datasets/sales-again.csv", None);
    assert_eq!(gone.status().as_u16(), 204);
    let (status, _) = service.json("key-alice", "POST", "/v1/sessions/other/datasets", Some(json!({"name": "sales-again.csv"})));
    assert_eq!(status, 404);
}

#[test]
fn a_session_keeps_its_attached_datasets_across_a_restart() {
    let dir = common::scratch("anypath-datasets-restart-");
    let mut service = Service::start(dir.path());
    assert_eq!(put(&service, "key-alice", "sales.csv", SALES).0, 201);
    let (status, _) = service.json("key-alice", "POST", "/v1/sessions/kept/datasets", Some(json!({"name": "sales.csv"})));
    assert_eq!(status, 201);
    service.process.terminate();
    drop(service);
    service = Service::start(dir.path());
    assert_eq!(stdout(&run(&service, "key-alice", "kept", "print(open('/data/sales.csv').read().count('north'))")), "2\n");
}

#[test]
fn mounted_datasets_follow_the_access_list_in_both_runtimes() {
    let dir = common::scratch("anypath-datasets-mounted-");
    let mounted = common::scratch("anypath-datasets-source-");
    std::fs::create_dir_all(mounted.path().join("census/2026")).expect("dataset dir");
    std::fs::write(mounted.path().join("census/2026/people.csv"), PEOPLE).expect("dataset file");
    std::fs::create_dir_all(mounted.path().join("secret")).expect("dataset dir");
    std::fs::write(mounted.path().join("secret/key.txt"), "42").expect("dataset file");
    let acl = mounted.path().join("acl.toml");
    std::fs::write(&acl, "[datasets]\ncensus = [\"*\"]\nsecret = [\"alice\"]\n").expect("acl");
    let (source, acl) = (mounted.path().display().to_string(), acl.display().to_string());
    let python_data = common::python_data_dir().display().to_string();
    let service = Service::start_with(dir.path(), &["--datasets", &source, "--datasets-acl", &acl, "--python-data", &python_data]);

    let names = |key: &str| -> Vec<String> {
        let (_, listed) = service.json(key, "GET", "/v1/datasets", None);
        listed["datasets"].as_array().expect("datasets").iter().filter_map(|d| d["name"].as_str().map(str::to_owned)).collect()
    };
    assert_eq!(names("key-alice"), ["census", "secret"]);
    // Boundary: the access list. Bob's sessions do not have what it leaves out.
    assert_eq!(names("key-bob"), ["census"]);
    assert_eq!(stdout(&run(&service, "key-bob", "b1", "import os\nprint(sorted(os.listdir('/data')))")), "['census']\n");

    // python-data: pandas reads a mounted file, and cannot write beside it.
    let (status, _) = service.json("key-alice", "POST", "/v1/sessions", Some(json!({"session_id": "d1", "runtime": "python-data"})));
    assert_eq!(status, 201);
    let code = "import pandas as pd\ndf = pd.read_csv('/data/census/2026/people.csv')\nprint(len(df), int(df.age.sum()), open('/data/secret/key.txt').read())\n\
try:\n    df.to_csv('/data/census/2026/copy.csv')\nexcept OSError as e:\n    import errno; print(errno.errorcode[e.errno])\n";
    assert_eq!(stdout(&run(&service, "key-alice", "d1", code)), "3 122 42\nEROFS\n");
    assert_all_refused(&write_attempts(&service, "key-alice", "d1", "/data/census/2026/people.csv"));
    assert_eq!(std::fs::read_to_string(mounted.path().join("census/2026/people.csv")).expect("source"), PEOPLE, "the operator's file is unchanged");

    // Linked, not copied, and counted in no quota.
    let seen = dir.path().join("sessions/alice/d1/datasets/census/2026/people.csv");
    assert_eq!(std::fs::metadata(&seen).expect("view").ino(), std::fs::metadata(mounted.path().join("census/2026/people.csv")).expect("source").ino());
    // A tenant cannot stage a dataset under a mounted one's name.
    assert_eq!(put(&service, "key-alice", "census", SALES).0, 400);
}

#[test]
fn a_dataset_past_the_quota_is_refused_while_it_streams() {
    let dir = common::scratch("anypath-datasets-quota-");
    let service = Service::start_with(dir.path(), &["--dataset-quota-mb", "1"]);
    let big = vec![b'x'; 2 << 20];
    let response = Client::new().put(format!("{}/v1/datasets/big.bin", service.base)).header("x-api-key", "key-alice").body(big).send().expect("sent");
    let status = response.status().as_u16();
    let body: Value = response.json().unwrap_or(Value::Null);
    assert_eq!((status, &body["error"]["code"]), (413, &json!("body_too_large")), "{body}");
    let staging = dir.path().join("artifacts/blobs/staging");
    let left = || std::fs::read_dir(&staging).map(|d| d.count()).unwrap_or(0);
    assert_eq!(left(), 0, "nothing of the refused body stays");
    assert!(blob_files(dir.path()).is_empty());
    // The quota counts what the tenant holds already: a second dataset that
    // fits alone but not beside the first is cut off as it streams.
    let put_bytes = |name: &str, bytes: Vec<u8>| {
        Client::new().put(format!("{}/v1/datasets/{name}", service.base)).header("x-api-key", "key-alice").body(bytes).send().expect("sent").status().as_u16()
    };
    assert_eq!(put_bytes("first.bin", vec![b'a'; 600 << 10]), 201);
    assert_eq!(put_bytes("second.bin", vec![b'b'; 600 << 10]), 413);
    assert_eq!(put_bytes("first.bin", vec![b'c'; 700 << 10]), 201, "replacing a dataset frees its own bytes");
    assert_eq!(left(), 0);
}
