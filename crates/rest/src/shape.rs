//! The shape of a request, for the plan cache: two requests with the same
//! shape get the same plan. Ids in the path are abstracted; query keys and
//! body keys count, their values do not.

use sha2::{Digest, Sha256};

use crate::RequestContext;
use crate::plan::Plan;

/// How a path segment enters the shape.
fn segment_shape(segment: &str) -> Option<&'static str> {
    if !segment.is_empty() && segment.bytes().all(|b| b.is_ascii_digit()) {
        Some("{int}")
    } else if is_uuid(segment) {
        Some("{uuid}")
    } else {
        None
    }
}

/// Whether a path segment looks like a generated id (an integer or a UUID).
pub fn is_id_like(segment: &str) -> bool {
    segment_shape(segment).is_some()
}

fn is_uuid(s: &str) -> bool {
    s.len() == 36
        && s.char_indices().all(|(i, c)| if matches!(i, 8 | 13 | 18 | 23) { c == '-' } else { c.is_ascii_hexdigit() })
}

/// A readable shape: `GET /members/{int}?name&sort body{age,name}`.
pub fn shape(ctx: &RequestContext) -> String {
    let path: Vec<&str> = ctx.segments.iter().map(|s| segment_shape(s).unwrap_or(s)).collect();
    let query: Vec<&str> = ctx.query.keys().map(String::as_str).collect();
    let body = match &ctx.body_json {
        Some(serde_json::Value::Object(map)) => {
            let mut keys: Vec<&str> = map.keys().map(String::as_str).collect();
            keys.sort_unstable();
            format!("{{{}}}", keys.join(","))
        }
        Some(other) => crate::prompt::type_name(other).to_owned(),
        None if ctx.body_raw.is_some() => "raw".to_owned(),
        None => "-".to_owned(),
    };
    format!("{} /{}?{} body{}", ctx.method, path.join("/"), query.join("&"), body)
}

/// The cache key: tenant, shape, prompt version and model, hashed.
pub fn cache_key(tenant: &str, ctx: &RequestContext, prompt_version: &str, model: &str) -> String {
    let mut hash = Sha256::new();
    for part in [tenant, &shape(ctx), prompt_version, model] {
        hash.update(part.as_bytes());
        hash.update([0u8]);
    }
    hex::encode(hash.finalize())
}

/// Whether `plan` may serve other requests of the same shape: not when its
/// code spells out a value the shape abstracted away (an id from the path).
pub fn cacheable(plan: &Plan, ctx: &RequestContext) -> bool {
    let source = plan.code.source();
    ctx.segments.iter().filter(|s| segment_shape(s).is_some()).all(|value| !mentions(source, value))
}

/// `value` as a literal token of `source`: quoted, or a whole number in the
/// place of an argument or operand (`get(12)`, `f(a, 12)`, `== 12`). Numbers
/// in arithmetic or subscripts (`n - 1`, `ctx['segments'][1]`) are not ids.
fn mentions(source: &str, value: &str) -> bool {
    if source.contains(&format!("'{value}'")) || source.contains(&format!("\"{value}\"")) {
        return true;
    }
    let word = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.');
    source.match_indices(value).any(|(i, _)| {
        let before = source[..i].chars().next_back();
        let after = source[i + value.len()..].chars().next();
        let operand = source[..i].trim_end().chars().next_back().is_some_and(|c| matches!(c, '(' | ',' | '='));
        !word(before) && !word(after) && operand
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::RawRequest;
    use crate::plan::Code;

    fn ctx(method: &str, path: &str, query: &str, body: &str) -> RequestContext {
        let headers = vec![("content-type".to_string(), "application/json".to_string())];
        let raw = RawRequest { method, path, query, headers: &headers, body: body.as_bytes(), client_ip: "" };
        RequestContext::build(&raw, "t").unwrap()
    }

    #[test]
    fn ids_and_values_are_abstracted_words_are_not() {
        let a = ctx("POST", "/members/12/promote", "level=3", r#"{"b": 1, "a": 2}"#);
        assert_eq!(shape(&a), "POST /members/{int}/promote?level body{a,b}");
        let b = ctx("POST", "/members/7/promote", "level=9", r#"{"a": 0, "b": 0}"#);
        assert_eq!(cache_key("t", &a, "p1", "m"), cache_key("t", &b, "p1", "m"));
        let stats = ctx("GET", "/orders/stats", "", "");
        assert_eq!(shape(&stats), "GET /orders/stats? body-");
        assert_ne!(cache_key("t", &a, "p1", "m"), cache_key("u", &a, "p1", "m"), "tenants never share");
        assert_ne!(cache_key("t", &a, "p1", "m"), cache_key("t", &a, "p2", "m"));
        assert_ne!(cache_key("t", &a, "p1", "m"), cache_key("t", &a, "p1", "n"));
        let other_body = ctx("POST", "/members/7/promote", "level=9", r#"{"a": 0}"#);
        assert_ne!(cache_key("t", &a, "p1", "m"), cache_key("t", &other_body, "p1", "m"));
    }

    #[test]
    fn a_plan_that_hard_codes_the_id_is_not_cached() {
        let request = ctx("GET", "/members/12", "", "");
        let plan = |source: &str| Plan {
            action: "get".into(),
            resource: "members".into(),
            also_loads: vec![],
            id: None,
            criteria: Default::default(),
            payload: None,
            response_hints: Default::default(),
            code: Code::python(source),
        };
        assert!(cacheable(&plan("REPLY = {'status': 200, 'body': store.get(ctx['segments'][1])}"), &request));
        assert!(!cacheable(&plan("REPLY = {'status': 200, 'body': store.get(12)}"), &request));
        assert!(!cacheable(&plan("REPLY = {'status': 200, 'body': store.get('12')}"), &request));
        assert!(cacheable(&plan("x = 120\nREPLY = {'status': 200, 'v': 1.12}"), &request));
        let one = ctx("GET", "/members/1", "", "");
        assert!(cacheable(&plan("REPLY = {'status': 200, 'body': store.get(ctx['segments'][1])}"), &one));
        assert!(!cacheable(&plan("REPLY = {'status': 200, 'body': store.get(1)}"), &one));
        assert!(!cacheable(&plan("doc = [d for d in store.get_all() if d['id'] == 1]\nREPLY = {'status': 200}"), &one));
        assert!(cacheable(&plan("d = store.get(ctx['segments'][1])\nREPLY = {'status': 200, 'body': d['n'] - 1}"), &one));
    }
}
