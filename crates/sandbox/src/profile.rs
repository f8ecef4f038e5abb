//! What a runtime is, for health reports: the runtime, its component's file
//! name and origin, the limits, and what else the runtime says of itself
//! (the data runtime: the image its instances start from).

use std::path::Path;

use anypath_wire::Runtime;

use crate::limits::Limits;

/// What a runtime is, for health reports.
pub(crate) struct Profile {
    pub(crate) runtime: Runtime,
    pub(crate) component_name: String,
    pub(crate) origin: serde_json::Value,
    pub(crate) limits: Limits,
    /// The image its instances start from, as the runtime describes it
    /// (none for the runner).
    pub(crate) image: Option<serde_json::Value>,
}

impl Profile {
    /// The runtime, the component's file name, its origin, the limits and
    /// the image instances start from.
    pub(crate) fn describe(&self) -> serde_json::Value {
        let mut described = serde_json::json!({
            "runtime": self.runtime,
            "component": self.component_name,
            "origin": self.origin,
            "limits": self.limits,
        });
        if let (Some(image), Some(fields)) = (&self.image, described.as_object_mut()) {
            fields.insert("image".into(), image.clone());
        }
        described
    }
}

/// The component's file name, as health reports show it.
pub(crate) fn component_name(component: &Path) -> String {
    component.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}
