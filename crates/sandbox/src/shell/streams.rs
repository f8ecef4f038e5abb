//! A command's standard streams: stdin fed by the caller while the command
//! runs (E2B's `send_stdin`), stdout and stderr handed to the caller as the
//! guest writes them, each under its cap.

use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};

use bytes::{Bytes, BytesMut};
use wasmtime_wasi::cli::{IsTerminal, StdinStream, StdoutStream};
use wasmtime_wasi::p2::{InputStream, OutputStream, Pollable, StreamError, StreamResult};

/// The stdin of a running command: what the caller sends waits here until
/// the guest reads it; closing it is the end of input. Cheap to clone.
#[derive(Clone, Default)]
pub struct StdinFeed {
    state: Arc<Mutex<Feed>>,
    arrived: Arc<tokio::sync::Notify>,
}

#[derive(Default)]
struct Feed {
    pending: BytesMut,
    closed: bool,
    /// The guest's reader waiting through `AsyncRead`.
    waker: Option<Waker>,
}

impl StdinFeed {
    /// An open stdin with nothing in it yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// A stdin that holds `bytes` and is then closed.
    pub fn closed_with(bytes: &[u8]) -> Self {
        let feed = Self::new();
        feed.send(bytes);
        feed.close();
        feed
    }

    /// Adds `bytes` to what the command will read; ignored once closed.
    pub fn send(&self, bytes: &[u8]) {
        self.change(|feed| {
            if !feed.closed {
                feed.pending.extend_from_slice(bytes);
            }
        });
    }

    /// Ends the input: the command reads what is left, then the end.
    pub fn close(&self) {
        self.change(|feed| feed.closed = true);
    }

    fn change(&self, change: impl FnOnce(&mut Feed)) {
        let waker = {
            let mut feed = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            change(&mut feed);
            feed.waker.take()
        };
        self.arrived.notify_one();
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// Up to `size` waiting bytes: `Some(empty)` when none wait yet, `None` at the end.
    fn take(&self, size: usize, waker: Option<&Waker>) -> Option<Bytes> {
        let mut feed = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if !feed.pending.is_empty() {
            let size = size.min(feed.pending.len());
            return Some(feed.pending.split_to(size).freeze());
        }
        if feed.closed {
            return None;
        }
        if let Some(waker) = waker {
            feed.waker = Some(waker.clone());
        }
        Some(Bytes::new())
    }
}

impl IsTerminal for StdinFeed {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdinStream for StdinFeed {
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncRead + Send + Sync> {
        Box::new(self.clone())
    }

    fn p2_stream(&self) -> Box<dyn InputStream> {
        Box::new(self.clone())
    }
}

#[async_trait::async_trait]
impl Pollable for StdinFeed {
    async fn ready(&mut self) {
        loop {
            // Registered before the check, so a send between the two still wakes it.
            let arrived = self.arrived.notified();
            {
                let feed = self.state.lock().unwrap_or_else(PoisonError::into_inner);
                if !feed.pending.is_empty() || feed.closed {
                    return;
                }
            }
            arrived.await;
        }
    }
}

impl InputStream for StdinFeed {
    fn read(&mut self, size: usize) -> StreamResult<Bytes> {
        self.take(size, None).ok_or(StreamError::Closed)
    }
}

impl tokio::io::AsyncRead for StdinFeed {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut tokio::io::ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        match self.take(buf.remaining(), Some(cx.waker())) {
            None => Poll::Ready(Ok(())),
            Some(bytes) if bytes.is_empty() => Poll::Pending,
            Some(bytes) => {
                buf.put_slice(&bytes);
                Poll::Ready(Ok(()))
            }
        }
    }
}

/// Which output stream a chunk came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// Where a command's output goes as it is written.
pub type OutputSink = Arc<dyn Fn(Stream, Bytes) + Send + Sync>;

/// One output stream of a command: passes what the guest writes to the
/// sink until `cap` bytes went through, then tells the guest the stream is
/// closed (a writer such as `yes` stops there, as on a broken pipe).
#[derive(Clone)]
pub(crate) struct OutputPipe {
    stream: Stream,
    sink: OutputSink,
    state: Arc<Mutex<Passed>>,
}

struct Passed {
    bytes: u64,
    cap: u64,
    truncated: bool,
}

impl OutputPipe {
    pub(crate) fn new(stream: Stream, sink: OutputSink, cap: u64) -> Self {
        Self { stream, sink, state: Arc::new(Mutex::new(Passed { bytes: 0, cap, truncated: false })) }
    }

