//! The offline planner: seed 000's routing rules, applied deterministically.
//!
//! Collection from the first segment, id from the second unless it is
//! `search`; the emitted plan has the same shape an LLM planner emits, and its
//! block uses only `store` and `ctx`.

use serde_json::{Map, Value};

use crate::context::RequestContext;
use crate::error::RestError;
use crate::list_query;
use crate::names;
use crate::plan::{Code, Plan, ResponseHints};

/// Plans a conventional CRUD request, or explains why no rule fits.
pub fn plan(ctx: &RequestContext) -> Result<Plan, RestError> {
    let Some(resource) = ctx.segments.first() else {
        return Err(RestError::NotFound("no collection in the path: try /<collection>/".into()));
    };
    let method = match ctx.method.as_str() {
        "HEAD" => "GET",
        other => other,
    };
    if let [parent, _, children] = ctx.segments.as_slice() {
        return nested(ctx, method, parent, children);
    }
    let resource = names::collection(resource)?.to_owned();
    let id = ctx.segments.get(1).filter(|s| s.as_str() != "search").cloned();
    let is_search = ctx.segments.get(1).is_some_and(|s| s == "search");
    if ctx.segments.len() > 2 {
        return Err(RestError::NotFound(format!("no rule plans {} {}", ctx.method, ctx.path)));
    }
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
    Ok(Plan {
        action: action.into(),
        also_loads: if action == "list" { related(ctx) } else { Vec::new() },
        resource,
        id: id.map(Value::String),
        criteria: criteria(ctx),
        payload: ctx.body_json.clone(),
        response_hints: ResponseHints { status: Some(default_status(action)), location_id: None },
        code: Code::python(&source),
    })
}

/// A request the seed's rules answer as well as a model would: a collection
/// path, `/search`, or a generated-looking id, with a method the rules map.
/// In `auto` mode these are planned by the rules, the rest by the model.
pub fn conventional(ctx: &RequestContext) -> bool {
    let shape_ok = match ctx.segments.as_slice() {
        [_] => true,
        [_, second] => second == "search" || crate::shape::is_id_like(second),
        _ => false,
    };
    shape_ok && plan(ctx).is_ok()
}

/// The query's field filters, for the plan's record of what it reads.
fn criteria(ctx: &RequestContext) -> Map<String, Value> {
    ctx.query
        .iter()
        .filter(|(k, _)| !list_query::is_control(k))
        .filter_map(|(k, v)| v.first().map(|first| (k.clone(), Value::String(first.clone()))))
        .collect()
}

/// The collections a list's `_embed` and `_expand` read besides its own.
fn related(ctx: &RequestContext) -> Vec<String> {
    let Some(list) = &ctx.list else { return Vec::new() };
    let own = ctx.segments.last().map(String::as_str).unwrap_or_default();
    list.args.related_collections().into_iter().filter(|name| names::collection(name).is_ok() && *name != own).map(str::to_owned).collect()
}

/// json-server's nested routes: `GET /posts/1/comments` lists the comments
/// whose `postId` is 1 (the filter is in `ctx["list"]`), `POST` creates one
/// with `postId` set.
fn nested(ctx: &RequestContext, method: &str, parent: &str, children: &str) -> Result<Plan, RestError> {
    names::collection(parent)?;
    // Under the rules the third segment names a collection: anything else
    // is a path no rule plans, as it was before nested routes.
    let resource = names::collection(children)
        .map_err(|_| RestError::NotFound(format!("no rule plans {} {}: {children:?} is not a collection name", ctx.method, ctx.path)))?
        .to_owned();
    let parent_id = ctx.segments.get(1).map(String::as_str).unwrap_or_default();
    if !names::reachable_id(parent_id) {
        return Err(RestError::BadRequest(format!("{parent_id:?} cannot name a document of {parent}")));
    }
    let foreign_key = format!("{}Id", list_query::singular(parent));
    let (action, source) = match method {
        "GET" => {
            if ctx.list.is_none() {
                // The context leaves a nested query it cannot read to a model; the rules list it, so say why it cannot be read.
                list_query::ListQuery::parse(&ctx.query, ctx.headers.get("range").map(String::as_str), &resource, Some((parent, parent_id)))?;
            }
            ("list", LIST.to_owned())
        }
        // The key holds the parent's id as stored (a number stays a number).
        "POST" => ("create", with_resource(&CREATE.replace("obj = dict(payload)", &format!("obj = dict(payload)\n    obj[\"{foreign_key}\"] = parent[\"id\"]")), &resource)),
        _ => return Err(RestError::MethodNotAllowed(format!("{} is not supported on {}: a nested route lists (GET) and creates (POST)", ctx.method, ctx.path))),
    };
    // The children of a document that does not exist are not found either,
    // and none is created for it: checked before anything else runs.
    let indented: Vec<String> = source.lines().map(|line| format!("    {line}")).collect();
    let source = format!(
        "parent = {}\nif parent is None:\n    REPLY = {{\"status\": 404, \"body\": {{\"error\": {{\"code\": \"not_found\", \"message\": \"{parent}/\" + ctx[\"segments\"][1] + \" not found\"}}}}}}\nelse:\n{}",
        parent_lookup(parent, &resource),
        indented.join("\n")
    );
    let mut also_loads = if action == "list" { related(ctx) } else { Vec::new() };
    if parent != resource && !also_loads.iter().any(|name| name == parent) {
        also_loads.push(parent.to_owned());
    }
    Ok(Plan {
        action: action.into(),
        also_loads,
        resource,
        id: None,
        criteria: criteria(ctx),
        payload: ctx.body_json.clone(),
        response_hints: ResponseHints { status: Some(default_status(action)), location_id: None },
        code: Code::python(&source),
    })
}

