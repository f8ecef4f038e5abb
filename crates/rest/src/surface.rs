//! The public HTTP surface: which methods each kind of path accepts, under
//! the rule planner or a model, and the OpenAPI document that says exactly
//! that. The gateway answers `OPTIONS`, `405` and `/openapi.json` from here,
//! so the `Allow` header and the spec cannot drift apart.

use serde_json::{Map, Value, json};

/// Paths the gateway answers itself, whatever the planner.
pub const RESERVED_PATHS: &[&str] = &["/healthz", "/readyz", "/openapi.json", "/docs", "/redoc"];

/// Every method the gateway may accept somewhere.
const EVERY_METHOD: &[&str] = &["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];

/// Who turns requests into blocks: only the rules, or a model as well
/// (`llm` and `auto` modes), which may give any path any method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Planning {
    Rules,
    Model,
}

impl Planning {
    /// From the planner's `planner_mode` (`rules`, `llm`, `auto`).
    pub fn from_mode(mode: &str) -> Self {
        if mode == "rules" { Self::Rules } else { Self::Model }
    }
}

/// The kinds of path, by their segments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// `/healthz`, `/readyz`, `/openapi.json`, `/docs`, `/redoc`.
    Reserved,
    /// `/`: names no collection.
    Root,
    /// `/<collection>/`
    Collection,
    /// `/<collection>/search`
    Search,
    /// `/<collection>/<id>`
    Item,
    /// Three segments or more: the rules plan `/<parent>/<id>/<children>`
    /// (json-server's nested routes), a model plans any.
    Nested,
}

impl Shape {
    /// The shape of a raw request path and its decoded segments.
    pub fn of(path: &str, segments: &[String]) -> Self {
        if RESERVED_PATHS.contains(&path) {
            return Self::Reserved;
        }
        match segments {
            [] => Self::Root,
            [_] => Self::Collection,
            [_, second] if second == "search" => Self::Search,
            [_, _] => Self::Item,
            _ => Self::Nested,
        }
    }

    /// The OpenAPI path template of a planned shape.
    fn template(self) -> Option<&'static str> {
        match self {
            Self::Collection => Some("/{collection}/"),
            Self::Search => Some("/{collection}/search"),
            Self::Item => Some("/{collection}/{id}"),
            Self::Nested => Some("/{collection}/{id}/{action}"),
            Self::Reserved | Self::Root => None,
        }
    }
}

/// The methods a path of this shape accepts; empty means the path is not served (404).
pub fn allowed(shape: Shape, planning: Planning) -> &'static [&'static str] {
    match (shape, planning) {
        (Shape::Root, _) => &[],
        // json-server's nested routes: `/posts/1/comments` lists and creates.
        (Shape::Nested, Planning::Rules) => &["GET", "HEAD", "POST", "OPTIONS"],
        (Shape::Reserved, _) => &["GET", "HEAD", "OPTIONS"],
        (Shape::Collection, Planning::Rules) => &["GET", "HEAD", "POST", "OPTIONS"],
        (Shape::Search, Planning::Rules) => &["GET", "HEAD", "OPTIONS"],
        (Shape::Item, Planning::Rules) => &["GET", "HEAD", "PUT", "PATCH", "DELETE", "OPTIONS"],
        (_, Planning::Model) => EVERY_METHOD,
    }
}

/// The `Allow` header value for a list of methods.
pub fn allow_header(methods: &[&str]) -> String {
    methods.join(", ")
}

/// Error statuses every planned operation may answer, each with the envelope.
const PLANNED_ERRORS: &[(&str, &str)] = &[
    ("400", "Bad input: a malformed JSON body, a body that must be an object, a bad tenant, collection name or id, a bad limit or offset"),
    ("401", "A missing or wrong bearer token, or an unknown X-API-Key"),
    ("404", "No such document or path"),
    ("405", "The method is not allowed here; Allow lists those that are"),
    ("409", "The id exists already, or the data kept changing while the request ran"),
    ("413", "The body is larger than max_body_bytes"),
    ("500", "The block failed (sandbox_<kind>), or its reply could not be sent after its changes were committed (reply_failed)"),
    ("502", "No working plan from the LLM, or an upstream part answered nonsense"),
    ("503", "A part (sandbox host, planner, store) is unavailable"),
    ("504", "The block ran past its time or fuel"),
];

const SPEC: &str = include_str!("openapi.json");

