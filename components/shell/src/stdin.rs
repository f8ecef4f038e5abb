//! The command's stdin, streamed: one command reads the WASI stream chunk by
//! chunk and writes it into a pipe that the command line reads.

use std::io::Read;

use bashkit::{Command, CommandContext, CommandStatus};

/// The name the script's stdin pipe starts with.
pub(crate) const COMMAND: &str = "__anypath_stdin";

/// Passes the WASI stdin on until it closes or the reader goes away.
pub(crate) struct Stdin;

/// How many times to let the pipeline's other stages run after a chunk, before
/// the next read blocks this single-threaded instance until input arrives:
/// enough for the chunk to go through `cat` or `grep` to the host.
const YIELDS_AFTER_CHUNK: usize = 16;

#[bashkit::async_trait]
impl Command for Stdin {
    async fn execute(&self, ctx: CommandContext<'_>) -> bashkit::Result<CommandStatus> {
        let mut buffer = vec![0u8; 64 << 10];
        loop {
            let read = std::io::stdin().read(&mut buffer).unwrap_or(0);
            if read == 0 || ctx.stdout.write_all(&buffer[..read]).await.is_err() {
                return Ok(CommandStatus::success());
            }
            for _ in 0..YIELDS_AFTER_CHUNK {
                tokio::task::yield_now().await;
            }
        }
    }
}
