//! Key-value keys of one tenant collection. Names are validated first, so no
//! key can leave its tenant's namespace.

use anypath_rest::{RestError, names};

/// The keys under `anypath/v2/t/<tenant>/c/<collection>/`.
pub struct CollectionKeys {
    prefix: String,
}

impl CollectionKeys {
    /// Fails with a 400 for a bad tenant or collection name.
    pub fn new(tenant: &str, collection: &str) -> Result<Self, RestError> {
        let prefix = format!("anypath/v2/t/{}/c/{}/", names::tenant(tenant)?, names::collection(collection)?);
        Ok(Self { prefix })
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

    /// The creation ticket: whoever takes 1 writes the first index.
    pub fn ticket(&self) -> String {
        format!("{}ticket", self.prefix)
    }
}
