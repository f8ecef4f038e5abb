//! `POST /complete`: one tool-calling completion for the agent, which may
//! not reach the LLM itself. The body is a provider-neutral
//! [`ChatRequest`]; the answer a [`ChatReply`] in the same shape, written and
//! read in the provider's native format (`anypath_rest::chat`).

use anypath_rest::chat::{self, ChatReply, ChatRequest};
use http_client::{CallError, call};

use crate::config::Config;
use crate::Failure;

/// Asks the configured LLM for one completion of `chat`.
pub fn complete(config: &Config, chat: &ChatRequest, request_id: &str) -> Result<ChatReply, Failure> {
    let settings = config.settings.as_ref().map_err(|e| crate::unconfigured(e.clone()))?;
    if config.base_url.is_empty() {
        return Err(crate::unconfigured("llm_host is not set".into()));
    }
    let http = chat::request(settings, &config.api_key, chat);
    let url = format!("{}{}", config.base_url, http.path);
    let mut headers: Vec<(&str, &str)> = http.headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
    headers.push(("x-request-id", request_id));
    let answer = call(&url, Some(&http.body), &headers, config.timeout).map_err(|e| match e {
        CallError::Timeout => Failure { status: 504, code: "llm_timeout", message: "the LLM did not answer in time".into() },
        other => Failure { status: 502, code: "llm_unavailable", message: format!("the LLM is unreachable: {other}") },
    })?;
    chat::response(settings.provider, answer.status, &answer.body).map_err(|e| crate::llm_failed(&e))
}
