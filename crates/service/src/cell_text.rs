//! The text of a cell as Python front ends treat it, shared by the
//! transports that speak a notebook's dialect (E2B's `/execute`, Jupyter's
//! kernel protocol): the code as IPython runs it, a failure as Python names it.

use anypath_sandbox::ExecError;

/// `code` without the indentation all its lines share, as IPython (so
/// E2B) runs a cell: E2B's clients often send code indented inside a string.
pub(crate) fn dedent(code: &str) -> String {
    fn indent(line: &str) -> &str {
        &line[..line.len() - line.trim_start_matches([' ', '\t']).len()]
    }
    let mut common: Option<&str> = None;
    for line in code.lines().filter(|line| !line.trim().is_empty()) {
        let this = indent(line);
        common = Some(match common {
            None => this,
            Some(so_far) => {
                let shared = so_far.bytes().zip(this.bytes()).take_while(|(a, b)| a == b).count();
                &so_far[..shared]
            }
        });
    }
    let common = common.unwrap_or("");
    if common.is_empty() {
        return code.to_owned();
    }
    let mut dedented: String = code
        .lines()
        .map(|line| if line.trim().is_empty() { "" } else { line.strip_prefix(common).unwrap_or(line) })
        .collect::<Vec<_>>()
        .join("\n");
    if code.ends_with('\n') {
        dedented.push('\n');
    }
    dedented
}

/// A failed run as a Python front end shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failure {
    /// The exception's class name (`ename`).
    pub name: String,
    /// Its message (`evalue`).
    pub value: String,
    /// The formatted traceback, empty when the code had no frames.
    pub traceback: String,
}

impl Failure {
    /// An exception as Python named it; a limit as the Python error closest to it.
    pub(crate) fn of(error: &ExecError, traceback: Option<&str>) -> Self {
        match error {
            ExecError::Exception { type_name, message, traceback } => Self { name: type_name.clone(), value: message.clone(), traceback: traceback.clone() },
            other => {
                let name = match other {
                    ExecError::Timeout { .. } => "TimeoutError",
                    ExecError::MemoryLimit { .. } => "MemoryError",
                    ExecError::Interrupted { .. } => "KeyboardInterrupt",
                    _ => "SandboxError",
                };
                Self { name: name.to_owned(), value: other.to_string(), traceback: traceback.unwrap_or_default().to_owned() }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indented_code_runs_as_ipython_runs_it() {
        assert_eq!(dedent("\n        import pandas as pd\n        pd.DataFrame()\n"), "\nimport pandas as pd\npd.DataFrame()\n");
        assert_eq!(dedent("    if x:\n        y\n\n    z"), "if x:\n    y\n\nz");
        assert_eq!(dedent("x = 1\n  y"), "x = 1\n  y", "nothing shared, nothing taken");
    }

    #[test]
    fn limits_read_as_the_closest_python_error() {
        let failure = Failure::of(&ExecError::Interrupted {}, None);
        assert_eq!(failure.name, "KeyboardInterrupt");
        assert!(failure.traceback.is_empty());
    }
}
