//! Jupyter messages (protocol 5.3) in the JSON text frames of a kernel's
//! websocket, the legacy form jupyter_server uses for gateways.
//!
//! Incoming frames are read leniently, as real clients send them: no
//! `channel` means shell, `buffers` of any shape are ignored, and the
//! header's `date` may be a string, a number or missing. The header a
//! request came with is echoed untouched as its replies' `parent_header`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The protocol version this kernel speaks.
pub(crate) const PROTOCOL_VERSION: &str = "5.3";

/// A frame a client sent.
#[derive(Debug, Deserialize)]
pub(crate) struct Incoming {
    /// The header as sent: replies echo it as their parent.
    #[serde(default)]
    pub header: Map<String, Value>,
    /// Some clients put these at the top level only.
    #[serde(default)]
    msg_id: Option<String>,
    #[serde(default)]
    msg_type: Option<String>,
    #[serde(default)]
    pub channel: Option<String>,
    #[serde(default)]
    pub content: Value,
}

impl Incoming {
    /// Parses a text frame.
    pub(crate) fn parse(text: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// The message type, from the header or the top level.
    pub(crate) fn msg_type(&self) -> &str {
        self.header.get("msg_type").and_then(Value::as_str).or(self.msg_type.as_deref()).unwrap_or("")
    }

    /// The channel it came on (shell when it names none).
    pub(crate) fn channel(&self) -> &str {
        self.channel.as_deref().filter(|c| !c.is_empty()).unwrap_or("shell")
    }

    /// The header replies name as their parent, with the top-level id and
    /// type filled in when the client sent them only there.
    pub(crate) fn parent_header(&self) -> Map<String, Value> {
        let mut header = self.header.clone();
        if let Some(id) = &self.msg_id {
            header.entry("msg_id").or_insert_with(|| Value::String(id.clone()));
        }
        if let Some(kind) = &self.msg_type {
            header.entry("msg_type").or_insert_with(|| Value::String(kind.clone()));
        }
        header
    }

    /// The content as `T` (a missing or null content reads as empty).
    pub(crate) fn content<T: for<'de> Deserialize<'de> + Default>(&self) -> Result<T, serde_json::Error> {
        match &self.content {
            Value::Null => Ok(T::default()),
            other => T::deserialize(other),
        }
    }
}

/// A message's header.
#[derive(Debug, Serialize)]
struct Header<'a> {
    msg_id: &'a str,
    msg_type: &'a str,
    username: &'a str,
    session: &'a str,
    date: &'a str,
    version: &'a str,
}

/// A frame the kernel sends: the header fields also at the top level,
/// which nbclient, AutoGen and Open WebUI read.
#[derive(Debug, Serialize)]
struct Outgoing<'a> {
    header: Header<'a>,
    msg_id: &'a str,
    msg_type: &'a str,
    parent_header: &'a Map<String, Value>,
    metadata: Map<String, Value>,
    content: &'a Value,
    buffers: [(); 0],
    channel: &'a str,
}

/// Who the kernel's messages come from: its header session, which changes
/// on every restart.
#[derive(Debug, Clone)]
pub(crate) struct Sender {
    pub session: String,
}

impl Sender {
    /// The text frame of a message of `msg_type` on `channel`, answering `parent`.
    pub(crate) fn frame(&self, msg_type: &str, channel: &str, parent: &Map<String, Value>, content: &Value) -> String {
        let msg_id = uuid::Uuid::new_v4().to_string();
        let date = now();
        let header = Header { msg_id: &msg_id, msg_type, username: "kernel", session: &self.session, date: &date, version: PROTOCOL_VERSION };
        let outgoing = Outgoing { header, msg_id: &msg_id, msg_type, parent_header: parent, metadata: Map::new(), content, buffers: [], channel };
        serde_json::to_string(&outgoing).unwrap_or_default()
    }
}

/// Now, as Jupyter writes dates: `%Y-%m-%dT%H:%M:%S.%fZ`.
pub(crate) fn now() -> String {
    timestamp(std::time::SystemTime::now())
}

/// `time` as Jupyter writes dates.
pub(crate) fn timestamp(time: std::time::SystemTime) -> String {
    chrono::DateTime::<chrono::Utc>::from(time).format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lenient_frames_are_read_as_clients_send_them() {
        let sent = r#"{"header":{"msg_id":"a","msg_type":"execute_request","date":1.5},"buffers":{},"content":{"code":"1"}}"#;
        let incoming = Incoming::parse(sent).expect("parses");
        assert_eq!(incoming.msg_type(), "execute_request");
        assert_eq!(incoming.channel(), "shell", "no channel means shell");
        let top_level_only = Incoming::parse(r#"{"msg_id":"b","msg_type":"kernel_info_request","channel":"shell"}"#).expect("parses");
        assert_eq!(top_level_only.msg_type(), "kernel_info_request");
        assert_eq!(top_level_only.parent_header().get("msg_id"), Some(&Value::String("b".into())));
    }

    #[test]
    fn frames_carry_what_jupyterlab_requires() {
        let sender = Sender { session: "s1".into() };
        let parent = Map::from_iter([("msg_id".to_owned(), Value::String("p".into()))]);
        let frame: Value = serde_json::from_str(&sender.frame("status", "iopub", &parent, &serde_json::json!({"execution_state": "idle"}))).expect("json");
        for key in ["header", "parent_header", "metadata", "content", "buffers", "channel", "msg_id", "msg_type"] {
            assert!(frame.get(key).is_some(), "{key} missing from {frame}");
        }
        let date = frame.pointer("/header/date").and_then(Value::as_str).expect("a date");
        assert!(chrono::NaiveDateTime::parse_from_str(date, "%Y-%m-%dT%H:%M:%S%.fZ").is_ok(), "{date}");
        assert_eq!(frame.pointer("/header/session"), Some(&Value::String("s1".into())));
        assert_eq!(frame.pointer("/parent_header/msg_id"), Some(&Value::String("p".into())));
    }
}
