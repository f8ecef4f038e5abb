//! Sessions on any host: three `anypath sandbox serve` hosts (A, B, C),
//! each with its own data directory, sharing one S3-compatible object store
//! (SeaweedFS, `--session-store`) and one Redis (`--coordination`). Any call
//! for a session works on any host: a session live on one host is handed
//! over to the host a call reaches, a dead host's sessions are taken over
//! once its lease runs out, from their newest image in the store, and a
//! run says when state acknowledged after that image is gone.

use crate::common;

use std::path::Path;
use std::time::Duration;

use reqwest::blocking::{Client, Response};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use common::redis_server::RedisServer;
use common::seaweedfs::SeaweedFs;
use common::service::{Service, SharedStores};

/// The bucket every fleet keeps its sessions in (each test has its own store).
pub(crate) const BUCKET: &str = "anypath-sessions";

/// Alice's API key: every call here is hers unless it says otherwise.
pub(crate) const ALICE: &str = "key-alice";

/// One object store, one Redis and three hosts on them. Dropped hosts
/// first, then Redis and the store (when the fleet has its own), then the
/// directory they all use.
pub(crate) struct Fleet {
    pub(crate) hosts: Vec<Service>,
    pub(crate) stores: SharedStores,
    extra: Vec<String>,
    servers: Servers,
    dir: tempfile::TempDir,
}

/// Where a fleet's object store and Redis come from.
pub(crate) enum Servers {
    /// The test run's (`cargo xtask test` starts one of each for every
    /// fleet suite: `ANYPATH_FLEET_S3`, `ANYPATH_FLEET_REDIS`); fleets keep
    /// apart by their prefix, which names their keys on Redis too.
    Run,
    /// The fleet's own, which a test may stop, kill and bring back.
    Own { redis: RedisServer, store: SeaweedFs },
}

impl Fleet {
    /// Hosts A, B and C, each with `extra` arguments, on the test run's
    /// store and Redis (their own when the run has none).
    pub(crate) fn start(name: &str, extra: &[&str]) -> Self {
        match (std::env::var("ANYPATH_FLEET_S3"), std::env::var("ANYPATH_FLEET_REDIS")) {
            (Ok(endpoint), Ok(redis_url)) => {
                let dir = common::scratch(&format!("anypath-shared-{name}-"));
                // A prefix of its own, on every try of the test.
                let prefix = format!("{name}-{}", uuid::Uuid::new_v4().simple());
                let stores = SharedStores { s3_url: format!("s3://{BUCKET}/{prefix}"), endpoint_env: SeaweedFs::env_for(&endpoint), redis_url };
                Self::on(stores, Servers::Run, dir, extra)
            }
            _ => Self::start_own(name, extra),
        }
    }

    /// Starts a store (with its bucket) and a Redis of the fleet's own, then
    /// hosts A, B and C on them.
    pub(crate) fn start_own(name: &str, extra: &[&str]) -> Self {
        let dir = common::scratch(&format!("anypath-shared-{name}-"));
        let store = SeaweedFs::start(&dir.path().join("seaweedfs"));
        store.create_bucket(BUCKET);
        let redis = RedisServer::start(&dir.path().join("redis"));
        let stores = SharedStores { s3_url: format!("s3://{BUCKET}/{name}"), endpoint_env: store.env(), redis_url: redis.url() };
        Self::on(stores, Servers::Own { redis, store }, dir, extra)
    }

    fn on(stores: SharedStores, servers: Servers, dir: tempfile::TempDir, extra: &[&str]) -> Self {
        // Side by side: each host loads its runtime, seconds of work on a busy machine.
        let hosts = std::thread::scope(|scope| {
            let starting: Vec<_> = ["a", "b", "c"]
                .into_iter()
                .map(|host| {
                    let data_dir = dir.path().join(format!("host-{host}"));
                    let stores = &stores;
                    scope.spawn(move || start_host(&data_dir, stores, extra))
                })
                .collect();
            starting.into_iter().map(|h| h.join().expect("a host starts")).collect()
        });
        let extra = extra.iter().map(|a| (*a).to_owned()).collect();
        Self { hosts, stores, extra, servers, dir }
    }

