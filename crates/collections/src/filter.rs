//! Filters over documents: `field=value`, `field__op=value` and the any-of
//! form `[field, op, values]`, with query text read as the stored value's
//! type (`age__gte=18` compares numbers).

use std::borrow::Cow;
use std::cmp::Ordering;

use regex::{Regex, RegexBuilder};
use serde_json::Value;

use crate::error::OpError;
use crate::python;

/// The operators a `field__op` key may name.
pub const OPERATORS: [&str; 9] = ["contains", "icontains", "gte", "gt", "lte", "lt", "ne", "in", "like"];

/// How one filter tests a field's value.
#[derive(Debug, Clone)]
enum Test {
    Eq,
    Ne,
    Contains,
    IContains,
    Ordered(fn(Ordering) -> bool),
    In,
    Like(Regex),
}

impl Test {
    fn named(op: &str, expected: &Value) -> Result<Self, OpError> {
        Ok(match op {
            "eq" => Self::Eq,
            "ne" => Self::Ne,
            "contains" => Self::Contains,
            "icontains" => Self::IContains,
            "gt" => Self::Ordered(Ordering::is_gt),
            "gte" => Self::Ordered(Ordering::is_ge),
            "lt" => Self::Ordered(Ordering::is_lt),
            "lte" => Self::Ordered(Ordering::is_le),
            "in" => Self::In,
            "like" => Self::Like(pattern(expected)?),
            other => return Err(OpError::Value(format!("unknown filter operator {}", python::repr_str(other)))),
        })
    }
}

/// One compiled filter on one field.
#[derive(Debug, Clone)]
pub struct Filter {
    field: String,
    test: Test,
    expected: Value,
}

impl Filter {
    /// `search`'s form: `key` is `field` or `field__op`; a value as the
    /// query holds it (a one-element list of text) stands for that text.
    pub fn keyed(key: &str, expected: &Value) -> Result<Self, OpError> {
        let (field, op) = match key.rsplit_once("__") {
            Some((head, tail)) if OPERATORS.contains(&tail) => (head, tail),
            _ => (key, "eq"),
        };
        Self::new(field, op, expected)
    }

    fn new(field: &str, op: &str, expected: &Value) -> Result<Self, OpError> {
        let expected = match expected {
            Value::Array(items) if op != "in" && items.len() == 1 && items[0].is_string() => items[0].clone(),
            other => other.clone(),
        };
        Ok(Self { field: field.to_owned(), test: Test::named(op, &expected)?, expected })
    }

    /// Whether `document` passes. A document without the field passes only `ne`.
    pub fn matches(&self, document: &Value) -> bool {
        let Some(actual) = document.get(&self.field) else {
            return matches!(self.test, Test::Ne);
        };
        let expected = &self.expected;
        match &self.test {
            Test::Eq => equal(actual, expected),
            Test::Ne => !equal(actual, expected),
            Test::Contains => match actual {
                Value::String(text) => text.contains(python::str_of(expected).as_str()),
                Value::Array(items) => items.iter().any(|item| equal(item, expected)),
                _ => false,
            },
            Test::IContains => {
                let wanted = python::casefold(&python::str_of(expected));
                match actual {
                    Value::String(text) => python::casefold(text).contains(&wanted),
                    Value::Array(items) => items.iter().any(|item| item.as_str().is_some_and(|t| python::casefold(t) == wanted)),
                    _ => false,
                }
            }
            Test::Ordered(holds) => python::compare(actual, &coerce(expected, actual)).is_some_and(holds),
            Test::In => match expected {
                Value::String(text) => text.split(',').any(|option| equal(actual, &Value::String(option.to_owned()))),
                Value::Array(options) => options.iter().any(|option| equal(actual, option)),
                Value::Object(options) => options.keys().any(|option| equal(actual, &Value::String(option.clone()))),
                _ => false,
            },
            Test::Like(regex) => !actual.is_null() && regex.is_match(&python::str_of(actual)),
        }
    }
}

/// A filter that passes when any of its values does (every one, for `ne`).
#[derive(Debug, Clone)]
pub struct AnyOf {
    tests: Vec<Filter>,
    every: bool,
}

impl AnyOf {
    /// `[field, op, values]`; `op` is `eq` or one of [`OPERATORS`]. A value
    /// that is not a list is a list of one. Any of no values is none.
    pub fn new(field: &str, op: &str, values: &Value) -> Result<Self, OpError> {
        if op != "eq" && !OPERATORS.contains(&op) {
            return Err(OpError::Value(format!("unknown filter operator {}", python::repr_str(op))));
        }
        let values = match values {
            Value::Array(items) => items.clone(),
            other => vec![other.clone()],
        };
        let tests = values.iter().map(|value| Filter::new(field, op, value)).collect::<Result<_, _>>()?;
        Ok(Self { tests, every: op == "ne" })
    }

