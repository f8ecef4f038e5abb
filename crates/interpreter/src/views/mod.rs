//! The parts [`crate::Interpreter`] hands out, each a view over its state
//! that does one kind of work and adds its own accessor (`sessions()`,
//! `runs()`, ...), with the request structs of its operations beside it.
//! Sessions' lifecycle ([`sessions`]), with forks (`forks`) and hand-over between hosts
//! (`handover`) and the other ways to open one ([`shared_files`],
//! [`sandbox_open`]); [`runs`]; [`commands`]; [`files`]; [`artifacts`]; [`datasets`];
//! [`hibernation`], with what a live session costs (`footprint`); and
//! [`snapshots`].

pub mod artifacts;
pub(crate) mod cell_magics;
pub mod commands;
pub(crate) mod escapes;
pub mod datasets;
pub mod files;
pub(crate) mod forks;
pub(crate) mod footprint;
pub(crate) mod handover;
pub mod hibernation;
pub mod runs;
pub mod sandbox_open;
pub mod sessions;
pub mod shared_files;
pub mod snapshots;
