//! The kernelspecs offered: `python3`, the default, runs the data runtime
//! (numpy, pandas, matplotlib) when the service has it; `python3-stdlib`
//! runs the standard-library runtime, which starts fastest; `bash`, when the
//! service has a shell, runs each cell as a `%%bash` script in the session
//! (its files and installed packages are the session's; like every command,
//! a cell's shell variables and directory end with it); `javascript`, when
//! the service has the JavaScript runtime, runs QuickJS cells whose
//! top-level declarations persist.

use anypath_sandbox::Runtime;
use serde::Serialize;
use serde_json::{Map, Value};

/// The default kernelspec's name, as Jupyter's clients expect it.
pub(crate) const DEFAULT_SPEC: &str = "python3";
/// The standard-library kernelspec, offered beside the data runtime.
const STDLIB_SPEC: &str = "python3-stdlib";
/// The shell's kernelspec.
pub(crate) const BASH_SPEC: &str = "bash";
/// The JavaScript kernelspec.
pub(crate) const JAVASCRIPT_SPEC: &str = "javascript";

/// The language a kernel's cells are written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Language {
    Python,
    /// Each cell a script for the session's shell.
    Bash,
    /// Each cell JavaScript, on the `javascript` runtime.
    Javascript,
}

/// One kernelspec.
#[derive(Debug, Clone)]
pub(crate) struct Spec {
    pub name: &'static str,
    pub display_name: &'static str,
    pub runtime: Runtime,
    pub language: Language,
}

/// The kernelspecs a service with `runtimes` (and a shell, when
/// `has_shell`) offers, the default first.
pub(crate) fn offered(runtimes: &[Runtime], has_shell: bool) -> Vec<Spec> {
    let data = runtimes.contains(&Runtime::PythonData);
    let stdlib = runtimes.contains(&Runtime::Python);
    let mut specs = Vec::new();
    if data {
        specs.push(Spec { name: DEFAULT_SPEC, display_name: "Python 3 (anypath)", runtime: Runtime::PythonData, language: Language::Python });
        if stdlib {
            specs.push(Spec { name: STDLIB_SPEC, display_name: "Python 3, standard library (anypath)", runtime: Runtime::Python, language: Language::Python });
        }
    } else if stdlib {
        specs.push(Spec { name: DEFAULT_SPEC, display_name: "Python 3, standard library (anypath)", runtime: Runtime::Python, language: Language::Python });
    }
    // A script's `python` starts the session's runtime: the one that starts fastest.
    if has_shell && let Some(runtime) = [Runtime::Python, Runtime::PythonData].into_iter().find(|r| runtimes.contains(r)) {
        specs.push(Spec { name: BASH_SPEC, display_name: "Bash (anypath)", runtime, language: Language::Bash });
    }
    if runtimes.contains(&Runtime::Javascript) {
        specs.push(Spec { name: JAVASCRIPT_SPEC, display_name: "JavaScript (anypath)", runtime: Runtime::Javascript, language: Language::Javascript });
    }
    specs
}

/// A kernelspec as `GET /api/kernelspecs` lists it.
#[derive(Debug, Serialize)]
pub(crate) struct SpecModel {
    name: &'static str,
    spec: SpecBody,
    /// No logos: JupyterLab shows the name's initials.
    resources: Map<String, Value>,
}

#[derive(Debug, Serialize)]
struct SpecBody {
    /// Never run: kernels start inside the service. JupyterLab requires the field.
    argv: [&'static str; 2],
    display_name: &'static str,
    language: &'static str,
    interrupt_mode: &'static str,
    env: Map<String, Value>,
    metadata: Map<String, Value>,
}

impl Spec {
    pub(crate) fn model(&self) -> SpecModel {
        let body = SpecBody {
            argv: ["anypath-kernel", "{connection_file}"],
            display_name: self.display_name,
            language: match self.language {
                Language::Python => "python",
                Language::Bash => "bash",
                Language::Javascript => "javascript",
            },
            interrupt_mode: "message",
            env: Map::new(),
            metadata: Map::new(),
        };
        SpecModel { name: self.name, spec: body, resources: Map::new() }
    }
}

/// `GET /api/kernelspecs`.
#[derive(Debug, Serialize)]
pub(crate) struct SpecList {
    default: &'static str,
    kernelspecs: std::collections::BTreeMap<&'static str, SpecModel>,
}

/// The list of `specs`.
pub(crate) fn list(specs: &[Spec]) -> SpecList {
    SpecList { default: DEFAULT_SPEC, kernelspecs: specs.iter().map(|s| (s.name, s.model())).collect() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python3_is_the_data_runtime_when_there_is_one() {
        let both = offered(&[Runtime::Python, Runtime::PythonData], false);
        assert_eq!(both.iter().map(|s| (s.name, s.runtime)).collect::<Vec<_>>(), [(DEFAULT_SPEC, Runtime::PythonData), (STDLIB_SPEC, Runtime::Python)]);
        let stdlib_only = offered(&[Runtime::Python], false);
        assert_eq!(stdlib_only.iter().map(|s| (s.name, s.runtime)).collect::<Vec<_>>(), [(DEFAULT_SPEC, Runtime::Python)]);
    }

    #[test]
    fn bash_is_offered_with_a_shell_on_the_fastest_runtime() {
        let with_shell = offered(&[Runtime::Python, Runtime::PythonData], true);
        assert_eq!(with_shell.last().map(|s| (s.name, s.runtime, s.language)), Some((BASH_SPEC, Runtime::Python, Language::Bash)));
        assert_eq!(with_shell.last().map(|s| s.model().spec.language), Some("bash"));
    }
}
