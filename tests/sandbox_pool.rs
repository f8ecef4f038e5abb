//! Several sandbox hosts behind one app: two `anypath sandbox serve`
//! processes sharing a token, and `anypath up` given both in
//! `SPIN_VARIABLE_SANDBOX_HOSTS`. REST blocks spread over the hosts by the
//! request id and move on when a host is killed; `/readyz` reports each host;
//! an agent session stays on its rendezvous host, and when that host is gone
//! continues on the other one with a clear notice that its state was reset.

use crate::common;

use anypath_rest::SandboxPool;
use anypath_rest::sandbox_pool::session_key;
use common::app::{App, assert_envelope, json_of, temp_kv};
use common::fake_llm::{FakeLlm, Reply, tools};
use common::service::Service;
use reqwest::blocking::Client;
use serde_json::{Value, json};

const TOKEN: &str = "pool-test-token-6d1f0b";
/// The agent's tenant (`X-Session-ID`).
const TENANT: &str = "pool";

/// The allowlist host entry for loopback ports covering every address, in
/// Spin's range syntax (`low..high`, the end excluded).
fn covering_range(addresses: &[String]) -> String {
    let ports: Vec<u16> = addresses.iter().map(|a| a.rsplit_once(':').and_then(|(_, p)| p.parse().ok()).expect("a port")).collect();
    let (low, high) = (ports.iter().min().expect("a port"), ports.iter().max().expect("a port"));
    format!("127.0.0.1:{low}..{}", high + 1)
}

/// Two sandbox hosts, `hosts[i]` serving at `addresses[i]`.
struct Hosts {
    hosts: Vec<Option<Service>>,
    addresses: Vec<String>,
}

impl Hosts {
    fn start(name: &str) -> Self {
        let hosts: Vec<Service> = (0..2)
            .map(|i| {
                let dir = temp_kv(&format!("{name}-sandbox-{i}")).with_file_name("data");
                Service::start_with(&dir, &["--token", TOKEN])
            })
            .collect();
        let addresses = hosts.iter().map(|h| h.process.address.clone()).collect();
        Self { hosts: hosts.into_iter().map(Some).collect(), addresses }
    }

    /// `SPIN_VARIABLE_SANDBOX_HOSTS`, `..._ALLOWED` (one port range covering
    /// both hosts) and `..._TOKEN`; the rules' requests run as blocks
    /// (`rules_direct = false`), so they stand for every block a model writes.
    fn env(&self) -> Vec<(String, String)> {
        vec![
            ("SPIN_VARIABLE_RULES_DIRECT".into(), "false".into()),
            ("SPIN_VARIABLE_SANDBOX_HOSTS".into(), self.addresses.join(",")),
            ("SPIN_VARIABLE_SANDBOX_ALLOWED".into(), covering_range(&self.addresses)),
            ("SPIN_VARIABLE_SANDBOX_TOKEN".into(), TOKEN.into()),
        ]
    }

    fn pool(&self) -> SandboxPool {
        SandboxPool::parse(&self.addresses.join(",")).expect("a valid pool")
    }

    /// Which host (index) ranks first for `key`.
    fn first_for(&self, key: &[u8]) -> usize {
        let pool = self.pool();
        let first = pool.ranked(key)[0];
        self.addresses.iter().position(|a| a == first).expect("a listed host")
    }

    /// SIGKILL, as a crashed machine.
    fn kill(&mut self, index: usize) {
        drop(self.hosts[index].take());
    }

    fn host(&self, index: usize) -> &Service {
        self.hosts[index].as_ref().expect("the host is running")
    }

    /// The status of `GET /v1/sessions/{id}` on host `index`, as the app's trusted caller for `TENANT`.
    fn session_status(&self, index: usize, session_id: &str) -> u16 {
        Client::new()
            .get(format!("{}/v1/sessions/{session_id}", self.host(index).base))
            .bearer_auth(TOKEN)
            .header("x-anypath-tenant", TENANT)
            .send()
            .expect("the host answers")
            .status()
            .as_u16()
    }

    /// Whether host `index` logged an execution of `request_id` (waiting for the log line).
    fn ran(&self, index: usize, request_id: &str) -> bool {
        let wanted = |line: &str| {
            serde_json::from_str::<Value>(line).is_ok_and(|e| e["message"] == "exec" && e["request_id"] == request_id && e["outcome"] != "refused")
        };
        self.host(index).process.wait_for_log(wanted).is_some()
    }
}

fn start_app(name: &str, hosts: &Hosts, more: Vec<(String, String)>) -> App {
    let env: Vec<(String, String)> = hosts.env().into_iter().chain(more).collect();
    let pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    App::start_with(&temp_kv(name), "spin.toml", &pairs)
}

