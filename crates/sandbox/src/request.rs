//! What a caller asks the sandbox to run: the wire's request, and whether the
//! policy gate applies (never part of the wire: the HTTP API cannot switch
//! the gate off).

pub use anypath_wire::{CollectionInput, ExecRequest};

/// Whether the AST policy gate and restricted builtins apply.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum PolicyGate {
    /// The gate applies: the host walks the tree first when it can
    /// ([`Self::Checked`]), the guest otherwise.
    #[default]
    Enforced,
    /// The host walked the tree and allowed it: the guest only compiles.
    Checked,
    /// Only the guest's gate, whatever the host's would say: tests compare
    /// the two.
    #[cfg(test)]
    GuestOnly,
    /// Only in this crate's own test build: no binary can switch the gate off.
    #[cfg(test)]
    Disabled,
}

impl PolicyGate {
    /// Whether the guest applies the gate's allowlist and restricted builtins.
    pub(crate) fn applies(self) -> bool {
        match self {
            Self::Enforced | Self::Checked => true,
            #[cfg(test)]
            Self::GuestOnly => true,
            #[cfg(test)]
            Self::Disabled => false,
        }
    }
}
