//! Runs one plan: load what it needs, execute the block in the sandbox,
//! commit the journal with what the block read; re-run on a conflict (the
//! shared loop of `anypath_rest::conflict_retry`, with these steps).

use anypath_rest::conflict_retry::{self, Attempt, Committed, GaveUp, Ran};
use anypath_rest::direct::DirectRequest;
use anypath_rest::{Plan, RequestContext, lessons};
use anypath_wire::{CommitRequest, ExecError, ExecReport, ExecRequest, LoadAnswer, LoadRequest, LoadSpec, LoadedCollection};

use crate::calls::{STORE_COMMIT, STORE_EXECUTE, STORE_LOAD, post, post_json};
use crate::config::Config;
use crate::failure::Failure;
use crate::sandboxes;
use crate::timing::Timings;

/// Why a plan produced no report.
pub enum RunError {
    /// The block itself failed; `problem` is what the model is told.
    Block { failure: Failure, problem: String },
    /// Anything else: storage, transport, conflicts.
    Other(Failure),
}

impl From<Failure> for RunError {
    fn from(failure: Failure) -> Self {
        Self::Other(failure)
    }
}

impl From<GaveUp> for RunError {
    fn from(gave_up: GaveUp) -> Self {
        match gave_up {
            GaveUp::KeptChanging => Failure::new(409, "conflict", gave_up.to_string(), "conflict").into(),
            GaveUp::LoadedWhole(_) => Failure::internal("the block asked for data that was loaded whole").into(),
        }
    }
}

/// Runs `plan` to a committed report (`reply`, `mutations`, ...).
pub fn run(plan: &Plan, ctx: &RequestContext, tenant: &str, config: &Config, request_id: &str, timings: &mut Timings) -> Result<ExecReport, RunError> {
    let mut attempt = InSandbox { plan, ctx, tenant, config, request_id, timings };
    conflict_retry::run_to_commit(&mut attempt, tenant, plan.load_specs(ctx.body_json.as_ref()))
}

/// Runs a request the rules plan in the store, by the data operations
/// themselves: no block, no sandbox instance. The store loads, commits and
/// re-runs on a conflict; its report reads as a block's would.
pub fn run_in_store(ctx: &RequestContext, tenant: &str, config: &Config, request_id: &str, timings: &mut Timings) -> Result<ExecReport, RunError> {
    let request = DirectRequest { tenant: tenant.to_owned(), ctx: ctx.clone() };
    let report: ExecReport = timings.time("store", || post_json(STORE_EXECUTE, &request, "store", config.call_timeout, request_id))?;
    match verdict(report)? {
        Ran::Report(report) => Ok(*report),
        Ran::NeedsData(_) => Err(Failure::internal("the store asked for data it loads itself").into()),
    }
}

/// One attempt at a plan's block: the store loads and commits, the sandbox
/// runs; each hop's time goes to its `Server-Timing` phase.
struct InSandbox<'a> {
    plan: &'a Plan,
    ctx: &'a RequestContext,
    tenant: &'a str,
    config: &'a Config,
    request_id: &'a str,
    timings: &'a mut Timings,
}

impl Attempt for InSandbox<'_> {
    type Error = RunError;

    fn load(&mut self, specs: &[LoadSpec]) -> Result<Vec<LoadedCollection>, RunError> {
        let (tenant, config, request_id) = (self.tenant, self.config, self.request_id);
        Ok(self.timings.time("store", || load(tenant, specs, config, request_id))?)
    }

    fn run(&mut self, loaded: &mut [LoadedCollection]) -> Result<Ran, RunError> {
        let (plan, ctx, tenant, config, request_id) = (self.plan, self.ctx, self.tenant, self.config, self.request_id);
        let ran = self.timings.time("exec", || execute(plan, ctx, loaded, tenant, config, request_id))?;
        if let Ran::Report(report) = &ran {
            // Of the exec hop, the part the sandbox host spent on the run itself.
            self.timings.add("run", report.metrics.duration_us as f64 / 1e3);
        }
        Ok(ran)
    }

    fn commit(&mut self, request: CommitRequest) -> Result<Committed, RunError> {
        let (config, request_id) = (self.config, self.request_id);
        Ok(self.timings.time("store", || commit(&request, config, request_id))?)
    }
}

fn load(tenant: &str, specs: &[LoadSpec], config: &Config, request_id: &str) -> Result<Vec<LoadedCollection>, Failure> {
    let request = LoadRequest { tenant: tenant.to_owned(), collections: specs.to_vec() };
    let loaded: LoadAnswer = post_json(STORE_LOAD, &request, "store", config.call_timeout, request_id)?;
    Ok(loaded.collections)
}

