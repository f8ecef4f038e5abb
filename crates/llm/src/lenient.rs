//! Reading provider answers the way servers really write them. Compatible
//! servers differ in the parts that do not matter here (a `null` count, a
//! content given as parts, an extra field), so a field of the wrong type is
//! read as absent rather than failing the whole answer; what is required is
//! checked by the adapter, with a message naming it.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// A string where the API has one; anything else as absent.
pub fn string<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    Ok(match Value::deserialize(deserializer)? {
        Value::String(text) => Some(text),
        _ => None,
    })
}

/// A token count; anything but a whole non-negative number as 0.
pub fn count<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
    Ok(Value::deserialize(deserializer)?.as_u64().unwrap_or(0))
}

/// An object of `T`; anything else as absent.
pub fn object<'de, D: Deserializer<'de>, T: DeserializeOwned>(deserializer: D) -> Result<Option<T>, D::Error> {
    Ok(serde_json::from_value(Value::deserialize(deserializer)?).ok())
}

/// An array of `T`, without the elements that are not one; anything but an
/// array as absent.
pub fn list<'de, D: Deserializer<'de>, T: DeserializeOwned>(deserializer: D) -> Result<Option<Vec<T>>, D::Error> {
    Ok(match Value::deserialize(deserializer)? {
        Value::Array(items) => Some(items.into_iter().filter_map(|item| serde_json::from_value(item).ok()).collect()),
        _ => None,
    })
}
