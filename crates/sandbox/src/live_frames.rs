//! Output a run sends while it goes on. The cell code writes each piece
//! (stdout and stderr text within their caps, each result) as one frame on
//! the instance's stdout (`rich_output.LiveChannel`); the host's stdout pipe
//! takes the frames off the stream and hands them to the run's sink.

use std::collections::BTreeMap;

use anypath_wire::{CellResult, LiveEvent, ResultOrigin};
use serde::Deserialize;

use crate::bindings::anypath::runner::types as wit;

/// Where a streaming run's events go.
pub type LiveSink = tokio::sync::mpsc::UnboundedSender<LiveEvent>;

/// Precedes a frame; a frame is one line of JSON (which never holds a raw
/// newline or this marker).
const LIVE_MARK: &[u8] = b"\x1eanypath-live ";

/// A frame as the cell code writes it.
#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum GuestFrame {
    Stdout(String),
    Stderr(String),
    Result(GuestResult),
}

/// A result as the cell code makes it (`rich_output.Results`): in frames and
/// in the data runtime's report.
#[derive(Debug, Deserialize)]
pub(crate) struct GuestResult {
    origin: ResultOrigin,
    mime: BTreeMap<String, String>,
    truncated: bool,
    error: Option<String>,
}

impl From<GuestResult> for CellResult {
    fn from(result: GuestResult) -> Self {
        CellResult::from_bundle(result.origin, result.mime, result.truncated, result.error)
    }
}

impl GuestResult {
    /// The same result as the `python` runtime's `run-cell` returns it.
    pub(crate) fn into_wit(self) -> wit::CellResult {
        let origin = match self.origin {
            ResultOrigin::Value => wit::ResultOrigin::Value,
            ResultOrigin::Display => wit::ResultOrigin::Display,
            ResultOrigin::Figure => wit::ResultOrigin::Figure,
        };
        wit::CellResult { origin, mime: self.mime.into_iter().collect(), truncated: self.truncated, error: self.error }
    }
}

/// A result `run-cell` returned, as the run's report lists it.
pub(crate) fn result_of(result: &wit::CellResult) -> CellResult {
    let origin = match result.origin {
        wit::ResultOrigin::Value => ResultOrigin::Value,
        wit::ResultOrigin::Display => ResultOrigin::Display,
        wit::ResultOrigin::Figure => ResultOrigin::Figure,
    };
    CellResult::from_bundle(origin, result.mime.iter().cloned().collect(), result.truncated, result.error.clone())
}

impl From<GuestFrame> for LiveEvent {
    fn from(frame: GuestFrame) -> Self {
        match frame {
            GuestFrame::Stdout(text) => LiveEvent::Stdout(text),
            GuestFrame::Stderr(text) => LiveEvent::Stderr(text),
            GuestFrame::Result(result) => LiveEvent::Result(result.into()),
        }
    }
}

/// Takes frames out of the bytes a stdout receives, in whatever pieces the
/// guest's writes arrive (a write is cut into 4 KiB pieces on the way).
///
/// The code could write frames itself, so the host bounds them: past
/// `budget` bytes of frames nothing more is sent (the report is whole).
pub(crate) struct FrameSplitter {
    sink: LiveSink,
    /// The frame being received, up to its newline.
    partial: Option<Vec<u8>>,
    /// Frame bytes still allowed.
    budget: usize,
    /// The last bytes of the previous piece when they may begin a marker.
    carry: Vec<u8>,
}

impl FrameSplitter {
    pub(crate) fn new(sink: LiveSink, budget: usize) -> Self {
        Self { sink, partial: None, budget, carry: Vec::new() }
    }

