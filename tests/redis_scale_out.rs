//! Several `anypath up` instances over one Redis, as real processes: the
//! store's Redis backend (one commit script per journal) keeps every
//! acknowledged write, loses no concurrent update and never leaves a journal
//! half-applied: under concurrent creates, patches of one record and moves
//! between two collections through different instances, with an instance
//! killed mid-load, and with Redis itself killed and brought back.

use crate::common;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::app::{App, assert_envelope, json_of, temp_kv};
use common::fake_llm::{FakeLlm, Reply};
use anypath_rest::stored_index::Chunk;
use anypath_rest::{Index, Layout, StoredIndex};
use common::redis_server::RedisServer;
use redis::Commands;
use serde_json::json;

/// Redis plus three app instances on it, each with its own sandbox host.
struct Cluster {
    redis: RedisServer,
    apps: Vec<App>,
}

impl Cluster {
    fn start(name: &str, extra: &[(String, String)]) -> Self {
        let kv = temp_kv(name);
        let redis = RedisServer::start(&kv.with_file_name("redis"));
        let mut env = redis.app_env();
        env.extend_from_slice(extra);
        let pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let apps = (0..3).map(|i| App::start_with(&kv.with_file_name(format!("kv-{i}.db")), "spin.toml", &pairs)).collect();
        Self { redis, apps }
    }

    fn bases(&self) -> Vec<String> {
        self.apps.iter().map(|a| a.base.clone()).collect()
    }
}

fn client() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder().timeout(Duration::from_secs(120)).build().unwrap()
}

/// What Redis holds for a tenant's collection: its index (head and chunks,
/// read whole), and whether every document value and chunk it names exists
/// and no other value of it lies around.
fn stored(redis: &RedisServer, collection: &str) -> (Index, usize) {
    let mut conn = redis.connection().unwrap();
    let prefix = format!("anypath/v2/t/{{default}}/c/{collection}/");
    let head: StoredIndex = serde_json::from_slice(&conn.get::<_, Vec<u8>>(format!("{prefix}index")).unwrap()).unwrap();
    let chunks: Vec<Chunk> = head
        .chunks
        .iter()
        .map(|tag| serde_json::from_slice(&conn.get::<_, Vec<u8>>(format!("{prefix}d/{tag}")).unwrap()).unwrap())
        .collect();
    let chunk_keys: BTreeSet<String> = head.chunks.iter().map(|tag| format!("{prefix}d/{tag}")).collect();
    let index = Layout::new(head, chunks).unwrap().index();
    let documents: BTreeSet<String> = index.docs.values().map(|tag| format!("{prefix}d/{tag}")).collect();
    let present: BTreeSet<String> = conn.keys(format!("{prefix}d/*")).unwrap();
    assert_eq!(documents.union(&chunk_keys).cloned().collect::<BTreeSet<_>>(), present, "every value the index names exists, and no other (nothing half-written)");
    let count = documents.len();
    (index, count)
}

