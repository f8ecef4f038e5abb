//! The audit trail: one structured line per interpreter operation, on every
//! transport (they all call the service facade, which writes it).
//!
//! Lines are `tracing` events on the target [`TARGET`], so an operator can
//! route or filter them (`RUST_LOG=anypath::audit=info`, or a log shipper
//! selecting `"target":"anypath::audit"`). A line names who (tenant, request
//! id), what (operation, session, the file, artifact or dataset by name, the
//! run id), how it ended (`ok` or the error's code, a run's exit code) and how
//! long it took, plus a run's limits in force. It never holds file contents,
//! code, output, environment values, credentials or a link's signature.
//!
//! Whether the request handled on a task wrote its line is noted here too
//! ([`noting`], [`carried`]): a request refused without one gets a line of
//! its own from the refusal layer (`crate::refusal_audit`).

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use anypath_interpreter::{Described, OperationKind, RunReport};
use anypath_sandbox::Limits;

use crate::caller::Caller;
use crate::service_error::ServiceError;

/// The `tracing` target of every audit line.
pub(crate) const TARGET: &str = "anypath::audit";

tokio::task_local! {
    /// Set once an audit line was written for the request handled on this task.
    static WRITTEN: Arc<AtomicBool>;
}

/// Notes that the request being handled has its audit line.
fn note_written() {
    let _ = WRITTEN.try_with(|written| written.store(true, Ordering::Relaxed));
}

/// `work`, and whether an audit line was written for it while it ran.
pub(crate) async fn noting<F: Future>(work: F) -> (F::Output, bool) {
    let written = Arc::new(AtomicBool::new(false));
    let output = WRITTEN.scope(written.clone(), work).await;
    (output, written.load(Ordering::Relaxed))
}

/// `work`, spawned apart from its request, still noting that request's
/// audit line when it writes one (a streamed run's facade call).
pub(crate) fn carried<F: Future>(work: F) -> impl Future<Output = F::Output> {
    let written = WRITTEN.try_with(Arc::clone).unwrap_or_default();
    WRITTEN.scope(written, work)
}

/// One operation under way: started when the facade is called, written
/// once when it ends.
#[derive(Debug)]
pub(crate) struct Audit {
    operation: OperationKind,
    request_id: String,
    tenant: Option<String>,
    session: Option<String>,
    /// The file, directory, artifact id or dataset the operation names.
    subject: Option<String>,
    started: Instant,
}

impl Audit {
    /// An operation of `caller`.
    pub(crate) fn of(caller: &Caller, operation: OperationKind) -> Self {
        Self::anonymous(operation, caller.request_id.clone(), Some(caller.tenant.clone()))
    }

    /// An operation of `caller`, as the operation describes itself.
    pub(crate) fn described(caller: &Caller, described: Described) -> Self {
        let Described { kind, session, subject } = described;
        Self { session, subject, ..Self::of(caller, kind) }
    }

    /// An operation whose caller is known by its request only (a signed
    /// link is its own credential; a refused caller has no tenant).
    pub(crate) fn anonymous(operation: OperationKind, request_id: String, tenant: Option<String>) -> Self {
        Self { operation, request_id, tenant, session: None, subject: None, started: Instant::now() }
    }

    /// The session the operation is on.
    pub(crate) fn session(mut self, session: &str) -> Self {
        self.session = Some(session.to_owned());
        self
    }

    /// The tenant, once known (a signed link's, after it checked out).
    pub(crate) fn tenant(mut self, tenant: String) -> Self {
        self.tenant = Some(tenant);
        self
    }

    /// What the operation names in it (a path, an artifact id, a dataset).
    pub(crate) fn subject(mut self, subject: &str) -> Self {
        self.subject = Some(subject.to_owned());
        self
    }

    /// Writes the line of a finished operation and hands its result on.
    pub(crate) fn finish<T>(self, result: Result<T, ServiceError>) -> Result<T, ServiceError> {
        self.write(outcome(&result), None);
        result
    }

