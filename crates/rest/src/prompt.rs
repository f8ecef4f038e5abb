//! The Router+Planner prompt of seed 000, with the `store` API the runner
//! really offers and a short description of the tenant's collections.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::RequestContext;
use crate::llm::Turn;

/// Bumped whenever the prompt changes, so cached plans of the old prompt are not reused.
pub const PROMPT_VERSION: &str = "p2";

/// The system prompt: role, schema, rules and the store API.
pub const SYSTEM: &str = r#"You are a REST Planner. For each HTTP request context, infer the intended action over a resource collection and produce:
1. a strict JSON plan and
2. a single Python code block that performs the action using the provided `store` API (already available in the runtime).
You do not make network calls in the generated code. You only read/write JSON collections via `store`. You never import modules other than json, re, math, statistics, datetime, itertools, uuid. You return data structures that are JSON-serializable.

SCHEMA (your output must be valid JSON):
{
  "action": "create|get|list|replace|patch|delete|search|custom",
  "resource": "<collection name>",
  "also_loads": ["<other collection the code reads or writes>"],
  "id": "<string or int or null>",
  "criteria": {"field": "value"},
  "payload": {},
  "response_hints": {"status": 200, "location_id": null},
  "code": {"language": "python", "block": "```python\n# code that uses 'store' and 'ctx'\n```"}
}

Rules:
- Collection name defaults to the first path segment (/members/... -> "members").
- id is the second segment if present and not "search".
- /<collection>/search sets action "search"; filters come from query parameters.
- POST /<collection>/ -> create; GET /<collection>/ -> list; GET /<collection>/<id> -> get; PUT -> replace; PATCH -> patch; DELETE -> delete.
- Anything else (e.g. POST /members/1/promote, GET /orders/stats, GET /members/1/orders) is action "custom"; name every other collection the code touches in also_loads.
- Read ids, query values and the body from ctx; never write them into the code as literals, so the plan works for any id.
- If the body lacks an id on create, call store.insert(payload) and use the returned id.
- The code must end by assigning REPLY = {"status": int, "headers": {...}, "body": <json>}. Do not print.
- Put an id into a path with quote_segment(id): {"Location": "/members/" + quote_segment(new_id)}.
- Missing documents answer 404 with {"error": {"code": "not_found", "message": "..."}}.

ctx: {"method", "path", "segments": [...], "query": {"key": ["value", ...]}, "headers": {...}, "body_json": <json or null>}.
store (the resource collection; store.collection(name) gives another loaded collection with the same methods):
  store.get(id) -> dict or None          store.insert(obj) -> id (sets obj["id"])
  store.replace(id, obj) -> dict or None store.patch(id, delta) -> dict or None
  store.delete(id) -> bool               store.get_all() -> [dict]
  store.search({"field": v, "field__gt": v}) -> [dict]   operators: contains icontains gt gte lt lte ne in
  store.list(limit=None, offset=0, sort="-field", filters=None) -> {"items": [...], "page": {"limit", "offset", "total"}}

Now output only the JSON object per the schema above."#;

/// What the planner is told about one collection.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CollectionSummary {
    pub name: String,
    pub count: u64,
    /// A few ids, to show their form.
    pub sample_ids: Vec<Value>,
    /// Field name to JSON type, as seen in a few documents.
    pub fields: std::collections::BTreeMap<String, String>,
}

/// The JSON type name of `value`.
pub fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The user turn: the request and the collections it names.
pub fn request_turn(ctx: &RequestContext, collections: &[CollectionSummary]) -> Turn {
    let request = json!({
        "method": ctx.method,
        "path": ctx.path,
        "segments": ctx.segments,
        "query": ctx.query,
        "body_json": ctx.body_json,
    });
    let existing: Vec<&CollectionSummary> = collections.iter().filter(|c| c.count > 0).collect();
    let content = format!(
        "Request context:\n{}\nExisting collections (name, count, sample ids, field types):\n{}",
        request,
        if existing.is_empty() { "none".to_owned() } else { serde_json::to_string(&existing).unwrap_or_default() }
    );
    Turn { role: "user", content }
}

/// The turns that ask for a repair of `previous` (the model's last answer).
pub fn repair_turns(previous: &str, problem: &str) -> [Turn; 2] {
    [
        Turn { role: "assistant", content: previous.to_owned() },
        Turn {
            role: "user",
            content: format!(
                "That plan failed: {problem}\nFix it and output only the corrected JSON object per the schema."
            ),
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::RawRequest;

    /// The prompt is paid on every LLM call: both parts are held to a budget.
    #[test]
    fn the_prompt_stays_small() {
        assert!(SYSTEM.len() < 3_000, "system prompt is {} characters", SYSTEM.len());
        let headers = vec![("content-type".to_string(), "application/json".to_string())];
        let body = br#"{"name": "Alice", "age": 31}"#;
        let raw = RawRequest { method: "POST", path: "/members/", query: "", headers: &headers, body, client_ip: "" };
        let ctx = RequestContext::build(&raw, "t").unwrap();
        let fields = [("id", "integer"), ("name", "string"), ("age", "integer")];
        let members = CollectionSummary {
            name: "members".into(),
            count: 1200,
            sample_ids: vec![json!(1), json!(2), json!(3)],
            fields: fields.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        };
        let turn = request_turn(&ctx, &[members]);
        assert!(turn.content.len() < 600, "request turn is {} characters: {}", turn.content.len(), turn.content);
    }

    #[test]
    fn the_request_turn_names_the_request_and_existing_collections_only() {
        let headers = vec![("authorization".to_string(), "Bearer secret".to_string())];
        let raw = RawRequest { method: "GET", path: "/members/1", query: "", headers: &headers, body: b"", client_ip: "" };
        let ctx = RequestContext::build(&raw, "t").unwrap();
        let members = CollectionSummary { name: "members".into(), count: 2, sample_ids: vec![json!(1)], ..Default::default() };
        let empty = CollectionSummary { name: "1".into(), ..Default::default() };
        let turn = request_turn(&ctx, &[members, empty]);
        assert!(turn.content.contains("\"/members/1\"") && turn.content.contains("\"members\""));
        assert!(!turn.content.contains("secret"), "headers never reach the model");
        assert!(!turn.content.contains("\"name\":\"1\""), "empty collections are left out");
    }
}
