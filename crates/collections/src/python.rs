//! Python's semantics over JSON values: equality, ordering, `str()`,
//! `repr()`, truthiness, `int()`/`float()` of text and `json.dumps`. Blocks
//! were written against a store in Python, and a REST client's filters and
//! sorts must keep meaning what they meant there.

use std::cmp::Ordering;
use std::fmt::Write;

use serde_json::{Number, Value};

/// A JSON number as Python holds it: an int, or a float.
#[derive(Debug, Clone, Copy)]
enum Num {
    Int(i128),
    Float(f64),
}

/// The number a value stands for in arithmetic comparisons: numbers, and
/// `True`/`False` as 1 and 0 (a bool is an int in Python).
fn number(value: &Value) -> Option<Num> {
    match value {
        Value::Bool(b) => Some(Num::Int(i128::from(*b))),
        Value::Number(n) => Some(from_number(n)),
        _ => None,
    }
}

fn from_number(n: &Number) -> Num {
    if let Some(i) = n.as_i64() {
        Num::Int(i128::from(i))
    } else if let Some(u) = n.as_u64() {
        Num::Int(i128::from(u))
    } else {
        Num::Float(n.as_f64().unwrap_or(f64::NAN))
    }
}

fn compare_numbers(a: Num, b: Num) -> Option<Ordering> {
    match (a, b) {
        (Num::Int(a), Num::Int(b)) => Some(a.cmp(&b)),
        (Num::Int(a), Num::Float(b)) => (a as f64).partial_cmp(&b),
        (Num::Float(a), Num::Int(b)) => a.partial_cmp(&(b as f64)),
        (Num::Float(a), Num::Float(b)) => a.partial_cmp(&b),
    }
}

/// Python's `a == b`.
pub fn eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::String(a), Value::String(b)) => a == b,
        (Value::Array(a), Value::Array(b)) => a.len() == b.len() && a.iter().zip(b).all(|(x, y)| eq(x, y)),
        (Value::Object(a), Value::Object(b)) => a.len() == b.len() && a.iter().all(|(k, v)| b.get(k).is_some_and(|w| eq(v, w))),
        _ => match (number(a), number(b)) {
            (Some(x), Some(y)) => compare_numbers(x, y) == Some(Ordering::Equal),
            _ => false,
        },
    }
}

/// Python's ordering of `a` and `b`; `None` where Python raises `TypeError`
/// (or, for NaN, where every comparison is false).
pub fn compare(a: &Value, b: &Value) -> Option<Ordering> {
    match (a, b) {
        (Value::String(a), Value::String(b)) => Some(a.cmp(b)),
        (Value::Array(a), Value::Array(b)) => {
            // The first pair that differs decides; then the shorter list is less.
            for (x, y) in a.iter().zip(b) {
                if !eq(x, y) {
                    return compare(x, y);
                }
            }
            Some(a.len().cmp(&b.len()))
        }
        _ => compare_numbers(number(a)?, number(b)?),
    }
}

/// Python's truthiness of a JSON value.
pub fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => match from_number(n) {
            Num::Int(i) => i != 0,
            Num::Float(f) => f != 0.0,
        },
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

/// The name of a value's Python type, for error messages.
pub fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "NoneType",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "int",
        Value::String(_) => "str",
        Value::Array(_) => "list",
        Value::Object(_) => "dict",
    }
}

/// Python's `repr(float)`: the shortest digits that read back, in fixed
/// notation for exponents from -4 to 15 and scientific otherwise.
pub fn float_repr(f: f64) -> String {
    if f.is_nan() {
        return "nan".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf".into() } else { "-inf".into() };
    }
    let scientific = format!("{f:e}");
    let Some((mantissa, exponent)) = scientific.split_once('e') else { return scientific };
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let (sign, mantissa) = mantissa.strip_prefix('-').map_or(("", mantissa), |m| ("-", m));
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    if (-4..16).contains(&exponent) {
        let point = exponent + 1;
        let text = if point <= 0 {
            format!("0.{}{digits}", "0".repeat(point.unsigned_abs() as usize))
        } else if point as usize >= digits.len() {
            format!("{digits}{}.0", "0".repeat(point as usize - digits.len()))
        } else {
            let (whole, fraction) = digits.split_at(point as usize);
            format!("{whole}.{fraction}")
        };
        format!("{sign}{text}")
    } else {
        let mantissa = if digits.len() > 1 { format!("{}.{}", &digits[..1], &digits[1..]) } else { digits };
        let exponent_sign = if exponent < 0 { '-' } else { '+' };
        format!("{sign}{mantissa}e{exponent_sign}{:02}", exponent.unsigned_abs())
    }
}

fn number_text(n: &Number) -> String {
    match from_number(n) {
        Num::Int(i) => i.to_string(),
        Num::Float(f) => float_repr(f),
    }
}

/// Python's `str(value)`.
pub fn str_of(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => repr(other),
    }
}

/// Python's `repr(value)`.
pub fn repr(value: &Value) -> String {
    let mut out = String::new();
    write_repr(&mut out, value);
    out
}

fn write_repr(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("None"),
        Value::Bool(true) => out.push_str("True"),
        Value::Bool(false) => out.push_str("False"),
        Value::Number(n) => out.push_str(&number_text(n)),
        Value::String(s) => out.push_str(&repr_str(s)),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_repr(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(&repr_str(key));
                out.push_str(": ");
                write_repr(out, item);
            }
            out.push('}');
        }
    }
}

