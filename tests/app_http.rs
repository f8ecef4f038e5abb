//! The whole app through real HTTP against `anypath up`: REST semantics,
//! tenants, persistence, concurrency and Spin's outbound allowlist.

use crate::common;

use std::time::Duration;

use common::app::{App, assert_envelope, json_of, temp_kv};
use reqwest::StatusCode;
use reqwest::blocking::Client;
use serde_json::{Value, json};

#[test]
fn seed_minimal_examples_exactly_as_written() {
    let kv = temp_kv("seed");
    let app = App::start(&kv);
    // 1. Create -> Get
    let created = app.send("POST", "/members/", Some(json!({"name": "Alice"})));
    assert_eq!(created.status(), 201);
    assert_eq!(created.headers()["location"], "/members/1");
    assert_eq!(json_of(created).1, json!({"id": 1, "name": "Alice"}));
    assert_eq!(json_of(app.send("GET", "/members/1", None)), (StatusCode::OK, json!({"id": 1, "name": "Alice"})));
    // 2. Search
    app.send("POST", "/members/", Some(json!({"name": "hartmann", "team": "a"})));
    let (status, found) = json_of(app.send("GET", "/members/search?name=hartmann", None));
    assert_eq!((status, found), (StatusCode::OK, json!([{"id": 2, "name": "hartmann", "team": "a"}])));
    // 3. Delete
    let deleted = app.send("DELETE", "/members/1", None);
    assert_eq!(deleted.status(), 204);
    assert_eq!(deleted.text().unwrap(), "");
    assert_eq!(app.send("GET", "/members/1", None).status(), 404);
    // 4. List with paging
    for i in 0..30 {
        app.send("POST", "/members/", Some(json!({"name": format!("m{i}")})));
    }
    let (status, page) = json_of(app.send("GET", "/members/?limit=10&offset=20", None));
    assert_eq!(status, 200);
    assert_eq!(page["page"], json!({"limit": 10, "offset": 20, "total": 31}));
    assert_eq!(page["items"].as_array().unwrap().len(), 10);
}

#[test]
fn put_patch_sort_operators_string_ids_head_and_options() {
    let kv = temp_kv("crud");
    let app = App::start(&kv);
    for (name, age) in [("Ann", 31), ("Bob", 25), ("Cy", 40)] {
        app.send("POST", "/people/", Some(json!({"name": name, "age": age})));
    }
    assert_eq!(json_of(app.send("PUT", "/people/2", Some(json!({"name": "Bobby"})))).1, json!({"id": 2, "name": "Bobby"}));
    assert_eq!(json_of(app.send("PATCH", "/people/1", Some(json!({"age": 32})))).1, json!({"id": 1, "name": "Ann", "age": 32}));
    let (_, sorted) = json_of(app.send("GET", "/people?sort=-age", None));
    let names: Vec<_> = sorted["items"].as_array().unwrap().iter().map(|d| d["name"].clone()).collect();
    assert_eq!(names, vec![json!("Cy"), json!("Ann"), json!("Bobby")]);
    let (_, over) = json_of(app.send("GET", "/people/search?age__gt=31&name__icontains=c", None));
    assert_eq!(over, json!([{"id": 3, "name": "Cy", "age": 40}]));
    let created = app.send("POST", "/people/", Some(json!({"id": "zed", "name": "Zed"})));
    assert_eq!(created.headers()["location"], "/people/zed");
    assert_eq!(json_of(app.send("GET", "/people/zed", None)).1["name"], "Zed");
    assert_envelope(app.send("POST", "/people/", Some(json!({"id": "zed"}))), 409, "conflict");
    let head = app.send("HEAD", "/people/1", None);
    assert_eq!(head.status(), 200);
    assert_eq!(head.text().unwrap(), "", "HEAD answers like GET without a body");
    let options = app.send("OPTIONS", "/people/1", None);
    assert_eq!(options.status(), 204);
    assert!(options.headers()["allow"].to_str().unwrap().contains("PATCH"));
}

