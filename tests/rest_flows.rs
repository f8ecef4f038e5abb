//! The offline planner's blocks, run in the real sandbox, against an
//! in-memory copy of the store's protocol: partial loads with reserved ids,
//! a whole-collection re-run on `needs_data`, and journals committed through
//! the same index check and apply as the store component. The seed's
//! examples and the rest of the REST semantics, without Spin.

use crate::common;

use std::collections::HashMap;

use anypath_rest::context::RawRequest;
use anypath_rest::journal::{MutationRecord, ReadCheck};
use anypath_rest::plan::LoadSpec;
use anypath_rest::{Index, RequestContext, rules};
use anypath_sandbox::{ExecError, ExecRequest};
use serde_json::{Value, json};

/// A tenant's collections, kept between requests, stored as the store stores them.
#[derive(Default)]
struct Tenant {
    collections: HashMap<String, Index>,
    values: HashMap<String, Value>,
    next_id: HashMap<String, i64>,
    commits: usize,
    whole_reruns: usize,
}

/// What a client would see: status, headers, JSON body.
#[derive(Debug)]
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: Value,
}

/// One collection as loaded: the index read and the tags of the documents handed out.
struct Loaded {
    index: Index,
    tags: HashMap<String, String>,
}

impl Tenant {
    fn load(&mut self, spec: &LoadSpec, mut request: ExecRequest) -> (ExecRequest, Loaded) {
        let index = self.collections.get(&spec.name).cloned().unwrap_or_default();
        let wanted: Vec<String> = spec.ids.clone().unwrap_or_else(|| index.docs.keys().cloned().collect());
        let (mut docs, mut absent, mut tags) = (Vec::new(), Vec::new(), HashMap::new());
        for id in wanted {
            match index.docs.get(&id) {
                Some(tag) => {
                    docs.push(self.values[tag].clone());
                    tags.insert(id, tag.clone());
                }
                None => absent.push(id),
            }
        }
        let reserved = spec.reserve_id.then(|| {
            let counter = self.next_id.entry(spec.name.clone()).or_default();
            *counter = (*counter + 1).max(index.max_int_id + 1);
            *counter
        });
        request = match spec.ids {
            Some(_) => request.with_partial_collection(&spec.name, &docs, absent, reserved).unwrap(),
            None => request.with_collection(&spec.name, index.version, &docs).unwrap(),
        };
        (request, Loaded { index, tags })
    }

    fn send(&mut self, method: &str, target: &str, body: Option<Value>) -> Answer {
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        let headers = vec![("content-type".to_string(), "application/json".to_string())];
        let raw = RawRequest { method, path, query, headers: &headers, body: body.as_bytes(), client_ip: "127.0.0.1" };
        // A request the gateway refuses before planning (malformed JSON, a bad list control) answers as it would.
        let ctx = match RequestContext::build(&raw, "tenant-a") {
            Ok(ctx) => ctx,
            Err(e) => return Answer { status: e.status(), headers: vec![], body: json!({"error": e.to_string()}) },
        };
        let plan = match rules::plan(&ctx) {
            Ok(plan) => plan,
            Err(e) => return Answer { status: e.status(), headers: vec![], body: json!({"error": e.to_string()}) },
        };
        let mut specs = plan.load_specs(ctx.body_json.as_ref());
        let (report, loaded) = loop {
            let mut request = ExecRequest::new(plan.code.source()).with_ctx(&ctx).unwrap();
            let mut loaded = HashMap::new();
            for spec in &specs {
                let (next, one) = self.load(spec, request);
                request = next;
                loaded.insert(spec.name.clone(), one);
            }
            let report = common::exec(request);
            match &report.outcome {
                Err(f) if matches!(f.error, ExecError::NeedsData { .. }) => {
                    assert!(specs.iter().any(|s| s.ids.is_some()), "needs_data on a whole load");
                    self.whole_reruns += 1;
                    specs = specs.into_iter().map(|s| LoadSpec { ids: None, ..s }).collect();
                }
                _ => break (report, loaded),
            }
        };
        let success = common::success(&report);
        let journal: Vec<MutationRecord> = serde_json::from_value(common::journal(&report)).unwrap();
        for (name, one) in loaded {
            let entries: Vec<&MutationRecord> = journal.iter().filter(|m| m.collection == name).collect();
            if entries.is_empty() {
                continue;
            }
            let mut check = ReadCheck { expected_version: one.index.version, ..ReadCheck::default() };
            if let Some(read) = success.reads.iter().find(|r| r.collection == name) {
                check.scanned = read.scanned;
                check.reads = read.ids.iter().map(|id| (id.clone(), one.tags.get(id).cloned())).collect();
            }
            let current = self.collections.get(&name).cloned().unwrap_or_default();
            current.check(&name, &check).expect("nothing changed in between");
            let applied = current.apply(&entries, &format!("c{}", self.commits)).expect("journal applies");
            self.commits += 1;
            self.values.extend(applied.writes);
            for tag in applied.superseded {
                self.values.remove(&tag);
            }
            self.collections.insert(name, applied.index);
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
