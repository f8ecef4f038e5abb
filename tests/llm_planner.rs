//! The LLM planner through real HTTP: `anypath up` with its planner pointed
//! at a scripted fake provider (both APIs). Plans in prose and fences, plans
//! that break the schema, blocks the gate refuses, blocks that raise or never
//! end, the repair loop and its limit, custom actions over two collections,
//! the plan cache, and which component may reach the LLM at all.

use crate::common;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::app::{App, assert_envelope, json_of, repo, temp_kv};
use common::fake_llm::{FakeLlm, Reply};
use reqwest::blocking::Response;
use serde_json::{Value, json};

fn start(fake: &FakeLlm, provider: &str, mode: &str, name: &str, extra: &[(&str, &str)]) -> App {
    let env = fake.env(provider, mode);
    let mut pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    pairs.extend_from_slice(extra);
    App::start_with(&temp_kv(name), "spin.toml", &pairs)
}

/// A plan as a model would write it.
fn plan(action: &str, resource: &str, also_loads: &[&str], code: &str) -> String {
    json!({
        "action": action,
        "resource": resource,
        "also_loads": also_loads,
        "id": null,
        "criteria": {},
        "payload": null,
        "response_hints": {},
        "code": {"language": "python", "block": format!("```python\n{code}\n```")},
    })
    .to_string()
}

fn header(response: &Response, name: &str) -> String {
    response.headers().get(name).and_then(|v| v.to_str().ok()).unwrap_or("").to_owned()
}

const CREATE: &str = "obj = dict(ctx['body_json'])\nnew_id = store.insert(obj)\nREPLY = {'status': 201, 'headers': {'Location': '/members/' + str(new_id)}, 'body': obj}";

#[test]
fn the_seed_examples_pass_in_llm_mode() {
    let fake = FakeLlm::start(vec![]).otherwise(Reply::Oracle);
    let app = start(&fake, "openai", "llm", "llm-seed", &[]);
    let created = app.send("POST", "/members/", Some(json!({"name": "Alice"})));
    assert_eq!(header(&created, "x-anypath-plan"), "llm");
    assert_eq!(header(&created, "location"), "/members/1");
    assert!(header(&created, "server-timing").contains("plan;dur="), "{}", header(&created, "server-timing"));
    assert_eq!(json_of(created).1, json!({"id": 1, "name": "Alice"}));
    assert_eq!(json_of(app.send("GET", "/members/1", None)).1, json!({"id": 1, "name": "Alice"}));
    app.send("POST", "/members/", Some(json!({"name": "hartmann"})));
    assert_eq!(json_of(app.send("GET", "/members/search?name=hartmann", None)).1, json!([{"id": 2, "name": "hartmann"}]));
    assert_eq!(app.send("DELETE", "/members/1", None).status(), 204);
    assert_eq!(app.send("GET", "/members/1", None).status(), 404);
    let page = json_of(app.send("GET", "/members/?limit=10&offset=0", None)).1;
    assert_eq!(page["page"]["total"], 1);
    // Every request went to the model or its cache; none to the rules.
    let health = json_of(app.send("GET", "/healthz", None)).1;
    assert_eq!(health["planner_mode"], "llm");
    assert!(fake.calls().iter().all(|c| c.api == "openai"));
    assert!(fake.calls().iter().all(|c| c.content_length), "every call declares its length instead of chunking");
    let prompt = fake.calls()[0].text();
    assert!(prompt.contains("You are a REST Planner") && prompt.contains("fake-model"), "{prompt}");
    assert!(!prompt.contains("test-key"), "the API key travels in a header, never in the prompt");
}

