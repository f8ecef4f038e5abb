//! The REST rows of `cargo xtask bench`: anypath's REST face beside
//! json-server, each seeded with the same records through its own POST,
//! each loaded with the same requests and the same `oha` settings, the
//! answers held against json-server's before any load so the rows compare
//! the same work. anypath's servers also get a row json-server cannot
//! answer: a path the rules do not plan, served from the plan cache after
//! one call to the model stub.

use std::path::Path;

use anyhow::{Context, bail, ensure};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::bench::llm_stub::{LlmStub, PLANNED_PATH};
use crate::bench::oha::load;

/// Requests per row.
pub const REQUESTS: u32 = 2000;
/// Requests of the list row (each reads and sorts the whole collection).
pub const LIST_REQUESTS: u32 = 1000;
/// Records created before the rows, ids 1..=RECORDS.
pub const RECORDS: u64 = 100;
/// The record the GET row reads.
const GET_PATH: &str = "/members/42";
/// A sorted page of the records, in json-server's dialect.
const LIST_PATH: &str = "/members?_sort=age&_order=desc&_limit=10";
/// What the POST row creates.
pub(crate) const MEMBER: &str = r#"{"name":"Alice","age":31}"#;
/// Samples of the cached row checked before its load.
const CACHE_SAMPLES: usize = 3;

/// What a row requests.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Request {
    GetById,
    List,
    /// A path the rules do not plan, served from the plan cache (anypath only).
    CachedPlan,
    Create,
}

impl Request {
    /// The row's name in the table.
    pub fn label(self) -> String {
        match self {
            Self::GetById => format!("GET {GET_PATH}"),
            Self::List => format!("GET {LIST_PATH}"),
            Self::CachedPlan => format!("GET {PLANNED_PATH} (cached LLM plan)"),
            Self::Create => "POST /members/".to_owned(),
        }
    }

    fn path(self) -> &'static str {
        match self {
            Self::GetById => GET_PATH,
            Self::List => LIST_PATH,
            Self::CachedPlan => PLANNED_PATH,
            Self::Create => "/members/",
        }
    }
}

/// One request at one concurrency.
pub struct Row {
    pub request: Request,
    pub concurrency: u32,
    requests: u32,
}

/// The rows in the order they run: the creates last, so every read sees
/// exactly the seed records.
pub const ROWS: &[Row] = &[
    Row { request: Request::GetById, concurrency: 1, requests: REQUESTS },
    Row { request: Request::GetById, concurrency: 8, requests: REQUESTS },
    Row { request: Request::List, concurrency: 8, requests: LIST_REQUESTS },
    Row { request: Request::CachedPlan, concurrency: 1, requests: REQUESTS },
    Row { request: Request::CachedPlan, concurrency: 8, requests: REQUESTS },
    Row { request: Request::Create, concurrency: 1, requests: REQUESTS },
    Row { request: Request::Create, concurrency: 8, requests: REQUESTS },
];

/// A server under test.
pub struct Server<'a> {
    pub name: String,
    pub base: &'a str,
    /// The model stub its planner asks (anypath), or none (json-server).
    pub planner: Option<&'a LlmStub>,
}

/// One row's figures.
#[derive(Clone, Copy)]
pub struct Figures {
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub per_second: f64,
}

/// A server's figures, one per row of [`ROWS`] (`None`: the row does not
/// apply to it).
pub struct Measured {
    pub server: String,
    pub figures: Vec<Option<Figures>>,
    /// Where a rules-planned GET's and a cached plan's time goes, from the
    /// app's own `Server-Timing` (empty for json-server).
    pub phases: Vec<(Request, String)>,
}

impl Measured {
    /// The figures of `request` at `concurrency`.
    pub fn at(&self, request: Request, concurrency: u32) -> Option<Figures> {
        let index = ROWS.iter().position(|row| row.request == request && row.concurrency == concurrency)?;
        self.figures.get(index).copied().flatten()
    }
}

/// A record as both servers answer it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
struct Member {
    id: u64,
    name: String,
    age: u64,
}

/// A record as the seed creates it.
#[derive(Serialize)]
struct NewMember {
    name: &'static str,
    age: u64,
}

/// What the reads answer before any load: the rows must do the same work everywhere.
#[derive(Debug, PartialEq)]
pub struct Answers {
    member: Member,
    page: Vec<Member>,
}

