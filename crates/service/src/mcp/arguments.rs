//! Tool arguments that never fail the protocol: rmcp's own `Parameters`
//! answers malformed arguments with a JSON-RPC error, which a model cannot
//! read or correct; the MCP specification asks for a tool error instead.

use std::sync::Arc;

use rmcp::handler::server::common::{FromContextPart, schema_for_empty_input, schema_for_input};
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::model::JsonObject;
use serde::de::DeserializeOwned;

use crate::interpreter_service::ServiceError;

/// A tool's arguments, or why they do not fit its input schema.
pub struct Arguments<T>(pub Result<T, ServiceError>);

impl<S, T: DeserializeOwned> FromContextPart<ToolCallContext<'_, S>> for Arguments<T> {
    fn from_context_part(context: &mut ToolCallContext<'_, S>) -> Result<Self, rmcp::ErrorData> {
        let arguments = context.arguments.take().unwrap_or_default();
        let parsed = serde_json::from_value(serde_json::Value::Object(arguments)).map_err(ServiceError::InvalidArguments);
        Ok(Self(parsed))
    }
}

/// The input schema of a tool taking `T`.
pub fn input_schema<T: schemars::JsonSchema + 'static>() -> Arc<JsonObject> {
    // Every argument type here is a struct, so its schema is an object; the
    // fallback only keeps a listing alive should that ever change.
    schema_for_input::<T>().unwrap_or_else(|_| schema_for_empty_input())
}
