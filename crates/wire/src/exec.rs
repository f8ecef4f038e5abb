//! An execution's report as it crosses from the sandbox host to its callers.

use serde::{Deserialize, Serialize};

/// Kind of change in the mutation journal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    Insert,
    Replace,
    Patch,
    Delete,
}

/// One journal entry as a caller reads it: the document as plain JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MutationRecord {
    pub collection: String,
    pub op: Op,
    /// The document id (a JSON number or string).
    pub id: serde_json::Value,
    /// The document after the change; none for a delete.
    pub document: Option<serde_json::Value>,
}

/// What `POST /v1/exec` answers, as its callers read it: on success the
/// block's `REPLY`, its journal and what it read; on failure the error;
/// the captured output and the metrics either way.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExecReport {
    pub ok: bool,
    /// The block's `REPLY` (`status`, `headers`, `body`), checked by whoever answers with it.
    #[serde(default)]
    pub reply: serde_json::Value,
    #[serde(default)]
    pub mutations: Vec<MutationRecord>,
    #[serde(default)]
    pub reads: Vec<ReadSet>,
    #[serde(default)]
    pub error: Option<ExecError>,
    #[serde(flatten)]
    pub output: Output,
    pub metrics: Metrics,
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
    /// Stopped from outside before it finished (its client went away, an
    /// interrupt, its sandbox killed); like a trap, the instance is dropped.
    #[error("interrupted: the run was stopped before it finished")]
    Interrupted {},
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
            Self::Interrupted {} => "interrupted",
        }
    }

    /// Whether the code ran into one of its limits (fuel, deadline, memory,
    /// output): what fair admission counts against a tenant.
    pub fn is_limit(&self) -> bool {
        matches!(self, Self::FuelExhausted { .. } | Self::Timeout { .. } | Self::MemoryLimit { .. } | Self::OutputLimit { .. })
    }

    /// Whether the block itself is at fault (refused by the gate, raised,
    /// gave no usable reply, ran past a limit, was too large): a planner
    /// may repair such a block; anything else is the host's or the caller's.
    pub fn is_block_fault(&self) -> bool {
        self.is_limit()
            || matches!(self, Self::Policy { .. } | Self::Exception { .. } | Self::InvalidReply { .. } | Self::CodeTooLarge { .. })
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip_and_classify() {
        let error = ExecError::FuelExhausted { budget: 7 };
        let json = serde_json::to_value(&error).expect("serialises");
        assert_eq!(json["kind"], error.kind());
        assert_eq!(serde_json::from_value::<ExecError>(json).expect("parses"), error);
        assert!(error.is_limit() && error.is_block_fault());
        let internal = ExecError::Internal { message: String::new() };
        assert!(!internal.is_limit() && !internal.is_block_fault());
        assert!(!ExecError::NeedsData { message: String::new() }.is_block_fault());
    }

    #[test]
    fn interrupted_is_tagged_alone_and_is_nobodys_fault() {
        let error = ExecError::Interrupted {};
        let json = serde_json::to_value(&error).expect("serialises");
        assert_eq!(json, serde_json::json!({"kind": "interrupted"}));
        assert_eq!(serde_json::from_value::<ExecError>(json).expect("parses"), error);
        assert!(!error.is_limit() && !error.is_block_fault());
    }
}
