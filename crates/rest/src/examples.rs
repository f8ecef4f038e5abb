//! Worked examples for the planner prompt, one per request shape of seed
//! 000, chosen for the request at hand. A small model follows the form of an
//! example far better than a description, so each is short, uses the real
//! `store` API and the `REPLY` contract, and writes Python strings with single
//! quotes (double quotes inside a JSON string are what small models forget to
//! escape). They are sent as an earlier request and its answer, on a
//! collection of their own, `books`.

use serde_json::{Value, json};

use crate::RequestContext;
use crate::context::RawRequest;

/// What a missing document answers.
const NOT_FOUND: &str = "{'status': 404, 'body': {'error': {'code': 'not_found', 'message': 'no such document'}}}";

/// One worked example: a request and the plan that serves it.
#[derive(Debug, Clone, Copy)]
pub struct Example {
    pub action: &'static str,
    pub method: &'static str,
    pub path: &'static str,
    pub query: &'static str,
    pub body: &'static str,
    /// The block, with `NOT_FOUND` standing for the 404 reply.
    code: &'static str,
}

/// Every example, in the order seed 000 lists the shapes.
pub const EXAMPLES: [Example; 8] = [
    Example {
        action: "create",
        method: "POST",
        path: "/books/",
        query: "",
        body: r#"{"title": "Dune", "year": 1965}"#,
        code: "obj = dict(ctx['body_json'] or {})\nnew_id = store.insert(obj)\nREPLY = {'status': 201, 'headers': {'Location': '/books/' + quote_segment(new_id)}, 'body': obj}",
    },
    Example {
        action: "get",
        method: "GET",
        path: "/books/7",
        query: "",
        body: "",
        code: "obj = store.get(ctx['segments'][1])\nif obj is None:\n    REPLY = NOT_FOUND\nelse:\n    REPLY = {'status': 200, 'body': obj}",
    },
    Example {
        action: "list",
        method: "GET",
        path: "/books/",
        // json-server's keys: ctx['list']['args'] reads them, and the seed's, alike.
        query: "_sort=year&_order=desc&_limit=10",
        body: "",
        code: "page = store.list(**ctx['list']['args'])\nREPLY = {'status': 200, 'body': page}",
    },
    Example {
        action: "search",
        method: "GET",
        path: "/books/search",
        query: "author=Herbert&year__gt=1960",
        body: "",
        code: "filters = {k: v[0] for k, v in ctx['query'].items()}\nREPLY = {'status': 200, 'body': store.search(filters)}",
    },
    Example {
        action: "replace",
        method: "PUT",
        path: "/books/7",
        query: "",
        body: r#"{"title": "Dune Messiah", "year": 1969}"#,
        code: "obj = store.replace(ctx['segments'][1], ctx['body_json'])\nif obj is None:\n    REPLY = NOT_FOUND\nelse:\n    REPLY = {'status': 200, 'body': obj}",
    },
    Example {
        action: "patch",
        method: "PATCH",
        path: "/books/7",
        query: "",
        body: r#"{"year": 1966}"#,
        code: "obj = store.patch(ctx['segments'][1], ctx['body_json'])\nif obj is None:\n    REPLY = NOT_FOUND\nelse:\n    REPLY = {'status': 200, 'body': obj}",
    },
    Example {
        action: "delete",
        method: "DELETE",
        path: "/books/7",
        query: "",
        body: "",
        code: "if store.delete(ctx['segments'][1]):\n    REPLY = {'status': 204}\nelse:\n    REPLY = NOT_FOUND",
    },
    Example {
        action: "custom",
        method: "POST",
        path: "/books/7/lend",
        query: "",
        body: r#"{"reader": "Ann"}"#,
        // Read, change, write back: a small model keeps this shape even where
        // it would otherwise pick `replace` over `patch` and drop fields.
        code: "body = ctx['body_json'] or {}\nobj = store.get(ctx['segments'][1])\nif obj is None:\n    REPLY = NOT_FOUND\nelse:\n    obj.update({'lent_to': body.get('reader'), 'available': False})\n    store.replace(ctx['segments'][1], obj)\n    REPLY = {'status': 200, 'body': obj}",
    },
];

impl Example {
    /// The request as the planner sees it.
    pub fn context(&self) -> RequestContext {
        let headers = [("content-type".to_owned(), "application/json".to_owned())];
        let raw = RawRequest {
            method: self.method,
            path: self.path,
            query: self.query,
            headers: &headers,
            body: self.body.as_bytes(),
            client_ip: "",
        };
        // The examples are constants that the tests below build.
        RequestContext::build(&raw, "example").unwrap_or_else(|e| panic!("example {} is malformed: {e}", self.path))
    }

    /// The Python block.
    pub fn source(&self) -> String {
        self.code.replace("NOT_FOUND", NOT_FOUND)
    }

    /// The plan, as the model should write it.
    pub fn plan(&self) -> Value {
        let id = match self.context().segments.get(1).map(String::as_str) {
            Some("search") | None => Value::Null,
            Some(id) => id.parse::<i64>().map_or_else(|_| Value::from(id), Value::from),
        };
        json!({
            "action": self.action,
            "resource": "books",
            "also_loads": [],
            "id": id,
            "code": {"language": "python", "block": format!("```python\n{}\n```", self.source())},
        })
    }
}

/// The example for the shape of `ctx`: its CRUD action, or the custom one.
pub fn for_request(ctx: &RequestContext) -> &'static Example {
    let action = match (ctx.method.as_str(), ctx.segments.as_slice()) {
        ("POST", [_]) => "create",
        ("GET" | "HEAD", [_]) => "list",
        ("GET" | "HEAD", [_, second]) if second == "search" => "search",
        ("GET" | "HEAD", [_, _]) => "get",
        ("PUT", [_, _]) => "replace",
        ("PATCH", [_, _]) => "patch",
        ("DELETE", [_, _]) => "delete",
        _ => "custom",
    };
    EXAMPLES.iter().find(|e| e.action == action).unwrap_or(&EXAMPLES[EXAMPLES.len() - 1])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan_check::parse_plan;

    #[test]
    fn every_example_is_a_valid_plan_in_single_quotes() {
        for example in &EXAMPLES {
            let plan = parse_plan(&example.plan().to_string()).unwrap_or_else(|e| panic!("{}: {e}", example.path));
            assert_eq!(plan.action, example.action);
            assert!(!example.source().contains('"'), "{}: Python strings are single-quoted", example.path);
            assert!(example.source().contains("REPLY = "), "{}", example.path);
        }
    }

    #[test]
    fn each_shape_gets_its_own_example() {
        let pick = |method: &'static str, path: &'static str| {
            let example = Example { method, path, ..EXAMPLES[0] };
            for_request(&example.context()).action
        };
        assert_eq!(pick("POST", "/members/"), "create");
        assert_eq!(pick("GET", "/members/"), "list");
        assert_eq!(pick("GET", "/members/search"), "search");
        assert_eq!(pick("GET", "/members/2"), "get");
        assert_eq!(pick("PUT", "/members/2"), "replace");
        assert_eq!(pick("PATCH", "/members/2"), "patch");
        assert_eq!(pick("DELETE", "/members/2"), "delete");
        assert_eq!(pick("POST", "/members/2/promote"), "custom");
        assert_eq!(pick("GET", "/orders/stats"), "get", "a two-segment GET reads like an item");
        assert_eq!(pick("GET", "/members/2/orders"), "custom");
    }
}
