//! A standard input the host fills before each run.
//!
//! The data runtime's reactor takes a turn's work as Python source, and
//! CPython compiles every source it is given: a cell's code and settings
//! written into the turn's source as literals cost a compile of all of them
//! (most of a warm one-line cell's instructions). Instead the host puts the
//! cell's request on the instance's stdin and the turn's source stays one
//! short call that reads it (`cell_report.report_pending`). A read past
//! what was fed is the end of input, as on an empty stdin, so code that
//! reads stdin in a cell gets nothing, as before.

use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use bytes::Bytes;
use wasmtime_wasi::cli::{IsTerminal, StdinStream};
use wasmtime_wasi::p2::{InputStream, Pollable, StreamError, StreamResult};

/// Bytes waiting for the guest, shared between the host and the guest's stream.
#[derive(Clone, Default)]
pub(crate) struct FeedPipe {
    pending: Arc<Mutex<Bytes>>,
}

impl FeedPipe {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Replaces whatever the guest has not read with `bytes`.
    pub(crate) fn feed(&self, bytes: Bytes) {
        *self.pending.lock().unwrap_or_else(PoisonError::into_inner) = bytes;
    }

    /// Up to `size` of the waiting bytes; `None` once none are left.
    fn take(&self, size: usize) -> Option<Bytes> {
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        if pending.is_empty() {
            return None;
        }
        let size = size.min(pending.len());
        Some(pending.split_to(size))
    }
}

impl IsTerminal for FeedPipe {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdinStream for FeedPipe {
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncRead + Send + Sync> {
        Box::new(self.clone())
    }

    fn p2_stream(&self) -> Box<dyn InputStream> {
        Box::new(self.clone())
    }
}

#[async_trait::async_trait]
impl Pollable for FeedPipe {
    async fn ready(&mut self) {}
}

impl InputStream for FeedPipe {
    fn read(&mut self, size: usize) -> StreamResult<Bytes> {
        // Closed is how a stream says end of input; the next feed opens it again.
        self.take(size).ok_or(StreamError::Closed)
    }
}

impl tokio::io::AsyncRead for FeedPipe {
    fn poll_read(self: Pin<&mut Self>, _cx: &mut Context<'_>, buf: &mut tokio::io::ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        if let Some(bytes) = self.take(buf.remaining()) {
            buf.put_slice(&bytes);
        }
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_feed_is_read_once_then_ends_until_the_next() {
        let host = FeedPipe::new();
        let mut guest = host.clone();
        host.feed(Bytes::from_static(b"first request"));
        assert_eq!(guest.read(5).ok(), Some(Bytes::from_static(b"first")));
        assert_eq!(guest.read(64).ok(), Some(Bytes::from_static(b" request")));
        assert!(matches!(guest.read(64), Err(StreamError::Closed)));
        host.feed(Bytes::from_static(b"second"));
        assert_eq!(guest.read(64).ok(), Some(Bytes::from_static(b"second")));
    }

    #[test]
    fn a_new_feed_replaces_what_was_left_unread() {
        let host = FeedPipe::new();
        let mut guest = host.clone();
        host.feed(Bytes::from_static(b"never read"));
        host.feed(Bytes::from_static(b"this one"));
        assert_eq!(guest.read(64).ok(), Some(Bytes::from_static(b"this one")));
    }
}
