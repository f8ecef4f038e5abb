//! A rules plan executed directly by the store's operations, with no
//! Python instance: the same answers as the rules' blocks
//! ([`crate::rules`]) give in the sandbox, where both call the one
//! implementation in `anypath-collections`. A request whose plan holds
//! generated code never comes here.

use anypath_collections::{ListPlan, OpError, Store, Which};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde::Serialize;
use serde_json::{Value, json};

use crate::context::RequestContext;
use crate::list_query;
use crate::plan::Plan;

/// Python's `quote(value, safe="")`: everything but letters, digits and `_.-~`.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC.remove(b'_').remove(b'.').remove(b'-').remove(b'~');

/// `POST /execute` of the store: a request the rules plan, run there
/// directly. The store plans it again itself ([`crate::rules::plan`]): it
/// takes no plan from its caller.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct DirectRequest {
    /// The tenant whose collections the request reads and changes.
    pub tenant: String,
    /// The request.
    pub ctx: RequestContext,
}

/// A block's `REPLY` as the sandbox reports it: `{"status", "headers": [[name, value]], "body"}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Option<Value>,
}

impl Reply {
    fn json(status: u16, body: Value) -> Self {
        Self { status, headers: Vec::new(), body: Some(body) }
    }

    fn error(status: u16, code: &str, message: impl Into<String>) -> Self {
        Self::json(status, json!({"error": {"code": code, "message": message.into()}}))
    }

    /// The reply as the report's `reply` value.
    pub fn to_value(&self) -> Value {
        json!({"status": self.status, "headers": self.headers, "body": self.body})
    }
}

/// Runs the rules plan of `ctx` on `store` (its collections loaded as
/// [`Plan::load_specs`] says). An error is what the block would have
/// raised: [`OpError::NeedsData`] asks for whole collections, any other
/// fails the request as the block's exception would.
pub fn execute(plan: &Plan, ctx: &RequestContext, store: &mut Store) -> Result<Reply, OpError> {
    let segment = |i: usize| ctx.segments.get(i).map(String::as_str).unwrap_or_default();
    if let [parent, _, children] = ctx.segments.as_slice() {
        let which = if parent == children { Which::Default } else { Which::Named(parent) };
        let Some(found) = store.get(which, &Value::String(segment(1).to_owned()))? else {
            return Ok(Reply::error(404, "not_found", format!("{parent}/{} not found", segment(1))));
        };
        let foreign_key = format!("{}Id", list_query::singular(parent));
        let parent_id = found.get("id").cloned().unwrap_or(Value::Null);
        return match plan.action.as_str() {
            "create" => create(plan, ctx, store, Some((&foreign_key, parent_id))),
            _ => list(ctx, store),
        };
    }
    let id = Value::String(segment(1).to_owned());
    let not_found = || Reply::error(404, "not_found", format!("{}/{} not found", plan.resource, segment(1)));
    match plan.action.as_str() {
        "get" => Ok(store.get(Which::Default, &id)?.map_or_else(not_found, |doc| Reply::json(200, doc))),
        "create" => create(plan, ctx, store, None),
        "replace" | "patch" => {
            let Some(payload @ Value::Object(_)) = ctx.body_json.clone() else { return Ok(need_object(ctx)) };
            let updated = if plan.action == "replace" {
                store.replace(Which::Default, &id, payload)?
            } else {
                store.patch(Which::Default, &id, payload)?
            };
            Ok(updated.map_or_else(not_found, |doc| Reply::json(200, doc)))
        }
        "delete" => {
            let wanted = ctx.headers.get("prefer").is_some_and(|p| p.contains("return=representation"));
            let before = if wanted { store.get(Which::Default, &id)? } else { None };
            if !store.delete(Which::Default, &id)? {
                return Ok(not_found());
            }
            Ok(if wanted {
                let mut reply = Reply::json(200, before.unwrap_or(Value::Null));
                reply.headers.push(("Preference-Applied".into(), "return=representation".into()));
                reply
            } else {
                Reply { status: 204, headers: Vec::new(), body: None }
            })
        }
        "search" => {
            let filters: serde_json::Map<String, Value> = ctx
                .query
                .iter()
                .filter(|(key, _)| !["limit", "offset", "sort"].contains(&key.as_str()))
                .filter_map(|(key, values)| values.first().map(|v| (key.clone(), Value::String(v.clone()))))
                .collect();
            Ok(Reply::json(200, Value::Array(store.search(Which::Default, &Value::Object(filters))?)))
        }
        "list" => list(ctx, store),
        other => Err(OpError::Value(format!("no rule executes the action {other:?}"))),
    }
}

/// `POST`: the body as a new document (a nested route's with its parent's key set).
fn create(plan: &Plan, ctx: &RequestContext, store: &mut Store, parent: Option<(&str, Value)>) -> Result<Reply, OpError> {
    let Some(Value::Object(mut document)) = ctx.body_json.clone() else { return Ok(need_object(ctx)) };
    if let Some((key, id)) = parent {
        document.insert(key.to_owned(), id);
    }
    match store.insert(Which::Default, Value::Object(document)) {
        Ok(stored) => {
            let id = stored.get("id").map(anypath_collections::python::str_of).unwrap_or_default();
            let location = format!("/{}/{}", plan.resource, utf8_percent_encode(&id, SEGMENT));
            Ok(Reply { status: 201, headers: vec![("Location".into(), location)], body: Some(stored) })
        }
        Err(OpError::Type(message) | OpError::Value(message)) => Ok(Reply::error(400, "bad_request", message)),
        Err(OpError::Exists(message)) => Ok(Reply::error(409, "conflict", message)),
        Err(other) => Err(other),
    }
}

