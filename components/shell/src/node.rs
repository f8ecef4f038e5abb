//! `node`: a fresh instance of the JavaScript runtime on the same tree,
//! started by the host as `python` is (WASI cannot start a process).

use bashkit::{Command, CommandContext, CommandStatus};

use crate::anypath::shell::host;

/// Hands the command to the host with its arguments, directory, environment and stdin.
pub(crate) struct Node;

#[bashkit::async_trait]
impl Command for Node {
    async fn execute(&self, ctx: CommandContext<'_>) -> bashkit::Result<CommandStatus> {
        let mut stdin = Vec::new();
        while let Some(chunk) = ctx.stdin.read_chunk().await? {
            stdin.extend_from_slice(&chunk);
        }
        let env: Vec<(String, String)> = ctx.env.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        let (code, stdout, stderr) = host::run_node(ctx.args, &ctx.cwd.to_string_lossy(), &env, &stdin);
        ctx.stdout.write_all(&stdout).await?;
        ctx.stderr.write_all(&stderr).await?;
        Ok(CommandStatus::with_code(code))
    }
}
