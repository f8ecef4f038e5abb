//! Where an instrumented component's state is reached: the accessor
//! functions of each memory and mutable global, by core module.

use serde::{Deserialize, Serialize};

/// The value type of a mutable global.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum GlobalKind {
    I32,
    I64,
    F32,
    F64,
}

/// One mutable global of one core module.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct GlobalSlot {
    /// The core module's index in the component.
    pub(crate) module: u32,
    /// The global's index in its module.
    pub(crate) index: u32,
    /// Its debug or export name, when the module gives one.
    pub(crate) name: Option<String>,
    pub(crate) kind: GlobalKind,
    /// Accessor exports reading and writing it.
    pub(crate) get: String,
    pub(crate) set: String,
}

/// One memory of one core module.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct MemorySlot {
    pub(crate) module: u32,
    /// The memory's index in its module.
    pub(crate) index: u32,
    /// Accessor exports: the whole memory, `memory.grow`, and the two-step write.
    pub(crate) read: String,
    pub(crate) grow: String,
    pub(crate) seek: String,
    pub(crate) write: String,
}

/// Every piece of state the instrumentation reaches.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct Layout {
    pub(crate) memories: Vec<MemorySlot>,
    pub(crate) globals: Vec<GlobalSlot>,
}

/// Names the WASI preview-1 adapter gives its globals: its state is a page of
/// host handles, so a restored instance keeps its own.
pub(crate) const ADAPTER_STATE_POINTER: &str = "internal_state_ptr";
pub(crate) const ADAPTER_ALLOCATION_STATE: &str = "allocation_state";