#[test]
fn error_paths_use_one_envelope() {
    let kv = temp_kv("errors");
    let app = App::start(&kv);
    assert_envelope(app.send("GET", "/members/404", None), 404, "not_found");
    let malformed = Client::new()
        .post(format!("{}/members/", app.base))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .unwrap();
    assert_envelope(malformed, 400, "bad_request");
    assert_envelope(app.send_as("GET", "/members/", None, &[("x-session-id", "../etc")]), 400, "bad_request");
    assert_envelope(app.send("GET", "/bad%20name/", None), 400, "bad_request");
    let huge = json!({"blob": "x".repeat(2 << 20)});
    assert_envelope(app.send("POST", "/members/", Some(huge)), 413, "body_too_large");
    assert_envelope(app.send("DELETE", "/members/", None), 405, "method_not_allowed");
    // None of these wrote anything.
    let (_, page) = json_of(app.send("GET", "/members/?limit=100", None));
    assert_eq!(page["page"]["total"], 0);
}

/// Boundary: the bearer token. With `auth_token` set, nothing runs without it.
#[test]
fn auth_token_is_required_when_configured() {
    let kv = temp_kv("auth");
    let app = App::start_with(&kv, "spin.toml", &[("SPIN_VARIABLE_AUTH_TOKEN", "t0ken")]);
    assert_envelope(app.send("GET", "/members/", None), 401, "unauthorized");
    assert_envelope(app.send_as("GET", "/members/", None, &[("authorization", "Bearer wrong")]), 401, "unauthorized");
    assert_eq!(app.send_as("GET", "/members/", None, &[("authorization", "Bearer t0ken")]).status(), 200);
}

/// Boundary: API keys. A key selects its tenant; an unknown key, and a
/// session id naming a keyed tenant, are refused before anything runs.
#[test]
fn api_keys_bind_tenants_and_guard_them() {
    let kv = temp_kv("api-keys");
    let app = App::start_with(&kv, "spin.toml", &[("SPIN_VARIABLE_API_KEYS", "key-alpha:alpha,key-beta:beta")]);
    let alpha = [("x-api-key", "key-alpha")];
    let beta = [("x-api-key", "key-beta")];
    let created = app.send_as("POST", "/notes/", Some(json!({"text": "alpha's"})), &alpha);
    assert_eq!(created.status(), 201);
    assert_eq!(json_of(app.send_as("GET", "/notes/1", None, &alpha)).1["text"], "alpha's");
    assert_eq!(app.send_as("GET", "/notes/1", None, &beta).status(), 404, "beta's key sees beta's tenant only");
    assert_envelope(app.send_as("GET", "/notes/1", None, &[("x-api-key", "key-gamma")]), 401, "unauthorized");
    assert_envelope(app.send_as("GET", "/notes/1", None, &[("x-session-id", "alpha")]), 401, "unauthorized");
    assert_envelope(app.send_as("POST", "/notes/", Some(json!({"text": "forged"})), &[("x-session-id", "alpha")]), 401, "unauthorized");
    let (_, page) = json_of(app.send_as("GET", "/notes/?limit=100", None, &alpha));
    assert_eq!(page["page"]["total"], 1, "the refused POST wrote nothing: {page}");
    assert_eq!(app.send_as("GET", "/notes/", None, &[("x-session-id", "unkeyed")]).status(), 200, "other tenants still work by session id");
}

/// The records are where the store's backend setting says: in Redis under
/// the tenant's hash-tagged keys (the suite's pass on Redis), else in the
/// key-value SQLite file in Spin's layout; never in the other one.
#[test]
fn records_land_in_the_configured_store() {
    let kv = temp_kv("backend");
    let app = App::start(&kv);
    let marker = "stored-where-configured-7f3a";
    let created = app.send_as("POST", "/ledger/", Some(json!({"memo": marker})), &[("x-session-id", "backend")]);
    assert_eq!(created.status(), 201);
    let in_sqlite = sqlite_values(&kv, "anypath/v2/t/backend/c/ledger/d/%");
    if common::redis_server::suite_on_redis() {
        let env = common::redis_server::for_app(&kv);
        let url = env.iter().find(|(k, _)| k == "SPIN_VARIABLE_REDIS_URL").map(|(_, v)| v.clone()).expect("the app's Redis");
        let mut redis = redis::Client::open(url).unwrap().get_connection().unwrap();
        let keys: Vec<String> = redis::cmd("KEYS").arg("anypath/v2/t/{backend}/c/ledger/d/*").query(&mut redis).unwrap();
        let values: Vec<String> = keys.iter().map(|k| redis::cmd("GET").arg(k).query(&mut redis).unwrap()).collect();
        assert!(values.len() == 1 && values[0].contains(marker), "one document in Redis: {values:?}");
        assert!(in_sqlite.is_empty(), "nothing in the key-value file on Redis: {in_sqlite:?}");
    } else {
        assert!(in_sqlite.len() == 1 && in_sqlite[0].contains(marker), "one document in the key-value file: {in_sqlite:?}");
    }
}

