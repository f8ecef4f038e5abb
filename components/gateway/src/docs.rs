//! `/openapi.json` (served from this component) and the `/docs` (Swagger
//! UI) and `/redoc` pages, which load their UI assets from a CDN.

const OPENAPI: &str = include_str!("openapi.json");

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

/// The content type and body of a documentation path, if `path` is one.
pub fn page(path: &str) -> Option<(&'static str, Vec<u8>)> {
    match path {
        "/openapi.json" => Some(("application/json", OPENAPI.as_bytes().to_vec())),
        "/docs" | "/docs/" => Some(("text/html; charset=utf-8", SWAGGER.as_bytes().to_vec())),
        "/redoc" | "/redoc/" => Some(("text/html; charset=utf-8", REDOC.as_bytes().to_vec())),
        _ => None,
    }
}