    /// The fleet's own object store.
    pub(crate) fn store(&mut self) -> &mut SeaweedFs {
        match &mut self.servers {
            Servers::Own { store, .. } => store,
            Servers::Run => panic!("a test that stops the object store starts its own (Fleet::start_own)"),
        }
    }

    /// The fleet's own Redis.
    fn redis(&mut self) -> &mut RedisServer {
        match &mut self.servers {
            Servers::Own { redis, .. } => redis,
            Servers::Run => panic!("a test that stops Redis starts its own (Fleet::start_own)"),
        }
    }

    /// Stops host `index` gracefully (SIGTERM: it hands its sessions to the
    /// store on the way out) and starts it again over the same directory.
    fn restart(&mut self, index: usize) {
        let status = self.hosts[index].process.terminate();
        assert!(status.success(), "host {index} stops cleanly: {status}");
        let data_dir = self.dir.path().join(format!("host-{}", ["a", "b", "c"][index]));
        let extra: Vec<&str> = self.extra.iter().map(String::as_str).collect();
        self.hosts[index] = start_host(&data_dir, &self.stores, &extra);
    }

    pub(crate) fn a(&self) -> &Service {
        &self.hosts[0]
    }

    pub(crate) fn b(&self) -> &Service {
        &self.hosts[1]
    }

    pub(crate) fn c(&self) -> &Service {
        &self.hosts[2]
    }
}

pub(crate) fn start_host(data_dir: &Path, stores: &SharedStores, extra: &[&str]) -> Service {
    std::fs::create_dir_all(data_dir).expect("the host's data directory");
    Service::start_shared(data_dir, stores, extra)
}

/// A client that waits as long as a loaded machine may need: a call can
/// wait for a handover, or for a dead host's lease to run out.
pub(crate) fn client() -> Client {
    Client::builder().timeout(Duration::from_secs(300)).build().expect("an HTTP client")
}

/// One request as `key`, with a JSON body or none.
pub(crate) fn call(host: &Service, key: &str, method: &str, path: &str, body: Option<Value>) -> Response {
    let mut request = client().request(method.parse().expect("method"), format!("{}{path}", host.base)).header("x-api-key", key);
    if let Some(body) = body {
        request = request.json(&body);
    }
    request.send().unwrap_or_else(|e| panic!("{method} {path} on {}: {e}", host.base))
}

/// One request, its status and JSON body (`null` when not JSON).
pub(crate) fn json(host: &Service, key: &str, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let response = call(host, key, method, path, body);
    let status = response.status().as_u16();
    (status, response.json().unwrap_or(Value::Null))
}

/// Opens Alice's session `id` on `host`, on the standard-library runtime
/// (the lightest: its images are small).
pub(crate) fn open(host: &Service, id: &str) {
    let (status, body) = json(host, ALICE, "POST", "/v1/sessions", Some(json!({"session_id": id, "runtime": "python"})));
    assert_eq!(status, 201, "session {id} opened on {}: {body}", host.base);
}

/// Runs `code` in Alice's session `id` on `host`: the report of a run that
/// exited 0.
pub(crate) fn run(host: &Service, id: &str, code: &str) -> Value {
    let (status, report) = json(host, ALICE, "POST", &format!("/v1/sessions/{id}/run"), Some(json!({"code": code})));
    assert_eq!(status, 200, "{code:?} on {}: {report}", host.base);
    assert_eq!(report["exit_code"], 0, "{code:?} on {}: {report}", host.base);
    report
}

/// Uploads `bytes` as Alice's file `name` in session `id` on `host`.
pub(crate) fn put_file(host: &Service, id: &str, name: &str, bytes: Vec<u8>) {
    let response = client()
        .put(format!("{}/v1/sessions/{id}/files/{name}", host.base))
        .header("x-api-key", ALICE)
        .body(bytes)
        .send()
        .unwrap_or_else(|e| panic!("PUT {name} on {}: {e}", host.base));
    let status = response.status().as_u16();
    assert_eq!(status, 201, "{name} uploaded on {}: {}", host.base, response.text().unwrap_or_default());
}

