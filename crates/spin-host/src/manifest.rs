//! The parts of a Spin manifest (`spin_manifest_version = 2`) this host runs,
//! read with the rules `spin up` applies when it loads an app: the same
//! fields (an unknown one is an error), identifiers, variable declarations,
//! templates, `allowed_outbound_hosts` checked with the variables' defaults,
//! and HTTP triggers. Where Spin would refuse the manifest, loading fails
//! with Spin's words; what Spin accepts but this host does not implement
//! (other trigger types, `files`, `environment`, ...) is refused by name.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::ids::{KebabId, LowerSnakeId, check_store_label};
use crate::outbound::{AllowedHosts, EntryError};
use crate::variables::{Template, VariableError, Variables};

/// A parsed and checked `spin.toml`, resolved against its directory.
#[derive(Debug, Clone)]
pub struct Manifest {
    pub dir: PathBuf,
    pub variables: BTreeMap<LowerSnakeId, VariableDecl>,
    /// The HTTP triggers in declaration order, a duplicate route dropped in
    /// favour of the later one (as Spin does).
    pub triggers: Vec<HttpTrigger>,
    pub components: BTreeMap<KebabId, ComponentDecl>,
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

/// One `[component.<id>]`: the fields this host runs. The others Spin knows
/// are read (so the manifest is checked as Spin checks it) and refused when set.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ComponentDecl {
    pub source: Source,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub variables: BTreeMap<LowerSnakeId, String>,
    #[serde(default)]
    pub allowed_outbound_hosts: Vec<String>,
    #[serde(default)]
    pub key_value_stores: Vec<String>,
    #[serde(default)]
    pub build: Option<BuildConfig>,
    // Metadata Spin accepts and this host has no use for.
    #[serde(default)]
    #[allow(dead_code)]
    targets: Option<toml::Value>,
    #[serde(default)]
    #[allow(dead_code)]
    tool: Option<toml::Value>,
    #[serde(default)]
    #[allow(dead_code)]
    dependencies_inherit_configuration: Option<bool>,
    #[serde(default)]
    environment: BTreeMap<String, String>,
    #[serde(default)]
    files: Vec<toml::Value>,
    #[serde(default)]
    exclude_files: Vec<String>,
    #[serde(default)]
    allowed_http_hosts: Vec<String>,
    #[serde(default)]
    sqlite_databases: Vec<String>,
    #[serde(default)]
    ai_models: Vec<String>,
    #[serde(default)]
    dependencies: Option<toml::Table>,
    #[serde(default)]
    profile: Option<toml::Table>,
}

/// A component's `source`: a local file (registry and URL sources are refused).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Source {
    Local(PathBuf),
    Remote(toml::Table),
}

/// `[component.<id>.build]`: run by `spin build`, read here only to be checked.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BuildConfig {
    pub command: toml::Value,
    #[serde(default)]
    pub workdir: Option<PathBuf>,
    #[serde(default)]
    pub watch: Vec<String>,
}

/// Why a component cannot be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ComponentError {
    #[error("`allowed_outbound_hosts` is malformed: {0}")]
    AllowedHosts(EntryError),
    #[error("variable {name:?}: {cause}")]
    Variable { name: String, cause: VariableError },
    #[error("invalid key_value_stores label {label:?}: expected kebab-case or snake_case")]
    StoreLabel { label: String },
    #[error("`{0}` is not supported by anypath up; run the app with `spin up`")]
    Unsupported(&'static str),
    #[error("a source other than a local file is not supported by anypath up; run the app with `spin up`")]
    RemoteSource,
}

/// The manifest could not be used; each message is the one `spin up` gives.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("cannot read {path}: {cause}")]
    Read { path: PathBuf, cause: std::io::Error },
    #[error("invalid manifest {path}: {cause}")]
    Parse { path: PathBuf, cause: toml::de::Error },
    #[error("invalid manifest version: {0}")]
    Version(String),
    #[error("variable {0:?}: must be `required` OR have a `default`")]
    VariableDeclaration(String),
    #[error("Failed to load component `{id}`: {cause}")]
    Component { id: String, cause: ComponentError },
    #[error("This application is using the deprecated trigger 'base' field. The base must be prepended to each [[trigger.http]]'s 'route'.")]
    DeprecatedBase,
    #[error("invalid trigger {id}: {message}")]
    Trigger { id: String, message: String },
    #[error("no such component {0:?}")]
    NoSuchComponent(String),
    #[error("trigger type {0:?} is not supported by anypath up (HTTP only); run the app with `spin up`")]
    UnsupportedTrigger(String),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawManifest {
    spin_manifest_version: toml::Value,
    application: RawApplication,
    #[serde(default)]
    variables: BTreeMap<LowerSnakeId, VariableDecl>,
    trigger: BTreeMap<String, Vec<toml::Table>>,
    #[serde(default)]
    component: BTreeMap<KebabId, ComponentDecl>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)] // read to be checked, as Spin reads it
