//! What the interpreter keeps beyond one process, each store behind its
//! own type: each session's home, metadata and state image
//! ([`session_store`], one seam with a local directory tree as its first
//! implementation), artifacts ([`artifact_store`], published to a fleet
//! through [`artifact_share`], typed by [`mime`], linked to by
//! [`signing`]), datasets ([`dataset_store`]) and the small records hosts
//! share ([`shared_records`], kept in files on one host by
//! `local_records`).

pub mod artifact_share;
pub mod artifact_store;
pub mod dataset_store;
pub(crate) mod local_records;
pub mod mime;
pub mod session_store;
pub mod shared_records;
pub mod signing;
