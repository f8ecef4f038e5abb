//! Where a kernel's code keeps its files. On a Jupyter server every kernel
//! works in the server's root directory: a file one kernel writes is there
//! for the next, after the first is shut down (Open WebUI starts and shuts
//! down a kernel per code block and relies on it). Here, by default, the
//! kernels of one tenant work in one directory held by a hidden session of
//! that tenant ([`WORKSPACE`]); each kernel is a session over it, so
//! shutting a kernel down removes its Python state and leaves the files.
//! Another tenant's kernels work in that tenant's own directory.
//!
//! A fleet keeps each kernel's files its own: a kernel's session moves
//! between hosts on its own, and one directory cannot follow several.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anypath_interpreter::sessions::OpenSession;
use anypath_interpreter::shared_files::{KeepOpen, OpenOver};
use anypath_sandbox::Runtime;

use super::Jupyter;
use super::error::JupyterError;
use crate::interpreter_service::Caller;
use crate::options::KernelFiles;

/// The hidden session holding a tenant's kernel files.
pub(crate) const WORKSPACE: &str = "jupyter-files";

impl Jupyter {
    /// Opens the session behind a new kernel, over the tenant's kernel
    /// files when they are shared.
    pub(crate) async fn open_kernel_session(&self, caller: &Caller, session_id: &str, runtime: Runtime) -> Result<(), JupyterError> {
        let ttl = Some(self.session_ttl);
        match self.kernel_files {
            KernelFiles::PerKernel => {
                self.service.call(caller, OpenSession { session_id: session_id.to_owned(), ttl, runtime: Some(runtime) }).await?;
            }
            KernelFiles::Shared => {
                let open = OpenOver { files_of: WORKSPACE.to_owned(), files_ttl: ttl, session_id: session_id.to_owned(), ttl, runtime: Some(runtime) };
                self.service.call(caller, open).await?;
                // Opening over them marked the files used.
                self.files_kept.due(&caller.tenant);
            }
        }
        Ok(())
    }

    /// Marks the tenant's kernel files used before a cell runs (once a
    /// [`KEEP_EVERY`]), so they live as long as the kernels using them (and
    /// are made again, empty, should they have expired anyway).
    pub(crate) async fn keep_kernel_files(&self, caller: &Caller) {
        if self.kernel_files != KernelFiles::Shared || !self.files_kept.due(&caller.tenant) {
            return;
        }
        if let Err(error) = self.service.call(caller, KeepOpen { session_id: WORKSPACE.to_owned(), ttl: Some(self.session_ttl) }).await {
            tracing::warn!(tenant = %caller.tenant, %error, "the kernels' shared files could not be kept open");
        }
    }
}

/// How often cells mark their tenant's kernel files used: far within the
/// files' TTL (the longest session TTL), and rarely enough that a cell
/// seldom waits for it.
const KEEP_EVERY: Duration = Duration::from_secs(60);

/// When each tenant's kernel files were last marked used.
#[derive(Default)]
pub(crate) struct Kept(Mutex<HashMap<String, Instant>>);

impl Kept {
    /// Whether the tenant's files are due to be marked used; if so, they
    /// count as marked now.
    fn due(&self, tenant: &str) -> bool {
        let mut kept = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        match kept.get(tenant) {
            Some(at) if now.duration_since(*at) < KEEP_EVERY => false,
            _ => {
                kept.insert(tenant.to_owned(), now);
                true
            }
        }
    }
}

/// The mode kernels run in: `asked`, except on a fleet (see the module's doc).
pub(crate) fn effective(asked: KernelFiles, fleet: bool) -> KernelFiles {
    if fleet && asked == KernelFiles::Shared {
        tracing::info!("Jupyter kernels keep their files per kernel on a fleet: a kernel's session moves between hosts on its own");
        return KernelFiles::PerKernel;
    }
    asked
}


#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_tenants_files_are_marked_once_a_while() {
        let kept = Kept::default();
        assert!(kept.due("alice"), "the first cell marks them");
        assert!(!kept.due("alice"), "the next, moments later, does not");
        assert!(kept.due("bob"), "another tenant's files are their own");
    }

    #[test]
    fn a_fleet_keeps_kernel_files_per_kernel() {
        assert_eq!(effective(KernelFiles::Shared, false), KernelFiles::Shared);
        assert_eq!(effective(KernelFiles::Shared, true), KernelFiles::PerKernel);
        assert_eq!(effective(KernelFiles::PerKernel, false), KernelFiles::PerKernel);
    }
}
