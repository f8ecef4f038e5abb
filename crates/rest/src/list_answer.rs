//! A list block's envelope (`{"items", "page"}`, what `store.list` returns)
//! shaped as the request asked ([`crate::list_query::ListShape`]): the
//! envelope itself, or a bare array. Either way the total travels in
//! `X-Total-Count` and `Content-Range`, and `_page` adds `Link`. A reply that
//! is not a successful envelope (an error, or a block that answered in its
//! own shape) is left as it is.

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::list_query::{ListQuery, ListShape};

/// What `store.list` returns, as far as the answer's headers need it.
#[derive(Debug, Deserialize)]
struct Envelope {
    items: Vec<Value>,
    page: Page,
}

#[derive(Debug, Deserialize)]
struct Page {
    #[serde(default)]
    offset: Option<u64>,
    total: u64,
}

/// `reply` (`{"status", "headers", "body"}`) for `list`; `path` and `query`
/// are the request's, for the `Link` header; `resource` names the unit of
/// `Content-Range`.
pub fn shape(reply: &Value, list: &ListQuery, resource: &str, path: &str, query: &str) -> Value {
    if reply["status"].as_u64() != Some(200) {
        return reply.clone();
    }
    let Ok(envelope) = Envelope::deserialize(&reply["body"]) else {
        return reply.clone();
    };
    let (count, total) = (envelope.items.len() as u64, envelope.page.total);
    let offset = envelope.page.offset.unwrap_or(list.args.offset);
    let mut headers: Vec<Value> = reply["headers"].as_array().cloned().unwrap_or_default();
    headers.push(json!(["X-Total-Count", total.to_string()]));
    headers.push(json!(["Content-Range", content_range(resource, offset, count, total)]));
    let mut status = 200;
    let body = match &list.answer {
        ListShape::Envelope => reply["body"].clone(),
        ListShape::Array { range_header, page } => {
            if let Some((page, size)) = page {
                let link = links(path, query, *page, *size, count, total);
                if !link.is_empty() {
                    headers.push(json!(["Link", link]));
                }
            }
            // Partial content is some of the records; a window that holds
            // none is a whole (empty) answer, its total still in Content-Range.
            if *range_header && count > 0 {
                status = 206;
            }
            Value::Array(envelope.items)
        }
    };
    json!({"status": status, "headers": headers, "body": body})
}

/// Bytes a Content-Range unit cannot carry as they are: all but RFC 9110's
/// token characters.
const NOT_TOKEN: &AsciiSet = &NON_ALPHANUMERIC.remove(b'!').remove(b'#').remove(b'$').remove(b'&').remove(b'\'').remove(b'*').remove(b'+').remove(b'-').remove(b'.').remove(b'^').remove(b'_').remove(b'`').remove(b'|').remove(b'~');

/// `posts 0-9/42`, or `posts */42` when the window holds nothing; a
/// collection name beyond a token is percent-encoded.
fn content_range(resource: &str, offset: u64, count: u64, total: u64) -> String {
    let unit = utf8_percent_encode(resource, NOT_TOKEN);
    match offset.checked_add(count).and_then(|end| end.checked_sub(1)).filter(|_| count > 0) {
        Some(last) => format!("{unit} {offset}-{last}/{total}"),
        None => format!("{unit} */{total}"),
    }
}