/// The values of Spin's key-value table under keys `LIKE pattern` (none when
/// the file or table does not exist).
fn sqlite_values(kv: &std::path::Path, pattern: &str) -> Vec<String> {
    let Ok(db) = rusqlite::Connection::open_with_flags(kv, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY) else {
        return vec![];
    };
    let Ok(mut query) = db.prepare("SELECT value FROM spin_key_value WHERE store = 'default' AND key LIKE ?1") else {
        return vec![];
    };
    query
        .query_map([pattern], |row| row.get::<_, Vec<u8>>(0))
        .unwrap()
        .map(|v| String::from_utf8_lossy(&v.unwrap()).into_owned())
        .collect()
}

/// Boundary: tenants. Each tenant's collections live under its own keys.
#[test]
fn two_tenants_never_see_each_others_data() {
    let kv = temp_kv("tenants");
    let app = App::start(&kv);
    let a = [("x-session-id", "tenant-a")];
    let b = [("x-session-id", "tenant-b")];
    app.send_as("POST", "/notes/", Some(json!({"text": "a's secret"})), &a);
    assert_eq!(app.send_as("GET", "/notes/1", None, &b).status(), 404);
    let (_, b_list) = json_of(app.send_as("GET", "/notes/?limit=100", None, &b));
    assert_eq!(b_list["page"]["total"], 0);
    app.send_as("POST", "/notes/", Some(json!({"text": "b's"})), &b);
    assert_eq!(json_of(app.send_as("GET", "/notes/1", None, &a)).1["text"], "a's secret");
    assert_eq!(json_of(app.send_as("GET", "/notes/1", None, &b)).1["text"], "b's");
}

#[test]
fn data_survives_a_restart() {
    let kv = temp_kv("restart");
    {
        let app = App::start(&kv);
        assert_eq!(app.send("POST", "/members/", Some(json!({"name": "Alice"}))).status(), 201);
    }
    let app = App::start(&kv);
    assert_eq!(json_of(app.send("GET", "/members/1", None)).1, json!({"id": 1, "name": "Alice"}));
}

/// Boundary: versioned commits. Concurrent writers to a new collection lose nothing.
#[test]
fn fifty_concurrent_posts_to_a_new_collection_keep_every_record() {
    let kv = temp_kv("race");
    let app = App::start(&kv);
    let base = app.base.clone();
    let writers: Vec<_> = (0..50)
        .map(|i| {
            let url = format!("{base}/orders/");
            std::thread::spawn(move || {
                let response = Client::builder().timeout(Duration::from_secs(120)).build().unwrap().post(url).json(&json!({"n": i})).send().unwrap();
                (response.status(), response.json::<Value>().unwrap())
            })
        })
        .collect();
    let mut ids = std::collections::BTreeSet::new();
    for writer in writers {
        let (status, body) = writer.join().unwrap();
        assert_eq!(status, 201, "{body}");
        ids.insert(body["id"].as_u64().unwrap());
    }
    assert_eq!(ids, (1..=50).collect());
    let (_, page) = json_of(app.send("GET", "/orders/?limit=100", None));
    assert_eq!(page["page"]["total"], 50);
    let mut seen: Vec<u64> = page["items"].as_array().unwrap().iter().map(|d| d["n"].as_u64().unwrap()).collect();
    seen.sort();
    assert_eq!(seen, (0..50).collect::<Vec<_>>());
}

