//! What a caller asks the sandbox to run.

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::limits::LimitOverrides;

/// One block to run, with its request context and the collections it may use.
#[derive(Debug, Deserialize)]
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
    /// Never deserialised: the HTTP API cannot switch the gate off.
    #[serde(skip)]
    pub(crate) gate: PolicyGate,
}

/// A tenant collection as the caller loaded it.
#[derive(Debug, Deserialize)]
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

fn yes() -> bool {
    true
}

impl CollectionInput {
    /// A whole collection: every document, no reservation.
    pub fn whole(name: impl Into<String>, version: u64, documents: Box<RawValue>) -> Self {
        Self { name: name.into(), version, documents, complete: true, absent_ids: Vec::new(), reserved_id: None }
    }
}

/// Whether the AST policy gate and restricted builtins apply.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum PolicyGate {
    #[default]
    Enforced,
    #[cfg(feature = "unsafe-test-hooks")]
    Disabled,
}

fn empty_object() -> Box<RawValue> {
    RawValue::from_string("{}".into()).expect("literal JSON")
}

fn empty_array() -> Box<RawValue> {
    RawValue::from_string("[]".into()).expect("literal JSON")
}

impl ExecRequest {
    /// A request for `code` with an empty context and no collections.
    pub fn new(code: impl Into<String>) -> Self {
        Self {
            code: code.into(),
            ctx: empty_object(),
            collections: Vec::new(),
            limits: LimitOverrides::default(),
            gate: PolicyGate::Enforced,
        }
    }

    /// Sets the context from any serialisable value.
    pub fn with_ctx(mut self, ctx: &impl serde::Serialize) -> Result<Self, serde_json::Error> {
        self.ctx = serde_json::value::to_raw_value(ctx)?;
        Ok(self)
    }

    /// Adds a collection from serialisable documents.
    pub fn with_collection(
        mut self,
        name: impl Into<String>,
        version: u64,
        documents: &impl serde::Serialize,
    ) -> Result<Self, serde_json::Error> {
        self.collections.push(CollectionInput::whole(name, version, serde_json::value::to_raw_value(documents)?));
        Ok(self)
    }

    /// Adds a partially loaded collection: `documents` plus the ids found
    /// absent, and optionally an id reserved for an insert.
    pub fn with_partial_collection(
        mut self,
        name: impl Into<String>,
        documents: &impl serde::Serialize,
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

    /// Switches the policy gate off, to prove the WebAssembly layer holds by
    /// itself. Exists only with the `unsafe-test-hooks` feature.
    #[cfg(feature = "unsafe-test-hooks")]
    pub fn without_policy_gate(mut self) -> Self {
        self.gate = PolicyGate::Disabled;
        self
    }

    /// Bytes of context plus documents.
    pub(crate) fn input_bytes(&self) -> u64 {
        let docs: usize = self.collections.iter().map(|c| c.documents.get().len()).sum();
        (self.ctx.get().len() + docs) as u64
    }
}
