//! The planner component: turns a request context into a plan and one Python block.
//!
//! Private (reachable only by service chaining) and the only component
//! allowed to reach the LLM host. `GET /status` tells the mode; `POST /plan`
//! answers a plan from the seed's rules, from the plan cache (kept by the
//! store) or from the LLM. An LLM answer that is not a valid plan comes back
//! as `{"ok": false, "problem", "answer"}`, so the gateway can ask for a
//! repair with the reason. `POST /complete` is the agent's one way to the
//! LLM: a tool-calling completion (`completion`). Both reach the LLM the
//! same way (`llm_call`); a plan only adds the schema its answer is held to
//! (`output_mode`).

mod completion;
mod config;
mod llm_call;
mod memo;
mod output_mode;

use anypath_llm::{ChatRequest, OutputMode};
use anypath_wire::PlannerStatus;
use anypath_rest::plan_check::{bind_to_path, parse_plan};
use anypath_rest::prompt::{self, CollectionSummary, PROMPT_VERSION};
use anypath_rest::{
    CachedPlan, DescribeRequest, ErrorEnvelope, Plan, PlanAnswer, PlanCacheKey, PlanOutcome, PlanRequest, PlanSource, PlanUsage, RequestContext,
    RestError, lessons, names, plan_schema, rules, shape,
};
use http_client::call;
use spin_sdk::http::{IncomingRequest, Method, Request, Response, ResponseOutparam};
use spin_sdk::http_component;

use config::{Config, Mode};

const STORE_PLAN_GET: &str = "http://store.spin.internal/plan-cache/get";
const STORE_DESCRIBE: &str = "http://store.spin.internal/describe";
/// Collections described to the model: those the path names, at most this many.
const MAX_DESCRIBED: usize = 4;

/// Why no answer could be produced at all.
pub(crate) struct Failure {
    pub(crate) status: u16,
    pub(crate) code: &'static str,
    pub(crate) message: String,
}

impl From<RestError> for Failure {
    fn from(e: RestError) -> Self {
        Self { status: e.status(), code: e.code(), message: e.to_string() }
    }
}

#[http_component]
async fn handle(incoming: IncomingRequest, out: ResponseOutparam) {
    front::respond::serve(incoming, out, answer).await;
}

fn answer(request: Request) -> Response {
    let request_id = request.header("x-request-id").and_then(|v| v.as_str()).unwrap_or("-").to_owned();
    let config = Config::load();
    let result = match (request.method(), request.path()) {
        (Method::Get, "/status") => serde_json::to_value(status(&config)).map_err(|e| Failure { status: 500, code: "internal", message: e.to_string() }),
        (Method::Post, _) if !config.errors.is_empty() => {
            let listed: Vec<String> = config.errors.iter().map(ToString::to_string).collect();
            Err(Failure { status: 500, code: "misconfigured", message: format!("the planner is misconfigured: {}", listed.join("; ")) })
        }
        (Method::Post, "/complete") => serde_json::from_slice::<ChatRequest>(request.body())
            .map_err(|e| Failure::from(RestError::BadRequest(format!("invalid completion request: {e}"))))
            .and_then(|chat| completion::complete(&config, &chat, &request_id))
            .and_then(|reply| serde_json::to_value(reply).map_err(|e| Failure { status: 500, code: "internal", message: e.to_string() })),
        (Method::Post, "/plan") => serde_json::from_slice::<PlanRequest>(request.body())
            .map_err(|e| Failure::from(RestError::BadRequest(format!("invalid plan request: {e}"))))
            .and_then(|r| plan(&config, r, &request_id))
            .and_then(|answer| serde_json::to_value(answer).map_err(|e| Failure { status: 500, code: "internal", message: e.to_string() })),
        _ => Err(RestError::NotFound(format!("no planner endpoint {}", request.path())).into()),
    };
    // Values and envelopes of strings always encode.
    match result {
        Ok(body) => json(200, &serde_json::to_vec(&body).unwrap_or_default()),
        Err(f) => json(f.status, &serde_json::to_vec(&ErrorEnvelope::new(f.code, f.message, &request_id)).unwrap_or_default()),
    }
}

/// Whether an LLM can be called: valid settings and a host.
fn llm_configured(config: &Config) -> bool {
    llm_call::settings(config).is_ok()
}

