//! Names of tenants and collections: they become key prefixes, so only a
//! small alphabet is accepted and nothing can reach outside a tenant.

use crate::error::RestError;

/// Longest tenant or collection name.
pub const MAX_NAME_LEN: usize = 64;

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
    if valid(name) {
        Ok(name)
    } else {
        Err(RestError::BadRequest(format!(
            "collection name {name:?} must be 1-{MAX_NAME_LEN} characters of A-Z, a-z, 0-9, '_' or '-'"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
