//! The command's stdout and stderr: every write goes straight to the WASI
//! stream, so the host sees output as it is made.

use std::io::Write;
use std::pin::Pin;
use std::task::{Context, Poll};

/// One of the command's two output streams.
pub(crate) enum Output {
    Stdout,
    Stderr,
}

impl Output {
    /// Writes and flushes `bytes`; a host that stopped reading ends nothing here.
    pub(crate) fn write(&self, bytes: &[u8]) -> std::io::Result<()> {
        match self {
            Self::Stdout => {
                let mut out = std::io::stdout().lock();
                out.write_all(bytes)?;
                out.flush()
            }
            Self::Stderr => std::io::stderr().lock().write_all(bytes),
        }
    }
}

impl tokio::io::AsyncWrite for Output {
    fn poll_write(self: Pin<&mut Self>, _: &mut Context<'_>, bytes: &[u8]) -> Poll<std::io::Result<usize>> {
        Poll::Ready(self.write(bytes).map(|()| bytes.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}
