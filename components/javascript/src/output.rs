//! A cell's stdout and stderr, each kept within its cap.

use std::cell::RefCell;

use crate::anypath::runner::types::CapturedOutput;
use crate::live;

/// Which of the two streams a piece of output goes to.
#[derive(Clone, Copy)]
pub enum Stream {
    Stdout,
    Stderr,
}

impl Stream {
    /// The stream the prelude's `write(stream, text)` names: 2 is stderr,
    /// anything else stdout.
    pub fn from_number(number: u32) -> Self {
        if number == 2 {
            Stream::Stderr
        } else {
            Stream::Stdout
        }
    }

    /// Its name in live frames.
    fn name(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }
}

/// One stream's text, which drops what goes past its cap.
struct Capped {
    text: String,
    limit: usize,
    truncated: bool,
}

impl Capped {
    fn new(limit: u32) -> Self {
        Self {
            text: String::new(),
            limit: usize::try_from(limit).unwrap_or(usize::MAX),
            truncated: false,
        }
    }

    /// Keeps what of `piece` fits; returns what was kept.
    fn write<'a>(&mut self, piece: &'a str) -> &'a str {
        if self.truncated {
            return "";
        }
        let room = self.limit.saturating_sub(self.text.len());
        let kept = if piece.len() > room {
            // Cut on a character boundary: what was sent live and what is
            // reported at the end are the same text.
            self.truncated = true;
            &piece[..floor_char_boundary(piece, room)]
        } else {
            piece
        };
        self.text.push_str(kept);
        kept
    }
}

/// The largest index at most `index` that begins a character of `text`.
pub fn floor_char_boundary(text: &str, index: usize) -> usize {
    if index >= text.len() {
        return text.len();
    }
    (0..=index)
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0)
}

/// The running cell's output.
struct Capture {
    stdout: Capped,
    stderr: Capped,
    live: bool,
}

thread_local! {
    /// Set while a cell runs.
    static CAPTURE: RefCell<Option<Capture>> = const { RefCell::new(None) };
}

/// Starts capturing a cell's output within the caps; with `live`, each
/// piece kept is also sent as a frame.
pub fn begin(stdout_bytes: u32, stderr_bytes: u32, live: bool) {
    let capture = Capture {
        stdout: Capped::new(stdout_bytes),
        stderr: Capped::new(stderr_bytes),
        live,
    };
    CAPTURE.with(|slot| *slot.borrow_mut() = Some(capture));
}

/// Adds `text` to `stream`, as far as its cap allows. Output written when
/// no cell runs is dropped.
pub fn write(stream: Stream, text: &str) {
    let sent = CAPTURE.with(|slot| {
        let mut slot = slot.borrow_mut();
        let capture = slot.as_mut()?;
        let capped = match stream {
            Stream::Stdout => &mut capture.stdout,
            Stream::Stderr => &mut capture.stderr,
        };
        let kept = capped.write(text);
        (capture.live && !kept.is_empty()).then(|| live::json_string(kept))
    });
    // Sent outside the borrow: nothing in sending reaches back here, but the
    // borrow need not be held over a write to the host.
    if let Some(payload) = sent {
        live::send(stream.name(), &payload);
    }
}

/// Ends the capture, giving what was kept.
pub fn finish() -> CapturedOutput {
    let capture = CAPTURE.with(|slot| slot.borrow_mut().take());
    match capture {
        Some(capture) => CapturedOutput {
            stdout: capture.stdout.text,
            stdout_truncated: capture.stdout.truncated,
            stderr: capture.stderr.text,
            stderr_truncated: capture.stderr.truncated,
        },
        None => empty(),
    }
}

/// No output at all.
pub fn empty() -> CapturedOutput {
    CapturedOutput {
        stdout: String::new(),
        stdout_truncated: false,
        stderr: String::new(),
        stderr_truncated: false,
    }
}
