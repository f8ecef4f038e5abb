//! Instances started ahead of demand, each used for one execution and dropped.
//!
//! Starting a CPython instance costs most of a millisecond; a background task
//! keeps a few ready so that cost leaves the request path. Isolation is
//! unchanged: an instance never serves a second request.

use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::mpsc;

/// A bounded queue of ready instances refilled by a background task.
pub(crate) struct WarmPool<I> {
    ready: Mutex<mpsc::Receiver<I>>,
}

impl<I: Send + 'static> WarmPool<I> {
    /// Starts the refill task on the current Tokio runtime, keeping up to
    /// `size` instances ready. Each refill calls `start`: the start of one
    /// instance, or `None` once whoever owns the pool is gone (the task then
    /// ends, so the pool never keeps its owner alive).
    pub(crate) fn start<S, F>(size: usize, start: S) -> Self
    where
        S: Fn() -> Option<F> + Send + 'static,
        F: Future<Output = wasmtime::Result<I>> + Send,
    {
        let (sender, ready) = mpsc::channel(size);
        tokio::spawn(async move {
            loop {
                let Some(starting) = start() else { return };
                match starting.await {
                    Ok(instance) => {
                        if sender.send(instance).await.is_err() {
                            return;
                        }
                    }
                    Err(error) => {
                        tracing::error!(error = %format!("{error:#}"), "warm instance failed to start");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                }
            }
        });
        Self { ready: Mutex::new(ready) }
    }

    /// A ready instance, if one is waiting.
    pub(crate) fn take(&self) -> Option<I> {
        self.ready.lock().ok()?.try_recv().ok()
    }
}
