//! How the data runtime is configured: [`PythonDataConfig`], with the form
//! of its reactor ([`DataVariant`]). Plain settings, read by the runtime
//! when it starts.

use std::path::{Path, PathBuf};

use crate::limits::Limits;

/// Which form of the data runtime's reactor instances start from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DataVariant {
    /// Pre-initialised by `cargo xtask` (`anypath sandbox preinit-data`):
    /// numpy, pandas, matplotlib, seaborn and the cell code already imported.
    #[default]
    Preimported,
    /// The wheel's own snapshot: CPython started, nothing imported.
    Snapshot,
    /// The plain reactor: CPython starts in every instance.
    Plain,
}

impl DataVariant {
    /// The component's file name in the runtime's directory.
    pub fn file_name(self) -> &'static str {
        match self {
            Self::Preimported => "python-data-preimported.wasm",
            Self::Snapshot => "python-data-snapshot.wasm",
            Self::Plain => "python-data.wasm",
        }
    }
}

/// The summary `cargo xtask` writes beside the pre-initialised component.
pub const PREIMPORTED_SUMMARY: &str = "python-data-preimported.json";

/// How to start the `python-data` [`SessionRuntime`](crate::SessionRuntime).
#[derive(Debug, Clone)]
pub struct PythonDataConfig {
    /// The data runtime's converted reactor.
    pub component: PathBuf,
    /// The data runtime's directory as `cargo xtask` lays it out: `lib/`
    /// (holding `python315.zip`) and `mpl-data/` (matplotlib's data), both
    /// seen read-only.
    pub layout: PathBuf,
    /// Where compiled artifacts are cached.
    pub cache_dir: PathBuf,
    /// Limits every run starts from.
    pub limits: Limits,
    /// Which form of the reactor `component` is.
    pub variant: DataVariant,
}

impl PythonDataConfig {
    /// The data runtime laid out in `dir` by `cargo xtask`
    /// (`python-data-preimported.wasm`, `python-data-snapshot.wasm`,
    /// `python-data.wasm`, `lib/`), in the given variant, with the data
    /// runtime's own default limits.
    pub fn new(dir: &Path, variant: DataVariant) -> Self {
        Self {
            component: dir.join(variant.file_name()),
            layout: dir.to_path_buf(),
            cache_dir: dir.join("cache"),
            limits: Limits::python_data(),
            variant,
        }
    }
}
