//! Boundary: fair share of execution between tenants. One tenant's runaway
//! code (16 clients looping on blocks that never end, for 20 s) must not
//! stall another tenant: the flooding tenant holds at most its share of
//! slots and queue places, its excess is refused with 429 and `Retry-After`,
//! and every request of the other tenant is answered. Proved on the sandbox
//! service (two API keys) and through `anypath up` with a scripted model
//! planning tenant A's requests as endless blocks. A tenant alone still
//! gets as many slots as the machine has cores.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use reqwest::blocking::{Client, Response};
use serde_json::{Value, json};

use common::app::{App, temp_kv};
use common::fake_llm::{FakeLlm, Reply};
use common::service::Service;

const FLOOD_CLIENTS: usize = 16;
const FLOOD: Duration = Duration::from_secs(20);

/// What the flooding tenant's clients were answered.
#[derive(Default)]
struct FloodTally {
    answered: AtomicUsize,
    refused: AtomicUsize,
    other: AtomicUsize,
}

/// Runs `FLOOD_CLIENTS` threads sending `send()` until `stop`; checks every
/// 429 carries `Retry-After` and the error envelope.
fn flood(stop: Arc<AtomicBool>, send: impl Fn() -> Response + Send + Sync + 'static) -> (Arc<FloodTally>, Vec<std::thread::JoinHandle<()>>) {
    let tally = Arc::new(FloodTally::default());
    let send = Arc::new(send);
    let threads = (0..FLOOD_CLIENTS)
        .map(|_| {
            let (stop, tally, send) = (stop.clone(), tally.clone(), send.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let response = send();
                    match response.status().as_u16() {
                        429 => {
                            assert_eq!(response.headers().get("retry-after").and_then(|v| v.to_str().ok()), Some("1"));
                            let body: Value = response.json().expect("a JSON envelope");
                            assert_eq!(body["error"]["code"], "tenant_busy", "{body}");
                            assert!(body["error"]["request_id"].is_string(), "{body}");
                            tally.refused.fetch_add(1, Ordering::Relaxed);
                        }
                        // The sandbox service reports a fuel-exhausted block as 200; the app
                        // answers 502 after its repairs also ran out (or 504).
                        200 | 502 | 504 => {
                            tally.answered.fetch_add(1, Ordering::Relaxed);
                        }
                        _ => {
                            tally.other.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            })
        })
        .collect();
    (tally, threads)
}

fn client() -> Client {
    Client::builder().timeout(Duration::from_secs(60)).build().expect("client")
}

#[test]
fn a_flooding_tenant_is_refused_while_another_is_served_on_the_sandbox_service() {
    let dir = common::scratch("anypath-fair-");
    let service = Arc::new(Service::start(dir.path()));
    let stop = Arc::new(AtomicBool::new(false));
    let flooder = service.clone();
    let (tally, threads) = flood(stop.clone(), move || {
        let endless = json!({"code": "while True:\n    pass"});
        client().post(format!("{}/v1/exec", flooder.base)).header("x-api-key", "key-alice").json(&endless).send().expect("sent")
    });

    // Tenant B meanwhile: REST blocks and code-interpreter runs, one after another.
    let started = Instant::now();
    let mut served = 0;
    while started.elapsed() < FLOOD {
        let block = json!({"code": "REPLY = {'status': 200, 'body': {'n': len(ctx)}}"});
        let answer = client().post(format!("{}/v1/exec", service.base)).header("x-api-key", "key-bob").json(&block).send().expect("sent");
        assert_eq!(answer.status().as_u16(), 200, "tenant B's block was not served");
        let report: Value = answer.json().expect("report");
        assert_eq!(report["ok"], true, "{report}");
        let (status, run) = service.json("key-bob", "POST", "/v1/sessions/b/run", Some(json!({"code": "print(6 * 7)"})));
        assert_eq!((status, run["stdout"].as_str()), (200, Some("42\n")), "{run}");
        served += 1;
    }
    stop.store(true, Ordering::Relaxed);
    for thread in threads {
        thread.join().expect("a flooding client failed its checks");
    }

    assert!(served > 0);
    assert!(tally.refused.load(Ordering::Relaxed) > 0, "the flooding tenant was never refused");
    assert!(tally.answered.load(Ordering::Relaxed) > 0, "the flooding tenant got its share too");
    assert_eq!(tally.other.load(Ordering::Relaxed), 0, "no other answers");
    let (_, health) = service.json("", "GET", "/healthz", None);
    let alice = &health["tenants"]["alice"];
    let bob = &health["tenants"]["bob"];
    assert!(alice["refused_total"].as_u64() > Some(0), "{health}");
    assert!(alice["limit_breaches_total"].as_u64() > Some(0), "{health}");
    assert!(alice["waited_total"].as_u64() > Some(0), "{health}");
    // Tenant B was never stalled: every one of its requests found a slot at once.
    assert_eq!(bob["waited_total"], 0, "{health}");
    assert_eq!(bob["refused_total"], 0, "{health}");
    assert_eq!(bob["limit_breaches_total"], 0, "{health}");
    assert!(bob["admitted_total"].as_u64() >= Some(2 * served), "{health}");
}

#[test]
fn a_flooding_tenant_cannot_stall_another_through_the_app() {
    let fake = FakeLlm::start(vec![]).otherwise(Reply::EndlessFor("spin".into()));
    let env = fake.env("openai", "llm");
    let pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let app = Arc::new(App::start_with(&temp_kv("fair-app"), "spin.toml", &pairs));
    let stop = Arc::new(AtomicBool::new(false));
    let flooder = app.clone();
    let (tally, threads) = flood(stop.clone(), move || flooder.send_as("GET", "/spin/1", None, &[("x-session-id", "tenant-a")]));

    let started = Instant::now();
    let mut created = 0;
    while started.elapsed() < FLOOD {
        let post = app.send_as("POST", "/members/", Some(json!({"name": "Bob", "age": 40})), &[("x-session-id", "tenant-b")]);
        assert_eq!(post.status().as_u16(), 201, "tenant B's POST was not served: {:?}", post.text());
        created += 1;
        let get = app.send_as("GET", &format!("/members/{created}"), None, &[("x-session-id", "tenant-b")]);
        assert_eq!(get.status().as_u16(), 200, "tenant B's GET was not served: {:?}", get.text());
    }
    stop.store(true, Ordering::Relaxed);
    for thread in threads {
        thread.join().expect("a flooding client failed its checks");
    }
    assert!(created > 0);
    assert!(tally.refused.load(Ordering::Relaxed) > 0, "tenant A's excess was never refused");
    assert_eq!(tally.other.load(Ordering::Relaxed), 0, "tenant A got no answers but its share and 429");

    // Boundary: a request arriving while its tenant is past its share costs
    // no planning: it is refused before the planner is asked (no model
    // call), by the app's admission before its component runs, or by the
    // gateway's early probe. A request whose share filled while it was being
    // planned is still refused by the executor, after planning; before the
    // early refusal every 429 was of that kind.
    let refusals: Vec<Value> = app
        .process
        .log_lines()
        .iter()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|entry| entry["status"] == 429)
        .collect();
    let unplanned = refusals.iter().filter(|r| r["llm_calls"] == 0).count();
    assert!(unplanned > 0, "none of {} refusals came before planning", refusals.len());

    // The sandbox saw the tenants the gateway bound the requests to.
    let line = app.process.wait_for_log(|l| l.contains("\"app serving\"")).expect("the serving line");
    let entry: Value = serde_json::from_str(&line).expect("a JSON log line");
    let sandbox = entry["sandbox"].as_str().expect("the sandbox address");
    // Tenant A is held to its share before its requests reach a component:
    // the app's own admission refused its excess, and tenant B never waited
    // there or for a sandbox slot.
    let health: Value = client().get(format!("http://{sandbox}/healthz")).send().expect("healthz").json().expect("json");
    let app_requests = &health["app_requests"]["tenants"];
    assert!(app_requests["tenant-a"]["refused_total"].as_u64() > Some(0), "{health}");
    assert_eq!(app_requests["tenant-b"]["refused_total"], 0, "{health}");
    assert_eq!(app_requests["tenant-b"]["waited_total"], 0, "tenant B never waited at the app: {health}");
    assert_eq!(health["tenants"]["tenant-b"]["refused_total"], 0, "{health}");
    assert_eq!(health["tenants"]["tenant-b"]["waited_total"], 0, "tenant B never waited for a slot: {health}");
}

