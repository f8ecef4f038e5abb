//! Functional behaviour of `store`, `ctx`, REPLY and the mutation journal.

use crate::common;

use common::{body, error, journal, run, run_with, success};
use serde_json::json;

fn people() -> serde_json::Value {
    json!([
        {"id": 1, "name": "Alice", "age": 31, "tags": ["admin", "ops"]},
        {"id": 2, "name": "hartmann", "age": 45, "tags": []},
        {"id": 3, "name": "Bob Hart", "age": 22},
        {"id": "x7", "name": "Zed", "age": 30}
    ])
}

fn query(code: &str) -> serde_json::Value {
    body(&run_with(code, json!({}), people()))
}

#[test]
fn seed_create_example_assigns_id_and_sets_location() {
    let code = r#"
obj = dict(ctx.get("body_json") or {})
new_id = store.insert(obj)
REPLY = {"status": 201, "headers": {"Location": f"/members/{new_id}"}, "body": obj}
"#;
    let report = run_with(code, json!({"body_json": {"name": "Alice"}}), json!([]));
    let ok = success(&report);
    assert_eq!(ok.reply.status, 201);
    assert_eq!(ok.reply.headers, vec![("Location".to_string(), "/members/1".to_string())]);
    assert_eq!(body(&report), json!({"name": "Alice", "id": 1}));
    assert_eq!(journal(&report), json!([{"collection": "members", "op": "insert", "id": 1, "document": {"name": "Alice", "id": 1}}]));
}

#[test]
fn insert_continues_from_the_highest_integer_id() {
    let report = run_with("REPLY = {'status': 201, 'body': store.insert({'n': 1})}", json!({}), json!([{"id": 7}, {"id": 3}, {"id": "abc"}]));
    assert_eq!(body(&report), json!(8));
}

#[test]
fn client_supplied_ids_are_kept_int_or_string() {
    let code = "a = store.insert({'id': 'alice'})\nb = store.insert({'id': 40})\nc = store.insert({})\nREPLY = {'status': 200, 'body': [a, b, c]}";
    assert_eq!(body(&run(code)), json!(["alice", 40, 41]));
}