/// A collection past one index chunk (the store keeps its newest entries in
/// the index head and seals older ones into chunks): records in sealed
/// chunks stay readable, patchable and deletable, the list keeps insertion
/// order, and a string id spelling an integer is never handed out again.
#[test]
fn a_collection_larger_than_one_index_chunk_keeps_every_record_in_order() {
    let kv = temp_kv("chunks");
    let app = App::start(&kv);
    let created = 2 * anypath_rest::stored_index::OPEN_LIMIT + 40;
    for n in 0..created {
        assert_eq!(app.send("POST", "/things/", Some(json!({"n": n}))).status(), 201);
    }
    assert_eq!(app.send("PATCH", "/things/3", Some(json!({"patched": true}))).status(), 200);
    assert_eq!(app.send("DELETE", "/things/300", None).status(), 204);
    assert_eq!(app.send("POST", "/things/", Some(json!({"id": "9000", "n": -1}))).status(), 201);
    let (status, next) = json_of(app.send("POST", "/things/", Some(json!({"n": -2}))));
    assert_eq!(status, 201);
    assert_eq!(next["id"], 9001, "a reserved id passes the string id \"9000\"");
    assert_eq!(json_of(app.send("GET", "/things/3", None)).1["patched"], true);
    assert_eq!(app.send("GET", "/things/300", None).status(), 404);
    assert_eq!(json_of(app.send("GET", "/things/1", None)).1["n"], 0, "the oldest record, in the first chunk");
    let (_, page) = json_of(app.send("GET", "/things/?limit=1000", None));
    let ids: Vec<Value> = page["items"].as_array().unwrap().iter().map(|d| d["id"].clone()).collect();
    let mut expected: Vec<Value> = (1..=created as i64).filter(|id| *id != 300).map(Value::from).collect();
    expected.extend([json!("9000"), json!(9001)]);
    assert_eq!(ids, expected, "insertion order, across chunks and the head");
}

/// Admission is work-conserving: a burst from one tenant right after
/// another tenant's requests (which no longer run or wait) takes the free
/// slots and the whole queue; nothing is refused, every record is kept.
#[test]
fn a_burst_right_after_another_tenants_requests_is_not_refused() {
    let kv = temp_kv("burst");
    let app = App::start(&kv);
    for _ in 0..2 {
        assert_eq!(app.send_as("GET", "/members/", None, &[("x-session-id", "earlier")]).status(), 200);
    }
    let base = app.base.clone();
    let writers: Vec<_> = (0..40)
        .map(|i| {
            let url = format!("{base}/members/");
            std::thread::spawn(move || {
                let client = Client::builder().timeout(Duration::from_secs(120)).build().unwrap();
                let response = client.post(url).header("x-session-id", "burst").json(&json!({"n": i})).send().unwrap();
                (response.status(), response.text().unwrap_or_default())
            })
        })
        .collect();
    let mut ids = std::collections::BTreeSet::new();
    for writer in writers {
        let (status, body) = writer.join().unwrap();
        assert_eq!(status, 201, "refused or failed: {body}");
        let created: Value = serde_json::from_str(&body).unwrap();
        ids.insert(created["id"].as_u64().unwrap());
    }
    assert_eq!(ids, (1..=40).collect(), "40 distinct ids");
}

/// Concurrent PATCHes of one document: each adds its own field, and the
/// read check plus the index swap must keep every one (no lost update), while
/// writers to other documents of the same collection are never turned away.
#[test]
fn concurrent_patches_of_one_document_lose_no_update() {
    let kv = temp_kv("patch-race");
    let app = App::start(&kv);
    assert_eq!(app.send("POST", "/counters/", Some(json!({"id": "hot"}))).status(), 201);
    assert_eq!(app.send("POST", "/counters/", Some(json!({"id": "cold"}))).status(), 201);
    let base = app.base.clone();
    let writers: Vec<_> = (0..24)
        .map(|i| {
            let target = if i % 4 == 3 { "cold" } else { "hot" };
            let url = format!("{base}/counters/{target}");
            std::thread::spawn(move || {
                let client = Client::builder().timeout(Duration::from_secs(120)).build().unwrap();
                let response = client.patch(url).json(&json!({format!("f{i}"): i})).send().unwrap();
                response.status()
            })
        })
        .collect();
    for writer in writers {
        assert_eq!(writer.join().unwrap(), 200);
    }
    let (_, hot) = json_of(app.send("GET", "/counters/hot", None));
    let (_, cold) = json_of(app.send("GET", "/counters/cold", None));
    for i in 0..24 {
        let doc = if i % 4 == 3 { &cold } else { &hot };
        assert_eq!(doc[format!("f{i}")], json!(i), "field f{i} was lost: hot={hot} cold={cold}");
    }
    assert_eq!(hot.as_object().unwrap().len(), 1 + 18);
    assert_eq!(cold.as_object().unwrap().len(), 1 + 6);
}

