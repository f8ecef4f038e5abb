//! The shell runtime: one command line (`shell CWD STDIN SCRIPT`) run by
//! bashkit's bash interpreter over the session's tree, inside WebAssembly.
//!
//! WASI has no processes, so every command runs in this instance: bashkit's
//! own utilities (`ls`, `grep`, `sed`, `awk`, `find`, `tar`...), and
//! `python`/`python3` (and `pip`, which is `python -m pip`) and `node`
//! through the host's imports ([`python`], [`node`]). The tree is
//! what the host preopened (the session's `/`, or `/mnt/data`, and `/data`);
//! the environment is the command's; stdout and stderr reach the host as
//! they are written.

mod node;
mod output;
mod python;
mod stdin;
mod tree;

use std::sync::Arc;
use std::time::Duration;

use bashkit::{Bash, ExecutionLimits};

wit_bindgen::generate!({ path: "../../wit/shell", world: "shell" });

/// Exit status of a command line the shell could not run at all (bash's
/// own for a usage error).
const CANNOT_RUN: i32 = 2;

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(cwd), Some(stdin_mode), Some(script)) = (args.next(), args.next(), args.next()) else {
        eprintln!("usage: shell CWD (open|closed) SCRIPT");
        anypath::shell::host::exit_status(CANNOT_RUN);
        return;
    };
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_time().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("shell: cannot start: {error}");
            anypath::shell::host::exit_status(CANNOT_RUN);
            return;
        }
    };
    let code = runtime.block_on(run(&cwd, stdin_mode == "open", &script));
    anypath::shell::host::exit_status(code);
}

/// Runs `script` in `cwd`; with `stdin_open`, the command's stdin streams
/// into it as it arrives (so `cat` answers each line while stdin is open).
async fn run(cwd: &str, stdin_open: bool, script: &str) -> i32 {
    let mut builder = Bash::builder()
        .fs(Arc::new(tree::Tree))
        .cwd(cwd)
        .limits(limits())
        .hostname("sandbox")
        .command("python", python::Python)
        .command("python3", python::Python)
        .command("pip", python::Pip)
        .command("pip3", python::Pip)
        .command("node", node::Node)
        .command(stdin::COMMAND, stdin::Stdin);
    for (key, value) in std::env::vars() {
        if key == "USER" {
            builder = builder.username(value.clone());
        }
        builder = builder.env(key, value);
    }
    let mut bash = builder.build();
    // The script reads the command's stdin through a pipe from the one
    // command that reads the WASI stream, as a process would read fd 0.
    let script = if stdin_open { format!("{} | {{\n{script}\n}}", stdin::COMMAND) } else { script.to_owned() };
    let (mut stdout, mut stderr) = (output::Output::Stdout, output::Output::Stderr);
    match bash.execute(&script).stdout(&mut stdout).stderr(&mut stderr).await {
        Ok(result) => result.exit_code,
        Err(error) => {
            let _ = output::Output::Stderr.write(format!("bash: {error}\n").as_bytes());
            CANNOT_RUN
        }
    }
}

/// bashkit's own ceilings, raised: the host bounds a command by fuel,
/// memory, wall time and output, so these only stop what those would not
/// (a loop with no work in it still burns fuel; a runaway recursion is
/// caught here first).
fn limits() -> ExecutionLimits {
    ExecutionLimits::new()
        .max_commands(10_000_000)
        .max_loop_iterations(100_000_000)
        .max_total_loop_iterations(1_000_000_000)
        .max_work_units(u64::MAX)
        .max_aggregate_input_bytes(u64::MAX)
        .max_stdout_bytes(usize::MAX)
        .max_stderr_bytes(usize::MAX)
        .timeout(Duration::from_secs(7 * 24 * 3600))
}
