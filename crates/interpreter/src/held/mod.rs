//! What the interpreter holds in memory while it runs: each listed
//! session's record and the table of them (`session`), homes made ahead for
//! new sessions (`ready`) and the counters of what it did (`stats`).

pub(crate) mod ready;
pub(crate) mod session;
pub(crate) mod stats;
