//! The store component's keys of one tenant's data. Names are validated
//! first, so no key can leave its tenant's namespace.
//!
//! On Redis the tenant segment is a hash tag (`{acme}`): every key of a
//! tenant lands in one hash slot, so one server-side script may touch several
//! of its collections on Redis Cluster too. Spin key-value keeps the plain
//! segment its existing data was written with.

use crate::{RestError, names};

/// How the tenant segment of a key is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyStyle {
    /// `anypath/v2/t/acme/...` (Spin key-value).
    Plain,
    /// `anypath/v2/t/{acme}/...` (Redis: one hash slot per tenant).
    HashTagged,
}

/// `anypath/v2/t/<tenant>/`, the prefix of every key of `tenant`; a 400 for a bad name.
pub fn tenant_prefix(tenant: &str, style: KeyStyle) -> Result<String, RestError> {
    let tenant = names::tenant(tenant)?;
    Ok(match style {
        KeyStyle::Plain => format!("anypath/v2/t/{tenant}/"),
        KeyStyle::HashTagged => format!("anypath/v2/t/{{{tenant}}}/"),
    })
}

/// The keys under `anypath/v2/t/<tenant>/c/<collection>/`.
#[derive(Clone)]
pub struct CollectionKeys {
    tenant_prefix: String,
    prefix: String,
}

impl CollectionKeys {
    /// Fails with a 400 for a bad tenant or collection name.
    pub fn new(tenant: &str, collection: &str, style: KeyStyle) -> Result<Self, RestError> {
        let tenant_prefix = tenant_prefix(tenant, style)?;
        let prefix = format!("{tenant_prefix}c/{}/", names::collection(collection)?);
        Ok(Self { tenant_prefix, prefix })
    }

    /// The index: version, highest integer id, id -> document tag.
    pub fn index(&self) -> String {
        format!("{}index", self.prefix)
    }

    /// One immutable document value.
    pub fn document(&self, tag: &str) -> String {
        format!("{}d/{tag}", self.prefix)
    }

    /// The counter reserved ids come from.
    pub fn next_id(&self) -> String {
        format!("{}next-id", self.prefix)
    }

    /// The decision of a multi-collection transaction of this tenant (Spin key-value only).
    pub fn transaction(&self, tx: &str) -> String {
        format!("{}tx/{tx}", self.tenant_prefix)
    }

    /// The creation ticket: whoever takes 1 writes the first index (Spin key-value only).
    pub fn ticket(&self) -> String {
        format!("{}ticket", self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_keys_of_a_tenant_share_one_hash_tag() {
        let a = CollectionKeys::new("acme", "users", KeyStyle::HashTagged).unwrap();
        let b = CollectionKeys::new("acme", "orders", KeyStyle::HashTagged).unwrap();
        for key in [a.index(), a.document("x-0"), a.next_id(), b.index()] {
            assert!(key.starts_with("anypath/v2/t/{acme}/"), "{key}");
        }
        assert_eq!(CollectionKeys::new("acme", "users", KeyStyle::Plain).unwrap().index(), "anypath/v2/t/acme/c/users/index");
        assert!(CollectionKeys::new("a}b", "users", KeyStyle::HashTagged).is_err(), "a brace cannot reach the key");
    }
}
