//! The `store` import end to end: the host's verdicts hold whatever the
//! block does with the exceptions its calls raise, a session has no store,
//! and an instance reaches only the store of the request it runs.
//!
//! Needs the runner component: `cargo xtask test` sets `ANYPATH_RUNNER`.

use serde_json::json;

use crate::request::PolicyGate;
use crate::wasm_layer_tests::{body, error, exec_ungated, runtime, runner_path, sandbox};
use crate::{BlockRunner, CellRequest, ExecError, ExecRequest, LimitOverrides, Report, RunnerConfig};

/// Calls the import directly, around the wrapper: what each call answered,
/// as `kind` or `ok`.
const DIRECT_CALLS: &str = "from componentize_py_types import Err\n\
    from wit_world.imports import store as host\n\
    def answer(collection, op, args):\n    \
        try:\n        \
            host.call(collection, op, args)\n        \
            return 'ok'\n    \
        except Err as failed:\n        \
            return failed.value.kind\n";

fn members(code: &str, docs: serde_json::Value) -> ExecRequest {
    ExecRequest::new(code).with_collection("members", 1, &docs).expect("request")
}

fn partial(code: &str) -> ExecRequest {
    ExecRequest::new(code).with_partial_collection("members", &json!([{"id": 7}]), vec![], None).expect("request")
}

#[test]
fn a_block_that_catches_needs_data_still_needs_data() {
    let wrapped = "try:\n    store.get(8)\nexcept BaseException:\n    pass\nREPLY = {'status': 200, 'body': store.get(7)}";
    let report = exec_ungated(partial(wrapped));
    assert!(matches!(error(&report), ExecError::NeedsData { .. }), "{report:?}");
    // Around the wrapper too: the verdict is the host's, not the runner's.
    let direct = format!("{DIRECT_CALLS}REPLY = {{'status': 200, 'body': answer(None, 'get_all', '[]')}}");
    let report = exec_ungated(partial(&direct));
    assert!(matches!(error(&report), ExecError::NeedsData { .. }), "{report:?}");
}

#[test]
fn a_journal_beyond_the_result_cap_is_refused() {
    let limits = LimitOverrides { result_bytes: Some(2_000), ..Default::default() };
    // Each insert is within the cap; together they are not. Caught or not,
    // the run is refused, and no call after the cap reaches the store.
    let code = "kinds = []\nfor i in range(5):\n    try:\n        store.insert({'text': 'x' * 600})\n    except BaseException as e:\n        kinds.append(type(e).__name__)\nREPLY = {'status': 200, 'body': kinds}";
    let report = exec_ungated(members(code, json!([])).with_limits(limits));
    assert!(matches!(error(&report), ExecError::OutputLimit { .. }), "{report:?}");
    let report = runtime().block_on(sandbox().execute(members("store.insert({'text': 'x' * 3000})\nREPLY = {'status': 201}", json!([])).with_limits(limits)));
    assert!(matches!(error(&report), ExecError::OutputLimit { .. }), "{report:?}");
    // The reply and the journal count together.
    let code = "store.insert({'text': 'x' * 1200})\nREPLY = {'status': 200, 'body': 'y' * 1200}";
    let report = runtime().block_on(sandbox().execute(members(code, json!([])).with_limits(limits)));
    assert!(matches!(error(&report), ExecError::OutputLimit { .. }), "{report:?}");
    let code = "store.insert({'text': 'x' * 600})\nREPLY = {'status': 200, 'body': 'y' * 600}";
    let report = runtime().block_on(sandbox().execute(members(code, json!([])).with_limits(limits)));
    assert_eq!(report.outcome.as_ref().map(|s| s.mutations.len()).ok(), Some(1), "{report:?}");
}

#[test]
fn a_block_looping_over_store_calls_is_stopped_by_its_limits() {
    // Each call does host work and almost no guest work; the host's time is
    // charged to the fuel (`host_store::tests`), and no call starts past the deadline.
    let docs: Vec<serde_json::Value> = (0..5_000).map(|i| json!({"id": i, "n": i % 7})).collect();
    let request = members("while True:\n    store.list(limit=0, filters={'n': 3})", json!(docs));
    let report = runtime().block_on(sandbox().execute(request));
    assert!(matches!(error(&report), ExecError::FuelExhausted { .. } | ExecError::Timeout { .. }), "{report:?}");
}

#[test]
fn a_session_cell_has_no_store() {
    let code = "import resource_store\n\
        from wit_world.imports import store as host\n\
        resource_store.Store([], host.call).get_all()";
    let runner = sandbox();
    let report = runtime().block_on(async {
        let sessions = runner.session_runtime().await.expect("python sessions start");
        let mut live = sessions.live_instance(None, &LimitOverrides::default());
        live.run(CellRequest { code: code.into(), ..CellRequest::default() }).await
    });
    match &report.error {
        Some(ExecError::Exception { type_name, message, .. }) => {
            assert_eq!((type_name.as_str(), message.as_str()), ("LookupError", "no collection was loaded for this request"));
        }
        other => panic!("expected LookupError, got {other:?}: {report:#?}"),
    }
}

/// Runs `request` on `runner` with the gate off, retrying until it ran on a
/// pre-warmed instance.
fn on_a_warm_instance(runner: &BlockRunner, request: impl Fn() -> ExecRequest) -> Report {
    for _ in 0..200 {
        let report = runtime().block_on(runner.execute_gated(request(), PolicyGate::Disabled));
        if report.metrics.warm {
            return report;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("no run found a pre-warmed instance");
}

#[test]
fn an_instance_reaches_only_its_own_requests_store() {
    let runner = runtime()
        .block_on(BlockRunner::start(RunnerConfig { warm_instances: 1, instance_slots: 4, ..RunnerConfig::new(runner_path()) }))
        .expect("the runner starts");
    let secret = || members("store.insert({'secret': 's3cr3t'})\nREPLY = {'status': 200, 'body': store.get_all()}", json!([{"id": 1, "secret": "kept"}]));
    let first = on_a_warm_instance(&runner, secret);
    assert_eq!(body(&first), json!([{"id": 1, "secret": "kept"}, {"id": 2, "secret": "s3cr3t"}]));
    // Another request with no collections, then with another one, on
    // instances from the same pool: neither the last request's store nor
    // the warm-up's is reachable, through the wrapper or around it.
    let probe = format!(
        "{DIRECT_CALLS}REPLY = {{'status': 200, 'body': [answer(None, 'get_all', '[]'), answer('members', 'get_all', '[]'), answer('warm', 'get_all', '[]')]}}"
    );
    let report = on_a_warm_instance(&runner, || ExecRequest::new(probe.as_str()));
    assert_eq!(body(&report), json!(["LookupError", "KeyError", "KeyError"]));
    let report = on_a_warm_instance(&runner, || ExecRequest::new(probe.as_str()).with_collection("other", 1, &json!([])).expect("request"));
    assert_eq!(body(&report), json!(["ok", "KeyError", "KeyError"]));
    let report = on_a_warm_instance(&runner, || ExecRequest::new("REPLY = {'status': 200, 'body': store.get_all()}"));
    assert!(matches!(error(&report), ExecError::Exception { type_name, .. } if type_name == "LookupError"), "{report:?}");
}
