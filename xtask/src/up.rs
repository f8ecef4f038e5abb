//! `cargo xtask up`: the build, then the app on 127.0.0.1:3000.

use std::process::Command;

use crate::build::build_all;
use crate::shell::{run, step};

/// `cargo xtask up`: build, then run the app on 127.0.0.1:3000 until Ctrl-C.
pub fn up(extra: &[String]) -> anyhow::Result<()> {
    let built = build_all()?;
    step("running the app on http://127.0.0.1:3000 (Ctrl-C stops)");
    let mut command = Command::new(&built.binary);
    command.args(["up", "--listen", "127.0.0.1:3000", "--runner"]).arg(&built.runner).arg("--python-data").arg(&built.python_data).arg("--wheelhouse").arg(&built.wheelhouse);
    if !extra.is_empty() {
        command.args(extra);
    }
    run(&mut command)
}
