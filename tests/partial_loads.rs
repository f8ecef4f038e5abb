//! Partial loads: a block sees only the documents its plan named, reports
//! what it read, and can never answer from a view that lacks what it asked
//! for (it fails with `needs_data`, and the caller re-runs it on whole data).

use crate::common;

use anypath_sandbox::{ExecError, ExecRequest, ReadSet, Report};
use common::{body, error, exec, journal, success};
use serde_json::{Value, json};

/// `members` holding `docs` as a partial load, plus `absent` ids and a reserved id.
fn partial(code: &str, docs: Value, absent: &[&str], reserved: Option<i64>) -> Report {
    let absent = absent.iter().map(|s| s.to_string()).collect();
    let request = ExecRequest::new(code).with_partial_collection("members", &docs, absent, reserved).expect("request");
    exec(request)
}

fn needs_data(report: &Report) -> bool {
    matches!(error(report), ExecError::NeedsData { .. })
}

#[test]
fn loaded_and_known_absent_ids_answer_from_a_partial_load() {
    let code = "REPLY = {'status': 200, 'body': [store.get(7), store.get('9')]}";
    let report = partial(code, json!([{"id": 7, "n": 1}]), &["9"], None);
    assert_eq!(body(&report), json!([{"id": 7, "n": 1}, null]));
    let reads = &success(&report).reads;
    assert_eq!(reads, &vec![ReadSet { collection: "members".into(), scanned: false, ids: vec!["7".into(), "9".into()] }]);
}

#[test]
fn an_id_that_was_not_loaded_needs_data() {
    let report = partial("REPLY = {'status': 200, 'body': store.get(8)}", json!([{"id": 7}]), &[], None);
    assert!(needs_data(&report), "{report:?}");
}

#[test]
fn scanning_a_partial_load_needs_data() {
    for scan in ["store.list()", "store.search({'n': 1})", "store.get_all()"] {
        let report = partial(&format!("REPLY = {{'status': 200, 'body': {scan}}}"), json!([{"id": 7}]), &[], None);
        assert!(needs_data(&report), "{scan}: {report:?}");
    }
}

/// Boundary: a block cannot turn a partial view into an answer by catching
/// the signal. The gate refuses `except:` and `BaseException`; the runner's
/// own check, with the gate off, is proven in
/// `crates/sandbox/src/wasm_layer_tests.rs`.
#[test]
fn catching_needs_data_does_not_hide_it() {
    let block = |handler: &str| {
        format!("try:\n    rows = store.list()['items']\n{handler}\n    rows = []\nREPLY = {{'status': 200, 'body': rows}}")
    };
    let docs = json!([{"id": 7}]);
    for handler in ["except Exception:", "except Exception as e:"] {
        let report = partial(&block(handler), docs.clone(), &[], None);
        assert!(needs_data(&report), "{handler}: {report:?}");
    }
}

#[test]
fn an_insert_without_id_takes_the_reserved_id_once() {
    let code = "a = store.insert({'n': 1})\nREPLY = {'status': 201, 'body': a}";
    let report = partial(code, json!([]), &[], Some(41));
    assert_eq!(body(&report), json!(41));
    assert_eq!(journal(&report)[0]["id"], json!(41));
    assert_eq!(success(&report).reads[0].ids, vec!["41".to_string()], "the reserved id must still be free at commit");
    let twice = "store.insert({'n': 1})\nstore.insert({'n': 2})\nREPLY = {'status': 201}";
    assert!(needs_data(&partial(twice, json!([]), &[], Some(41))), "a second id would need the highest");
}

#[test]
fn a_whole_load_reports_a_scan_only_when_the_block_scanned() {
    let docs = json!([{"id": 1, "a": 1}, {"id": 2, "a": 2}]);
    let request = |code: &str| ExecRequest::new(code).with_collection("members", 4, &docs).expect("request");
    let point = exec(request("store.patch(2, {'a': 3})\nREPLY = {'status': 200}"));
    assert_eq!(success(&point).reads[0], ReadSet { collection: "members".into(), scanned: false, ids: vec!["2".into()] });
    let scan = exec(request("REPLY = {'status': 200, 'body': store.list()['page']['total']}"));
    assert!(success(&scan).reads[0].scanned);
    let next_id = exec(request("REPLY = {'status': 201, 'body': store.insert({'a': 9})}"));
    assert_eq!(body(&next_id), json!(3));
    assert!(success(&next_id).reads[0].scanned, "an id taken from the highest depends on every document");
}