/// Boundary: `allowed_outbound_hosts`. A component calling a host it was not
/// granted fails inside the component with HttpRequestDenied, as in Spin.
#[test]
fn a_denied_outbound_call_fails_inside_the_component() {
    let kv = temp_kv("denied");
    let app = App::start_with(&kv, "tests/fixtures/no-sandbox-egress.toml", &[]);
    let response = app.send("GET", "/members/", None);
    assert_eq!(response.status(), 503);
    let (_, body) = json_of(response);
    assert_eq!(body["error"]["code"], "sandbox_unavailable");
    assert!(body["error"]["message"].as_str().unwrap().contains("HttpRequestDenied"), "{body}");
}

#[test]
fn healthz_and_readyz() {
    let kv = temp_kv("health");
    let app = App::start(&kv);
    assert_eq!(json_of(app.send("GET", "/healthz", None)).1["status"], "ok");
    let (status, ready) = json_of(app.send("GET", "/readyz", None));
    assert_eq!(status, StatusCode::OK, "{ready}");
    assert_eq!(ready, json!({"status": "ready", "ready": true, "sandbox_hosts": [{"host": app.sandbox, "ready": true}], "config_errors": []}));
}

#[test]
fn sandbox_host_down_is_503_and_not_ready() {
    let kv = temp_kv("down");
    // Port 9 (discard) on loopback: nothing listens there; the allowlist admits it.
    let down = [("SPIN_VARIABLE_SANDBOX_HOSTS", "127.0.0.1:9"), ("SPIN_VARIABLE_SANDBOX_ALLOWED", "127.0.0.1:9")];
    // A request the rules plan runs in the store: it needs no sandbox host.
    let direct = App::start_with(&temp_kv("down-direct"), "spin.toml", &down);
    assert_eq!(direct.send("POST", "/members/", Some(json!({"name": "a"}))).status(), 201);
    assert_eq!(json_of(direct.send("GET", "/members/", None)).1[0]["name"], "a");
    drop(direct);
    // A block (here the rules' own, with rules_direct off) needs one.
    let env = [down[0], down[1], ("SPIN_VARIABLE_RULES_DIRECT", "false")];
    let app = App::start_with(&kv, "spin.toml", &env);
    let response = app.send("GET", "/members/", None);
    assert_eq!(response.status(), 503);
    let (_, body) = json_of(response);
    assert_eq!(body["error"]["code"], "sandbox_unavailable", "{body}");
    assert!(body["error"]["message"].as_str().unwrap_or("").starts_with("no sandbox host answered: 127.0.0.1:9 ("), "{body}");
    let (status, ready) = json_of(app.send("GET", "/readyz", None));
    assert_eq!((status.as_u16(), &ready["ready"], &ready["sandbox_hosts"][0]["host"]), (503, &json!(false), &json!("127.0.0.1:9")), "{ready}");
    assert!(ready["sandbox_hosts"][0]["error"].is_string(), "{ready}");
    assert_eq!(app.send("GET", "/healthz", None).status(), 200, "the gateway itself is alive");
}

/// A variable set to a value that cannot be used (a typo in a number, a
/// malformed API key list) is not replaced by its default: `/readyz` says
/// which, the log line names it, and the REST face and the agent refuse to
/// serve instead of running on a setting nobody asked for (with a malformed
/// key list, that would have been an open app).
#[test]
fn an_unusable_variable_is_reported_and_refused_never_defaulted() {
    let kv = temp_kv("misconfigured");
    let env = [
        ("SPIN_VARIABLE_CALL_TIMEOUT_MS", "1O000"),
        ("SPIN_VARIABLE_API_KEYS", "k1:alice,broken"),
        ("SPIN_VARIABLE_PLANNER_MODE", "sometimes"),
    ];
    let app = App::start_with(&kv, "spin.toml", &env);
    let (status, ready) = json_of(app.send("GET", "/readyz", None));
    assert_eq!(status, 503, "{ready}");
    let named: Vec<&str> = ready["config_errors"].as_array().expect("a list").iter().filter_map(|e| e["variable"].as_str()).collect();
    assert_eq!(named, ["api_keys", "call_timeout_ms", "planner_mode"], "the gateway's and the planner's: {ready}");
    assert!(!ready.to_string().contains("k1"), "a secret's value is never echoed: {ready}");
    let refused = app.send("GET", "/members/", None);
    let id = refused.headers()["x-request-id"].to_str().expect("an id").to_owned();
    let (status, body) = json_of(refused);
    assert_eq!((status.as_u16(), body["error"]["code"].as_str()), (500, Some("misconfigured")), "{body}");
    assert!(body["error"]["message"].as_str().unwrap_or("").contains("call_timeout_ms"), "{body}");
    assert_envelope(app.send("POST", "/run", Some(json!({"input": "hello"}))), 500, "misconfigured");
    let line = app.process.wait_for_log(|l| l.contains(&id)).expect("the request's log line");
    assert!(line.contains("\"config_errors\":[{") && line.contains("1O000"), "{line}");
}

