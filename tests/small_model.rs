//! A real small model plans the seed's examples: Qwen2.5-Coder-1.5B-Instruct
//! (Q4_K_M), served by llama.cpp (`tests/support/llama_server.py`) on two
//! threads, behind `anypath up` in `llm` mode and then in `auto` mode, each
//! on a fresh store. Every check runs and reports, so one answer shows the
//! whole picture; the test fails unless all pass in both modes. It prints each
//! request's status, time, model calls and repairs, and writes the summary to
//! `target/small-model-report.json`.
//!
//! `cargo xtask test` provides the model and the server's Python
//! (`ANYPATH_LLM_MODEL`, `ANYPATH_PYTHON`). `ANYPATH_UP_BIN`,
//! `ANYPATH_UP_MANIFEST` and `ANYPATH_UP_RUNNER` run another build than this one.
//! `cargo xtask test` starts one model server for the whole run
//! (`ANYPATH_LLM_ADDRESS`); without it the test starts its own.

use crate::common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::app::{App, Build, repo, temp_kv};
use common::llama::{MODEL_NAME, ModelServer, llm_env, required_file};
use reqwest::blocking::Client;
use serde_json::{Value, json};

const MODES: [&str; 2] = ["llm", "auto"];
/// How long one request may take: a plan plus two repairs on two cores.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(600);

type Check = fn(&mut Session) -> Result<(), String>;

/// The seed's examples, in the order they build on each other.
const CHECKS: [(&str, Check); 10] = [
    ("create", create),
    ("get", get),
    ("search", search),
    ("operator search", operator_search),
    ("list with paging", paging),
    ("json-server list", json_server_list),
    ("replace", replace),
    ("patch", patch),
    ("custom action", custom_action),
    ("delete", delete),
];

#[test]
fn a_small_local_model_plans_the_seed_examples() {
    let started = Instant::now();
    let model = required_file("ANYPATH_LLM_MODEL");
    let build = Build::from_env();
    let server = ModelServer::shared_or_start();
    eprintln!("model server on {} ({:.1} s to reach)", server.address(), started.elapsed().as_secs_f64());
    let runs: Vec<ModeRun> = MODES.iter().map(|mode| run_mode(&build, server.address(), mode)).collect();
    drop(server);
    let elapsed = started.elapsed().as_secs_f64();
    for run in &runs {
        run.print();
    }
    print_totals(&runs, elapsed);
    write_report(&runs, &build, &model, elapsed);
    let failures: Vec<String> = runs.iter().flat_map(ModeRun::failures).collect();
    assert!(
        failures.is_empty(),
        "{} of {} checks failed:\n{}",
        failures.len(),
        runs.len() * CHECKS.len(),
        failures.join("\n")
    );
}

// ---------------------------------------------------------------- one mode

/// One request as the client saw it, with what the gateway logged about it.
#[derive(Clone, Debug)]
struct Record {
    check: &'static str,
    method: String,
    path: String,
    /// 0 when no answer came.
    status: u16,
    seconds: f64,
    /// `rules`, `cache`, `llm`, or empty when no plan was served.
    plan: String,
    llm_calls: u64,
    repairs: u64,
}

impl Record {
    /// Whether the request went to the planner (a failed plan has calls but no source).
    fn planned(&self) -> bool {
        !self.plan.is_empty() || self.llm_calls > 0
    }
}

/// The checks and requests of one mode.
struct ModeRun {
    mode: &'static str,
    outcomes: Vec<(&'static str, Result<(), String>)>,
    requests: Vec<Record>,
    seconds: f64,
}

fn run_mode(build: &Build, llm_address: &str, mode: &'static str) -> ModeRun {
    let started = Instant::now();
    let kv = temp_kv(&format!("small-model-{mode}"));
    let app = App::start_build(&kv, build, &llm_env(llm_address, mode));
    let mut session = Session::new(&app);
    let mut outcomes = Vec::new();
    for (name, check) in CHECKS {
        session.check = name;
        let check_started = Instant::now();
        let outcome = check(&mut session);
        let mark = if outcome.is_ok() { "pass" } else { "FAIL" };
        eprintln!("[{mode}] {name}: {mark} ({:.1} s)", check_started.elapsed().as_secs_f64());
        outcomes.push((name, outcome));
    }
    let requests = session.requests;
    drop(app);
    let _ = std::fs::remove_dir_all(kv.parent().expect("kv dir"));
    ModeRun { mode, outcomes, requests, seconds: started.elapsed().as_secs_f64() }
}

/// A client of one app that records every request.
struct Session<'a> {
    app: &'a App,
    client: Client,
    /// The check the next requests belong to.
    check: &'static str,
    requests: Vec<Record>,
    ids: Ids,
}

