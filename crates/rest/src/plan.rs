//! The plan schema of seed 000: what a planner (rules or an LLM) emits.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Collections a plan may load besides its resource (its `also_loads`).
pub const MAX_ALSO_LOADS: usize = 4;

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

/// What to load of one collection for a plan: the store's own wire type.
pub use anypath_wire::LoadSpec;

impl Plan {
    /// Every collection the block needs, the default first.
    pub fn collections(&self) -> Vec<&str> {
        std::iter::once(self.resource.as_str()).chain(self.also_loads.iter().map(String::as_str)).collect()
    }

    /// The least each collection must be loaded with. Single-document actions
    /// load just that document (a create: the client's id, or a reserved
    /// one); everything else loads whole. A block that reaches further fails
    /// with `needs_data` and the caller re-runs it on whole collections.
    pub fn load_specs(&self, body: Option<&Value>) -> Vec<LoadSpec> {
        let key = |id: &Value| crate::journal::id_key(id);
        let primary = match self.action.as_str() {
            "get" | "replace" | "patch" | "delete" => match self.id.as_ref().and_then(key) {
                Some(id) => LoadSpec { name: self.resource.clone(), ids: Some(vec![id]), reserve_id: false },
                None => LoadSpec::whole(&self.resource),
            },
            "create" => match body.and_then(|b| b.get("id")) {
                Some(id) => match key(id) {
                    Some(id) => LoadSpec { name: self.resource.clone(), ids: Some(vec![id]), reserve_id: false },
                    None => LoadSpec::whole(&self.resource),
                },
                None => LoadSpec { name: self.resource.clone(), ids: Some(vec![]), reserve_id: true },
            },
            _ => LoadSpec::whole(&self.resource),
        };
        std::iter::once(primary).chain(self.also_loads.iter().map(|n| LoadSpec::whole(n))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(action: &str, id: Option<Value>) -> Plan {
        Plan {
            action: action.into(),
            resource: "m".into(),
            also_loads: vec!["o".into()],
            id,
            criteria: Map::new(),
            payload: None,
            response_hints: ResponseHints::default(),
            code: Code::python("REPLY = {'status': 200}"),
        }
    }

    #[test]
    fn single_document_actions_load_one_document() {
        let by_id = plan("get", Some(Value::from("7"))).load_specs(None);
        assert_eq!(by_id[0].ids, Some(vec!["7".to_string()]));
        assert_eq!(by_id[1], LoadSpec::whole("o"), "further collections load whole");
        let create = plan("create", None).load_specs(Some(&serde_json::json!({"name": "a"})));
        assert_eq!((create[0].ids.clone(), create[0].reserve_id), (Some(vec![]), true));
        let own_id = plan("create", None).load_specs(Some(&serde_json::json!({"id": 9})));
        assert_eq!((own_id[0].ids.clone(), own_id[0].reserve_id), (Some(vec!["9".to_string()]), false));
        assert_eq!(plan("list", None).load_specs(None)[0], LoadSpec::whole("m"));
        assert_eq!(plan("custom", Some(Value::from(1))).load_specs(None)[0], LoadSpec::whole("m"));
    }

    #[test]
    fn fenced_source_round_trips() {
        let code = Code::python("x = 1\nREPLY = {'status': 200}\n");
        assert!(code.block.starts_with("```python\n") && code.block.ends_with("\n```"));
        assert_eq!(code.source(), "x = 1\nREPLY = {'status': 200}");
    }
}
