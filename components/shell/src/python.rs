//! `python`, `python3`, `pip` and `pip3`: a fresh instance of the session's
//! Python runtime on the same tree, started by the host (WASI cannot start a
//! process). `pip ARGS` is `python -m pip ARGS`, as pip's own launcher is.

use bashkit::{Command, CommandContext, CommandStatus};

use crate::anypath::shell::host;

/// Hands the command to the host with its arguments, directory, environment and stdin.
pub(crate) struct Python;

/// `pip`: `python -m pip` with the same arguments.
pub(crate) struct Pip;

#[bashkit::async_trait]
impl Command for Python {
    async fn execute(&self, ctx: CommandContext<'_>) -> bashkit::Result<CommandStatus> {
        let args = ctx.args.to_vec();
        run_python(ctx, &args).await
    }
}

#[bashkit::async_trait]
impl Command for Pip {
    async fn execute(&self, ctx: CommandContext<'_>) -> bashkit::Result<CommandStatus> {
        let args: Vec<String> = ["-m".to_owned(), "pip".to_owned()].into_iter().chain(ctx.args.iter().cloned()).collect();
        run_python(ctx, &args).await
    }
}

/// Runs `python ARGS` through the host with the command's stdin (read
/// whole first), directory and environment.
async fn run_python(ctx: CommandContext<'_>, args: &[String]) -> bashkit::Result<CommandStatus> {
    let mut stdin = Vec::new();
    while let Some(chunk) = ctx.stdin.read_chunk().await? {
        stdin.extend_from_slice(&chunk);
    }
    let env: Vec<(String, String)> = ctx.env.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    let (code, stdout, stderr) = host::run_python(args, &ctx.cwd.to_string_lossy(), &env, &stdin);
    ctx.stdout.write_all(&stdout).await?;
    ctx.stderr.write_all(&stderr).await?;
    Ok(CommandStatus::with_code(code))
}
