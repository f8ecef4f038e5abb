//! IPython's shell escapes in a cell: `!cmd` lines (output into the
//! cell's stdout), `x = !cmd` (the output's lines as a list), `%pip ...`
//! and `%%bash` cells, with `{expr}` and `$name` expanded as IPython does.
//! A cell is read into segments run in order on the session: its Python
//! as cells of the live instance, its shell lines as commands on the
//! session's tree. A cell with none is not touched.

/// One piece of a cell, in the order written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Segment {
    /// Python lines, run as one cell.
    Python(String),
    /// A command line; its lines go into `assign` when given.
    Shell { command: String, assign: Option<String> },
    /// A `%%bash` cell's script: as in IPython, a non-zero exit raises
    /// `CalledProcessError` in the cell.
    Script(String),
}

/// The cell's segments; `None` when it has no shell escape (it runs as it is).
pub(crate) fn segments(code: &str) -> Option<Vec<Segment>> {
    let mut lines = code.lines().peekable();
    // `%%bash` (or `%%sh`, `%%script bash`) makes the whole rest a script.
    while lines.peek().is_some_and(|line| line.trim().is_empty()) {
        lines.next();
    }
    if let Some(first) = lines.peek().map(|line| line.trim())
        && matches!(first, "%%bash" | "%%sh" | "%%script bash" | "%%script sh")
    {
        lines.next();
        let script: Vec<&str> = lines.collect();
        return Some(vec![Segment::Script(script.join("\n"))]);
    }
    let mut found = false;
    let mut out = Vec::new();
    let mut python: Vec<&str> = Vec::new();
    let mut continued: Option<(String, Option<String>)> = None;
    for line in code.lines() {
        if let Some((mut command, assign)) = continued.take() {
            // A `\` at the end of a shell line continues it, as in IPython.
            command.push('\n');
            command.push_str(line);
            if line.ends_with('\\') {
                continued = Some((command, assign));
            } else {
                out.push(Segment::Shell { command, assign });
            }
            continue;
        }
        match escape(line) {
            Some((command, assign)) => {
                found = true;
                if !python.is_empty() {
                    out.push(Segment::Python(python.join("\n")));
                    python.clear();
                }
                if command.ends_with('\\') {
                    continued = Some((command, assign));
                } else {
                    out.push(Segment::Shell { command, assign });
                }
            }
            None => python.push(line),
        }
    }
    if let Some((command, assign)) = continued {
        out.push(Segment::Shell { command, assign });
    }
    if !python.iter().all(|line| line.trim().is_empty()) {
        out.push(Segment::Python(python.join("\n")));
    }
    found.then_some(out)
}

/// The command a line escapes to, and the variable it assigns: `!cmd`,
/// `x = !cmd`, `%pip ...`, `%sx cmd`. Only at the start of a line with no
/// indentation (an indented `!` is inside a Python block: IPython runs
/// those too, but a segment cannot split a block).
fn escape(line: &str) -> Option<(String, Option<String>)> {
    if let Some(rest) = line.strip_prefix('!') {
        // `!!cmd` is IPython's `%sx`: the output as a value; here, printed.
        let command = rest.strip_prefix('!').unwrap_or(rest).trim();
        return (!command.is_empty()).then(|| (command.to_owned(), None));
    }
    for magic in ["%pip ", "%conda "] {
        if let Some(rest) = line.strip_prefix(magic) {
            let program = magic.trim_start_matches('%').trim();
            let program = if program == "conda" { "pip" } else { program };
            return Some((format!("{program} {}", rest.trim()), None));
        }
    }
    if let Some(rest) = line.strip_prefix("%sx ") {
        return Some((rest.trim().to_owned(), None));
    }
    let (name, rest) = line.split_once('=')?;
    let name = name.trim();
    let command = rest.trim_start().strip_prefix('!')?.trim();
    let is_name = !name.is_empty() && !name.starts_with(|c: char| c.is_ascii_digit()) && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    (is_name && !command.is_empty() && !line.starts_with(' ')).then(|| (command.to_owned(), Some(name.to_owned())))
}

/// Whether `command` names Python values to expand (`{expr}`, `$name`).
pub(crate) fn needs_expansion(command: &str) -> bool {
    command.contains('{') || command.contains('$')
}

/// Python that prints `command` with `{expr}` evaluated and `$name`
/// replaced by the session's variable of that name (left as it is when
/// there is none, so `$HOME` stays the shell's), as IPython's `var_expand`.
pub(crate) fn expansion_cell(command: &str) -> String {
    let literal = serde_json::to_string(command).unwrap_or_else(|_| "''".to_owned());
    format!(
        r#"def _anypath_expand(text, names):
    import re, string
    class _Evaluating(string.Formatter):
        def get_field(self, field, args, kwargs):
            try:
                return eval(field, names), field
            except Exception:
                return '{{' + field + '}}', field
    try:
        text = _Evaluating().vformat(text, (), {{}}) if '{{' in text else text
    except Exception:
        pass
    def _name(match):
        name = match.group(1)
        return str(names[name]) if name in names else match.group(0)
    return re.sub(r'(?<!\$)\$([A-Za-z_][A-Za-z0-9_]*)', _name, text).replace('$$', '$')
print(_anypath_expand({literal}, globals()), end='')
del _anypath_expand"#
    )
}

/// Python that assigns the lines of `output` to `name`, as `x = !cmd` does.
pub(crate) fn assignment_cell(name: &str, output: &str) -> String {
    let lines: Vec<&str> = output.lines().collect();
    format!("{name} = {}", serde_json::to_string(&lines).unwrap_or_else(|_| "[]".to_owned()))
}

/// Python that raises what IPython's `%%bash` raises when its script
/// exits with `code`: `CalledProcessError`, naming the script.
pub(crate) fn failed_script_cell(script: &str, code: i32) -> String {
    let script = serde_json::to_string(&format!("{script}\n")).unwrap_or_else(|_| "''".to_owned());
    format!("raise __import__('subprocess').CalledProcessError({code}, {script}.encode())")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shell(command: &str, assign: Option<&str>) -> Segment {
        Segment::Shell { command: command.into(), assign: assign.map(str::to_owned) }
    }

    #[test]
    fn a_cell_without_escapes_runs_as_it_is() {
        assert_eq!(segments("x = 1\nprint(x != 2)\ns = 'a!b'"), None);
        assert_eq!(segments("if x:\n    !ls"), None, "an indented escape stays Python");
    }

    #[test]
    fn escapes_split_the_cell_in_order() {
        let cell = "!pip install numpy\nimport os\nfiles = !ls -1\nprint(files)\n%pip install pandas\n!echo a \\\n  b";
        assert_eq!(
            segments(cell),
            Some(vec![
                shell("pip install numpy", None),
                Segment::Python("import os".into()),
                shell("ls -1", Some("files")),
                Segment::Python("print(files)".into()),
                shell("pip install pandas", None),
                shell("echo a \\\n  b", None),
            ])
        );
    }

    #[test]
    fn a_bash_cell_is_one_script() {
        assert_eq!(segments("%%bash\nfor i in 1 2; do\n  echo $i\ndone"), Some(vec![Segment::Script("for i in 1 2; do\n  echo $i\ndone".into())]));
    }

    #[test]
    fn only_commands_with_braces_or_dollars_are_expanded() {
        assert!(needs_expansion("echo {x}") && needs_expansion("echo $HOME"));
        assert!(!needs_expansion("ls -la"));
        assert_eq!(assignment_cell("out", "a\nb\n"), r#"out = ["a","b"]"#);
    }
}
