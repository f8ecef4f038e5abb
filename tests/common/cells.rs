//! Runs on a runtime's own live instances, without the service around
//! them: what the session-state suites share.

use anypath_sandbox::{CellReport, CellRequest, LimitOverrides, LiveInstance, SessionRuntime};

/// A live instance of `runtime` seeing `dir` at `/mnt/data`, under the
/// runtime's own limits; nothing starts until its first run.
pub fn live(runtime: &SessionRuntime, dir: &std::path::Path) -> LiveInstance {
    runtime.live_instance(Some(dir.to_path_buf()), &LimitOverrides::default())
}

/// Runs `code` in `instance`.
pub fn run(instance: &mut LiveInstance, code: &str) -> CellReport {
    super::block_on(instance.run(CellRequest { code: code.into(), ..CellRequest::default() }))
}

/// The run's stdout, after asserting it ended with no error.
pub fn ok(report: &CellReport) -> &str {
    assert_eq!((report.exit_code, &report.error), (0, &None), "{report:?}");
    &report.output.stdout
}