struct RawApplication {
    name: String,
    #[serde(default)]
    version: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    authors: Vec<String>,
    #[serde(default)]
    targets: Vec<toml::Value>,
    #[serde(default)]
    trigger: BTreeMap<String, toml::Table>,
    #[serde(default)]
    tool: Option<toml::Table>,
}

/// `[[trigger.http]]` as Spin's HTTP trigger reads it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHttpTrigger {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    component: Option<toml::Value>,
    route: Option<toml::Value>,
    #[serde(default)]
    executor: Option<toml::Value>,
    #[serde(default)]
    static_response: Option<toml::Value>,
}

impl Manifest {
    /// Reads and checks `path` as `spin up` does before it runs anything.
    pub fn load(path: &Path) -> Result<Self, ManifestError> {
        let text = std::fs::read_to_string(path).map_err(|cause| ManifestError::Read { path: path.into(), cause })?;
        Self::parse(&text, path)
    }

    /// Checks manifest `text`; `path` names it in messages and gives the app directory.
    pub fn parse(text: &str, path: &Path) -> Result<Self, ManifestError> {
        let raw: RawManifest = toml::from_str(text).map_err(|cause| ManifestError::Parse { path: path.into(), cause })?;
        if raw.spin_manifest_version.as_integer() != Some(2) {
            return Err(ManifestError::Version(raw.spin_manifest_version.to_string()));
        }
        check_application(&raw.application)?;
        for (name, decl) in &raw.variables {
            if decl.required == decl.default.is_some() {
                return Err(ManifestError::VariableDeclaration(name.to_string()));
            }
        }
        let defaults = Variables::defaults(&raw.variables);
        for (id, component) in &raw.component {
            check_component(component, &raw.variables, &defaults).map_err(|cause| ManifestError::Component { id: id.to_string(), cause })?;
        }
        let mut triggers = Vec::new();
        for (kind, entries) in raw.trigger {
            if kind != "http" {
                return Err(ManifestError::UnsupportedTrigger(kind));
            }
            for (index, table) in entries.into_iter().enumerate() {
                triggers.push(http_trigger(table, index)?);
            }
        }
        for trigger in &triggers {
            if !raw.component.contains_key(trigger.component.as_str()) {
                return Err(ManifestError::NoSuchComponent(trigger.component.clone()));
            }
        }
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("."));
        Ok(Self { dir, variables: raw.variables, triggers: drop_duplicate_routes(triggers), components: raw.component })
    }

    /// The ids of every component, for `*.spin.internal`.
    pub fn component_ids(&self) -> Vec<String> {
        self.components.keys().map(ToString::to_string).collect()
    }
}

fn check_application(application: &RawApplication) -> Result<(), ManifestError> {
    for (kind, config) in &application.trigger {
        if kind != "http" {
            continue;
        }
        for key in config.keys() {
            if key != "base" {
                let message = format!("invalid metadata value for \"http\": unknown field `{key}`, expected `base`");
                return Err(ManifestError::Trigger { id: "[application.trigger.http]".into(), message });
            }
        }
        match config.get("base").and_then(toml::Value::as_str) {
            Some("/") | None => {}
            Some(_) => return Err(ManifestError::DeprecatedBase),
        }
    }
    Ok(())
}