/// 300 concurrent creates spread over three instances into one new
/// collection: 300 distinct ids, 300 records, seen alike by every instance.
#[test]
fn concurrent_creates_through_three_instances_all_land_with_distinct_ids() {
    let cluster = Cluster::start("scale-creates", &[]);
    let bases = cluster.bases();
    let workers: Vec<_> = (0..30)
        .map(|w| {
            let bases = bases.clone();
            std::thread::spawn(move || {
                let client = client();
                (0..10)
                    .map(|i| {
                        let n = w * 10 + i;
                        let response = client.post(format!("{}/tickets/", bases[n % 3])).json(&json!({"n": n})).send().unwrap();
                        assert_eq!(response.status(), 201, "{}", response.text().unwrap_or_default());
                        let (_, body) = json_of(response);
                        (body["id"].as_i64().expect("an integer id"), n)
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let created: Vec<(i64, usize)> = workers.into_iter().flat_map(|w| w.join().unwrap()).collect();
    let ids: BTreeSet<i64> = created.iter().map(|(id, _)| *id).collect();
    assert_eq!(ids.len(), 300, "300 distinct ids");
    for app in &cluster.apps {
        let (status, page) = json_of(app.send("GET", "/tickets/?limit=1", None));
        assert_eq!(status, 200);
        assert_eq!(page["page"]["total"], 300, "{page}");
    }
    for (id, n) in created.iter().step_by(7) {
        assert_eq!(json_of(cluster.apps[id.rem_euclid(3) as usize].send("GET", &format!("/tickets/{id}"), None)).1["n"], *n);
    }
    let (index, values) = stored(&cluster.redis, "tickets");
    assert_eq!(values, 300);
    assert_eq!(index.docs.len(), 300);
}

/// Patches of distinct fields of one record, concurrently through different
/// instances: every field is kept (no patch overwrote another's).
#[test]
fn concurrent_patches_of_one_record_through_different_instances_are_all_kept() {
    let cluster = Cluster::start("scale-patches", &[]);
    assert_eq!(cluster.apps[0].send("POST", "/profiles/", Some(json!({"id": 1, "name": "Ada"}))).status(), 201);
    let bases = cluster.bases();
    let patchers: Vec<_> = (0..24)
        .map(|i| {
            let base = bases[i % 3].clone();
            std::thread::spawn(move || {
                let response = client().patch(format!("{base}/profiles/1")).json(&json!({format!("f{i}"): i})).send().unwrap();
                assert_eq!(response.status(), 200, "{}", response.text().unwrap_or_default());
            })
        })
        .collect();
    for patcher in patchers {
        patcher.join().unwrap();
    }
    let (_, record) = json_of(cluster.apps[2].send("GET", "/profiles/1", None));
    for i in 0..24 {
        assert_eq!(record[format!("f{i}")], i, "field f{i} kept: {record}");
    }
    assert_eq!(record["name"], "Ada");
    assert_eq!(stored(&cluster.redis, "profiles").0.version, 25, "one version per journal");
}

/// A plan as a model would write it.
fn plan(resource: &str, also_loads: &[&str], code: &str) -> String {
    json!({
        "action": "custom", "resource": resource, "also_loads": also_loads, "id": null, "criteria": {},
        "payload": null, "response_hints": {}, "code": {"language": "python", "block": format!("```python\n{code}\n```")},
    })
    .to_string()
}

/// Journals over two collections (one commit script each), concurrently
/// through different instances and in both directions: every move lands
/// exactly once and the total never changes. The plans come from the shared
/// plan cache on Redis, so the model is asked once per action in all.
#[test]
fn concurrent_moves_between_two_collections_through_different_instances_conserve_the_total() {
    let mover = |to: &str| {
        format!(
            "mid = ctx['segments'][1]\nsrc = store.get(mid)\nother = store.collection('{to}')\ndst = other.get(mid)\n\
             store.patch(mid, {{'balance': src['balance'] - 1}})\nother.patch(mid, {{'balance': dst['balance'] + 1}})\n\
             REPLY = {{'status': 200, 'body': {{'moved': 1}}}}"
        )
    };
    let fake = FakeLlm::start(vec![
        Reply::Oracle,
        Reply::Oracle,
        Reply::Text(plan("acct_a", &["acct_b"], &mover("acct_b"))),
        Reply::Text(plan("acct_b", &["acct_a"], &mover("acct_a"))),
    ])
    .otherwise(Reply::Oracle);
    let cluster = Cluster::start("scale-moves", &fake.env("openai", "llm"));
    let app = &cluster.apps[0];
    assert_eq!(app.send("POST", "/acct_a/", Some(json!({"id": 1, "balance": 100}))).status(), 201);
    assert_eq!(app.send("POST", "/acct_b/", Some(json!({"id": 1, "balance": 100}))).status(), 201);
    assert_eq!(app.send("POST", "/acct_a/1/move", None).status(), 200);
    assert_eq!(cluster.apps[1].send("POST", "/acct_b/1/move", None).status(), 200);
    let bases = cluster.bases();
    let movers: Vec<_> = (0..48)
        .map(|i| {
            let url = format!("{}/{}/1/move", bases[i % 3], if i % 2 == 0 { "acct_a" } else { "acct_b" });
            std::thread::spawn(move || {
                let response = client().post(url).send().unwrap();
                assert_eq!(response.status(), 200, "{}", response.text().unwrap_or_default());
            })
        })
        .collect();
    for mover in movers {
        mover.join().unwrap();
    }
    assert_eq!(fake.calls().len(), 4, "every instance planned from the shared cache");
    let a = json_of(cluster.apps[2].send("GET", "/acct_a/1", None)).1;
    let b = json_of(cluster.apps[1].send("GET", "/acct_b/1", None)).1;
    assert_eq!((a["balance"].clone(), b["balance"].clone()), (json!(100), json!(100)), "25 moves each way: a={a} b={b}");
    assert_eq!(stored(&cluster.redis, "acct_a").0.version, 51, "1 create + 50 moves touched each");
    assert_eq!(stored(&cluster.redis, "acct_b").0.version, 51);
}

/// Creates through every instance while one is killed with SIGKILL: every
/// create that was acknowledged is stored, readable through a survivor, and
/// no journal is half-applied.
#[test]
fn an_instance_killed_mid_load_loses_no_acknowledged_write() {
    let mut cluster = Cluster::start("scale-kill", &[]);
    let bases = cluster.bases();
    let stop = Arc::new(AtomicBool::new(false));
    let acknowledged = Arc::new(Mutex::new(BTreeMap::new()));
    let statuses = Arc::new(Mutex::new(HashMap::<String, usize>::new()));
    let workers: Vec<_> = (0..12)
        .map(|w| {
            let (bases, stop, acknowledged, statuses) = (bases.clone(), stop.clone(), acknowledged.clone(), statuses.clone());
            std::thread::spawn(move || {
                let client = reqwest::blocking::Client::builder().timeout(Duration::from_secs(30)).build().unwrap();
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    let tag = format!("w{w}-{n}");
                    n += 1;
                    let outcome = client.post(format!("{}/orders/", bases[(w + n) % 3])).json(&json!({"tag": tag})).send();
                    let key = match outcome {
                        Ok(response) if response.status() == 201 => {
                            let id = json_of(response).1["id"].as_i64().expect("an id");
                            acknowledged.lock().unwrap().insert(id, tag);
                            "201".to_owned()
                        }
                        Ok(response) => response.status().as_str().to_owned(),
                        Err(_) => "no answer".to_owned(),
                    };
                    *statuses.lock().unwrap().entry(key).or_default() += 1;
                }
            })
        })
        .collect();
    // Conditions, not fixed sleeps: a loaded machine starts the instances slowly.
    let loaded = common::eventually(Duration::from_secs(60), || acknowledged.lock().unwrap().len() >= 30);
    assert!(loaded, "30 creates are acknowledged: {:?}", statuses.lock().unwrap());
    cluster.apps[1].process.kill();
    let before_kill = acknowledged.lock().unwrap().len();
    let went_on = common::eventually(Duration::from_secs(60), || {
        statuses.lock().unwrap().contains_key("no answer") && acknowledged.lock().unwrap().len() >= before_kill + 30
    });
    assert!(went_on, "the killed instance fails a request and the others acknowledge 30 more: {:?}", statuses.lock().unwrap());
    stop.store(true, Ordering::Relaxed);
    for worker in workers {
        worker.join().unwrap();
    }
    let acknowledged = acknowledged.lock().unwrap().clone();
    let statuses = statuses.lock().unwrap().clone();
    assert!(statuses.get("no answer").copied().unwrap_or(0) > 0, "requests to the killed instance failed: {statuses:?}");
    assert!(acknowledged.len() > 30, "a real load ran: {statuses:?}");
    let survivor = &cluster.apps[2];
    for (id, tag) in &acknowledged {
        let (status, record) = json_of(survivor.send("GET", &format!("/orders/{id}"), None));
        assert_eq!((status.as_u16(), record["tag"].as_str()), (200, Some(tag.as_str())), "acknowledged order {id}");
    }
    let (index, values) = stored(&cluster.redis, "orders");
    assert!(values >= acknowledged.len(), "{values} stored, {} acknowledged", acknowledged.len());
    let (_, page) = json_of(survivor.send("GET", "/orders/?limit=1", None));
    assert_eq!(page["page"]["total"].as_u64(), Some(values as u64));
    assert_eq!(index.docs.len(), values);
}

/// Redis killed under load: the app answers a clear 503 envelope (with the
/// request id and Retry-After) and applies nothing partially; once Redis is
/// back (its append-only file replayed) the app serves again, with every
/// acknowledged write.
#[test]
fn redis_down_is_a_clear_503_and_nothing_partial_then_service_resumes() {
    let mut cluster = Cluster::start("scale-redis-down", &[]);
    let app = &cluster.apps[0];
    let mut acknowledged = BTreeMap::new();
    for n in 0..20 {
        let (status, body) = json_of(app.send("POST", "/notes/", Some(json!({"n": n}))));
        assert_eq!(status, 201);
        acknowledged.insert(body["id"].as_i64().unwrap(), n);
    }
    cluster.redis.kill();
    for request in [("POST", "/notes/", Some(json!({"n": -1}))), ("GET", "/notes/1", None), ("PATCH", "/notes/2", Some(json!({"x": 1})))] {
        let response = app.send(request.0, request.1, request.2.clone());
        assert_eq!(response.headers().get("retry-after").map(|v| v.to_str().unwrap().to_owned()), Some("1".to_owned()));
        assert_envelope(response, 503, "store_unavailable");
    }
    cluster.redis.resume();
    let mut served = None;
    for _ in 0..100 {
        let response = app.send("POST", "/notes/", Some(json!({"n": 20})));
        if response.status() == 201 {
            served = Some(json_of(response).1);
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let created = served.expect("the app serves again once Redis is back");
    acknowledged.insert(created["id"].as_i64().unwrap(), 20);
    for (id, n) in &acknowledged {
        assert_eq!(json_of(cluster.apps[1].send("GET", &format!("/notes/{id}"), None)).1["n"], *n, "note {id}");
    }
    let (index, values) = stored(&cluster.redis, "notes");
    assert_eq!(values, 21, "nothing of the refused requests landed");
    assert!(index.docs.contains_key("2"));
    assert!(json_of(cluster.apps[2].send("GET", "/notes/2", None)).1.get("x").is_none(), "the refused patch left no trace");
}

/// Connections the server has accepted so far (this one included).
fn connections_received(redis: &RedisServer) -> u64 {
    let info: String = redis::cmd("INFO").arg("stats").query(&mut redis.connection().unwrap()).unwrap();
    info.lines().find_map(|l| l.strip_prefix("total_connections_received:")).and_then(|n| n.trim().parse().ok()).unwrap()
}

/// Boundary: the store component's `allowed_outbound_hosts`, enforced by
/// `anypath up`'s outbound Redis. A `redis_url` outside the granted
/// `redis_allowed` is refused inside the component (a 500 naming the setting to
/// fix), and the server never sees a connection.
#[test]
fn a_redis_address_outside_the_stores_allowlist_is_refused_before_connecting() {
    let kv = temp_kv("scale-allowlist");
    let redis = RedisServer::start(&kv.with_file_name("redis"));
    let url = redis.url();
    let env = [
        ("SPIN_VARIABLE_STORE_BACKEND", "redis"),
        ("SPIN_VARIABLE_REDIS_URL", url.as_str()),
        ("SPIN_VARIABLE_REDIS_ALLOWED", "redis://127.0.0.1:1"),
    ];
    let app = App::start_with(&kv, "spin.toml", &env);
    let before = connections_received(&redis);
    let response = app.send("POST", "/notes/", Some(json!({"n": 1})));
    assert_eq!(response.status(), 500);
    let (_, body) = json_of(response);
    assert_eq!(body["error"]["code"], "store_failed", "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("allowed_outbound_hosts"), "{body}");
    assert_eq!(connections_received(&redis), before + 1, "only this test's own connection reached Redis");
    assert!(app.process.wait_for_log(|l| l.contains("outbound Redis connection denied")).is_some());
}

/// Boundary: data access in `spin.toml`. Only the store may reach the Redis
/// server named by `redis_allowed` (or hold a key-value store), and with
/// `redis_allowed` empty, the default, no component may reach any Redis.
#[test]
fn only_the_store_may_reach_redis() {
    use anypath_spin_host::manifest::Manifest;
    use anypath_spin_host::outbound::AllowedHosts;
    use anypath_spin_host::variables::Variables;

    let manifest = Manifest::load(&common::app::repo().join("spin.toml")).unwrap();
    let ids = manifest.component_ids();
    for redis_allowed in [Some("redis://10.0.0.9:6379"), None] {
        let variables = Variables::resolve(&manifest.variables, |name| match name {
            "SPIN_VARIABLE_REDIS_ALLOWED" => redis_allowed.map(str::to_owned),
            _ => None,
        })
        .unwrap();
        for (name, component) in &manifest.components {
            let allowed = AllowedHosts::resolve(&component.allowed_outbound_hosts, &variables, &ids).unwrap();
            let reaches = allowed.allows("redis", "10.0.0.9", Some(6379));
            let name = name.as_str();
            assert_eq!(reaches, name == "store" && redis_allowed.is_some(), "{name} with redis_allowed {redis_allowed:?}");
            assert!(!allowed.allows("redis", "127.0.0.1", Some(6379)), "{name} reaches no other Redis");
            assert_eq!(!component.key_value_stores.is_empty(), name == "store", "{name}'s key-value grant");
        }
    }
}
