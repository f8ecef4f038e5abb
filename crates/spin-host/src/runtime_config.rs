//! The runtime configuration file (`--runtime-config-file`): the key-value
//! store labels an app may use and where each keeps its data. Read as Spin
//! reads it: `default` always exists (`<app dir>/.spin/sqlite_key_value.db`
//! unless configured), a `type = "spin"` store's relative `path` is resolved
//! against the file's directory, and a store without a `path` lives in memory.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// The label every app has.
pub const DEFAULT_STORE: &str = "default";

/// Where one key-value store keeps its data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreLocation {
    File(PathBuf),
    InMemory,
}

/// The key-value stores an app may open, by label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeConfig {
    pub key_value_stores: BTreeMap<String, StoreLocation>,
}

/// The runtime configuration could not be used; Spin's messages where it has one.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeConfigError {
    #[error("failed to read runtime config file '{path}': {cause}")]
    Read { path: PathBuf, cause: std::io::Error },
    #[error("failed to parse runtime config file '{path}' as toml: {cause}")]
    Parse { path: PathBuf, cause: toml::de::Error },
    #[error("unused runtime config key(s): {0}")]
    UnusedKeys(String),
    #[error("runtime config key(s) {0} are not supported by anypath up; run the app with `spin up`")]
    Unsupported(String),
    #[error("could not configure key-value store with label '{label}': {reason}")]
    Store { label: String, reason: String },
    #[error("unknown key_value_stores label {label:?} for component {component:?}")]
    UnknownLabel { label: String, component: String },
}

/// Top-level keys Spin's runtime configuration knows besides `key_value_store`.
const SPIN_KEYS: &[&str] = &[
    "state_dir",
    "log_dir",
    "variables_provider",
    "variable_provider",
    "sqlite_database",
    "llm_compute",
    "client_tls",
    "otel",
    "outbound_networking",
    "blocked_networks",
];

#[derive(Deserialize)]
struct RawStore {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    path: Option<PathBuf>,
}

impl RuntimeConfig {
    /// The stores of `file` (none: only `default`), for an app in `app_dir`.
    pub fn load(file: Option<&Path>, app_dir: &Path) -> Result<Self, RuntimeConfigError> {
        let mut stores = BTreeMap::new();
        stores.insert(DEFAULT_STORE.to_owned(), StoreLocation::File(app_dir.join(".spin/sqlite_key_value.db")));
        let Some(file) = file else {
            return Ok(Self { key_value_stores: stores });
        };
        let text = std::fs::read_to_string(file).map_err(|cause| RuntimeConfigError::Read { path: file.into(), cause })?;
        let table: toml::Table = toml::from_str(&text).map_err(|cause| RuntimeConfigError::Parse { path: file.into(), cause })?;
        let unknown: Vec<&str> = table.keys().map(String::as_str).filter(|k| *k != "key_value_store" && !SPIN_KEYS.contains(k)).collect();
        if !unknown.is_empty() {
            return Err(RuntimeConfigError::UnusedKeys(unknown.join(", ")));
        }
        let unsupported: Vec<&str> = table.keys().map(String::as_str).filter(|k| SPIN_KEYS.contains(k)).collect();
        if !unsupported.is_empty() {
            return Err(RuntimeConfigError::Unsupported(unsupported.join(", ")));
        }
        let base = file.parent().unwrap_or(Path::new("."));
        let configured = table.get("key_value_store").and_then(toml::Value::as_table).cloned().unwrap_or_default();
        for (label, value) in configured {
            let store_error = |reason: String| RuntimeConfigError::Store { label: label.clone(), reason };
            let store = RawStore::deserialize(value).map_err(|e| store_error(e.message().to_owned()))?;
            let location = match store.kind.as_str() {
                "spin" => match store.path {
                    Some(path) => StoreLocation::File(base.join(path)),
                    None => StoreLocation::InMemory,
                },
                "redis" | "azure_cosmos" | "aws_dynamo" => {
                    return Err(store_error(format!("the store type '{}' is not supported by anypath up; run the app with `spin up`", store.kind)));
                }
                other => return Err(store_error(format!("the store type '{other}' was not registered with the config resolver"))),
            };
            stores.insert(label, location);
        }
        Ok(Self { key_value_stores: stores })
    }

    /// Checks that every label `component` names is defined, as Spin does for every component.
    pub fn check_labels(&self, component: &str, labels: &[String]) -> Result<(), RuntimeConfigError> {
        match labels.iter().find(|l| !self.key_value_stores.contains_key(l.as_str())) {
            Some(label) => Err(RuntimeConfigError::UnknownLabel { label: label.clone(), component: component.to_owned() }),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<RuntimeConfig, RuntimeConfigError> {
        let dir = tempfile::Builder::new().prefix("anypath-rc-").tempdir().unwrap();
        let file = dir.path().join("runtime-config.toml");
        std::fs::write(&file, text).unwrap();
        RuntimeConfig::load(Some(&file), Path::new("/app"))
    }

    #[test]
    fn default_always_exists_and_paths_resolve_against_the_file() {
        let none = RuntimeConfig::load(None, Path::new("/app")).unwrap();
        assert_eq!(none.key_value_stores["default"], StoreLocation::File("/app/.spin/sqlite_key_value.db".into()));
        let config = load("[key_value_store.default]\ntype = \"spin\"\npath = \"data/kv.db\"\n[key_value_store.cache]\ntype = \"spin\"\n").unwrap();
        assert!(matches!(&config.key_value_stores["default"], StoreLocation::File(p) if p.ends_with("data/kv.db") && p.is_absolute()));
        assert_eq!(config.key_value_stores["cache"], StoreLocation::InMemory);
        assert!(config.check_labels("store", &["default".into(), "cache".into()]).is_ok());
        let unknown = config.check_labels("store", &["other".into()]).unwrap_err();
        assert_eq!(unknown.to_string(), r#"unknown key_value_stores label "other" for component "store""#);
    }

    #[test]
    fn what_spin_refuses_is_refused() {
        let bad_type = load("[key_value_store.other]\ntype = \"nope\"\n").unwrap_err();
        assert_eq!(bad_type.to_string(), "could not configure key-value store with label 'other': the store type 'nope' was not registered with the config resolver");
        assert_eq!(load("nonsense = 1\n").unwrap_err().to_string(), "unused runtime config key(s): nonsense");
        assert!(load("[key_value_store.default]\npath = \"x\"\n").unwrap_err().to_string().contains("missing field `type`"));
        assert!(matches!(load("[key_value_store.x]\ntype = \"redis\"\nurl = \"redis://h\"\n"), Err(RuntimeConfigError::Store { .. })));
    }
}