/// The component-level checks of Spin's loader: fields this host can honour,
/// store labels, templates of component variables, allowed hosts with defaults.
fn check_component(
    component: &ComponentDecl,
    declared: &BTreeMap<LowerSnakeId, VariableDecl>,
    defaults: &Variables,
) -> Result<(), ComponentError> {
    if let Source::Remote(_) = component.source {
        return Err(ComponentError::RemoteSource);
    }
    let unsupported: [(&'static str, bool); 8] = [
        ("environment", !component.environment.is_empty()),
        ("files", !component.files.is_empty()),
        ("exclude_files", !component.exclude_files.is_empty()),
        ("allowed_http_hosts", !component.allowed_http_hosts.is_empty()),
        ("sqlite_databases", !component.sqlite_databases.is_empty()),
        ("ai_models", !component.ai_models.is_empty()),
        ("dependencies", component.dependencies.as_ref().is_some_and(|d| !d.is_empty())),
        ("profile", component.profile.as_ref().is_some_and(|p| !p.is_empty())),
    ];
    if let Some((field, _)) = unsupported.iter().find(|(_, set)| *set) {
        return Err(ComponentError::Unsupported(field));
    }
    for label in &component.key_value_stores {
        check_store_label(label).map_err(|_| ComponentError::StoreLabel { label: label.clone() })?;
    }
    for (name, value) in &component.variables {
        let variable_error = |cause| ComponentError::Variable { name: name.to_string(), cause };
        let template = Template::parse(value).map_err(variable_error)?;
        // Every name must be an app variable, whether or not it has a value yet.
        if let Some(unknown) = template.names().find(|n| !declared.contains_key(*n)) {
            return Err(variable_error(VariableError::Unknown(unknown.to_owned())));
        }
    }
    AllowedHosts::validate(&component.allowed_outbound_hosts, defaults).map_err(ComponentError::AllowedHosts)
}

fn http_trigger(table: toml::Table, index: usize) -> Result<HttpTrigger, ManifestError> {
    let fallback_id = format!("http-trigger{}", index + 1);
    let raw = RawHttpTrigger::deserialize(toml::Value::Table(table)).map_err(|e| ManifestError::Trigger {
        id: fallback_id.clone(),
        message: e.message().to_owned(),
    })?;
    let id = raw.id.clone().unwrap_or(fallback_id);
    let trigger_error = |message: String| ManifestError::Trigger { id: id.clone(), message };
    if raw.static_response.is_some() || raw.executor.is_some() {
        return Err(trigger_error("`static_response` and `executor` are not supported by anypath up; run the app with `spin up`".into()));
    }
    let component = match raw.component {
        Some(toml::Value::String(name)) => KebabId::parse(&name).map_err(trigger_error)?.to_string(),
        Some(_) => return Err(trigger_error("an inline component is not supported by anypath up; run the app with `spin up`".into())),
        None => return Err(trigger_error(format!("Triggers must specify either component or static_response - {id} has neither"))),
    };
    let route = match raw.route {
        None => return Err(trigger_error("missing field `route`".into())),
        // Spin adds the leading '/' itself.
        Some(toml::Value::String(path)) if path.starts_with('/') => Route::Public(path),
        Some(toml::Value::String(path)) => Route::Public(format!("/{path}")),
        Some(toml::Value::Table(t)) if t.len() == 1 && t.get("private").and_then(toml::Value::as_bool) == Some(true) => Route::Private,
        Some(toml::Value::Table(t)) if t.len() == 1 && t.get("private").and_then(toml::Value::as_bool) == Some(false) => {
            return Err(trigger_error(format!("route must be a string pattern or '{{ private = true }}': '{component}' has {{ private = false }}")));
        }
        Some(other) => return Err(trigger_error(format!("route must be a string pattern or '{{ private = true }}', not {other}"))),
    };
    Ok(HttpTrigger { route, component })
}

/// Spin keeps the last of several triggers with the same route and logs the others.
fn drop_duplicate_routes(triggers: Vec<HttpTrigger>) -> Vec<HttpTrigger> {
    let mut kept: Vec<HttpTrigger> = Vec::new();
    for trigger in triggers.into_iter().rev() {
        let duplicate = matches!(&trigger.route, Route::Public(_)) && kept.iter().any(|k| k.route == trigger.route);
        if duplicate {
            let Route::Public(route) = &trigger.route else { continue };
            tracing::error!(component = %trigger.component, route, "duplicate route: this component's route will never be used");
        } else {
            kept.push(trigger);
        }
    }
    kept.reverse();
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_projects_manifest_parses() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../spin.toml");
        let manifest = Manifest::load(&path).unwrap();
        assert!(manifest.triggers.iter().any(|t| t.route == Route::Public("/...".into()) && t.component == "store"));
        assert!(manifest.triggers.iter().any(|t| t.route == Route::Private && t.component == "gateway"));
        assert_eq!(manifest.components["store"].key_value_stores, vec!["default"]);
        assert!(manifest.components["gateway"].key_value_stores.is_empty());
    }
}
