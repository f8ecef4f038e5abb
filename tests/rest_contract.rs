//! What an API fuzzer found in the REST face, each kept fixed through real
//! HTTP against `anypath up`: ids that no header or path could carry, a reply
//! that failed after its write was committed, and `Allow`, `405` and the spec
//! disagreeing with the server.

use crate::common;

use common::app::{App, assert_envelope, json_of, temp_kv};
use common::fake_llm::{FakeLlm, Reply};
use reqwest::blocking::Response;
use serde_json::{Value, json};

fn header(response: &Response, name: &str) -> String {
    response.headers().get(name).and_then(|v| v.to_str().ok()).unwrap_or("").to_owned()
}

fn total(app: &App, collection: &str) -> Value {
    json_of(app.send("GET", &format!("/{collection}/?limit=0"), None)).1["page"]["total"].clone()
}

/// The finding: a control character in a client id made the Location header
/// unsendable, so the client got a bare 500 while the record was stored.
#[test]
fn ids_no_path_can_reach_are_refused_before_anything_is_written() {
    let app = App::start(&temp_kv("contract-ids"));
    for bad in [json!("a\u{b}b"), json!(""), json!("."), json!(".."), json!("search"), json!("x".repeat(257)),
                json!(1.5), json!(true), json!(9_007_199_254_740_992_u64)] {
        let response = app.send("POST", "/things/", Some(json!({"id": bad, "n": 1})));
        assert_eq!(header(&response, "content-type"), "application/json");
        assert_envelope(response, 400, "bad_request");
    }
    assert_eq!(total(&app, "things"), 0, "a refused create writes nothing");
}

#[test]
fn location_percent_encodes_the_id_and_a_get_follows_it_back() {
    let app = App::start(&temp_kv("contract-location"));
    for (id, location) in [("café", "/things/caf%C3%A9"), ("a/b", "/things/a%2Fb"), ("../x", "/things/..%2Fx"),
                           (" ", "/things/%20"), ("a+b", "/things/a%2Bb"), ("50%", "/things/50%25")] {
        let created = app.send("POST", "/things/", Some(json!({"id": id, "n": 1})));
        assert_eq!(created.status(), 201, "{id:?}");
        assert_eq!(header(&created, "location"), location);
        let (status, found) = json_of(app.send("GET", location, None));
        assert_eq!((status.as_u16(), found), (200, json!({"id": id, "n": 1})), "GET {location}");
    }
    // In a path, `+` is a plus sign: the raw path reaches the same record.
    assert_eq!(json_of(app.send("GET", "/things/a+b", None)).1["id"], "a+b");
    // An integral number is an integer id; null asks for one.
    let created = app.send("POST", "/things/", Some(json!({"id": 7.0})));
    assert_eq!(header(&created, "location"), "/things/7");
    assert_eq!(json_of(created).1, json!({"id": 7}));
    let assigned = app.send("POST", "/things/", Some(json!({"id": null, "n": 2})));
    assert_eq!(header(&assigned, "location"), "/things/8");
}

/// Boundary: the runner's reply check. A block whose REPLY carries a header
/// HTTP cannot send fails as `invalid_reply` before its journal is committed.
#[test]
fn an_unsendable_reply_header_fails_before_the_commit() {
    let bad = |header: &str| {
        let code = format!("new_id = store.insert(dict(ctx['body_json']))\nREPLY = {{'status': 201, 'headers': {header}, 'body': {{}}}}");
        let plan = json!({"action": "create", "resource": "things", "also_loads": [], "id": null, "criteria": {}, "payload": null,
                          "response_hints": {}, "code": {"language": "python", "block": format!("```python\n{code}\n```")}});
        Reply::Text(plan.to_string())
    };
    let fake = FakeLlm::start(vec![
        bad("{'Location': '/things/a\\x0bb'}"),
        bad("{'Bad Name': 'x'}"),
        bad("{'X-Note': 'café'}"),
    ])
    .otherwise(Reply::Oracle);
    let env = fake.env("openai", "llm");
    let pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let app = App::start_with(&temp_kv("contract-reply"), "spin.toml", &pairs);
    let response = app.send("POST", "/things/", Some(json!({"n": 1})));
    let request_id = header(&response, "x-request-id");
    let (status, body) = json_of(response);
    assert_eq!(status, 502, "{body}");
    assert_eq!(body["error"]["code"], "plan_failed");
    assert_eq!(body["error"]["request_id"], request_id.as_str());
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert_eq!(message.matches("invalid_reply").count(), 3, "each attempt failed its reply check: {message}");
    let log = app.process.wait_for_log(|l| l.contains(&request_id) && l.contains("\"status\":502")).expect("the request's log line");
    assert!(log.contains("\"committed\":[]"), "{log}");
    assert_eq!(total(&app, "things"), 0, "nothing was committed");
}

