//! Code-interpreter sessions shared by several hosts: a [`SessionStore`]
//! that keeps each session's state images and files in an S3-compatible
//! object store and its small, hot records on Redis (which host holds it
//! live, under a lease; the pointer to its newest image and files; its
//! metadata).
//!
//! One host holds a session at a time. A host asked for a session another
//! holds asks that host, through Redis, to hand it over (park its state in
//! an image, keep its files, let go of its lease) and then claims it; a
//! dead host's lease lapses within its length. Each lease carries a token
//! that only grows: images and file lists are immutable objects, and only
//! the holder of the newest token moves the pointer to them, so a host that
//! was paused or cut off never overwrites a newer state.
//!
//! The store's methods are called off the async workers (the interpreter's
//! rule for its store); they wait on the runtime they were opened on.
//!
//! [`SessionStore`]: anypath_interpreter::SessionStore

mod artifacts;
mod coordination;
mod error;
mod file_sync;
mod images;
mod location;
mod records;
mod store;
mod sweep;

pub use error::SharedStoreError;
pub use location::ObjectLocation;
pub use store::{SharedSessionStore, SharedStoreOptions};
pub use sweep::SweepReport;