/// Downloads Alice's file `name` of session `id` from `host`.
pub(crate) fn get_file(host: &Service, id: &str, name: &str) -> Vec<u8> {
    let response = call(host, ALICE, "GET", &format!("/v1/sessions/{id}/files/{name}"), None);
    let status = response.status().as_u16();
    assert_eq!(status, 200, "{name} downloaded from {}", host.base);
    response.bytes().expect("the file's bytes").to_vec()
}

/// `len` bytes that are the same on every run (xorshift64 from a fixed
/// seed), with no runs a store could shorten.
pub(crate) fn deterministic_bytes(len: usize) -> Vec<u8> {
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut bytes = Vec::with_capacity(len + 8);
    while bytes.len() < len {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        bytes.extend_from_slice(&state.to_le_bytes());
    }
    bytes.truncate(len);
    bytes
}

pub(crate) fn sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// A session follows its calls from host to host: state made on A is there
/// for a run on B (no reset), a file uploaded on B reads back from C byte
/// for byte, and an artifact made by a run on C downloads through host A
/// with the link C signed (one signing key for the fleet). Another tenant
/// does not see the session on any host.
#[test]
fn a_session_moves_between_hosts() {
    let fleet = Fleet::start("moves", &[]);
    let id = "moving";
    open(fleet.a(), id);
    run(fleet.a(), id, "x = 41");
    let on_b = run(fleet.b(), id, "print(x + 1)");
    assert_eq!((on_b["stdout"].as_str(), &on_b["state_reset"]), (Some("42\n"), &json!(false)), "A's state reaches B: {on_b}");

    let blob = deterministic_bytes(256 * 1024);
    put_file(fleet.b(), id, "blob.bin", blob.clone());
    let read = get_file(fleet.c(), id, "blob.bin");
    assert_eq!((read.len(), sha256(&read)), (blob.len(), sha256(&blob)), "B's upload reads back from C");

    let csv = "region,total\nnorth,150\nsouth,100\n";
    let on_c = run(fleet.c(), id, &format!("open('report.csv', 'w').write({csv:?})"));
    let artifact = on_c["artifacts"]
        .as_array()
        .and_then(|a| a.iter().find(|a| a["filename"] == "report.csv"))
        .unwrap_or_else(|| panic!("the run on C reports report.csv: {on_c}"));
    let link = reqwest::Url::parse(artifact["download_url"].as_str().expect("a download_url")).expect("the link is a URL");
    assert!(link.query().is_some_and(|q| q.contains("signature=")), "a signed link: {link}");
    // The link's path and query, from host A: no API key, only the signature.
    let through_a = format!("{}{}?{}", fleet.a().base, link.path(), link.query().unwrap_or_default());
    let response = client().get(&through_a).send().expect("the download from A");
    assert_eq!(response.status().as_u16(), 200, "C's link is good on A: {through_a}");
    assert_eq!(response.bytes().expect("the artifact's bytes").as_ref(), csv.as_bytes());

    for host in &fleet.hosts {
        let (status, body) = json(host, "key-bob", "GET", &format!("/v1/sessions/{id}"), None);
        assert_eq!((status, &body["error"]["code"]), (404, &json!("no_such_session")), "bob has no session {id} on {}: {body}", host.base);
    }
}

/// A host killed outright (SIGKILL, nothing saved on the way out) loses
/// nothing its session had in its newest image: once A's two-second lease
/// runs out, B resumes the session from the image A made when it sat idle (x = 1),
/// with the files kept beside it.
/// The run acknowledged on A after that image (x = 2) is gone, and B's run
/// says so: `state_reset` with a note, never a silent step back.
#[test]
fn a_killed_owner_loses_nothing_hibernated() {
    // A hibernates a session idle for a second; the run after the image
    // kills A long before the session is idle again.
    let mut fleet = Fleet::start("killed", &["--lease-seconds", "2", "--hibernate-after-idle-seconds", "1"]);
    let id = "survivor";
    open(fleet.a(), id);
    run(fleet.a(), id, "x = 1\nopen('notes.txt', 'w').write('kept with the image')");
    wait_until_hibernated(fleet.a(), id);
    run(fleet.a(), id, "x = 2");
    fleet.hosts[0].process.kill();

    let on_b = run(fleet.b(), id, "print(x)");
    assert_eq!(on_b["stdout"].as_str(), Some("1\n"), "B resumes from the image (x = 1): {on_b}");
    assert_eq!(on_b["state_reset"], json!(true), "the state acknowledged after the image (x = 2) is lost, and said so: {on_b}");
    assert!(on_b["state_note"].as_str().is_some_and(|note| !note.is_empty()), "the reset has a note: {on_b}");
    assert_eq!(get_file(fleet.b(), id, "notes.txt"), b"kept with the image", "the files kept with the image are on B");
}

