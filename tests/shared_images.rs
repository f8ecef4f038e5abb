//! State images in the shared store as manifests and content-addressed
//! segments (three `anypath sandbox serve` hosts on SeaweedFS and Redis, as
//! in `shared_sessions`): a hand-over moves only what changed, forks and
//! snapshots name their source's segments, the fleet's sweep removes what
//! nothing names and never what a manifest names, and objects in the store
//! that are damaged, out of bounds or another session's are refused for
//! that one session.
//!
//! Boundary: the object store and Redis are input from outside the host's
//! process. What is read from them is checked before it reaches an
//! instance, and a bad object costs only the session it belongs to.

use crate::common;
use crate::shared_sessions::{ALICE, BUCKET, Fleet, json, open, run, wait_until_hibernated};

use std::collections::HashMap;
use std::time::{Duration, Instant};

use common::service::{Service, SharedStores};
use serde_json::{Value, json};

/// The host's shared-store figures from `/metrics`, by name.
fn store_metrics(host: &Service) -> HashMap<String, f64> {
    let response = host.call(ALICE, "GET", "/metrics", None);
    assert_eq!(response.status().as_u16(), 200, "metrics of {}", host.base);
    response
        .text()
        .expect("the metrics' text")
        .lines()
        .filter_map(|line| line.strip_prefix("anypath_").filter(|line| line.starts_with("store_")))
        .filter_map(|line| line.split_once(' ').and_then(|(name, value)| Some((name.to_owned(), value.trim().parse().ok()?))))
        .collect()
}

/// How much figure `name` of `host` grew while `action` ran.
fn growth(host: &Service, name: &str, action: impl FnOnce()) -> f64 {
    let before = store_metrics(host).get(name).copied().unwrap_or(0.0);
    action();
    store_metrics(host).get(name).copied().unwrap_or(0.0) - before
}

/// A figure summed over the fleet's hosts.
fn fleet_total(fleet: &Fleet, name: &str) -> f64 {
    fleet.hosts.iter().map(|host| store_metrics(host).get(name).copied().unwrap_or(0.0)).sum()
}

/// A run's code that leaves about `bytes` of fresh, incompressible state.
fn holding(bytes: usize) -> String {
    format!("import os\nbig = os.urandom({bytes})\nx = 5")
}

/// A hand-over moves what changed: after a session went from A to B and
/// back, B's image of a one-variable change writes a few segments, not the
/// session's three megabytes, and A, which holds the rest from its own
/// save, fetches only those.
#[test]
fn a_hand_over_and_a_resume_move_only_the_segments_that_changed() {
    let fleet = Fleet::start("segments", &[]);
    let id = "mover";
    open(fleet.a(), id);
    run(fleet.a(), id, &holding(3_000_000));
    let fetched_first = growth(fleet.b(), "store_segment_bytes_fetched", || {
        run(fleet.b(), id, "y = 1");
    });
    assert!(fetched_first > 2_500_000.0, "B, which never saw the session, fetched its image: {fetched_first} bytes");
    let written = growth(fleet.b(), "store_segment_bytes_written", || {
        let fetched = growth(fleet.a(), "store_segment_bytes_fetched", || {
            let on_a = run(fleet.a(), id, "print(x, y, len(big))");
            assert_eq!(on_a["stdout"], json!("5 1 3000000\n"), "the state came back whole: {on_a}");
        });
        assert!(fetched < 256.0 * 1024.0, "A fetched only what B changed: {fetched} bytes");
    });
    assert!(written < 256.0 * 1024.0, "B wrote only what its run changed: {written} bytes");
    assert!(store_metrics(fleet.a())["store_segments_from_cache"] > 0.0, "A used the segments it held");
}