#[test]
fn prose_and_fences_around_the_json_are_accepted_over_the_anthropic_api() {
    let wrapped = format!("Here is the plan you asked for:\n```json\n{}\n```\nHope this helps!", plan("create", "members", &[], CREATE));
    let fake = FakeLlm::start(vec![Reply::Text(wrapped)]);
    let app = start(&fake, "anthropic", "llm", "llm-prose", &[]);
    let created = app.send("POST", "/members/", Some(json!({"name": "Ada"})));
    assert_eq!(created.status(), 201);
    assert_eq!(fake.calls().len(), 1);
    assert_eq!(fake.calls()[0].api, "anthropic");
    assert!(fake.calls()[0].body["system"].as_str().unwrap().contains("REST Planner"));
}

#[test]
fn invalid_plans_are_repaired_with_their_reason() {
    let wrong_schema = json!({"action": "create", "resource": 7, "code": {"language": "python", "block": CREATE}}).to_string();
    let two_blocks = plan("create", "members", &[], CREATE).replace("```\"", &format!("```\\n```python\\n{}\\n```\"", "x = 1"));
    let fake = FakeLlm::start(vec![
        Reply::Text(wrong_schema),
        Reply::Text(two_blocks),
        Reply::Text(plan("create", "members", &[], CREATE)),
    ]);
    let app = start(&fake, "openai", "llm", "llm-repair-plan", &[]);
    let created = app.send("POST", "/members/", Some(json!({"name": "Ada"})));
    assert_eq!(created.status(), 201, "{:?}", json_of(created));
    let calls = fake.calls();
    assert_eq!(calls.len(), 3, "one plan and two repairs");
    assert!(calls[1].text().contains("resource must be a string"), "the first repair names the defect");
    assert!(calls[2].text().contains("exactly one Python code block, found 2"), "the second repair names its defect");
    let line = app.process.wait_for_log(|l| l.contains("\"llm_calls\":3"));
    let line = line.unwrap_or_else(|| panic!("no log line with the LLM calls: {:?}", app.process.log_lines()));
    assert!(line.contains("\"repairs\":2") && line.contains("\"input_tokens\":"), "{line}");
}

#[test]
fn a_refused_import_and_a_raising_block_are_repaired_with_the_traceback() {
    let fake = FakeLlm::start(vec![
        Reply::Text(plan("create", "members", &[], &format!("import os\n{CREATE}"))),
        Reply::Text(plan("create", "members", &[], "obj = dict(ctx['body_json'])\nREPLY = {'status': 201, 'body': obj['missing']}")),
        Reply::Text(plan("create", "members", &[], CREATE)),
    ]);
    let app = start(&fake, "openai", "llm", "llm-repair-code", &[]);
    let created = app.send("POST", "/members/", Some(json!({"name": "Ada"})));
    assert_eq!(created.status(), 201);
    let calls = fake.calls();
    assert_eq!(calls.len(), 3);
    assert!(calls[1].text().contains("policy gate refused"), "{}", calls[1].text());
    assert!(calls[2].text().contains("KeyError") && calls[2].text().contains("Traceback"), "{}", calls[2].text());
}

/// Boundary: a failed attempt writes nothing. Each block inserts first and
/// then fails (raises, runs out of fuel, is refused); after two repairs the
/// answer is 502 with the reasons, and the collection is still empty.
#[test]
fn three_failed_attempts_answer_502_and_write_nothing() {
    let insert = "store.insert({'name': 'ghost'})\n";
    let fake = FakeLlm::start(vec![
        Reply::Text(plan("create", "members", &[], &format!("{insert}raise ValueError('nope')\nREPLY = {{}}"))),
        Reply::Text(plan("create", "members", &[], &format!("{insert}n = 0\nwhile True:\n    n += 1\nREPLY = {{}}"))),
        Reply::Text(plan("create", "members", &[], &format!("{insert}import socket\nREPLY = {{}}"))),
    ])
    .otherwise(Reply::Oracle);
    let app = start(&fake, "openai", "llm", "llm-give-up", &[("SPIN_VARIABLE_EXEC_FUEL", "300000000")]);
    let failed = app.send("POST", "/members/", Some(json!({"name": "Ada"})));
    assert_eq!(failed.status(), 502);
    let request_id = header(&failed, "x-request-id");
    let body = json_of(failed).1;
    assert_eq!(body["error"]["code"], "plan_failed");
    assert_eq!(body["error"]["request_id"], request_id.as_str());
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("ValueError") && message.contains("fuel_exhausted") && message.contains("policy"), "{message}");
    assert_eq!(fake.calls().len(), 3);
    let page = json_of(app.send("GET", "/members/?limit=100", None)).1;
    assert_eq!(page["page"]["total"], 0, "nothing was written: {page}");
}

