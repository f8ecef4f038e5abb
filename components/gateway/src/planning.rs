//! Getting a plan that works: from the planner (rules, cache or LLM), with at
//! most two repairs when the LLM's plan is invalid or its block fails. A
//! failed attempt writes nothing: only a block that succeeds is committed.

use anypath_rest::{Plan, RequestContext, lessons, shape};
use anypath_wire::ExecReport;
use serde_json::{Value, json};

use crate::calls::{PLANNER_PLAN, STORE_PLAN_EVICT, STORE_PLAN_PUT, post, post_json};
use crate::config::Config;
use crate::failure::Failure;
use crate::running::{RunError, run};
use crate::timing::Timings;

/// Repairs asked of the model before the request fails with 502.
pub const MAX_REPAIRS: u64 = 2;

/// LLM use of one request, for the log line.
#[derive(Default)]
pub struct Usage {
    pub llm_calls: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub repairs: u64,
}

impl Usage {
    fn add(&mut self, reported: &Value) {
        self.llm_calls += reported["llm_calls"].as_u64().unwrap_or(0);
        self.input_tokens += reported["input_tokens"].as_u64().unwrap_or(0);
        self.output_tokens += reported["output_tokens"].as_u64().unwrap_or(0);
    }
}

/// A committed report and where its plan came from (`rules`, `cache`, `llm`).
pub struct Served {
    pub report: ExecReport,
    pub source: String,
}

/// Plans and runs the request, repairing the LLM's plan when it fails.
pub fn plan_and_run(
    ctx: &RequestContext,
    tenant: &str,
    config: &Config,
    request_id: &str,
    timings: &mut Timings,
    usage: &mut Usage,
) -> Result<Served, Failure> {
    let mut repairs: Vec<Value> = Vec::new();
    let mut problems: Vec<String> = Vec::new();
    let mut skip_cache = false;
    loop {
        let body = json!({"tenant": tenant, "ctx": ctx, "repairs": repairs, "skip_cache": skip_cache});
        let answer: Value = timings.time("plan", || post_json(PLANNER_PLAN, &body, "planner", config.plan_timeout, request_id))?;
        usage.add(&answer["usage"]);
        let source = answer["source"].as_str().unwrap_or("llm").to_owned();
        let cache_key = answer["cache_key"].as_str().unwrap_or("").to_owned();
        let problem = if answer["ok"] == json!(true) {
            let plan: Plan = serde_json::from_value(answer["plan"].clone())
                .map_err(|e| Failure::new(502, "planner_failed", format!("the planner's plan is malformed: {e}"), "upstream"))?;
            match run(&plan, ctx, tenant, config, request_id, timings) {
                Ok(report) => {
                    if source == "llm" && !cache_key.is_empty() && shape::cacheable(&plan, ctx) {
                        let entry = json!({"tenant": tenant, "key": cache_key, "plan": plan});
                        // A plan that is not cached is only a cost, never an error.
                        let _ = post(STORE_PLAN_PUT, &entry, config.call_timeout, request_id);
                    }
                    return Ok(Served { report, source });
                }
                Err(RunError::Other(failure)) => return Err(failure),
                Err(RunError::Block { failure, problem }) => match source.as_str() {
                    // The rules are deterministic: asking again changes nothing.
                    "rules" => return Err(failure),
                    "cache" => {
                        let _ = post(STORE_PLAN_EVICT, &json!({"tenant": tenant, "key": cache_key}), config.call_timeout, request_id);
                        problems.push(format!("cached plan: {problem}"));
                        skip_cache = true;
                        continue;
                    }
                    _ => problem,
                },
            }
        } else {
            format!("invalid plan: {}", answer["problem"].as_str().unwrap_or("unknown"))
        };
        // The client hears what failed; the model also gets the pattern that fixes it.
        problems.push(lessons::untaught(&problem).to_owned());
        if usage.repairs >= MAX_REPAIRS {
            return Err(Failure::new(
                502,
                "plan_failed",
                format!("no working plan after {MAX_REPAIRS} repairs: {}", problems.join(" | ")),
                "plan_failed",
            ));
        }
        usage.repairs += 1;
        repairs.push(json!({"answer": answer["answer"].as_str().unwrap_or(""), "problem": problem}));
    }
}