/// A fork of a live session and a snapshot of it name the segments the
/// store holds already: each writes a manifest and what changed, and the
/// child sees the parent's state on another host.
#[test]
fn a_fork_and_a_snapshot_write_only_their_changed_segments() {
    let fleet = Fleet::start("forks", &[]);
    let id = "parent";
    open(fleet.a(), id);
    run(fleet.a(), id, &holding(2_000_000));
    // B takes it over and hands it back: A now knows where its segments lie.
    run(fleet.b(), id, "y = 2");
    run(fleet.a(), id, "z = 3");
    let written = growth(fleet.a(), "store_segment_bytes_written", || {
        let (status, body) = json(fleet.a(), ALICE, "POST", &format!("/v1/sessions/{id}/fork"), Some(json!({"session_id": "child"})));
        assert_eq!(status, 201, "forked: {body}");
        let (status, body) = json(fleet.a(), ALICE, "POST", &format!("/v1/sessions/{id}/snapshots"), Some(json!({})));
        assert_eq!(status, 201, "snapshot: {body}");
    });
    assert!(written < 512.0 * 1024.0, "the fork and the snapshot wrote {written} bytes of a 2 MB state");
    let on_c = run(fleet.c(), "child", "print(x, y, z, len(big))");
    assert_eq!(on_c["stdout"], json!("5 2 3 2000000\n"), "the child's state on C: {on_c}");
}