/// The OpenAPI document for this planning mode; `POST /run` only when an
/// LLM is configured for the agent (`agent`), since it cannot work without one.
pub fn openapi(planning: Planning, agent: bool) -> Value {
    let mut spec: Value = serde_json::from_str(SPEC).unwrap_or_else(|_| json!({}));
    if !agent && let Some(paths) = spec["paths"].as_object_mut() {
        paths.remove("/run");
    }
    let custom = spec["x-custom-operation"].take();
    if let Some(object) = spec.as_object_mut() {
        object.remove("x-custom-operation");
    }
    if planning == Planning::Model {
        for shape in [Shape::Collection, Shape::Search, Shape::Item, Shape::Nested] {
            let Some(template) = shape.template() else { continue };
            let path = &mut spec["paths"][template];
            for method in allowed(shape, planning).iter().filter(|m| !matches!(**m, "HEAD" | "OPTIONS")) {
                let key = method.to_ascii_lowercase();
                if path.get(&key).is_none() {
                    let mut operation = custom.clone();
                    if matches!(*method, "GET" | "DELETE")
                        && let Some(op) = operation.as_object_mut() {
                            op.remove("requestBody");
                        }
                    path[key] = operation;
                }
            }
            if shape == Shape::Nested {
                path["parameters"] = json!([
                    {"$ref": "#/components/parameters/collection"},
                    {"$ref": "#/components/parameters/id"},
                    {"$ref": "#/components/parameters/action"},
                    {"$ref": "#/components/parameters/session"}
                ]);
            }
        }
    }
    let errors: Map<String, Value> = PLANNED_ERRORS
        .iter()
        .map(|(status, description)| {
            let response = json!({"description": description, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}});
            ((*status).to_owned(), response)
        })
        .collect();
    for (template, item) in spec["paths"].as_object_mut().into_iter().flatten() {
        let reserved = RESERVED_PATHS.contains(&template.as_str());
        for (key, operation) in item.as_object_mut().into_iter().flatten() {
            if key == "parameters" {
                continue;
            }
            let responses = &mut operation["responses"];
            for (status, response) in &errors {
                // The gateway's own paths answer only a wrong method with an error.
                if reserved && status != "405" {
                    continue;
                }
                if responses.get(status).is_none() {
                    responses[status] = response.clone();
                }
            }
        }
    }
    spec
}

#[cfg(test)]
mod tests {
    use super::*;

    fn documented(spec: &Value, template: &str) -> Vec<String> {
        let mut methods: Vec<String> = spec["paths"][template]
            .as_object()
            .map(|o| o.keys().filter(|k| *k != "parameters").map(|k| k.to_ascii_uppercase()).collect())
            .unwrap_or_default();
        methods.sort();
        methods
    }

    fn declared(shape: Shape, planning: Planning) -> Vec<String> {
        let mut methods: Vec<String> =
            allowed(shape, planning).iter().filter(|m| !matches!(**m, "HEAD" | "OPTIONS")).map(|m| m.to_string()).collect();
        methods.sort();
        methods
    }

    /// What `Allow` says is what the spec documents, in both modes.
    #[test]
    fn the_spec_documents_exactly_the_allowed_methods() {
        for planning in [Planning::Rules, Planning::Model] {
            let spec = openapi(planning, true);
            for shape in [Shape::Collection, Shape::Search, Shape::Item, Shape::Nested] {
                let template = shape.template().unwrap();
                assert_eq!(documented(&spec, template), declared(shape, planning), "{template} under {planning:?}");
            }
            for path in RESERVED_PATHS {
                assert_eq!(documented(&spec, path), declared(Shape::Reserved, planning), "{path}");
            }
        }
    }

    #[test]
    fn every_planned_operation_declares_every_error_status() {
        let spec = openapi(Planning::Model, true);
        for (template, item) in spec["paths"].as_object().unwrap() {
            for (method, operation) in item.as_object().unwrap().iter().filter(|(k, _)| *k != "parameters") {
                let statuses: Vec<&str> = if RESERVED_PATHS.contains(&template.as_str()) { vec!["405"] } else { PLANNED_ERRORS.iter().map(|(s, _)| *s).collect() };
                for status in statuses {
                    assert!(operation["responses"].get(status).is_some(), "{method} {template} lacks {status}");
                }
            }
        }
    }

    #[test]
    fn run_is_offered_only_when_the_agent_has_an_llm() {
        assert!(openapi(Planning::Rules, false)["paths"].get("/run").is_none());
        assert!(openapi(Planning::Rules, true)["paths"].get("/run").is_some());
        assert!(openapi(Planning::Model, false)["paths"].get("/{collection}/").is_some());
    }

    #[test]
    fn shapes_of_paths() {
        let segments = |p: &str| p.split('/').filter(|s| !s.is_empty()).map(str::to_owned).collect::<Vec<_>>();
        for (path, shape) in [
            ("/healthz", Shape::Reserved),
            ("/", Shape::Root),
            ("/members", Shape::Collection),
            ("/members/", Shape::Collection),
            ("/members/search", Shape::Search),
            ("/members/1", Shape::Item),
            ("/members/1/promote", Shape::Nested),
        ] {
            assert_eq!(Shape::of(path, &segments(path)), shape, "{path}");
        }
        assert_eq!(allowed(Shape::Nested, Planning::Rules), &["GET", "HEAD", "POST", "OPTIONS"]);
        assert!(allowed(Shape::Nested, Planning::Model).contains(&"POST"));
    }
}
