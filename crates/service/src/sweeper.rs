//! The interpreter's housekeeping while the service runs: idle sessions
//! hibernated, expired ones (and expired snapshots) removed, and sessions handed over when another
//! host sharing the session store asks for them.

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
            match interpreter.snapshots().sweep().await {
                Ok(0) => {}
                Ok(removed) => tracing::info!(removed, "expired snapshots removed"),
                Err(error) => tracing::warn!(%error, "expired snapshots were not swept"),
            }
            let removed = tokio::task::spawn_blocking(move || interpreter.sessions().sweep()).await.unwrap_or(0);
            if removed > 0 {
                tracing::info!(removed, "expired sessions removed");
            }
        }
    });
}

/// Hands over each session another host asks for (on a shared session
/// store), one at a time per session, until the interpreter is gone.
pub fn spawn_handovers(interpreter: std::sync::Weak<Interpreter>) {
    let Some(mut requests) = interpreter.upgrade().and_then(|i| i.sessions().handover_requests()) else { return };
    // A host that waits asks again every second: one hand-over of a session at a time.
    let going: std::sync::Arc<std::sync::Mutex<std::collections::HashSet<(String, String)>>> = std::sync::Arc::default();
    tokio::spawn(async move {
        while let Some((tenant, id)) = requests.recv().await {
            let Some(interpreter) = interpreter.upgrade() else { return };
            let key = (tenant.clone(), id.clone());
            if !going.lock().unwrap_or_else(|p| p.into_inner()).insert(key.clone()) {
                continue;
            }
            let going = going.clone();
            // Each on its own task: a session waiting for its run does not hold up the others.
            tokio::spawn(async move {
                let started = std::time::Instant::now();
                match interpreter.sessions().hand_over(&tenant, &id).await {
                    Ok(()) => tracing::info!(%tenant, session = %id, elapsed_us = started.elapsed().as_micros() as u64, "session handed over"),
                    Err(error) => tracing::warn!(%tenant, session = %id, %error, "a session asked for was not handed over"),
                }
                going.lock().unwrap_or_else(|p| p.into_inner()).remove(&key);
            });
        }
    });
}

/// Interrupts each run another host asks this one to stop (on a shared
/// session store), until the interpreter is gone.
pub(crate) fn spawn_interrupts(interpreter: std::sync::Weak<Interpreter>, runs: std::sync::Weak<crate::background_runs::RunRegistry>) {
    let Some(mut requests) = interpreter.upgrade().and_then(|i| i.runs().interrupt_requests()) else { return };
    tokio::spawn(async move {
        while let Some((tenant, id, run_id)) = requests.recv().await {
            let Some(interpreter) = interpreter.upgrade() else { return };
            let stopped = match &run_id {
                Some(run_id) => {
                    // The run ends as interrupted here, where it is tracked.
                    if let Some(tracked) = runs.upgrade().and_then(|runs| runs.tracked_here(&tenant, run_id)) {
                        tracked.mark_interrupt_asked();
                    }
                    interpreter.runs().interrupt_run(&tenant, &id, run_id)
                }
                None => interpreter.runs().interrupt(&tenant, &id),
            };
            tracing::info!(%tenant, session = %id, run = run_id.as_deref().unwrap_or("any"), stopped = matches!(stopped, Ok(true)), "an interrupt another host asked for");
        }
    });
}