fn list(ctx: &RequestContext, store: &mut Store) -> Result<Reply, OpError> {
    let Some(query) = &ctx.list else { return Err(OpError::NotLoaded("'list'".into())) };
    let page = ListPlan::from_args(&query.args).and_then(|plan| store.list(Which::Default, &plan));
    match page {
        Ok(page) => Ok(Reply::json(200, serde_json::to_value(page).map_err(|e| OpError::Value(e.to_string()))?)),
        Err(OpError::Value(message)) => Ok(Reply::error(400, "bad_request", message)),
        Err(other) => Err(other),
    }
}

/// A body that is not a JSON object: 415 when it is not JSON at all.
fn need_object(ctx: &RequestContext) -> Reply {
    if ctx.body_raw.as_deref().is_some_and(|raw| !raw.is_empty()) {
        Reply::error(415, "unsupported_media_type", "the body must be JSON (application/json) or a form (application/x-www-form-urlencoded)")
    } else {
        Reply::error(400, "bad_request", "the body must be a JSON object")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::RawRequest;
    use crate::rules;
    use anypath_collections::{Documents, Loaded};

    fn ctx(method: &str, path: &str, query: &str, body: &str) -> RequestContext {
        let headers = vec![("content-type".to_owned(), "application/json".to_owned())];
        let raw = RawRequest { method, path, query, headers: &headers, body: body.as_bytes(), client_ip: "127.0.0.1" };
        RequestContext::build(&raw, "t").unwrap()
    }

    fn run(method: &str, path: &str, query: &str, body: &str, collections: Vec<(&str, Value)>) -> (Reply, Store) {
        let ctx = ctx(method, path, query, body);
        let plan = rules::plan(&ctx).unwrap();
        let loaded = collections
            .into_iter()
            .map(|(name, docs)| Loaded {
                name: name.into(),
                documents: Documents::Parsed(docs.as_array().cloned().unwrap_or_default()),
                complete: true,
                absent_ids: vec![],
                reserved_id: None,
            })
            .collect();
        let mut store = Store::new(loaded);
        (execute(&plan, &ctx, &mut store).unwrap(), store)
    }

    #[test]
    fn each_rule_answers_as_its_block_does() {
        let members = || vec![("members", json!([{"id": 1, "name": "a"}, {"id": "é/x", "name": "b"}]))];
        assert_eq!(run("GET", "/members/1", "", "", members()).0, Reply::json(200, json!({"id": 1, "name": "a"})));
        assert_eq!(run("GET", "/members/9", "", "", members()).0, Reply::error(404, "not_found", "members/9 not found"));
        let (created, store) = run("POST", "/members/", "", r#"{"name":"c"}"#, members());
        assert_eq!((created.status, created.headers[0].1.as_str()), (201, "/members/2"));
        assert_eq!(store.journal().len(), 1);
        assert_eq!(run("POST", "/members/", "", r#"{"id":"é/x"}"#, members()).0.status, 409);
        assert_eq!(run("POST", "/members/", "", r#"{"id":true}"#, members()).0.status, 400);
        assert_eq!(run("POST", "/members/", "", "[1]", members()).0, Reply::error(400, "bad_request", "the body must be a JSON object"));
        assert_eq!(run("PATCH", "/members/1", "", r#"{"name":"z"}"#, members()).0.body, Some(json!({"id": 1, "name": "z"})));
        assert_eq!(run("PUT", "/members/7", "", r#"{"name":"z"}"#, members()).0.status, 404);
        assert_eq!(run("DELETE", "/members/1", "", "", members()).0.status, 204);
        let list = run("GET", "/members", "_sort=name&_order=desc", "", members()).0;
        assert_eq!(list.body.unwrap()["items"][0]["name"], json!("b"));
        let found = run("GET", "/members/search", "name=b", "", members()).0;
        assert_eq!(found.body, Some(json!([{"id": "é/x", "name": "b"}])));
    }

    #[test]
    fn a_location_is_one_encoded_segment() {
        let (created, _) = run("POST", "/members/", "", r#"{"id":"a b/c"}"#, vec![("members", json!([]))]);
        assert_eq!(created.headers, vec![("Location".to_owned(), "/members/a%20b%2Fc".to_owned())]);
    }

    #[test]
    fn nested_routes_need_their_parent() {
        let data = || vec![("comments", json!([{"id": 1, "postId": 1}, {"id": 2, "postId": 2}])), ("posts", json!([{"id": 1}]))];
        let listed = run("GET", "/posts/1/comments", "", "", data()).0;
        assert_eq!(listed.body.unwrap()["page"]["total"], json!(1));
        assert_eq!(run("GET", "/posts/5/comments", "", "", data()).0, Reply::error(404, "not_found", "posts/5 not found"));
        let (created, _) = run("POST", "/posts/1/comments", "", r#"{"t":"x"}"#, data());
        assert_eq!(created.body.unwrap()["postId"], json!(1));
    }
}