/// Python's `repr(str)`: single quotes unless the text holds one and no double quote.
pub fn repr_str(text: &str) -> String {
    let quote = if text.contains('\'') && !text.contains('"') { '"' } else { '\'' };
    let mut out = String::with_capacity(text.len() + 2);
    out.push(quote);
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if (0x80..0xa0).contains(&(c as u32)) => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

/// Python's `str.casefold()`, as near as the standard library goes.
pub fn casefold(text: &str) -> String {
    text.to_lowercase()
}

/// Python's `int(text)` for text: surrounding whitespace, a sign, and
/// single underscores between digits allowed.
pub fn parse_int(text: &str) -> Option<i128> {
    let trimmed = text.trim();
    let (negative, digits) = match trimmed.as_bytes().first() {
        Some(b'-') => (true, &trimmed[1..]),
        Some(b'+') => (false, &trimmed[1..]),
        _ => (false, trimmed),
    };
    if digits.is_empty() || digits.starts_with('_') || digits.ends_with('_') || digits.contains("__") {
        return None;
    }
    let plain: String = digits.chars().filter(|c| *c != '_').collect();
    if !plain.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let magnitude: i128 = plain.parse().ok()?;
    Some(if negative { -magnitude } else { magnitude })
}

/// Python's `float(text)` for text: decimal or scientific notation, `inf`,
/// `infinity` and `nan` in any case, surrounding whitespace allowed.
pub fn parse_float(text: &str) -> Option<f64> {
    let trimmed = text.trim();
    if trimmed.contains("__") || trimmed.starts_with('_') || trimmed.ends_with('_') {
        return None;
    }
    let plain: String = trimmed.chars().filter(|c| *c != '_').collect();
    plain.parse().ok()
}

/// The JSON value Python's `int()` or `float()` of `text` makes, if either reads it.
pub fn number_from_text(text: &str) -> Option<Value> {
    if let Some(i) = parse_int(text) {
        if let Ok(small) = i64::try_from(i) {
            return Some(Value::from(small));
        }
        return Number::from_f64(i as f64).map(Value::Number);
    }
    parse_float(text).and_then(Number::from_f64).map(Value::Number)
}

/// Python's `json.dumps(value, sort_keys=True)`: `", "` and `": "`
/// separators, keys sorted, text escaped to ASCII.
pub fn dumps_sorted(value: &Value) -> String {
    let mut out = String::new();
    write_dumps(&mut out, value);
    out
}

fn write_dumps(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => match from_number(n) {
            Num::Int(i) => out.push_str(&i.to_string()),
            Num::Float(f) if f.is_finite() => out.push_str(&float_repr(f)),
            Num::Float(f) if f.is_nan() => out.push_str("NaN"),
            Num::Float(f) => out.push_str(if f > 0.0 { "Infinity" } else { "-Infinity" }),
        },
        Value::String(s) => write_ascii_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_dumps(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_ascii_string(out, key);
                out.push_str(": ");
                write_dumps(out, &map[key]);
            }
            out.push('}');
        }
    }
}

fn write_ascii_string(out: &mut String, text: &str) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if c.is_ascii() && !c.is_ascii_control() => out.push(c),
            c => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn equality_and_order_follow_python() {
        assert!(eq(&json!(1), &json!(1.0)));
        assert!(eq(&json!(true), &json!(1)), "a bool is an int");
        assert!(!eq(&json!("1"), &json!(1)));
        assert!(eq(&json!([1, "a"]), &json!([1.0, "a"])));
        assert_eq!(compare(&json!("b"), &json!("a")), Some(Ordering::Greater));
        assert_eq!(compare(&json!(2), &json!(10.5)), Some(Ordering::Less));
        assert_eq!(compare(&json!("2"), &json!(10)), None, "str and int do not order");
        assert_eq!(compare(&json!([1, 2]), &json!([1, 3])), Some(Ordering::Less));
        assert_eq!(compare(&json!({}), &json!({})), None);
    }

    #[test]
    fn text_forms_match_python() {
        assert_eq!(float_repr(1.0), "1.0");
        assert_eq!(float_repr(0.1), "0.1");
        assert_eq!(float_repr(1e16), "1e+16");
        assert_eq!(float_repr(1.5e-5), "1.5e-05");
        assert_eq!(float_repr(123456.5), "123456.5");
        assert_eq!(float_repr(-0.0001), "-0.0001");
        assert_eq!(str_of(&json!(["a", 1, true, null, {"k": 2.5}])), "['a', 1, True, None, {'k': 2.5}]");
        assert_eq!(repr_str("it's"), "\"it's\"");
        assert_eq!(dumps_sorted(&json!({"b": [1, "é"], "a": false})), "{\"a\": false, \"b\": [1, \"\\u00e9\"]}");
    }

    #[test]
    fn numbers_read_from_text_as_python_reads_them() {
        assert_eq!(parse_int(" +1_000 "), Some(1000));
        assert_eq!(parse_int("1__0"), None);
        assert_eq!(parse_int("3.0"), None);
        assert_eq!(number_from_text("3.5"), Some(json!(3.5)));
        assert_eq!(number_from_text("1e3"), Some(json!(1000.0)));
        assert_eq!(number_from_text("abc"), None);
        assert!(truthy(&json!([0])) && !truthy(&json!(0.0)) && !truthy(&json!("")));
    }
}
