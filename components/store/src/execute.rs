//! `POST /execute`: a request the rules plan, run here directly by the
//! store's operations (`anypath-collections`), with no sandbox instance:
//! load what the plan needs, run it, commit its journal with a check of
//! what it read, and run it again when that changed in between (the shared
//! loop of `anypath_rest::conflict_retry`, as the gateway does for a
//! block). The same operations serve blocks in the sandbox, so both answer
//! alike.

use anypath_collections::{OpError, Store};
use anypath_rest::conflict_retry::{self, Attempt, Committed, Ran};
use anypath_rest::direct::{self, DirectRequest};
use anypath_rest::{Plan, RequestContext, RestError, rules};
use anypath_wire::{CommitRequest, ExecError, ExecReport, LoadSpec, LoadedCollection, Metrics, Output};

use crate::backend::Backend;
use crate::codec::encode;
use crate::commit;
use crate::error::StoreError;
use crate::load::load_collections;

/// `POST /execute`: runs the planned request to its committed report (`ExecReport`).
pub fn execute(backend: &dyn Backend, request: DirectRequest) -> Result<Vec<u8>, StoreError> {
    encode(&run(backend, &request.tenant, &request.ctx)?)
}

/// Plans `ctx` by the rules and runs it to its committed report: for the
/// gateway's `/execute` and for a public request served here.
pub fn run(backend: &dyn Backend, tenant: &str, ctx: &RequestContext) -> Result<ExecReport, StoreError> {
    let plan = rules::plan(ctx)?;
    let mut attempt = Direct { backend, plan: &plan, ctx, tenant };
    Ok(conflict_retry::run_to_commit(&mut attempt, tenant, plan.load_specs(ctx.body_json.as_ref()))?)
}

/// One attempt at a planned request, on this store's backend.
struct Direct<'a> {
    backend: &'a dyn Backend,
    plan: &'a Plan,
    ctx: &'a RequestContext,
    tenant: &'a str,
}

impl Attempt for Direct<'_> {
    type Error = StoreError;

    fn load(&mut self, specs: &[LoadSpec]) -> Result<Vec<LoadedCollection>, StoreError> {
        load_collections(self.backend, self.tenant, specs.to_vec())
    }

    /// The documents move into the operations' store; the tags stay for the commit's check.
    fn run(&mut self, loaded: &mut [LoadedCollection]) -> Result<Ran, StoreError> {
        let mut store = Store::new(loaded.iter_mut().map(LoadedCollection::take_collection).collect());
        let reply = match direct::execute(self.plan, self.ctx, &mut store) {
            Ok(reply) => reply,
            Err(OpError::NeedsData(message)) => return Ok(Ran::NeedsData(message)),
            // Answered as the block's exception, with nothing to commit.
            Err(error) => return Ok(Ran::Report(Box::new(failed(&error)))),
        };
        Ok(Ran::Report(Box::new(ExecReport {
            ok: true,
            reply: reply.to_value(),
            mutations: store.take_journal(),
            reads: store.reads(),
            error: None,
            output: Output::default(),
            metrics: Metrics::default(),
        })))
    }

    fn commit(&mut self, request: CommitRequest) -> Result<Committed, StoreError> {
        match commit::commit(self.backend, request) {
            Ok(_) => Ok(Committed::Landed),
            Err(StoreError::Rest(RestError::Conflict(_))) => Ok(Committed::Conflict),
            Err(other) => Err(other),
        }
    }
}

/// What the rules' block would have raised, reported as its exception.
fn failed(error: &OpError) -> ExecReport {
    ExecReport {
        ok: false,
        reply: serde_json::Value::Null,
        mutations: Vec::new(),
        reads: Vec::new(),
        error: Some(ExecError::Exception { type_name: error.python_type().to_owned(), message: error.to_string(), traceback: String::new() }),
        output: Output::default(),
        metrics: Metrics::default(),
    }
}