    /// Sends every frame completed by `data`; hands the other bytes (what
    /// the code wrote to the descriptor itself, the report) to `keep`.
    pub(crate) fn split(&mut self, data: &[u8], keep: &mut impl FnMut(&[u8])) {
        let joined: Vec<u8>;
        let mut data = if self.carry.is_empty() {
            data
        } else {
            joined = [std::mem::take(&mut self.carry).as_slice(), data].concat();
            &joined[..]
        };
        while !data.is_empty() {
            if let Some(partial) = self.partial.as_mut() {
                let end = data.iter().position(|&b| b == b'\n');
                let piece = &data[..end.unwrap_or(data.len())];
                let taken = piece.len().min(self.budget);
                partial.extend_from_slice(&piece[..taken]);
                self.budget -= taken;
                let Some(end) = end else { return };
                data = &data[end + 1..];
                let frame = self.partial.take().unwrap_or_default();
                if taken == piece.len() {
                    self.send(&frame);
                } else {
                    // Over the budget: cut short, so never sent.
                    self.budget = 0;
                }
                continue;
            }
            match find(data, LIVE_MARK) {
                Some(at) => {
                    if at > 0 {
                        keep(&data[..at]);
                    }
                    data = &data[at + LIVE_MARK.len()..];
                    self.partial = Some(Vec::new());
                }
                None => {
                    // A marker may begin in this piece's last bytes and end in the next.
                    let tail = (1..LIVE_MARK.len()).rev().find(|&n| data.len() >= n && data.ends_with(&LIVE_MARK[..n])).unwrap_or(0);
                    if data.len() > tail {
                        keep(&data[..data.len() - tail]);
                    }
                    self.carry = data[data.len() - tail..].to_vec();
                    return;
                }
            }
        }
    }

    /// Bytes held back as a possible marker's start: plain output after all.
    pub(crate) fn into_carry(self) -> Vec<u8> {
        self.carry
    }

    fn send(&self, frame: &[u8]) {
        match serde_json::from_slice::<GuestFrame>(frame) {
            // A receiver gone (the client left) only ends the streaming.
            Ok(frame) => drop(self.sink.send(frame.into())),
            Err(error) => tracing::warn!(%error, "a live frame from the cell code did not parse"),
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|window| window == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_cut_anywhere_arrive_whole_and_other_bytes_are_kept() {
        let (sink, mut events) = tokio::sync::mpsc::unbounded_channel();
        let mut splitter = FrameSplitter::new(sink, 1 << 20);
        let stream = b"direct\x1eanypath-live {\"stdout\": \"a\\nb\"}\nmore\x1eanypath-live {\"stderr\": \"e\"}\n";
        let mut kept = Vec::new();
        for piece in stream.chunks(5) {
            splitter.split(piece, &mut |bytes| kept.extend_from_slice(bytes));
        }
        assert_eq!(kept, b"directmore");
        assert_eq!(events.try_recv().ok(), Some(LiveEvent::Stdout("a\nb".into())));
        assert_eq!(events.try_recv().ok(), Some(LiveEvent::Stderr("e".into())));
        assert!(events.try_recv().is_err());
    }

    #[test]
    fn frames_past_the_budget_are_not_sent() {
        let (sink, mut events) = tokio::sync::mpsc::unbounded_channel();
        let mut splitter = FrameSplitter::new(sink, 30);
        let frame = b"\x1eanypath-live {\"stdout\": \"0123456789\"}\n";
        splitter.split(frame, &mut |_| {});
        splitter.split(frame, &mut |_| {});
        assert_eq!(events.try_recv().ok(), Some(LiveEvent::Stdout("0123456789".into())));
        assert!(events.try_recv().is_err(), "the second frame is past the budget");
    }

    #[test]
    fn a_result_frame_becomes_a_typed_result() {
        let (sink, mut events) = tokio::sync::mpsc::unbounded_channel();
        let mut splitter = FrameSplitter::new(sink, 1 << 20);
        let frame = b"\x1eanypath-live {\"result\": {\"origin\": \"figure\", \"mime\": {\"text/plain\": \"<Figure>\", \"image/png\": \"iVBO\"}, \"truncated\": false, \"error\": null}}\n";
        splitter.split(frame, &mut |_| panic!("nothing else was written"));
        let Ok(LiveEvent::Result(result)) = events.try_recv() else { panic!("a result") };
        assert_eq!(result.kind, anypath_wire::ResultKind::Image);
        assert_eq!(result.text, "<Figure>");
    }
}