fn status(config: &Config) -> PlannerStatus {
    PlannerStatus {
        planner_mode: config.mode.name().to_owned(),
        reason: config.mode_reason.to_owned(),
        llm_host: config.host.clone(),
        model: config.model().to_owned(),
        prompt_version: PROMPT_VERSION.to_owned(),
        structured_output: config.output_mode.map_or("auto", OutputMode::name).to_owned(),
        llm_ready: config.mode == Mode::Rules || llm_configured(config),
        // What the agent needs, whatever the mode.
        llm_configured: llm_configured(config),
        config_errors: config.errors.clone(),
    }
}

fn plan(config: &Config, request: PlanRequest, request_id: &str) -> Result<PlanAnswer, Failure> {
    let use_rules = match config.mode {
        Mode::Rules => true,
        Mode::Llm => false,
        Mode::Auto => rules::conventional(&request.ctx),
    };
    if use_rules {
        let plan = rules::plan(&request.ctx)?;
        let outcome = PlanOutcome::Planned { source: PlanSource::Rules, plan, cache_key: None, answer: None };
        return Ok(PlanAnswer { outcome, usage: PlanUsage::default() });
    }
    let settings = llm_call::settings(config)?;
    let cache_key = shape::cache_key(&request.tenant, &request.ctx, PROMPT_VERSION, &settings.model);
    if !request.skip_cache && request.repairs.is_empty() {
        if let Some(plan) = cached(config, &request.tenant, &cache_key, request_id) {
            let outcome = PlanOutcome::Planned { source: PlanSource::Cache, plan, cache_key: Some(cache_key), answer: None };
            return Ok(PlanAnswer { outcome, usage: PlanUsage::default() });
        }
    }
    let described = describe(config, &request.tenant, &request.ctx, request_id);
    let repairs: Vec<(String, String)> = request.repairs.into_iter().map(|r| (r.answer, r.problem)).collect();
    let chat = ChatRequest::new(prompt::SYSTEM, prompt::conversation(&request.ctx, &described, &repairs));
    let mut usage = PlanUsage::default();
    let answer = output_mode::ask(config, settings, &chat, &plan_schema::output_schema(), request_id, &mut usage)?;
    let outcome = match parse_plan(&answer) {
        Ok(mut plan) => {
            bind_to_path(&mut plan, &request.ctx);
            PlanOutcome::Planned { source: PlanSource::Llm, plan, cache_key: Some(cache_key), answer: Some(answer) }
        }
        Err(problem) => {
            let taught = lessons::teach(&problem.to_string(), lessons::for_plan_error(&problem));
            PlanOutcome::Invalid { problem: taught, answer }
        }
    };
    Ok(PlanAnswer { outcome, usage })
}

/// The cached plan for `key`; any failure is a miss.
fn cached(config: &Config, tenant: &str, key: &str, request_id: &str) -> Option<Plan> {
    let body = serde_json::to_vec(&PlanCacheKey { tenant: tenant.to_owned(), key: key.to_owned() }).ok()?;
    let answer = call(STORE_PLAN_GET, Some(&body), &[("x-request-id", request_id)], config.call_timeout).ok()?;
    let found: CachedPlan = serde_json::from_slice(&answer.body).ok().filter(|_| answer.status == 200)?;
    found.plan
}

/// What the tenant's collections named in the path look like; empty on failure.
fn describe(config: &Config, tenant: &str, ctx: &RequestContext, request_id: &str) -> Vec<CollectionSummary> {
    let collections: Vec<String> = ctx
        .segments
        .iter()
        .filter(|s| names::collection(s).is_ok() && !shape::is_id_like(s))
        .take(MAX_DESCRIBED)
        .cloned()
        .collect();
    let Ok(body) = serde_json::to_vec(&DescribeRequest { tenant: tenant.to_owned(), collections }) else { return vec![] };
    match call(STORE_DESCRIBE, Some(&body), &[("x-request-id", request_id)], config.call_timeout) {
        Ok(answer) if answer.status == 200 => serde_json::from_slice(&answer.body).unwrap_or_default(),
        _ => vec![],
    }
}

fn json(status: u16, body: &[u8]) -> Response {
    Response::builder().status(status).header("content-type", "application/json").body(body.to_vec()).build()
}
