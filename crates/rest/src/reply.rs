//! A block's `REPLY` as the parts of an HTTP response. The sandbox already
//! refuses a bad reply before anything is committed; the gateway checks again
//! here, because a header its HTTP stack cannot send would otherwise leave the
//! request unanswered after its changes were committed.

use serde_json::Value;

/// Headers the gateway sets itself; a block's value for them is ignored.
const GATEWAY_HEADERS: &[&str] = &["content-length", "transfer-encoding", "connection", "x-request-id"];

/// Why a reply cannot become a response.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplyError {
    #[error("reply status {0} is not an integer from 200 to 599")]
    Status(String),
    #[error("reply header name {0:?} is not a valid HTTP field name")]
    HeaderName(String),
    #[error("reply header {0} has a value that is not visible ASCII, spaces or tabs")]
    HeaderValue(String),
    #[error("reply headers are not [name, value] string pairs")]
    Shape,
}

/// The status and headers of a reply, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplyHead {
    pub status: u16,
    /// The block's headers, minus those the gateway sets.
    pub headers: Vec<(String, String)>,
}

impl ReplyHead {
    /// Whether the block chose the content type itself.
    pub fn has_content_type(&self) -> bool {
        self.headers.iter().any(|(name, _)| name.eq_ignore_ascii_case("content-type"))
    }
}

/// Checks the sandbox's `reply` (`{"status", "headers": [[name, value]], "body"}`).
pub fn head(reply: &Value) -> Result<ReplyHead, ReplyError> {
    let status = reply["status"]
        .as_u64()
        .and_then(|s| u16::try_from(s).ok())
        .filter(|s| (200..=599).contains(s))
        .ok_or_else(|| ReplyError::Status(reply["status"].to_string()))?;
    let mut headers = Vec::new();
    for pair in reply["headers"].as_array().into_iter().flatten() {
        let (Some(name), Some(value)) = (pair[0].as_str(), pair[1].as_str()) else { return Err(ReplyError::Shape) };
        if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
            return Err(ReplyError::HeaderName(name.to_owned()));
        }
        if !value.bytes().all(|b| b == b'\t' || (0x20..0x7f).contains(&b)) {
            return Err(ReplyError::HeaderValue(name.to_owned()));
        }
        if !GATEWAY_HEADERS.contains(&name.to_ascii_lowercase().as_str()) {
            headers.push((name.to_owned(), value.to_owned()));
        }
    }
    Ok(ReplyHead { status, headers })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_sendable_reply_keeps_its_headers_but_those_the_gateway_sets() {
        let reply = json!({"status": 201, "headers": [["Location", "/t/caf%C3%A9"], ["Content-Length", "9"], ["X-A", "1\tb"]]});
        let head = head(&reply).unwrap();
        assert_eq!(head.status, 201);
        assert_eq!(head.headers, vec![("Location".into(), "/t/caf%C3%A9".into()), ("X-A".into(), "1\tb".into())]);
        assert!(!head.has_content_type());
    }

    #[test]
    fn what_http_cannot_carry_is_refused() {
        for (reply, error) in [
            (json!({"status": 201, "headers": [["Location", "/t/a\u{b}b"]]}), ReplyError::HeaderValue("Location".into())),
            (json!({"status": 201, "headers": [["Location", "/t/café"]]}), ReplyError::HeaderValue("Location".into())),
            (json!({"status": 200, "headers": [["X-A", "a\r\nSet-Cookie: x"]]}), ReplyError::HeaderValue("X-A".into())),
            (json!({"status": 200, "headers": [["Bad Name", "v"]]}), ReplyError::HeaderName("Bad Name".into())),
            (json!({"status": 200, "headers": [["X", 1]]}), ReplyError::Shape),
            (json!({"status": 101}), ReplyError::Status("101".into())),
            (json!({"status": 600}), ReplyError::Status("600".into())),
            (json!({"status": "200"}), ReplyError::Status("\"200\"".into())),
        ] {
            assert_eq!(head(&reply), Err(error), "{reply}");
        }
    }
}
