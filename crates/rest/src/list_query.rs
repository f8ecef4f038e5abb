//! A list request's paging, sorting, filtering and answer shape, read once
//! from its query in every vocabulary the REST face speaks:
//!
//! - its own (seed 000): `limit`, `offset`, `sort=field` or `sort=-field`,
//!   `field=value` and `field__op=value`; answered with the envelope
//!   `{"items": [...], "page": {"limit", "offset", "total"}}`;
//! - json-server 0.17's: `_sort=a,b`, `_order=asc,desc`, `_start`, `_end`,
//!   `_limit`, `_page`, `_per_page`, `field_gte`/`_lte`/`_ne`/`_like`, `q`,
//!   repeated keys as any-of, `_embed`, `_expand`;
//! - ra-data-simple-rest's JSON-encoded `sort=["f","ASC"]`, `range=[0,9]`
//!   and `filter={...}`;
//!
//! answered, unless the request uses its own paging keys, with a bare JSON
//! array and the total in `X-Total-Count` and `Content-Range`
//! ([`crate::list_answer`]). Keys starting with `_` that are not controls,
//! and `utm_*`, never filter; a control that cannot be read is a 400 naming
//! it. The block gets [`ListQuery::args`] as `store.list`'s keyword
//! arguments (`store.list(**ctx["list"]["args"])`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::RestError;

/// How a list is read and answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListQuery {
    /// `store.list`'s keyword arguments.
    pub args: ListArgs,
    /// The answer's shape.
    pub answer: ListShape,
}

/// What `store.list(**args)` takes, and one `_embed` or `_expand`: defined
/// with the operations that read them.
pub use anypath_collections::{ListArgs, Relation};

/// The shape of a list answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "shape", rename_all = "snake_case")]
pub enum ListShape {
    /// Seed 000's `{"items", "page"}`.
    Envelope,
    /// A bare array, with totals in headers.
    Array {
        /// The request's `Range: <resource>=a-b` header was honoured: 206.
        range_header: bool,
        /// `_page` and its page size, for the `Link` header.
        page: Option<(u64, u64)>,
    },
}

/// Query keys of the seed's own vocabulary that ask for the envelope.
const OWN_PAGING: [&str; 3] = ["limit", "offset", "sort"];
/// json-server's default page size.
const DEFAULT_PAGE_SIZE: u64 = 10;
/// json-server's filter suffixes and the store operators they map to.
const SUFFIXES: [(&str, &str); 4] = [("_gte", "gte"), ("_lte", "lte"), ("_ne", "ne"), ("_like", "like")];
/// The store's own operators, written `field__op`.
const OWN_OPERATORS: [&str; 8] = ["contains", "icontains", "gte", "gt", "lte", "lt", "ne", "in"];
/// The most collections `_embed` and `_expand` may read besides the list's
/// own: what a planned block may load ([`crate::plan::MAX_ALSO_LOADS`]).
const MAX_RELATED: usize = crate::plan::MAX_ALSO_LOADS;
/// The longest `_like` pattern, in characters.
const MAX_PATTERN: usize = 256;