/// The sweep against saves under way: with a one-second grace and a sweep
/// every second, a session checkpointed on every run moves between hosts
/// twelve times, its state changing each time; every move finds all its
/// segments (nothing a manifest names is removed), and the packs its old
/// images left are removed.
#[test]
fn the_sweep_removes_what_no_manifest_names_and_nothing_a_manifest_names() {
    let fleet = Fleet::start("sweep", &["--checkpoint", "every-run", "--sweep-every-seconds", "1", "--sweep-grace-seconds", "1"]);
    let id = "churning";
    open(fleet.a(), id);
    run(fleet.a(), id, "n = 0");
    for step in 1..=12 {
        let host = &fleet.hosts[step % 3];
        let report = run(host, id, "import os\nn += 1\nchurn = os.urandom(400_000)\nprint(n)");
        assert_eq!((report["stdout"].as_str(), &report["state_reset"]), (Some(format!("{step}\n").as_str()), &json!(false)), "step {step} on {}: {report}", host.base);
        std::thread::sleep(Duration::from_millis(400));
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while fleet_total(&fleet, "store_packs_removed_objects") < 1.0 {
        assert!(Instant::now() < deadline, "no pack was swept: {:?}", store_metrics(fleet.a()));
        std::thread::sleep(Duration::from_millis(500));
    }
    // Long after the sweeps, the newest image still reads on every host.
    std::thread::sleep(Duration::from_secs(3));
    for host in &fleet.hosts {
        let report = run(host, id, "print(n, len(churn))");
        assert_eq!((report["stdout"].as_str(), &report["state_reset"]), (Some("12 400000\n"), &json!(false)), "on {}: {report}", host.base);
    }
}

/// Redis key prefix of the fleet's records.
fn namespace(stores: &SharedStores) -> String {
    let prefix = stores.s3_url.trim_start_matches(&format!("s3://{BUCKET}/")).to_owned();
    format!("anypath:{BUCKET}:{prefix}")
}

fn redis(stores: &SharedStores) -> redis::Connection {
    redis::Client::open(stores.redis_url.as_str()).and_then(|c| c.get_connection()).expect("a connection to the fleet's Redis")
}

/// A field of Alice's session's record on Redis.
fn record_field(stores: &SharedStores, id: &str, field: &str) -> Option<String> {
    redis::cmd("HGET").arg(format!("{}:record:alice:{id}", namespace(stores))).arg(field).query(&mut redis(stores)).expect("HGET")
}

/// A session whose host died is expired by the fleet's sweep once its TTL
/// has passed: its record goes from Redis (before this, it stayed for
/// ever), and the session is no longer found.
#[test]
fn the_record_of_an_expired_session_whose_host_died_is_swept() {
    let mut fleet = Fleet::start("expired", &["--lease-seconds", "2", "--sweep-every-seconds", "1", "--sweep-grace-seconds", "1"]);
    let id = "orphan";
    let (status, body) = json(fleet.a(), ALICE, "POST", "/v1/sessions", Some(json!({"session_id": id, "runtime": "python", "ttl_seconds": 2})));
    assert_eq!(status, 201, "{body}");
    run(fleet.a(), id, "x = 1");
    assert!(record_field(&fleet.stores, id, "meta").is_some(), "the session has a record");
    fleet.hosts[0].process.kill();
    let deadline = Instant::now() + Duration::from_secs(60);
    while record_field(&fleet.stores, id, "meta").is_some() {
        assert!(Instant::now() < deadline, "the dead host's expired session's record stayed");
        std::thread::sleep(Duration::from_millis(500));
    }
    assert!(fleet_total_alive(&fleet, "store_sweep_records_removed") >= 1.0);
    let (status, body) = json(fleet.b(), ALICE, "GET", &format!("/v1/sessions/{id}"), None);
    assert_eq!((status, &body["error"]["code"]), (404, &json!("no_such_session")), "{body}");
}

/// [`fleet_total`] over the hosts still running (A was killed).
fn fleet_total_alive(fleet: &Fleet, name: &str) -> f64 {
    fleet.hosts[1..].iter().map(|host| store_metrics(host).get(name).copied().unwrap_or(0.0)).sum()
}

/// The S3 endpoint of the fleet's store.
fn endpoint(stores: &SharedStores) -> String {
    stores.endpoint_env.iter().find(|(k, _)| k == "AWS_ENDPOINT_URL").map(|(_, v)| v.clone()).expect("the store's endpoint")
}

fn object_url(stores: &SharedStores, key: &str) -> String {
    format!("{}/{BUCKET}/{key}", endpoint(stores))
}

fn get_object(stores: &SharedStores, key: &str) -> Vec<u8> {
    let response = reqwest::blocking::get(object_url(stores, key)).expect("GET of an object");
    assert!(response.status().is_success(), "GET {key}: {}", response.status());
    response.bytes().expect("its bytes").to_vec()
}

fn put_object(stores: &SharedStores, key: &str, bytes: Vec<u8>) {
    let response = reqwest::blocking::Client::new()
        .put(object_url(stores, key))
        .header("content-type", "application/octet-stream")
        .body(bytes)
        .send()
        .expect("PUT of an object");
    assert!(response.status().is_success(), "PUT {key}: {}", response.status());
}

/// A stored manifest's placement (its JSON) and the image manifest after it.
fn placement(stored: &[u8]) -> (Value, Vec<u8>) {
    assert_eq!(&stored[..8], b"APSHARE1", "a stored manifest");
    let length = u32::from_le_bytes(stored[8..12].try_into().expect("four bytes")) as usize;
    (serde_json::from_slice(&stored[12..12 + length]).expect("its placement"), stored[12 + length..].to_vec())
}

fn with_placement(placement: &Value, image_manifest: &[u8]) -> Vec<u8> {
    let json = serde_json::to_vec(placement).expect("JSON");
    let mut out = b"APSHARE1".to_vec();
    out.extend_from_slice(&(json.len() as u32).to_le_bytes());
    out.extend_from_slice(&json);
    out.extend_from_slice(image_manifest);
    out
}

/// Each kind of bad object the store may hand a host, for one session
/// each: the host that resumes it answers `session_image_corrupt` (409 for
/// another runtime's image, 500 for the rest) with the request's id,
/// serves another session at once, and the session's next run starts
/// fresh and says so.
#[test]
fn damaged_truncated_oversized_and_misdirected_images_are_refused_for_their_session_only() {
    let fleet = Fleet::start("hostile", &["--hibernate-after-idle-seconds", "1"]);
    let stores = &fleet.stores;
    let victims = ["flipped", "truncated", "misplaced", "borrowed", "foreign", "oversized"];
    for id in victims {
        open(fleet.a(), id);
        run(fleet.a(), id, &holding(300_000));
    }
    // The lender lives on C: no segment of its image lies in a pack A wrote
    // (a segment is stored once, so damage to it is damage to every image
    // that names it; each of those is refused the same way).
    open(fleet.c(), "lender");
    run(fleet.c(), "lender", &holding(300_000));
    for id in victims {
        wait_until_hibernated(fleet.a(), id);
    }
    wait_until_hibernated(fleet.c(), "lender");
    let manifest_of = |id: &str| record_field(stores, id, "image").expect("a hibernated session's image");
    // Where the first segment the image names lies: its pack and offset.
    // Damage is aimed there, not at a pack's middle: the victims hold the
    // same objects, so an image names many segments another one stored, and
    // a pack may hold none of the damaged image's bytes past any given point.
    let first_segment = |id: &str| {
        let (placed, _) = placement(&get_object(stores, &manifest_of(id)));
        let (pack, offset) = (placed["segments"][0][0].as_u64().expect("a pack index"), placed["segments"][0][1].as_u64().expect("an offset"));
        (placed["packs"][pack as usize].as_str().expect("a pack").to_owned(), offset as usize)
    };

    // A segment's bytes changed in its pack.
    let (pack, offset) = first_segment("flipped");
    let mut bytes = get_object(stores, &pack);
    bytes[offset] ^= 0x20;
    put_object(stores, &pack, bytes);
    // A pack cut short, inside one of the image's segments.
    let (pack, offset) = first_segment("truncated");
    let bytes = get_object(stores, &pack);
    put_object(stores, &pack, bytes[..offset + 1].to_vec());
    // A manifest naming a pack it does not list.
    let (mut misplaced, image) = placement(&get_object(stores, &manifest_of("misplaced")));
    misplaced["segments"][0][0] = json!(99);
    put_object(stores, &manifest_of("misplaced"), with_placement(&misplaced, &image));
    // A record pointing at another session's manifest.
    redis::cmd("HSET")
        .arg(format!("{}:record:alice:borrowed", namespace(stores)))
        .arg("image")
        .arg(manifest_of("lender"))
        .query::<()>(&mut redis(stores))
        .expect("HSET");
    // A manifest of another runtime's image.
    let (mut foreign, image) = placement(&get_object(stores, &manifest_of("foreign")));
    foreign["runtime"] = json!("python-data");
    put_object(stores, &manifest_of("foreign"), with_placement(&foreign, &image));
    // A manifest far larger than any save writes.
    let mut huge = b"APSHARE1".to_vec();
    huge.resize(40 << 20, b' ');
    put_object(stores, &manifest_of("oversized"), huge);

    let bystander = "bystander";
    open(fleet.b(), bystander);
    for (id, status) in [("flipped", 500), ("truncated", 500), ("misplaced", 500), ("borrowed", 500), ("foreign", 409), ("oversized", 500)] {
        let response = fleet.b().call(ALICE, "POST", &format!("/v1/sessions/{id}/run"), Some(json!({"code": "print(x)"})));
        let request_id = response.headers().get("x-request-id").and_then(|v| v.to_str().ok()).map(str::to_owned);
        let answered = response.status().as_u16();
        let body: Value = response.json().expect("an error envelope");
        assert_eq!(answered, status, "{id}: {body}");
        assert_eq!(body["error"]["code"], json!("session_image_corrupt"), "{id}: {body}");
        assert!(request_id.is_some_and(|rid| body["error"]["request_id"] == json!(rid)), "{id}: the answer names its request: {body}");
        // The host goes on serving its other sessions.
        assert_eq!(run(fleet.b(), bystander, "print(1 + 1)")["stdout"], json!("2\n"), "after {id}");
        // The refused session starts fresh and says so.
        let again = run(fleet.b(), id, "print('x' in globals())");
        assert_eq!((again["stdout"].as_str(), &again["state_reset"]), (Some("False\n"), &json!(true)), "{id}: {again}");
    }
    assert!(store_metrics(fleet.b())["store_images_refused"] >= 5.0);
    // The lender's own image was never touched.
    assert_eq!(run(fleet.b(), "lender", "print(x, len(big))")["stdout"], json!("5 300000\n"));
}

/// Under `--checkpoint every-run`, a run whose image the store refuses is
/// rolled back: the answer says so (503 `checkpoint_failed`), and the run
/// retried once the store is back is applied once, not twice.
#[test]
fn a_refused_checkpoint_rolls_the_run_back_and_its_retry_applies_once() {
    let mut fleet = Fleet::start_own("rollback", &["--checkpoint", "every-run", "--hibernate-after-idle-seconds", "3600"]);
    let id = "counted";
    open(fleet.a(), id);
    run(fleet.a(), id, "n = 1");
    fleet.store().kill();
    let (status, body) = json(fleet.a(), ALICE, "POST", &format!("/v1/sessions/{id}/run"), Some(json!({"code": "n += 1"})));
    assert_eq!((status, &body["error"]["code"]), (503, &json!("checkpoint_failed")), "{body}");
    assert!(body["error"]["message"].as_str().is_some_and(|m| m.contains("rolled back")), "the answer says the run was undone: {body}");
    fleet.store().resume();
    let retried = run(fleet.a(), id, "n += 1\nprint(n)");
    assert_eq!((retried["stdout"].as_str(), &retried["state_reset"]), (Some("2\n"), &json!(false)), "the retry applied once: {retried}");
    // The first run of a session without state rolls back to no state.
    let fresh = "fresh";
    open(fleet.a(), fresh);
    fleet.store().kill();
    let (status, body) = json(fleet.a(), ALICE, "POST", &format!("/v1/sessions/{fresh}/run"), Some(json!({"code": "m = 1"})));
    assert_eq!(status, 503, "{body}");
    fleet.store().resume();
    let after = run(fleet.a(), fresh, "print('m' in globals())");
    assert_eq!((after["stdout"].as_str(), &after["state_reset"]), (Some("False\n"), &json!(false)), "{after}");
}

/// An interrupt reaches a run on whichever host holds its session: a
/// background run started on A is stopped by a `DELETE` of it sent to B,
/// and the session (still on A) runs on afterwards.
#[test]
fn an_interrupt_sent_to_one_host_stops_the_run_on_another() {
    let fleet = Fleet::start("interrupts", &[]);
    let id = "looping";
    open(fleet.a(), id);
    run(fleet.a(), id, "x = 7");
    let (status, started) = json(fleet.a(), ALICE, "POST", &format!("/v1/sessions/{id}/run"), Some(json!({"code": "while True:\n    pass", "background": true})));
    assert_eq!(status, 202, "{started}");
    let run_id = started["run_id"].as_str().expect("a run id").to_owned();
    // The loop is under way on A.
    std::thread::sleep(Duration::from_millis(500));
    let (status, stopping) = json(fleet.b(), ALICE, "DELETE", &format!("/v1/sessions/{id}/runs/{run_id}"), None);
    assert!(status == 202 || status == 200, "B takes the interrupt: {status} {stopping}");
    let deadline = Instant::now() + Duration::from_secs(20);
    let ended = loop {
        let (_, status) = json(fleet.a(), ALICE, "GET", &format!("/v1/sessions/{id}/runs/{run_id}"), None);
        if status["state"] != json!("running") {
            break status;
        }
        assert!(Instant::now() < deadline, "the run on A was not stopped by the interrupt sent to B: {status}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(ended["state"], json!("interrupted"), "{ended}");
    assert_eq!(run(fleet.a(), id, "print(x)")["stdout"], json!("7\n"));
}

/// Under the default `--checkpoint idle`, a session that sat quiet for a
/// moment has its state kept in the store off every answer's path: a host
/// killed then loses nothing of it. A run after that checkpoint marks the
/// image older first, so a host killed right after that run has the next
/// host say what was lost.
#[test]
fn a_quiet_session_is_checkpointed_in_the_background_and_a_later_run_marks_it_older() {
    let mut fleet = Fleet::start("quiet", &["--lease-seconds", "2", "--hibernate-after-idle-seconds", "3600"]);
    let (kept, stale) = ("kept-quietly", "stale-after");
    for id in [kept, stale] {
        open(fleet.a(), id);
        run(fleet.a(), id, "x = 1");
    }
    // Both sit quiet past the checkpoint's wait; then one runs again.
    std::thread::sleep(Duration::from_secs(5));
    run(fleet.a(), stale, "x = 2");
    fleet.hosts[0].process.kill();
    let on_b = run(fleet.b(), kept, "print(x)");
    assert_eq!((on_b["stdout"].as_str(), &on_b["state_reset"]), (Some("1\n"), &json!(false)), "the quiet session's state was kept: {on_b}");
    let on_b = run(fleet.b(), stale, "print(x)");
    assert_eq!((on_b["stdout"].as_str(), &on_b["state_reset"]), (Some("1\n"), &json!(true)), "the run after the checkpoint is lost, and said so: {on_b}");
}

/// The whole product as a fleet: three `anypath up` instances (each the app
/// and its sandbox host) on one Redis (the app's store and the hosts'
/// coordination) and one object store. A REST record written through one
/// is read through another; a `/v1` session, an E2B sandbox's code and a
/// Jupyter kernel started through one are used through the others.
#[test]
fn three_anypath_up_instances_serve_rest_v1_e2b_and_jupyter_as_one_fleet() {
    let kv = common::app::temp_kv("up-fleet");
    let redis = common::redis_server::RedisServer::start(&kv.with_file_name("redis"));
    let (store, endpoint_env, _own_store) = match std::env::var("ANYPATH_FLEET_S3") {
        Ok(endpoint) => (format!("s3://{BUCKET}/up-fleet-{}", uuid::Uuid::new_v4().simple()), common::seaweedfs::SeaweedFs::env_for(&endpoint), None),
        Err(_) => {
            let own = common::seaweedfs::SeaweedFs::start(&kv.with_file_name("seaweedfs"));
            own.create_bucket(BUCKET);
            (format!("s3://{BUCKET}/up-fleet"), own.env(), Some(own))
        }
    };
    let mut env: Vec<(String, String)> = redis.app_env();
    env.extend(endpoint_env);
    env.extend([
        ("ANYPATH_SESSION_STORE".to_owned(), store),
        ("ANYPATH_COORDINATION".to_owned(), redis.url()),
        ("ANYPATH_SIGNING_KEY".to_owned(), "up-fleet-signing-key-of-32-bytes".to_owned()),
        ("ANYPATH_API_KEYS".to_owned(), "e2b_a11ce:alice,key-alice:alice".to_owned()),
    ]);
    let pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let apps: Vec<common::app::App> = (0..3).map(|i| common::app::App::start_with(&kv.with_file_name(format!("kv-{i}.db")), "spin.toml", &pairs)).collect();
    let http = reqwest::blocking::Client::builder().timeout(Duration::from_secs(120)).build().expect("a client");

    // REST: a record made through one instance reads through another.
    let made = http.post(format!("{}/notes", apps[0].base)).json(&json!({"text": "shared"})).send().expect("POST /notes");
    assert_eq!(made.status().as_u16(), 201);
    let made: Value = made.json().expect("the record");
    let read: Value = http.get(format!("{}/notes/{}", apps[1].base, made["id"])).send().expect("GET").json().expect("JSON");
    assert_eq!(read["text"], json!("shared"), "{read}");

    // /v1: state made through the first instance's sandbox host, read through the third's.
    let v1 = |i: usize, method: &str, path: &str, body: Value| -> Value {
        let response = http.request(method.parse().expect("a method"), format!("http://{}{path}", apps[i].sandbox)).header("x-api-key", "key-alice").json(&body).send().expect("sent");
        let status = response.status();
        let body: Value = response.json().unwrap_or(Value::Null);
        assert!(status.is_success(), "{method} {path} on instance {i}: {status} {body}");
        body
    };
    v1(0, "POST", "/v1/sessions", json!({"session_id": "shared", "runtime": "python"}));
    v1(0, "POST", "/v1/sessions/shared/run", json!({"code": "x = 41"}));
    assert_eq!(v1(2, "POST", "/v1/sessions/shared/run", json!({"code": "print(x + 1)"}))["stdout"], json!("42\n"));

    // E2B: a sandbox made through one instance runs code through the others.
    let e2b = |i: usize| format!("http://{}", apps[i].e2b.as_deref().expect("E2B's API is served"));
    let sandbox: Value = http
        .post(format!("{}/v2/sandboxes", e2b(0)))
        .header("x-api-key", "e2b_a11ce")
        .json(&json!({"templateID": "code-interpreter-v1", "timeout": 60}))
        .send()
        .expect("created")
        .json()
        .expect("a sandbox");
    let execute = |i: usize, code: &str| -> String {
        let mut request = http.post(format!("{}/execute", e2b(i))).header("e2b-sandbox-id", sandbox["sandboxID"].as_str().expect("an id"));
        if let Some(token) = sandbox["envdAccessToken"].as_str() {
            request = request.header("x-access-token", token);
        }
        let response = request.json(&json!({"code": code})).send().expect("executed");
        assert_eq!(response.status().as_u16(), 200, "execute on instance {i}");
        response.text().expect("its stream")
    };
    execute(1, "y = 20");
    assert!(execute(2, "y + 22").contains("\"42\""), "the sandbox's state through another instance");

    // Jupyter: a kernel started through one instance is found through another.
    let kernel: Value = http
        .post(format!("http://{}/api/kernels", apps[0].sandbox))
        .header("authorization", "token key-alice")
        .json(&json!({"name": "python3"}))
        .send()
        .expect("started")
        .json()
        .expect("a kernel");
    let id = kernel["id"].as_str().expect("a kernel id");
    let found = http.get(format!("http://{}/api/kernels/{id}", apps[1].sandbox)).header("authorization", "token key-alice").send().expect("found");
    assert_eq!(found.status().as_u16(), 200, "the kernel is listed through another instance");
}
