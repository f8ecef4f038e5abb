//! cargo-nextest, the scheduler `cargo xtask test` runs the tests with: every
//! test in a process of its own, independent tests side by side
//! (`.config/nextest.toml`). Installed pinned from crates.io when the machine
//! has none.

use crate::budget::Budget;
use crate::shell::{cargo_command, run, step};

/// The release installed when `cargo nextest` is missing.
const NEXTEST_VERSION: &str = "0.9.143";

/// Makes `cargo nextest` available, installing the pinned release if needed.
pub fn ensure(budget: &Budget) -> anyhow::Result<()> {
    let present = cargo_command().args(["nextest", "--version"]).output().is_ok_and(|out| out.status.success());
    if present {
        return Ok(());
    }
    budget.time_beside("install: cargo-nextest", || {
        step(&format!("installing cargo-nextest {NEXTEST_VERSION} from crates.io (once; a few minutes)"));
        run(cargo_command().args(["install", "--locked", "cargo-nextest", "--version", NEXTEST_VERSION]))
    })
}