impl ListQuery {
    /// Reads a list request's query (and its `Range` header); `nested` is
    /// the parent's `(collection, id)` of `/posts/1/comments`.
    pub fn parse(query: &BTreeMap<String, Vec<String>>, range_header: Option<&str>, collection: &str, nested: Option<(&str, &str)>) -> Result<Self, RestError> {
        let simple_rest = ["range", "filter"].iter().any(|k| query.contains_key(*k)) || first(query, "sort").is_some_and(|s| s.trim_start().starts_with('['));
        let own = !simple_rest && OWN_PAGING.iter().any(|k| query.contains_key(*k));
        let mut args = ListArgs::default();
        if let Some((parent, id)) = nested {
            args.filters.push((format!("{}Id", singular(parent)), "eq".into(), vec![Value::String(id.to_owned())]));
        }
        // Every count is read wherever it appears, so a bad one is refused
        // even when another vocabulary's keys decide the window.
        for key in ["limit", "offset", "_start", "_end", "_limit", "_page", "_per_page"] {
            number(query, key)?;
        }
        let mut page = None;
        if own {
            args.limit = number(query, "limit")?;
            args.offset = number(query, "offset")?.unwrap_or(0);
            if let Some(sort) = first(query, "sort").filter(|s| !s.is_empty()) {
                args.sort = seed_sort(sort);
            }
        } else if simple_rest {
            read_simple_rest(query, &mut args)?;
        }
        // json-server's controls, in its order of precedence.
        if !own && !simple_rest || query.keys().any(|k| k.starts_with('_')) {
            page = read_json_server(query, collection, &mut args)?;
        }
        for (key, values) in query {
            if is_control(key) {
                continue;
            }
            add_filter(&mut args, key, values.iter().map(|v| Value::String(v.clone())).collect())?;
        }
        if let Some(q) = first(query, "q").filter(|q| !q.is_empty()) {
            args.q = Some(q.to_owned());
        }
        let answer = if own {
            ListShape::Envelope
        } else {
            let range_header = range_header.is_some_and(|range| apply_range_header(range, collection, &mut args));
            // The Range header decides the window, so `_page`'s links would name other records.
            ListShape::Array { range_header, page: page.filter(|_| !range_header) }
        };
        Ok(Self { args, answer })
    }
}

/// Whether a query key pages, sorts, searches or shapes rather than filters.
pub fn is_control(key: &str) -> bool {
    key.starts_with('_') || key.starts_with("utm_") || matches!(key, "q" | "limit" | "offset" | "sort" | "range" | "filter" | "callback")
}

fn first<'a>(query: &'a BTreeMap<String, Vec<String>>, key: &str) -> Option<&'a str> {
    query.get(key).and_then(|v| v.first()).map(String::as_str)
}

/// The largest count a control may carry: what JSON numbers hold exactly.
const MAX_COUNT: u64 = (1 << 53) - 1;

fn number(query: &BTreeMap<String, Vec<String>>, key: &str) -> Result<Option<u64>, RestError> {
    let Some(text) = first(query, key) else { return Ok(None) };
    text.trim()
        .parse::<u64>()
        .ok()
        .filter(|n| *n <= MAX_COUNT)
        .map(Some)
        .ok_or_else(|| RestError::BadRequest(format!("`{key}` must be an integer from 0 to {MAX_COUNT}, not {text:?}")))
}

/// `_sort`, `_order`, `_start`, `_end`, `_limit`, `_page`, `_per_page`,
/// `_embed`, `_expand`; the page asked for with `_page`, if any.
fn read_json_server(query: &BTreeMap<String, Vec<String>>, collection: &str, args: &mut ListArgs) -> Result<Option<(u64, u64)>, RestError> {
    // Every `_order` is read, with or without `_sort`: a value that is not
    // asc or desc is refused wherever it appears.
    for order in query.get("_order").into_iter().flatten().flat_map(|o| o.split(',')) {
        if !matches!(order.trim().to_ascii_lowercase().as_str(), "" | "asc" | "desc") {
            return Err(RestError::BadRequest(format!("`_order` must be asc or desc for each `_sort` field, not {:?}", order.trim())));
        }
    }
    if let Some(fields) = first(query, "_sort").filter(|s| !s.is_empty()) {
        let orders: Vec<&str> = first(query, "_order").map(|o| o.split(',').collect()).unwrap_or_default();
        args.sort.clear();
        for (i, field) in fields.split(',').enumerate() {
            let descending = match orders.get(i).map(|o| o.trim().to_ascii_lowercase()) {
                None => false,
                Some(order) if order.is_empty() || order == "asc" => false,
                Some(order) if order == "desc" => true,
                Some(order) => return Err(RestError::BadRequest(format!("`_order` must be asc or desc for each `_sort` field, not {order:?}"))),
            };
            // json-server 1.x writes a descending field as `-field`.
            let (field, descending) = match field.strip_prefix('-') {
                Some(bare) => (bare, true),
                None => (field, descending),
            };
            args.sort.push((field.to_owned(), descending));
        }
    }
    let start = number(query, "_start")?;
    let end = number(query, "_end")?;
    let limit = number(query, "_limit")?.or(number(query, "_per_page")?);
    let page = number(query, "_page")?;
    let mut asked_page = None;
    if let Some(page) = page {
        // As json-server reads it: a missing or zero page size is its default.
        let size = limit.filter(|size| *size > 0).unwrap_or(DEFAULT_PAGE_SIZE);
        let page = page.max(1);
        args.offset = (page - 1).saturating_mul(size);
        args.limit = Some(size);
        asked_page = Some((page, size));
    } else if let Some(end) = end {
        let start = start.unwrap_or(0);
        args.offset = start;
        args.limit = Some(end.saturating_sub(start));
    } else if let Some(limit) = limit {
        args.offset = start.unwrap_or(0);
        args.limit = Some(limit);
    } else if let Some(start) = start {
        args.offset = start;
    }
    let foreign_key = format!("{}Id", singular(collection));
    args.embed = dedup(names(query, "_embed")).into_iter().map(|child| Relation { collection: child.clone(), field: child, key: foreign_key.clone() }).collect();
    args.expand = dedup(names(query, "_expand"))
        .into_iter()
        .map(|parent| Relation { collection: plural(&parent), key: format!("{parent}Id"), field: parent })
        .collect();
    let related = args.related_collections();
    if related.len() > MAX_RELATED {
        return Err(RestError::BadRequest(format!("`_embed` and `_expand` may name at most {MAX_RELATED} collections, not {}", related.len())));
    }
    Ok(asked_page)
}

