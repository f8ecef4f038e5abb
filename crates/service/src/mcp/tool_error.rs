//! A failed tool call as MCP carries it: a tool result marked `isError`
//! whose structured content is `{code, message}`, the code being the same
//! stable code as the HTTP envelope's. A model reads it and can correct its
//! call; it is never a protocol error.

use rmcp::ErrorData;
use rmcp::handler::server::tool::IntoCallToolResult;
use rmcp::model::{CallToolResponse, CallToolResult};

use crate::interpreter_service::ServiceError;

/// Why a tool call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolError {
    /// The stable code (`no_such_session`, `invalid_arguments`, ...).
    pub code: &'static str,
    /// What went wrong, for the model to read.
    pub message: String,
}

impl From<ServiceError> for ToolError {
    fn from(e: ServiceError) -> Self {
        Self { code: e.code(), message: e.to_string() }
    }
}

impl ToolError {
    /// The tool result: structured content, with its JSON as the text block
    /// for clients that read only text.
    pub fn into_result(self) -> CallToolResult {
        let value = serde_json::json!({ "code": self.code, "message": self.message });
        CallToolResult::structured_error(value)
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

    #[test]
    fn a_tool_error_is_structured_content_with_its_code_and_message() {
        let error = ToolError::from(ServiceError::from(InterpreterError::NoSuchSession("s1".to_owned())));
        let result = error.into_result();
        assert_eq!(result.is_error, Some(true));
        let structured = result.structured_content.expect("structured content");
        assert_eq!(structured["code"], "no_such_session");
        assert_eq!(structured["message"], "no session \"s1\" (it was closed, expired or never created)");
        let text = result.content.first().and_then(|c| c.as_text()).map(|t| t.text.clone()).expect("a text block");
        assert_eq!(serde_json::from_str::<serde_json::Value>(&text).ok(), Some(structured), "the text is the same JSON");
    }
}
