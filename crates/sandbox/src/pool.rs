//! Instances started ahead of demand, each used for one execution and dropped.
//!
//! Starting a CPython instance costs most of a millisecond; a background task
//! keeps a few ready so that cost leaves the request path. Isolation is
//! unchanged: an instance never serves a second request.

use std::sync::{Mutex, Weak};
use std::time::Duration;

use tokio::sync::mpsc;

use crate::bindings::Runner;
use crate::block::BlockInner;
use crate::engine::Instance;

/// A bounded queue of ready instances refilled by a background task.
pub(crate) struct WarmPool {
    ready: Mutex<mpsc::Receiver<Instance<Runner>>>,
}

impl WarmPool {
    /// Starts the refill task on the current Tokio runtime.
    pub(crate) fn start(runner: Weak<BlockInner>, size: usize) -> Self {
        let (sender, ready) = mpsc::channel(size);
        tokio::spawn(async move {
            loop {
                let Some(inner) = runner.upgrade() else { return };
                let started = inner.start_instance(true).await;
                drop(inner);
                match started {
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
    pub(crate) fn take(&self) -> Option<Instance<Runner>> {
        self.ready.lock().ok()?.try_recv().ok()
    }
}