/// `names` in their first order, each once.
fn dedup(names: Vec<String>) -> Vec<String> {
    let mut seen = std::collections::BTreeSet::new();
    names.into_iter().filter(|name| seen.insert(name.clone())).collect()
}

/// Every value of `key`, comma lists split.
fn names(query: &BTreeMap<String, Vec<String>>, key: &str) -> Vec<String> {
    query.get(key).into_iter().flatten().flat_map(|v| v.split(',')).filter(|n| !n.is_empty()).map(str::to_owned).collect()
}

/// The seed's `sort=field,-field`: `[field, descending]`, most significant first.
fn seed_sort(sort: &str) -> Vec<(String, bool)> {
    sort.split(',').filter(|k| !k.is_empty()).map(|k| (k.trim_start_matches('-').to_owned(), k.starts_with('-'))).collect()
}

/// ra-data-simple-rest's `["field", "ASC"]` as `(field, descending)`, the
/// order in any case. Read as JSON, or failing that by the grammar the
/// OpenAPI document states (`["<no quote or backslash>", "asc|desc"]`, one
/// optional space): JSON refuses a raw control character in the field that
/// the spec allows, and such a field simply names nothing to sort by.
fn simple_rest_sort(sort: &str) -> Option<(String, bool)> {
    let (field, order) = serde_json::from_str::<(String, String)>(sort).ok().or_else(|| {
        let inner = sort.strip_prefix("[\"")?.strip_suffix("\"]")?;
        let (field, order) = inner.split_once("\",")?;
        let order = order.strip_prefix(' ').unwrap_or(order).strip_prefix('"')?;
        (!field.contains(['"', '\\'])).then(|| (field.to_owned(), order.to_owned()))
    })?;
    match order.to_ascii_lowercase().as_str() {
        "asc" => Some((field, false)),
        "desc" => Some((field, true)),
        _ => None,
    }
}

