//! What the MCP server tells a model about itself: its instructions and the
//! descriptions of the tools that have limits, written from the limits the
//! server runs with, so a model plans for this server's quotas and run
//! bounds rather than the defaults.

use std::time::Duration;

use anypath_sandbox::Limits;
use rmcp::handler::server::router::tool::ToolRouter;

use crate::interpreter_service::RunningLimits;

/// Sets the descriptions of the tools whose limits come from the running
/// configuration (`upload_file`, `run_python`, `read_artifact`).
pub(super) fn describe<S>(router: &mut ToolRouter<S>, limits: &RunningLimits) {
    for (tool, description) in [("upload_file", upload_file(limits)), ("run_python", run_python(limits)), ("read_artifact", read_artifact(limits))] {
        if let Some(route) = router.map.get_mut(tool) {
            route.attr.description = Some(description.into());
        }
    }
}

/// What the server tells a model before it calls anything.
pub(super) fn instructions(limits: &RunningLimits) -> String {
    format!(
        "A Python 3 code interpreter in a WebAssembly sandbox (no network, no host files). \
Work happens in sessions you name: pass the same session_id (1-64 of A-Z a-z 0-9 - _) to every call. \
upload_file or run_python creates the session on first use, on the runtime it names, else `{}`: \
`python-data` (numpy, pandas, matplotlib, scipy, scikit-learn, statsmodels, seaborn, reportlab, \
openpyxl, ...; the common ones already imported) or `python` (standard library only); a session \
keeps its runtime. Files live in /mnt/data; datasets provided for you are read-only under /data \
(list_files names them; attach_dataset adds one you staged). Variables, imports \
and functions persist across run_python calls in one session until close_session or an idle timeout \
({}), also while the session is parked (its state saved to disk when idle and restored on the next \
run; a run's `state` says `resumed` then); fork_session copies a session to try another approach (fork_session_many makes up to 100 copies in one call), snapshot_session keeps one for start_from_snapshot to begin new sessions from. Files a run creates or changes come back as artifacts with signed download_url \
links; read_artifact returns a file's bytes (images also as image content).{}",
        default_runtime(limits),
        duration(limits.session_ttl),
        javascript_note(limits)
    )
}

/// What the instructions add when sessions may run JavaScript.
fn javascript_note(limits: &RunningLimits) -> &'static str {
    if limits.runtimes.iter().any(|(runtime, _)| *runtime == anypath_sandbox::Runtime::Javascript) {
        " A session made with runtime `javascript` runs JavaScript instead (QuickJS: top-level let/const/function persist across calls, \
console.log is stdout, the last expression is the result, require('fs') reads and writes the session's files)."
    } else {
        ""
    }
}

/// The runtime a session gets without naming one: the first listed.
fn default_runtime(limits: &RunningLimits) -> &'static str {
    limits.runtimes.first().map_or("python", |(runtime, _)| runtime.name())
}

fn upload_file(limits: &RunningLimits) -> String {
    let quota = limits.quota;
    format!(
        "Write a file into the session's /mnt/data (the session is created when new). \
Returns its path as code sees it. Fails when the file exists unless overwrite is true, when the name \
has a directory part, or past the session's quota ({} per file, {} and {} files per \
session). Cannot run while code runs in the same session.",
        bytes(quota.max_file_bytes),
        bytes(quota.max_session_bytes),
        quota.max_files
    )
}

fn run_python(limits: &RunningLimits) -> String {
    let bounds: Vec<String> = limits.runtimes.iter().map(|(runtime, l)| format!("{runtime}: {}", run_bounds(l))).collect();
    format!(
        "Run Python 3 code in the session (created when new); /mnt/data holds its files, /data its \
read-only datasets (list_files names them). \
State persists: variables, imports and functions from earlier calls in the session are still defined. \
The code runs as a notebook cell: the value of a last expression (unless it ends with `;`), each \
display(obj) call and every matplotlib figure (plt.show(), or left open at the end) come back in \
results, in order (text/plain, plus text/html for a DataFrame, image/png for a figure, also shown \
as image content); `_` holds the last value; top-level `await` works; IPython magics (%pip, !ls) do not. \
Returns exit_code (0 on success), stdout, stderr, results, traceback, error (kind: exception, fuel_exhausted, \
timeout, memory_limit, ...), state_reset (true when earlier state was lost, e.g. after a limit), \
quota_exceeded, metrics, and artifacts: every file the run created or changed, with a signed \
download_url. The standard library is available, and in python-data sessions numpy, pandas, \
matplotlib (save a figure to /mnt/data to keep it as a file), scipy, scikit-learn, statsmodels, seaborn, pillow, reportlab, \
openpyxl, xlsxwriter, pypdf, lxml and jinja2; there is no network. Runs are bounded by \
fuel (CPU), memory and wall-clock time, per runtime ({}); output past its cap is cut and flagged. \
limits may lower them for one run, never raise them.",
        bounds.join("; ")
    )
}