/// With `--checkpoint every-run` a killed owner loses nothing it
/// acknowledged: each run's answer waits for its image and files to be in
/// the store, so B resumes with the last acknowledged run's state (x = 3)
/// and file, and no reset is reported. A file held open across runs is
/// closed by then, and the run after it is checkpointed again.
#[test]
fn a_killed_owner_loses_no_acknowledged_run_with_checkpoints() {
    let mut fleet = Fleet::start("checkpoint", &["--lease-seconds", "2", "--checkpoint", "every-run"]);
    let id = "checkpointed";
    open(fleet.a(), id);
    run(fleet.a(), id, "x = 1\nlog = open('log.txt', 'w')\nlog.write('one ')");
    run(fleet.a(), id, "x = 2\nlog.write('two ')\nlog.close()");
    run(fleet.a(), id, "x = 3\nopen('notes.txt', 'w').write('written by the last acknowledged run')");
    fleet.hosts[0].process.kill();

    let on_b = run(fleet.b(), id, "print(x)");
    assert_eq!((on_b["stdout"].as_str(), &on_b["state_reset"]), (Some("3\n"), &json!(false)), "B resumes the last acknowledged state: {on_b}");
    assert_eq!(get_file(fleet.b(), id, "notes.txt"), b"written by the last acknowledged run");
    assert_eq!(get_file(fleet.b(), id, "log.txt"), b"one two ", "the file closed by the second run is whole");
}

/// A file far larger than any image (50 MiB) uploaded on one host reads
/// back whole from another: the same length and sha256.
#[test]
fn a_fifty_megabyte_upload_on_one_host_reads_on_another() {
    let fleet = Fleet::start("large", &[]);
    let id = "large";
    open(fleet.a(), id);
    let big = deterministic_bytes(50 * 1024 * 1024);
    let expected = sha256(&big);
    put_file(fleet.a(), id, "big.bin", big);
    let read = get_file(fleet.b(), id, "big.bin");
    assert_eq!((read.len(), sha256(&read)), (50 * 1024 * 1024, expected), "A's upload reads back from B");
}

/// A session no host ever opened is unknown to all of them: 404
/// `no_such_session` on each, and asking one host creates it on none.
#[test]
fn a_session_that_never_existed_is_not_found_on_every_host() {
    let fleet = Fleet::start("missing", &[]);
    for host in &fleet.hosts {
        for path in ["/v1/sessions/nope", "/v1/sessions/nope/files"] {
            let (status, body) = json(host, ALICE, "GET", path, None);
            assert_eq!((status, &body["error"]["code"]), (404, &json!("no_such_session")), "GET {path} on {}: {body}", host.base);
        }
    }
}

/// Leaves Alice's session `id` on `host` idle until the host has hibernated
/// it (hosts started with `--hibernate-after-idle-seconds 1`); each look
/// touches the session, so it is left alone in between.
pub(crate) fn wait_until_hibernated(host: &Service, id: &str) {
    let hibernated = (0..30).any(|_| {
        std::thread::sleep(Duration::from_millis(2500));
        json(host, ALICE, "GET", &format!("/v1/sessions/{id}"), None).1["hibernated"] == json!(true)
    });
    assert!(hibernated, "{} hibernated the idle session {id}", host.base);
}

