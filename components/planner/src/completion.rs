//! `POST /complete`: one completion for the agent, which may not reach the
//! LLM itself. The body is an `anypath_llm::ChatRequest` and the answer a
//! `ChatAnswer`, the same types the agent writes and reads; the configured
//! provider's adapter carries them in its native format.

use anypath_llm::{ChatAnswer, ChatRequest};

use crate::Failure;
use crate::config::Config;
use crate::llm_call;

/// Asks the configured LLM for one completion of `chat`.
pub fn complete(config: &Config, chat: &ChatRequest, request_id: &str) -> Result<ChatAnswer, Failure> {
    let settings = llm_call::settings(config)?;
    Ok(llm_call::ask(config, settings, chat, request_id)?)
}
