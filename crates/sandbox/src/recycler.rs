//! Drops used instances on a background thread.
//!
//! Dropping an instance resets its pool slot (restoring touched memory pages
//! from the image), which takes a noticeable fraction of a millisecond. Doing
//! it here keeps that work off the request path; the instance has already
//! produced its result and is never called again.

use std::ops::{Deref, DerefMut};
use std::sync::mpsc;

use crate::sandbox::Instance;

/// Instances waiting to be dropped; past this the request drops its own, so
/// retired instances can never pile up and exhaust the pool's slots.
const BACKLOG: usize = 4;

/// The handle to the dropping thread.
pub(crate) struct Recycler {
    sender: mpsc::SyncSender<Instance>,
}

impl Recycler {
    pub(crate) fn start() -> std::io::Result<Self> {
        let (sender, receiver) = mpsc::sync_channel::<Instance>(BACKLOG);
        std::thread::Builder::new().name("anypath-recycler".into()).spawn(move || {
            // Ends when the sandbox (the only sender) is dropped.
            for instance in receiver {
                drop(instance);
            }
        })?;
        Ok(Self { sender })
    }

    /// Lends `instance` for one execution; it is retired when the lease drops.
    pub(crate) fn lease(&self, instance: Instance) -> Lease<'_> {
        Lease { instance: Some(instance), recycler: self }
    }
}

/// An instance in use; on drop it goes to the recycler, whatever path ended the execution.
pub(crate) struct Lease<'a> {
    instance: Option<Instance>,
    recycler: &'a Recycler,
}

impl Deref for Lease<'_> {
    type Target = Instance;
    fn deref(&self) -> &Instance {
        self.instance.as_ref().expect("present until drop")
    }
}

impl DerefMut for Lease<'_> {
    fn deref_mut(&mut self) -> &mut Instance {
        self.instance.as_mut().expect("present until drop")
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        if let Some(instance) = self.instance.take() {
            // With a full backlog (or no thread) the instance is dropped right here instead.
            let _ = self.recycler.sender.try_send(instance);
        }
    }
}
