//! Getting a plan that works: from the planner (rules, cache or LLM), with at
//! most two repairs when the LLM's plan is invalid or its block fails. A
//! failed attempt writes nothing: only a block that succeeds is committed.

use anypath_rest::{PlanAnswer, PlanCacheEntry, PlanCacheKey, PlanOutcome, PlanRequest, PlanSource, Repair, RequestContext, lessons, shape};
use anypath_wire::ExecReport;
use front::log::Usage;
use serde_json::Value;

use crate::calls::{PLANNER_PLAN, STORE_PLAN_EVICT, STORE_PLAN_PUT, post, post_json};
use crate::config::Config;
use crate::failure::Failure;
use crate::running::{RunError, run, run_in_store};
use crate::timing::Timings;

/// Repairs asked of the model before the request fails with 502.
pub const MAX_REPAIRS: u64 = 2;

/// A committed report and where its plan came from.
pub struct Served {
    pub report: ExecReport,
    pub source: PlanSource,
}

/// Plans and runs the request, repairing the LLM's plan when it fails;
/// `in_store` is `front::checks::runs_in_store`'s answer for it, decided once.
pub fn plan_and_run(
    ctx: &RequestContext,
    tenant: &str,
    in_store: bool,
    config: &Config,
    request_id: &str,
    timings: &mut Timings,
    usage: &mut Usage,
) -> Result<Served, Failure> {
    if in_store {
        return match run_in_store(ctx, tenant, config, request_id, timings) {
            Ok(report) => Ok(Served { report, source: PlanSource::Rules }),
            Err(RunError::Block { failure, .. } | RunError::Other(failure)) => Err(failure),
        };
    }
    let mut request = PlanRequest { tenant: tenant.to_owned(), ctx: ctx.clone(), repairs: Vec::new(), skip_cache: false };
    let mut problems: Vec<String> = Vec::new();
    loop {
        let body: Value = timings.time("plan", || post_json(PLANNER_PLAN, &request, "planner", config.plan_timeout, request_id))?;
        // Valid JSON that is not a plan answer fails as a malformed plan would.
        let answer: PlanAnswer = serde_json::from_value(body)
            .map_err(|e| Failure::new(502, "planner_failed", format!("the planner's plan is malformed: {e}"), "upstream"))?;
        usage.add(&answer.usage);
        let (problem, answer) = match answer.outcome {
            PlanOutcome::Planned { source, plan, cache_key, answer } => match if source == PlanSource::Rules && config.front.rules_direct {
                run_in_store(ctx, tenant, config, request_id, timings)
            } else {
                run(&plan, ctx, tenant, config, request_id, timings)
            } {
                Ok(report) => {
                    if source == PlanSource::Llm
                        && shape::cacheable(&plan, ctx)
                        && let Some(key) = cache_key
                    {
                        let entry = PlanCacheEntry { tenant: tenant.to_owned(), key, plan };
                        // A plan that is not cached is only a cost, never an error.
                        let _ = post(STORE_PLAN_PUT, &entry, config.call_timeout, request_id);
                    }
                    return Ok(Served { report, source });
                }
                Err(RunError::Other(failure)) => return Err(failure),
                Err(RunError::Block { failure, problem }) => match source {
                    // The rules are deterministic: asking again changes nothing.
                    PlanSource::Rules => return Err(failure),
                    PlanSource::Cache => {
                        if let Some(key) = cache_key {
                            let _ = post(STORE_PLAN_EVICT, &PlanCacheKey { tenant: tenant.to_owned(), key }, config.call_timeout, request_id);
                        }
                        problems.push(format!("cached plan: {problem}"));
                        request.skip_cache = true;
                        continue;
                    }
                    PlanSource::Llm => (problem, answer.unwrap_or_default()),
                },
            },
            PlanOutcome::Invalid { problem, answer } => (format!("invalid plan: {problem}"), answer),
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
        request.repairs.push(Repair { answer, problem });
    }
}
