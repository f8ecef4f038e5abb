//! What a tenant's collections look like, for the planner's prompt: count,
//! a few ids and the field types of a few documents. Kept small on purpose.

use std::collections::BTreeMap;

use anypath_rest::DescribeRequest;
use anypath_rest::prompt::{CollectionSummary, type_name};
use serde_json::Value;

use crate::backend::Backend;
use crate::error::StoreError;
use crate::indexes;
use crate::keys::CollectionKeys;

/// Ids and documents sampled per collection.
const SAMPLES: usize = 3;

/// A summary of each named collection, in request order.
pub fn describe(backend: &dyn Backend, request: DescribeRequest) -> Result<Vec<CollectionSummary>, StoreError> {
    let mut out = Vec::with_capacity(request.collections.len());
    for name in request.collections {
        let keys = CollectionKeys::new(&request.tenant, &name, backend.key_style())?;
        let layout = indexes::read_for(backend, &keys, None)?;
        let index = layout.index();
        let mut fields = BTreeMap::new();
        let mut sample_ids = Vec::new();
        let tags: Vec<&String> = index.docs.values().take(SAMPLES).collect();
        // Documents the head holds itself, then the others from their values.
        let mut sampled: Vec<Value> = tags.iter().filter_map(|tag| layout.head.inline.get(*tag).cloned()).collect();
        let stored: Vec<String> = tags.iter().filter(|tag| !layout.head.inline.contains_key(**tag)).map(|tag| keys.document(tag)).collect();
        sampled.extend(backend.get_many(&stored)?.into_iter().flatten().filter_map(|bytes| serde_json::from_slice::<Value>(&bytes).ok()));
        for doc in sampled {
            let Value::Object(doc) = doc else { continue };
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
