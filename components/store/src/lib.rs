//! The store component: per-tenant JSON collections on Spin key-value.
//!
//! Private, and the only component with a key-value grant. Layout per
//! collection (see `anypath_rest::journal`): an index value, one immutable
//! value per document version, a counter for reserved ids and a creation
//! ticket. `POST /load` reads what a plan needs (some ids or everything,
//! plus a reserved id); `POST /commit` re-checks what the block read, writes
//! the new document values, then swaps the index with a compare-and-swap (a
//! journal over several collections goes through `transaction`), so a
//! journal lands whole or not at all and no concurrent update is lost. Also
//! the plan cache (`/plan-cache/get|put|evict`), the planner memo
//! (`/planner-memo/get|put`) and `/describe` (a short
//! summary of collections for the planner's prompt).

mod describe;
mod keys;
mod memo;
mod plans;
mod transaction;

use std::collections::BTreeMap;

use anypath_rest::journal::{Applied, Index, JournalError, MutationRecord, ReadCheck};
use anypath_rest::plan::LoadSpec;
use anypath_rest::{ErrorEnvelope, RestError};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use spin_sdk::http::{IntoResponse, Method, Request, Response};
use spin_sdk::http_component;
use spin_sdk::wit::wasi::keyvalue::{atomics, store};

use keys::CollectionKeys;
use transaction::Transaction;

/// The key-value store label granted to this component in `spin.toml`.
const STORE_LABEL: &str = "default";
/// Index swaps retried when only unrelated documents changed in between.
const MAX_SWAP_ATTEMPTS: usize = 64;
/// Loads retried when a document value vanished under a concurrent commit.
const MAX_LOAD_ATTEMPTS: usize = 8;

#[derive(Deserialize)]
struct LoadRequest {
    tenant: String,
    collections: Vec<LoadSpec>,
}

#[derive(Serialize)]
struct Loaded {
    name: String,
    version: u64,
    complete: bool,
    documents: Vec<Value>,
    absent_ids: Vec<String>,
    reserved_id: Option<i64>,
    /// Tag of each loaded document, echoed back in the commit's read check.
    tags: BTreeMap<String, String>,
}

#[derive(Deserialize)]
struct CommitRequest {
    tenant: String,
    changes: Vec<Change>,
}

#[derive(Deserialize)]
struct Change {
    name: String,
    #[serde(flatten)]
    check: ReadCheck,
    #[serde(default)]
    mutations: Vec<MutationRecord>,
}

fn open() -> Result<store::Bucket, StoreError> {
    Ok(store::open(STORE_LABEL)?)
}

/// Why a request to the store failed.
pub(crate) enum StoreError {
    Rest(RestError),
    Backend(String),
}

impl From<RestError> for StoreError {
    fn from(e: RestError) -> Self {
        Self::Rest(e)
    }
}

impl From<store::Error> for StoreError {
    fn from(e: store::Error) -> Self {
        Self::Backend(format!("key-value: {e:?}"))
    }
}

impl From<JournalError> for StoreError {
    fn from(e: JournalError) -> Self {
        match e {
            JournalError::Conflict { .. } => Self::Rest(RestError::Conflict(e.to_string())),
            JournalError::Inconsistent { .. } => Self::Rest(RestError::BadRequest(e.to_string())),
        }
    }
}

#[http_component]
fn handle(request: Request) -> anyhow::Result<impl IntoResponse> {
    let request_id = request.header("x-request-id").and_then(|v| v.as_str()).unwrap_or("-").to_owned();
    let result = match (request.method(), request.path()) {
        (Method::Post, "/load") => parse(request.body()).and_then(load),
        (Method::Post, "/commit") => parse(request.body()).and_then(commit),
        (Method::Post, "/describe") => parse(request.body()).and_then(|r| describe::describe(&open()?, r)).and_then(|v| encode(&v)),
        (Method::Post, "/plan-cache/get") => parse(request.body()).and_then(|r| plans::get(&open()?, r)).and_then(|v| encode(&v)),
        (Method::Post, "/plan-cache/put") => parse(request.body()).and_then(|r| plans::put(&open()?, r)).and_then(|v| encode(&v)),
        (Method::Post, "/planner-memo/get") => parse(request.body()).and_then(|r| memo::get(&open()?, r)).and_then(|v| encode(&v)),
        (Method::Post, "/planner-memo/put") => parse(request.body()).and_then(|r| memo::put(&open()?, r)).and_then(|v| encode(&v)),
        (Method::Post, "/plan-cache/evict") => {
            parse(request.body()).and_then(|r| plans::evict(&open()?, r)).and_then(|v| encode(&v))
        }
        _ => Err(StoreError::Rest(RestError::NotFound(format!("no store endpoint {}", request.path())))),
    };
    Ok(match result {
        Ok(body) => json(200, body),
        Err(StoreError::Rest(e)) => json(e.status(), serde_json::to_vec(&ErrorEnvelope::from_error(&e, &request_id))?),
        Err(StoreError::Backend(message)) => {
            json(500, serde_json::to_vec(&ErrorEnvelope::new("store_failed", message, &request_id))?)
        }
    })
}

