//! The interpreter's housekeeping while the service runs: idle sessions
//! hibernated, expired ones removed.

use std::time::Duration;

use anypath_interpreter::Interpreter;

/// How often expired sessions are swept.
const SWEEP_EVERY: Duration = Duration::from_secs(30);

/// Hibernates idle sessions (checked every half of their idle time, between
/// 1 and 30 s) and removes expired ones every [`SWEEP_EVERY`], until the
/// interpreter is gone.
pub fn spawn_sweeper(interpreter: std::sync::Weak<Interpreter>) {
    tokio::spawn(async move {
        let every = match interpreter.upgrade() {
            Some(i) => (i.config().hibernate_after_idle / 2).clamp(Duration::from_secs(1), SWEEP_EVERY),
            None => return,
        };
        let mut tick = tokio::time::interval(every);
        let mut swept = tokio::time::Instant::now();
        loop {
            tick.tick().await;
            let Some(interpreter) = interpreter.upgrade() else { return };
            let hibernated = interpreter.hibernation().hibernate_idle().await;
            if hibernated > 0 {
                tracing::info!(hibernated, "idle sessions hibernated");
            }
            if swept.elapsed() < SWEEP_EVERY {
                continue;
            }
            swept = tokio::time::Instant::now();
            let removed = tokio::task::spawn_blocking(move || interpreter.sessions().sweep()).await.unwrap_or(0);
            if removed > 0 {
                tracing::info!(removed, "expired sessions removed");
            }
        }
    });
}
