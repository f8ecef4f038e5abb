//! What each live session costs the host, measured after its runs: the
//! pages of its instance's memories it has made its own (see
//! `anypath_sandbox::MemoryRegions`), which the memory budget, the health
//! report and the metrics count instead of linear memory sizes.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use anypath_sandbox::LiveInstance;

use crate::interpreter::Interpreter;
use crate::session::Session;

impl Interpreter {
    /// Measures what `session`'s live instance holds of its own now and
    /// keeps it as the session's memory; 0 without a live instance. The
    /// page tables are read on the blocking pool.
    pub(crate) async fn measure_memory(
        self: &Arc<Self>,
        session: &Session,
        live: &mut LiveInstance,
    ) {
        let bytes = match live.memory_regions().await {
            Some(regions) => self
                .off_workers(move |_| Ok(regions.private_bytes()))
                .await
                .unwrap_or_else(|_| live.memory_bytes()),
            None => live.memory_bytes(),
        };
        session.memory_bytes.store(bytes, Relaxed);
    }
}