#[test]
fn duplicate_id_on_insert_raises_value_error() {
    let report = run_with("store.insert({'id': 1})\nREPLY = {'status': 200}", json!({}), json!([{"id": 1}]));
    match error(&report) {
        anypath_sandbox::ExecError::Exception { type_name, message, .. } => {
            assert_eq!(type_name, "ValueError");
            assert!(message.contains("already exists"), "{message}");
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn auto_id_skips_a_numeric_string_id_already_taken() {
    let report = run_with("REPLY = {'status': 200, 'body': store.insert({})}", json!({}), json!([{"id": 1}, {"id": "2"}]));
    assert_eq!(body(&report), json!(3));
}

#[test]
fn get_finds_integer_ids_from_path_strings_and_returns_none_when_absent() {
    assert_eq!(query("REPLY = {'status': 200, 'body': [store.get('1')['name'], store.get(2)['name'], store.get('x7')['name'], store.get('99')]}"),
        json!(["Alice", "hartmann", "Zed", null]));
}

#[test]
fn get_all_returns_every_document_in_order() {
    let ids = query("REPLY = {'status': 200, 'body': [d['id'] for d in store.get_all()]}");
    assert_eq!(ids, json!([1, 2, 3, "x7"]));
}

#[test]
fn replace_swaps_the_document_but_keeps_its_id() {
    let report = run_with(
        "r = store.replace('2', {'name': 'H', 'id': 99})\nm = store.replace('404', {})\nREPLY = {'status': 200, 'body': [r, m, store.get(2)]}",
        json!({}), people());
    assert_eq!(body(&report), json!([{"name": "H", "id": 2}, null, {"name": "H", "id": 2}]));
    assert_eq!(journal(&report), json!([{"collection": "members", "op": "replace", "id": 2, "document": {"name": "H", "id": 2}}]));
}

#[test]
fn patch_merges_fields_and_never_changes_the_id() {
    let report = run_with(
        "p = store.patch(1, {'age': 32, 'id': 5, 'city': 'Graz'})\nREPLY = {'status': 200, 'body': [p, store.patch(77, {'a': 1})]}",
        json!({}), people());
    assert_eq!(body(&report), json!([{"id": 1, "name": "Alice", "age": 32, "tags": ["admin", "ops"], "city": "Graz"}, null]));
    assert_eq!(journal(&report)[0]["op"], "patch");
}

#[test]
fn delete_reports_whether_the_document_existed() {
    let report = run_with("REPLY = {'status': 200, 'body': [store.delete('3'), store.delete('3'), store.get(3)]}", json!({}), people());
    assert_eq!(body(&report), json!([true, false, null]));
    assert_eq!(journal(&report), json!([{"collection": "members", "op": "delete", "id": 3, "document": null}]));
}

#[test]
fn reads_see_the_blocks_own_earlier_writes() {
    let code = "i = store.insert({'name': 'new'})\nstore.patch(i, {'age': 1})\nstore.delete(1)\nREPLY = {'status': 200, 'body': [d['id'] for d in store.get_all()] + [store.get(i)]}";
    assert_eq!(body(&run_with(code, json!({}), people())), json!([2, 3, "x7", 4, {"name": "new", "id": 4, "age": 1}]));
}

#[test]
fn documents_returned_by_reads_are_copies() {
    let code = "d = store.get(1)\nd['name'] = 'mutated'\nREPLY = {'status': 200, 'body': store.get(1)['name']}";
    let report = run_with(code, json!({}), people());
    assert_eq!(body(&report), json!("Alice"));
    assert_eq!(journal(&report), json!([]), "changing a copy journals nothing");
}

fn names(filter: &str) -> serde_json::Value {
    query(&format!("REPLY = {{'status': 200, 'body': [d['name'] for d in store.search({filter})]}}"))
}

#[test]
fn search_exact_match_coerces_query_strings_to_the_field_type() {
    assert_eq!(names("{'name': 'hartmann'}"), json!(["hartmann"]));
    assert_eq!(names("{'age': '45'}"), json!(["hartmann"]));
    assert_eq!(names("{'age': 45, 'name': 'Alice'}"), json!([]));
}

#[test]
fn search_contains_and_icontains() {
    assert_eq!(names("{'name__contains': 'Hart'}"), json!(["Bob Hart"]));
    assert_eq!(names("{'name__icontains': 'hart'}"), json!(["hartmann", "Bob Hart"]));
    assert_eq!(names("{'tags__contains': 'ops'}"), json!(["Alice"]));
}

#[test]
fn search_ordering_operators() {
    assert_eq!(names("{'age__gt': '30'}"), json!(["Alice", "hartmann"]));
    assert_eq!(names("{'age__gte': 30}"), json!(["Alice", "hartmann", "Zed"]));
    assert_eq!(names("{'age__lt': '30'}"), json!(["Bob Hart"]));
    assert_eq!(names("{'age__lte': 30}"), json!(["Bob Hart", "Zed"]));
}

#[test]
fn search_ne_and_in() {
    assert_eq!(names("{'age__ne': '45'}"), json!(["Alice", "Bob Hart", "Zed"]));
    assert_eq!(names("{'name__in': 'Zed,Alice'}"), json!(["Alice", "Zed"]));
    assert_eq!(names("{'age__in': [22, 45]}"), json!(["hartmann", "Bob Hart"]));
}

#[test]
fn search_on_a_missing_field_matches_only_ne() {
    assert_eq!(names("{'city': 'Graz'}"), json!([]));
    assert_eq!(names("{'city__ne': 'Graz'}"), json!(["Alice", "hartmann", "Bob Hart", "Zed"]));
}

#[test]
fn list_pages_and_sorts_ascending_and_descending() {
    let page = query("REPLY = {'status': 200, 'body': store.list(limit=2, offset=1, sort='age')}");
    assert_eq!(page["page"], json!({"limit": 2, "offset": 1, "total": 4}));
    let names: Vec<_> = page["items"].as_array().unwrap().iter().map(|d| d["name"].clone()).collect();
    assert_eq!(names, vec![json!("Zed"), json!("Alice")]);
    let desc = query("REPLY = {'status': 200, 'body': [d['id'] for d in store.list(sort='-age')['items']]}");
    assert_eq!(desc, json!([2, 1, "x7", 3]));
}

#[test]
fn list_without_arguments_returns_everything_and_rejects_negative_paging() {
    assert_eq!(query("REPLY = {'status': 200, 'body': store.list()['page']}"), json!({"limit": null, "offset": 0, "total": 4}));
    let report = run_with("store.list(limit=-1)\nREPLY = {'status': 200}", json!({}), people());
    assert!(matches!(error(&report), anypath_sandbox::ExecError::Exception { type_name, .. } if type_name == "ValueError"));
}

/// A block may hand the query's values over as they are: lists of strings.
#[test]
fn paging_and_search_accept_the_query_form() {
    let page = query("REPLY = {'status': 200, 'body': store.list(limit=['2'], offset=['1'], sort=['age'])['page']}");
    assert_eq!(page, json!({"limit": 2, "offset": 1, "total": 4}));
    let ctx = json!({"query": {"limit": ["1"], "offset": [" 2 "], "sort": ["-age"]}});
    let report = run_with("q = ctx['query']\nREPLY = {'status': 200, 'body': store.list(limit=q.get('limit'), offset=q.get('offset'), sort=q.get('sort'))}", ctx, people());
    assert_eq!(body(&report)["items"][0]["name"], "Zed");
    assert_eq!(query("REPLY = {'status': 200, 'body': store.list(limit=[], offset=None)['page']}"), json!({"limit": null, "offset": 0, "total": 4}));
    assert_eq!(names("{'name': ['hartmann'], 'age__gt': ['30']}"), json!(["hartmann"]));
    for (code, needle) in [
        ("store.list(limit=['1', '2'])", "expected one value"),
        ("store.list(limit='ten')", "limit must be an integer"),
        ("store.list(limit=2.5)", "limit must be an integer"),
        ("store.list(offset=True)", "offset must be an integer"),
        ("store.list(sort=[3])", "sort must be a field name"),
    ] {
        match error(&run_with(&format!("{code}\nREPLY = {{'status': 200}}"), json!({}), people())) {
            anypath_sandbox::ExecError::Exception { message, .. } => assert!(message.contains(needle), "{code}: {message}"),
            other => panic!("{code}: unexpected {other:?}"),
        }
    }
}

#[test]
fn first_write_creates_a_collection_that_did_not_exist() {
    let report = run("REPLY = {'status': 200, 'body': [store.get_all(), store.insert({'a': 1}), store.get_all()]}");
    assert_eq!(body(&report), json!([[], 1, [{"a": 1, "id": 1}]]));
}

#[test]
fn a_second_loaded_collection_is_reachable_by_name_and_journaled_under_it() {
    let request = anypath_sandbox::ExecRequest::new(
        "orders = store.collection('orders')\noid = orders.insert({'member': 1})\nREPLY = {'status': 200, 'body': [store.names(), len(orders.get_all()), oid]}",
    )
    .with_collection("members", 1, &people())
    .and_then(|r| r.with_collection("orders", 0, &json!([])))
    .unwrap();
    let report = common::exec(request);
    assert_eq!(body(&report), json!([["members", "orders"], 1, 1]));
    assert_eq!(journal(&report)[0]["collection"], "orders");
}

#[test]
fn a_collection_that_was_not_loaded_is_a_clear_error() {
    let report = run("store.collection('secrets')\nREPLY = {'status': 200}");
    match error(&report) {
        anypath_sandbox::ExecError::Exception { type_name, message, traceback } => {
            assert_eq!(type_name, "KeyError");
            assert!(message.contains("was not loaded"), "{message}");
            assert!(traceback.contains("line 1"), "{traceback}");
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn ctx_is_the_request_context() {
    let ctx = json!({"method": "GET", "path": "/members/search", "query": {"name": ["hartmann"]}});
    let report = run_with("REPLY = {'status': 200, 'body': [ctx['method'], ctx['query']['name'][0]]}", ctx, json!([]));
    assert_eq!(body(&report), json!(["GET", "hartmann"]));
}

#[test]
fn reply_without_body_or_headers_maps_to_status_only() {
    let report = run("REPLY = {'status': 204}");
    let ok = success(&report);
    assert_eq!((ok.reply.status, ok.reply.headers.len(), ok.reply.body.is_none()), (204, 0, true));
}

#[test]
fn allowed_modules_work_inside_a_block() {
    let code = r#"
import json, re, math, statistics, itertools, collections, functools, datetime, uuid, typing
from math import sqrt
counts = collections.Counter("aab")
REPLY = {"status": 200, "body": {
    "json": json.loads('{"a": 1}')["a"], "re": bool(re.match(r"a+", "aa")), "sqrt": sqrt(16),
    "mean": statistics.mean([1, 2, 3]), "pairs": len(list(itertools.combinations([1, 2, 3], 2))),
    "counter": counts["a"], "reduce": functools.reduce(max, [1, 6, 3]),
    "year": datetime.date(2024, 5, 1).year, "uuid": len(str(uuid.uuid4())),
}}
"#;
    assert_eq!(body(&run(code)), json!({"json": 1, "re": true, "sqrt": 4.0, "mean": 2, "pairs": 3, "counter": 2, "reduce": 6, "year": 2024, "uuid": 36}));
}

#[test]
fn print_goes_to_captured_stdout() {
    let report = run("print('hello', 42)\nREPLY = {'status': 200}");
    let ok = success(&report);
    assert_eq!(ok.output.stdout, "hello 42\n");
    assert!(!ok.output.stdout_truncated);
}

#[test]
fn exception_reports_type_message_and_block_traceback() {
    let report = run("x = 1\ny = x / 0\nREPLY = {'status': 200}");
    match error(&report) {
        anypath_sandbox::ExecError::Exception { type_name, message, traceback } => {
            assert_eq!(type_name, "ZeroDivisionError");
            assert_eq!(message, "division by zero");
            assert!(traceback.contains("line 2") && traceback.contains("y = x / 0"), "{traceback}");
            assert!(!traceback.contains("app.py"), "runner frames leak into {traceback}");
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn invalid_replies_are_typed() {
    for (code, needle) in [
        ("x = 1", "did not assign REPLY"),
        ("REPLY = [200]", "must be a dict"),
        ("REPLY = {'status': 99}", "200 to 599"),
        ("REPLY = {'status': 101}", "200 to 599"),
        ("REPLY = {'status': 200, 'body': {1, 2}}", "not JSON-serialisable"),
        ("REPLY = {'status': 200, 'body': float('nan')}", "not JSON-serialisable"),
        ("REPLY = {'status': 200, 'headers': {'X-A': 'a\\r\\nSet-Cookie: x'}}", "visible ASCII"),
        ("REPLY = {'status': 200, 'headers': {'Location': '/t/caf\u{e9}'}}", "quote_segment"),
        ("REPLY = {'status': 200, 'headers': {'Bad Name': 'x'}}", "not a valid token"),
        ("REPLY = {'status': 200, 'extra': 1}", "unknown keys"),
    ] {
        match error(&run(code)) {
            anypath_sandbox::ExecError::InvalidReply { message } => assert!(message.contains(needle), "{code}: {message}"),
            other => panic!("{code}: unexpected {other:?}"),
        }
    }
}

#[test]
fn a_failed_block_returns_no_journal() {
    let report = run("store.insert({'a': 1})\nraise ValueError('boom')");
    assert_eq!(error(&report).kind(), "exception");
}

#[test]
fn metrics_report_fuel_duration_and_memory() {
    let report = run("REPLY = {'status': 200}");
    assert!(report.metrics.fuel_consumed > 0);
    assert!(report.metrics.duration_us > 0);
    assert!(report.metrics.peak_memory_bytes > 1 << 20);
}
