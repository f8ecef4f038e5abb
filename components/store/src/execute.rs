//! `POST /execute`: a request the rules plan, run here directly by the
//! store's operations (`anypath-collections`), with no sandbox instance:
//! load what the plan needs, run it, commit its journal with a check of
//! what it read, and run it again when that changed in between. The same
//! operations serve blocks in the sandbox, so both answer alike.

use anypath_collections::{OpError, Store};
use anypath_rest::direct::{self, DirectRequest};
use anypath_rest::conflict_retry::{self, MAX_CONFLICT_RETRIES};
use anypath_rest::{RestError, rules};
use anypath_wire::{Change, CommitRequest, ExecError, ExecReport, LoadSpec, LoadedCollection, Metrics, Output};

use crate::backend::Backend;
use crate::load::load_collections;
use crate::codec::encode;
use crate::commit;
use crate::error::StoreError;

pub fn execute(backend: &dyn Backend, request: DirectRequest) -> Result<Vec<u8>, StoreError> {
    let DirectRequest { tenant, ctx } = request;
    let plan = rules::plan(&ctx)?;
    let mut specs = plan.load_specs(ctx.body_json.as_ref());
    for attempt in 0..=MAX_CONFLICT_RETRIES {
        if attempt > 0 {
            back_off(attempt);
        }
        let mut loaded = load_collections(backend, &tenant, specs.clone())?;
        let mut store = Store::new(loaded.iter_mut().map(LoadedCollection::take_collection).collect());
        let reply = match direct::execute(&plan, &ctx, &mut store) {
            Ok(reply) => reply,
            Err(OpError::NeedsData(message)) => {
                if specs.iter().all(|s| s.ids.is_none()) {
                    return Err(StoreError::Backend(format!("the request asked for data that was loaded whole: {message}")));
                }
                // It reached past a partial load: run it again on whole collections.
                specs = specs.into_iter().map(|s| LoadSpec { ids: None, ..s }).collect();
                continue;
            }
            Err(error) => return encode(&failed(&error)),
        };
        let mutations = store.take_journal();
        if !mutations.is_empty() {
            let changes = Change::for_run(&loaded, &mutations, &store.reads());
            match commit::commit(backend, CommitRequest { tenant: tenant.clone(), changes }) {
                Ok(_) => {}
                Err(StoreError::Rest(RestError::Conflict(_))) => continue,
                Err(other) => return Err(other),
            }
        }
        let report = ExecReport {
            ok: true,
            reply: reply.to_value(),
            mutations,
            reads: store.reads(),
            error: None,
            output: Output::default(),
            metrics: Metrics::default(),
        };
        return encode(&report);
    }
    Err(StoreError::Rest(RestError::Conflict("the data kept changing while this request ran; try again".into())))
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

/// Waits out the shared policy's pause before re-run `attempt`, as the gateway does for a block.
fn back_off(attempt: usize) {
    let pause_ns = conflict_retry::back_off_ns(attempt, wasi::random::random::get_random_u64());
    wasi::clocks::monotonic_clock::subscribe_duration(pause_ns).block();
}
