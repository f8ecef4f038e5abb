//! Stopping a running session cell from elsewhere: a client that went
//! away, a kernel interrupt, a sandbox being killed. The cell's store sees
//! the flag at its next epoch tick (running wasm), and a guest blocked in a
//! sleep is woken. Where the runtime's CPython signal state is known
//! (`keyboard_interrupt`), the cell then raises `KeyboardInterrupt` and the
//! session keeps its state, as in a notebook; a cell that does not end
//! within the grace, or one no Python handler would interrupt, is trapped:
//! like any trap, that drops its instance (the files stay, the Python state
//! is reset).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::Notify;

/// A cloneable switch that stops the run it was given to.
#[derive(Clone, Default)]
pub struct Interrupt {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    raised: AtomicBool,
    woken: Notify,
}

impl Interrupt {
    /// A switch not raised yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Stops the run: idempotent, from any thread or task.
    pub fn interrupt(&self) {
        self.inner.raised.store(true, Ordering::SeqCst);
        self.inner.woken.notify_waiters();
    }

    /// Whether it has been raised.
    pub fn is_interrupted(&self) -> bool {
        self.inner.raised.load(Ordering::SeqCst)
    }

    /// Resolves once raised (at once when it already is).
    pub(crate) async fn raised(&self) {
        loop {
            let woken = self.inner.woken.notified();
            if self.is_interrupted() {
                return;
            }
            woken.await;
        }
    }
}

impl std::fmt::Debug for Interrupt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Interrupt").field("raised", &self.is_interrupted()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block_on<F: std::future::Future>(future: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime").block_on(future)
    }

    #[test]
    fn raising_is_seen_by_every_clone_and_idempotent() {
        let interrupt = Interrupt::new();
        let clone = interrupt.clone();
        assert!(!clone.is_interrupted());
        interrupt.interrupt();
        interrupt.interrupt();
        assert!(clone.is_interrupted());
        assert_eq!(format!("{clone:?}"), "Interrupt { raised: true }");
    }

    #[test]
    fn an_awaiting_task_is_woken_and_a_late_one_returns_at_once() {
        block_on(async {
            let interrupt = Interrupt::new();
            let waiter = tokio::spawn({
                let interrupt = interrupt.clone();
                async move { interrupt.raised().await }
            });
            tokio::task::yield_now().await;
            interrupt.interrupt();
            waiter.await.expect("the waiter is woken");
            interrupt.raised().await;
        });
    }
}
