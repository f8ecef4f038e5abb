//! Who a caller of the sandbox service is, decided in one place: the
//! credentials the service was started with against what a request presents.

use axum::http::{HeaderMap, header};
use sha2::{Digest, Sha256};

/// Header by which a caller holding a token (the gateway) names the tenant a
/// REST block runs for. The block itself has no network, so it cannot set it.
pub(crate) const TENANT: &str = "x-anypath-tenant";

/// The tenant of a caller that names none, and of everyone on an open service.
const DEFAULT_TENANT: &str = "default";

/// What a caller is, as decided by [`Credentials::identify`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Caller {
    /// Presented a known API key: its tenant.
    Keyed(String),
    /// Holds the service's bearer token or the app's trusted token: acts for
    /// the tenant it names in `x-anypath-tenant` (`default` when none).
    TokenHolder(String),
    /// Neither a token nor API keys are configured: everyone is `default`.
    Open,
    /// An unknown API key, or no usable credential where one is required.
    Refused,
}

impl Caller {
    /// The tenant this caller acts for; none when refused.
    pub(crate) fn tenant(self) -> Option<String> {
        match self {
            Self::Keyed(tenant) | Self::TokenHolder(tenant) => Some(tenant),
            Self::Open => Some(DEFAULT_TENANT.to_owned()),
            Self::Refused => None,
        }
    }
}

/// The credentials a service was started with, kept as SHA-256 digests:
/// comparing digests keeps the comparison time independent of a secret's prefix.
pub(crate) struct Credentials {
    /// `--token`: required of `/v1/exec` callers; its holder may name a tenant.
    token: Option<[u8; 32]>,
    /// The app's own token (`anypath up` makes one per process): its holder may name a tenant.
    trusted: Option<[u8; 32]>,
    /// `--api-keys`: each key's digest and tenant.
    api_keys: Vec<([u8; 32], String)>,
    /// REST blocks ask for what every other route asks for (any token or
    /// known key), not the service's token alone: `anypath up`, whose token
    /// and keys are the app's.
    exec_like_every_route: bool,
}

impl Credentials {
    pub(crate) fn new(token: Option<&str>, trusted: Option<&str>, api_keys: &[(String, String)], exec_like_every_route: bool) -> Self {
        Self {
            token: token.map(digest),
            trusted: trusted.map(digest),
            api_keys: api_keys.iter().map(|(key, tenant)| (digest(bare_key(key)), tenant.clone())).collect(),
            exec_like_every_route,
        }
    }

    /// The decision table: an API key decides alone (known: its tenant;
    /// unknown: refused); else a bearer holding either token acts for the
    /// tenant it names; else the service is open only when it has neither a
    /// token nor keys. Without a token, naming a tenant counts for nothing.
    pub(crate) fn identify(&self, headers: &HeaderMap) -> Caller {
        if let Some(presented) = headers.get("x-api-key").and_then(|v| v.to_str().ok()) {
            if self.is_open() {
                // E2B's SDKs always send a key: in open mode any key will do.
                return Caller::Open;
            }
            let as_key = digest(bare_key(presented));
            if let Some((_, tenant)) = self.api_keys.iter().find(|(key, _)| *key == as_key) {
                return Caller::Keyed(tenant.clone());
            }
            // The service's token as a key: E2B's SDKs send their credential
            // only as `X-API-Key`, so an app guarded by its token alone still
            // takes them (`e2b_<token>`).
            if self.token.is_some() && (self.token == Some(as_key) || self.token == Some(digest(presented))) {
                return Caller::TokenHolder(named_tenant(headers).unwrap_or(DEFAULT_TENANT).to_owned());
            }
            return Caller::Refused;
        }
        let bearer = bearer_digest(headers);
        let holds_token = bearer.is_some() && (bearer == self.token || bearer == self.trusted);
        if holds_token {
            return Caller::TokenHolder(named_tenant(headers).unwrap_or(DEFAULT_TENANT).to_owned());
        }
        if self.is_open() { Caller::Open } else { Caller::Refused }
    }

    /// The caller presenting `token` the way Jupyter's clients do (an
    /// `Authorization: token` or `Bearer` header, or a `?token=` query): a
    /// tenant's API key is its tenant, either bearer token acts for the
    /// tenant named in `x-anypath-tenant`, and an open service takes anyone.
    pub(crate) fn identify_token(&self, token: Option<&str>, headers: &HeaderMap) -> Caller {
        if let Some(token) = token.filter(|t| !t.is_empty()) {
            let as_key = digest(bare_key(token));
            if let Some((_, tenant)) = self.api_keys.iter().find(|(key, _)| *key == as_key) {
                return Caller::Keyed(tenant.clone());
            }
            let as_token = Some(digest(token));
            if as_token == self.token || as_token == self.trusted {
                return Caller::TokenHolder(named_tenant(headers).unwrap_or(DEFAULT_TENANT).to_owned());
            }
        }
        if self.is_open() { Caller::Open } else { Caller::Refused }
    }

    /// Neither a token nor keys are configured: every outside caller is the
    /// default tenant (the app's own trusted token may still name others).
    fn is_open(&self) -> bool {
        self.token.is_none() && self.api_keys.is_empty()
    }

    /// Whether the caller may run REST blocks (`/v1/exec`, `/v1/admission`).
    /// By default: it holds the service's bearer token, when one is set.
    /// When blocks are guarded like every route: it is any caller
    /// [`Self::identify`] accepts (a token, the app's trusted token, a
    /// known key; anyone on an open service).
    pub(crate) fn may_execute(&self, headers: &HeaderMap) -> bool {
        if self.exec_like_every_route {
            return self.identify(headers) != Caller::Refused;
        }
        self.token.is_none_or(|expected| bearer_digest(headers) == Some(expected))
    }
}

