//! `GET /sandboxes/{id}/metrics`: E2B's `SandboxMetric`s of a sandbox. No
//! history is kept: each call measures the sandbox as it is now (the live
//! instance's memory, the bytes of its tree, whether a cell runs) and
//! answers that one sample when the asked window holds the present, and
//! nothing for a window wholly before the sandbox started or in the past.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anypath_interpreter::{EntryKind, files, sessions};
use axum::Json;
use axum::extract::{Path, RawQuery, State};
use axum::response::IntoResponse;
use serde::Serialize;

use super::E2b;
use super::call::ControlCall;
use super::control::rfc3339;
use super::error::E2bError;

/// Levels of the tree summed for its bytes: deeper than any tree the
/// session's file count allows.
const TREE_DEPTH: u32 = 64;

/// The window's bounds are whole seconds: a present within one of them is in it.
const SECOND_PRECISION: Duration = Duration::from_secs(1);

/// `SandboxMetric` of E2B's API.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct SandboxMetric {
    timestamp: String,
    timestamp_unix: u64,
    cpu_count: u32,
    /// 100 while a cell runs (a sandbox runs one at a time, on one CPU), 0 when idle.
    cpu_used_pct: f64,
    /// The live instance's linear memory (0 while none is live).
    mem_used: u64,
    mem_total: u64,
    mem_cache: u64,
    /// Bytes of the files in the sandbox's tree.
    disk_used: u64,
    disk_total: u64,
}

/// The asked window, in Unix seconds.
#[derive(Debug, Default, PartialEq)]
struct Window {
    start: Option<u64>,
    end: Option<u64>,
}

impl Window {
    fn parse(raw: Option<&str>) -> Result<Self, E2bError> {
        let mut window = Self::default();
        for (key, value) in url::form_urlencoded::parse(raw.unwrap_or("").as_bytes()) {
            let seconds = || value.parse::<u64>().map_err(|_| E2bError::bad_request(format!("{key} must be Unix seconds, not {value:?}")));
            match key.as_ref() {
                "start" => window.start = Some(seconds()?),
                "end" => window.end = Some(seconds()?),
                _ => {}
            }
        }
        Ok(window)
    }

    /// Whether a sample taken `now` of a sandbox started at `started` answers this window.
    fn holds(&self, now: SystemTime, started: SystemTime) -> bool {
        let at = |seconds: u64| UNIX_EPOCH + Duration::from_secs(seconds);
        let after_start = self.start.is_none_or(|start| now + SECOND_PRECISION >= at(start));
        let before_end = self.end.is_none_or(|end| at(end) + SECOND_PRECISION >= now && at(end) + SECOND_PRECISION >= started);
        after_start && before_end
    }
}

pub(crate) async fn metrics(
    State(e2b): State<Arc<E2b>>,
    ControlCall(caller): ControlCall,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<impl IntoResponse, E2bError> {
    let sandbox = e2b.owned(&caller, &id).await?;
    let window = Window::parse(query.as_deref())?;
    let now = SystemTime::now();
    if !window.holds(now, sandbox.started_at) {
        return Ok(Json(Vec::new()));
    }
    let session = e2b.service.call(&caller, sessions::DescribeSession { session_id: sandbox.id.clone() }).await?;
    let tree = e2b.service.call(&caller, files::ListDir { session_id: sandbox.id.clone(), path: String::new(), depth: TREE_DEPTH }).await?;
    let disk_used = tree.iter().filter(|entry| entry.kind == EntryKind::File).map(|entry| entry.size).sum();
    let limits = e2b.service.limits();
    let mem_total = limits.runtimes.iter().find(|(runtime, _)| *runtime == session.runtime).map_or(0, |(_, l)| l.memory_bytes);
    let metric = SandboxMetric {
        timestamp: rfc3339(now),
        timestamp_unix: now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()),
        cpu_count: 1,
        cpu_used_pct: if e2b.runs.running(&sandbox.id) { 100.0 } else { 0.0 },
        mem_used: session.memory_bytes,
        mem_total,
        mem_cache: 0,
        disk_used,
        disk_total: limits.quota.max_session_bytes,
    };
    Ok(Json(vec![metric]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_holds_the_present_only() {
        let started = UNIX_EPOCH + Duration::from_secs(1_000);
        let now = UNIX_EPOCH + Duration::from_secs(1_010);
        assert!(Window::default().holds(now, started));
        assert!(Window { start: Some(999), end: Some(1_010) }.holds(now, started));
        // The end's whole second, rounded down by a client, still holds a present within it.
        assert!(Window { start: Some(999), end: Some(1_010) }.holds(now + Duration::from_millis(900), started));
        assert!(!Window { start: Some(900), end: Some(950) }.holds(now, started), "before the sandbox started");
        assert!(!Window { start: Some(1_005), end: Some(1_007) }.holds(now, started), "in the past");
        assert!(!Window { start: Some(1_020), end: None }.holds(now, started), "in the future");
        assert_eq!(Window::parse(Some("start=5&end=9")).expect("parses"), Window { start: Some(5), end: Some(9) });
        assert!(Window::parse(Some("start=soon")).is_err());
    }
}
