//! A standard output or error stream the host empties after every run.
//!
//! The data runtime's instance lives across runs, and the p1 adapter inside
//! it opens its stdout once, so the stream cannot be swapped per run: the
//! host drains it instead. It keeps at most `capacity` bytes, the most recent
//! ones, so the report the cell driver writes last always survives code that
//! floods the descriptor directly, and memory stays bounded. While a run
//! streams, the live frames the cell code writes are taken off the stream
//! and sent on instead of kept.

use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use bytes::{Buf, Bytes, BytesMut};
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

use crate::live_frames::{FrameSplitter, LiveSink};

/// A bounded in-memory sink shared between the guest's stream and the host.
#[derive(Clone)]
pub(crate) struct DrainPipe {
    buffer: Arc<Mutex<Held>>,
}

struct Held {
    bytes: BytesMut,
    /// Bytes dropped from the front since the last drain.
    dropped: u64,
    /// The most bytes kept; shared by every clone, so the host can widen it
    /// for a run while the guest holds its end.
    capacity: usize,
    /// Set while a streaming run goes on.
    live: Option<FrameSplitter>,
}

impl DrainPipe {
    pub(crate) fn new(capacity: usize) -> Self {
        Self { buffer: Arc::new(Mutex::new(Held { bytes: BytesMut::new(), dropped: 0, capacity, live: None })) }
    }

    /// Keeps at most `capacity` bytes from now on (until the next call).
    pub(crate) fn set_capacity(&self, capacity: usize) {
        self.buffer.lock().unwrap_or_else(PoisonError::into_inner).capacity = capacity;
    }

    /// What was written since the last drain, and how many older bytes were dropped.
    pub(crate) fn drain(&self) -> (Bytes, u64) {
        let mut held = self.buffer.lock().unwrap_or_else(PoisonError::into_inner);
        let dropped = std::mem::take(&mut held.dropped);
        (held.bytes.split().freeze(), dropped)
    }

    /// Sends the live frames written from now on to `sink`, up to `budget`
    /// bytes of them (until [`Self::detach`]).
    pub(crate) fn attach(&self, sink: LiveSink, budget: usize) {
        self.buffer.lock().unwrap_or_else(PoisonError::into_inner).live = Some(FrameSplitter::new(sink, budget));
    }

    /// Ends streaming: frames are kept as plain bytes again.
    pub(crate) fn detach(&self) {
        let mut held = self.buffer.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(splitter) = held.live.take() {
            held.keep(&splitter.into_carry());
        }
    }

    fn push(&self, data: &[u8]) {
        let mut held = self.buffer.lock().unwrap_or_else(PoisonError::into_inner);
        match held.live.take() {
            Some(mut splitter) => {
                splitter.split(data, &mut |bytes| held.keep(bytes));
                held.live = Some(splitter);
            }
            None => held.keep(data),
        }
    }
}

impl Held {
    fn keep(&mut self, data: &[u8]) {
        let held = self;
        let capacity = held.capacity;
        let data = if data.len() > capacity {
            held.dropped += (data.len() - capacity) as u64;
            &data[data.len() - capacity..]
        } else {
            data
        };
        let over = (held.bytes.len() + data.len()).saturating_sub(capacity);
        if over > 0 {
            held.bytes.advance(over);
            held.dropped += over as u64;
        }
        held.bytes.extend_from_slice(data);
    }
}

impl IsTerminal for DrainPipe {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for DrainPipe {
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }

    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }
}

#[async_trait::async_trait]
impl Pollable for DrainPipe {
    async fn ready(&mut self) {}
}

#[async_trait::async_trait]
impl OutputStream for DrainPipe {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.push(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        // Always writable: old bytes make room for new ones.
        Ok(64 << 10)
    }
}

impl tokio::io::AsyncWrite for DrainPipe {
    fn poll_write(self: Pin<&mut Self>, _cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        self.push(buf);
        Poll::Ready(Ok(buf.len()))
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
    fn keeps_the_most_recent_bytes_and_counts_the_dropped() {
        let pipe = DrainPipe::new(8);
        pipe.push(b"0123456789");
        pipe.push(b"ab");
        let (kept, dropped) = pipe.drain();
        assert_eq!(&kept[..], b"456789ab");
        assert_eq!(dropped, 4);
        assert_eq!(pipe.drain(), (Bytes::new(), 0));
    }

    #[test]
    fn a_wider_capacity_applies_to_every_clone() {
        let pipe = DrainPipe::new(4);
        let mut guest_end = pipe.clone();
        pipe.set_capacity(8);
        tokio::io::AsyncWrite::poll_write(Pin::new(&mut guest_end), &mut Context::from_waker(std::task::Waker::noop()), b"0123456789")
            .map(|written| assert_eq!(written.ok(), Some(10)))
            .is_ready()
            .then_some(())
            .expect("ready");
        assert_eq!(pipe.drain(), (Bytes::from_static(b"23456789"), 2));
    }
}
