//! What a document id may be, and the key it is stored under.

use serde_json::Value;

use crate::error::OpError;
use crate::python;

/// The largest integer every JSON reader holds exactly (2^53 - 1).
pub const MAX_INT_ID: i64 = (1 << 53) - 1;
/// The longest string id, in characters.
pub const MAX_ID_CHARS: usize = 256;
/// String ids a path cannot reach: a URL resolver removes the first two, the third is the search route.
const RESERVED_IDS: [&str; 3] = [".", "..", "search"];

/// An id as a block may pass it: an int or a str, never a bool or a float.
pub fn check(id: &Value) -> Result<(), OpError> {
    match id {
        Value::String(_) => Ok(()),
        Value::Number(n) if n.is_i64() || n.is_u64() => Ok(()),
        other => Err(OpError::Type(format!("id must be an int or a str, not {}", python::type_name(other)))),
    }
}

/// The key of an id: path segments arrive as text, so `"7"` finds id 7.
pub fn key(id: &Value) -> Result<String, OpError> {
    check(id)?;
    Ok(python::str_of(id))
}

/// Refuses an id that may not name a new document: out of JSON's exact
/// integer range, or text no path segment can reach.
pub fn check_new(id: &Value) -> Result<(), OpError> {
    check(id)?;
    match id {
        Value::Number(n) => {
            let in_range = n.as_i64().is_some_and(|i| i.abs() <= MAX_INT_ID);
            if !in_range {
                return Err(OpError::Value(format!("id {n} is out of range: an integer id lies within ±(2^53 - 1)")));
            }
        }
        Value::String(text) if !reachable(text) => {
            return Err(OpError::Value(format!(
                "id {} is not allowed: a string id has 1 to {MAX_ID_CHARS} characters, no control characters, and is not '.', '..' or 'search'",
                python::repr_str(text)
            )));
        }
        _ => {}
    }
    Ok(())
}

/// Whether a string id can be named by a path segment.
pub fn reachable(text: &str) -> bool {
    let length = text.chars().count();
    length > 0 && length <= MAX_ID_CHARS && !RESERVED_IDS.contains(&text) && !text.chars().any(is_control)
}

fn is_control(c: char) -> bool {
    let code = c as u32;
    code < 0x20 || (0x7f..=0x9f).contains(&code)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ids_are_ints_or_reachable_text() {
        assert_eq!(key(&json!(7)).unwrap(), "7");
        assert_eq!(key(&json!("7")).unwrap(), "7");
        assert!(matches!(key(&json!(true)), Err(OpError::Type(_))));
        assert!(matches!(key(&json!(7.5)), Err(OpError::Type(_))));
        assert!(check_new(&json!(MAX_INT_ID)).is_ok());
        assert!(matches!(check_new(&json!(MAX_INT_ID + 1)), Err(OpError::Value(_))));
        for bad in ["", ".", "..", "search", "a\u{7}b"] {
            assert!(matches!(check_new(&json!(bad)), Err(OpError::Value(_))), "{bad:?}");
        }
        assert!(check_new(&json!("x".repeat(MAX_ID_CHARS))).is_ok());
    }
}