#[test]
fn the_cache_serves_the_same_shape_without_the_model() {
    let fake = FakeLlm::start(vec![]).otherwise(Reply::Oracle);
    let app = start(&fake, "openai", "llm", "llm-cache", &[]);
    app.send("POST", "/members/", Some(json!({"name": "A"})));
    app.send("POST", "/members/", Some(json!({"name": "B"})));
    let calls = fake.calls().len();
    assert_eq!(calls, 1, "the second create has the first one's shape");
    let first = app.send("GET", "/members/1", None);
    assert_eq!(header(&first, "x-anypath-plan"), "llm");
    let second = app.send("GET", "/members/2", None);
    assert_eq!(header(&second, "x-anypath-plan"), "cache");
    assert_eq!(json_of(second).1["name"], "B", "the cached plan reads the id from ctx");
    assert_eq!(fake.calls().len(), calls + 1, "no call for the second GET");
    let other_shape = app.send("GET", "/members/search?name=A", None);
    assert_eq!(header(&other_shape, "x-anypath-plan"), "llm");
    assert_eq!(fake.calls().len(), calls + 2, "a different shape asks the model again");
    let other_tenant = app.send_as("GET", "/members/1", None, &[("x-session-id", "someone-else")]);
    assert_eq!(header(&other_tenant, "x-anypath-plan"), "llm", "tenants never share cached plans");
}

#[test]
fn a_cached_plan_that_fails_is_evicted_and_replanned() {
    let average = "docs = store.get_all()\nREPLY = {'status': 200, 'body': {'average': sum(d['total'] for d in docs) / len(docs)}}";
    let guarded = "docs = store.get_all()\nREPLY = {'status': 200, 'body': {'average': (sum(d['total'] for d in docs) / len(docs)) if docs else 0}}";
    let fake = FakeLlm::start(vec![
        Reply::Oracle,
        Reply::Text(plan("custom", "orders", &[], average)),
        Reply::Oracle,
        Reply::Text(plan("custom", "orders", &[], guarded)),
    ]);
    let app = start(&fake, "openai", "llm", "llm-evict", &[]);
    app.send("POST", "/orders/", Some(json!({"total": 10})));
    let stats = app.send("GET", "/orders/stats", None);
    assert_eq!((header(&stats, "x-anypath-plan"), json_of(stats).1), ("llm".into(), json!({"average": 10.0})));
    assert_eq!(app.send("DELETE", "/orders/1", None).status(), 204);
    let after = app.send("GET", "/orders/stats", None);
    assert_eq!(header(&after, "x-anypath-plan"), "llm", "the cached plan divided by zero and was replaced");
    assert_eq!(json_of(after).1, json!({"average": 0}));
    assert_eq!(fake.calls().len(), 4);
    assert_eq!(header(&app.send("GET", "/orders/stats", None), "x-anypath-plan"), "cache");
}

