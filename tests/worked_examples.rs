//! The planner prompt's worked examples run in the real sandbox and do what
//! they show: a small model copies them, so each must be correct as written.

use crate::common;

use anypath_rest::examples::{EXAMPLES, Example};
use anypath_sandbox::ExecRequest;
use serde_json::{Value, json};

fn books() -> Value {
    json!([
        {"id": 7, "title": "Dune", "year": 1965, "author": "Herbert"},
        {"id": 8, "title": "Emma", "year": 1815, "author": "Austen"}
    ])
}

/// Runs the example's block on its own request; returns (status, headers, body, journal).
fn run(action: &str) -> (u16, Value, Value, Value) {
    let example: &Example = EXAMPLES.iter().find(|e| e.action == action).expect("an example per action");
    let ctx = serde_json::to_value(example.context()).expect("ctx serialises");
    let request = ExecRequest::new(example.source())
        .with_ctx(&ctx)
        .and_then(|r| r.with_collection("books", 1, &books()))
        .expect("serialisable request");
    let report = common::exec(request);
    let success = common::success(&report);
    let headers = serde_json::to_value(&success.reply.headers).expect("headers serialise");
    let body = success.reply.body.as_ref().map(|b| serde_json::from_str(b.get()).expect("JSON body")).unwrap_or(Value::Null);
    (success.reply.status, headers, body, common::journal(&report))
}

#[test]
fn create_inserts_and_answers_201_with_location() {
    let (status, headers, body, journal) = run("create");
    assert_eq!(status, 201);
    assert_eq!(body, json!({"id": 9, "title": "Dune", "year": 1965}));
    assert!(headers.to_string().contains("/books/9"), "{headers}");
    assert_eq!((journal[0]["op"].as_str(), journal[0]["id"].as_i64()), (Some("insert"), Some(9)));
}

#[test]
fn get_list_and_search_read_without_writing() {
    let (status, _, body, journal) = run("get");
    assert_eq!((status, body["title"].as_str()), (200, Some("Dune")));
    assert_eq!(journal, json!([]));
    let (status, _, body, _) = run("list");
    assert_eq!(status, 200);
    // `_sort=year&_order=desc&_limit=10`: the newest first, ten at most.
    assert_eq!(body["page"], json!({"limit": 10, "offset": 0, "total": 2}));
    let years: Vec<i64> = body["items"].as_array().into_iter().flatten().filter_map(|b| b["year"].as_i64()).collect();
    assert_eq!(years, vec![1965, 1815]);
    let (status, _, body, _) = run("search");
    assert_eq!((status, body), (200, json!([books()[0]])));
}

#[test]
fn replace_patch_delete_and_the_custom_action_change_one_document() {
    let (status, _, body, _) = run("replace");
    assert_eq!((status, body), (200, json!({"id": 7, "title": "Dune Messiah", "year": 1969})));
    let (status, _, body, _) = run("patch");
    assert_eq!((status, body["year"].as_i64(), body["title"].as_str()), (200, Some(1966), Some("Dune")));
    let (status, _, _, journal) = run("delete");
    assert_eq!((status, journal[0]["op"].as_str()), (204, Some("delete")));
    let (status, _, body, _) = run("custom");
    assert_eq!((status, &body["lent_to"], &body["available"]), (200, &json!("Ann"), &json!(false)));
}