/// Ids taken from `Location` headers; a check whose set-up failed falls back to the seed's numbering.
#[derive(Default)]
struct Ids {
    alice: Option<String>,
    hartmann: Option<String>,
    bob: Option<String>,
}

/// One answer: status, `Location`, `X-Total-Count`, and the body (JSON, or null).
struct Answer {
    what: String,
    status: u16,
    location: Option<String>,
    total: Option<String>,
    body: Value,
    text: String,
}

impl Answer {
    /// Fails unless the status is one of `wanted`.
    fn expect(&self, wanted: &[u16]) -> Result<&Self, String> {
        if wanted.contains(&self.status) {
            return Ok(self);
        }
        Err(format!("{}: status {}, expected {}: {}", self.what, self.status, list(wanted), short(&self.text)))
    }

    /// Fails with the body shown.
    fn wrong(&self, why: &str) -> String {
        format!("{}: {why}: {}", self.what, short(&self.text))
    }

    /// The id at the end of `Location` (`/members/<id>`).
    fn location_id(&self) -> Option<String> {
        let location = self.location.as_deref()?;
        location.rsplit_once("/members/").map(|(_, id)| id.to_owned()).filter(|id| !id.is_empty())
    }
}

fn list(statuses: &[u16]) -> String {
    statuses.iter().map(u16::to_string).collect::<Vec<_>>().join(" or ")
}

/// The first 240 characters of a body, on one line.
fn short(text: &str) -> String {
    let flat = text.replace('\n', " ");
    match flat.char_indices().nth(240) {
        Some((end, _)) => format!("{}...", &flat[..end]),
        None => flat,
    }
}

impl<'a> Session<'a> {
    fn new(app: &'a App) -> Self {
        let client = Client::builder().timeout(REQUEST_TIMEOUT).build().expect("http client");
        Session { app, client, check: "", requests: Vec::new(), ids: Ids::default() }
    }

    /// Sends one request and records it with the gateway's log line for it.
    fn send(&mut self, method: &str, path: &str, body: Option<Value>) -> Result<Answer, String> {
        let what = format!("{method} {path}");
        let mut request =
            self.client.request(method.parse().expect("a valid method"), format!("{}{path}", self.app.base));
        if let Some(body) = &body {
            request = request.json(body);
        }
        let started = Instant::now();
        let sent = request.send().and_then(|response| {
            let header = |name: &str| response.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
            let (status, location, total, request_id) =
                (response.status().as_u16(), header("location"), header("x-total-count"), header("x-request-id"));
            response.text().map(|text| (status, location, total, request_id, text))
        });
        let seconds = started.elapsed().as_secs_f64();
        let mut record = Record {
            check: self.check,
            method: method.to_owned(),
            path: path.to_owned(),
            status: 0,
            seconds,
            plan: String::new(),
            llm_calls: 0,
            repairs: 0,
        };
        let (status, location, total, request_id, text) = match sent {
            Ok(answer) => answer,
            Err(error) => {
                self.requests.push(record);
                return Err(format!("{what}: no answer: {error}"));
            }
        };
        record.status = status;
        if let Some(log) = request_id.and_then(|id| self.log_line(&id)) {
            record.plan = log["plan"].as_str().unwrap_or_default().to_owned();
            record.llm_calls = log["llm_calls"].as_u64().unwrap_or(0);
            record.repairs = log["repairs"].as_u64().unwrap_or(0);
        }
        self.requests.push(record);
        let body = serde_json::from_str(&text).unwrap_or(Value::Null);
        Ok(Answer { what, status, location, total, body, text })
    }

