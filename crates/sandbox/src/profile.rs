//! What a runtime is, for health reports: the runtime, its component's file
//! name and origin, the limits, and for the data runtime the image its
//! instances start from.

use std::path::Path;

use anypath_wire::Runtime;

use crate::config::DataVariant;
use crate::data_runtime::preinit::ImageSummary;
use crate::limits::Limits;

/// What a runtime is, for health reports.
pub(crate) struct Profile {
    pub(crate) runtime: Runtime,
    pub(crate) component_name: String,
    pub(crate) origin: serde_json::Value,
    pub(crate) limits: Limits,
    /// The data runtime's image (none for the runner).
    pub(crate) image: Option<ImageDescription>,
}

/// Which image a data runtime starts from, for health reports.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct ImageDescription {
    pub(crate) variant: DataVariant,
    /// What the pre-initialised image holds.
    pub(crate) preimported: Option<ImageSummary>,
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
            fields.insert("image".into(), serde_json::json!(image));
        }
        described
    }

    /// The `python` runner's profile: the componentize-py component at `component`, under `limits`.
    pub(crate) fn python_runner(component: &Path, limits: Limits) -> Self {
        Self {
            runtime: Runtime::Python,
            component_name: component_name(component),
            origin: serde_json::json!("built from components/python-runner by componentize-py"),
            limits,
            image: None,
        }
    }
}

/// The component's file name, as health reports show it.
pub(crate) fn component_name(component: &Path) -> String {
    component.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}
