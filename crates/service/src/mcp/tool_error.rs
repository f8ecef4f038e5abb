//! A failed tool call as MCP carries it: a tool result marked `isError`
//! whose one text block is the JSON `{"code", "message"}`, the code being
//! the same stable code as the HTTP envelope's. A model reads it and can
//! correct its call; it is never a protocol error.
//!
//! The error has no `structuredContent`: a tool's output schema describes
//! its answer, not its failure, and clients that validate structured
//! content against that schema even on an error (the TypeScript SDK's
//! `Client.callTool`) would turn a `{code, message}` object into a protocol
//! error. The specification reports tool errors in `content`, which every
//! client reads.

use rmcp::ErrorData;
use rmcp::handler::server::tool::IntoCallToolResult;
use rmcp::model::{CallToolResponse, CallToolResult, ContentBlock};
use serde::Serialize;

use crate::interpreter_service::ServiceError;

/// Why a tool call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolError {
    /// The stable code (`no_such_session`, `invalid_arguments`, ...).
    pub code: &'static str,
    /// What went wrong, for the model to read.
    pub message: String,
}

/// The JSON of a tool error's text block.
#[derive(Debug, Serialize)]
struct ErrorText<'a> {
    code: &'a str,
    message: &'a str,
}

impl From<ServiceError> for ToolError {
    fn from(e: ServiceError) -> Self {
        Self { code: e.code(), message: e.to_string() }
    }
}

impl ToolError {
    /// The tool result: `isError`, with `{code, message}` as its text block.
    pub fn into_result(self) -> CallToolResult {
        let text = ErrorText { code: self.code, message: &self.message };
        // Two strings always serialize; the fallback keeps the code readable should that change.
        let json = serde_json::to_string(&text).unwrap_or_else(|_| format!("{{\"code\":\"{}\"}}", self.code));
        CallToolResult::error(vec![ContentBlock::text(json)])
    }
}

impl IntoCallToolResult for ToolError {
    fn into_call_tool_result(self) -> Result<CallToolResponse, ErrorData> {
        self.into_result().into_call_tool_result()
    }
}

#[cfg(test)]
mod tests {
    use anypath_interpreter::InterpreterError;

    use super::*;

    /// What a client parses out of the text block.
    #[derive(Debug, serde::Deserialize, PartialEq, Eq)]
    #[serde(deny_unknown_fields)]
    struct Parsed {
        code: String,
        message: String,
    }

    #[test]
    fn a_tool_error_is_one_text_block_with_its_code_and_message_and_no_structured_content() {
        let error = ToolError::from(ServiceError::from(InterpreterError::NoSuchSession("s1".to_owned())));
        let result = error.into_result();
        assert_eq!(result.is_error, Some(true));
        assert_eq!(result.structured_content, None, "an error must not be checked against the answer's schema");
        let [block] = result.content.as_slice() else { panic!("one content block: {:?}", result.content) };
        let text = block.as_text().map(|t| t.text.clone()).expect("a text block");
        let parsed: Parsed = serde_json::from_str(&text).expect("the text is exactly {code, message}");
        let message = "no session \"s1\" (it was closed, expired or never created)".to_owned();
        assert_eq!(parsed, Parsed { code: "no_such_session".to_owned(), message });
    }
}