    /// Whether output past the cap was dropped.
    pub(crate) fn truncated(&self) -> bool {
        self.state.lock().unwrap_or_else(PoisonError::into_inner).truncated
    }

    /// Passes what fits under the cap; `false` once the cap is reached.
    fn pass(&self, bytes: &[u8]) -> bool {
        let kept = {
            let mut passed = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            let room = passed.cap.saturating_sub(passed.bytes);
            let kept = bytes.len().min(usize::try_from(room).unwrap_or(usize::MAX));
            passed.bytes += kept as u64;
            if kept < bytes.len() {
                passed.truncated = true;
            }
            kept
        };
        if kept > 0 {
            (self.sink)(self.stream, Bytes::copy_from_slice(&bytes[..kept]));
        }
        kept == bytes.len()
    }
}

impl IsTerminal for OutputPipe {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for OutputPipe {
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }

    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }
}

#[async_trait::async_trait]
impl Pollable for OutputPipe {
    async fn ready(&mut self) {}
}

#[async_trait::async_trait]
impl OutputStream for OutputPipe {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        if self.pass(&bytes) { Ok(()) } else { Err(StreamError::Closed) }
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        if self.truncated() { Err(StreamError::Closed) } else { Ok(64 << 10) }
    }
}

impl tokio::io::AsyncWrite for OutputPipe {
    fn poll_write(self: Pin<&mut Self>, _cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        if self.pass(buf) {
            Poll::Ready(Ok(buf.len()))
        } else {
            Poll::Ready(Err(std::io::ErrorKind::BrokenPipe.into()))
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stdin_gives_what_was_sent_then_nothing_until_closed_then_the_end() {
        let host = StdinFeed::new();
        let mut guest = host.clone();
        assert_eq!(guest.read(64).ok(), Some(Bytes::new()));
        host.send(b"hello");
        assert_eq!(guest.read(3).ok(), Some(Bytes::from_static(b"hel")));
        assert_eq!(guest.read(64).ok(), Some(Bytes::from_static(b"lo")));
        host.close();
        host.send(b"after the end");
        assert!(matches!(guest.read(64), Err(StreamError::Closed)));
    }

    #[tokio::test]
    async fn a_reader_waiting_on_stdin_wakes_when_bytes_arrive() {
        let host = StdinFeed::new();
        let mut guest = host.clone();
        let waiting = tokio::spawn(async move {
            guest.ready().await;
            guest.read(64).ok()
        });
        tokio::task::yield_now().await;
        host.send(b"line\n");
        assert_eq!(waiting.await.ok().flatten(), Some(Bytes::from_static(b"line\n")));
    }

    #[test]
    fn output_past_its_cap_is_dropped_and_the_stream_closes() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let into = seen.clone();
        let sink: OutputSink = Arc::new(move |_, bytes| into.lock().unwrap_or_else(PoisonError::into_inner).extend_from_slice(&bytes));
        let mut pipe = OutputPipe::new(Stream::Stdout, sink, 8);
        assert!(pipe.write(Bytes::from_static(b"12345")).is_ok());
        assert!(matches!(pipe.write(Bytes::from_static(b"6789")), Err(StreamError::Closed)));
        assert!(pipe.truncated());
        assert_eq!(&seen.lock().unwrap_or_else(PoisonError::into_inner)[..], b"12345678");
    }
}
