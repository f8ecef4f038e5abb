//! Names of tenants and collections: they become key prefixes, so only a
//! small alphabet is accepted and nothing can reach outside a tenant.
//! Document ids: any JSON integer, or a string that a path segment can name.

use serde_json::Value;

use crate::error::RestError;

/// Longest tenant or collection name.
pub const MAX_NAME_LEN: usize = 64;

/// First path segments the gateway answers itself: never a collection.
pub const RESERVED_COLLECTIONS: &[&str] = &["healthz", "readyz", "docs", "redoc", "run"];

/// Longest string id, in characters.
pub const MAX_ID_CHARS: usize = 256;

/// String ids no item path can reach: URL resolvers remove `.` and `..`
/// segments, and `/<collection>/search` is the search route.
pub const RESERVED_IDS: &[&str] = &[".", "..", "search"];

/// Largest integer id a client may choose: 2^53 - 1, the largest integer every
/// JSON reader holds exactly; assigned ids count on from the highest without overflow.
pub const MAX_INT_ID: i64 = (1 << 53) - 1;

/// The id rule in words, for error messages and documentation.
pub const ID_RULE: &str = "an id is an integer from -(2^53 - 1) to 2^53 - 1, or a string of 1 to 256 characters \
                           without control characters that is not '.', '..' or 'search'";

fn valid(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        && !name.starts_with('-')
}

/// Checks a tenant id (from `X-Session-ID` or an API key).
pub fn tenant(name: &str) -> Result<&str, RestError> {
    if valid(name) {
        Ok(name)
    } else {
        Err(RestError::BadRequest(format!(
            "tenant must be 1-{MAX_NAME_LEN} characters of A-Z, a-z, 0-9, '_' or '-'"
        )))
    }
}

/// Checks a collection name (the first path segment).
pub fn collection(name: &str) -> Result<&str, RestError> {
    if RESERVED_COLLECTIONS.contains(&name) {
        return Err(RestError::BadRequest(format!("{name:?} is a reserved path, not a collection")));
    }
    if valid(name) {
        Ok(name)
    } else {
        Err(RestError::BadRequest(format!(
            "collection name {name:?} must be 1-{MAX_NAME_LEN} characters of A-Z, a-z, 0-9, '_' or '-'"
        )))
    }
}

/// Whether a string id can be named by a path segment (see [`ID_RULE`]).
pub fn reachable_id(id: &str) -> bool {
    let chars = id.chars().count();
    (1..=MAX_ID_CHARS).contains(&chars) && !RESERVED_IDS.contains(&id) && !id.chars().any(char::is_control)
}

/// Checks the `id` of a JSON object body: absent or null (one is assigned),
/// an integer, or a reachable string. Anything else is a 400 before a block
/// runs. JSON numbers do not tell `7.0` from `7`: an integral id becomes an integer.
pub fn body_id(body: Option<&mut Value>) -> Result<(), RestError> {
    let Some(id) = body.and_then(|b| b.get_mut("id")) else { return Ok(()) };
    if let Some(integral) = id.as_f64().filter(|f| f.fract() == 0.0 && f.abs() <= MAX_INT_ID as f64) {
        // Up to 2^53 every integral double is exact, so the conversion loses nothing.
        *id = Value::from(integral as i64);
    }
    let valid = match &*id {
        Value::Null => true,
        Value::Number(n) => n.as_i64().is_some_and(|i| i.abs() <= MAX_INT_ID),
        Value::String(s) => reachable_id(s),
        _ => false,
    };
    if valid { Ok(()) } else { Err(RestError::BadRequest(format!("invalid id {id}: {ID_RULE}"))) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reserved_paths_are_not_collections() {
        for name in RESERVED_COLLECTIONS {
            assert_eq!(collection(name).unwrap_err().status(), 400, "{name}");
        }
    }

    #[test]
    fn body_ids_follow_the_id_rule() {
        for mut good in [json!({}), json!({"id": null}), json!({"id": 7}), json!({"id": -3}), json!({"id": MAX_INT_ID}), json!({"id": "café"}),
                     json!({"id": "a/b"}), json!({"id": " "}), json!({"id": "../x"}), json!({"id": "x".repeat(256)})] {
            let before = good.clone();
            assert_eq!(body_id(Some(&mut good)), Ok(()), "{good}");
            assert_eq!(good, before, "a valid id is left as it is");
        }
        for mut bad in [json!({"id": ""}), json!({"id": "a\u{b}b"}), json!({"id": "\u{85}"}), json!({"id": "."}),
                    json!({"id": ".."}), json!({"id": "search"}), json!({"id": "x".repeat(257)}), json!({"id": 1.5}),
                    json!({"id": 1e300}), json!({"id": MAX_INT_ID + 1}), json!({"id": u64::MAX}), json!({"id": -MAX_INT_ID - 1}), json!({"id": true}), json!({"id": [1]}), json!({"id": {}})] {
            assert_eq!(body_id(Some(&mut bad)).map_err(|e| e.status()), Err(400), "{bad}");
        }
        let mut integral = json!({"id": -42.0});
        assert_eq!(body_id(Some(&mut integral)), Ok(()));
        assert!(integral["id"].is_i64(), "{integral}");
        assert_eq!(body_id(Some(&mut json!([{"id": ""}]))), Ok(()), "only an object body carries an id");
        assert_eq!(body_id(None), Ok(()));
    }

    #[test]
    fn names_outside_the_alphabet_are_refused() {
        for bad in ["", "../etc", "a/b", "a b", "-x", "é", &"x".repeat(65), "a\0"] {
            assert!(collection(bad).is_err(), "{bad:?}");
            assert!(tenant(bad).is_err(), "{bad:?}");
        }
        for good in ["members", "order_items", "T-1", &"x".repeat(64)] {
            assert_eq!(collection(good), Ok(good));
        }
    }
}
