//! What `python` and `node` in the shell share: a fresh instance of a
//! runtime on the command's tree (never a host process, never the
//! session's live instance), and what the program run in it left.

use std::path::PathBuf;

use crate::layout::FilesLayout;
use crate::limits::LimitOverrides;
use crate::live::LiveInstance;
use crate::quota_fs::FileQuota;
use crate::session::SessionRuntime;

/// Exit status of a program stopped by a limit: killed, as by SIGKILL.
pub(crate) const STOPPED: i32 = 137;

/// Where a command's program starts: a runtime, the session's tree as the
/// session sees it, and its limits.
#[derive(Clone)]
pub struct ProgramHost {
    pub runtime: SessionRuntime,
    pub dir: PathBuf,
    pub layout: FilesLayout,
    pub datasets: Option<PathBuf>,
    pub quota: Option<FileQuota>,
    pub limits: LimitOverrides,
    /// The operator's wheels, which `pip` installs from (`python` only).
    pub wheelhouse: Option<PathBuf>,
}

impl ProgramHost {
    /// A fresh instance of the runtime on the tree.
    pub(crate) fn fresh_instance(&self) -> LiveInstance {
        let mut instance = self.runtime.live_instance(Some(self.dir.clone()), &self.limits).with_layout(self.layout);
        if let Some(datasets) = &self.datasets {
            instance = instance.with_datasets(datasets.clone());
        }
        if let Some(quota) = self.quota {
            instance = instance.with_quota(quota);
        }
        if let Some(wheelhouse) = &self.wheelhouse {
            instance = instance.with_wheelhouse(wheelhouse.clone());
        }
        instance
    }
}

/// What a command's program left.
pub(crate) struct ProgramExit {
    pub(crate) code: i32,
    pub(crate) stdout: Vec<u8>,
    pub(crate) stderr: Vec<u8>,
}

impl ProgramExit {
    /// Ended with `code`, having written `stdout` and `stderr`.
    pub(crate) fn said(code: i32, stdout: &str, stderr: &str) -> Self {
        Self { code, stdout: stdout.as_bytes().to_vec(), stderr: stderr.as_bytes().to_vec() }
    }

    /// `program` is not there (no runtime for it): the shell's 127.
    pub(crate) fn missing(program: &str, why: &str) -> Self {
        Self::said(127, "", &format!("{program}: command not found ({why})\n"))
    }
}
