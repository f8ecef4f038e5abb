//! What a caller asks the sandbox to run: the wire's request, and whether the
//! policy gate applies (never part of the wire: the HTTP API cannot switch
//! the gate off).

pub use anypath_wire::{CollectionInput, ExecRequest};

/// Whether the AST policy gate and restricted builtins apply.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum PolicyGate {
    #[default]
    Enforced,
    /// Only in this crate's own test build: no binary can switch the gate off.
    #[cfg(test)]
    Disabled,
}
