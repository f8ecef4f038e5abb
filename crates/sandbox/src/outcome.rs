//! What one execution produces: a reply and journal, or a typed error, plus metrics.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// The HTTP-style answer a block assigned to `REPLY`.
#[derive(Debug, Clone, Serialize)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    /// JSON body, or none when the block gave none.
    pub body: Option<Box<RawValue>>,
}

/// Kind of change in the mutation journal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MutationOp {
    Insert,
    Replace,
    Patch,
    Delete,
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

/// Captured stdout and stderr, each capped.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Output {
    pub stdout: String,
    pub stdout_truncated: bool,
    pub stderr: String,
    pub stderr_truncated: bool,
}

/// What a block read of one collection; the store re-checks it at commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadSet {
    pub collection: String,
    /// The block depended on the whole collection (a list, search, count or
    /// an id taken from the highest).
    pub scanned: bool,
    /// Ids (as strings) the block looked up, found or not.
    pub ids: Vec<String>,
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

/// Why an execution produced no reply. Each limit has its own kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ExecError {
    /// Refused by the policy gate before running.
    #[error("policy: {message} ({node} at line {line})")]
    Policy { node: String, line: u32, column: u32, message: String },
    /// The block raised.
    #[error("exception: {type_name}: {message}")]
    Exception { type_name: String, message: String, traceback: String },
    /// REPLY missing or unusable.
    #[error("invalid reply: {message}")]
    InvalidReply { message: String },
    /// The fuel budget ran out.
    #[error("fuel exhausted: budget {budget}")]
    FuelExhausted { budget: u64 },
    /// The wall-clock deadline passed (also while blocked in a host call).
    #[error("timeout after {timeout_ms} ms")]
    Timeout { timeout_ms: u64 },
    /// The instance tried to grow memory past the cap.
    #[error("memory limit of {limit_bytes} bytes reached")]
    MemoryLimit { limit_bytes: u64 },
    /// Reply, journal or captured output exceeded its cap.
    #[error("output limit: {message}")]
    OutputLimit { message: String },
    /// The block's source is larger than allowed.
    #[error("code is {size_bytes} bytes, limit is {limit_bytes}")]
    CodeTooLarge { size_bytes: u64, limit_bytes: u64 },
    /// Context plus collections are larger than allowed.
    #[error("input is {size_bytes} bytes, limit is {limit_bytes}")]
    InputTooLarge { size_bytes: u64, limit_bytes: u64 },
    /// The request itself was malformed (bad context JSON, bad collection).
    #[error("invalid request: {message}")]
    InvalidRequest { message: String },
    /// The instance trapped for a reason other than a limit.
    #[error("trap: {message}")]
    Trap { message: String },
    /// The host failed; not the block's fault.
    #[error("internal error: {message}")]
    Internal { message: String },
    /// The block reached past a partial load; the caller reloads whole and re-runs.
    #[error("needs data: {message}")]
    NeedsData { message: String },
}

impl ExecError {
    /// The stable name of this error kind, as serialised.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Policy { .. } => "policy",
            Self::Exception { .. } => "exception",
            Self::InvalidReply { .. } => "invalid_reply",
            Self::FuelExhausted { .. } => "fuel_exhausted",
            Self::Timeout { .. } => "timeout",
            Self::MemoryLimit { .. } => "memory_limit",
            Self::OutputLimit { .. } => "output_limit",
            Self::CodeTooLarge { .. } => "code_too_large",
            Self::InputTooLarge { .. } => "input_too_large",
            Self::InvalidRequest { .. } => "invalid_request",
            Self::Trap { .. } => "trap",
            Self::Internal { .. } => "internal",
            Self::NeedsData { .. } => "needs_data",
        }
    }
}

/// A failed execution with whatever output was captured before it failed.
#[derive(Debug, Clone, Serialize)]
pub struct Failure {
    pub error: ExecError,
    #[serde(flatten)]
    pub output: Output,
}

/// Resource use of one execution.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Metrics {
    /// Wall-clock time from request to result, in microseconds.
    pub duration_us: u64,
    /// Fuel the call consumed. After a timeout this can undercount: a tight
    /// guest loop keeps its counter in a register until the next call.
    pub fuel_consumed: u64,
    /// Largest linear memory size seen, in bytes.
    pub peak_memory_bytes: u64,
    /// Whether a pre-started instance served the call.
    pub warm: bool,
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
