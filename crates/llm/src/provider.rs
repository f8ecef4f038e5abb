//! Which wire format a provider speaks, and the settings of a call to it.
//! The adapter that writes each format is picked in the crate root, above
//! both adapters, which take these settings.

use serde::Serialize;

use crate::chat::ChatRequest;

/// Which API a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    /// OpenAI-compatible Chat Completions: OpenAI, Azure OpenAI, Ollama,
    /// vLLM, llama.cpp, LM Studio.
    OpenAi,
    /// Anthropic Messages.
    Anthropic,
}

/// An unknown provider name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown llm_provider {0:?} (expected openai or anthropic)")]
pub struct UnknownProvider(pub String);

impl std::str::FromStr for Provider {
    type Err = UnknownProvider;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "openai" | "openai-compatible" | "ollama" | "azure" => Ok(Self::OpenAi),
            "anthropic" => Ok(Self::Anthropic),
            other => Err(UnknownProvider(other.to_owned())),
        }
    }
}

/// Settings of every call: whom to ask, and the defaults a
/// [`ChatRequest`](crate::ChatRequest) may override.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// The wire format.
    pub provider: Provider,
    /// The model asked.
    pub model: String,
    /// Sampling temperature.
    pub temperature: f64,
    /// Most tokens to generate.
    pub max_tokens: u32,
}

/// What every body carries in both formats, under the same names: the
/// model, and the limits (the request's own where it sets them).
#[derive(Serialize)]
pub(crate) struct Sampling<'a> {
    model: &'a str,
    temperature: f64,
    max_tokens: u32,
}

impl Settings {
    /// The model and limits of a request for `chat`.
    pub(crate) fn sampling(&self, chat: &ChatRequest) -> Sampling<'_> {
        Sampling {
            model: &self.model,
            temperature: chat.temperature.unwrap_or(self.temperature),
            max_tokens: chat.max_tokens.unwrap_or(self.max_tokens),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_names_and_their_aliases_parse() {
        for (name, provider) in [("openai", Provider::OpenAi), (" Ollama ", Provider::OpenAi), ("azure", Provider::OpenAi), ("ANTHROPIC", Provider::Anthropic)] {
            assert_eq!(name.parse::<Provider>(), Ok(provider), "{name}");
        }
        assert_eq!("gemini".parse::<Provider>(), Err(UnknownProvider("gemini".into())));
    }
}
