//! What a tenant's collections look like, for the planner's prompt: count,
//! a few ids and the field types of a few documents. Kept small on purpose.

use std::collections::BTreeMap;

use anypath_rest::DescribeRequest;
use anypath_rest::prompt::{CollectionSummary, type_name};
use anypath_rest::store_keys::CollectionKeys;
use serde_json::Value;

use crate::backend::Backend;
use crate::error::StoreError;
use crate::indexes;

/// Ids and documents sampled per collection.
const SAMPLES: usize = 3;

/// A summary of each named collection, in request order.
pub fn describe(backend: &dyn Backend, request: DescribeRequest) -> Result<Vec<CollectionSummary>, StoreError> {
    let mut out = Vec::with_capacity(request.collections.len());
    for name in request.collections {
        let keys = CollectionKeys::new(&request.tenant, &name, backend.key_style())?;
        let index = indexes::read_index(backend, &keys)?;
        let mut fields = BTreeMap::new();
        let mut sample_ids = Vec::new();
        let sampled: Vec<String> = index.docs.values().take(SAMPLES).map(|tag| keys.document(tag)).collect();
        for bytes in backend.get_many(&sampled)?.into_iter().flatten() {
            let Ok(Value::Object(doc)) = serde_json::from_slice::<Value>(&bytes) else { continue };
            if let Some(id) = doc.get("id") {
                sample_ids.push(id.clone());
            }
            for (field, value) in &doc {
                fields.entry(field.clone()).or_insert_with(|| type_name(value).to_owned());
            }
        }
        out.push(CollectionSummary { name, count: index.docs.len() as u64, sample_ids, fields });
    }
    Ok(out)
}