    /// Writes the line of an operation that may be a run: a run's id, exit
    /// code, metrics and the limits it ran under when `report_of` finds its
    /// report in the answer; the error's code when it never ran.
    pub(crate) fn finish_run<T>(self, result: Result<T, ServiceError>, report_of: fn(&T) -> Option<&RunReport>, limits: Option<Limits>) -> Result<T, ServiceError> {
        let report = result.as_ref().ok().and_then(report_of);
        let facts = report.map(|report| RunFacts::of(report, limits));
        let outcome = match (&result, report) {
            (Ok(_), Some(report)) => report.cell.error.as_ref().map_or("ok", |e| e.kind()),
            _ => outcome(&result),
        };
        self.write(outcome, facts.as_ref());
        result
    }

    fn write(&self, outcome: &str, run: Option<&RunFacts<'_>>) {
        note_written();
        let duration_ms = self.started.elapsed().as_micros() as f64 / 1000.0;
        let limits = run.and_then(|r| r.limits.as_ref());
        tracing::info!(
            target: TARGET,
            operation = self.operation.name(),
            request_id = %self.request_id,
            tenant = self.tenant.as_deref(),
            session = self.session.as_deref(),
            subject = self.subject.as_deref(),
            outcome,
            duration_ms,
            run_id = run.map(|r| r.run_id),
            runtime = run.map(|r| r.runtime),
            exit_code = run.map(|r| r.exit_code),
            duration_us = run.map(|r| r.duration_us),
            fuel = run.map(|r| r.fuel),
            peak_memory_bytes = run.map(|r| r.peak_memory_bytes),
            state_reset = run.map(|r| r.state_reset),
            artifacts = run.map(|r| r.artifacts),
            artifact_errors = run.map(|r| r.artifact_errors),
            limit_fuel = limits.map(|l| l.fuel),
            limit_memory_bytes = limits.map(|l| l.memory_bytes),
            limit_timeout_ms = limits.map(|l| l.timeout_ms),
            limit_code_bytes = limits.map(|l| l.max_code_bytes),
            limit_stdout_bytes = limits.map(|l| l.stdout_bytes),
            limit_stderr_bytes = limits.map(|l| l.stderr_bytes),
            "{}",
            self.operation.name()
        );
    }
}

/// The line of a request refused before it named an operation the facade
/// audits (`crate::refusal_audit`): its method and path as `subject`, the
/// answer's status and the error's code as `outcome`.
pub(crate) fn refused(request_id: &str, route: &str, status: u16, outcome: &str) {
    tracing::info!(target: TARGET, operation = "refused", request_id, subject = route, outcome, status, "refused");
}

/// What a run's line says of it: never its code or output.
struct RunFacts<'a> {
    run_id: &'a str,
    runtime: &'static str,
    exit_code: i32,
    duration_us: u64,
    fuel: u64,
    peak_memory_bytes: u64,
    state_reset: bool,
    artifacts: usize,
    artifact_errors: usize,
    limits: Option<Limits>,
}

impl<'a> RunFacts<'a> {
    fn of(report: &'a RunReport, limits: Option<Limits>) -> Self {
        let metrics = &report.cell.metrics;
        Self {
            run_id: &report.run_id,
            runtime: report.runtime.name(),
            exit_code: report.cell.exit_code,
            duration_us: metrics.duration_us,
            fuel: metrics.fuel_consumed,
            peak_memory_bytes: metrics.peak_memory_bytes,
            state_reset: report.cell.state_reset,
            artifacts: report.artifacts.len(),
            artifact_errors: report.artifact_errors.len(),
            limits,
        }
    }
}

/// `ok`, or the error's stable code.
fn outcome<T>(result: &Result<T, ServiceError>) -> &'static str {
    match result {
        Ok(_) => "ok",
        Err(e) => e.code(),
    }
}
