//! How the service stops: on Ctrl-C or SIGTERM, every listener told at
//! once, and every live session's state written to disk for the next
//! process to resume.

use std::sync::Arc;

use anypath_interpreter::Interpreter;
use futures_util::future::BoxFuture;

/// Resolves on Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(term) => term,
            Err(_) => return std::future::pending().await,
        };
        tokio::select! { _ = ctrl_c => {}, _ = term.recv() => {} }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}

/// Resolves once `stopped` says so.
pub async fn stopped_signal(mut stopped: tokio::sync::watch::Receiver<bool>) {
    let _ = stopped.wait_for(|s| *s).await;
}

/// On a graceful stop: every live session's state goes to disk, for the
/// next process to resume.
pub fn hibernate_all(interpreter: &Arc<Interpreter>) -> BoxFuture<'_, ()> {
    Box::pin(async move {
        let started = std::time::Instant::now();
        let hibernated = interpreter.hibernation().hibernate_all().await;
        // With their files kept and their holds released, another host claims them at once.
        let handed_over = interpreter.sessions().hand_over_all().await;
        tracing::info!(hibernated, handed_over, elapsed_ms = started.elapsed().as_millis() as u64, "sessions hibernated for the stop");
    })
}
