//! The offline planner's blocks, run in the real sandbox, against an
//! in-memory copy of the store's protocol: partial loads with reserved ids,
//! a whole-collection re-run on `needs_data`, and journals committed through
//! the same index check and apply as the store component. The seed's
//! examples and the rest of the REST semantics, without Spin.
//!
//! Every request also runs on the direct path the store takes for a rules
//! plan (`anypath_rest::direct`, no Python), on the same loaded data: the
//! two must agree on the status, headers, body, journal and read sets, or
//! the case fails.

use crate::common;

use std::collections::HashMap;

use anypath_rest::context::RawRequest;
use anypath_rest::journal::{MutationRecord, ReadCheck};
use anypath_rest::plan::LoadSpec;
use anypath_rest::{Index, RequestContext, direct, rules};
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
    fn load(&mut self, spec: &LoadSpec, mut request: ExecRequest) -> (ExecRequest, Loaded, anypath_collections::Loaded) {
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
        let direct = anypath_collections::Loaded {
            name: spec.name.clone(),
            documents: anypath_collections::Documents::Parsed(docs.clone()),
            complete: spec.ids.is_none(),
            absent_ids: absent.clone(),
            reserved_id: reserved,
        };
        request = match spec.ids {
            Some(_) => request.with_partial_collection(&spec.name, &docs, absent, reserved).unwrap(),
            None => request.with_collection(&spec.name, index.version, &docs).unwrap(),
        };
        (request, Loaded { index, tags }, direct)
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
        let (report, loaded, direct) = loop {
            let mut request = ExecRequest::new(plan.code.source()).with_ctx(&ctx).unwrap();
            let mut loaded = HashMap::new();
            let mut for_direct = Vec::new();
            for spec in &specs {
                let (next, one, direct) = self.load(spec, request);
                request = next;
                loaded.insert(spec.name.clone(), one);
                for_direct.push(direct);
            }
            let report = common::exec(request);
            let mut store = anypath_collections::Store::new(for_direct);
            let direct = direct::execute(&plan, &ctx, &mut store);
            match &report.outcome {
                Err(f) if matches!(f.error, ExecError::NeedsData { .. }) => {
                    assert!(specs.iter().any(|s| s.ids.is_some()), "needs_data on a whole load");
                    assert!(
                        matches!(direct, Err(anypath_collections::OpError::NeedsData(_))),
                        "{method} {target}: the block needed whole collections, the direct path answered {direct:?}"
                    );
                    self.whole_reruns += 1;
                    specs = specs.into_iter().map(|s| LoadSpec { ids: None, ..s }).collect();
                }
                _ => break (report, loaded, direct.map(|reply| (reply, store))),
            }
        };
        let success = common::success(&report);
        agree(method, target, success, direct);
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

/// Holds the direct path's answer to the block's: the same reply, journal and read sets.
fn agree(method: &str, target: &str, block: &anypath_sandbox::Success, direct: Result<(direct::Reply, anypath_collections::Store), anypath_collections::OpError>) {
    let (reply, store) = direct.unwrap_or_else(|e| panic!("{method} {target}: the direct path failed where the block answered: {e:?}"));
    let block_body = block.reply.body.as_ref().map(|b| serde_json::from_str::<Value>(b.get()).unwrap());
    assert_eq!(
        (block.reply.status, &block.reply.headers, &block_body),
        (reply.status, &reply.headers, &reply.body),
        "{method} {target}: the block's reply (left) and the direct path's (right) differ"
    );
    let block_journal: Vec<MutationRecord> = serde_json::from_value(
        serde_json::to_value(&block.mutations).unwrap(),
    )
    .unwrap();
    assert_eq!(block_journal, store.journal(), "{method} {target}: journals differ");
    let reads = |sets: Vec<(String, bool, Vec<String>)>| {
        let mut sets = sets;
        sets.sort();
        sets
    };
    assert_eq!(
        reads(block.reads.iter().map(|r| (r.collection.clone(), r.scanned, r.ids.clone())).collect()),
        reads(store.reads().into_iter().map(|r| (r.collection, r.scanned, r.ids)).collect()),
        "{method} {target}: read sets differ"
    );
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

/// The two paths over a corpus of every list vocabulary and the edges of
/// ids, types and bodies: `send` fails the case at the first request whose
/// answers, journals or read sets differ.
#[test]
fn the_block_and_the_direct_path_agree_on_every_vocabulary_and_edge() {
    let mut t = Tenant::default();
    let people = [
        json!({"name": "Alice", "age": 31, "tags": ["admin", "ops"], "active": true, "city": "Graz"}),
        json!({"name": "hartmann", "age": 45, "tags": [], "active": false}),
        json!({"name": "Bob Hart", "age": 22.5, "score": null}),
        json!({"id": "x7", "name": "Zed", "age": "30", "nested": {"k": [1, {"d": "deep"}]}}),
        json!({"name": "Ünïcode ß", "age": 0, "city": "Wien"}),
        json!({"id": 40, "name": "forty", "age": 40, "active": true}),
        json!({"name": "no age"}),
    ];
    for person in people {
        assert_eq!(t.send("POST", "/members/", Some(person)).status, 201);
    }
    for (i, post) in [json!({"title": "a", "memberId": 1}), json!({"title": "b", "memberId": "1"}), json!({"title": "c", "memberId": 40})].into_iter().enumerate() {
        assert_eq!(t.send("POST", "/posts", Some(post)).status, 201, "post {i}");
    }
    t.send("POST", "/members/1/comments", Some(json!({"text": "hi"})));
    t.send("POST", "/members/40/comments", Some(json!({"text": "yo", "likes": 3})));
    for target in [
        "/members",
        "/members?_sort=age",
        "/members?_sort=age&_order=desc",
        "/members?_sort=city,age&_order=asc,desc",
        "/members?_start=1&_end=4",
        "/members?_limit=2&_page=2",
        "/members?_page=1&_per_page=3",
        "/members?age_gte=30",
        "/members?age_lte=31&age_gte=20",
        "/members?age_ne=31",
        "/members?name_like=^a",
        "/members?name_like=hart",
        "/members?q=graz",
        "/members?q=true",
        "/members?q=0",
        "/members?active=true",
        "/members?active=false",
        "/members?age=31&age=45",
        "/members?city=Graz",
        "/members?tags=admin",
        "/members?_embed=posts",
        "/members?_embed=comments&_sort=name",
        "/posts?_expand=member",
        "/members?sort=-age&limit=3&offset=1",
        "/members?age__gt=30&sort=name",
        "/members?name__icontains=HART",
        "/members?tags__contains=ops",
        "/members?age__in=22.5,40",
        "/members?sort=%5B%22age%22%2C%22DESC%22%5D&range=%5B0%2C2%5D",
        "/members?filter=%7B%22city%22%3A%22Graz%22%7D",
        "/members?filter=%7B%22id%22%3A%5B1%2C40%5D%7D",
        "/members/search?name=Zed",
        "/members/search?age__gte=40",
        "/members/search?name__contains=a&limit=1",
        "/members/1/comments",
        "/members/40/comments?_sort=likes",
        "/members/999/comments",
    ] {
        let answer = t.send("GET", target, None);
        assert!(answer.status < 500, "GET {target}: {answer:?}");
    }
    for (method, target, body) in [
        ("GET", "/members/x7", None),
        ("GET", "/members/7", None),
        ("GET", "/members/nobody", None),
        ("PATCH", "/members/x7", Some(json!({"age": 31, "id": "changed"}))),
        ("PUT", "/members/2", Some(json!({"name": "Hartmann", "tags": ["x"]}))),
        ("PUT", "/members/2", Some(json!("text"))),
        ("PATCH", "/members/404", Some(json!({"a": 1}))),
        ("POST", "/members", Some(json!({"id": 40}))),
        ("POST", "/members", Some(json!({"id": "search"}))),
        ("POST", "/members", Some(json!({"id": 9007199254740992_i64}))),
        ("POST", "/members", Some(json!({"id": "é x/y", "n": 1}))),
        ("POST", "/members", Some(json!({"id": 12.5}))),
        ("POST", "/members", Some(json!([1, 2]))),
        ("POST", "/members/1/comments", Some(json!({"text": "again"}))),
        ("POST", "/members/999/comments", Some(json!({"text": "orphan"}))),
        ("DELETE", "/members/3", None),
        ("DELETE", "/members/3", None),
    ] {
        t.send(method, target, body);
    }
    let (path, query) = ("/members/x7", "");
    let headers = vec![("prefer".to_string(), "return=representation".to_string())];
    let raw = RawRequest { method: "DELETE", path, query, headers: &headers, body: b"", client_ip: "127.0.0.1" };
    let ctx = RequestContext::build(&raw, "tenant-a").unwrap();
    let plan = rules::plan(&ctx).unwrap();
    let mut store = anypath_collections::Store::new(vec![anypath_collections::Loaded {
        name: "members".into(),
        documents: anypath_collections::Documents::Parsed(vec![json!({"id": "x7", "n": 1})]),
        complete: false,
        absent_ids: vec![],
        reserved_id: None,
    }]);
    let reply = direct::execute(&plan, &ctx, &mut store).unwrap();
    assert_eq!((reply.status, reply.body), (200, Some(json!({"id": "x7", "n": 1}))), "asked for, a DELETE answers the record");
}