/// json-server's `Link` (its `getPage`): none for a page with no records;
/// first and last when there is more than one page, prev and next where
/// they exist.
fn links(path: &str, query: &str, page: u64, size: u64, count: u64, total: u64) -> String {
    if count == 0 {
        return String::new();
    }
    let last = total.div_ceil(size.max(1)).max(1);
    let url = |target: u64| {
        let mut pairs: Vec<(String, String)> =
            url::form_urlencoded::parse(query.as_bytes()).filter(|(k, _)| k != "_page").map(|(k, v)| (k.into_owned(), v.into_owned())).collect();
        pairs.push(("_page".into(), target.to_string()));
        let encoded: String = url::form_urlencoded::Serializer::new(String::new()).extend_pairs(pairs).finish();
        format!("<{path}?{encoded}>")
    };
    let mut parts = Vec::new();
    if last > 1 {
        parts.push(format!("{}; rel=\"first\"", url(1)));
    }
    if page > 1 {
        parts.push(format!("{}; rel=\"prev\"", url(page - 1)));
    }
    if page < last {
        parts.push(format!("{}; rel=\"next\"", url(page + 1)));
    }
    if last > 1 {
        parts.push(format!("{}; rel=\"last\"", url(last)));
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::list_query::ListArgs;

    fn envelope(items: Vec<Value>, offset: u64, total: u64) -> Value {
        json!({"status": 200, "headers": [], "body": {"items": items, "page": {"limit": null, "offset": offset, "total": total}}})
    }

    fn header<'a>(reply: &'a Value, name: &str) -> Option<&'a str> {
        reply["headers"].as_array()?.iter().find(|h| h[0] == name).and_then(|h| h[1].as_str())
    }

    #[test]
    fn an_array_answer_carries_the_total_in_headers() {
        let list = ListQuery { args: ListArgs::default(), answer: ListShape::Array { range_header: false, page: None } };
        let reply = shape(&envelope(vec![json!({"id": 1}), json!({"id": 2})], 10, 42), &list, "posts", "/posts", "");
        assert_eq!(reply["body"], json!([{"id": 1}, {"id": 2}]));
        assert_eq!(reply["status"], 200);
        assert_eq!(header(&reply, "X-Total-Count"), Some("42"));
        assert_eq!(header(&reply, "Content-Range"), Some("posts 10-11/42"));
        let empty = shape(&envelope(vec![], 0, 0), &list, "posts", "/posts", "");
        assert_eq!(header(&empty, "Content-Range"), Some("posts */0"));
        let far = shape(&envelope(vec![json!({"id": 1})], u64::MAX, 42), &list, "posts", "/posts", "");
        assert_eq!(header(&far, "Content-Range"), Some("posts */42"), "an offset past what counts cannot overflow");
        let accented = shape(&envelope(vec![json!({"id": 1})], 0, 1), &list, "café", "/caf%C3%A9", "");
        assert_eq!(header(&accented, "Content-Range"), Some("caf%C3%A9 0-0/1"), "a header carries ASCII only");
    }

    #[test]
    fn a_range_header_is_a_206_and_pages_link_to_each_other() {
        let ranged = ListQuery { args: ListArgs::default(), answer: ListShape::Array { range_header: true, page: None } };
        assert_eq!(shape(&envelope(vec![json!(1)], 0, 5), &ranged, "posts", "/posts", "")["status"], 206);
        assert_eq!(shape(&envelope(vec![], 10, 5), &ranged, "posts", "/posts", "")["status"], 200, "an empty window is not partial content");
        let paged = ListQuery { args: ListArgs::default(), answer: ListShape::Array { range_header: false, page: Some((2, 10)) } };
        let reply = shape(&envelope(vec![json!(1)], 10, 35), &paged, "posts", "/posts", "_page=2&_limit=10");
        assert_eq!(
            header(&reply, "Link"),
            Some("</posts?_limit=10&_page=1>; rel=\"first\", </posts?_limit=10&_page=1>; rel=\"prev\", </posts?_limit=10&_page=3>; rel=\"next\", </posts?_limit=10&_page=4>; rel=\"last\"")
        );
        let beyond = ListQuery { args: ListArgs::default(), answer: ListShape::Array { range_header: false, page: Some((9, 10)) } };
        assert_eq!(header(&shape(&envelope(vec![], 80, 35), &beyond, "posts", "/posts", "_page=9"), "Link"), None, "no links from a page with no records");
    }

    #[test]
    fn the_envelope_and_other_replies_keep_their_shape() {
        let own = ListQuery { args: ListArgs::default(), answer: ListShape::Envelope };
        let reply = shape(&envelope(vec![json!(1)], 0, 1), &own, "posts", "/posts", "limit=1");
        assert_eq!(reply["body"]["page"]["total"], 1);
        assert_eq!(header(&reply, "X-Total-Count"), Some("1"));
        let error = json!({"status": 400, "body": {"error": {"code": "bad_request"}}});
        assert_eq!(shape(&error, &own, "posts", "/posts", ""), error);
    }
}