#[test]
fn custom_actions_can_change_state_and_read_two_collections() {
    let promote = "mid = ctx['segments'][1]\nupdated = store.patch(mid, {'role': 'admin'})\nREPLY = {'status': 200, 'body': updated} if updated is not None else {'status': 404, 'body': {'error': {'code': 'not_found', 'message': 'no member'}}}";
    let orders_of = "mid = int(ctx['segments'][1])\nmine = [o for o in store.collection('orders').get_all() if o.get('member_id') == mid]\nREPLY = {'status': 200, 'body': mine}";
    let older = "age = int(ctx['query']['age__gt'][0])\nREPLY = {'status': 200, 'body': [m['name'] for m in store.search({'age__gt': age})]}";
    // The second POST /orders/ has the first one's shape: the cache serves it.
    let fake = FakeLlm::start(vec![
        Reply::Oracle,
        Reply::Oracle,
        Reply::Text(plan("custom", "members", &[], promote)),
        Reply::Oracle,
        Reply::Text(plan("custom", "members", &["orders"], orders_of)),
        Reply::Text(plan("custom", "members", &[], older)),
    ]);
    let app = start(&fake, "openai", "llm", "llm-custom", &[]);
    app.send("POST", "/members/", Some(json!({"name": "Ada", "age": 36})));
    app.send("POST", "/orders/", Some(json!({"member_id": 1, "total": 5})));
    app.send("POST", "/orders/", Some(json!({"member_id": 2, "total": 7})));
    let promoted = app.send("POST", "/members/1/promote", None);
    assert_eq!(json_of(promoted).1, json!({"id": 1, "name": "Ada", "age": 36, "role": "admin"}));
    assert_eq!(json_of(app.send("GET", "/members/1", None)).1["role"], "admin", "the custom action was committed");
    assert_eq!(json_of(app.send("GET", "/members/1/orders", None)).1, json!([{"id": 1, "member_id": 1, "total": 5}]));
    assert_eq!(json_of(app.send("GET", "/members?age__gt=30", None)).1, json!(["Ada"]));
    assert_eq!(fake.calls().len(), 6, "every scripted plan was used once, in order");
}

#[test]
fn auto_mode_uses_rules_for_crud_and_the_model_for_the_rest() {
    let fake = FakeLlm::start(vec![Reply::Text(plan("custom", "members", &[], "REPLY = {'status': 200, 'body': {'n': len(store.get_all())}}"))]);
    let app = start(&fake, "openai", "", "llm-auto", &[]);
    assert_eq!(json_of(app.send("GET", "/healthz", None)).1["planner_mode"], "auto", "a key and a host select auto");
    let created = app.send("POST", "/members/", Some(json!({"name": "Ada"})));
    assert_eq!(header(&created, "x-anypath-plan"), "rules");
    assert_eq!(header(&app.send("GET", "/members/1", None), "x-anypath-plan"), "rules");
    assert_eq!(fake.calls().len(), 0);
    let count = app.send("GET", "/members/count", None);
    assert_eq!(header(&count, "x-anypath-plan"), "llm");
    assert_eq!(json_of(count).1, json!({"n": 1}));
}

/// Boundary: `allowed_outbound_hosts` in this repository's `spin.toml`. With
/// the LLM host configured, only the planner's allowlist admits it; the
/// gateway and the store are refused by the same check `anypath up` applies
/// to every outbound request. (Generated code has no network at all: see
/// `sandbox_attacks`.)
#[test]
fn only_the_planner_may_reach_the_llm_host() {
    use anypath_spin_host::manifest::Manifest;
    use anypath_spin_host::outbound::AllowedHosts;
    use anypath_spin_host::variables::Variables;

    let manifest = Manifest::load(&repo().join("spin.toml")).unwrap();
    let variables = Variables::resolve(&manifest.variables, |name| match name {
        "SPIN_VARIABLE_LLM_SCHEME" => Some("http".into()),
        "SPIN_VARIABLE_LLM_HOST" => Some("127.0.0.1:9911".into()),
        _ => None,
    })
    .unwrap();
    let ids = manifest.component_ids();
    for (name, component) in &manifest.components {
        let allowed = AllowedHosts::resolve(&component.allowed_outbound_hosts, &variables, &ids).unwrap();
        let name = name.as_str();
        assert_eq!(allowed.allows("http", "127.0.0.1", Some(9911)), name == "planner", "{name}: {:?}", component.allowed_outbound_hosts);
        assert!(!allowed.allows("https", "api.openai.com", None), "{name} must not reach a provider that is not configured");
    }
    assert!(Path::new(&repo().join("spin.toml")).exists());
}

