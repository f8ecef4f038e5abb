//! The runner's `store` import: a block's data operations run here, in the
//! host, by `anypath-collections` (the one implementation the store's own
//! path uses too), over the collections of the request being executed.
//!
//! Each call is bounded: no work starts past the run's deadline, the time a
//! call takes is charged to the run's fuel at the rate the guest burns it,
//! a query's arguments are capped (the work of a search or list grows with
//! its filters, sort keys and relations times the documents), and the
//! journal may not outgrow the result cap (what the block stores is kept in
//! host memory, outside the guest's memory cap).

use std::io;
use std::time::{Duration, Instant};

use anypath_collections::{Documents, Loaded, OpError, Store, Which};
use serde_json::Value;
use wasmtime::component::Linker;
use wasmtime::{AsContextMut, StoreContextMut};

use crate::bindings::anypath::runner::store::OpError as WitOpError;
use crate::outcome::{ExecError, Mutation, ReadSet};

/// The import as the runner world names it.
const INTERFACE: &str = "anypath:runner/store@0.1.0";
/// Fuel charged per microsecond a call spends in the host: about the rate
/// the guest burns it (the default 1e10 is about 1.5 s of CPU).
const FUEL_PER_HOST_MICROSECOND: u64 = 6_000;
/// Largest JSON arguments of a `search` or `list`.
pub(crate) const MAX_QUERY_ARGS_BYTES: usize = 16 << 10;
/// Most sort keys one `list` may give.
pub(crate) const MAX_SORT_KEYS: usize = 16;
/// Most embeds and expands one `list` may give (each copies a collection into the page).
pub(crate) const MAX_RELATIONS: usize = 8;

/// The collections one execution reaches, with what it did to them.
#[derive(Debug)]
pub(crate) struct RequestStore {
    store: Store,
    /// Most bytes of journal documents (with the reply body) the run may leave.
    result_bytes: u64,
    /// Bytes of the journal's documents so far, as JSON.
    journal_bytes: u64,
    /// Journal entries already counted in `journal_bytes`.
    counted: usize,
    /// Set once the journal outgrew `result_bytes`: every later call fails.
    over_limit: Option<String>,
}

/// Why a call failed, as the block sees it.
#[derive(Debug)]
enum CallError {
    Op(OpError),
    /// A query's arguments past a bound ([`MAX_QUERY_ARGS_BYTES`] and the others).
    Bound(String),
    /// The journal outgrew the result cap.
    OutputLimit(String),
}

impl From<CallError> for WitOpError {
    fn from(error: CallError) -> Self {
        let (kind, message) = match error {
            CallError::Op(e) => (e.python_type(), e.to_string()),
            CallError::Bound(message) => ("ValueError", message),
            CallError::OutputLimit(message) => ("OutputLimit", message),
        };
        Self { kind: kind.to_owned(), message }
    }
}

/// What an execution left in its store.
#[derive(Debug)]
pub(crate) struct Record {
    pub(crate) mutations: Vec<Mutation>,
    pub(crate) reads: Vec<ReadSet>,
    /// Bytes of the journal's documents, as JSON.
    pub(crate) journal_bytes: u64,
    /// The run reached past a partial load (whether or not the block caught it).
    pub(crate) needs_data: Option<String>,
    /// The journal outgrew the result cap (whether or not the block caught it).
    pub(crate) over_limit: Option<String>,
}

impl RequestStore {
    /// The store over a request's collections, the default first.
    pub(crate) fn new(loaded: Vec<Loaded>, result_bytes: u32) -> Self {
        Self { store: Store::new(loaded), result_bytes: u64::from(result_bytes), journal_bytes: 0, counted: 0, over_limit: None }
    }

    /// The fixed collection `warm` the runner's `warm-up` export works on.
    pub(crate) fn warm_up() -> Self {
        let documents = vec![serde_json::json!({"id": 1, "name": "ada", "age": 2}), serde_json::json!({"id": "x", "name": "bo", "age": 1})];
        let warm = Loaded {
            name: "warm".into(),
            documents: Documents::Parsed(documents),
            complete: true,
            absent_ids: Vec::new(),
            reserved_id: None,
        };
        Self::new(vec![warm], 1 << 20)
    }

    fn call(&mut self, collection: Option<&str>, op: &str, args_json: &str) -> Result<String, CallError> {
        if let Some(message) = &self.over_limit {
            return Err(CallError::OutputLimit(message.clone()));
        }
        let args: Value = serde_json::from_str(args_json).map_err(|e| CallError::Op(OpError::Value(format!("{op}() arguments are not JSON: {e}"))))?;
        if matches!(op, "search" | "list") {
            check_query(op, args_json.len(), &args)?;
        }
        let which = collection.map_or(Which::Default, Which::Named);
        let result = anypath_collections::call(&mut self.store, which, op, args).map_err(CallError::Op)?;
        self.count_journal()?;
        serde_json::to_string(&result).map_err(|e| CallError::Op(OpError::Value(e.to_string())))
    }

