//! What one execution produces: a reply and journal, or a typed error, plus metrics.

use serde::Serialize;
use serde_json::value::RawValue;

pub use anypath_wire::{ExecError, Metrics, Op as MutationOp, Output, ReadSet};

/// The HTTP-style answer a block assigned to `REPLY`.
#[derive(Debug, Clone, Serialize)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    /// JSON body, or none when the block gave none.
    pub body: Option<Box<RawValue>>,
}

/// One change a block made to a collection; the store applies it, not the block.
#[derive(Debug, Clone, Serialize)]
pub struct Mutation {
    pub collection: String,
    pub op: MutationOp,
    /// The document id (a JSON number or string).
    pub id: serde_json::Value,
    /// The document after the change; none for a delete.
    pub document: Option<Box<RawValue>>,
}

/// A completed execution.
#[derive(Debug, Clone, Serialize)]
pub struct Success {
    pub reply: Reply,
    pub mutations: Vec<Mutation>,
    pub reads: Vec<ReadSet>,
    #[serde(flatten)]
    pub output: Output,
}

/// A failed execution with whatever output was captured before it failed.
#[derive(Debug, Clone, Serialize)]
pub struct Failure {
    pub error: ExecError,
    #[serde(flatten)]
    pub output: Output,
}

/// Everything one execution reports.
#[derive(Debug, Clone)]
pub struct Report {
    pub outcome: Result<Success, Failure>,
    pub metrics: Metrics,
}

impl Report {
    /// The error kind, or `"ok"`.
    pub fn outcome_name(&self) -> &'static str {
        match &self.outcome {
            Ok(_) => "ok",
            Err(f) => f.error.kind(),
        }
    }
}

/// Flat JSON: `{"ok": true, "reply", "mutations", "stdout", ..., "metrics"}` or
/// `{"ok": false, "error": {"kind", ...}, "stdout", ..., "metrics"}`.
impl Serialize for Report {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct View<'a, T: Serialize> {
            ok: bool,
            #[serde(flatten)]
            result: &'a T,
            metrics: &'a Metrics,
        }
        match &self.outcome {
            Ok(success) => View { ok: true, result: success, metrics: &self.metrics }.serialize(serializer),
            Err(failure) => View { ok: false, result: failure, metrics: &self.metrics }.serialize(serializer),
        }
    }
}