/// ra-data-simple-rest's `sort=["f","ASC"]`, `range=[a,b]` (inclusive) and
/// `filter={...}`.
fn read_simple_rest(query: &BTreeMap<String, Vec<String>>, args: &mut ListArgs) -> Result<(), RestError> {
    if let Some(sort) = first(query, "sort").filter(|s| !s.is_empty() && !s.trim_start().starts_with('[')) {
        // Beside `range` or `filter`, a sort that is not JSON is the seed's `-field,field`.
        args.sort = seed_sort(sort);
    } else if let Some(sort) = first(query, "sort").filter(|s| !s.is_empty()) {
        let (field, descending) = simple_rest_sort(sort)
            .ok_or_else(|| RestError::BadRequest(format!("`sort` must be [\"field\", \"ASC\" or \"DESC\"] (any case), not {sort}")))?;
        args.sort = vec![(field, descending)];
    }
    if let Some(range) = first(query, "range").filter(|s| !s.is_empty()) {
        let (start, end): (u64, u64) = serde_json::from_str(range)
            .ok()
            .filter(|(start, end): &(u64, u64)| *start <= MAX_COUNT && *end <= MAX_COUNT)
            .ok_or_else(|| RestError::BadRequest(format!("`range` must be [first, last], integers from 0 to {MAX_COUNT}, not {range}")))?;
        args.offset = start;
        // A last item before the first asks for nothing.
        args.limit = Some(if end < start { 0 } else { end - start + 1 });
    }
    if let Some(filter) = first(query, "filter").filter(|s| !s.is_empty()) {
        let map: serde_json::Map<String, Value> =
            serde_json::from_str(filter).map_err(|_| RestError::BadRequest(format!("`filter` must be a JSON object, not {filter}")))?;
        for (key, value) in map {
            // A key that names no field filters nothing.
            if key.is_empty() {
                continue;
            }
            if key == "q" {
                args.q = value.as_str().map(str::to_owned).or_else(|| (!value.is_null()).then(|| value.to_string()));
                continue;
            }
            let values = match value {
                Value::Array(values) => values,
                other => vec![other],
            };
            add_filter(args, &key, values)?;
        }
    }
    Ok(())
}

/// A field filter from a key (`field`, `field_gte`, `field__gt`, ...) and
/// its values.
fn add_filter(args: &mut ListArgs, key: &str, values: Vec<Value>) -> Result<(), RestError> {
    let (field, op) = if let Some((field, op)) = key.rsplit_once("__").filter(|(_, op)| OWN_OPERATORS.contains(op)) {
        (field, op)
    } else if let Some((field, op)) = SUFFIXES.iter().find_map(|(suffix, op)| key.strip_suffix(suffix).map(|f| (f, *op))) {
        (field, op)
    } else {
        (key, "eq")
    };
    if field.is_empty() {
        return Err(RestError::BadRequest(format!("filter {key:?} names no field")));
    }
    if op == "like" {
        for value in &values {
            let pattern = value.as_str().unwrap_or_default();
            if pattern.chars().count() > MAX_PATTERN {
                return Err(RestError::BadRequest(format!("`{key}` is longer than {MAX_PATTERN} characters")));
            }
            if !brackets_balance(pattern) {
                return Err(RestError::BadRequest(format!("`{key}` is not a regular expression: {pattern:?}")));
            }
        }
    }
    args.filters.push((field.to_owned(), op.to_owned(), values));
    Ok(())
}

/// Whether a pattern's groups and classes close and it ends on no dangling
/// escape: the common reasons Python's `re` refuses one, found before
/// anything runs (the block's `re.compile` reports the rest as a 400).
fn brackets_balance(pattern: &str) -> bool {
    let (mut depth, mut class, mut escaped) = (0i32, false, false);
    for c in pattern.chars() {
        if escaped {
            escaped = false;
            continue;
        }
        match c {
            '\\' => escaped = true,
            '[' if !class => class = true,
            ']' if class => class = false,
            '(' if !class => depth += 1,
            ')' if !class => {
                depth -= 1;
                if depth < 0 {
                    return false;
                }
            }
            _ => {}
        }
    }
    depth == 0 && !class && !escaped
}

/// `Range: <collection>=a-b` (ra-data-simple-rest's header): the window it
/// asks for replaces the query's; true when honoured. A range in another
/// unit (`bytes=0-`), or one that does not read, is ignored, as RFC 9110
/// lets a server ignore a Range it does not support.
fn apply_range_header(range: &str, collection: &str, args: &mut ListArgs) -> bool {
    let Some((unit, span)) = range.split_once('=') else { return false };
    let Some((start, end)) = span.trim().split_once('-') else { return false };
    let (Ok(start), Ok(end)) = (start.trim().parse::<u64>(), end.trim().parse::<u64>()) else { return false };
    if unit.trim() != collection || start > end || end > MAX_COUNT {
        return false;
    }
    args.offset = start;
    args.limit = Some(end - start + 1);
    true
}

/// `posts` → `post`, `categories` → `category`: json-server's foreign keys.
pub fn singular(collection: &str) -> String {
    if let Some(stem) = collection.strip_suffix("ies") {
        format!("{stem}y")
    } else if let Some(stem) = collection.strip_suffix('s').filter(|s| !s.ends_with('s')) {
        stem.to_owned()
    } else {
        collection.to_owned()
    }
}

