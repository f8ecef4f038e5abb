//! How the block runner and the `python` runtime are configured
//! ([`RunnerConfig`]): plain settings, read by the runtimes that start from
//! them. The data runtime's are its own (`runtimes/python_data/config.rs`).

use std::path::PathBuf;

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