/// Twenty runs for one hibernated session at once, spread over the three
/// hosts: the session moves between them as it is asked for, and every
/// call is answered, by its run or by the busy answer one host gives too.
/// Every run that ran was applied exactly once, and no run lost state.
#[test]
fn twenty_runs_racing_over_three_hosts_are_each_applied_once() {
    let fleet = Fleet::start("race", &["--hibernate-after-idle-seconds", "1"]);
    let id = "contested";
    open(fleet.a(), id);
    run(fleet.a(), id, "ran = []");
    wait_until_hibernated(fleet.a(), id);

    let answers: Vec<(u16, Value)> = std::thread::scope(|scope| {
        let calls: Vec<_> = (0..20)
            .map(|i| {
                let host = &fleet.hosts[i % 3];
                scope.spawn(move || json(host, ALICE, "POST", &format!("/v1/sessions/{id}/run"), Some(json!({"code": format!("ran.append({i})")}))))
            })
            .collect();
        calls.into_iter().map(|call| call.join().expect("a racing call")).collect()
    });
    let mut applied = Vec::new();
    for (i, (status, body)) in answers.iter().enumerate() {
        match status {
            200 => {
                assert_eq!((&body["exit_code"], &body["state_reset"]), (&json!(0), &json!(false)), "run {i}: {body}");
                applied.push(i);
            }
            409 => assert_eq!(body["error"]["code"], json!("session_busy"), "run {i}: {body}"),
            other => panic!("run {i} answered {other}: {body}"),
        }
    }
    assert!(!applied.is_empty(), "some runs ran: {answers:?}");
    let report = run(fleet.b(), id, "print(sorted(ran))");
    assert_eq!(report["stdout"].as_str(), Some(format!("{applied:?}\n").as_str()), "each run that ran is in the state once: {report}");
    assert_eq!(report["state_reset"], json!(false), "{report}");
}

/// A host paused (SIGSTOP) past its lease, then resumed, cannot write its
/// stale state: B takes the session over from its newest image and moves
/// it on; A, thawed, neither answers from its old state nor overwrites
/// B's, and its next call for the session gets B's state, handed over.
#[test]
fn a_paused_host_that_comes_back_cannot_write_its_stale_state() {
    let fleet = Fleet::start("paused", &["--lease-seconds", "2", "--hibernate-after-idle-seconds", "1"]);
    let id = "fenced";
    open(fleet.a(), id);
    run(fleet.a(), id, "x = 1");
    wait_until_hibernated(fleet.a(), id);
    run(fleet.a(), id, "x = 2");
    fleet.hosts[0].process.freeze();

    let on_b = run(fleet.b(), id, "print(x)");
    assert_eq!(on_b["stdout"].as_str(), Some("1\n"), "B resumes the newest image: {on_b}");
    assert_eq!(on_b["state_reset"], json!(true), "and says what was lost: {on_b}");
    run(fleet.b(), id, "x = 3");

    fleet.hosts[0].process.thaw();
    // A's sweeper wakes to an idle session it no longer holds: give it time to try to park it.
    std::thread::sleep(Duration::from_secs(3));
    let on_a = run(fleet.a(), id, "print(x)");
    assert_eq!(on_a["stdout"].as_str(), Some("3\n"), "A gets B's state, not its own stale one: {on_a}");
    assert_eq!(on_a["state_reset"], json!(false), "{on_a}");
    let on_c = run(fleet.c(), id, "print(x)");
    assert_eq!(on_c["stdout"].as_str(), Some("3\n"), "{on_c}");
}

/// A run of `x += 1` in Alice's session `id` on `host` is refused with
/// `503 session_store_unavailable` and `Retry-After`, as when a store the
/// fleet needs does not answer.
fn assert_run_refused_for_a_retry(host: &Service, id: &str) {
    let refused = call(host, ALICE, "POST", &format!("/v1/sessions/{id}/run"), Some(json!({"code": "x += 1"})));
    assert_eq!(refused.status().as_u16(), 503, "{} cannot run the session without its stores", host.base);
    assert!(refused.headers().contains_key("retry-after"), "the answer asks for a retry: {:?}", refused.headers());
    let body: Value = refused.json().expect("a JSON error");
    assert_eq!(body["error"]["code"], json!("session_store_unavailable"), "{body}");
}

