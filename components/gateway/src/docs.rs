//! `/openapi.json` (built for the planner's current mode) and the `/docs`
//! (Swagger UI) and `/redoc` pages, which load their UI assets from a CDN.

use anypath_rest::surface::{self, Planning};

const SWAGGER: &str = r##"<!doctype html>
<html><head><meta charset="utf-8"><title>anypath API</title>
<link rel="stylesheet" href="https://cdn.jsdelivr.net/npm/swagger-ui-dist@5/swagger-ui.css"></head>
<body><div id="ui"></div>
<script src="https://cdn.jsdelivr.net/npm/swagger-ui-dist@5/swagger-ui-bundle.js"></script>
<script>SwaggerUIBundle({url: "/openapi.json", dom_id: "#ui"});</script>
</body></html>"##;

const REDOC: &str = r##"<!doctype html>
<html><head><meta charset="utf-8"><title>anypath API</title></head>
<body><redoc spec-url="/openapi.json"></redoc>
<script src="https://cdn.jsdelivr.net/npm/redoc@2/bundles/redoc.standalone.js"></script>
</body></html>"##;

/// The content type and body of a documentation path (`/openapi.json`,
/// `/docs` or `/redoc`); `planning` (the planning mode, and whether the
/// agent has an LLM) is asked only for the spec.
pub fn page(path: &str, planning: impl FnOnce() -> (Planning, bool)) -> (&'static str, Vec<u8>) {
    match path {
        "/docs" => ("text/html; charset=utf-8", SWAGGER.as_bytes().to_vec()),
        "/redoc" => ("text/html; charset=utf-8", REDOC.as_bytes().to_vec()),
        _ => ("application/json", {
            let (planning, agent) = planning();
            serde_json::to_vec(&surface::openapi(planning, agent)).unwrap_or_default()
        }),
    }
}
