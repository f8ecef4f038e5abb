//! The limits the running service enforces, as its callers may be told them
//! (the MCP tool descriptions state these, not the defaults).

use std::time::Duration;

use anypath_interpreter::Interpreter;
use anypath_sandbox::{FileQuota, Limits, Runtime};

/// What a session and a run may use, as configured at start.
#[derive(Debug, Clone)]
pub(crate) struct RunningLimits {
    /// Per file, per session and files per session.
    pub quota: FileQuota,
    /// The largest file read back inline.
    pub read_cap_bytes: u64,
    /// Idle time after which a session is removed.
    pub session_ttl: Duration,
    /// Each runtime sessions may run, with the limits of one run; the
    /// default runtime first.
    pub runtimes: Vec<(Runtime, Limits)>,
}

impl RunningLimits {
    /// The limits `interpreter` was started with.
    pub fn of(interpreter: &Interpreter) -> Self {
        let config = interpreter.config();
        let mut runtimes: Vec<(Runtime, Limits)> = interpreter.sandboxes().iter().map(|s| (s.runtime(), s.limits())).collect();
        runtimes.sort_by_key(|(runtime, _)| *runtime != interpreter.default_runtime());
        Self {
            quota: config.quota,
            read_cap_bytes: config.read_cap_bytes,
            session_ttl: config.default_ttl,
            runtimes,
        }
    }
}