#[test]
fn the_docs_are_served() {
    let fake = FakeLlm::start(vec![]);
    let app = start(&fake, "openai", "rules", "llm-docs", &[]);
    let spec: Value = json_of(app.send("GET", "/openapi.json", None)).1;
    assert_eq!(spec["openapi"], "3.1.0");
    assert!(spec["paths"]["/{collection}/"]["post"]["description"].as_str().unwrap().contains("POST /members/"));
    for page in ["/docs", "/redoc"] {
        let response = app.send("GET", page, None);
        assert_eq!(response.status(), 200);
        assert!(header(&response, "content-type").starts_with("text/html"));
        assert!(response.text().unwrap().contains("/openapi.json"));
    }
}

/// Journals over two collections under contention: moves in both directions
/// (so the plans name the collections in opposite orders) all land exactly
/// once, and the total never changes.
#[test]
fn concurrent_moves_between_two_collections_each_apply_once() {
    let mover = |from: &str, to: &str| {
        format!(
            "mid = ctx['segments'][1]\nsrc = store.get(mid)\nother = store.collection('{to}')\ndst = other.get(mid)\n\
             store.patch(mid, {{'balance': src['balance'] - 1}})\nother.patch(mid, {{'balance': dst['balance'] + 1}})\n\
             REPLY = {{'status': 200, 'body': {{'{from}': src['balance'] - 1}}}}"
        )
    };
    let fake = FakeLlm::start(vec![
        Reply::Oracle,
        Reply::Oracle,
        Reply::Text(plan("custom", "acct_a", &["acct_b"], &mover("acct_a", "acct_b"))),
        Reply::Text(plan("custom", "acct_b", &["acct_a"], &mover("acct_b", "acct_a"))),
    ])
    .otherwise(Reply::Oracle);
    let app = start(&fake, "openai", "llm", "llm-moves", &[]);
    assert_eq!(app.send("POST", "/acct_a/", Some(json!({"id": 1, "balance": 100}))).status(), 201);
    assert_eq!(app.send("POST", "/acct_b/", Some(json!({"id": 1, "balance": 100}))).status(), 201);
    // One of each first, so both plans are cached before the burst.
    assert_eq!(app.send("POST", "/acct_a/1/move", None).status(), 200);
    assert_eq!(app.send("POST", "/acct_b/1/move", None).status(), 200);
    let base = app.base.clone();
    let movers: Vec<_> = (0..48)
        .map(|i| {
            let url = format!("{base}/{}/1/move", if i % 2 == 0 { "acct_a" } else { "acct_b" });
            std::thread::spawn(move || {
                let client = reqwest::blocking::Client::builder().timeout(std::time::Duration::from_secs(120)).build().unwrap();
                let response = client.post(url).send().unwrap();
                let status = response.status().as_u16();
                if status != 200 {
                    eprintln!("{}", response.text().unwrap_or_default());
                }
                status
            })
        })
        .collect();
    for mover in movers {
        assert_eq!(mover.join().unwrap(), 200);
    }
    assert_eq!(fake.calls().len(), 4, "the burst was served from the cache");
    let a = json_of(app.send("GET", "/acct_a/1", None)).1;
    let b = json_of(app.send("GET", "/acct_b/1", None)).1;
    assert_eq!((a["balance"].clone(), b["balance"].clone()), (json!(100), json!(100)), "25 moves each way: a={a} b={b}");
}

