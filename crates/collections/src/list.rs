//! A list request: filters, text search, sorting, paging and relations, as
//! the REST face reads them from a query ([`ListArgs`]) and as a block may
//! pass them to `store.list(...)` ([`ListArgs::from_call`]).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::OpError;
use crate::filter::{AnyOf, Filter};
use crate::python;

/// What `store.list(**args)` takes; also `ctx["list"]["args"]`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ListArgs {
    /// At most this many records; none for every record from `offset`.
    pub limit: Option<u64>,
    /// How many matching records to skip.
    pub offset: u64,
    /// `[field, descending]`, most significant first.
    pub sort: Vec<(String, bool)>,
    /// `[field, op, values]`: every filter must pass; a filter passes when
    /// any value does (for `ne`, when every value does).
    pub filters: Vec<(String, String, Vec<Value>)>,
    /// Case-insensitive text searched for in every value.
    pub q: Option<String>,
    /// Child collections to embed (`_embed=comments` on `/posts`: each
    /// record's `comments` are those whose `postId` is its id).
    pub embed: Vec<Relation>,
    /// Parents to expand (`_expand=post` on `/comments`: each record's
    /// `post` is the one of `posts` whose id is its `postId`).
    pub expand: Vec<Relation>,
}

/// One `_embed` or `_expand`: the field it fills, the collection it reads
/// and the foreign key that joins them, named here once so the block needs
/// no naming rules of its own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Relation {
    /// The field each record gets (`comments`, `post`).
    pub field: String,
    /// The collection read (`comments`, `posts`).
    pub collection: String,
    /// The foreign key (`postId`): on the child for an embed, on the record
    /// itself for an expand.
    pub key: String,
}

impl ListArgs {
    /// The other collections the embeds and expands read, each once.
    pub fn related_collections(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.embed.iter().chain(&self.expand).map(|r| r.collection.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        names
    }
}

/// A list call compiled: what runs over the documents.
pub struct ListPlan {
    pub limit: Option<u64>,
    pub offset: u64,
    pub sort: Vec<(String, bool)>,
    pub filters: Filters,
    /// The casefolded text of `q`, when it is set.
    pub q: Option<String>,
    pub embed: Vec<Relation>,
    pub expand: Vec<Relation>,
}

/// Filters in either form a block may give.
pub enum Filters {
    /// `search`'s form, `{"field__op": value}`.
    Keyed(Vec<Filter>),
    /// `[[field, op, values], ...]`.
    AnyOf(Vec<AnyOf>),
}

impl Filters {
    /// Whether `document` passes every filter.
    pub fn matches(&self, document: &Value) -> bool {
        match self {
            Self::Keyed(filters) => filters.iter().all(|f| f.matches(document)),
            Self::AnyOf(filters) => filters.iter().all(|f| f.matches(document)),
        }
    }

    /// `search`'s filters: a dict of `field` or `field__op` to a value.
    pub fn keyed(filters: &Value) -> Result<Self, OpError> {
        let Value::Object(map) = filters else { return Err(OpError::Type("filters must be a dict".into())) };
        Ok(Self::Keyed(map.iter().map(|(k, v)| Filter::keyed(k, v)).collect::<Result<_, _>>()?))
    }
}

impl ListPlan {
    /// The plan of arguments the REST face read from a query.
    pub fn from_args(args: &ListArgs) -> Result<Self, OpError> {
        let filters = args.filters.iter().map(|(field, op, values)| AnyOf::new(field, op, &Value::Array(values.clone()))).collect::<Result<_, _>>()?;
        Ok(Self {
            limit: args.limit,
            offset: args.offset,
            sort: args.sort.clone(),
            filters: Filters::AnyOf(filters),
            q: args.q.as_deref().filter(|q| !q.is_empty()).map(python::casefold),
            embed: args.embed.clone(),
            expand: args.expand.clone(),
        })
    }