    /// Adds the new journal entries' documents to the count; past the
    /// result cap, the run is over.
    fn count_journal(&mut self) -> Result<(), CallError> {
        for entry in &self.store.journal()[self.counted..] {
            if let Some(document) = &entry.document {
                let mut counter = ByteCounter(0);
                // Writing into a counter cannot fail.
                let _ = serde_json::to_writer(&mut counter, document);
                self.journal_bytes += counter.0;
            }
        }
        self.counted = self.store.journal().len();
        if self.journal_bytes > self.result_bytes {
            let message = format!("the journal exceeds {} bytes", self.result_bytes);
            self.over_limit = Some(message.clone());
            return Err(CallError::OutputLimit(message));
        }
        Ok(())
    }

    /// The journal, the reads and the verdicts, taken out of the store.
    pub(crate) fn finish(mut self) -> Result<Record, ExecError> {
        let reads = self.store.reads();
        let needs_data = self.store.needs_data().map(str::to_owned);
        let mutations = self
            .store
            .take_journal()
            .into_iter()
            .map(|m| {
                let document = m
                    .document
                    .map(|d| serde_json::value::to_raw_value(&d))
                    .transpose()
                    .map_err(|e| ExecError::Internal { message: format!("journal document: {e}") })?;
                Ok(Mutation { collection: m.collection, op: m.op, id: m.id, document })
            })
            .collect::<Result<_, ExecError>>()?;
        Ok(Record { mutations, reads, journal_bytes: self.journal_bytes, needs_data, over_limit: self.over_limit })
    }
}

/// Refuses a query whose work would grow past its bounds, before it runs.
fn check_query(op: &str, args_bytes: usize, args: &Value) -> Result<(), CallError> {
    if args_bytes > MAX_QUERY_ARGS_BYTES {
        return Err(CallError::Bound(format!("{op}() arguments take {args_bytes} bytes as JSON, over the limit of {MAX_QUERY_ARGS_BYTES}")));
    }
    let count = |name: &str| match args.get(name) {
        Some(Value::Array(items)) => items.len(),
        Some(Value::String(text)) => text.split(',').count(),
        Some(Value::Null) | None => 0,
        Some(_) => 1,
    };
    if count("sort") > MAX_SORT_KEYS {
        return Err(CallError::Bound(format!("{op}() takes at most {MAX_SORT_KEYS} sort keys")));
    }
    if count("embed") + count("expand") > MAX_RELATIONS {
        return Err(CallError::Bound(format!("{op}() takes at most {MAX_RELATIONS} embeds and expands")));
    }
    Ok(())
}

/// Counts the bytes written to it.
struct ByteCounter(u64);

impl io::Write for ByteCounter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0 += buf.len() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// What the `store` import needs of an instance's state; the embedder's
/// store data implements it (as wasmtime-wasi's `WasiView`).
pub(crate) trait HostStoreView {
    /// The instance's state as the `store` import sees it.
    fn host_store_ctx(&mut self) -> HostStoreCtx<'_>;
}

/// The part of an instance's state the `store` import works on.
pub(crate) struct HostStoreCtx<'a> {
    /// Past this instant the run is over: no host work starts.
    pub(crate) deadline: Instant,
    /// The collections of the execution in progress, if any.
    pub(crate) store: Option<&'a mut RequestStore>,
}

/// Serves the `store` import from each instance's [`HostStoreView`]; an
/// instance without a [`RequestStore`] (a session's, or one between runs)
/// gets `LookupError` on every call.
pub(crate) fn add_to_linker<T: HostStoreView + 'static>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    let mut instance = linker.instance(INTERFACE)?;
    instance.func_wrap(
        "call",
        |mut cx: StoreContextMut<'_, T>, (collection, op, args): (Option<String>, String, String)| {
            let started = Instant::now();
            let state = cx.data_mut().host_store_ctx();
            if started >= state.deadline {
                // No host work starts once the run is over.
                return Err(wasmtime::Trap::Interrupt.into());
            }
            let answer = match state.store {
                Some(store) => store.call(collection.as_deref(), &op, &args),
                None => Err(CallError::Op(OpError::NoCollection)),
            };
            charge(cx.as_context_mut(), started.elapsed())?;
            Ok((answer.map_err(WitOpError::from),))
        },
    )
}