/// Structured output on an OpenAI-compatible server: the plan's JSON Schema
/// first; a server that refuses it is asked again with `json_object`, and
/// later requests start from what worked.
#[test]
fn a_refused_json_schema_falls_back_to_json_object_and_is_remembered() {
    let fake = FakeLlm::start(vec![Reply::Refuse(400, "'response_format' of type 'json_schema' is not supported".into())])
        .otherwise(Reply::Oracle);
    let app = start(&fake, "openai", "llm", "llm-fallback", &[]);
    let created = app.send("POST", "/members/", Some(json!({"name": "Ada"})));
    assert_eq!(created.status(), 201, "{:?}", json_of(created));
    let calls = fake.calls();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].body["response_format"]["type"], "json_schema");
    assert_eq!(calls[0].body["response_format"]["json_schema"]["schema"]["required"][0], "action");
    assert_eq!(calls[1].body["response_format"], json!({"type": "json_object"}));
    assert_eq!(app.send("GET", "/members/1", None).status(), 200);
    assert_eq!(fake.calls()[2].body["response_format"], json!({"type": "json_object"}), "the fallback is remembered");
    let line = app.process.wait_for_log(|l| l.contains("\"llm_calls\":2")).expect("the refused call is counted");
    assert!(line.contains("\"repairs\":0"), "a refused format is not a repair: {line}");
}

/// A refusal that is not about the output format is an LLM failure, not a fallback.
#[test]
fn an_unrelated_provider_error_is_a_502_without_fallback() {
    let fake = FakeLlm::start(vec![Reply::Refuse(401, "invalid api key".into())]).otherwise(Reply::Oracle);
    let app = start(&fake, "openai", "llm", "llm-refused-key", &[]);
    let failed = app.send("POST", "/members/", Some(json!({"name": "Ada"})));
    assert_eq!(failed.status(), 502);
    assert_eq!(json_of(failed).1["error"]["code"], "llm_failed");
    assert_eq!(fake.calls().len(), 1);
}

/// On Anthropic the schema travels as a forced tool call; its input is the plan.
#[test]
fn anthropic_plans_arrive_as_a_forced_tool_call() {
    let fake = FakeLlm::start(vec![]).otherwise(Reply::Oracle);
    let app = start(&fake, "anthropic", "llm", "llm-tool", &[]);
    let created = app.send("POST", "/members/", Some(json!({"name": "Ada"})));
    assert_eq!(created.status(), 201);
    let call = &fake.calls()[0];
    assert_eq!(call.body["tool_choice"]["type"], "tool");
    assert_eq!(call.body["tools"][0]["name"], call.body["tool_choice"]["name"]);
    assert_eq!(call.body["tools"][0]["input_schema"]["properties"]["code"]["required"], json!(["language", "block"]));
}

/// The worked example that precedes the request has the request's shape.
#[test]
fn the_prompt_carries_the_worked_example_for_the_request() {
    let fake = FakeLlm::start(vec![]).otherwise(Reply::Oracle);
    let app = start(&fake, "openai", "llm", "llm-examples", &[]);
    app.send("POST", "/members/", Some(json!({"name": "Ada"})));
    app.send("GET", "/members/search?name=Ada", None);
    let calls = fake.calls();
    let example_of = |call: &common::fake_llm::Call| call.body["messages"][1]["content"].as_str().unwrap_or("").to_owned();
    assert!(example_of(&calls[0]).contains("\"method\":\"POST\"") && example_of(&calls[0]).contains("/books/"), "{}", example_of(&calls[0]));
    assert!(example_of(&calls[1]).contains("/books/search"), "{}", example_of(&calls[1]));
    let answer = calls[0].body["messages"][2]["content"].as_str().unwrap();
    assert!(answer.contains("store.insert(obj)") && answer.contains("quote_segment(new_id)"), "{answer}");
}

