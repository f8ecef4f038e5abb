//! Why a provider's answer cannot be used, and which of those refusals are
//! about a setting the request could do without.

use serde::Deserialize;

/// Why a provider's answer could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LlmError {
    /// It answered with an error status; `message` is its own words.
    #[error("the provider answered {status}: {message}")]
    Status {
        /// The HTTP status.
        status: u16,
        /// The provider's message, or the start of its body.
        message: String,
    },
    /// It answered 2xx with something its API does not define.
    #[error("the provider's answer is not what its API defines: {0}")]
    Malformed(String),
    /// The request could not be written as JSON.
    #[error("the request cannot be written: {0}")]
    Unwritable(String),
    /// The request asks for something this wire format cannot carry.
    #[error("{provider} requests have no {setting}")]
    Unsupported {
        /// The wire format.
        provider: &'static str,
        /// What it cannot carry.
        setting: &'static str,
    },
}

/// How far into a body without a message the error quotes it.
const QUOTED_BYTES: usize = 300;

/// `{"error": {"message": ...}}`: where OpenAI, Anthropic, llama.cpp, vLLM
/// and Ollama's OpenAI-compatible API all put their reason.
#[derive(Deserialize)]
struct Refusal {
    error: Reason,
}

#[derive(Deserialize)]
struct Reason {
    message: String,
}

impl LlmError {
    /// The error of a non-2xx answer: the provider's message, else the start
    /// of its body (a proxy's HTML page, a plain-text reason).
    pub fn from_status(status: u16, body: &[u8]) -> Self {
        let message = match serde_json::from_slice::<Refusal>(body) {
            Ok(refusal) => refusal.error.message,
            Err(_) => String::from_utf8_lossy(&body[..body.len().min(QUOTED_BYTES)]).into_owned(),
        };
        Self::Status { status, message }
    }

    /// Whether this looks like a server refusing a setting of the request
    /// (a response format, a schema, a grammar, tools) rather than the key,
    /// the model or its load: then the request is worth sending again
    /// without it, which is how a plan steps down to a weaker
    /// [`OutputMode`](crate::OutputMode).
    pub fn refuses_setting(&self) -> bool {
        let Self::Status { status, message } = self else { return false };
        let message = message.to_ascii_lowercase();
        let names_it = ["response_format", "json_schema", "json_object", "schema", "grammar", "tool"]
            .iter()
            .any(|word| message.contains(word));
        match status {
            400 | 415 | 422 | 501 => names_it || message.contains("not supported") || message.contains("unsupported"),
            // Some servers fail a schema they cannot compile as their own fault.
            500 => names_it,
            _ => false,
        }
    }
}

/// `Ok` for a 2xx status; otherwise the provider's refusal.
pub(crate) fn check_status(status: u16, body: &[u8]) -> Result<(), LlmError> {
    if (200..300).contains(&status) { Ok(()) } else { Err(LlmError::from_status(status, body)) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(status: u16, message: &str) -> bool {
        LlmError::Status { status, message: message.into() }.refuses_setting()
    }

    #[test]
    fn only_a_refused_setting_is_a_reason_to_step_down() {
        assert!(refused(400, "'response_format' of type 'json_schema' is not supported with this model"));
        assert!(refused(500, "JSON schema conversion failed"));
        assert!(refused(422, "unsupported parameter"));
        assert!(refused(400, "tools param requires --jinja flag"));
        assert!(!refused(401, "invalid api key: response_format"));
        assert!(!refused(400, "maximum context length exceeded"));
        assert!(!refused(500, "model is loading"));
        assert!(!refused(529, "Overloaded"));
        assert!(!LlmError::Malformed("x".into()).refuses_setting());
    }

    #[test]
    fn a_refusal_keeps_the_providers_words_or_the_start_of_the_body() {
        let openai = br#"{"error":{"message":"bad key","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}"#;
        assert_eq!(LlmError::from_status(401, openai), LlmError::Status { status: 401, message: "bad key".into() });
        // Older Ollama: the reason is the error itself.
        let ollama = br#"{"error":"model 'qwen' not found"}"#;
        assert_eq!(LlmError::from_status(404, ollama).to_string(), format!("the provider answered 404: {}", String::from_utf8_lossy(ollama)));
        let page = vec![b'x'; 1000];
        let LlmError::Status { message, .. } = LlmError::from_status(502, &page) else { panic!("a status") };
        assert_eq!(message.len(), QUOTED_BYTES);
        assert_eq!(check_status(204, b""), Ok(()));
    }
}
