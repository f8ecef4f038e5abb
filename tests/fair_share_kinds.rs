//! Boundary: fair share of all of a host's work, not only of its sandbox
//! slots. Under `anypath up` every public request passes one admission per
//! tenant before its component runs, so a tenant flooding any kind of
//! request (REST planned by the rules, which never reaches a sandbox; REST
//! answered by a Python block; code-interpreter runs) with 32 clients leaves
//! another tenant's requests their pace, and a tenant alone is never refused.
//!
//! The timing bound is loose on purpose (the benchmark measures; this proves
//! the boundary holds): before the admission of app requests, tenant B's GET
//! took 18 times as long while tenant A flooded the rules path. The counters
//! are exact: B never waited behind A, A alone was never refused.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use reqwest::blocking::{Client, RequestBuilder};
use serde_json::{Value, json};

use common::app::{App, temp_kv};
use common::fake_llm::{FakeLlm, Reply};

const FLOOD_CLIENTS: usize = 32;
/// Tenant B's requests per measurement.
const SAMPLES: usize = 100;
/// How much slower B's median may be while A floods, at most (before: 18x).
const SLOWER_AT_MOST: f64 = 5.0;
/// Sessions A's interpreter flood spreads over.
const A_SESSIONS: usize = 8;

fn client() -> Client {
    Client::builder().timeout(Duration::from_secs(60)).build().expect("client")
}

/// One kind of request, for a tenant's key and a client's number.
type Send = Arc<dyn Fn(&Client, &str, usize) -> RequestBuilder + std::marker::Send + Sync>;

/// The tenants' API keys, as the app's `api_keys` maps them.
const KEYS: &str = "key-fair-a:tenant-a,key-fair-b:tenant-b";

/// The median of B's `SAMPLES` requests, each checked to succeed.
fn b_median(send: &Send, http: &Client) -> Duration {
    let mut times: Vec<Duration> = (0..SAMPLES)
        .map(|i| {
            let started = Instant::now();
            let response = send(http, "key-fair-b", i).send().expect("B's request");
            assert!(response.status().is_success(), "tenant B's request was answered {}: {:?}", response.status(), response.text());
            started.elapsed()
        })
        .collect();
    times.sort();
    times[SAMPLES / 2]
}

/// A's clients sending until `stop`; what they were answered, by 2xx and 429.
fn flood(send: &Send, stop: &Arc<AtomicBool>) -> (Arc<[AtomicUsize; 3]>, Vec<std::thread::JoinHandle<()>>) {
    let tally: Arc<[AtomicUsize; 3]> = Arc::new(Default::default());
    let threads = (0..FLOOD_CLIENTS)
        .map(|client_number| {
            let (send, stop, tally) = (send.clone(), stop.clone(), tally.clone());
            std::thread::spawn(move || {
                let http = client();
                while !stop.load(Ordering::Relaxed) {
                    let status = send(&http, "key-fair-a", client_number).send().expect("A's request").status().as_u16();
                    let slot = match status {
                        200..=299 => 0,
                        429 => 1,
                        _ => 2,
                    };
                    tally[slot].fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    (tally, threads)
}

fn stop_flood(stop: &AtomicBool, threads: Vec<std::thread::JoinHandle<()>>) {
    stop.store(true, Ordering::Relaxed);
    for thread in threads {
        thread.join().expect("a flooding client");
    }
}

#[test]
fn a_flood_of_any_kind_of_request_leaves_another_tenant_its_pace() {
    // A path the rules do not plan: the model's block answers it (then its cached plan).
    let hello = "REPLY = {'status': 200, 'body': {'hello': 'world'}}";
    let fake = FakeLlm::start(vec![]).otherwise(Reply::BlockFor("members".into(), hello.into()));
    let mut env = fake.env("openai", "auto");
    env.push(("SPIN_VARIABLE_API_KEYS".into(), KEYS.into()));
    let pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let app = Arc::new(App::start_with(&temp_kv("fair-kinds"), "spin.toml", &pairs));
    let http = client();
    let sandbox = format!("http://{}", app.sandbox);

    for (key, sessions) in [("key-fair-a", A_SESSIONS), ("key-fair-b", 1)] {
        let created = http.post(format!("{}/members/", app.base)).header("x-api-key", key).json(&json!({"name": "Ann", "age": 30})).send().expect("POST");
        assert_eq!(created.status().as_u16(), 201);
        let planned = http.get(format!("{}/members/newest", app.base)).header("x-api-key", key).send().expect("GET /members/newest");
        assert_eq!(planned.status().as_u16(), 200, "the block's answer: {:?}", planned.text());
        for i in 0..sessions {
            let session = http.post(format!("{sandbox}/v1/sessions")).header("x-api-key", key).json(&json!({"session_id": format!("fair-{i}")})).send().expect("session");
            assert!(session.status().is_success(), "{:?}", session.text());
        }
    }

    let base = app.base.clone();
    let rules: Send = Arc::new(move |http, key, _| http.get(format!("{base}/members/1")).header("x-api-key", key));
    let base = app.base.clone();
    let block: Send = Arc::new(move |http, key, _| http.get(format!("{base}/members/newest")).header("x-api-key", key));
    let run: Send = Arc::new(move |http, key, n| {
        http.post(format!("{sandbox}/v1/sessions/fair-{}/run", n % A_SESSIONS)).header("x-api-key", key).json(&json!({"code": "x = 1"}))
    });
    for (kind, send) in [("REST by rules", rules), ("REST with a block", block), ("interpreter runs", run)] {
        // A alone: every request answered, none refused.
        let stop = Arc::new(AtomicBool::new(false));
        let (alone, threads) = flood(&send, &stop);
        std::thread::sleep(Duration::from_secs(3));
        stop_flood(&stop, threads);
        let answered = alone[0].load(Ordering::Relaxed);
        assert!(answered > 0, "{kind}: tenant A alone got no answers");
        assert_eq!((alone[1].load(Ordering::Relaxed), alone[2].load(Ordering::Relaxed)), (0, 0), "{kind}: tenant A alone was refused ({answered} answered)");

        let by_itself = b_median(&send, &http);
        let stop = Arc::new(AtomicBool::new(false));
        let (flooding, threads) = flood(&send, &stop);
        std::thread::sleep(Duration::from_secs(1));
        let flooded = b_median(&send, &http);
        stop_flood(&stop, threads);
        assert!(flooding[0].load(Ordering::Relaxed) > 0, "{kind}: tenant A got its share too");
        assert_eq!(flooding[2].load(Ordering::Relaxed), 0, "{kind}: tenant A got answers but its share and 429");
        let allowed = by_itself.mul_f64(SLOWER_AT_MOST) + Duration::from_millis(2);
        assert!(flooded <= allowed, "{kind}: tenant B's median went from {by_itself:?} alone to {flooded:?} while A flooded");
        std::thread::sleep(Duration::from_secs(1));
    }

    let health: Value = http.get(format!("http://{}/healthz", app.sandbox)).send().expect("healthz").json().expect("json");
    let app_requests = &health["app_requests"]["tenants"];
    assert_eq!(app_requests["tenant-b"]["waited_total"], 0, "tenant B never waited behind A at the app: {health}");
    assert_eq!(app_requests["tenant-b"]["refused_total"], 0, "{health}");
    assert!(app_requests["tenant-a"]["waited_total"].as_u64() > Some(0), "tenant A's flood waited its turn at the app: {health}");
    assert_eq!(health["tenants"]["tenant-b"]["waited_total"], 0, "tenant B never waited for a sandbox slot: {health}");
}
