//! The plan schema of seed 000: what a planner (rules or an LLM) emits.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One planned request: the action, its collection(s) and one Python block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// `create|get|list|replace|patch|delete|search` (or `custom`).
    pub action: String,
    /// The default collection, bound to `store`.
    pub resource: String,
    /// Further collections the block may open with `store.collection(name)`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub also_loads: Vec<String>,
    pub id: Option<Value>,
    #[serde(default)]
    pub criteria: Map<String, Value>,
    #[serde(default)]
    pub payload: Option<Value>,
    #[serde(default)]
    pub response_hints: ResponseHints,
    pub code: Code,
}

/// Optional status and location hints.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ResponseHints {
    pub status: Option<u16>,
    pub location_id: Option<Value>,
}

/// The single Python block, fenced as seed 000 prescribes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Code {
    pub language: String,
    pub block: String,
}

impl Code {
    /// Wraps source in a ```python fence.
    pub fn python(source: &str) -> Self {
        Self { language: "python".into(), block: format!("```python\n{}\n```", source.trim_end()) }
    }

    /// The source inside the fence (or the whole block when it has none).
    pub fn source(&self) -> &str {
        let block = self.block.trim();
        let Some(rest) = block.strip_prefix("```") else { return block };
        let rest = rest.strip_prefix("python").unwrap_or(rest);
        let rest = rest.strip_prefix('\n').unwrap_or(rest);
        rest.strip_suffix("```").unwrap_or(rest).trim_end_matches('\n')
    }
}

impl Plan {
    /// Every collection the block needs, the default first.
    pub fn collections(&self) -> Vec<&str> {
        std::iter::once(self.resource.as_str()).chain(self.also_loads.iter().map(String::as_str)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fenced_source_round_trips() {
        let code = Code::python("x = 1\nREPLY = {'status': 200}\n");
        assert!(code.block.starts_with("```python\n") && code.block.ends_with("\n```"));
        assert_eq!(code.source(), "x = 1\nREPLY = {'status': 200}");
    }
}