/// The object store gone while a session is live on A: a call for it on B
/// gets a clear `503 session_store_unavailable` asking for a retry, the
/// session stays live on A with its state, and once the store is back the
/// next call on B moves it as usual. Nothing acknowledged is lost.
#[test]
fn an_object_store_that_goes_away_loses_nothing() {
    let mut fleet = Fleet::start_own("store-down", &["--lease-seconds", "2", "--hibernate-after-idle-seconds", "3600"]);
    let id = "steady";
    open(fleet.a(), id);
    run(fleet.a(), id, "x = 41");
    fleet.store().kill();

    assert_run_refused_for_a_retry(fleet.b(), id);

    let on_a = run(fleet.a(), id, "print(x)");
    assert_eq!((on_a["stdout"].as_str(), &on_a["state_reset"]), (Some("41\n"), &json!(false)), "A still holds the session as it was: {on_a}");

    fleet.store().resume();
    let on_b = run(fleet.b(), id, "print(x + 1)");
    assert_eq!((on_b["stdout"].as_str(), &on_b["state_reset"]), (Some("42\n"), &json!(false)), "with the store back, B takes it over whole: {on_b}");
}

/// Redis gone for longer than a lease loses nothing either: while it is
/// away every host answers a clear 503 with a retry hint (none can prove
/// it holds the session), and the owner keeps its live state. Once Redis is
/// back, the owner takes its hold back (no host held the session
/// meanwhile) with the state intact, and another host takes it over whole.
#[test]
fn redis_that_goes_away_loses_nothing() {
    let mut fleet = Fleet::start_own("redis-down", &["--lease-seconds", "2", "--hibernate-after-idle-seconds", "3600"]);
    let id = "steady";
    open(fleet.a(), id);
    run(fleet.a(), id, "x = 41");
    fleet.redis().kill();
    // Past the lease: A no longer trusts its hold.
    std::thread::sleep(Duration::from_secs(3));
    for host in [fleet.a(), fleet.b()] {
        assert_run_refused_for_a_retry(host, id);
    }

    fleet.redis().resume();
    let on_a = run(fleet.a(), id, "print(x)");
    assert_eq!((on_a["stdout"].as_str(), &on_a["state_reset"]), (Some("41\n"), &json!(false)), "A keeps the live state it held: {on_a}");
    let on_b = run(fleet.b(), id, "print(x + 1)");
    assert_eq!((on_b["stdout"].as_str(), &on_b["state_reset"]), (Some("42\n"), &json!(false)), "B takes it over whole: {on_b}");
}

/// E2B's own Python SDK over the fleet: a sandbox created through A runs
/// code and writes a file through B, is paused through A, listed paused by
/// C, connected (resumed) through C with its state and file, and killed
/// through B, after which no host lists it. A snapshot taken through A
/// starts sandboxes with its state and files on B and C, is listed by C,
/// and once deleted through B starts nothing on any host. The sandboxes'
/// and snapshots' records are shared like the sessions behind them.
#[test]
fn an_e2b_sandbox_is_served_by_every_host() {
    let fleet = Fleet::start("e2b", &["--e2b-listen", "127.0.0.1:0"]);
    let urls: Vec<String> = fleet.hosts.iter().map(|host| crate::e2b_sdk::e2b_address(&host.process)).collect();
    let mut command = std::process::Command::new(common::venv_python());
    command.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/e2b_fleet_checks.py")).arg("e2b_a11ce").args(&urls);
    crate::e2b_sdk::run_checks(command, "E2B's SDK over three hosts");
}

/// A Jupyter kernel started through A is listed by B and C and runs cells
/// through B's websocket with A's namespace; shut down through C, no host
/// knows it any more.
#[test]
fn a_jupyter_kernel_is_served_by_every_host() {
    use crate::jupyter_api::{Socket, kernel_id, start_kernel};
    let fleet = Fleet::start("jupyter", &[]);
    let model = start_kernel(fleet.a(), ALICE, "python3");
    let id = kernel_id(&model).to_owned();
    let mut on_a = Socket::open(fleet.a(), &id, ALICE);
    on_a.execute("y = 'started on A'");
    drop(on_a);
    for host in [fleet.b(), fleet.c()] {
        let listed = client().get(format!("{}/api/kernels", host.base)).header("authorization", format!("token {ALICE}")).send().expect("listed");
        let kernels: Value = listed.json().expect("a kernel list");
        assert!(kernels.as_array().is_some_and(|k| k.iter().any(|k| k["id"] == id.as_str())), "{} lists A's kernel: {kernels}", host.base);
    }
    let mut on_b = Socket::open(fleet.b(), &id, ALICE);
    let answer = on_b.execute("print(y)");
    assert_eq!((answer.reply["content"]["status"].as_str(), answer.stdout()), (Some("ok"), "started on A\n".to_owned()), "A's namespace through B: {:?}", answer.reply);
    drop(on_b);
    let shut = client().delete(format!("{}/api/kernels/{id}", fleet.c().base)).header("authorization", format!("token {ALICE}")).send().expect("shut down");
    assert_eq!(shut.status().as_u16(), 204, "C shuts down A's kernel");
    for host in &fleet.hosts {
        let gone = client().get(format!("{}/api/kernels/{id}", host.base)).header("authorization", format!("token {ALICE}")).send().expect("asked");
        assert_eq!(gone.status().as_u16(), 404, "{} no longer knows the kernel", host.base);
    }
}