/// `post` → `posts`, `category` → `categories`: the collection `_expand` reads.
pub fn plural(name: &str) -> String {
    if let Some(stem) = name.strip_suffix('y').filter(|s| !s.ends_with(['a', 'e', 'i', 'o', 'u'])) {
        format!("{stem}ies")
    } else if name.ends_with('s') {
        name.to_owned()
    } else {
        format!("{name}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn query(pairs: &[(&str, &str)]) -> BTreeMap<String, Vec<String>> {
        let mut query: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (k, v) in pairs {
            query.entry((*k).to_owned()).or_default().push((*v).to_owned());
        }
        query
    }

    fn parse(pairs: &[(&str, &str)]) -> Result<ListQuery, RestError> {
        ListQuery::parse(&query(pairs), None, "posts", None)
    }

    #[test]
    fn the_seeds_own_keys_keep_the_envelope() {
        let list = parse(&[("limit", "10"), ("offset", "20"), ("sort", "-age"), ("name", "x"), ("age__gt", "3")]).unwrap();
        assert_eq!(list.answer, ListShape::Envelope);
        assert_eq!((list.args.limit, list.args.offset), (Some(10), 20));
        assert_eq!(list.args.sort, vec![("age".into(), true)]);
        assert_eq!(list.args.filters, vec![("age".into(), "gt".into(), vec![json!("3")]), ("name".into(), "eq".into(), vec![json!("x")])]);
    }

    #[test]
    fn json_server_vocabulary_pages_sorts_and_filters() {
        let list = parse(&[("_sort", "views,title"), ("_order", "desc,asc"), ("_start", "10"), ("_end", "20"), ("views_gte", "5"), ("title_like", "^a"), ("id", "1"), ("id", "3"), ("q", "snow")]).unwrap();
        assert_eq!(list.answer, ListShape::Array { range_header: false, page: None });
        assert_eq!(list.args.sort, vec![("views".into(), true), ("title".into(), false)]);
        assert_eq!((list.args.offset, list.args.limit), (10, Some(10)));
        assert_eq!(list.args.q.as_deref(), Some("snow"));
        assert!(list.args.filters.contains(&("id".into(), "eq".into(), vec![json!("1"), json!("3")])));
        assert!(list.args.filters.contains(&("views".into(), "gte".into(), vec![json!("5")])));
        assert!(list.args.filters.contains(&("title".into(), "like".into(), vec![json!("^a")])));
        let paged = parse(&[("_page", "2"), ("_limit", "5"), ("_embed", "comments")]).unwrap();
        assert_eq!((paged.args.offset, paged.args.limit), (5, Some(5)));
        assert_eq!(paged.answer, ListShape::Array { range_header: false, page: Some((2, 5)) });
        assert_eq!(paged.args.embed, vec![Relation { field: "comments".into(), collection: "comments".into(), key: "postId".into() }]);
    }

    #[test]
    fn cache_busters_tracking_keys_and_unknown_controls_never_filter() {
        let list = parse(&[("_", "1700000000000"), ("utm_source", "x"), ("_whatever", "1")]).unwrap();
        assert!(list.args.filters.is_empty(), "{:?}", list.args.filters);
        assert_eq!(list.answer, ListShape::Array { range_header: false, page: None });
    }

    #[test]
    fn simple_rest_json_parameters_and_range_header() {
        let list = ListQuery::parse(&query(&[("sort", r#"["title","DESC"]"#), ("range", "[0,9]"), ("filter", r#"{"q":"x","id":[1,3]}"#)]), Some("posts=0-4"), "posts", None).unwrap();
        assert_eq!(list.args.sort, vec![("title".into(), true)]);
        assert_eq!((list.args.offset, list.args.limit), (0, Some(5)), "the Range header wins");
        assert_eq!(list.args.q.as_deref(), Some("x"));
        assert_eq!(list.args.filters, vec![("id".into(), "eq".into(), vec![json!(1), json!(3)])]);
        assert_eq!(list.answer, ListShape::Array { range_header: true, page: None });
        for ignored in ["bytes=0-", "bytes=5-9", "posts=9-0", "posts=x-1", "comments=0-1", "posts=0-18446744073709551615"] {
            let list = ListQuery::parse(&query(&[]), Some(ignored), "posts", None).unwrap();
            assert_eq!(list.answer, ListShape::Array { range_header: false, page: None }, "{ignored}");
            assert_eq!(list.args.limit, None, "{ignored}");
        }
    }

    #[test]
    fn simple_rest_sort_takes_every_order_and_field_the_spec_allows() {
        for (sort, expected) in [
            (r#"["title","AsC"]"#, ("title", false)),
            (r#"["title", "dEsC"]"#, ("title", true)),
            ("[\"ti\ttle\",\"asc\"]", ("ti\ttle", false)),
            ("[\"\u{1}\",\"DESC\"]", ("\u{1}", true)),
            (r#"["",  "ASC"]"#, ("", false)),
        ] {
            let list = parse(&[("sort", sort)]).unwrap_or_else(|e| panic!("{sort:?}: {e}"));
            assert_eq!(list.args.sort, vec![(expected.0.to_owned(), expected.1)], "{sort:?}");
        }
        for refused in [r#"["title","up"]"#, r#"["title"]"#, r#"["a\"b","ASC"]x"#] {
            assert!(matches!(parse(&[("sort", refused)]), Err(RestError::BadRequest(_))), "{refused:?}");
        }
    }

    #[test]
    fn a_malformed_control_is_a_400_that_names_it() {
        for (pairs, named) in [
            (vec![("range", "[0,")], "`range`"),
            (vec![("range", "[-1,2]")], "`range`"),
            (vec![("sort", r#"["title","UP"]"#)], "`sort`"),
            (vec![("filter", "[1]")], "`filter`"),
            (vec![("_start", "x"), ("_end", "5")], "`_start`"),
            (vec![("_sort", "a"), ("_order", "sideways")], "`_order`"),
            (vec![("limit", "-1")], "`limit`"),
            (vec![("title_like", "(")], "`title_like`"),
            (vec![("title_like", &"a".repeat(MAX_PATTERN + 1))], "`title_like`"),
            (vec![("_embed", "a,b,c"), ("_expand", "d,e")], "`_embed` and `_expand`"),
        ] {
            let error = parse(&pairs).expect_err("malformed");
            assert_eq!(error.status(), 400);
            assert!(error.to_string().contains(named), "{error} names {named}");
        }
    }

    #[test]
    fn relations_name_their_collection_and_key_once_each() {
        let list = ListQuery::parse(&query(&[("_embed", "comments,likes"), ("_embed", "comments"), ("_expand", "author"), ("_expand", "category")]), None, "posts", None).unwrap();
        let relation = |field: &str, collection: &str, key: &str| Relation { field: field.into(), collection: collection.into(), key: key.into() };
        assert_eq!(list.args.embed, vec![relation("comments", "comments", "postId"), relation("likes", "likes", "postId")]);
        assert_eq!(list.args.expand, vec![relation("author", "authors", "authorId"), relation("category", "categories", "categoryId")]);
        assert_eq!(list.args.related_collections(), vec!["authors", "categories", "comments", "likes"]);
    }

    #[test]
    fn a_page_of_no_size_is_json_servers_default_and_a_range_header_drops_the_links() {
        let list = parse(&[("_page", "2"), ("_limit", "0")]).unwrap();
        assert_eq!((list.args.offset, list.args.limit), (10, Some(10)));
        assert_eq!(list.answer, ListShape::Array { range_header: false, page: Some((2, 10)) });
        let ranged = ListQuery::parse(&query(&[("_page", "2")]), Some("posts=0-4"), "posts", None).unwrap();
        assert_eq!(ranged.answer, ListShape::Array { range_header: true, page: None });
    }

    #[test]
    fn nested_routes_filter_by_the_parents_key() {
        let list = ListQuery::parse(&query(&[]), None, "comments", Some(("posts", "1"))).unwrap();
        assert_eq!(list.args.filters, vec![("postId".into(), "eq".into(), vec![json!("1")])]);
        assert_eq!((singular("categories"), plural("category"), plural("post"), singular("address")), ("category".into(), "categories".into(), "posts".into(), "address".into()));
    }
}
