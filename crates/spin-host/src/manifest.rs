//! The parts of a Spin manifest (`spin_manifest_version = 2`) this host runs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// A parsed `spin.toml`, resolved against its directory.
#[derive(Debug, Clone)]
pub struct Manifest {
    pub dir: PathBuf,
    pub variables: BTreeMap<String, VariableDecl>,
    pub triggers: Vec<HttpTrigger>,
    pub components: BTreeMap<String, ComponentDecl>,
}

/// An application variable: required, or with a default.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VariableDecl {
    #[serde(default)]
    pub default: Option<String>,
    #[serde(default)]
    pub required: bool,
    #[serde(default)]
    pub secret: bool,
    #[serde(default)]
    pub description: Option<String>,
}

/// Where an HTTP trigger sends requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// `"/path"` exactly, or `"/path/..."` for the path and everything under it.
    Public(String),
    /// `{ private = true }`: reachable only by service chaining.
    Private,
}

/// One `[[trigger.http]]`.
#[derive(Debug, Clone)]
pub struct HttpTrigger {
    pub route: Route,
    pub component: String,
}

/// One `[component.<id>]`.
#[derive(Debug, Clone, Deserialize)]
pub struct ComponentDecl {
    pub source: PathBuf,
    #[serde(default)]
    pub allowed_outbound_hosts: Vec<String>,
    #[serde(default)]
    pub key_value_stores: Vec<String>,
    #[serde(default)]
    pub variables: BTreeMap<String, String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub build: Option<toml::Value>,
}

/// The manifest could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("invalid manifest {path}: {source}")]
    Parse { path: PathBuf, source: toml::de::Error },
    #[error("unsupported manifest: {0}")]
    Unsupported(String),
}

#[derive(Deserialize)]
struct RawManifest {
    spin_manifest_version: u32,
    #[serde(default)]
    variables: BTreeMap<String, VariableDecl>,
    #[serde(default)]
    trigger: RawTriggers,
    #[serde(default)]
    component: BTreeMap<String, ComponentDecl>,
}

#[derive(Deserialize, Default)]
struct RawTriggers {
    #[serde(default)]
    http: Vec<RawHttpTrigger>,
}

#[derive(Deserialize)]
struct RawHttpTrigger {
    route: RawRoute,
    component: String,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RawRoute {
    Path(String),
    Private { private: bool },
}

impl Manifest {
    /// Reads and checks `path`.
    pub fn load(path: &Path) -> Result<Self, ManifestError> {
        let text = std::fs::read_to_string(path).map_err(|source| ManifestError::Read { path: path.into(), source })?;
        let raw: RawManifest = toml::from_str(&text).map_err(|source| ManifestError::Parse { path: path.into(), source })?;
        if raw.spin_manifest_version != 2 {
            return Err(ManifestError::Unsupported(format!("spin_manifest_version {}", raw.spin_manifest_version)));
        }
        let mut triggers = Vec::new();
        for t in raw.trigger.http {
            if !raw.component.contains_key(&t.component) {
                return Err(ManifestError::Unsupported(format!("trigger names unknown component {:?}", t.component)));
            }
            let route = match t.route {
                RawRoute::Path(p) if p.starts_with('/') => Route::Public(p),
                RawRoute::Path(p) => return Err(ManifestError::Unsupported(format!("route {p:?} must start with '/'"))),
                RawRoute::Private { private: true } => Route::Private,
                RawRoute::Private { private: false } => {
                    return Err(ManifestError::Unsupported("route { private = false } has no path".into()));
                }
            };
            triggers.push(HttpTrigger { route, component: t.component });
        }
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("."));
        Ok(Self { dir, variables: raw.variables, triggers, components: raw.component })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_projects_manifest_parses() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../spin.toml");
        let manifest = Manifest::load(&path).unwrap();
        assert!(manifest.triggers.iter().any(|t| t.route == Route::Public("/...".into()) && t.component == "gateway"));
        assert!(manifest.triggers.iter().any(|t| t.route == Route::Private && t.component == "store"));
        assert_eq!(manifest.components["store"].key_value_stores, vec!["default"]);
        assert!(manifest.components["gateway"].key_value_stores.is_empty());
    }
}
