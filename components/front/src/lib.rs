//! The public REST face, shared by the two components that answer it: the
//! store (every request the rules plan, served where the data is) and the
//! gateway (everything else: the planner, the sandbox, health and docs).
//!
//! Both must answer a request alike whichever of them serves it, so what a
//! public request passes before it is served ([`checks`]), how its `REPLY`
//! becomes the response ([`reply`]), its log line ([`log`]) and the settings
//! they read ([`settings`]) live here once. [`respond`] hands every
//! component's answer to the host with its body already queued.

pub mod checks;
pub mod log;
pub mod reply;
pub mod respond;
pub mod settings;

pub use settings::FrontSettings;