// ---------------------------------------------------------------- browsers on other origins (CORS)

/// A page that drives the REST face with `fetch()` as a web app would: POST
/// (reading `Location`), GET what it points at, PATCH, DELETE; it writes
/// what it saw, or why the fetch failed, into `<pre id="out">` as JSON.
const CORS_PAGE: &str = r#"<!doctype html><html><body><pre id="out">pending</pre><script>
(async () => {
  const api = new URLSearchParams(location.search).get('api');
  const seen = {};
  try {
    const json = {'Content-Type': 'application/json'};
    const created = await fetch(api + '/cors_books/', {method: 'POST', headers: json, body: JSON.stringify({title: 'Dune'})});
    seen.post = created.status;
    seen.location = created.headers.get('Location');
    seen.request_id = created.headers.get('X-Request-Id') !== null;
    const read = await fetch(api + seen.location);
    seen.get = read.status;
    seen.title = (await read.json()).title;
    const patched = await fetch(api + seen.location, {method: 'PATCH', headers: json, body: JSON.stringify({year: 1965})});
    seen.patch = patched.status;
    seen.year = (await patched.json()).year;
    seen.delete = (await fetch(api + seen.location, {method: 'DELETE'})).status;
  } catch (e) {
    seen.failed = String(e);
  }
  document.getElementById('out').textContent = JSON.stringify(seen);
})();
</script></body></html>"#;

/// Debian's chromium, which `cargo xtask test` installs where `apt-get` works.
fn chromium() -> Option<std::path::PathBuf> {
    let path = std::env::var_os("ANYPATH_CHROMIUM").map(std::path::PathBuf::from).unwrap_or_else(|| "/usr/bin/chromium".into());
    path.is_file().then_some(path)
}

/// Loads `url` in headless chromium until its scripts are done; what the page wrote.
fn page_result(chromium: &std::path::Path, url: &str) -> Value {
    let (dom, stderr) = rendered_dom(chromium, url, &[]);
    let start = dom.find("<pre id=\"out\">").map(|at| at + "<pre id=\"out\">".len());
    let text = start.and_then(|at| dom[at..].split("</pre>").next()).unwrap_or("");
    let text = text.replace("&quot;", "\"").replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">");
    serde_json::from_str(&text).unwrap_or_else(|_| panic!("the page wrote no result: {text:?}\n{stderr}"))
}

/// The DOM of `url` once headless chromium has run its scripts (in a fresh
/// profile, with `extra` flags), and what chromium said on stderr.
fn rendered_dom(chromium: &std::path::Path, url: &str, extra: &[&str]) -> (String, String) {
    let profile = common::scratch("anypath-chromium-");
    let output = std::process::Command::new(chromium)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking"])
        .args(["--disable-component-update", "--disable-sync", "--virtual-time-budget=20000", "--dump-dom"])
        .args(extra)
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(url)
        .output()
        .expect("chromium runs");
    (String::from_utf8_lossy(&output.stdout).into_owned(), String::from_utf8_lossy(&output.stderr).into_owned())
}

/// Serves the test page on a port of its own: another origin than the app's.
fn serve_page() -> String {
    let page = axum::Router::new().route("/page.html", axum::routing::get(|| async { axum::response::Html(CORS_PAGE) }));
    common::serve_in_background(page)
}

