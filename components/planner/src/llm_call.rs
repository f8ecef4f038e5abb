//! The planner's one way to its LLM, for plans and for the agent's
//! completions alike: the configured provider's adapter writes the request,
//! the request id goes along, and the answer comes back read, or the
//! failure says whose it was.

use anypath_llm::{ChatAnswer, ChatRequest, LlmError, Settings};
use http_client::{CallError, call};

use crate::Failure;
use crate::config::Config;

/// The configured LLM's settings, or why no LLM can be asked.
pub fn settings(config: &Config) -> Result<&Settings, Failure> {
    let settings = config.settings.as_ref().map_err(|e| unconfigured(e.clone()))?;
    if config.base_url.is_empty() {
        return Err(unconfigured("llm_host is not set".into()));
    }
    Ok(settings)
}

/// Why an ask got no usable answer.
pub enum AskError {
    /// No answer came (in time): it says nothing about the request.
    Unreachable(Failure),
    /// The provider answered with an error or an answer its API does not
    /// define; a refused setting is worth asking again without.
    Provider(LlmError),
}

impl From<LlmError> for Failure {
    fn from(error: LlmError) -> Self {
        Self { status: 502, code: "llm_failed", message: error.to_string() }
    }
}

impl From<AskError> for Failure {
    fn from(error: AskError) -> Self {
        match error {
            AskError::Unreachable(failure) => failure,
            AskError::Provider(error) => error.into(),
        }
    }
}

/// Asks the configured LLM for one answer to `chat`.
pub fn ask(config: &Config, settings: &Settings, chat: &ChatRequest, request_id: &str) -> Result<ChatAnswer, AskError> {
    let adapter = settings.provider.adapter();
    let http = adapter.request(settings, &config.api_key, chat).map_err(AskError::Provider)?;
    let url = format!("{}{}", config.base_url, http.path);
    let mut headers: Vec<(&str, &str)> = http.headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
    headers.push(("x-request-id", request_id));
    let answer = call(&url, Some(&http.body), &headers, config.timeout).map_err(|e| {
        AskError::Unreachable(match e {
            CallError::Timeout => Failure { status: 504, code: "llm_timeout", message: "the LLM did not answer in time".into() },
            other => Failure { status: 502, code: "llm_unavailable", message: format!("the LLM is unreachable: {other}") },
        })
    })?;
    adapter.answer(answer.status, &answer.body).map_err(AskError::Provider)
}

fn unconfigured(message: String) -> Failure {
    Failure { status: 503, code: "planner_unconfigured", message }
}
