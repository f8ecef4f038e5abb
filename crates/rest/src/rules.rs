//! The offline planner: seed 000's routing rules, applied deterministically.
//!
//! Collection from the first segment, id from the second unless it is
//! `search`; the emitted plan has the same shape an LLM planner emits, and its
//! block uses only `store` and `ctx`.

use serde_json::{Map, Value};

use crate::context::RequestContext;
use crate::error::RestError;
use crate::names;
use crate::plan::{Code, Plan, ResponseHints};

/// Query keys that page and sort rather than filter.
const PAGING_KEYS: [&str; 3] = ["limit", "offset", "sort"];

/// Plans a conventional CRUD request, or explains why no rule fits.
pub fn plan(ctx: &RequestContext) -> Result<Plan, RestError> {
    let Some(resource) = ctx.segments.first() else {
        return Err(RestError::NotFound("no collection in the path: try /<collection>/".into()));
    };
    let resource = names::collection(resource)?.to_owned();
    let id = ctx.segments.get(1).filter(|s| s.as_str() != "search").cloned();
    let is_search = ctx.segments.get(1).is_some_and(|s| s == "search");
    if ctx.segments.len() > 2 {
        return Err(RestError::NotFound(format!("no rule plans {} {}", ctx.method, ctx.path)));
    }
    let method = match ctx.method.as_str() {
        "HEAD" => "GET",
        other => other,
    };
    let (action, source) = match (method, id.is_some(), is_search) {
        ("GET", false, true) => ("search", SEARCH.to_owned()),
        ("GET", false, false) => ("list", LIST.to_owned()),
        ("GET", true, _) => ("get", with_resource(GET, &resource)),
        ("POST", false, false) => ("create", with_resource(CREATE, &resource)),
        ("PUT", true, _) => ("replace", with_resource(&UPDATE.replace("METHOD", "replace"), &resource)),
        ("PATCH", true, _) => ("patch", with_resource(&UPDATE.replace("METHOD", "patch"), &resource)),
        ("DELETE", true, _) => ("delete", with_resource(DELETE, &resource)),
        _ => return Err(RestError::MethodNotAllowed(format!("{} is not supported on {}", ctx.method, ctx.path))),
    };
    let criteria: Map<String, Value> = ctx
        .query
        .iter()
        .filter(|(k, _)| !PAGING_KEYS.contains(&k.as_str()))
        .filter_map(|(k, v)| v.first().map(|first| (k.clone(), Value::String(first.clone()))))
        .collect();
    Ok(Plan {
        action: action.into(),
        resource,
        also_loads: Vec::new(),
        id: id.map(Value::String),
        criteria,
        payload: ctx.body_json.clone(),
        response_hints: ResponseHints { status: Some(default_status(action)), location_id: None },
        code: Code::python(&source),
    })
}

fn default_status(action: &str) -> u16 {
    match action {
        "create" => 201,
        "delete" => 204,
        _ => 200,
    }
}

/// Substitutes the collection name; names are `[A-Za-z0-9_-]`, so no quoting can break.
fn with_resource(template: &str, resource: &str) -> String {
    expand(template).replace("{RESOURCE}", resource)
}

const NOT_FOUND: &str = r#"{"status": 404, "body": {"error": {"code": "not_found", "message": "{RESOURCE}/" + ctx["segments"][1] + " not found"}}}"#;
const NEED_OBJECT: &str = r#"{"status": 400, "body": {"error": {"code": "bad_request", "message": "the body must be a JSON object"}}}"#;

const GET: &str = r#"obj = store.get(ctx["segments"][1])
if obj is None:
    REPLY = NOT_FOUND
else:
    REPLY = {"status": 200, "body": obj}"#;

const CREATE: &str = r#"payload = ctx.get("body_json")
if not isinstance(payload, dict):
    REPLY = NEED_OBJECT
