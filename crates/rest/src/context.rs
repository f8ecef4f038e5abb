//! The request context a block sees as `ctx` (seed 000's `RequestContext`).

use std::collections::BTreeMap;

use base64::Engine;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::RestError;
use crate::list_query::ListQuery;

/// Headers never shown to a block: credentials and host-internal metadata.
const HIDDEN_HEADERS: &[&str] = &["authorization", "cookie", "proxy-authorization", "x-api-key", "x-session-id"];
const HIDDEN_PREFIXES: &[&str] = &["spin-", "x-anypath-"];

/// Everything about one request that a plan and its block may use.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestContext {
    pub method: String,
    /// The original path, always starting with `/`.
    pub path: String,
    /// Non-empty path segments, percent-decoded.
    pub segments: Vec<String>,
    /// Query parameters; a key may repeat.
    pub query: BTreeMap<String, Vec<String>>,
    /// Lower-cased, sanitised headers.
    pub headers: BTreeMap<String, String>,
    /// The body parsed as JSON, when it is JSON.
    pub body_json: Option<Value>,
    /// The body as base64, when it is not JSON.
    pub body_raw: Option<String>,
    pub client: Client,
    pub session: Session,
    /// A list request's paging, sorting, filters and answer shape (a `GET`
    /// of `/<collection>` or `/<collection>/<id>/<children>`), read once
    /// from the query in every vocabulary the REST face speaks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub list: Option<ListQuery>,
}

/// Who sent the request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Client {
    pub ip: String,
}

/// The tenant the request is bound to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    pub id: String,
}

/// The raw parts of an HTTP request.
pub struct RawRequest<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub query: &'a str,
    pub headers: &'a [(String, String)],
    pub body: &'a [u8],
    pub client_ip: &'a str,
}

impl RequestContext {
    /// Builds the context; a body declared as JSON that does not parse is a 400.
    pub fn build(raw: &RawRequest<'_>, tenant: &str) -> Result<Self, RestError> {
        let path = if raw.path.starts_with('/') { raw.path.to_owned() } else { format!("/{}", raw.path) };
        let segments: Vec<String> = path
            .split('/')
            .filter(|s| !s.is_empty())
            // Percent-decoding only: in a path, `+` is a plus sign, not a space.
            .map(|s| percent_encoding::percent_decode_str(s).decode_utf8_lossy().into_owned())
            .collect();
        let mut query: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (key, value) in url::form_urlencoded::parse(raw.query.as_bytes()) {
            query.entry(key.into_owned()).or_default().push(value.into_owned());
        }
        let mut headers = BTreeMap::new();
        let mut content_type = String::new();
        for (name, value) in raw.headers {
            let name = name.to_ascii_lowercase();
            if name == "content-type" {
                content_type = value.to_ascii_lowercase();
            }
            if HIDDEN_HEADERS.contains(&name.as_str()) || HIDDEN_PREFIXES.iter().any(|p| name.starts_with(p)) {
                continue;
            }
            headers.insert(name, value.clone());
        }
        let (body_json, body_raw) = body(raw.body, &content_type)?;
        let method = raw.method.to_ascii_uppercase();
        let list = match list_request(&method, &segments) {
            None => None,
            Some(nested) => {
                let parsed = ListQuery::parse(&query, headers.get("range").map(String::as_str), segments.last().map_or("", String::as_str), nested);
                match (parsed, nested) {
                    (Ok(list), _) => Some(list),
                    (Err(error), None) => return Err(error),
                    // `/a/1/b` may be a model's custom action with a query of
                    // its own: the rules report the error when they plan it as a list.
                    (Err(_), Some(_)) => None,
                }
            }
        };
        Ok(Self {
            method,
            path,
            segments,
            query,
            headers,
            body_json,
            body_raw,
            client: Client { ip: raw.client_ip.to_owned() },
            session: Session { id: tenant.to_owned() },
            list,
        })
    }
}

