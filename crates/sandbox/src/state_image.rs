//! Session state that outlives its instance: a live instance's memories and
//! mutable globals captured between runs into a compact image, and restored
//! into a fresh instance of the same component (hibernate, resume, fork).
//!
//! Sessions run an instrumented copy of their runtime's component
//! ([`instrument`]) whose extra exports let the host read and write that
//! state; the guest's code is unchanged.

pub(crate) mod access;
mod adapter;
#[cfg(target_os = "linux")]
pub(crate) mod give_back;
pub(crate) mod image;
pub(crate) mod instrument;
pub(crate) mod layout;
mod ranges;
mod blocks;
mod reader;
mod segments;
pub(crate) mod shared;
pub mod chunked;
#[cfg(test)]
mod fuzz_tests;
#[cfg(target_os = "linux")]
pub(crate) mod pagemap;

pub use image::StateError;
pub use segments::SegmentMemo;
pub use shared::SharedState;
pub use instrument::InstrumentError;
#[cfg(target_os = "linux")]
pub(crate) use pagemap::private_bytes;