else:
    obj = dict(payload)
    try:
        new_id = store.insert(obj)
    except TypeError as exc:
        REPLY = {"status": 400, "body": {"error": {"code": "bad_request", "message": str(exc)}}}
    except ValueError as exc:
        status = 409 if "already exists" in str(exc) else 400
        REPLY = {"status": status, "body": {"error": {"code": "conflict" if status == 409 else "bad_request", "message": str(exc)}}}
    else:
        REPLY = {"status": 201, "headers": {"Location": "/{RESOURCE}/" + quote_segment(new_id)}, "body": obj}"#;

/// PUT and PATCH: `METHOD` is `replace` or `patch`.
const UPDATE: &str = r#"payload = ctx.get("body_json")
if not isinstance(payload, dict):
    REPLY = NEED_OBJECT
else:
    obj = store.METHOD(ctx["segments"][1], payload)
    REPLY = NOT_FOUND if obj is None else {"status": 200, "body": obj}"#;

const DELETE: &str = r#"if store.delete(ctx["segments"][1]):
    REPLY = {"status": 204}
else:
    REPLY = NOT_FOUND"#;

const SEARCH: &str = r#"q = ctx["query"]
filters = {k: v[0] for k, v in q.items() if k not in ("limit", "offset", "sort") and v}
REPLY = {"status": 200, "body": store.search(filters)}"#;

const LIST: &str = r#"q = ctx["query"]
filters = {k: v[0] for k, v in q.items() if k not in ("limit", "offset", "sort") and v}
limit = (q.get("limit") or [None])[0]
offset = (q.get("offset") or ["0"])[0]
sort = (q.get("sort") or [None])[0]
try:
    page = store.list(limit=limit, offset=offset, sort=sort, filters=filters)
except ValueError as exc:
    REPLY = {"status": 400, "body": {"error": {"code": "bad_request", "message": str(exc)}}}
else:
    REPLY = {"status": 200, "body": page}"#;

/// The block templates with their shared fragments expanded.
fn expand(template: &str) -> String {
    template.replace("NOT_FOUND", NOT_FOUND).replace("NEED_OBJECT", NEED_OBJECT)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::RawRequest;

    fn ctx(method: &str, path: &str, query: &str) -> RequestContext {
        let raw = RawRequest { method, path, query, headers: &[], body: b"", client_ip: "127.0.0.1" };
        RequestContext::build(&raw, "t").unwrap()
    }

    #[test]
    fn seed_routing_rules() {
        for (method, path, action, id) in [
            ("POST", "/members/", "create", None),
            ("GET", "/members/", "list", None),
            ("GET", "/members", "list", None),
            ("GET", "/members/1", "get", Some("1")),
            ("HEAD", "/members/1", "get", Some("1")),
            ("GET", "/members/search", "search", None),
            ("PUT", "/members/1", "replace", Some("1")),
            ("PATCH", "/members/1", "patch", Some("1")),
            ("DELETE", "/members/1", "delete", Some("1")),
        ] {
            let plan = plan(&ctx(method, path, "")).unwrap();
            assert_eq!(plan.action, action, "{method} {path}");
            assert_eq!(plan.resource, "members");
            assert_eq!(plan.id, id.map(|i| Value::String(i.into())));
            assert!(!plan.code.source().contains("NOT_FOUND") && !plan.code.source().contains("{RESOURCE}"));
        }
    }

    #[test]
    fn criteria_come_from_the_query_without_paging_keys() {
        let plan = plan(&ctx("GET", "/members/search", "name=hartmann&limit=5")).unwrap();
        assert_eq!(Value::Object(plan.criteria), serde_json::json!({"name": "hartmann"}));
    }

    #[test]
    fn shapes_without_a_rule_are_refused_with_a_reason() {
        assert_eq!(plan(&ctx("GET", "/", "")).unwrap_err().status(), 404);
        assert_eq!(plan(&ctx("POST", "/members/1/promote", "")).unwrap_err().status(), 404);
        assert_eq!(plan(&ctx("DELETE", "/members/", "")).unwrap_err().status(), 405);
        assert_eq!(plan(&ctx("GET", "/../etc/", "")).unwrap_err().status(), 400);
    }
}
