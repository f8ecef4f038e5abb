//! How the runtimes are configured: the block runner's [`RunnerConfig`] and
//! the data runtime's [`PythonDataConfig`], with the form of its reactor
//! ([`DataVariant`]). Plain settings, read by the runtimes that start from them.

use std::path::{Path, PathBuf};

use crate::limits::Limits;

/// How to build a [`BlockRunner`](crate::BlockRunner).
#[derive(Debug, Clone)]
pub struct RunnerConfig {
    /// The runner component built by componentize-py.
    pub runner_component: PathBuf,
    /// Where compiled artifacts are cached.
    pub cache_dir: PathBuf,
    /// Limits every execution starts from.
    pub limits: Limits,
    /// Instances kept started ahead of demand (0 disables the pool).
    pub warm_instances: usize,
    /// Instance slots the pooling allocator reserves; bounds concurrency.
    pub instance_slots: u32,
}

impl RunnerConfig {
    /// Defaults for `runner_component`, caching next to it.
    pub fn new(runner_component: impl Into<PathBuf>) -> Self {
        let runner_component = runner_component.into();
        let cache_dir = runner_component
            .parent()
            .map(|p| p.join("cache"))
            .unwrap_or_else(|| PathBuf::from("cache"));
        Self { runner_component, cache_dir, limits: Limits::default(), warm_instances: 2, instance_slots: 64 }
    }
}

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