/// A tenant alone is not capped below the machine: it runs as many
/// executions at once as there are cores, and nothing is refused.
#[test]
fn a_lone_tenant_still_gets_every_core() {
    let dir = common::scratch("anypath-fair-lone-");
    let service = Arc::new(Service::start(dir.path()));
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let runs: Vec<_> = (0..cores)
        .map(|i| {
            let service = service.clone();
            std::thread::spawn(move || {
                let code = json!({"code": "import time\ntime.sleep(3)\nprint('done')"});
                service.json("key-alice", "POST", &format!("/v1/sessions/lone-{i}/run"), Some(code))
            })
        })
        .collect();
    let mut most = 0;
    let deadline = Instant::now() + Duration::from_secs(30);
    while most < cores as u64 && Instant::now() < deadline {
        let (_, health) = service.json("", "GET", "/healthz", None);
        most = most.max(health["tenants"]["alice"]["running"].as_u64().unwrap_or(0));
        std::thread::sleep(Duration::from_millis(20));
    }
    for run in runs {
        let (status, report) = run.join().expect("run");
        assert_eq!((status, report["stdout"].as_str()), (200, Some("done\n")), "{report}");
    }
    assert_eq!(most, cores as u64, "a lone tenant ran {most} at once on {cores} cores");
    let (_, health) = service.json("", "GET", "/healthz", None);
    assert_eq!(health["tenants"]["alice"]["refused_total"], 0, "{health}");
}
