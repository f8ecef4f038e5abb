//! The Router+Planner prompt of seed 000, with the `store` API the runner
//! really offers and a short description of the tenant's collections.

use anypath_llm::Message;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::RequestContext;
use crate::examples::{self, Example};

/// Bumped whenever the prompt changes, so cached plans of the old prompt are not reused.
pub const PROMPT_VERSION: &str = "p6";

/// The system prompt: role, answer shape, routing, code rules and the store API.
pub const SYSTEM: &str = r#"You are a REST Planner. For each HTTP request you get its context and answer one JSON object: a plan and a Python block that performs the request with the `store` API already in the runtime. The code makes no network calls, imports nothing but json, re, math, statistics, datetime, itertools, uuid, and never prints.

Answer exactly this JSON shape:
{"action": "create|get|list|replace|patch|delete|search|custom", "resource": "<collection>", "also_loads": ["<other collection the code uses>"], "id": <id from the path, or null>, "code": {"language": "python", "block": "```python\n<code>\n```"}}

Routing:
- The collection is the first path segment (/members/... -> "members"); the id is the second, unless it is "search".
- POST /c/ create; GET /c/ list; GET /c/<id> get; PUT /c/<id> replace; PATCH /c/<id> patch; DELETE /c/<id> delete; GET /c/search?field=value search.
- Anything else (POST /orders/7/cancel, GET /orders/stats, GET /members/1/orders) is "custom"; name every other collection the code touches in also_loads.

Code rules:
- Read ids, query values and the body from ctx, never as literals: ctx['segments'][1], ctx['query'].get('limit'), ctx['body_json'].
- Write Python strings with single quotes.
- Every path through the code assigns REPLY = {'status': int, 'headers': {...}, 'body': <JSON value>}. REPLY is always a dict, never what a store call returns.
- On create, store.insert(obj) returns the new id and sets obj['id']; answer 201, {'Location': '/<collection>/' + quote_segment(new_id)} and the object.
- To change some fields of a document use store.patch, which keeps the others; store.replace keeps only what it is given.
- A missing document answers 404 with {'error': {'code': 'not_found', 'message': '...'}}.

ctx = {'method', 'path', 'segments': [...], 'query': {'key': ['value', ...]}, 'headers': {...}, 'body_json': JSON or None, 'list': {'args': {...}} on a list request}
store (the resource collection; store.collection(name) is another loaded collection with the same methods):
  store.get(id) -> dict or None          store.insert(obj) -> new id
  store.replace(id, obj) -> dict or None store.patch(id, delta) -> dict or None
  store.delete(id) -> bool               store.get_all() -> [dict]
  store.search({'field': v, 'field__gt': v}) -> [dict]   operators: contains icontains gt gte lt lte ne in
  store.list(limit=None, offset=0, sort='-field', filters=None) -> {'items': [...], 'page': {'limit', 'offset', 'total'}}
  An id may be given as the path has it (a string); limit, offset and sort as the query's lists.
  A list request's paging, sorting and filters, in whatever vocabulary the client used, are ctx['list']['args']: list with REPLY = {'status': 200, 'body': store.list(**ctx['list']['args'])}.

Answer with the JSON object only."#;

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
pub fn request_turn(ctx: &RequestContext, collections: &[CollectionSummary]) -> Message {
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
    Message::user(content)
}

/// Everything after the system prompt: the worked example for this shape of
/// request, the request itself, then each failed answer with what was wrong.
pub fn conversation(ctx: &RequestContext, collections: &[CollectionSummary], repairs: &[(String, String)]) -> Vec<Message> {
    let mut turns: Vec<Message> = example_turns(examples::for_request(ctx)).into();
    turns.push(request_turn(ctx, collections));
    for (answer, problem) in repairs {
        turns.extend(repair_turns(answer, problem));
    }
    turns
}

/// A worked example as an earlier request on a collection of its own,
/// `books`, and the plan that answered it.
pub fn example_turns(example: &Example) -> [Message; 2] {
    let books = CollectionSummary {
        name: "books".into(),
        count: 12,
        sample_ids: vec![json!(1), json!(2), json!(3)],
        fields: [("id", "integer"), ("title", "string"), ("year", "integer")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    };
    [request_turn(&example.context(), &[books]), Message::assistant(example.plan().to_string())]
}

/// The turns that ask for a repair of `previous` (the model's last answer).
pub fn repair_turns(previous: &str, problem: &str) -> [Message; 2] {
    [
        Message::assistant(previous),
        Message::user(format!("That plan failed: {problem}\nFix it and output only the corrected JSON object per the schema.")),
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
        for example in &examples::EXAMPLES {
            let chars: usize = example_turns(example).iter().map(|t| t.text().len()).sum();
            assert!(chars < 900, "the {} example is {chars} characters", example.action);
        }
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
        assert!(turn.text().len() < 600, "request turn is {} characters: {}", turn.text().len(), turn.text());
    }

    #[test]
    fn the_request_turn_names_the_request_and_existing_collections_only() {
        let headers = vec![("authorization".to_string(), "Bearer secret".to_string())];
        let raw = RawRequest { method: "GET", path: "/members/1", query: "", headers: &headers, body: b"", client_ip: "" };
        let ctx = RequestContext::build(&raw, "t").unwrap();
        let members = CollectionSummary { name: "members".into(), count: 2, sample_ids: vec![json!(1)], ..Default::default() };
        let empty = CollectionSummary { name: "1".into(), ..Default::default() };
        let turn = request_turn(&ctx, &[members, empty]);
        assert!(turn.text().contains("\"/members/1\"") && turn.text().contains("\"members\""));
        assert!(!turn.text().contains("secret"), "headers never reach the model");
        assert!(!turn.text().contains("\"name\":\"1\""), "empty collections are left out");
    }
}