fn parse<T: for<'de> Deserialize<'de>>(body: &[u8]) -> Result<T, StoreError> {
    serde_json::from_slice(body).map_err(|e| RestError::BadRequest(format!("invalid store request: {e}")).into())
}

pub(crate) fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, StoreError> {
    serde_json::to_vec(value).map_err(|e| StoreError::Backend(e.to_string()))
}

pub(crate) fn decode<T: for<'de> Deserialize<'de>>(bytes: &[u8], what: &str) -> Result<T, StoreError> {
    serde_json::from_slice(bytes).map_err(|e| StoreError::Backend(format!("stored {what} is corrupt: {e}")))
}

/// The index as readers see it (a multi-collection commit under way shows
/// its result only once decided).
pub(crate) fn read_index(bucket: &store::Bucket, keys: &CollectionKeys) -> Result<Index, StoreError> {
    match bucket.get(&keys.index())? {
        Some(bytes) => transaction::visible(bucket, keys, decode(&bytes, "index")?),
        None => Ok(Index::default()),
    }
}

fn load(request: LoadRequest) -> Result<Vec<u8>, StoreError> {
    let bucket = store::open(STORE_LABEL)?;
    let mut loaded = Vec::with_capacity(request.collections.len());
    for spec in request.collections {
        let keys = CollectionKeys::new(&request.tenant, &spec.name)?;
        loaded.push(load_one(&bucket, &keys, spec)?);
    }
    encode(&serde_json::json!({ "collections": loaded }))
}

fn load_one(bucket: &store::Bucket, keys: &CollectionKeys, spec: LoadSpec) -> Result<Loaded, StoreError> {
    for _ in 0..MAX_LOAD_ATTEMPTS {
        let index = read_index(bucket, keys)?;
        let wanted: Vec<String> = match &spec.ids {
            Some(ids) => ids.clone(),
            None => index.docs.keys().cloned().collect(),
        };
        let mut loaded = Loaded {
            name: spec.name.clone(),
            version: index.version,
            complete: spec.ids.is_none(),
            documents: Vec::with_capacity(wanted.len()),
            absent_ids: Vec::new(),
            reserved_id: None,
            tags: BTreeMap::new(),
        };
        let mut vanished = false;
        for id in wanted {
            let Some(tag) = index.docs.get(&id) else {
                loaded.absent_ids.push(id);
                continue;
            };
            match bucket.get(&keys.document(tag))? {
                Some(bytes) => loaded.documents.push(decode(&bytes, "document")?),
                // Superseded by a commit after the index was read: read again.
                None => {
                    vanished = true;
                    break;
                }
            }
            loaded.tags.insert(id, tag.clone());
        }
        if vanished {
            continue;
        }
        if spec.reserve_id {
            loaded.reserved_id = Some(reserve_id(bucket, keys, &index)?);
        }
        return Ok(loaded);
    }
    Err(StoreError::Rest(RestError::Conflict(format!("{} kept changing while it was read", spec.name))))
}

/// A fresh integer id above every stored one: an atomic increment, so
/// concurrent creates never share an id and never need to re-run.
fn reserve_id(bucket: &store::Bucket, keys: &CollectionKeys, index: &Index) -> Result<i64, StoreError> {
    let counter = keys.next_id();
    let id = atomics::increment(bucket, &counter, 1)?;
    if id > index.max_int_id {
        return Ok(id);
    }
    // A client-chosen id moved the highest past the counter: jump over it.
    Ok(atomics::increment(bucket, &counter, index.max_int_id - id + 1)?)
}

fn commit(request: CommitRequest) -> Result<Vec<u8>, StoreError> {
    let bucket = store::open(STORE_LABEL)?;
    let mut work = Vec::with_capacity(request.changes.len());
    for change in request.changes {
        let keys = CollectionKeys::new(&request.tenant, &change.name)?;
        if change.mutations.iter().any(|m| m.collection != change.name) {
            return Err(RestError::BadRequest("a change may only hold mutations of its own collection".into()).into());
        }
        work.push((keys, change));
    }
    // Collections the block only read are checked here and not locked; the
    // others are checked inside `swap_in`, against the index they replace.
    for (keys, change) in work.iter().filter(|(_, c)| c.mutations.is_empty()) {
        read_index(&bucket, keys)?.check(&change.name, &change.check)?;
    }
    work.retain(|(_, c)| !c.mutations.is_empty());
    work.sort_by(|(_, a), (_, b)| a.name.cmp(&b.name));
    let mut versions = serde_json::Map::new();
    match work.as_slice() {
        [] => {}
        [(keys, change)] => {
            let version = commit_one(&bucket, keys, change)?;
            versions.insert(change.name.clone(), version.into());
        }
        _ => {
            for (name, version) in commit_many(&bucket, work)? {
                versions.insert(name, version.into());
            }
        }
    }
    encode(&serde_json::json!({ "versions": versions }))
}

/// A random prefix for the tags of the document values one commit writes.
fn tag_prefix() -> String {
    format!("{:016x}", wasi::random::random::get_random_u64())
}

