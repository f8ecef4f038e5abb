//! A cell's results, within the bytes their data may take together.
//!
//! As the `python` runtime keeps them: the plain text first, cut to the
//! stdout cap and to the budget; then each other form whole or not at all.

use crate::anypath::runner::types::{CellResult, ResultOrigin};
use crate::live;
use crate::output::floor_char_boundary;

/// The MIME type every result has.
const TEXT_PLAIN: &str = "text/plain";

/// The results of one cell, in the order they were made.
pub struct Results {
    entries: Vec<CellResult>,
    /// Bytes of data still allowed.
    room: usize,
    /// The plain text's own cap (the stdout cap, as a printed value's).
    text_limit: usize,
    live: bool,
}

impl Results {
    pub fn new(result_bytes: u32, text_limit: u32, live: bool) -> Self {
        Self {
            entries: Vec::new(),
            room: usize::try_from(result_bytes).unwrap_or(usize::MAX),
            text_limit: usize::try_from(text_limit).unwrap_or(usize::MAX),
            live,
        }
    }

    /// Adds the cell's value as its plain text and other forms (MIME type,
    /// data); `error` is what making a form raised.
    pub fn value(&mut self, text: &str, forms: Vec<(String, String)>, error: Option<String>) {
        let limit = self.text_limit.min(self.room);
        let mut truncated = text.len() > limit;
        let text = &text[..floor_char_boundary(text, limit)];
        self.room -= text.len();
        let mut mime = vec![(TEXT_PLAIN.to_owned(), text.to_owned())];
        for (kind, data) in forms {
            if data.len() > self.room {
                truncated = true;
                continue;
            }
            self.room -= data.len();
            mime.push((kind, data));
        }
        let result = CellResult {
            origin: ResultOrigin::Value,
            mime,
            truncated,
            error,
        };
        if self.live {
            live::send("result", &frame_payload(&result));
        }
        self.entries.push(result);
    }

    /// The results, in order.
    pub fn into_entries(self) -> Vec<CellResult> {
        self.entries
    }
}

/// A result as a live frame carries it (the host's `GuestResult`).
fn frame_payload(result: &CellResult) -> String {
    let origin = match result.origin {
        ResultOrigin::Value => "value",
        ResultOrigin::Display => "display",
        ResultOrigin::Figure => "figure",
    };
    let mime: Vec<String> = result
        .mime
        .iter()
        .map(|(kind, data)| format!("{}:{}", live::json_string(kind), live::json_string(data)))
        .collect();
    let error = result
        .error
        .as_deref()
        .map_or_else(|| "null".to_owned(), live::json_string);
    format!(
        "{{\"origin\":\"{origin}\",\"mime\":{{{}}},\"truncated\":{},\"error\":{error}}}",
        mime.join(","),
        result.truncated
    )
}
