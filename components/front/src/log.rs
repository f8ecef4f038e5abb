//! One JSON log line per public request: never headers, bodies or data,
//! but which documents it committed.

use anypath_rest::PlanUsage;
use anypath_rest::settings::SettingError;
use anypath_wire::ExecReport;
use serde_json::{Value, json};

/// What a request committed, for the log line: `[{collection, op, id}]`.
#[derive(Default)]
pub struct Committed(pub Vec<Value>);

impl Committed {
    pub fn from_report(report: &ExecReport) -> Self {
        Self(report.mutations.iter().map(|m| json!({"collection": m.collection, "op": m.op, "id": m.id})).collect())
    }

    /// `members: insert 3, replace 4`, or `nothing`.
    pub fn describe(&self) -> String {
        if self.0.is_empty() {
            return "nothing".into();
        }
        let parts: Vec<String> = self
            .0
            .iter()
            .map(|m| format!("{}: {} {}", m["collection"].as_str().unwrap_or("?"), m["op"].as_str().unwrap_or("?"), m["id"]))
            .collect();
        parts.join(", ")
    }
}

/// LLM use of one request.
#[derive(Default)]
pub struct Usage {
    pub llm_calls: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub repairs: u64,
}

impl Usage {
    /// Adds what the planner reported for one of its answers.
    pub fn add(&mut self, reported: &PlanUsage) {
        self.llm_calls += u64::from(reported.llm_calls);
        self.input_tokens += reported.tokens.input_tokens;
        self.output_tokens += reported.tokens.output_tokens;
    }
}

/// Everything one request's line says.
pub struct RequestLine<'a> {
    pub request_id: &'a str,
    pub method: &'a str,
    pub path: &'a str,
    pub status: u16,
    pub detail: &'a str,
    /// Where the plan came from (`rules`, `cache`, `llm`; empty when none ran).
    pub plan: &'a str,
    pub usage: &'a Usage,
    pub committed: &'a Committed,
    pub config_errors: &'a [SettingError],
    pub duration_ms: f64,
}

impl RequestLine<'_> {
    /// Writes the line to stderr.
    pub fn write(&self) {
        let usage = self.usage;
        write(&json!({"request_id": self.request_id, "method": self.method, "path": self.path, "status": self.status,
               "detail": self.detail, "plan": self.plan, "llm_calls": usage.llm_calls, "repairs": usage.repairs,
               "input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens, "committed": self.committed.0,
               "config_errors": self.config_errors, "duration_ms": self.duration_ms}));
    }
}

/// Writes one JSON log line to stderr in a single write: `eprintln!` writes
/// each formatted piece on its own, and every write is a host call and a
/// system call (a tenth of a request's CPU on the fast path).
pub fn write(line: &Value) {
    let mut bytes = serde_json::to_vec(line).unwrap_or_default();
    bytes.push(b'\n');
    let _ = std::io::Write::write_all(&mut std::io::stderr(), &bytes);
}