/// Boundary: the browser's same-origin policy. A page on an allowed origin
/// drives the REST face with fetch() and reads `Location`; a page on
/// another origin cannot read anything.
#[test]
fn a_browser_page_on_an_allowed_origin_calls_the_api_and_another_cannot() {
    let Some(chromium) = chromium() else {
        eprintln!("skipped: no chromium at /usr/bin/chromium (`cargo xtask test` installs it with apt-get; or set ANYPATH_CHROMIUM)");
        return;
    };
    let allowed = serve_page();
    let other = serve_page();
    let origin = format!("http://{allowed}");
    let app = App::start_with(&temp_kv("cors-browser"), "spin.toml", &[("SPIN_VARIABLE_CORS_ALLOWED_ORIGINS", origin.as_str())]);
    let seen = page_result(&chromium, &format!("http://{allowed}/page.html?api={}", app.base));
    assert_eq!(seen.get("failed"), None, "{seen}");
    assert_eq!((&seen["post"], &seen["get"], &seen["patch"], &seen["delete"]), (&json!(201), &json!(200), &json!(200), &json!(204)), "{seen}");
    assert!(seen["location"].as_str().is_some_and(|l| l.starts_with("/cors_books/")), "Location is readable: {seen}");
    assert_eq!((&seen["title"], &seen["year"], &seen["request_id"]), (&json!("Dune"), &json!(1965), &json!(true)), "{seen}");

    let refused = page_result(&chromium, &format!("http://{other}/page.html?api={}", app.base));
    assert!(refused["failed"].as_str().is_some_and(|e| e.contains("Failed to fetch")), "another origin must not read the answer: {refused}");
}

/// The preflight itself, as a browser sends it: no credentials, the path's
/// methods and the headers the app reads; an origin not allowed gets none.
#[test]
fn a_preflight_is_answered_for_allowed_origins_only() {
    let env = [("SPIN_VARIABLE_CORS_ALLOWED_ORIGINS", "https://app.example"), ("SPIN_VARIABLE_AUTH_TOKEN", "secret-token")];
    let app = App::start_with(&temp_kv("cors-preflight"), "spin.toml", &env);
    let preflight = |origin: &str| {
        Client::new()
            .request(reqwest::Method::OPTIONS, format!("{}/books/7", app.base))
            .header("origin", origin)
            .header("access-control-request-method", "PATCH")
            .header("access-control-request-headers", "content-type, authorization")
            .send()
            .expect("preflight sent")
    };
    let answer = preflight("https://app.example");
    assert_eq!(answer.status(), StatusCode::NO_CONTENT, "a preflight needs no token");
    let header = |r: &reqwest::blocking::Response, name: &str| r.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
    assert_eq!(header(&answer, "access-control-allow-origin").as_deref(), Some("https://app.example"));
    assert_eq!(header(&answer, "access-control-allow-methods"), header(&answer, "allow"), "the same list as Allow");
    assert!(header(&answer, "access-control-allow-methods").is_some_and(|m| m.contains("PATCH")));
    let allowed_headers = header(&answer, "access-control-allow-headers").unwrap_or_default();
    for name in ["content-type", "authorization", "x-session-id", "x-api-key", "x-request-id"] {
        assert!(allowed_headers.contains(name), "{name} in {allowed_headers}");
    }
    assert!(header(&answer, "access-control-max-age").is_some());
    assert!(header(&answer, "vary").is_some_and(|v| v.contains("Origin")));

    let foreign = preflight("https://evil.example");
    assert!(foreign.headers().get("access-control-allow-origin").is_none(), "no CORS headers for an origin not allowed");

    // An actual answer, even a refusal, says who may read it and exposes what a page needs.
    let refused = Client::new().get(format!("{}/books/", app.base)).header("origin", "https://app.example").send().expect("sent");
    assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(header(&refused, "access-control-allow-origin").as_deref(), Some("https://app.example"));
    assert!(header(&refused, "access-control-expose-headers").is_some_and(|h| h.contains("location") && h.contains("x-request-id")));
    // Without Origin, OPTIONS is what it was: no CORS headers.
    let plain = Client::new().request(reqwest::Method::OPTIONS, format!("{}/books/", app.base)).bearer_auth("secret-token").send().expect("sent");
    assert_eq!(plain.status(), StatusCode::NO_CONTENT);
    assert!(plain.headers().get("access-control-allow-origin").is_none());
}

/// A setting that cannot be used is refused, not guessed around.
#[test]
fn credentials_for_every_origin_are_a_configuration_error() {
    let env = [("SPIN_VARIABLE_CORS_ALLOWED_ORIGINS", "*"), ("SPIN_VARIABLE_CORS_ALLOW_CREDENTIALS", "true")];
    let app = App::start_with(&temp_kv("cors-misconfigured"), "spin.toml", &env);
    let (status, body) = json_of(app.send("GET", "/books/", None));
    assert_eq!((status.as_u16(), &body["error"]["code"]), (500, &json!("misconfigured")), "{body}");
    assert!(body["error"]["message"].as_str().is_some_and(|m| m.contains("cors_allowed_origins")), "{body}");
}

