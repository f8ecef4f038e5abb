//! What the interpreter did since it started, counted as it happens and
//! read at once for `/metrics`.

use std::sync::atomic::{AtomicU64, Ordering};

/// Running counts; every field only grows.
#[derive(Default)]
pub(crate) struct Stats {
    pub(crate) sessions_created: AtomicU64,
    pub(crate) sessions_started_ahead: AtomicU64,
    pub(crate) sessions_closed: AtomicU64,
    pub(crate) sessions_expired: AtomicU64,
    pub(crate) sweeps: AtomicU64,
    pub(crate) artifacts_kept: AtomicU64,
    pub(crate) artifact_bytes_kept: AtomicU64,
}

impl Stats {
    pub(crate) fn add(counter: &AtomicU64, by: u64) {
        counter.fetch_add(by, Ordering::Relaxed);
    }
}

/// The counts at one moment, and the sessions as they are now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct StatsSnapshot {
    /// Sessions whose instance holds Python state now.
    pub sessions_live: u64,
    /// What the live sessions' instances hold of their own, together: the
    /// pages they wrote, as measured after each one's last run (what the
    /// memory budget counts).
    pub sessions_live_bytes: u64,
    /// Sessions whose state waits in a saved image.
    pub sessions_hibernated: u64,
    /// Sessions in the table (live, hibernated or not started).
    pub sessions_open: u64,
    pub sessions_created: u64,
    /// New sessions that took an instance started ahead of them (never a
    /// fork or a copy of a snapshot, whose state replaces an instance's).
    pub sessions_started_ahead: u64,
    pub sessions_closed: u64,
    /// Sessions (and leftover directories) the sweeps removed as expired.
    pub sessions_expired: u64,
    /// Cleanup sweeps run.
    pub sweeps: u64,
    pub artifacts_kept: u64,
    pub artifact_bytes_kept: u64,
}

impl Stats {
    pub(crate) fn snapshot(&self, sessions_live: u64, sessions_live_bytes: u64, sessions_hibernated: u64, sessions_open: u64) -> StatsSnapshot {
        let read = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        StatsSnapshot {
            sessions_live,
            sessions_live_bytes,
            sessions_hibernated,
            sessions_open,
            sessions_created: read(&self.sessions_created),
            sessions_started_ahead: read(&self.sessions_started_ahead),
            sessions_closed: read(&self.sessions_closed),
            sessions_expired: read(&self.sessions_expired),
            sweeps: read(&self.sweeps),
            artifacts_kept: read(&self.artifacts_kept),
            artifact_bytes_kept: read(&self.artifact_bytes_kept),
        }
    }
}