/// 10 creates and 20 reads (list and by id); every answer 2xx. Returns the
/// request ids, in order.
fn traffic(app: &App, collection: &str) -> Vec<String> {
    let mut ids = Vec::new();
    let mut request_ids = Vec::new();
    let mut note = |response: &reqwest::blocking::Response| {
        let id = response.headers()["x-request-id"].to_str().expect("a request id").to_owned();
        request_ids.push(id);
    };
    for i in 0..10 {
        let response = app.send("POST", &format!("/{collection}/"), Some(json!({"n": i})));
        note(&response);
        let (status, body) = json_of(response);
        assert_eq!(status.as_u16(), 201, "{body}");
        ids.push(body["id"].clone());
    }
    for (i, id) in ids.iter().enumerate() {
        let response = app.send("GET", &format!("/{collection}/{id}"), None);
        note(&response);
        let (status, body) = json_of(response);
        assert_eq!((status.as_u16(), &body["n"]), (200, &json!(i)), "{body}");
        let response = app.send("GET", &format!("/{collection}/?limit=100"), None);
        note(&response);
        let (status, body) = json_of(response);
        assert_eq!(status.as_u16(), 200, "{body}");
        assert_eq!(body["page"]["total"], 10, "{body}");
    }
    request_ids
}

#[test]
fn rest_blocks_spread_over_the_hosts_and_survive_a_lost_host() {
    let mut hosts = Hosts::start("pool-rest");
    let app = start_app("pool-rest", &hosts, vec![]);

    // (a) Both up: every block ran on the first host of its request id's ranking, so both hosts served.
    let request_ids = traffic(&app, "things");
    assert_eq!(request_ids.len(), 30);
    let mut served = [0, 0];
    for id in &request_ids {
        let first = hosts.first_for(id.as_bytes());
        assert!(hosts.ran(first, id), "request {id} ran on its first-ranked host {}", hosts.addresses[first]);
        served[first] += 1;
    }
    assert!(served.iter().all(|n| *n > 0), "both hosts ran blocks: {served:?}");
    let (status, ready) = json_of(app.send("GET", "/readyz", None));
    assert_eq!(status.as_u16(), 200, "{ready}");
    assert_eq!(ready["sandbox_hosts"], json!([{"host": hosts.addresses[0], "ready": true}, {"host": hosts.addresses[1], "ready": true}]));

    // (b) Host 0 killed: the same traffic still succeeds, all of it on host 1.
    hosts.kill(0);
    let request_ids = traffic(&app, "others");
    let moved: Vec<&String> = request_ids.iter().filter(|id| hosts.first_for(id.as_bytes()) == 0).collect();
    assert!(!moved.is_empty(), "some requests ranked the killed host first");
    for id in &request_ids {
        assert!(hosts.ran(1, id), "request {id} ran on the surviving host");
    }
    let (status, ready) = json_of(app.send("GET", "/readyz", None));
    assert_eq!((status.as_u16(), &ready["ready"], &ready["status"]), (200, &json!(true), &json!("ready")), "{ready}");
    let states = ready["sandbox_hosts"].as_array().expect("a host list");
    assert_eq!((&states[0]["host"], &states[0]["ready"]), (&json!(hosts.addresses[0]), &json!(false)), "{ready}");
    assert!(states[0]["error"].as_str().is_some_and(|e| !e.is_empty()), "the dead host says why: {ready}");
    assert_eq!(states[1], json!({"host": hosts.addresses[1], "ready": true}), "{ready}");

    // (c) Both killed: a 503 envelope naming that no host answered, and not ready.
    hosts.kill(1);
    let response = app.send("POST", "/things/", Some(json!({"n": 99})));
    let request_id = response.headers()["x-request-id"].to_str().expect("a request id").to_owned();
    let (status, body) = json_of(response);
    assert_eq!((status.as_u16(), &body["error"]["code"], &body["error"]["request_id"]), (503, &json!("sandbox_unavailable"), &json!(request_id)), "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.starts_with("no sandbox host answered: "), "{message}");
    assert!(hosts.addresses.iter().all(|a| message.contains(a.as_str())), "every host is named: {message}");
    assert_envelope(app.send("GET", "/things/", None), 503, "sandbox_unavailable");
    let (status, ready) = json_of(app.send("GET", "/readyz", None));
    assert_eq!((status.as_u16(), &ready["ready"]), (503, &json!(false)), "{ready}");
}

/// A session id whose rendezvous host is `index`.
fn session_on(hosts: &Hosts, index: usize, prefix: &str) -> String {
    (0..1000)
        .map(|i| format!("{prefix}-{i}"))
        .find(|id| hosts.first_for(&session_key(TENANT, id)) == index)
        .expect("some session id ranks each host first")
}

fn run(app: &App, session_id: &str, input: &str) -> Value {
    let body = json!({"input": input, "session_id": session_id, "includeSteps": true});
    let (status, answer) = json_of(app.send_as("POST", "/run", Some(body), &[("x-session-id", TENANT)]));
    assert_eq!(status.as_u16(), 200, "{answer}");
    answer
}

fn python(code: &str) -> Reply {
    tools(&[("run_python", json!({"code": code}))])
}

fn observation(answer: &Value, tool: &str) -> String {
    let steps = answer["steps"].as_array().into_iter().flatten();
    steps.filter(|s| s["tool"] == tool).map(|s| s["observation"].as_str().unwrap_or_default().to_owned()).collect::<Vec<_>>().join("\n")
}

#[test]
fn an_agent_session_stays_on_its_host_and_moves_with_a_notice_when_it_is_lost() {
    let mut hosts = Hosts::start("pool-agent");
    let (on_0, on_1) = (session_on(&hosts, 0, "s"), session_on(&hosts, 1, "s"));
    let fake = FakeLlm::start(vec![
        // Run 1 of each session sets a variable.
        python("x = 41"),
        Reply::Text("set x".into()),
        python("y = 7"),
        Reply::Text("set y".into()),
        // Run 2 of each reads it back: the state is where the session is.
        python("print(x + 1)"),
        Reply::Text("read x".into()),
        python("print(y * 6)"),
        Reply::Text("read y".into()),
        // After host 0 is killed.
        python("print('x' in globals())"),
        Reply::Text("moved".into()),
        python("print(y * 6)"),
        Reply::Text("stayed".into()),
    ]);
    let app = start_app("pool-agent", &hosts, fake.env("openai", "rules"));

    let first = run(&app, &on_0, "set x");
    assert!(first.get("notice").is_none(), "{first}");
    run(&app, &on_1, "set y");
    // Each session exists on its own host only.
    assert_eq!((hosts.session_status(0, &on_0), hosts.session_status(1, &on_0)), (200, 404), "{on_0} lives on host 0");
    assert_eq!((hosts.session_status(1, &on_1), hosts.session_status(0, &on_1)), (200, 404), "{on_1} lives on host 1");
    assert!(observation(&run(&app, &on_0, "read x"), "run_python").contains("42"), "run 2 of {on_0} found x");
    assert!(observation(&run(&app, &on_1, "read y"), "run_python").contains("42"), "run 2 of {on_1} found y");

    hosts.kill(0);
    let moved = run(&app, &on_0, "is x there?");
    let notice = moved["notice"].as_str().unwrap_or_default();
    let expected = format!(
        "sandbox host {} is unreachable; session {on_0} continues on host {} with a fresh state (state reset)",
        hosts.addresses[0], hosts.addresses[1]
    );
    assert_eq!(notice, expected, "{moved}");
    assert_eq!(moved["steps"][0], json!({"tool": "open_session", "input": {"session_id": on_0, "host": hosts.addresses[1]}, "observation": expected}));
    assert!(observation(&moved, "run_python").contains("False"), "the moved session starts fresh: {moved}");
    assert_eq!(hosts.session_status(1, &on_0), 200, "{on_0} now lives on host 1");
    let told = fake.calls().iter().any(|c| c.text().contains("state reset"));
    assert!(told, "the model was told of the reset too");

    let stayed = run(&app, &on_1, "read y again");
    assert!(stayed.get("notice").is_none(), "a session on the surviving host is unaffected: {stayed}");
    assert!(observation(&stayed, "run_python").contains("42"), "and keeps its state: {stayed}");
    assert_eq!(stayed["steps"][0]["tool"], "run_python", "{stayed}");
}

/// A host that accepts connections but never answers (a hung machine) is
/// skipped after the call timeout while another host serves; when it is the
/// only host, the block ends in `504 sandbox_timeout`, not a hang.
#[test]
fn a_silent_host_is_skipped_and_alone_is_a_504() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("a listener that never answers");
    let silent_address = silent.local_addr().expect("an address").to_string();
    let hosts = Hosts::start("pool-silent");
    let live = &hosts.addresses[0];
    let allowed = covering_range(&[silent_address.clone(), live.clone()]);
    let start = |list: String, name: &str| {
        let env = [
            ("SPIN_VARIABLE_SANDBOX_HOSTS", list.as_str()),
            ("SPIN_VARIABLE_SANDBOX_ALLOWED", allowed.as_str()),
            ("SPIN_VARIABLE_SANDBOX_TOKEN", TOKEN),
            ("SPIN_VARIABLE_CALL_TIMEOUT_MS", "1500"),
            ("SPIN_VARIABLE_RULES_DIRECT", "false"),
        ];
        App::start_with(&temp_kv(name), "spin.toml", &env)
    };
    let both = start(format!("{silent_address},{live}"), "pool-silent-both");
    for n in 0..6 {
        let created = both.send("POST", "/things/", Some(json!({"n": n})));
        assert_eq!(created.status(), 201, "the live host serves whatever the ranking");
    }
    let alone = start(silent_address.clone(), "pool-silent-alone");
    let response = alone.send("GET", "/things/", None);
    assert_envelope(response, 504, "sandbox_timeout");
    drop(silent);
}