/// The body of `POST /v1/exec`: the plan's code, the request and what was loaded (the tags stay here).
fn exec_body(plan: &Plan, ctx: &RequestContext, collections: &[LoadedCollection], config: &Config) -> Result<Vec<u8>, serde_json::Error> {
    let mut request = ExecRequest::new(plan.code.source()).with_ctx(ctx)?.with_limits(config.exec_limits);
    request.collections = collections.iter().map(LoadedCollection::exec_input).collect::<Result<_, _>>()?;
    serde_json::to_vec(&request)
}

fn execute(plan: &Plan, ctx: &RequestContext, collections: &[LoadedCollection], tenant: &str, config: &Config, request_id: &str) -> Result<Ran, RunError> {
    let bytes = exec_body(plan, ctx, collections, config)
        .map_err(|e| Failure::internal(format!("the execution request could not be encoded: {e}")))?;
    let answer = sandboxes::with_tenant_headers(config, request_id, tenant, |headers| sandboxes::exec(config, request_id, &bytes, headers))?;
    if answer.status == 400 {
        // The sandbox checks the request's shape, which the gateway built,
        // not the plan: a model cannot repair this, so it is ours to answer.
        let refused = Failure::passed_on(&answer, "sandbox");
        let message = format!("the sandbox host refused the request the gateway built: {}", refused.message);
        return Err(Failure::new(502, "sandbox_rejected", message, "upstream").into());
    }
    if answer.status != 200 {
        return Err(Failure::passed_on(&answer, "sandbox").into());
    }
    let report: ExecReport = serde_json::from_slice(&answer.body)
        .map_err(|e| Failure::new(502, "sandbox_failed", format!("the sandbox's report is malformed: {e}"), "upstream"))?;
    verdict(report)
}

/// What a report says: its reply and journal, a request for whole
/// collections, or the failure the client and (for a block fault) the model hear.
fn verdict(report: ExecReport) -> Result<Ran, RunError> {
    if report.ok {
        return Ok(Ran::Report(Box::new(report)));
    }
    let error = report.error.ok_or_else(|| Failure::new(502, "sandbox_failed", "the sandbox reported a failure without its error", "upstream"))?;
    if let ExecError::NeedsData { message } = &error {
        return Ok(Ran::NeedsData(message.clone()));
    }
    let kind = error.kind();
    let status = if matches!(error, ExecError::Timeout { .. } | ExecError::FuelExhausted { .. }) { 504 } else { 500 };
    let message = error_message(&error);
    let failure = Failure::new(status, format!("sandbox_{kind}"), message.clone(), "sandbox_failed");
    if !error.is_block_fault() {
        return Err(failure.into());
    }
    Err(RunError::Block { failure, problem: describe_fault(&error, &message) })
}

/// What the client is told a failed block did: the error's own message.
fn error_message(error: &ExecError) -> String {
    match error {
        ExecError::Policy { message, .. }
        | ExecError::Exception { message, .. }
        | ExecError::InvalidReply { message }
        | ExecError::OutputLimit { message }
        | ExecError::InvalidRequest { message }
        | ExecError::Trap { message }
        | ExecError::Internal { message }
        | ExecError::NeedsData { message } => message.clone(),
        other => format!("the block failed: {}", other.kind()),
    }
}

/// The sandbox's verdict in words the model can act on, with the pattern that fixes it.
fn describe_fault(error: &ExecError, message: &str) -> String {
    let type_name = match error {
        ExecError::Exception { type_name, .. } => type_name.as_str(),
        _ => "",
    };
    lessons::teach(&state_fault(error, message), lessons::for_block_fault(error.kind(), type_name, message))
}

fn state_fault(error: &ExecError, message: &str) -> String {
    match error {
        ExecError::Policy { line, .. } => format!("the policy gate refused the code at line {line}: {message}"),
        ExecError::Exception { type_name, traceback, .. } => format!("the code raised {type_name}: {message}\n{traceback}"),
        ExecError::FuelExhausted { .. } | ExecError::Timeout { .. } => {
            format!("the code ran past its limit ({}); it must finish quickly, without unbounded loops", error.kind())
        }
        other => format!("{}: {message}", other.kind()),
    }
}

/// Lands a journal in the store; a 409 is a conflict (re-run).
fn commit(request: &CommitRequest, config: &Config, request_id: &str) -> Result<Committed, Failure> {
    let answer = post(STORE_COMMIT, request, config.call_timeout, request_id).map_err(|e| Failure::unavailable("store", e))?;
    match answer.status {
        200 => Ok(Committed::Landed),
        409 => Ok(Committed::Conflict),
        _ => Err(Failure::passed_on(&answer, "store")),
    }
}