/// One runtime's bounds on a run, as a model reads them.
fn run_bounds(limits: &Limits) -> String {
    format!(
        "{} wall clock, {} memory, {} fuel, code up to {}, stdout up to {}, stderr up to {}",
        wall_clock(limits.timeout_ms),
        bytes(limits.memory_bytes),
        limits.fuel,
        bytes(limits.max_code_bytes),
        bytes(u64::from(limits.stdout_bytes)),
        bytes(u64::from(limits.stderr_bytes)),
    )
}

fn read_artifact(limits: &RunningLimits) -> String {
    format!(
        "Read a file of the session: its bytes as base64 with mime_type, size_bytes and \
sha256. An image also comes back as image content, so you can look at a chart you drew. Files over the \
read cap ({}) are not returned inline: the error gives a download_url instead.",
        bytes(limits.read_cap_bytes)
    )
}

/// A size in the largest binary unit that divides it: `7 MiB`, `1 KiB`, `1000 bytes`.
fn bytes(n: u64) -> String {
    for (unit, size) in [("GiB", 1u64 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)] {
        if n >= size && n.is_multiple_of(size) {
            return format!("{} {unit}", n / size);
        }
    }
    format!("{n} bytes")
}

/// A run's wall clock in seconds (`60 s`), or milliseconds when not whole.
fn wall_clock(ms: u64) -> String {
    if ms >= 1000 && ms.is_multiple_of(1000) { format!("{} s", ms / 1000) } else { format!("{ms} ms") }
}

/// A duration in the largest unit that divides it: `4 hours`, `15 minutes`, `5 s`, `250 ms`.
fn duration(d: Duration) -> String {
    let ms = d.as_millis();
    let plural = |n: u128, unit: &str| if n == 1 { format!("1 {unit}") } else { format!("{n} {unit}s") };
    match ms {
        _ if ms >= 3_600_000 && ms.is_multiple_of(3_600_000) => plural(ms / 3_600_000, "hour"),
        _ if ms >= 60_000 && ms.is_multiple_of(60_000) => plural(ms / 60_000, "minute"),
        _ if ms >= 1000 && ms.is_multiple_of(1000) => format!("{} s", ms / 1000),
        _ => format!("{ms} ms"),
    }
}

#[cfg(test)]
mod tests {
    use anypath_sandbox::{FileQuota, Runtime};

    use super::*;

    /// Limits unlike every default: 7 MiB files, a 3 KiB read cap, 9-minute
    /// sessions, a 7 s python timeout and 96 MiB of memory.
    fn started_with() -> RunningLimits {
        let python = Limits { timeout_ms: 7000, memory_bytes: 96 << 20, ..Limits::default() };
        RunningLimits {
            quota: FileQuota { max_file_bytes: 7 << 20, max_session_bytes: 70 << 20, max_files: 42 },
            read_cap_bytes: 3 << 10,
            session_ttl: Duration::from_secs(9 * 60),
            runtimes: vec![(Runtime::Python, python), (Runtime::PythonData, Limits::python_data())],
        }
    }

    #[test]
    fn descriptions_state_the_limits_the_server_runs_with() {
        let limits = started_with();
        let upload = upload_file(&limits);
        assert!(upload.contains("7 MiB per file, 70 MiB and 42 files per session"), "{upload}");
        assert!(!upload.contains("100 MiB"), "{upload}");
        let read = read_artifact(&limits);
        assert!(read.contains("read cap (3 KiB)") && !read.contains("5 MiB"), "{read}");
        let run = run_python(&limits);
        assert!(run.contains("python: 7 s wall clock, 96 MiB memory"), "{run}");
        assert!(run.contains("python-data: 60 s wall clock, 512 MiB memory"), "{run}");
        assert!(instructions(&limits).contains("idle timeout (9 minutes)"), "{}", instructions(&limits));
        assert!(instructions(&limits).contains("read-only under /data") && run.contains("/data its"), "a model is told where datasets are");
        assert!(instructions(&limits).contains("names, else `python`:"), "the default named: {}", instructions(&limits));
    }

    #[test]
    fn sizes_and_durations_read_in_their_largest_whole_unit() {
        assert_eq!(bytes(1 << 30), "1 GiB");
        assert_eq!(bytes(512 << 10), "512 KiB");
        assert_eq!(bytes(1000), "1000 bytes");
        assert_eq!(bytes((1 << 20) + 1), format!("{} bytes", (1 << 20) + 1));
        assert_eq!(duration(Duration::from_secs(4 * 3600)), "4 hours");
        assert_eq!(duration(Duration::from_secs(60)), "1 minute");
        assert_eq!(duration(Duration::from_secs(90)), "90 s");
        assert_eq!(duration(Duration::from_millis(250)), "250 ms");
        assert_eq!(wall_clock(60_000), "60 s");
        assert_eq!(wall_clock(1500), "1500 ms");
    }
}
