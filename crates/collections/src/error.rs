//! Why an operation failed, in the kinds a Python block sees.

/// A failed data operation. Each kind is the Python exception a block gets
/// (`TypeError`, `ValueError`, `KeyError`, `LookupError`), so a block's
/// `except` clauses work as they did when the store was written in Python.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OpError {
    /// A value of the wrong type (`TypeError`).
    #[error("{0}")]
    Type(String),
    /// A value of the right type that cannot be used (`ValueError`).
    #[error("{0}")]
    Value(String),
    /// The id is already taken (a `ValueError` whose message says "already exists").
    #[error("{0}")]
    Exists(String),
    /// A collection that was not loaded for this request (`KeyError`).
    #[error("{0}")]
    NotLoaded(String),
    /// No collection at all was loaded (`LookupError`).
    #[error("no collection was loaded for this request")]
    NoCollection,
    /// The operation reached past a partial load: reload whole and run again.
    #[error("{0}")]
    NeedsData(String),
}

impl OpError {
    /// The Python exception type a block sees for this error.
    pub fn python_type(&self) -> &'static str {
        match self {
            Self::Type(_) => "TypeError",
            Self::Value(_) | Self::Exists(_) => "ValueError",
            Self::NotLoaded(_) => "KeyError",
            Self::NoCollection => "LookupError",
            Self::NeedsData(_) => "NeedsData",
        }
    }
}
