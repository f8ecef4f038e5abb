//! What a caller asks `POST /v1/exec` to run: one block, its request
//! context and the collections it may use, with limits to lower.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// One block to run, with its request context and the collections it may use.
///
/// The context and documents stay raw JSON: they can be megabytes, and the
/// host hands them to the guest without looking inside.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecRequest {
    /// Python source; it must assign `REPLY`.
    pub code: String,
    /// The request context (a JSON object), exposed as `ctx`.
    #[serde(default = "empty_object")]
    pub ctx: Box<RawValue>,
    /// Collections exposed through `store`; the first is the default one.
    #[serde(default)]
    pub collections: Vec<CollectionInput>,
    /// Limits to lower for this execution; raising one has no effect.
    #[serde(default)]
    pub limits: LimitOverrides,
}

/// A tenant collection as the caller loaded it.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CollectionInput {
    pub name: String,
    /// The version read; 0 for a collection that does not exist yet.
    #[serde(default)]
    pub version: u64,
    /// A JSON array of documents.
    #[serde(default = "empty_array")]
    pub documents: Box<RawValue>,
    /// False when only some documents were loaded (see `absent_ids`).
    #[serde(default = "yes")]
    pub complete: bool,
    /// Ids (as strings) that were looked up and found absent.
    #[serde(default)]
    pub absent_ids: Vec<String>,
    /// An integer id reserved for this request's insert without an id.
    #[serde(default)]
    pub reserved_id: Option<i64>,
}

/// Optional values that replace defaults (policy file) or narrow them (request).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct LimitOverrides {
    /// WebAssembly fuel (roughly instructions).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fuel: Option<u64>,
    /// Largest linear memory, in bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
    /// Wall-clock budget, in milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Largest source code, in bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_code_bytes: Option<u64>,
    /// Largest input, in bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_input_bytes: Option<u64>,
    /// Captured stdout kept, in bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stdout_bytes: Option<u32>,
    /// Captured stderr kept, in bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stderr_bytes: Option<u32>,
    /// Largest reply plus journal, in bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result_bytes: Option<u32>,
}

impl LimitOverrides {
    /// Whether no limit is lowered.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

fn yes() -> bool {
    true
}

fn empty_object() -> Box<RawValue> {
    RawValue::from_string("{}".into()).expect("literal JSON")
}

fn empty_array() -> Box<RawValue> {
    RawValue::from_string("[]".into()).expect("literal JSON")
}

impl CollectionInput {
    /// A whole collection: every document, no reservation.
    pub fn whole(name: impl Into<String>, version: u64, documents: Box<RawValue>) -> Self {
        Self {
            name: name.into(),
            version,
            documents,
            complete: true,
            absent_ids: Vec::new(),
            reserved_id: None,
        }
    }
}

impl ExecRequest {
    /// A request for `code` with an empty context and no collections.
    pub fn new(code: impl Into<String>) -> Self {
        Self {
            code: code.into(),
            ctx: empty_object(),
            collections: Vec::new(),
            limits: LimitOverrides::default(),
        }
    }

    /// Sets the context from any serialisable value.
    pub fn with_ctx(mut self, ctx: &impl Serialize) -> Result<Self, serde_json::Error> {
        self.ctx = serde_json::value::to_raw_value(ctx)?;
        Ok(self)
    }

    /// Adds a collection from serialisable documents.
    pub fn with_collection(
        mut self,
        name: impl Into<String>,
        version: u64,
        documents: &impl Serialize,
    ) -> Result<Self, serde_json::Error> {
        self.collections.push(CollectionInput::whole(
            name,
            version,
            serde_json::value::to_raw_value(documents)?,
        ));
        Ok(self)
    }

    /// Adds a partially loaded collection: `documents` plus the ids found
    /// absent, and optionally an id reserved for an insert.
    pub fn with_partial_collection(
        mut self,
        name: impl Into<String>,
        documents: &impl Serialize,
        absent_ids: Vec<String>,
        reserved_id: Option<i64>,
    ) -> Result<Self, serde_json::Error> {
        self.collections.push(CollectionInput {
            name: name.into(),
            version: 0,
            documents: serde_json::value::to_raw_value(documents)?,
            complete: false,
            absent_ids,
            reserved_id,
        });
        Ok(self)
    }

    /// Lowers limits for this execution.
    pub fn with_limits(mut self, limits: LimitOverrides) -> Self {
        self.limits = limits;
        self
    }

    /// Bytes of context plus documents: what input limits and fuel scale with.
    pub fn input_bytes(&self) -> u64 {
        let docs: usize = self
            .collections
            .iter()
            .map(|c| c.documents.get().len())
            .sum();
        (self.ctx.get().len() + docs) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn omitted_fields_take_their_defaults_and_unknown_ones_are_refused() {
        let request: ExecRequest =
            serde_json::from_str(r#"{"code": "REPLY = 1", "collections": [{"name": "a"}]}"#)
                .expect("parses");
        assert_eq!(request.ctx.get(), "{}");
        assert_eq!(request.collections[0].documents.get(), "[]");
        assert!(request.collections[0].complete);
        assert!(serde_json::from_str::<ExecRequest>(r#"{"code": "", "gate": false}"#).is_err());
        assert!(
            serde_json::from_str::<ExecRequest>(r#"{"code": "", "limits": {"fuel": 1, "cpu": 2}}"#)
                .is_err()
        );
    }

    #[test]
    fn a_request_round_trips_through_its_wire_form() {
        let request = ExecRequest::new("REPLY = 1")
            .with_ctx(&serde_json::json!({"method": "GET"}))
            .and_then(|r| {
                r.with_partial_collection(
                    "members",
                    &[serde_json::json!({"id": 1})],
                    vec!["2".into()],
                    Some(3),
                )
            })
            .expect("builds")
            .with_limits(LimitOverrides {
                fuel: Some(10),
                ..LimitOverrides::default()
            });
        let parsed: ExecRequest =
            serde_json::from_slice(&serde_json::to_vec(&request).expect("serialises"))
                .expect("parses");
        assert_eq!(parsed.input_bytes(), request.input_bytes());
        assert_eq!(parsed.collections[0].absent_ids, ["2"]);
        assert_eq!(parsed.collections[0].reserved_id, Some(3));
        assert_eq!(parsed.limits.fuel, Some(10));
    }
}
