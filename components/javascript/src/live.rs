//! Live frames: output and results sent to the host while a cell runs.
//!
//! A frame is the marker, one line of JSON and a newline, written to the
//! instance's stdout (file descriptor 1), which the host takes the frames
//! off. JSON escapes every control character, so a frame never holds a raw
//! newline or the marker's first byte.

use std::fmt::Write as _;
use std::io::Write as _;

/// Precedes every frame.
const LIVE_MARK: &[u8] = b"\x1eanypath-live ";

/// Sends `{"<kind>": <payload>}`, `payload` being JSON text already.
pub fn send(kind: &str, payload: &str) {
    let mut frame = Vec::with_capacity(LIVE_MARK.len() + kind.len() + payload.len() + 8);
    frame.extend_from_slice(LIVE_MARK);
    frame.extend_from_slice(b"{\"");
    frame.extend_from_slice(kind.as_bytes());
    frame.extend_from_slice(b"\":");
    frame.extend_from_slice(payload.as_bytes());
    frame.extend_from_slice(b"}\n");
    let mut stdout = std::io::stdout().lock();
    // A frame that cannot be written is lost to the live view only: the
    // cell's output still carries everything.
    let _ = stdout.write_all(&frame).and_then(|()| stdout.flush());
}

/// `text` as a JSON string literal.
pub fn json_string(text: &str) -> String {
    let mut json = String::with_capacity(text.len() + 2);
    json.push('"');
    for c in text.chars() {
        match c {
            '"' => json.push_str("\\\""),
            '\\' => json.push_str("\\\\"),
            '\n' => json.push_str("\\n"),
            '\r' => json.push_str("\\r"),
            '\t' => json.push_str("\\t"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(json, "\\u{:04x}", c as u32);
            }
            c => json.push(c),
        }
    }
    json.push('"');
    json
}