    /// Whether `document` passes.
    pub fn matches(&self, document: &Value) -> bool {
        if self.every { self.tests.iter().all(|t| t.matches(document)) } else { self.tests.iter().any(|t| t.matches(document)) }
    }
}

/// Query text read as the stored value's type: `"true"` against a bool,
/// a number against a number; anything else as it is.
fn coerce<'a>(expected: &'a Value, actual: &Value) -> Cow<'a, Value> {
    let Value::String(text) = expected else { return Cow::Borrowed(expected) };
    match actual {
        Value::Bool(_) => match text.to_lowercase().as_str() {
            "true" => Cow::Owned(Value::Bool(true)),
            "false" => Cow::Owned(Value::Bool(false)),
            _ => Cow::Borrowed(expected),
        },
        Value::Number(_) => python::number_from_text(text).map_or(Cow::Borrowed(expected), Cow::Owned),
        _ => Cow::Borrowed(expected),
    }
}

fn equal(actual: &Value, expected: &Value) -> bool {
    python::eq(actual, &coerce(expected, actual))
}

/// json-server's `_like`: a case-insensitive regular expression found anywhere.
fn pattern(value: &Value) -> Result<Regex, OpError> {
    let text = python::str_of(value);
    RegexBuilder::new(&text)
        .case_insensitive(true)
        .size_limit(1 << 20)
        .build()
        .map_err(|e| OpError::Value(format!("not a regular expression: {} ({e})", python::repr_str(&text))))
}

/// Whether `wanted` (casefolded) is in any value of `value`, nested too.
pub fn mentions(value: &Value, wanted: &str) -> bool {
    match value {
        Value::Object(map) => map.values().any(|v| mentions(v, wanted)),
        Value::Array(items) => items.iter().any(|v| mentions(v, wanted)),
        // As json-server reads it: true is the text "true", false is no text.
        Value::Bool(b) => *b && "true".contains(wanted),
        Value::Null => false,
        number @ Value::Number(_) if python::eq(number, &Value::from(0)) => false,
        other => python::casefold(&python::str_of(other)).contains(wanted),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn passes(key: &str, expected: Value, doc: Value) -> bool {
        Filter::keyed(key, &expected).unwrap().matches(&doc)
    }

    #[test]
    fn query_text_compares_as_the_stored_type() {
        assert!(passes("age", json!(["31"]), json!({"age": 31})));
        assert!(passes("age__gte", json!("18"), json!({"age": 31})));
        assert!(!passes("age__lt", json!("abc"), json!({"age": 31})), "text and a number do not order");
        assert!(passes("active", json!("TRUE"), json!({"active": true})));
        assert!(passes("name__icontains", json!("ALI"), json!({"name": "alice"})));
        assert!(passes("tags__contains", json!("b"), json!({"tags": ["a", "b"]})));
        assert!(passes("age__in", json!("1,31"), json!({"age": 31})));
        assert!(passes("name__ne", json!("x"), json!({})), "a missing field passes only ne");
        assert!(!passes("name", json!("x"), json!({})));
        assert!(passes("name__like", json!("^al"), json!({"name": "Alice"})));
        assert!(passes("a__b", json!(1), json!({"a__b": 1})), "an unknown suffix is part of the field");
    }

    #[test]
    fn any_of_passes_on_one_value_and_ne_on_every_value() {
        let any = AnyOf::new("age", "eq", &json!(["1", "31"])).unwrap();
        assert!(any.matches(&json!({"age": 31})));
        assert!(!AnyOf::new("age", "eq", &json!([])).unwrap().matches(&json!({"age": 31})));
        let ne = AnyOf::new("age", "ne", &json!(["1", "31"])).unwrap();
        assert!(!ne.matches(&json!({"age": 31})) && ne.matches(&json!({"age": 2})));
        assert!(matches!(AnyOf::new("a", "near", &json!([])), Err(OpError::Value(_))));
        assert!(matches!(AnyOf::new("a", "like", &json!(["("])), Err(OpError::Value(_))));
    }

    #[test]
    fn mentions_reads_values_as_json_server_does() {
        assert!(mentions(&json!({"a": {"b": "Hello"}}), "ell"));
        assert!(mentions(&json!({"ok": true}), "tru"));
        assert!(!mentions(&json!({"n": 0, "f": false, "z": null}), "0"));
        assert!(mentions(&json!({"n": 105}), "05"));
    }
}
