//! The offline planner's blocks, run in the real sandbox, with each journal
//! applied to an in-memory collection the way the store applies it: the
//! seed's examples and the rest of the REST semantics, without Spin.

mod common;

use std::collections::HashMap;

use anypath_rest::context::RawRequest;
use anypath_rest::journal::MutationRecord;
use anypath_rest::{Collection, RequestContext, rules};
use anypath_sandbox::ExecRequest;
use serde_json::{Value, json};

/// A tenant's collections, kept between requests.
#[derive(Default)]
struct Tenant {
    collections: HashMap<String, Collection>,
}

/// What a client would see: status, headers, JSON body.
#[derive(Debug)]
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: Value,
}

impl Tenant {
    fn send(&mut self, method: &str, target: &str, body: Option<Value>) -> Answer {
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        let headers = vec![("content-type".to_string(), "application/json".to_string())];
        let raw = RawRequest { method, path, query, headers: &headers, body: body.as_bytes(), client_ip: "127.0.0.1" };
        let ctx = RequestContext::build(&raw, "tenant-a").expect("valid request");
        let plan = match rules::plan(&ctx) {
            Ok(plan) => plan,
            Err(e) => return Answer { status: e.status(), headers: vec![], body: json!({"error": e.to_string()}) },
        };
        let mut request = ExecRequest::new(plan.code.source()).with_ctx(&ctx).unwrap();
        let mut versions = HashMap::new();
        for name in plan.collections() {
            let current = self.collections.get(name).cloned().unwrap_or_default();
            versions.insert(name.to_owned(), current.version);
            request = request.with_collection(name, current.version, &current.documents).unwrap();
        }
        let report = common::exec(request);
        let success = common::success(&report);
        let journal: Vec<MutationRecord> = serde_json::from_value(common::journal(&report)).unwrap();
        for (name, version) in versions {
            let entries: Vec<&MutationRecord> = journal.iter().filter(|m| m.collection == name).collect();
            self.collections.entry(name).or_default().apply(version, &entries).expect("journal applies");
        }
        let body = success.reply.body.as_ref().map(|b| serde_json::from_str(b.get()).unwrap()).unwrap_or(Value::Null);
        Answer { status: success.reply.status, headers: success.reply.headers.clone(), body }
    }
}

fn location(answer: &Answer) -> Option<&str> {
    answer.headers.iter().find(|(k, _)| k == "Location").map(|(_, v)| v.as_str())
}

#[test]
fn seed_example_1_create_then_get() {
    let mut t = Tenant::default();
    let created = t.send("POST", "/members/", Some(json!({"name": "Alice"})));
    assert_eq!(created.status, 201);
    assert_eq!(location(&created), Some("/members/1"));
    assert_eq!(created.body, json!({"id": 1, "name": "Alice"}));
    let got = t.send("GET", "/members/1", None);
    assert_eq!((got.status, got.body), (200, json!({"id": 1, "name": "Alice"})));
}

#[test]
fn seed_example_2_search() {
    let mut t = Tenant::default();
    t.send("POST", "/members/", Some(json!({"name": "Alice"})));
    t.send("POST", "/members/", Some(json!({"name": "hartmann", "city": "Graz"})));
    let found = t.send("GET", "/members/search?name=hartmann", None);
    assert_eq!((found.status, found.body), (200, json!([{"id": 2, "name": "hartmann", "city": "Graz"}])));
    let contains = t.send("GET", "/members/search?name__contains=art", None);
    assert_eq!(contains.body.as_array().map(Vec::len), Some(1));
}

#[test]
fn seed_example_3_delete_then_404() {
    let mut t = Tenant::default();
    t.send("POST", "/members/", Some(json!({"name": "Alice"})));
    let deleted = t.send("DELETE", "/members/1", None);
    assert_eq!((deleted.status, &deleted.body), (204, &Value::Null));
    assert_eq!(t.send("GET", "/members/1", None).status, 404);
    assert_eq!(t.send("DELETE", "/members/1", None).status, 404);
}

#[test]
fn seed_example_4_list_with_paging() {
    let mut t = Tenant::default();
    for i in 0..25 {
        t.send("POST", "/members/", Some(json!({"name": format!("m{i}"), "age": 50 - i})));
    }
    let page = t.send("GET", "/members/?limit=10&offset=20", None);
    assert_eq!(page.status, 200);
    assert_eq!(page.body["page"], json!({"limit": 10, "offset": 20, "total": 25}));
    assert_eq!(page.body["items"].as_array().map(Vec::len), Some(5));
    let sorted = t.send("GET", "/members?sort=age&limit=2", None);
    let ages: Vec<_> = sorted.body["items"].as_array().unwrap().iter().map(|d| d["age"].clone()).collect();
    assert_eq!(ages, vec![json!(26), json!(27)]);
    let filtered = t.send("GET", "/members/?age__gt=45&sort=-age", None);
    assert_eq!(filtered.body["page"]["total"], 5);
    assert_eq!(filtered.body["items"][0]["age"], 50);
}

#[test]
fn put_replaces_and_patch_merges() {
    let mut t = Tenant::default();
    t.send("POST", "/members/", Some(json!({"name": "Alice", "age": 30})));
    let replaced = t.send("PUT", "/members/1", Some(json!({"name": "Alicia"})));
    assert_eq!((replaced.status, replaced.body), (200, json!({"id": 1, "name": "Alicia"})));
    let patched = t.send("PATCH", "/members/1", Some(json!({"age": 31})));
    assert_eq!(patched.body, json!({"id": 1, "name": "Alicia", "age": 31}));
    assert_eq!(t.send("PUT", "/members/9", Some(json!({"name": "x"}))).status, 404);
    assert_eq!(t.send("PATCH", "/members/1", Some(json!([1]))).status, 400);
}

#[test]
fn client_string_ids_are_kept_and_duplicates_conflict() {
    let mut t = Tenant::default();
    let created = t.send("POST", "/members/", Some(json!({"id": "alice", "name": "Alice"})));
    assert_eq!((created.status, location(&created)), (201, Some("/members/alice")));
    assert_eq!(t.send("GET", "/members/alice", None).body["name"], "Alice");
    assert_eq!(t.send("POST", "/members/", Some(json!({"id": "alice"}))).status, 409);
    assert_eq!(t.send("POST", "/members/", Some(json!({"n": 1}))).body["id"], 1);
}

#[test]
fn bad_paging_is_400_and_a_non_object_body_is_400() {
    let mut t = Tenant::default();
    assert_eq!(t.send("GET", "/members/?limit=abc", None).status, 400);
    assert_eq!(t.send("POST", "/members/", Some(json!("just a string"))).status, 400);
    assert!(t.collections.get("members").is_none_or(|c| c.version == 0), "nothing was written");
}