/// A key without E2B's `e2b_` prefix, which E2B's SDKs require of the keys
/// they send: a key is the same with it or without it.
fn bare_key(key: &str) -> &str {
    key.strip_prefix("e2b_").unwrap_or(key)
}

fn digest(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

/// Digest of the presented bearer token.
fn bearer_digest(headers: &HeaderMap) -> Option<[u8; 32]> {
    headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer ")).map(digest)
}

/// The tenant a token holder names in `x-anypath-tenant`, when valid.
fn named_tenant(headers: &HeaderMap) -> Option<&str> {
    headers.get(TENANT).and_then(|v| v.to_str().ok()).filter(|name| anypath_interpreter::names::tenant(name).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, value.parse().expect("a header value"));
        }
        map
    }

    #[test]
    fn the_decision_table() {
        let keys = [("k1".to_owned(), "alice".to_owned())];
        let guarded = Credentials::new(Some("service"), Some("app"), &keys, false);
        let cases: &[(&[(&'static str, &str)], Caller)] = &[
            (&[("x-api-key", "k1")], Caller::Keyed("alice".into())),
            (&[("x-api-key", "k1"), ("x-anypath-tenant", "bob")], Caller::Keyed("alice".into())),
            (&[("x-api-key", "nope"), ("authorization", "Bearer service")], Caller::Refused),
            (&[("x-api-key", "e2b_service")], Caller::TokenHolder("default".into())),
            (&[("x-api-key", "e2b_app")], Caller::Refused),
            (&[("authorization", "Bearer service"), ("x-anypath-tenant", "bob")], Caller::TokenHolder("bob".into())),
            (&[("authorization", "Bearer app")], Caller::TokenHolder("default".into())),
            (&[("authorization", "Bearer app"), ("x-anypath-tenant", "../x")], Caller::TokenHolder("default".into())),
            (&[("authorization", "Bearer wrong"), ("x-anypath-tenant", "bob")], Caller::Refused),
            (&[("x-anypath-tenant", "bob")], Caller::Refused),
        ];
        for (presented, expected) in cases {
            assert_eq!(&guarded.identify(&headers(presented)), expected, "{presented:?}");
        }
        let e2b_prefixed = [("x-api-key", "e2b_k1")];
        assert_eq!(guarded.identify(&headers(&e2b_prefixed)), Caller::Keyed("alice".into()), "E2B's key prefix is accepted");
        assert_eq!(guarded.identify(&headers(&[("x-api-key", "e2b_nope")])), Caller::Refused);
        let open = Credentials::new(None, Some("app"), &[], false);
        assert_eq!(open.identify(&headers(&[("x-anypath-tenant", "bob")])), Caller::Open, "naming a tenant without a token counts for nothing");
        assert_eq!(open.identify(&headers(&[("x-api-key", "e2b_0123")])), Caller::Open, "in open mode any key is the default tenant");
        assert_eq!(open.identify(&headers(&[("authorization", "Bearer app"), ("x-anypath-tenant", "bob")])), Caller::TokenHolder("bob".into()));
        assert_eq!(guarded.identify_token(Some("k1"), &headers(&[])), Caller::Keyed("alice".into()), "a key as a Jupyter token");
        assert_eq!(guarded.identify_token(Some("app"), &headers(&[("x-anypath-tenant", "bob")])), Caller::TokenHolder("bob".into()));
        assert_eq!(guarded.identify_token(Some("nope"), &headers(&[])), Caller::Refused);
        assert_eq!(guarded.identify_token(None, &headers(&[])), Caller::Refused);
        assert_eq!(open.identify_token(None, &headers(&[])), Caller::Open);
        assert!(open.may_execute(&headers(&[])));
        assert!(guarded.may_execute(&headers(&[("authorization", "Bearer service")])));
        assert!(!guarded.may_execute(&headers(&[("authorization", "Bearer app")])), "the app's token alone does not open /v1/exec");
    }

    /// `anypath up` with the app's `auth_token` and `api_keys`: REST blocks
    /// take the same credentials as the interpreter, the app's own
    /// components' trusted token included; an open app stays open.
    #[test]
    fn blocks_guarded_like_every_route() {
        let keys = [("k1".to_owned(), "alice".to_owned())];
        let app = Credentials::new(Some("auth"), Some("trusted"), &keys, true);
        assert!(app.may_execute(&headers(&[("authorization", "Bearer auth")])));
        assert!(app.may_execute(&headers(&[("authorization", "Bearer trusted"), ("x-anypath-tenant", "bob")])));
        assert!(app.may_execute(&headers(&[("x-api-key", "k1")])));
        assert!(!app.may_execute(&headers(&[])));
        assert!(!app.may_execute(&headers(&[("authorization", "Bearer wrong")])));
        assert!(!app.may_execute(&headers(&[("x-api-key", "nope")])));
        let keys_only = Credentials::new(None, Some("trusted"), &keys, true);
        assert!(!keys_only.may_execute(&headers(&[])), "keys alone guard blocks too");
        assert!(keys_only.may_execute(&headers(&[("x-api-key", "k1")])));
        assert!(keys_only.may_execute(&headers(&[("authorization", "Bearer trusted")])));
        let open = Credentials::new(None, Some("trusted"), &[], true);
        assert!(open.may_execute(&headers(&[])), "an app with no credentials stays open");
    }
}