/// Seeds `server`, checks its answers against `reference` (json-server's),
/// then runs every row that applies to it.
pub fn measure(oha: &Path, server: &Server, reference: Option<&Answers>) -> anyhow::Result<(Measured, Answers)> {
    let client = reqwest::blocking::Client::new();
    seed(&client, server.base).with_context(|| format!("seeding {}", server.name))?;
    let answers = read_answers(&client, server.base).with_context(|| format!("reading {}'s seed", server.name))?;
    if let Some(reference) = reference
        && *reference != answers
    {
        bail!("{} answers the reads unlike json-server, so its rows would not compare the same work:\n  json-server: {reference:?}\n  {}: {answers:?}", server.name, server.name);
    }
    if let Some(stub) = server.planner {
        let plan = plan_source(&client, &format!("{}{GET_PATH}", server.base))?;
        ensure!(plan == "rules", "{}: GET {GET_PATH} was planned by {plan:?}, not the rules", server.name);
        fill_plan_cache(&client, server.base, stub, &answers).with_context(|| format!("filling {}'s plan cache", server.name))?;
    }
    let mut phases = Vec::new();
    let calls_before = server.planner.map(LlmStub::calls);
    let mut figures = Vec::new();
    for (index, row) in ROWS.iter().enumerate() {
        if row.request == Request::CachedPlan && server.planner.is_none() {
            figures.push(None);
            continue;
        }
        let url = format!("{}{}", server.base, row.request.path());
        let post = ["-m", "POST", "-T", "application/json", "-d", MEMBER];
        let extra: &[&str] = if row.request == Request::Create { &post } else { &[] };
        let result = load(oha, &url, &row.requests.to_string(), &row.concurrency.to_string(), extra)?;
        figures.push(Some(figures_of(&result)?));
        // Once the reads ran (every instance slot warm), before the creates grow the collection.
        if row.request == Request::CachedPlan && ROWS.get(index + 1).is_none_or(|next| next.request != Request::CachedPlan) {
            for request in [Request::GetById, Request::CachedPlan] {
                phases.push((request, phase_medians(&client, &format!("{}{}", server.base, request.path()))?));
            }
        }
    }
    if let (Some(stub), Some(before)) = (server.planner, calls_before) {
        ensure!(stub.calls() == before, "{}: the load of {PLANNED_PATH} reached the model {} times", server.name, stub.calls() - before);
    }
    Ok((Measured { server: server.name.clone(), figures, phases }, answers))
}

/// Requests per phase breakdown.
const PHASE_SAMPLES: usize = 31;

/// The median of each `Server-Timing` phase over sequential GETs of `url`,
/// beside the client's median round trip: `plan 0.40 ms, load 0.52 ms, ...`.
fn phase_medians(client: &reqwest::blocking::Client, url: &str) -> anyhow::Result<String> {
    let mut phases: Vec<(String, Vec<f64>)> = Vec::new();
    let mut round_trips = Vec::with_capacity(PHASE_SAMPLES);
    for _ in 0..PHASE_SAMPLES {
        let started = std::time::Instant::now();
        let response = client.get(url).send()?;
        ensure!(response.status() == 200, "GET {url} answered {}", response.status());
        let timing = response.headers().get("server-timing").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
        response.bytes()?;
        round_trips.push(started.elapsed().as_secs_f64() * 1e3);
        for entry in timing.split(',') {
            let Some((name, duration)) = entry.trim().split_once(";dur=") else { continue };
            let Ok(ms) = duration.parse::<f64>() else { continue };
            match phases.iter_mut().find(|(n, _)| n == name) {
                Some((_, samples)) => samples.push(ms),
                None => phases.push((name.to_owned(), vec![ms])),
            }
        }
    }
    let median = |samples: &mut Vec<f64>| {
        samples.sort_by(f64::total_cmp);
        samples[samples.len() / 2]
    };
    let mut parts: Vec<String> = phases.iter_mut().map(|(name, samples)| format!("{name} {:.2} ms", median(samples))).collect();
    parts.push(format!("round trip at the client {:.2} ms", median(&mut round_trips)));
    Ok(parts.join(", "))
}

/// Creates the records through the server's own POST: ids 1..=RECORDS,
/// ages spread so the sorted page has an order to find.
fn seed(client: &reqwest::blocking::Client, base: &str) -> anyhow::Result<()> {
    for i in 1..=RECORDS {
        let record = NewMember { name: "Alice", age: i % 70 + 18 };
        let response = client.post(format!("{base}/members/")).json(&record).send()?;
        ensure!(response.status() == 201, "POST /members/ answered {}", response.status());
        let created: Member = response.json().context("the created record")?;
        ensure!(created.id == i, "record {i} was created with id {}", created.id);
    }
    Ok(())
}

fn read_answers(client: &reqwest::blocking::Client, base: &str) -> anyhow::Result<Answers> {
    let member = get_json(client, &format!("{base}{GET_PATH}"))?;
    let page: Vec<Member> = get_json(client, &format!("{base}{LIST_PATH}"))?;
    Ok(Answers { member, page })
}

fn get_json<T: serde::de::DeserializeOwned>(client: &reqwest::blocking::Client, url: &str) -> anyhow::Result<T> {
    let response = client.get(url).send()?;
    ensure!(response.status() == 200, "GET {url} answered {}", response.status());
    response.json().with_context(|| format!("GET {url}"))
}

