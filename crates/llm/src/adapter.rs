//! What each provider's adapter does: write a [`ChatRequest`] as its HTTP
//! request, read its HTTP answer as a [`ChatAnswer`], and say how it holds
//! an answer to a JSON Schema and where that answer then is.

use serde::Serialize;

use crate::answer::ChatAnswer;
use crate::chat::{ChatRequest, OutputSchema};
use crate::error::LlmError;
use crate::provider::Settings;

/// An HTTP request to make: path (after the base URL), headers, JSON body.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpCall {
    /// The path after the provider's base URL.
    pub path: &'static str,
    /// Headers, the content type and the key among them.
    pub headers: Vec<(&'static str, String)>,
    /// The JSON body.
    pub body: Vec<u8>,
}

impl HttpCall {
    /// A POST of `body` as JSON to `path`, with `headers` after the content type.
    pub(crate) fn json(path: &'static str, headers: Vec<(&'static str, String)>, body: &impl Serialize) -> Result<Self, LlmError> {
        let body = serde_json::to_vec(body).map_err(|e| LlmError::Unwritable(e.to_string()))?;
        let mut all = vec![("content-type", "application/json".to_owned())];
        all.extend(headers);
        Ok(Self { path, headers: all, body })
    }
}

/// One provider's wire format.
pub trait Adapter: Sync {
    /// The wire format's name, for errors.
    fn name(&self) -> &'static str;

    /// The request asking `settings.model` for `chat`, with `api_key` as this
    /// provider takes it; an error when `chat` asks for what the format cannot carry.
    fn request(&self, settings: &Settings, api_key: &str, chat: &ChatRequest) -> Result<HttpCall, LlmError>;

    /// The provider's HTTP answer read as a [`ChatAnswer`]; a refusal, or a
    /// 2xx answer not shaped as the API defines, as an [`LlmError`].
    fn answer(&self, status: u16, body: &[u8]) -> Result<ChatAnswer, LlmError>;

    /// Holds `chat` to `schema` the strongest way this provider has.
    fn require_schema(&self, chat: &mut ChatRequest, schema: &OutputSchema);

    /// Whether the provider has a JSON mode (`response_format: json_object`).
    fn has_json_mode(&self) -> bool;

    /// The text of an answer to a request held to a schema or asking for
    /// JSON, from where this provider puts it.
    fn structured_text(&self, answer: &ChatAnswer) -> Result<String, LlmError>;
}
