//! Where calls on one session wait for one another: one opening of a
//! session at a time (`opening_gate`), the claims of sessions not listed
//! yet that a hand-over must leave alone (`claims`), and a session's file
//! calls beside its runs (`files_gate`).

pub(crate) mod claims;
pub(crate) mod files_gate;
pub(crate) mod opening_gate;