    /// The gateway's JSON log line for one request (the sandbox logs the
    /// same request id on its own line, without `plan`).
    fn log_line(&self, request_id: &str) -> Option<Value> {
        let matches = |line: &str| {
            serde_json::from_str::<Value>(line).is_ok_and(|v| v["request_id"] == request_id && v.get("plan").is_some())
        };
        self.app.process.wait_for_log(matches).and_then(|line| serde_json::from_str(&line).ok())
    }

    /// `GET /members/<id>`, which must answer 200 with an object.
    fn fetch(&mut self, id: &str) -> Result<Answer, String> {
        let answer = self.send("GET", &format!("/members/{id}"), None)?;
        answer.expect(&[200])?;
        Ok(answer)
    }
}

fn alice(s: &Session) -> String {
    s.ids.alice.clone().unwrap_or_else(|| "1".into())
}

fn hartmann(s: &Session) -> String {
    s.ids.hartmann.clone().unwrap_or_else(|| "2".into())
}

fn bob(s: &Session) -> String {
    s.ids.bob.clone().unwrap_or_else(|| "3".into())
}

/// Fails unless `field` of the answer's body is `wanted`.
fn field_is(answer: &Answer, field: &str, wanted: Value) -> Result<(), String> {
    if answer.body[field] == wanted {
        return Ok(());
    }
    Err(answer.wrong(&format!("{field} is {}, expected {wanted}", answer.body[field])))
}

// ---------------------------------------------------------------- the checks

fn create(s: &mut Session) -> Result<(), String> {
    let answer = s.send("POST", "/members/", Some(json!({"name": "Alice", "age": 31})))?;
    s.ids.alice = answer.location_id();
    answer.expect(&[201])?;
    if answer.location.as_deref() != Some("/members/1") {
        return Err(answer.wrong(&format!("Location {:?}, expected /members/1", answer.location)));
    }
    field_is(&answer, "id", json!(1))?;
    field_is(&answer, "name", json!("Alice"))
}

fn get(s: &mut Session) -> Result<(), String> {
    let answer = s.fetch(&alice(s))?;
    field_is(&answer, "name", json!("Alice"))
}

fn search(s: &mut Session) -> Result<(), String> {
    let hartmann = s.send("POST", "/members/", Some(json!({"name": "hartmann", "age": 45})))?;
    s.ids.hartmann = hartmann.location_id();
    let bob = s.send("POST", "/members/", Some(json!({"name": "Bob", "age": 22})))?;
    s.ids.bob = bob.location_id();
    // The search runs even when a set-up answer is off, so its plan is measured too.
    let answer = s.send("GET", "/members/search?name=hartmann", None)?;
    hartmann.expect(&[201])?;
    bob.expect(&[201])?;
    answer.expect(&[200])?;
    let items = answer.body.as_array().ok_or_else(|| answer.wrong("not a JSON list"))?;
    if items.is_empty() {
        return Err(answer.wrong("no item"));
    }
    if items.iter().any(|item| item["name"] != "hartmann") {
        return Err(answer.wrong("an item is not named hartmann"));
    }
    Ok(())
}

fn operator_search(s: &mut Session) -> Result<(), String> {
    let answer = s.send("GET", "/members/search?age__gt=30", None)?;
    answer.expect(&[200])?;
    let items = answer.body.as_array().ok_or_else(|| answer.wrong("not a JSON list"))?;
    let names: BTreeSet<&str> = items.iter().filter_map(|item| item["name"].as_str()).collect();
    if names != BTreeSet::from(["Alice", "hartmann"]) || items.len() != 2 {
        return Err(answer.wrong("expected exactly Alice and hartmann"));
    }
    Ok(())
}

fn paging(s: &mut Session) -> Result<(), String> {
    let answer = s.send("GET", "/members/?limit=1&offset=1", None)?;
    answer.expect(&[200])?;
    // The seed leaves the shape open: a bare list or `{"items": [...], "page": ...}`.
    let items = answer.body.as_array().or_else(|| answer.body["items"].as_array());
    match items {
        Some(items) if items.len() == 1 => Ok(()),
        Some(items) => Err(answer.wrong(&format!("{} items, expected 1", items.len()))),
        None => Err(answer.wrong("neither a list nor an object with items")),
    }
}

