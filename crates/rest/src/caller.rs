//! Who is calling: the bearer token check and the tenant a request is bound
//! to (its id follows [`anypath_wire::request_id`]). Shared by every public
//! component (the gateway and the agent), so both bind a request to a
//! tenant the same way.

use crate::RestError;
use crate::names;

/// The tenant of a request that names none.
pub const DEFAULT_TENANT: &str = "default";

/// An `api_keys` entry that is not `key:tenant`. The entry itself is not
/// kept: it holds a secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("entry {position} of the API key list is not key:tenant (a tenant is 1-64 characters of A-Z, a-z, 0-9, '_' or '-')")]
pub struct ApiKeysError {
    /// 1-based position of the entry in the list.
    pub position: usize,
}

/// Parses `key:tenant` pairs separated by commas (the `api_keys` variable,
/// `--api-keys`). Blank entries are skipped; any other entry that is not a
/// non-empty key and a valid tenant refuses the whole list, so a typo never
/// silently drops a key.
pub fn parse_api_keys(text: &str) -> Result<Vec<(String, String)>, ApiKeysError> {
    text.split(',')
        .map(str::trim)
        .enumerate()
        .filter(|(_, entry)| !entry.is_empty())
        .map(|(index, entry)| match entry.split_once(':') {
            Some((key, tenant)) if !key.trim().is_empty() && names::tenant(tenant.trim()).is_ok() => {
                Ok((key.trim().to_owned(), tenant.trim().to_owned()))
            }
            _ => Err(ApiKeysError { position: index + 1 }),
        })
        .collect()
}

/// Checks `Authorization: Bearer <token>` when a token is configured.
pub fn authorise(auth_token: &str, authorization: Option<&str>) -> Result<(), RestError> {
    if auth_token.is_empty() {
        return Ok(());
    }
    match authorization.and_then(|v| v.strip_prefix("Bearer ")) {
        Some(token) if constant_time_eq(token.as_bytes(), auth_token.as_bytes()) => Ok(()),
        _ => Err(RestError::Unauthorized("missing or wrong bearer token".into())),
    }
}

/// The tenant: the one an `X-API-Key` maps to (an unknown key is refused),
/// else the `X-Session-Id`, else [`DEFAULT_TENANT`]. A tenant an API key
/// maps to is reserved for that key: a session id naming it is refused, so
/// the key is what protects its data.
pub fn tenant(api_keys: &[(String, String)], api_key: Option<&str>, session_id: Option<&str>) -> Result<String, RestError> {
    if let Some(key) = api_key {
        return api_keys
            .iter()
            .find(|(k, _)| constant_time_eq(k.as_bytes(), key.as_bytes()))
            .map(|(_, tenant)| tenant.clone())
            .ok_or_else(|| RestError::Unauthorized("unknown API key".into()));
    }
    let tenant = names::tenant(session_id.unwrap_or(DEFAULT_TENANT))?;
    if api_keys.iter().any(|(_, keyed)| keyed == tenant) {
        return Err(RestError::Unauthorized(format!("tenant {tenant:?} is bound to an API key: send it in X-API-Key")));
    }
    Ok(tenant.to_owned())
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_bind_tenants_and_tokens_are_checked() {
        assert_eq!(parse_api_keys(" k1:alice, k2:bob ,broken"), Err(ApiKeysError { position: 3 }), "a typo refuses the list");
        assert_eq!(parse_api_keys("k1:alice,k2:b@d"), Err(ApiKeysError { position: 2 }), "so does a tenant that cannot be one");
        let keys = parse_api_keys(" k1:alice, k2:bob ,").expect("blank entries are skipped");
        assert_eq!(tenant(&keys, Some("k2"), Some("x")).ok().as_deref(), Some("bob"));
        assert!(tenant(&keys, Some("nope"), None).is_err());
        assert_eq!(tenant(&keys, None, None).ok().as_deref(), Some(DEFAULT_TENANT));
        assert_eq!(tenant(&keys, None, Some("carol")).ok().as_deref(), Some("carol"));
        assert!(tenant(&keys, None, Some("alice")).is_err(), "a keyed tenant needs its key");
        assert!(authorise("", None).is_ok());
        assert!(authorise("t", Some("Bearer t")).is_ok());
        assert!(authorise("t", Some("Bearer u")).is_err() && authorise("t", None).is_err());
    }
}
