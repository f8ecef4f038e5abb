//! Drops used instances on a background thread.
//!
//! Dropping an instance resets its pool slot (restoring touched memory pages
//! from the image), which takes a noticeable fraction of a millisecond. Doing
//! it here keeps that work off the request path; the instance has already
//! produced its result and is never called again.

use std::ops::{Deref, DerefMut};
use std::sync::mpsc;

use crate::bindings::Runner;
use crate::engine::Instance;

/// What a REST block ran in.
type BlockInstance = Instance<Runner>;

/// Instances waiting to be dropped; past this the request drops its own, so
/// retired instances can never pile up and exhaust the pool's slots.
const BACKLOG: usize = 4;

/// The handle to the dropping thread.
pub(crate) struct Recycler {
    sender: mpsc::SyncSender<BlockInstance>,
}

impl Recycler {
    pub(crate) fn start() -> std::io::Result<Self> {
        let (sender, receiver) = mpsc::sync_channel::<BlockInstance>(BACKLOG);
        std::thread::Builder::new().name("anypath-recycler".into()).spawn(move || {
            // Ends when the block runner (the only sender) is dropped.
            for instance in receiver {
                drop(instance);
            }
        })?;
        Ok(Self { sender })
    }

    /// Lends `instance` for one execution; it is retired when the lease drops.
    pub(crate) fn lease(&self, instance: BlockInstance) -> Lease<'_> {
        Lease { instance: Some(instance), recycler: self }
    }
}

/// An instance in use; on drop it goes to the recycler, whatever path ended the execution.
pub(crate) struct Lease<'a> {
    instance: Option<BlockInstance>,
    recycler: &'a Recycler,
}

impl Deref for Lease<'_> {
    type Target = BlockInstance;
    fn deref(&self) -> &BlockInstance {
        self.instance.as_ref().expect("present until drop")
    }
}

impl DerefMut for Lease<'_> {
    fn deref_mut(&mut self) -> &mut BlockInstance {
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