/// Whether the request reads a list: `Some(None)` for `/<collection>`,
/// `Some(Some((parent, id)))` for `/<parent>/<id>/<children>`.
fn list_request<'a>(method: &str, segments: &'a [String]) -> Option<Option<(&'a str, &'a str)>> {
    if !matches!(method, "GET" | "HEAD") {
        return None;
    }
    match segments {
        [_] => Some(None),
        [parent, id, _] => Some(Some((parent.as_str(), id.as_str()))),
        _ => None,
    }
}

fn body(bytes: &[u8], content_type: &str) -> Result<(Option<Value>, Option<String>), RestError> {
    let form = content_type.starts_with("application/x-www-form-urlencoded");
    if bytes.is_empty() {
        // A form with no fields is an empty object, as it would be with some.
        return Ok((form.then(|| Value::Object(serde_json::Map::new())), None));
    }
    let declared_json = content_type.starts_with("application/json") || content_type.contains("+json");
    match serde_json::from_slice::<Value>(bytes) {
        Ok(value) => Ok((Some(value), None)),
        Err(e) if declared_json => Err(RestError::BadRequest(format!("malformed JSON body: {e}"))),
        // An HTML form posts directly: its fields as an object of strings (a
        // repeated field as a list of them). Checked after JSON, because
        // `curl -d '{...}'` labels JSON as a form.
        Err(_) if form => Ok((Some(form_fields(bytes)), None)),
        Err(_) => Ok((None, Some(base64::engine::general_purpose::STANDARD.encode(bytes)))),
    }
}

/// A form body's fields.
fn form_fields(bytes: &[u8]) -> Value {
    let mut fields = serde_json::Map::new();
    for (key, value) in url::form_urlencoded::parse(bytes) {
        let value = Value::String(value.into_owned());
        match fields.get_mut(key.as_ref()) {
            Some(Value::Array(values)) => values.push(value),
            Some(single) => *single = Value::Array(vec![single.take(), value]),
            None => {
                fields.insert(key.into_owned(), value);
            }
        }
    }
    Value::Object(fields)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw<'a>(path: &'a str, query: &'a str, headers: &'a [(String, String)], body: &'a [u8]) -> RawRequest<'a> {
        RawRequest { method: "post", path, query, headers, body, client_ip: "10.0.0.1" }
    }

    #[test]
    fn context_has_segments_query_lists_and_sanitised_headers() {
        let headers = vec![
            ("Authorization".to_string(), "Bearer x".to_string()),
            ("Cookie".to_string(), "a=b".to_string()),
            ("X-Trace".to_string(), "t1".to_string()),
            ("spin-full-url".to_string(), "http://x".to_string()),
        ];
        let ctx = RequestContext::build(&raw("/members/search", "name=hart%20mann&tag=a&tag=b", &headers, b""), "t1").unwrap();
        assert_eq!(ctx.method, "POST");
        assert_eq!(ctx.segments, vec!["members", "search"]);
        assert_eq!(ctx.query["name"], vec!["hart mann"]);
        assert_eq!(ctx.query["tag"], vec!["a", "b"]);
        assert_eq!(ctx.headers.keys().collect::<Vec<_>>(), vec!["x-trace"]);
        assert_eq!(ctx.session.id, "t1");
    }

    #[test]
    fn segments_are_percent_decoded_and_plus_stays_a_plus() {
        let ctx = RequestContext::build(&raw("/things/caf%C3%A9/a%2Fb/x+y/%20", "", &[], b""), "t").unwrap();
        assert_eq!(ctx.segments, vec!["things", "café", "a/b", "x+y", " "]);
    }

    #[test]
    fn json_body_is_parsed_other_bodies_are_base64_and_bad_json_is_400() {
        let json = vec![("content-type".to_string(), "application/json".to_string())];
        let ctx = RequestContext::build(&raw("/m", "", &json, br#"{"a":1}"#), "t").unwrap();
        assert_eq!(ctx.body_json, Some(serde_json::json!({"a": 1})));
        let ctx = RequestContext::build(&raw("/m", "", &[], b"\xff\x00"), "t").unwrap();
        assert_eq!(ctx.body_raw.as_deref(), Some("/wA="));
        let err = RequestContext::build(&raw("/m", "", &json, b"{nope"), "t").unwrap_err();
        assert_eq!(err.status(), 400);
    }
}