/// `/docs` and `/redoc` render in a browser that can reach no host but the
/// app: their UI is served by the gateway, not a CDN.
#[test]
fn the_api_docs_render_offline_in_a_browser() {
    let Some(chromium) = chromium() else {
        eprintln!("skipped: no chromium at /usr/bin/chromium (`cargo xtask test` installs it with apt-get; or set ANYPATH_CHROMIUM)");
        return;
    };
    let app = App::start(&temp_kv("docs-offline"));
    // Every host but the app's own is unreachable.
    let render = |path: &str| rendered_dom(&chromium, &format!("{}{path}", app.base), &["--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"]).0;
    let swagger = render("/docs");
    assert!(swagger.contains("opblock-summary-path") && swagger.contains("/{collection}/"), "Swagger UI rendered no operation:\n{}", &swagger[..swagger.len().min(2000)]);
    assert!(!swagger.contains("cdn.jsdelivr.net"), "no asset comes from a CDN");
    let redoc = render("/redoc");
    assert!(redoc.contains("anypath") && redoc.contains("/{collection}/"), "Redoc rendered no operation:\n{}", &redoc[..redoc.len().min(2000)]);
}

/// Boundary: the store is the public route, and its data endpoints
/// (`/load`, `/commit`, `/execute`, the plan cache) answer only the app's
/// own components. A client posting the exact body the gateway would send,
/// dressed as a chained request (Spin's `spin-client-addr: 0.0.0.0:0` and
/// the hand-over's client-address header), reaches no endpoint: its path is
/// a collection like any other, and the victim tenant's data is neither
/// read nor changed.
#[test]
fn the_stores_data_endpoints_answer_only_the_apps_own_components() {
    use anypath_rest::context::RawRequest;
    use anypath_rest::direct::DirectRequest;

    let app = App::start(&temp_kv("store-endpoints"));
    let victim = [("x-session-id", "victim")];
    let created = app.send_as("POST", "/secrets/", Some(json!({"pin": "4711"})), &victim);
    assert_eq!(created.status(), 201);
    let spoofed = [("spin-client-addr", "0.0.0.0:0"), ("x-anypath-client-addr", "0.0.0.0:0"), ("spin-full-url", "http://store.spin.internal/")];

    // The gateway's load of the victim's collection, sent from outside.
    let load = json!({"tenant": "victim", "collections": [{"name": "secrets"}]});
    let answered = app.send_as("POST", "/load", Some(load), &spoofed);
    assert_eq!(answered.status(), 201, "a create in the caller's own collection `load`");
    assert!(!answered.text().unwrap_or_default().contains("4711"), "the victim's data is not read");

    // A rules-planned read of the victim's record, as the gateway asks the store to run it.
    let headers: Vec<(String, String)> = Vec::new();
    let raw = RawRequest { method: "GET", path: "/secrets/1", query: "", headers: &headers, body: b"", client_ip: "127.0.0.1" };
    let ctx = anypath_rest::RequestContext::build(&raw, "victim").unwrap();
    let execute = serde_json::to_value(DirectRequest { tenant: "victim".into(), ctx }).unwrap();
    let answered = app.send_as("POST", "/execute", Some(execute), &spoofed);
    assert_eq!(answered.status(), 201);
    assert!(!answered.text().unwrap_or_default().contains("4711"), "the victim's data is not read");

    // A commit deleting the victim's record.
    let commit = json!({"tenant": "victim", "changes": [{"name": "secrets", "expected_version": 1,
        "mutations": [{"collection": "secrets", "op": "delete", "id": 1, "document": null}]}]});
    assert_eq!(app.send_as("POST", "/commit", Some(commit), &spoofed).status(), 201);
    let cache = json!({"tenant": "victim", "key": "k", "plan": {}});
    assert_envelope(app.send_as("POST", "/plan-cache/put", Some(cache), &spoofed), 405, "method_not_allowed");

    let (status, record) = json_of(app.send_as("GET", "/secrets/1", None, &victim));
    assert_eq!((status, record), (StatusCode::OK, json!({"id": 1, "pin": "4711"})), "the victim's record is untouched");
    let (_, commits) = json_of(app.send("GET", "/commit/1", None));
    assert_eq!(commits["tenant"], "victim", "the attack landed as a record of the caller's own");
}