#[test]
fn allow_lists_exactly_what_each_path_accepts() {
    let app = App::start(&temp_kv("contract-allow"));
    for (path, allow) in [
        ("/healthz", "GET, HEAD, OPTIONS"),
        ("/readyz", "GET, HEAD, OPTIONS"),
        ("/openapi.json", "GET, HEAD, OPTIONS"),
        ("/members/", "GET, HEAD, POST, OPTIONS"),
        ("/members/search", "GET, HEAD, OPTIONS"),
        ("/members/1", "GET, HEAD, PUT, PATCH, DELETE, OPTIONS"),
        // json-server's nested routes, under the rules.
        ("/members/1/comments", "GET, HEAD, POST, OPTIONS"),
    ] {
        let options = app.send("OPTIONS", path, None);
        assert_eq!((options.status().as_u16(), header(&options, "allow")), (204, allow.to_owned()), "OPTIONS {path}");
        for method in ["TRACE", "PUT", "DELETE", "POST", "PATCH"].iter().filter(|m| !allow.contains(*m)) {
            let refused = app.send(method, path, None);
            assert_eq!(header(&refused, "allow"), allow, "{method} {path}");
            assert_envelope(refused, 405, "method_not_allowed");
        }
    }
    let head = app.send("HEAD", "/healthz", None);
    assert_eq!((head.status().as_u16(), head.text().unwrap_or_default()), (200, String::new()));
    // Under the rules a nested path lists and creates children; the spec lists exactly that.
    let spec = json_of(app.send("GET", "/openapi.json", None)).1;
    let nested: Vec<&String> = spec["paths"]["/{collection}/{id}/{action}"].as_object().map(|o| o.keys().filter(|k| *k != "parameters").collect()).unwrap_or_default();
    assert_eq!(nested, vec!["get", "post"]);
    assert!(spec["paths"]["/{collection}/{id}"].get("post").is_none());
    // Reserved names are never collections.
    assert_envelope(app.send("POST", "/healthz/", Some(json!({}))), 400, "bad_request");
}

/// With a model planning, every method on every collection path is the
/// model's to interpret, and `Allow` and the spec both say so.
#[test]
fn under_an_llm_planner_every_collection_path_takes_every_method() {
    let fake = FakeLlm::start(vec![]).otherwise(Reply::Oracle);
    let env = fake.env("openai", "llm");
    let pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let app = App::start_with(&temp_kv("contract-allow-llm"), "spin.toml", &pairs);
    let every = "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS";
    for path in ["/members/", "/members/search", "/members/1", "/members/1/promote"] {
        assert_eq!(header(&app.send("OPTIONS", path, None), "allow"), every, "{path}");
    }
    assert_eq!(header(&app.send("OPTIONS", "/healthz", None), "allow"), "GET, HEAD, OPTIONS");
    let refused = app.send("TRACE", "/members/1", None);
    assert_eq!(header(&refused, "allow"), every);
    assert_envelope(refused, 405, "method_not_allowed");
    // The model declines an action it does not know: a planned 404, not a 405.
    assert_envelope(app.send("POST", "/members/1/promote", Some(json!({}))), 404, "not_found");
    let spec = json_of(app.send("GET", "/openapi.json", None)).1;
    let nested = &spec["paths"]["/{collection}/{id}/{action}"];
    for method in ["get", "post", "put", "patch", "delete"] {
        assert!(nested.get(method).is_some(), "nested {method}");
        assert!(spec["paths"]["/{collection}/{id}"].get(method).is_some(), "item {method}");
    }
}
