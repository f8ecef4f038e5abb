//! Key-value keys of one tenant collection. Names are validated first, so no
//! key can leave its tenant's namespace.

use anypath_rest::{RestError, names};

/// The keys under `anypath/v2/t/<tenant>/c/<collection>/`.
#[derive(Clone)]
pub struct CollectionKeys {
    tenant_prefix: String,
    prefix: String,
}

impl CollectionKeys {
    /// Fails with a 400 for a bad tenant or collection name.
    pub fn new(tenant: &str, collection: &str) -> Result<Self, RestError> {
        let tenant_prefix = format!("anypath/v2/t/{}/", names::tenant(tenant)?);
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

    /// The decision of a multi-collection transaction of this tenant.
    pub fn transaction(&self, tx: &str) -> String {
        format!("{}tx/{tx}", self.tenant_prefix)
    }

    /// The creation ticket: whoever takes 1 writes the first index.
    pub fn ticket(&self) -> String {
        format!("{}ticket", self.prefix)
    }
}