/// A list as a frontend written for json-server asks for it: the two
/// oldest members, as a bare array with the total in `X-Total-Count`.
fn json_server_list(s: &mut Session) -> Result<(), String> {
    let answer = s.send("GET", "/members?_sort=age&_order=desc&_limit=2", None)?;
    answer.expect(&[200])?;
    let items = answer.body.as_array().ok_or_else(|| answer.wrong("not a bare JSON list"))?;
    let names: Vec<&str> = items.iter().filter_map(|item| item["name"].as_str()).collect();
    if names != ["hartmann", "Alice"] {
        return Err(answer.wrong(&format!("names {names:?}, expected [\"hartmann\", \"Alice\"] (age 45, 31)")));
    }
    match answer.total.as_deref() {
        Some("3") => Ok(()),
        other => Err(answer.wrong(&format!("X-Total-Count {other:?}, expected 3"))),
    }
}

fn replace(s: &mut Session) -> Result<(), String> {
    let id = bob(s);
    s.send("PUT", &format!("/members/{id}"), Some(json!({"name": "Robert", "age": 23})))?.expect(&[200])?;
    let answer = s.fetch(&id)?;
    field_is(&answer, "name", json!("Robert"))?;
    field_is(&answer, "age", json!(23))
}

fn patch(s: &mut Session) -> Result<(), String> {
    let id = bob(s);
    s.send("PATCH", &format!("/members/{id}"), Some(json!({"age": 24})))?.expect(&[200])?;
    let answer = s.fetch(&id)?;
    field_is(&answer, "name", json!("Robert"))?;
    field_is(&answer, "age", json!(24))
}

fn custom_action(s: &mut Session) -> Result<(), String> {
    let id = hartmann(s);
    let promoted = s.send("POST", &format!("/members/{id}/promote"), Some(json!({"role": "admin"})))?;
    if !(200..300).contains(&promoted.status) {
        return Err(promoted.wrong(&format!("status {}, expected 2xx", promoted.status)));
    }
    let answer = s.fetch(&id)?;
    field_is(&answer, "role", json!("admin"))?;
    field_is(&answer, "name", json!("hartmann"))
}

fn delete(s: &mut Session) -> Result<(), String> {
    let id = alice(s);
    s.send("DELETE", &format!("/members/{id}"), None)?.expect(&[204])?;
    s.send("GET", &format!("/members/{id}"), None)?.expect(&[404])?;
    Ok(())
}

// ---------------------------------------------------------------- the report

/// A mode's figures over its planned requests.
#[derive(Debug)]
struct Totals {
    checks_passed: usize,
    requests: usize,
    planned: usize,
    by_llm: usize,
    by_cache: usize,
    by_rules: usize,
    mean_llm_calls: f64,
    mean_repairs: f64,
    mean_seconds: f64,
    /// Over the requests that called the model at all.
    mean_model_seconds: f64,
}

impl ModeRun {
    fn failures(&self) -> Vec<String> {
        let failed = self.outcomes.iter().filter_map(|(name, outcome)| outcome.as_ref().err().map(|e| (name, e)));
        failed.map(|(name, error)| format!("[{}] {name}: {error}", self.mode)).collect()
    }

    fn totals(&self) -> Totals {
        let planned: Vec<&Record> = self.requests.iter().filter(|r| r.planned()).collect();
        let source = |name: &str| planned.iter().filter(|r| r.plan == name).count();
        let with_model = planned.iter().filter(|r| r.llm_calls > 0);
        Totals {
            checks_passed: self.outcomes.iter().filter(|(_, o)| o.is_ok()).count(),
            requests: self.requests.len(),
            planned: planned.len(),
            by_llm: source("llm"),
            by_cache: source("cache"),
            by_rules: source("rules"),
            mean_llm_calls: mean(planned.iter().map(|r| r.llm_calls as f64)),
            mean_repairs: mean(planned.iter().map(|r| r.repairs as f64)),
            mean_seconds: mean(planned.iter().map(|r| r.seconds)),
            mean_model_seconds: mean(with_model.map(|r| r.seconds)),
        }
    }

