//! The plan as a JSON Schema, for providers that constrain their output to
//! one (`response_format` on OpenAI-compatible servers, a forced tool call on
//! Anthropic). A constrained model cannot emit prose, a second object or a
//! missing field, which is most of what a small model gets wrong.
//!
//! Only the fields the gateway uses are in it: fewer tokens to generate, and
//! nothing optional that a grammar would have to guess about.

use anypath_llm::OutputSchema;
use serde_json::{Value, json};

use crate::plan_check::ACTIONS;

/// The name under which the schema is sent (the tool name on Anthropic).
pub const SCHEMA_NAME: &str = "rest_plan";

/// The plan's JSON Schema: `action`, `resource`, `also_loads`, `id`, `code`.
pub fn plan_json_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": ACTIONS},
            "resource": {"type": "string"},
            "also_loads": {"type": "array", "items": {"type": "string"}},
            "id": {"type": ["string", "integer", "null"]},
            "code": {
                "type": "object",
                "properties": {
                    "language": {"type": "string", "enum": ["python"]},
                    "block": {"type": "string"}
                },
                "required": ["language", "block"],
                "additionalProperties": false
            }
        },
        "required": ["action", "resource", "also_loads", "id", "code"],
        "additionalProperties": false
    })
}

/// What a plan is held to: the schema under its name, with what the
/// answer is for where a tool carries it (Anthropic's forced tool call).
pub fn output_schema() -> OutputSchema {
    OutputSchema { name: SCHEMA_NAME.to_owned(), description: "Submit the plan for the request.".to_owned(), schema: plan_json_schema() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan_check::parse_plan;

    /// Every object the schema admits (with a valid name and a REPLY) parses as a plan.
    #[test]
    fn a_plan_of_the_schema_parses() {
        let schema = plan_json_schema();
        let required: Vec<&str> = schema["required"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
        let plan = json!({
            "action": "get", "resource": "members", "also_loads": [], "id": 1,
            "code": {"language": "python", "block": "REPLY = {'status': 200}"}
        });
        for field in required {
            assert!(plan.get(field).is_some(), "{field} is required by the schema");
        }
        assert_eq!(parse_plan(&plan.to_string()).unwrap().resource, "members");
    }

    /// Each provider is asked for this schema its own way, under this name.
    #[test]
    fn a_plan_is_asked_for_by_its_schema_on_either_provider() {
        use anypath_llm::{ChatRequest, OutputMode, Provider, ResponseFormat, ToolChoice};
        let asked = |provider| {
            let mut chat = ChatRequest::new("s", vec![]);
            OutputMode::Schema.apply(provider, &mut chat, &output_schema());
            chat
        };
        let openai = asked(Provider::OpenAi);
        assert_eq!(openai.response_format, Some(ResponseFormat::JsonSchema { name: SCHEMA_NAME.into(), schema: plan_json_schema(), strict: false }));
        let anthropic = asked(Provider::Anthropic);
        assert_eq!(anthropic.tool_choice, Some(ToolChoice::Tool { name: SCHEMA_NAME.into() }));
        assert_eq!((anthropic.tools[0].name.as_str(), &anthropic.tools[0].parameters), (SCHEMA_NAME, &plan_json_schema()));
    }
}