/// Who planned the answer to `GET url`: its `x-anypath-plan` header.
fn plan_source(client: &reqwest::blocking::Client, url: &str) -> anyhow::Result<String> {
    let response = client.get(url).send()?;
    ensure!(response.status() == 200, "GET {url} answered {}", response.status());
    Ok(response.headers().get("x-anypath-plan").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned())
}

/// The first request on the stub's path plans through the model; the next
/// ones must come from the cache, without another call, and answer the
/// oldest record (the sorted page's first).
fn fill_plan_cache(client: &reqwest::blocking::Client, base: &str, stub: &LlmStub, answers: &Answers) -> anyhow::Result<()> {
    let url = format!("{base}{PLANNED_PATH}");
    let oldest = answers.page.first().context("the sorted page is empty")?;
    let before = stub.calls();
    let first = plan_source(client, &url)?;
    ensure!(first == "llm", "the first GET {PLANNED_PATH} was planned by {first:?}, not the model");
    let calls = stub.calls();
    ensure!(calls > before, "the first GET {PLANNED_PATH} never called the model");
    for _ in 0..CACHE_SAMPLES {
        let response = client.get(&url).send()?;
        let source = response.headers().get("x-anypath-plan").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
        ensure!(source == "cache", "GET {PLANNED_PATH} was planned by {source:?}, not the cache");
        let answer: Member = response.json().context("the cached plan's answer")?;
        ensure!(answer == *oldest, "the cached plan answered {answer:?}, not the oldest record {oldest:?}");
    }
    ensure!(stub.calls() == calls, "the cached requests called the model");
    Ok(())
}

/// oha's JSON summary, the parts read here.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct OhaReport {
    summary: OhaSummary,
    latency_percentiles: OhaPercentiles,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct OhaSummary {
    requests_per_sec: f64,
}

#[derive(Deserialize)]
struct OhaPercentiles {
    p50: Option<f64>,
    p99: Option<f64>,
}

fn figures_of(result: &Value) -> anyhow::Result<Figures> {
    let report = OhaReport::deserialize(result).context("oha's summary")?;
    let ms = |seconds: Option<f64>| seconds.map_or(f64::NAN, |s| s * 1e3);
    Ok(Figures {
        p50_ms: ms(report.latency_percentiles.p50),
        p99_ms: ms(report.latency_percentiles.p99),
        per_second: report.summary.requests_per_sec,
    })
}

/// The table: per row, each server's p50, p99 and requests per second, and
/// on anypath's lines their requests per second over json-server's.
pub fn print_table(reference: &Measured, others: &[Measured]) {
    println!(
        "{:<52} {:>4}  {:<22} {:>9} {:>9} {:>8} {:>9}",
        "request", "conc", "server", "p50", "p99", "req/s", "vs json"
    );
    for (index, row) in ROWS.iter().enumerate() {
        let base = reference.figures.get(index).copied().flatten();
        let label = row.request.label();
        let mut first = true;
        for measured in std::iter::once(reference).chain(others) {
            let Some(figures) = measured.figures.get(index).copied().flatten() else { continue };
            let (name, conc) = if first { (label.as_str(), row.concurrency.to_string()) } else { ("", String::new()) };
            first = false;
            let ratio = match base {
                Some(base) if !std::ptr::eq(measured, reference) => format!("{:.2}x", figures.per_second / base.per_second),
                _ => String::new(),
            };
            println!(
                "{name:<52} {conc:>4}  {:<22} {:>6.2} ms {:>6.2} ms {:>8.0} {ratio:>9}",
                measured.server, figures.p50_ms, figures.p99_ms, figures.per_second
            );
        }
    }
}

/// p50 of `other` over p50 of `base`, on every row both have.
pub fn p50_ratios(base: &Measured, other: &Measured) -> String {
    ROWS.iter()
        .filter_map(|row| {
            let (a, b) = (base.at(row.request, row.concurrency)?, other.at(row.request, row.concurrency)?);
            Some(format!("{} c={}: {:.2}x", row.request.label(), row.concurrency, b.p50_ms / a.p50_ms))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The cached plan against the rules-planned GET on the same server, at
/// each concurrency: p50 over p50, and requests per second over requests per second.
pub fn cached_against_rules(measured: &Measured) -> String {
    [1, 8]
        .iter()
        .filter_map(|&c| {
            let (rules, cached) = (measured.at(Request::GetById, c)?, measured.at(Request::CachedPlan, c)?);
            Some(format!("c={c} p50 {:.2}x, req/s {:.2}x", cached.p50_ms / rules.p50_ms, cached.per_second / rules.per_second))
        })
        .collect::<Vec<_>>()
        .join("; ")
}
