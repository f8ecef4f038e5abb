//! One collection as loaded for a request, the shape every part shares: the
//! store's load answers it (with what its commit re-checks, in
//! [`crate::LoadedCollection`]), and the data operations of
//! `anypath-collections` work on it, in the store and in the sandbox alike.

use serde::ser::Error as _;
use serde::{Serialize, Serializer};
use serde_json::Value;
use serde_json::value::RawValue;

/// The documents of a loaded collection.
#[derive(Debug, Clone)]
pub enum Documents {
    /// A JSON array, parsed when first used (a request that never touches
    /// a collection never pays for it); blank text is no documents.
    Json(String),
    /// Already parsed.
    Parsed(Vec<Value>),
}

/// One collection as the caller loaded it.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub name: String,
    pub documents: Documents,
    /// False when only some documents were loaded: touching another id, or
    /// scanning, then needs the whole collection.
    pub complete: bool,
    /// Ids (keys) looked up and found absent.
    pub absent_ids: Vec<String>,
    /// An integer id reserved for this request; an insert without an id takes it.
    pub reserved_id: Option<i64>,
}

/// The JSON array, whichever form the documents are in.
impl Serialize for Documents {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Parsed(documents) => documents.serialize(serializer),
            Self::Json(text) if text.trim().is_empty() => serializer.collect_seq(std::iter::empty::<Value>()),
            Self::Json(text) => serde_json::from_str::<&RawValue>(text).map_err(S::Error::custom)?.serialize(serializer),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_are_one_json_array_in_either_form() {
        let parsed = Documents::Parsed(vec![serde_json::json!({"id": 1})]);
        assert_eq!(serde_json::to_string(&parsed).expect("serialises"), r#"[{"id":1}]"#);
        let text = Documents::Json(r#"[{"id": 1}]"#.into());
        assert_eq!(serde_json::to_string(&text).expect("serialises"), r#"[{"id": 1}]"#);
        assert_eq!(serde_json::to_string(&Documents::Json(" ".into())).expect("serialises"), "[]");
        assert!(serde_json::to_string(&Documents::Json("[".into())).is_err(), "text that is not JSON does not pass as documents");
    }
}