    fn print(&self) {
        println!("\nplanner_mode {} ({:.1} s)", self.mode, self.seconds);
        println!(
            "{:<17} {:<38} {:>6} {:>8} {:<6} {:>5} {:>7}",
            "check", "request", "status", "seconds", "plan", "calls", "repairs"
        );
        for r in &self.requests {
            let request = format!("{} {}", r.method, r.path);
            let plan = if r.plan.is_empty() { "-" } else { r.plan.as_str() };
            println!(
                "{:<17} {:<38} {:>6} {:>8.2} {:<6} {:>5} {:>7}",
                r.check, request, r.status, r.seconds, plan, r.llm_calls, r.repairs
            );
        }
        for (name, outcome) in &self.outcomes {
            match outcome {
                Ok(()) => println!("  pass  {name}"),
                Err(error) => println!("  FAIL  {name}: {error}"),
            }
        }
    }
}

/// The mean, or 0 for none.
fn mean(values: impl Iterator<Item = f64>) -> f64 {
    let (sum, count) = values.fold((0.0, 0usize), |(sum, count), v| (sum + v, count + 1));
    if count == 0 { 0.0 } else { sum / count as f64 }
}

const TOTALS_HEADER: &str =
    "mode  checks requests planned  llm/cache/rules  calls/req repairs/req    s/req  s/model req   mode s";

fn print_totals(runs: &[ModeRun], elapsed: f64) {
    println!("\nsmall model ({MODEL_NAME} Q4_K_M, 2 threads), {elapsed:.1} s in all");
    println!("{TOTALS_HEADER}");
    for run in runs {
        let t = run.totals();
        println!(
            "{:<5} {:>6} {:>8} {:>7} {:>16} {:>10.2} {:>11.2} {:>8.2} {:>12.2} {:>8.1}",
            run.mode,
            format!("{}/{}", t.checks_passed, CHECKS.len()),
            t.requests,
            t.planned,
            format!("{}/{}/{}", t.by_llm, t.by_cache, t.by_rules),
            t.mean_llm_calls,
            t.mean_repairs,
            t.mean_seconds,
            t.mean_model_seconds,
            run.seconds
        );
    }
}

/// The summary as JSON in `target/small-model-report.json`.
fn write_report(runs: &[ModeRun], build: &Build, model: &Path, elapsed: f64) {
    let modes: Vec<Value> = runs.iter().map(mode_json).collect();
    let report = json!({
        "model": model.file_name().map(|n| n.to_string_lossy().into_owned()),
        "binary": build.binary, "manifest": build.manifest,
        "checks_total": CHECKS.len(), "seconds": elapsed, "modes": modes,
    });
    let target = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| repo().join("target"));
    let path = target.join("small-model-report.json");
    let text = serde_json::to_string_pretty(&report).expect("report serialises");
    match std::fs::create_dir_all(&target).and_then(|()| std::fs::write(&path, text)) {
        Ok(()) => println!("report: {}", path.display()),
        Err(error) => eprintln!("could not write {}: {error}", path.display()),
    }
}

fn mode_json(run: &ModeRun) -> Value {
    let t = run.totals();
    let checks: Vec<Value> = run
        .outcomes
        .iter()
        .map(|(name, outcome)| json!({"check": name, "passed": outcome.is_ok(), "error": outcome.as_ref().err()}))
        .collect();
    let requests: Vec<Value> = run
        .requests
        .iter()
        .map(|r| {
            json!({"check": r.check, "method": r.method, "path": r.path, "status": r.status, "seconds": r.seconds,
                   "plan": r.plan, "llm_calls": r.llm_calls, "repairs": r.repairs})
        })
        .collect();
    json!({
        "mode": run.mode, "seconds": run.seconds,
        "totals": {"checks_passed": t.checks_passed, "requests": t.requests, "planned": t.planned,
                   "planned_by": {"llm": t.by_llm, "cache": t.by_cache, "rules": t.by_rules},
                   "mean_llm_calls": t.mean_llm_calls, "mean_repairs": t.mean_repairs,
                   "mean_seconds": t.mean_seconds, "mean_seconds_with_model": t.mean_model_seconds},
        "checks": checks, "requests": requests,
    })
}