/// A repair names the defect and shows the line to write instead.
#[test]
fn repairs_teach_the_pattern_that_fixes_the_defect() {
    let returns_an_id = "obj = dict(ctx['body_json'])\nREPLY = store.insert(obj)";
    let fake = FakeLlm::start(vec![Reply::Text(plan("create", "members", &[], returns_an_id)), Reply::Oracle]);
    let app = start(&fake, "openai", "llm", "llm-teach", &[]);
    let created = app.send("POST", "/members/", Some(json!({"name": "Ada"})));
    assert_eq!(created.status(), 201);
    let repair = fake.calls()[1].text();
    assert!(repair.contains("must be a dict") && repair.contains("The correct pattern") && repair.contains("REPLY = {'status': 201"), "{repair}");
}

/// Plans are normalised before they run: a custom plan naming its resource
/// again in also_loads, with the id as a string of digits, runs (it used to
/// reach the sandbox as it was and answer 500).
#[test]
fn a_plan_naming_its_collection_twice_is_normalised_not_a_500() {
    let promote = "updated = store.patch(ctx['segments'][1], {'role': 'admin'})\nREPLY = {'status': 200, 'body': updated}";
    let twice = json!({
        "action": "custom", "resource": "members", "also_loads": ["members", "members"], "id": "1",
        "code": {"language": "python", "block": format!("```python\n{promote}\n```")},
    });
    let fake = FakeLlm::start(vec![Reply::Oracle, Reply::Text(twice.to_string())]);
    let app = start(&fake, "openai", "llm", "llm-normalise", &[]);
    assert_eq!(app.send("POST", "/members/", Some(json!({"name": "Ada"}))).status(), 201);
    let promoted = app.send("POST", "/members/1/promote", None);
    assert_eq!(json_of(promoted), (reqwest::StatusCode::OK, json!({"id": 1, "name": "Ada", "role": "admin"})));
    assert_eq!(fake.calls().len(), 2, "no repair was needed");
}

/// A sandbox host that admits every block and refuses every execution with
/// a 400, as it would a body it cannot parse; counts the refusals. Like the
/// real host it reads the whole body before it answers: answering first
/// can close the connection while the gateway is still writing, which the
/// gateway rightly takes for a host that did not answer.
fn refusing_sandbox_host() -> (String, Arc<AtomicUsize>) {
    let refused = Arc::new(AtomicUsize::new(0));
    let counter = refused.clone();
    let exec = move |_body: axum::body::Bytes| {
        counter.fetch_add(1, Ordering::SeqCst);
        let body = json!({"error": {"code": "invalid_request", "message": "unknown field `gate`", "request_id": "r"}});
        async move { (axum::http::StatusCode::BAD_REQUEST, axum::Json(body)) }
    };
    let app = axum::Router::new()
        .route("/v1/admission", axum::routing::get(|| async { axum::http::StatusCode::NO_CONTENT }))
        .route("/v1/exec", axum::routing::post(exec));
    (common::serve_in_background(app), refused)
}

/// Boundary: the gateway and the sandbox host. A 400 from `/v1/exec` can only
/// mean the gateway built a body the host refuses, never a defect of the
/// plan: the client gets `502 sandbox_rejected`, and the model is not asked
/// to repair what it did not write.
#[test]
fn a_request_the_sandbox_host_refuses_is_the_gateways_fault_not_a_plan_to_repair() {
    let (host, refused) = refusing_sandbox_host();
    let fake = FakeLlm::start(vec![]).otherwise(Reply::Oracle);
    let extra = [("SPIN_VARIABLE_SANDBOX_HOSTS", host.as_str()), ("SPIN_VARIABLE_SANDBOX_ALLOWED", host.as_str())];
    let app = start(&fake, "openai", "llm", "llm-sandbox-400", &extra);
    let response = app.send("POST", "/members/", Some(json!({"name": "Alice"})));
    assert_envelope(response, 502, "sandbox_rejected");
    assert_eq!(refused.load(Ordering::SeqCst), 1, "the block was sent once, not re-run");
    assert_eq!(fake.calls().len(), 1, "one plan and no repair");
}