/// Three hundred sessions spread over the three hosts, each host then
/// stopped gracefully and started again in turn: every session's variable
/// reads back right afterwards, through a host other than the one that
/// made it, with no reset. A graceful stop hands every live session to
/// the store; no call answers `no_such_session` for one that exists.
#[test]
fn three_hundred_sessions_outlive_each_host_restarted_in_turn() {
    const SESSIONS: usize = 300;
    let mut fleet = Fleet::start("restarts", &[]);
    // Made from three threads, one per host, as three clients would.
    std::thread::scope(|scope| {
        for (index, host) in fleet.hosts.iter().enumerate() {
            scope.spawn(move || {
                for i in (index..SESSIONS).step_by(3) {
                    let id = format!("many-{i}");
                    open(host, &id);
                    run(host, &id, &format!("x = {i}"));
                }
            });
        }
    });
    for index in 0..3 {
        fleet.restart(index);
    }
    let wrong: Vec<String> = std::thread::scope(|scope| {
        let reading: Vec<_> = (0..3)
            .map(|reader| {
                let fleet = &fleet;
                scope.spawn(move || {
                    let mut wrong = Vec::new();
                    // Each host reads the sessions the next one made.
                    for i in ((reader + 1) % 3..SESSIONS).step_by(3) {
                        let id = format!("many-{i}");
                        let (status, report) = json(&fleet.hosts[reader], ALICE, "POST", &format!("/v1/sessions/{id}/run"), Some(json!({"code": "print(x)"})));
                        let expected = format!("{i}\n");
                        if status != 200 || report["stdout"].as_str() != Some(expected.as_str()) || report["state_reset"] != json!(false) {
                            wrong.push(format!("{id}: {status} {report}"));
                        }
                    }
                    wrong
                })
            })
            .collect();
        reading.into_iter().flat_map(|r| r.join().expect("a reader")).collect()
    });
    assert!(wrong.is_empty(), "{} of {SESSIONS} sessions read wrong after the restarts, e.g. {:?}", wrong.len(), &wrong[..wrong.len().min(3)]);
}

/// A JavaScript session moves between hosts with its heap: declared on A,
/// read on B, forked on C with its children runnable on any host.
#[test]
fn a_javascript_session_moves_between_hosts_and_forks() {
    let fleet = Fleet::start("javascript", &[]);
    let id = "js-moving";
    let (status, body) = json(fleet.a(), ALICE, "POST", "/v1/sessions", Some(json!({"session_id": id, "runtime": "javascript"})));
    assert_eq!((status, &body["runtime"]), (201, &json!("javascript")), "{body}");
    run(fleet.a(), id, "let x = 41; const seen = ['a'];");
    let on_b = run(fleet.b(), id, "seen.push('b'); x + 1");
    assert_eq!((on_b["results"][0]["text"].as_str(), &on_b["state_reset"]), (Some("42"), &json!(false)), "A's heap reaches B: {on_b}");
    let (status, forked) = json(fleet.c(), ALICE, "POST", &format!("/v1/sessions/{id}/fork"), Some(json!({"session_id": "js-branch", "count": 2})));
    assert_eq!(status, 201, "{forked}");
    let on_a = run(fleet.a(), "js-branch-1", "seen.push('child'); seen.join(',')");
    assert_eq!(on_a["results"][0]["text"].as_str(), Some("'a,b,child'"), "{on_a}");
    let parent = run(fleet.b(), id, "seen.join(',')");
    assert_eq!(parent["results"][0]["text"].as_str(), Some("'a,b'"), "the child's push is its own: {parent}");
}