/// One collection's journal, committed by one index swap.
fn commit_one(bucket: &store::Bucket, keys: &CollectionKeys, change: &Change) -> Result<u64, StoreError> {
    let mut written = Vec::new();
    match swap_in(bucket, keys, change, &tag_prefix(), &mut written, |_, next| next) {
        Ok(swapped) => {
            forget(bucket, keys, &swapped.applied.superseded);
            Ok(swapped.applied.index.version)
        }
        Err(e) => {
            forget(bucket, keys, &written);
            Err(e)
        }
    }
}

/// Journals over several collections: locked in name order, then one commit point.
fn commit_many(bucket: &store::Bucket, work: Vec<(CollectionKeys, Change)>) -> Result<Vec<(String, u64)>, StoreError> {
    let mut tx = Transaction::begin(bucket, &work[0].0)?;
    let mut written: Vec<(usize, Vec<String>)> = Vec::new();
    let mut results = Vec::new();
    for (i, (keys, change)) in work.iter().enumerate() {
        let mut tags = Vec::new();
        let swapped = swap_in(bucket, keys, change, &tag_prefix(), &mut tags, |before, next| tx.lock(before, next));
        written.push((i, tags));
        match swapped {
            Ok(swapped) => {
                results.push((change.name.clone(), swapped.applied.index.version, swapped.applied.superseded));
                tx.locked.push(transaction::Locked { keys: keys.clone(), bytes: swapped.bytes, before: swapped.before });
            }
            Err(e) => {
                tx.abort(bucket)?;
                for (i, tags) in &written {
                    forget(bucket, &work[*i].0, tags);
                }
                return Err(e);
            }
        }
    }
    if !tx.commit(bucket)? {
        for (i, tags) in &written {
            forget(bucket, &work[*i].0, tags);
        }
        return Err(StoreError::Rest(RestError::Conflict("the commit was aborted after waiting too long; try again".into())));
    }
    Ok(results
        .into_iter()
        .zip(&work)
        .map(|((name, version, superseded), (keys, _))| {
            forget(bucket, keys, &superseded);
            (name, version)
        })
        .collect())
}

/// What one index swap did.
struct Swapped {
    /// The committed state the journal was applied to.
    before: Index,
    applied: Applied,
    /// The index value swapped in.
    bytes: Vec<u8>,
}

/// The compare-and-swap loop on one collection's index: settles other
/// transactions' locks, re-checks the reads, applies the journal, writes
/// the document values (once, into `written`), and swaps in what `make`
/// builds from the committed state and the applied index.
fn swap_in(
    bucket: &store::Bucket,
    keys: &CollectionKeys,
    change: &Change,
    prefix: &str,
    written: &mut Vec<String>,
    make: impl Fn(&Index, Index) -> Index,
) -> Result<Swapped, StoreError> {
    let entries: Vec<&MutationRecord> = change.mutations.iter().collect();
    let mut lost_ticket = false;
    for _ in 0..MAX_SWAP_ATTEMPTS {
        let cas = atomics::Cas::new(bucket, &keys.index())?;
        let current = cas.current()?;
        let before: Index = match &current {
            Some(bytes) => decode(bytes, "index")?,
            None => Index::default(),
        };
        if let (Some(bytes), Some(_)) = (&current, &before.lock) {
            transaction::settle(bucket, keys, bytes, &before)?;
            continue;
        }
        before.check(&change.name, &change.check)?;
        let applied = before.apply(&entries, prefix)?;
        if written.is_empty() {
            for (tag, document) in &applied.writes {
                bucket.set(&keys.document(tag), &encode(document)?)?;
                written.push(tag.clone());
            }
        }
        let bytes = encode(&make(&before, applied.index.clone()))?;
        if current.is_none() {
            // A swap on an absent key is an upsert on Spin's SQLite store,
            // so creation goes to whoever takes the first ticket; the
            // others wait for its index to appear and then swap as usual.
            if !lost_ticket && atomics::increment(bucket, &keys.ticket(), 1)? == 1 {
                bucket.set(&keys.index(), &bytes)?;
                return Ok(Swapped { before, applied, bytes });
            }
            lost_ticket = true;
            pause_ms(1);
            continue;
        }
        match atomics::swap(cas, &bytes) {
            Ok(()) => return Ok(Swapped { before, applied, bytes }),
            Err(atomics::CasError::CasFailed(_)) => continue,
            Err(atomics::CasError::StoreError(e)) => return Err(e.into()),
        }
    }
    Err(StoreError::Rest(RestError::Conflict(format!("{} is too busy to commit to; try again", change.name))))
}

/// Removes document values no index names (superseded, or of a failed commit).
/// Readers holding an old index re-read when a value is gone.
fn forget(bucket: &store::Bucket, keys: &CollectionKeys, tags: &[String]) {
    for tag in tags {
        let _ = bucket.delete(&keys.document(tag));
    }
}

pub(crate) fn pause_ms(ms: u64) {
    wasi::clocks::monotonic_clock::subscribe_duration(ms * 1_000_000).block();
}

fn json(status: u16, body: Vec<u8>) -> Response {
    Response::builder().status(status).header("content-type", "application/json").body(body).build()
}
