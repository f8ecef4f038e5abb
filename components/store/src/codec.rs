//! The JSON the store reads and writes: request bodies and stored values,
//! with the failure each direction reports.

use anypath_rest::RestError;
use serde::{Deserialize, Serialize};

use crate::error::StoreError;

/// A request body; a malformed one is the caller's fault (400).
pub fn parse<T: for<'de> Deserialize<'de>>(body: &[u8]) -> Result<T, StoreError> {
    serde_json::from_slice(body).map_err(|e| RestError::BadRequest(format!("invalid store request: {e}")).into())
}

/// A value to store or answer.
pub fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, StoreError> {
    serde_json::to_vec(value).map_err(|e| StoreError::Backend(e.to_string()))
}

/// A stored value (`what` names it in the error); one that does not parse is corrupt (500).
pub fn decode<T: for<'de> Deserialize<'de>>(bytes: &[u8], what: &str) -> Result<T, StoreError> {
    serde_json::from_slice(bytes).map_err(|e| StoreError::Backend(format!("stored {what} is corrupt: {e}")))
}
