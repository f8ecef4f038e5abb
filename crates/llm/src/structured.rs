//! Answers held to a JSON Schema, as a use of the one chat path: how a
//! request asks for one ([`OutputMode`]), the weaker mode to ask for when a
//! server refuses a stronger one, and where what a server accepted is
//! remembered ([`memo_key`]). The caller keeps the memo and sends the bytes.


use crate::chat::{ChatRequest, OutputSchema, ResponseFormat};
use crate::provider::Provider;

/// How the answer is held to the schema, strongest first. A server that
/// refuses one is asked again with the next, and the caller remembers what
/// worked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputMode {
    /// The schema itself: a `response_format` on OpenAI-compatible servers,
    /// a forced tool call on Anthropic.
    Schema,
    /// Some JSON object: OpenAI-compatible `response_format: json_object`.
    JsonObject,
    /// Nothing but the prompt.
    Free,
}

impl OutputMode {
    /// Every mode, strongest first.
    pub const ALL: [Self; 3] = [Self::Schema, Self::JsonObject, Self::Free];

    /// The name used in settings and logs.
    pub fn name(self) -> &'static str {
        match self {
            Self::Schema => "json_schema",
            Self::JsonObject => "json_object",
            Self::Free => "none",
        }
    }

    /// The mode called `name`, if any.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.name() == name.trim())
    }

    /// The weaker mode to try when a server refuses this one (a provider
    /// without a JSON mode goes straight to free text).
    pub fn fallback(self, provider: Provider) -> Option<Self> {
        match self {
            Self::Schema if provider.adapter().has_json_mode() => Some(Self::JsonObject),
            Self::Schema | Self::JsonObject => Some(Self::Free),
            Self::Free => None,
        }
    }

    /// Makes `chat` ask `provider` for an answer held this way to `schema`.
    /// A provider without a JSON mode gets only the prompt for [`Self::JsonObject`].
    pub fn apply(self, provider: Provider, chat: &mut ChatRequest, schema: &OutputSchema) {
        let adapter = provider.adapter();
        match self {
            Self::Schema => adapter.require_schema(chat, schema),
            Self::JsonObject if adapter.has_json_mode() => chat.response_format = Some(ResponseFormat::JsonObject),
            Self::JsonObject | Self::Free => {}
        }
    }
}

/// Where what a server accepts is remembered: 64 hex digits of what is
/// remembered (`output_mode`, `tool_choice`), its URL and its model.
pub fn memo_key(what: &str, base_url: &str, model: &str) -> String {
    use sha2::{Digest, Sha256};
    let mut hash = Sha256::new();
    // The zero bytes keep "ab"+"c" apart from "a"+"bc".
    for part in [what, base_url, model] {
        hash.update(part.as_bytes());
        hash.update([0u8]);
    }
    hex::encode(hash.finalize())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::chat::{Message, ToolChoice};

    fn schema() -> OutputSchema {
        OutputSchema { name: "answer".into(), description: "Submit the answer.".into(), schema: json!({"type": "object", "required": ["a"]}) }
    }

    fn asked(provider: Provider, mode: OutputMode) -> ChatRequest {
        let mut chat = ChatRequest::new("s", vec![Message::user("u")]);
        mode.apply(provider, &mut chat, &schema());
        chat
    }

    #[test]
    fn structured_output_follows_the_mode_and_the_provider() {
        let schema_format = ResponseFormat::JsonSchema { name: "answer".into(), schema: schema().schema, strict: false };
        assert_eq!(asked(Provider::OpenAi, OutputMode::Schema).response_format, Some(schema_format));
        assert_eq!(asked(Provider::OpenAi, OutputMode::JsonObject).response_format, Some(ResponseFormat::JsonObject));
        assert_eq!(asked(Provider::OpenAi, OutputMode::Free), ChatRequest::new("s", vec![Message::user("u")]));
        let forced = asked(Provider::Anthropic, OutputMode::Schema);
        assert_eq!(forced.tool_choice, Some(ToolChoice::Tool { name: "answer".into() }));
        assert_eq!((forced.tools[0].description.as_str(), &forced.tools[0].parameters), ("Submit the answer.", &schema().schema));
        assert_eq!(forced.response_format, None);
        assert_eq!(asked(Provider::Anthropic, OutputMode::JsonObject), ChatRequest::new("s", vec![Message::user("u")]), "no JSON mode");
    }

    #[test]
    fn fallbacks_step_down_to_free_text() {
        assert_eq!(OutputMode::Schema.fallback(Provider::OpenAi), Some(OutputMode::JsonObject));
        assert_eq!(OutputMode::JsonObject.fallback(Provider::OpenAi), Some(OutputMode::Free));
        assert_eq!(OutputMode::Schema.fallback(Provider::Anthropic), Some(OutputMode::Free));
        assert_eq!(OutputMode::Free.fallback(Provider::OpenAi), None);
        for mode in OutputMode::ALL {
            assert_eq!(OutputMode::from_name(mode.name()), Some(mode));
        }
        assert_eq!(OutputMode::from_name(" json_object "), Some(OutputMode::JsonObject));
        assert_eq!(OutputMode::from_name("auto"), None);
    }

    /// The key names what a server accepted across restarts: it must not change.
    #[test]
    fn the_memo_key_is_stable_per_server_and_model() {
        let key = memo_key("output_mode", "http://127.0.0.1:8080", "qwen");
        assert_eq!(key, "0ccc558f1af2d545033a84c92cffd2a92a94c9884f2fd9d3c19bbff1324a8de6");
        assert_ne!(key, memo_key("output_mode", "http://127.0.0.1:8080", "qwen2"));
        assert_ne!(key, memo_key("tool_choice", "http://127.0.0.1:8080", "qwen"), "each thing remembered has its own key");
        assert_ne!(memo_key("output_mode", "ab", "c"), memo_key("output_mode", "a", "bc"));
    }
}