/// Python that reads the nested route's parent document, or None.
fn parent_lookup(parent: &str, resource: &str) -> String {
    let collection = if parent == resource { "store".to_owned() } else { format!("store.collection(\"{parent}\")") };
    format!("{collection}.get(ctx[\"segments\"][1])")
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
const NEED_OBJECT: &str = r#"({"status": 415, "body": {"error": {"code": "unsupported_media_type", "message": "the body must be JSON (application/json) or a form (application/x-www-form-urlencoded)"}}} if ctx.get("body_raw") else {"status": 400, "body": {"error": {"code": "bad_request", "message": "the body must be a JSON object"}}})"#;

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

/// `204` by default; `Prefer: return=representation` (RFC 7240) answers
/// `200` with the record that was deleted.
const DELETE: &str = r#"wanted = "return=representation" in ctx["headers"].get("prefer", "")
obj = store.get(ctx["segments"][1]) if wanted else None
if store.delete(ctx["segments"][1]):
    REPLY = {"status": 200, "headers": {"Preference-Applied": "return=representation"}, "body": obj} if wanted else {"status": 204}
else:
    REPLY = NOT_FOUND"#;

const SEARCH: &str = r#"q = ctx["query"]
filters = {k: v[0] for k, v in q.items() if k not in ("limit", "offset", "sort") and v}
REPLY = {"status": 200, "body": store.search(filters)}"#;

const LIST: &str = r#"try:
    page = store.list(**ctx["list"]["args"])
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
    fn nested_routes_list_and_create_children_of_a_parent() {
        let list = plan(&ctx("GET", "/posts/1/comments", "_embed=likes&_expand=author")).unwrap();
        assert_eq!((list.action.as_str(), list.resource.as_str()), ("list", "comments"));
        assert_eq!(list.also_loads, vec!["authors", "likes", "posts"]);
        assert!(list.code.source().starts_with("parent = store.collection(\"posts\").get(ctx[\"segments\"][1])\nif parent is None:"), "{}", list.code.source());
        let create = plan(&ctx("POST", "/posts/1/comments", "")).unwrap();
        assert_eq!((create.action.as_str(), create.resource.as_str()), ("create", "comments"));
        assert!(create.code.source().contains(r#"obj["postId"] = parent["id"]"#), "{}", create.code.source());
        assert_eq!(plan(&ctx("DELETE", "/posts/1/comments", "")).unwrap_err().status(), 405);
    }

    #[test]
    fn shapes_without_a_rule_are_refused_with_a_reason() {
        assert_eq!(plan(&ctx("GET", "/", "")).unwrap_err().status(), 404);
        assert_eq!(plan(&ctx("POST", "/members/1/promote/now", "")).unwrap_err().status(), 404);
        assert_eq!(plan(&ctx("DELETE", "/members/", "")).unwrap_err().status(), 405);
        assert_eq!(plan(&ctx("GET", "/../etc/", "")).unwrap_err().status(), 400);
    }
}
