//! `/openapi.json` (built for the planner's current mode) and the `/docs`
//! (Swagger UI) and `/redoc` pages. Their UI comes from the gateway itself
//! (`assets/`: swagger-ui-dist 5.35.0 and redoc 2.5.2, vendored with their
//! licences) inlined into the page, so the pages need no other host.

use anypath_rest::surface::{self, Planning};

const SWAGGER_JS: &str = include_str!("../assets/swagger-ui/swagger-ui-bundle.js");
const SWAGGER_CSS: &str = include_str!("../assets/swagger-ui/swagger-ui.css");
const REDOC_JS: &str = include_str!("../assets/redoc/redoc.standalone.js");

fn swagger_page() -> String {
    format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>anypath API</title>\n<style>{SWAGGER_CSS}</style></head>\n\
         <body><div id=\"ui\"></div>\n<script>{SWAGGER_JS}</script>\n\
         <script>SwaggerUIBundle({{url: \"/openapi.json\", dom_id: \"#ui\"}});</script>\n</body></html>"
    )
}

fn redoc_page() -> String {
    format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>anypath API</title></head>\n\
         <body><redoc spec-url=\"/openapi.json\"></redoc>\n<script>{REDOC_JS}</script>\n</body></html>"
    )
}

/// The content type and body of a documentation path (`/openapi.json`,
/// `/docs` or `/redoc`); `planning` (the planning mode, and whether the
/// agent has an LLM) is asked only for the spec.
pub fn page(path: &str, planning: impl FnOnce() -> (Planning, bool)) -> (&'static str, Vec<u8>) {
    match path {
        "/docs" => ("text/html; charset=utf-8", swagger_page().into_bytes()),
        "/redoc" => ("text/html; charset=utf-8", redoc_page().into_bytes()),
        _ => ("application/json", {
            let (planning, agent) = planning();
            serde_json::to_vec(&surface::openapi(planning, agent)).unwrap_or_default()
        }),
    }
}