/// Takes the fuel `spent` in the host from the run: a block looping over
/// store calls runs out of fuel as one looping in Python does.
fn charge<T>(mut cx: StoreContextMut<'_, T>, spent: Duration) -> wasmtime::Result<()> {
    let cost = u64::try_from(spent.as_micros()).unwrap_or(u64::MAX).saturating_mul(FUEL_PER_HOST_MICROSECOND);
    let fuel = cx.get_fuel()?;
    cx.set_fuel(fuel.saturating_sub(cost))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn members(result_bytes: u32) -> RequestStore {
        let loaded = Loaded { name: "members".into(), documents: Documents::Json(r#"[{"id": 1, "a": "x"}]"#.into()), complete: true, absent_ids: vec![], reserved_id: None };
        RequestStore::new(vec![loaded], result_bytes)
    }

    #[test]
    fn calls_reach_the_operations_by_name_and_keep_the_journal() {
        let mut store = members(1 << 20);
        assert_eq!(store.call(None, "get", "[\"1\"]").unwrap(), r#"{"a":"x","id":1}"#);
        assert_eq!(store.call(Some("members"), "insert", r#"[{"a": "y"}]"#).unwrap(), r#"{"a":"y","id":2}"#);
        assert!(matches!(store.call(Some("other"), "get", "[1]"), Err(CallError::Op(OpError::NotLoaded(_)))));
        let record = store.finish().unwrap();
        assert_eq!(record.mutations.len(), 1);
        assert_eq!(record.mutations[0].document.as_ref().map(|d| d.get()), Some(r#"{"a":"y","id":2}"#));
        assert_eq!(record.journal_bytes, r#"{"a":"y","id":2}"#.len() as u64);
        assert_eq!(record.reads, vec![ReadSet { collection: "members".into(), scanned: true, ids: vec!["1".into()] }]);
    }

    #[test]
    fn a_journal_past_the_result_cap_ends_every_later_call() {
        let mut store = members(40);
        store.call(None, "insert", r#"[{"a": "0123456789"}]"#).unwrap();
        assert!(matches!(store.call(None, "insert", r#"[{"a": "0123456789"}]"#), Err(CallError::OutputLimit(_))));
        assert!(matches!(store.call(None, "get", "[1]"), Err(CallError::OutputLimit(_))), "reads too, once over");
        assert!(store.finish().unwrap().over_limit.is_some());
    }

    #[test]
    fn queries_past_their_bounds_are_refused_before_they_run() {
        let mut store = members(1 << 20);
        let sort = vec!["a"; MAX_SORT_KEYS + 1].join(",");
        let refused = store.call(None, "list", &json!({"sort": sort}).to_string());
        assert!(matches!(refused, Err(CallError::Bound(_))), "{refused:?}");
        let relation = json!({"field": "f", "collection": "members", "key": "a"});
        let refused = store.call(None, "list", &json!({"embed": vec![relation; MAX_RELATIONS + 1]}).to_string());
        assert!(matches!(refused, Err(CallError::Bound(_))), "{refused:?}");
        let filters = json!([{"a": "x".repeat(MAX_QUERY_ARGS_BYTES)}]);
        assert!(matches!(store.call(None, "search", &filters.to_string()), Err(CallError::Bound(_))));
        assert!(store.call(None, "list", &json!({"sort": vec!["a"; MAX_SORT_KEYS].join(",")}).to_string()).is_ok());
        let record = store.finish().unwrap();
        assert!(record.reads[0].scanned, "only the list within bounds ran");
    }

    #[test]
    fn a_partial_load_is_remembered_when_the_error_is_caught() {
        let partial = Loaded { name: "m".into(), documents: Documents::Parsed(vec![]), complete: false, absent_ids: vec![], reserved_id: None };
        let mut store = RequestStore::new(vec![partial], 1 << 20);
        let refused = store.call(None, "get_all", "[]").unwrap_err();
        assert_eq!(WitOpError::from(refused).kind, "NeedsData");
        assert!(store.finish().unwrap().needs_data.is_some());
    }

    #[test]
    fn time_in_the_host_is_taken_from_the_fuel() {
        let engine = wasmtime::Engine::new(wasmtime::Config::new().consume_fuel(true)).unwrap();
        let mut store = wasmtime::Store::new(&engine, ());
        store.set_fuel(10_000_000).unwrap();
        charge(store.as_context_mut(), Duration::from_micros(1_000)).unwrap();
        assert_eq!(store.get_fuel().unwrap(), 10_000_000 - 1_000 * FUEL_PER_HOST_MICROSECOND);
        charge(store.as_context_mut(), Duration::from_secs(10)).unwrap();
        assert_eq!(store.get_fuel().unwrap(), 0, "a call longer than the budget leaves none");
    }

    #[test]
    fn arguments_that_are_not_json_are_a_value_error() {
        let mut store = members(1 << 20);
        let error = WitOpError::from(store.call(None, "get", "[1").unwrap_err());
        assert_eq!(error.kind, "ValueError");
    }
}