    /// The plan of `store.list(**kwargs)` as a block called it: `limit`,
    /// `offset` and `sort` may be given as `ctx['query']` holds them
    /// (`['10']`), filters as `search`'s dict or the any-of list.
    pub fn from_call(kwargs: &Map<String, Value>) -> Result<Self, OpError> {
        if let Some(unknown) = kwargs.keys().find(|k| !["limit", "offset", "sort", "filters", "q", "embed", "expand"].contains(&k.as_str())) {
            return Err(OpError::Type(format!("list() got an unexpected keyword argument {}", python::repr_str(unknown))));
        }
        let get = |name: &str| kwargs.get(name).filter(|v| !v.is_null());
        let limit = get("limit").map(query_value).transpose()?.flatten();
        let limit = limit.map(|v| non_negative(&v, "limit")).transpose()?;
        let offset = match get("offset").map(query_value).transpose()?.flatten() {
            Some(v) if python::truthy(&v) => non_negative(&v, "offset")?,
            _ => 0,
        };
        let sort = get("sort").map(sort_keys).transpose()?.unwrap_or_default();
        let filters = match get("filters") {
            None => Filters::AnyOf(Vec::new()),
            Some(dict @ Value::Object(_)) => Filters::keyed(dict)?,
            Some(Value::Array(items)) => Filters::AnyOf(items.iter().map(any_of).collect::<Result<_, _>>()?),
            Some(other) => return Err(OpError::Type(format!("filters must be a dict or a list of [field, op, values], not {}", python::repr(other)))),
        };
        let q = get("q").filter(|q| python::truthy(q)).map(|q| python::casefold(&python::str_of(q)));
        Ok(Self {
            limit,
            offset,
            sort,
            filters,
            q,
            embed: relations(get("embed"))?,
            expand: relations(get("expand"))?,
        })
    }
}

fn any_of(filter: &Value) -> Result<AnyOf, OpError> {
    match filter.as_array().map(Vec::as_slice) {
        Some([Value::String(field), Value::String(op), values]) => AnyOf::new(field, op, values),
        _ => Err(OpError::Type(format!("a filter is [field, op, values], not {}", python::repr(filter)))),
    }
}

/// A query parameter as a block may pass it: `['10']`, `'10'` or `10`. An empty list is no value.
fn query_value(value: &Value) -> Result<Option<Value>, OpError> {
    match value {
        Value::Array(items) if items.len() > 1 => Err(OpError::Value(format!("expected one value, got {}: {}", items.len(), python::repr(value)))),
        Value::Array(items) => Ok(items.first().cloned()),
        other => Ok(Some(other.clone())),
    }
}

fn non_negative(value: &Value, what: &str) -> Result<u64, OpError> {
    let not_integer = || OpError::Value(format!("{what} must be an integer, not {}", python::repr(value)));
    let number: i128 = match value {
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => i128::from(i),
            (_, Some(u), _) => i128::from(u),
            (_, _, Some(f)) if f.fract() == 0.0 && f.is_finite() => f as i128,
            _ => return Err(not_integer()),
        },
        Value::String(text) => python::parse_int(text).ok_or_else(not_integer)?,
        _ => return Err(not_integer()),
    };
    if number < 0 {
        return Err(OpError::Value(format!("{what} must not be negative")));
    }
    u64::try_from(number).map_err(|_| not_integer())
}

/// `[(field, descending)]` from `"f"`, `"-f"`, `"a,-b"` or `[[field, descending]]`.
fn sort_keys(sort: &Value) -> Result<Vec<(String, bool)>, OpError> {
    let sort = match sort {
        Value::Array(items) if items.len() == 1 && items[0].is_string() => &items[0],
        other => other,
    };
    if !python::truthy(sort) {
        return Ok(Vec::new());
    }
    match sort {
        Value::String(text) => Ok(text
            .split(',')
            .filter(|k| !k.trim_matches('-').is_empty())
            .map(|k| (k.trim_start_matches('-').to_owned(), k.starts_with('-')))
            .collect()),
        Value::Array(items) => items
            .iter()
            .map(|item| match item.as_array().map(Vec::as_slice) {
                Some([Value::String(field), descending]) => Ok((field.clone(), python::truthy(descending))),
                _ => Err(()),
            })
            .collect::<Result<_, ()>>()
            .map_err(|()| sort_error(sort)),
        other => Err(sort_error(other)),
    }
}

fn sort_error(sort: &Value) -> OpError {
    OpError::Type(format!("sort must be a field name, '-field' for descending, or [[field, descending]], not {}", python::repr(sort)))
}

fn relations(value: Option<&Value>) -> Result<Vec<Relation>, OpError> {
    let Some(value) = value else { return Ok(Vec::new()) };
    let items = match value {
        Value::Array(items) => items.as_slice(),
        other => return Err(OpError::Type(format!("relations are a list, not {}", python::repr(other)))),
    };
    items
        .iter()
        .map(|item| {
            serde_json::from_value::<Relation>(item.clone())
                .map_err(|_| OpError::Type(format!("a relation is {{'field', 'collection', 'key'}}, not {}", python::repr(item))))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(kwargs: Value) -> Result<ListPlan, OpError> {
        ListPlan::from_call(kwargs.as_object().unwrap())
    }

    #[test]
    fn a_blocks_arguments_are_read_in_every_form_it_may_pass() {
        let plan = call(json!({"limit": ["10"], "offset": "2", "sort": ["-age,name"]})).unwrap();
        assert_eq!((plan.limit, plan.offset), (Some(10), 2));
        assert_eq!(plan.sort, vec![("age".into(), true), ("name".into(), false)]);
        assert_eq!(call(json!({"sort": [["age", 1]]})).unwrap().sort, vec![("age".into(), true)]);
        assert_eq!(call(json!({"limit": 3.0})).unwrap().limit, Some(3));
        assert!(matches!(call(json!({"limit": "-1"})), Err(OpError::Value(_))));
        assert!(matches!(call(json!({"limit": true})), Err(OpError::Value(_))));
        assert!(matches!(call(json!({"limit": ["1", "2"]})), Err(OpError::Value(_))));
        assert!(matches!(call(json!({"sort": 5})), Err(OpError::Type(_))));
        assert!(matches!(call(json!({"embed": [{"field": "x"}]})), Err(OpError::Type(_))));
        assert!(matches!(call(json!({"size": 1})), Err(OpError::Type(_))));
        assert!(matches!(call(json!({"filters": [["a", "eq"]]})), Err(OpError::Type(_))));
    }
}
