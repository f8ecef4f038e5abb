//! Small records every host of a fleet reads and writes: what a transport
//! keeps about its own objects beside the sessions behind them (E2B's
//! sandboxes, Jupyter's kernels), so that a call for one lands on any host.
//!
//! A record is a map of named fields; a write sets only the fields it
//! names, so two hosts changing different parts of one record (a run's
//! count, a pause) do not undo each other.

use std::collections::BTreeMap;
use std::pin::Pin;

use crate::error::InterpreterError;

/// A record's fields by name.
pub type Fields = BTreeMap<String, String>;

/// What a call on the records gives, later.
pub type RecordCall<'a, T> = Pin<Box<dyn Future<Output = Result<T, InterpreterError>> + Send + 'a>>;

/// Records of one kind (`"e2b-sandbox"`, `"jupyter-kernel"`) shared by the
/// hosts of a fleet, named by id. Failures are `InterpreterError::SharedStore`
/// (a 503 with a retry hint).
pub trait SharedRecords: Send + Sync {
    /// Sets `fields` of record `id` (making it when it is new).
    fn write<'a>(&'a self, kind: &'a str, id: &'a str, fields: Fields) -> RecordCall<'a, ()>;

    /// Record `id`, when it exists.
    fn read<'a>(&'a self, kind: &'a str, id: &'a str) -> RecordCall<'a, Option<Fields>>;

    /// Removes record `id`.
    fn remove<'a>(&'a self, kind: &'a str, id: &'a str) -> RecordCall<'a, ()>;

    /// Every record of `kind`, by id.
    fn list<'a>(&'a self, kind: &'a str) -> RecordCall<'a, Vec<(String, Fields)>>;
}
